//! The runner: terminals driven in virtual time (deterministic, `storage::sched`) or real time
//! (one thread each), with the store's counters marked at every sample window for result
//! directories and live views; and the result directory of a run.

use anyhow::bail;
use serde::Serialize;
use storage::sched::{run_real, run_virtual_sampled, Sampler, SchedStats, VirtualOptions};
use storage::Engine;

use crate::steady::{self, Round, Rounds, Writes};

/// What `run_terminals` returns: the engine, the terminals, the virtual time run, the group
/// commit forces and the marks.
pub type Ran<T> = (Engine, Vec<T>, u64, u64, Vec<crate::results::Mark>);

/// Runs the terminals from `start_ns` in virtual time (until `until`, if given) or in real time
/// (one thread each); returns the engine, the terminals, the virtual time run, the group
/// commit forces and, with `sample_ns` (result directories), the marks of the store's counters
/// at the window's start, every `sample_ns` and its end.
pub fn run_terminals<T: storage::sched::Terminal + Send + 'static>(
    mut e: Engine,
    mut terms: Vec<T>,
    start_ns: u64,
    until: Option<u64>,
    virtual_clock: bool,
    sample_ns: Option<u64>,
) -> anyhow::Result<Ran<T>> {
    if virtual_clock {
        let (st, marks) = run_virtual_marked(
            &mut e,
            &mut terms,
            start_ns,
            VirtualOptions {
                until_ns: until.map(|u| start_ns + u),
                ..VirtualOptions::default()
            },
            sample_ns,
        )?;
        Ok((e, terms, st.elapsed_ns(), st.group_forces, marks))
    } else {
        if until.is_some() {
            bail!("--clock real runs --txns N (a duration needs the virtual clock for now)");
        }
        if sample_ns.is_some() {
            bail!("--results samples virtual time: it needs --clock virtual");
        }
        let (e, terms) = run_real(e, terms)?;
        Ok((e, terms, 0, 0, Vec::new()))
    }
}

/// The steady-state rule's rounds (`steady`) on an engine: `round(e, k)` runs round k and
/// returns the transactions it counted; the virtual time and the flash programs around each call
/// give the round's throughput and write amplification. Every verb that drives an engine's
/// terminals measures its rounds here.
pub fn engine_rounds(
    e: &mut Engine,
    max_rounds: u32,
    mut round: impl FnMut(&mut Engine, u32) -> anyhow::Result<u64>,
) -> anyhow::Result<Rounds> {
    steady::until_steady(max_rounds, |k| {
        let (t0, w0) = (e.now(), Writes::of(e.store().nand()));
        let counted = round(e, k)?;
        let secs = e.now().saturating_sub(t0) as f64 / 1e9;
        Ok(Round {
            throughput: if secs > 0.0 {
                counted as f64 / secs
            } else {
                0.0
            },
            waf: Writes::of(e.store().nand()).since(&w0).waf(),
        })
    })
}

/// Terminals run for `round_ns` of virtual time per round (`engine_rounds`) until steady or
/// `max_rounds`; `done` counts the terminals' transactions so far.
pub fn terminal_rounds<T: storage::sched::Terminal>(
    e: &mut Engine,
    terms: &mut [T],
    round_ns: u64,
    max_rounds: u32,
    done: impl Fn(&[T]) -> u64,
) -> anyhow::Result<Rounds> {
    engine_rounds(e, max_rounds, |e, _| {
        let (start, d0) = (e.now(), done(terms));
        let opts = VirtualOptions {
            until_ns: Some(start + round_ns),
            ..VirtualOptions::default()
        };
        run_virtual_sampled(e, terms, start, opts, None)?;
        Ok(done(terms) - d0)
    })
}

