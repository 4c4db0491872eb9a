//! The local executor of `reproduce noftl`: its runs (`jobs::runs`) on `spec.jobs` cores at
//! once, as many as fit the machine's memory, instead of one after another.
//!
//! One after another, each run spread its rows over the cores by itself, except where two of its
//! devices did not fit in memory: the 10 GiB scales ran one row at a time (a device of 10.3 GiB
//! beside a loaded database of 10 GiB), and the whole reproduction kept one of two cores busy on
//! average (29:48 wall for 1,725 CPU seconds, PERFORMANCE section 6). Here each run takes some
//! of the cores (`slots`: its rows at once) and some of the memory (one device per slot, and its
//! loaded database unless that waits in a file, `crate::scratch`: `need_bytes`), and a run
//! starts when both are free: the 1 and 5 GiB scales, TPC-H and Fig. 4 fill the core a 10 GiB
//! scale leaves.
//!
//! Runs are taken largest first (`need_bytes` of one slot), so the long runs start early and the
//! small ones fill in around them. A run is told its share (`Spec::memory_cap_bytes`, its rows
//! at once as `Spec::jobs`); `compare` takes no more rows at once than that share holds. When
//! nothing is running, the next run starts whatever it needs, as it did one after another.
//!
//! Invariants:
//! 1. The result does not depend on the schedule: every run is a function of its spec and job
//!    (virtual time, its own seeds), and `jobs::merge` orders the outputs.
//! 2. The shares of the runs in flight sum to at most the budget (90% of the memory available
//!    when the reproduction started), except for a run started alone.
//! 3. At most `spec.jobs` slots are taken at any time.

use std::sync::{Condvar, Mutex};

use super::jobs::{self, RunJob, RunOutput};
use super::runs;
use super::spec::{Progress, Spec};

const GIB: u64 = 1 << 30;

/// The loaded database's RAM, in tenths of the volume: the bulk-loaded databases of the
/// paper's scales take about 6 (TPC-B 48: 626 MiB of allocated pages on its 1 GiB volume;
/// TPC-B 500: 6.6 GiB of a 10 GiB one, from the memory available before and after its load).
const PROBE_TENTHS: u64 = 7;

/// A run's volume (the device of each of its rows) and its loaded database's bytes
/// (`PROBE_TENTHS` tenths of the volume; none for Fig. 4).
fn volume_and_image_bytes(spec: &Spec, job: &RunJob) -> (u64, u64) {
    let image = |v: u64| v / 10 * PROBE_TENTHS;
    match job {
        RunJob::Oltp { volume_bytes, .. } => (*volume_bytes, image(*volume_bytes)),
        RunJob::Today { volume_bytes, .. } => {
            let v = (*volume_bytes).max(GIB);
            (v, image(v))
        }
        RunJob::Tpch => {
            let v = runs::tpch_volume_bytes(spec.quick);
            (v, image(v))
        }
        RunJob::Fig4 { .. } => (runs::fig4_device_bytes(spec.quick), 0),
    }
}

/// RAM a run needs with `slots` rows at once: a device per row (the volume, its spare blocks and
/// OOB: 10% more at most) and, when `images_in_ram`, its loaded database (in a file otherwise,
/// `crate::scratch`).
pub fn need_bytes(spec: &Spec, job: &RunJob, slots: usize, images_in_ram: bool) -> u64 {
    let (volume, image) = volume_and_image_bytes(spec, job);
    let slots = (slots.max(1) as u64).min(max_slots(job) as u64);
    let image = if images_in_ram { image } else { 0 };
    image + slots * (volume + volume / 10)
}

/// Whether the runs' loaded databases will take RAM: unless the temporary directory is on a
/// disk with room for all of them at once (`crate::scratch`; each run decides again for its own
/// when it loads, so this errs toward RAM).
fn images_in_ram(spec: &Spec, runs: &[RunJob]) -> bool {
    let all: u64 = runs.iter().map(|j| volume_and_image_bytes(spec, j).1).sum();
    matches!(crate::scratch::place(all), crate::scratch::Place::Ram(_))
}

