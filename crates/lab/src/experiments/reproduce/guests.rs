//! What the reproductions with kernel file systems in a QEMU guest share (`amf`, `dfs`): the
//! refusals before any boot (the program the guest runs, QEMU, the kernel), the accelerator
//! probed once, one guest run that must exit 0, the guest runs of a table on a few threads, and
//! the write path's bounds on a run's server counters.
//!
//! Every guest is `vm::run`: `noftl serve` exports a fresh emulated device, the guest makes and
//! mounts the file system on it, runs this program's hidden workload verb in the mount and
//! powers off; the server's counters at shutdown are the run's results.

use anyhow::bail;

use storage::measure::{check_writes, Consistency, Writes};

use crate::device::DeviceSpec;
use crate::experiments::vm::{self, Accel, DeviceCounters, Fs};
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
        max_rounds: None,
        label: String::new(),
    }
}

/// One guest run; fails unless the command exited 0.
pub(super) fn guest(s: &vm::Spec) -> anyhow::Result<vm::VmResult> {
    let r = vm::run(s)?;
    if r.guest_exit_status != 0 {
        // The program by its name: its path is this host's, and the message goes into result
        // files that are published.
        let mut command = s.command.clone();
        if let Some(p) = command.first_mut() {
            if let Some(name) = std::path::Path::new(p.as_str()).file_name() {
                *p = name.to_string_lossy().into_owned();
            }
        }
        bail!(
            "{} on {}: the guest's command {:?} exited with status {}: {}",
            s.fs.name(),
            s.target.target,
            command,
            r.guest_exit_status,
            r.guest_stderr.trim()
        );
    }
    Ok(r)
}

/// Runs the guests `specs` (named `names` in the progress lines) on `jobs` threads, a line per
/// guest done; results in order.
pub(super) fn run_all(
    paper: &str,
    jobs: usize,
    specs: &[(String, vm::Spec)],
) -> Vec<anyhow::Result<vm::VmResult>> {
    let done = std::sync::Mutex::new(0usize);
    crate::runner::on_workers(jobs, specs.len(), &|i| {
        let (what, s) = &specs[i];
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

/// The write path's bounds (`storage::measure::check_writes`) on a guest run's server counters
/// `r`: the file system wrote `fs_bytes` to the export (the run less its baseline) for the
/// workload's `app_bytes`, which must all reach the device when `app_bytes_reach_device`.
pub(super) fn check_server_writes(
    app_bytes: u64,
    app_bytes_reach_device: bool,
    fs_bytes: u64,
    r: &DeviceCounters,
) -> Consistency {
    let page = ftl::LOGICAL_PAGE_BYTES as u64;
    check_writes(Writes {
        app_bytes,
        fs_received_bytes: None,
        app_bytes_reach_device,
        fs_bytes,
        host_bytes_total: r.host_write_pages * page,
        fs_counted_bytes_total: Some(r.host_write_bytes),
        ftl_claimed_bytes_total: (r.waf.as_f64().unwrap_or(0.0)
            * (r.host_write_pages * page) as f64)
            .round() as u64,
        flash_bytes_total: r.flash_bytes_programmed,
    })
}