/// Terminals run in slices of `slice_ns` until the host has written the device over
/// `device_writes` times since it was formatted (load included), or `max_ns` of virtual time
/// passed: the preconditioning before the rounds (SSS PTS preconditions a drive before its test
/// rounds; a fresh device's free blocks would otherwise look like a steady state without GC).
pub fn precondition_terminals<T: storage::sched::Terminal>(
    e: &mut Engine,
    terms: &mut [T],
    device_writes: f64,
    slice_ns: u64,
    max_ns: u64,
) -> anyhow::Result<()> {
    let start = e.now();
    while Writes::device_writes_of(e.store().nand()) < device_writes && e.now() - start < max_ns {
        let now = e.now();
        let opts = VirtualOptions {
            until_ns: Some(now + slice_ns),
            ..VirtualOptions::default()
        };
        run_virtual_sampled(e, terms, now, opts, None)?;
    }
    Ok(())
}

/// `run_virtual`, with the store's marks every `sample_ns` (none without it) and at the end.
pub fn run_virtual_marked<T: storage::sched::Terminal>(
    e: &mut Engine,
    terms: &mut [T],
    start_ns: u64,
    opts: VirtualOptions,
    sample_ns: Option<u64>,
) -> anyhow::Result<(SchedStats, Vec<crate::results::Mark>)> {
    let mut marks = Vec::new();
    let st = match sample_ns {
        None => run_virtual_sampled(e, terms, start_ns, opts, None)?,
        Some(w) => {
            // The last device request a live point showed (the dashboard's request table).
            let mut shown_seq = 0;
            let mut on = |t: u64, eng: &Engine| {
                let m = crate::results::mark_store(t, eng.store());
                let t0 = marks.first().map_or(t, |f: &crate::results::Mark| f.t_ns);
                crate::results::live(|| {
                    let (requests, seq) =
                        crate::results::recent_requests(eng.store().nand(), t0, shown_seq);
                    shown_seq = seq;
                    crate::results::LivePoint {
                        requests,
                        series: String::new(),
                        t_s: (t - t0) as f64 / 1e9,
                        commits: eng.stats().commits,
                        aborts: eng.stats().aborts,
                        flash_reads: m.flash_reads,
                        flash_programs: m.flash_programs,
                        flash_erases: m.flash_erases,
                        gc_migrations: m.gc_migrations,
                        free_blocks: m.free_blocks,
                    }
                });
                marks.push(m);
            };
            let mut s = Sampler {
                window_ns: w,
                on_sample: &mut on,
            };
            let st = run_virtual_sampled(e, terms, start_ns, opts, Some(&mut s))?;
            marks.push(crate::results::mark_store(st.end_ns, e.store()));
            st
        }
    };
    Ok((st, marks))
}

/// Writes a bench verb's result directory (`results::write_dir`): `res` with BenchBase's names
/// as summary.json, over `seconds` of measured time; the per-window files and (with --raw) the
/// raw rows of the one trace, each terminal a worker.
#[allow(clippy::too_many_arguments)]
pub fn write_results(
    plan: &crate::results::Plan,
    res: &impl Serialize,
    workload: &str,
    scale: f64,
    terminals: u32,
    seconds: f64,
    trace: crate::results::Trace,
    types: &[&str],
    device: &crate::device::DeviceSpec,
) -> anyhow::Result<()> {
    use crate::results as r;
    let top = r::benchbase(&trace.events, (seconds * 1e9).round() as u64);
    let scale = scale.to_string();
    let c = r::Contents {
        bench: workload,
        scalefactor: Some(&scale),
        terminals: Some(terminals),
        isolation: Some(r::ENGINE_ISOLATION),
        traces: std::slice::from_ref(&trace),
        label_cols: &[],
        types,
        unit: r::Unit::Txn,
        device: device
            .load()
            .ok()
            .and_then(|d| serde_json::to_value(d).ok()),
    };
    r::write_dir(plan, res, &c, Some(top), &[])
}

/// `f(i)` for every `i < n` on `jobs` worker threads (at least one), each taking the next
/// index not yet taken; the results in index order (so they do not depend on the thread
/// count). Independent runs of a sweep or a table use it (iaa, iaa ablation, the guests of
/// `reproduce`).
pub(crate) fn on_workers<T: Send>(
    jobs: usize,
    n: usize,
    f: &(dyn Fn(usize) -> T + Sync),
) -> Vec<T> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= n {
                    break;
                }
                let r = f(i);
                results.lock().expect("no worker panics").push((i, r));
            });
        }
    });
    let mut results = results.into_inner().expect("no worker panics");
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}