/// Rows a run can spread over (TPC-H and Fig. 4 run their stores one after another).
fn max_slots(job: &RunJob) -> usize {
    match job {
        RunJob::Oltp { .. } | RunJob::Today { .. } => usize::MAX,
        RunJob::Tpch | RunJob::Fig4 { .. } => 1,
    }
}

struct State {
    pending: Vec<RunJob>,
    free_slots: usize,
    free_bytes: u64,
    images_in_ram: bool,
    outputs: Vec<(RunJob, RunOutput)>,
    failed: Option<anyhow::Error>,
}

/// Runs `runs` (module doc) and returns their outputs, in the order they finished.
pub fn run_local(
    spec: &Spec,
    runs: Vec<RunJob>,
    progress: &mut Progress<'_>,
) -> anyhow::Result<Vec<(RunJob, RunOutput)>> {
    let slots = spec.jobs.max(1);
    let budget = crate::limits::memory_budget_bytes().unwrap_or(u64::MAX);
    let in_ram = images_in_ram(spec, &runs);
    let mut pending = runs;
    // Largest first; `pop` takes from the end.
    pending.sort_by_key(|j| need_bytes(spec, j, 1, in_ram));
    let state = Mutex::new(State {
        pending,
        free_slots: slots,
        free_bytes: budget,
        images_in_ram: in_ram,
        outputs: Vec::new(),
        failed: None,
    });
    let changed = Condvar::new();
    let progress = Mutex::new(progress);
    std::thread::scope(|s| {
        for _ in 0..slots {
            s.spawn(|| worker(spec, slots, &state, &changed, &progress));
        }
    });
    let st = state
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a run of the reproduction panicked"))?;
    match st.failed {
        Some(e) => Err(e),
        None => Ok(st.outputs),
    }
}

