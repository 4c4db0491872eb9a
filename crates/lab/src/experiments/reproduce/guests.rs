//! What the reproductions with kernel file systems in a QEMU guest share (`amf`, `dfs`): the
//! refusals before any boot (the program the guest runs, QEMU, the kernel), the accelerator
//! probed once, one guest run that must exit 0, and the guest runs of a table on a few threads.
//!
//! Every guest is `vm::run`: `noftl serve` exports a fresh emulated device, the guest makes and
//! mounts the file system on it, runs this program's hidden workload verb in the mount and
//! powers off; the server's counters at shutdown are the run's results.

use anyhow::bail;

use crate::device::DeviceSpec;
use crate::experiments::vm::{self, Accel, Fs};
use crate::targets::{FtlKnobs, TargetSpec};

use super::spec::Spec;

/// The guest machinery, checked and probed once for a whole table.
pub(super) struct Guests {
    pub kernel: vm::guest::Kernel,
    /// The accelerator every guest of the table uses.
    pub accel: Accel,
    /// What the probe chose and why ("tcg (...)").
    pub accelerator: String,
}

/// Refuses what would fail every boot (`paper` names the verb in the messages): a program the
/// guest cannot see, no QEMU, no kernel; then probes the accelerator once (a KVM probe boot per
/// guest would cost seconds each).
pub(super) fn prepare(paper: &str, spec: &Spec) -> anyhow::Result<Guests> {
    // The guest runs this program from the host's root, over which it mounts its own /tmp,
    // /run, /dev, /proc and /sys (`vm::guest`): a program under them is not there.
    let exe = std::fs::canonicalize(&spec.noftl).unwrap_or_else(|_| spec.noftl.clone());
    if ["/tmp", "/run", "/dev", "/proc", "/sys"]
        .iter()
        .any(|d| exe.starts_with(d))
    {
        bail!(
            "reproduce {paper}: the guest cannot run {} (the guest mounts its own /tmp, /run, /dev, /proc and /sys over the host's): run a noftl program kept elsewhere",
            exe.display()
        );
    }
    let qemu = vm::qemu::find_qemu()?;
    let kernel = vm::guest::find_kernel()?;
    let chosen = vm::qemu::choose(&qemu, &kernel, Accel::Auto)?;
    let accel = if chosen.accel == "kvm" {
        Accel::Kvm
    } else {
        Accel::Tcg
    };
    Ok(Guests {
        kernel,
        accel,
        accelerator: format!("{} ({})", chosen.accel, chosen.note),
    })
}

/// One guest on a fresh `device` under `target`: `fs` made and mounted, `command` run in it.
pub(super) fn vm_spec(
    spec: &Spec,
    (device, timeout_s): (&DeviceSpec, u64),
    accel: Accel,
    (fs, target): (Fs, &str),
    command: Vec<String>,
) -> vm::Spec {
    vm::Spec {
        noftl: spec.noftl.clone(),
        target: TargetSpec {
            target: target.to_string(),
            device: device.clone(),
            knobs: FtlKnobs::default(),
            image: None,
        },
        // Counters and modelled time do not need the wall clock to wait.
        clock: "none".into(),
        fs,
        mkfs: true,
        command,
        out: None,
        accel,
        timeout_s,
        memory_mib: 512,
    }
}

/// One guest run; fails unless the command exited 0.
pub(super) fn guest(s: &vm::Spec) -> anyhow::Result<vm::VmResult> {
    let r = vm::run(s)?;
    if r.guest_exit_status != 0 {
        bail!(
            "{} on {}: the guest's command {:?} exited with status {}: {}",
            s.fs.name(),
            s.target.target,
            s.command,
            r.guest_exit_status,
            r.guest_stderr.trim()
        );
    }
    Ok(r)
}

/// Runs `items` on `jobs` threads; results in the items' order.
pub(super) fn parallel<T: Sync, R: Send>(
    jobs: usize,
    items: &[T],
    f: impl Fn(&T) -> anyhow::Result<R> + Sync,
) -> Vec<anyhow::Result<R>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Vec<std::sync::Mutex<Option<anyhow::Result<R>>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *out[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    out.into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Err(anyhow::anyhow!("not run")))
        })
        .collect()
}

/// Runs the guests `specs` (named `names` in the progress lines) on `jobs` threads, a line per
/// guest done; results in order.
pub(super) fn run_all(
    paper: &str,
    jobs: usize,
    specs: &[(String, vm::Spec)],
) -> Vec<anyhow::Result<vm::VmResult>> {
    let done = std::sync::Mutex::new(0usize);
    parallel(jobs, specs, |(what, s)| {
        let r = guest(s).map_err(|e| e.context(what.clone()))?;
        let mut n = done.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        crate::progress::note(&format!(
            "reproduce {paper}: {what} done ({} of {}; guest {:.0} s, TCG time)",
            *n,
            specs.len(),
            r.guest_timing.boot_to_poweroff_s
        ));
        Ok(r)
    })
}