fn worker(
    spec: &Spec,
    slots: usize,
    state: &Mutex<State>,
    changed: &Condvar,
    progress: &Mutex<&mut Progress<'_>>,
) {
    let lock = || state.lock().unwrap_or_else(|p| p.into_inner());
    let mut st = lock();
    loop {
        if st.pending.is_empty() || st.failed.is_some() {
            changed.notify_all();
            return;
        }
        let Some((i, k, need)) = next_fit(spec, slots, &st) else {
            st = changed.wait(st).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        let job = st.pending.remove(i);
        // A run started alone may need more than is free (invariant 2's exception).
        let took = need.min(st.free_bytes);
        st.free_slots -= k;
        st.free_bytes -= took;
        // Every run in flight holds a slot: all of them free but these, it runs alone.
        let alone = st.free_slots + k == slots;
        drop(st);
        let one = Spec {
            jobs: k,
            // A run started alone takes what it needs, as one after another.
            memory_cap_bytes: (!alone).then_some(need),
            ..spec.clone()
        };
        let mut say = |m: &str| {
            let mut p = progress.lock().unwrap_or_else(|p| p.into_inner());
            (*p)(m)
        };
        let out = jobs::run_one(&one, &job, &mut say);
        st = lock();
        st.free_slots += k;
        st.free_bytes += took;
        match out {
            Ok(o) => st.outputs.push((job, o)),
            Err(e) => {
                st.failed.get_or_insert(e);
            }
        }
        changed.notify_all();
    }
}

/// The pending run to start now, with its slots and its share: the largest that fits the free
/// slots and memory, with as many slots as fit; the largest with what it needs when nothing
/// runs (invariant 2's exception); None to wait.
fn next_fit(spec: &Spec, slots: usize, st: &State) -> Option<(usize, usize, u64)> {
    if st.free_slots == 0 {
        return None;
    }
    for i in (0..st.pending.len()).rev() {
        let job = &st.pending[i];
        let most = st.free_slots.min(max_slots(job));
        if let Some(k) = (1..=most)
            .rev()
            .find(|&k| need_bytes(spec, job, k, st.images_in_ram) <= st.free_bytes)
        {
            return Some((i, k, need_bytes(spec, job, k, st.images_in_ram)));
        }
    }
    if st.free_slots == slots {
        let i = st.pending.len() - 1;
        let job = &st.pending[i];
        let k = slots.min(max_slots(job));
        return Some((i, k, need_bytes(spec, job, k, st.images_in_ram)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oltp(scale: u32, gib: u64) -> RunJob {
        RunJob::Oltp {
            workload: "tpcb".into(),
            scale,
            volume_bytes: gib * GIB,
        }
    }

    fn state(pending: Vec<RunJob>, free_slots: usize, free_bytes: u64) -> State {
        State {
            pending,
            free_slots,
            free_bytes,
            images_in_ram: true,
            outputs: Vec::new(),
            failed: None,
        }
    }

    #[test]
    fn the_largest_run_that_fits_starts_with_the_slots_that_fit() {
        let spec = Spec::default();
        // Sorted as run_local sorts them: the largest last.
        let pending = vec![oltp(48, 1), oltp(200, 5), oltp(500, 10)];
        // 24 GiB free, 2 slots: the 10 GiB scale takes one slot (two devices do not fit).
        let st = state(pending.clone(), 2, 24 * GIB);
        let (i, k, need) = next_fit(&spec, 2, &st).unwrap();
        assert_eq!((i, k), (2, 1));
        assert_eq!(need, 7 * GIB + 11 * GIB);
        // Beside it (3 GiB and a slot left): not the 5 GiB scale, the 1 GiB one.
        let st = state(pending[..2].to_vec(), 1, 3 * GIB);
        assert_eq!(next_fit(&spec, 2, &st).map(|f| (f.0, f.1)), Some((0, 1)));
        // Nothing fits beside a running run: wait.
        let st = state(vec![oltp(200, 5)], 1, 3 * GIB);
        assert!(next_fit(&spec, 2, &st).is_none());
        // Nothing runs: the largest starts whatever it needs.
        let st = state(vec![oltp(500, 10)], 2, GIB);
        assert_eq!(next_fit(&spec, 2, &st).map(|f| (f.0, f.1)), Some((0, 2)));
        // No free slot: wait.
        let st = state(vec![oltp(48, 1)], 0, 24 * GIB);
        assert!(next_fit(&spec, 2, &st).is_none());
        // TPC-H and Fig. 4 run their stores one after another: one slot.
        let st = state(vec![RunJob::Tpch], 2, 24 * GIB);
        assert_eq!(next_fit(&spec, 2, &st).map(|f| f.1), Some(1));
    }

    #[test]
    fn loaded_databases_in_files_leave_their_memory_to_the_devices() {
        let spec = Spec::default();
        let pending = vec![oltp(48, 1), oltp(200, 5), oltp(500, 10)];
        // 20 GiB free: the 10 GiB scale's device alone (11 GiB), and beside it a 5 GiB scale's
        // row (5.5 GiB), which its loaded database in RAM (3.5 GiB more) would not let in.
        let mut st = state(pending.clone(), 2, 20 * GIB);
        st.images_in_ram = false;
        let (i, k, need) = next_fit(&spec, 2, &st).unwrap();
        assert_eq!((i, k, need), (2, 1, 11 * GIB));
        let mut st = state(pending[..2].to_vec(), 1, 8 * GIB);
        st.images_in_ram = false;
        assert_eq!(next_fit(&spec, 2, &st).map(|f| (f.0, f.1)), Some((1, 1)));
        st.images_in_ram = true;
        assert_eq!(next_fit(&spec, 2, &st).map(|f| (f.0, f.1)), Some((0, 1)));
        // Fig. 4 never has a loaded database; TPC-H's counts only in RAM.
        let fig4 = RunJob::Fig4 {
            target: "raw".into(),
        };
        assert_eq!(
            need_bytes(&spec, &fig4, 1, true),
            need_bytes(&spec, &fig4, 1, false)
        );
        assert!(
            need_bytes(&spec, &RunJob::Tpch, 1, true) > need_bytes(&spec, &RunJob::Tpch, 1, false)
        );
    }
}
