//! `vm`: a real Linux file system (ext4, ext3, F2FS, XFS) in a QEMU guest on the emulated
//! SSD. The target is exported by `noftl serve` (a child process, the caller's program), Debian's
//! kernel boots in `qemu-system-x86_64` with the export as its virtio disk (QEMU's NBD client),
//! the guest makes and mounts the file system, runs a command in it and powers off; then the
//! server is stopped (its final flush) and its statistics read.
//!
//! Results are the server's: host and flash counters, WAF, modelled device time. The guest's
//! own timings measure the emulated CPU (TCG here, which runs the guest 10-50x slower than the
//! host) and are reported as such, never as a result (docs/nbd.md, "Kernel file systems in a
//! guest").
//!
//! Order of work: every refusal (spec, export size, QEMU, kernel) before the server starts;
//! the server before QEMU; QEMU bounded by the timeout; the server stopped on every path.

mod counters;
pub mod guest;
mod measure;
pub mod qemu;
pub mod spec;

use std::path::Path;
use std::process::Child;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use counters::counters;
pub use counters::DeviceCounters;
pub use spec::{Accel, Fs, Spec, VmError, FS_NAMES, XFS_MIN_BYTES};

use super::fs_mount::{start_serve, stop};

/// Guest timings: the emulated CPU's speed, not the device's. Not results.
#[derive(Debug, Clone, Serialize)]
pub struct GuestTiming {
    /// "kvm" or "tcg": what these seconds measure.
    pub accelerator: String,
    /// QEMU's start to the guest's power-off, wall-clock seconds.
    pub boot_to_poweroff_s: f64,
    /// The guest's clock when its job started (kernel boot, modules, 9p mounts).
    pub boot_s: f64,
    /// The command alone, in the guest's clock.
    pub command_s: f64,
    pub note: &'static str,
}

/// One guest run.
#[derive(Debug, Clone, Serialize)]
pub struct VmResult {
    pub fs: Fs,
    pub store: String,
    pub export_bytes: u64,
    pub mkfs: bool,
    pub command: Vec<String>,
    pub accelerator: String,
    pub accelerator_note: String,
    pub kernel_version: String,
    /// The command's exit status in the guest.
    pub guest_exit_status: i32,
    pub guest_stdout: String,
    pub guest_stderr: String,
    pub guest_timing: GuestTiming,
    pub device: DeviceCounters,
    /// The server's statistics file, whole (`noftl serve --stats-file`).
    pub server: Value,
    /// The counters at each of the command's round marks (`Spec::max_rounds`), in order.
    pub rounds: Vec<crate::experiments::rounds::Snapshot>,
}

const TIMING_NOTE: &str = "wall-clock time of the emulated guest: it measures the accelerator (TCG: CPU emulation), not the device; not a result";

/// The server child, stopped (SIGTERM: final flush, statistics, exit) when dropped.
struct Server(Option<Child>);

impl Server {
    /// Stops the server and reads the statistics it wrote on the way out.
    fn finish(mut self, stats: &Path) -> anyhow::Result<Value> {
        if let Some(mut c) = self.0.take() {
            stop(&mut c, 60);
        }
        let text = std::fs::read_to_string(stats)
            .with_context(|| format!("the server left no statistics in {}", stats.display()))?;
        Ok(serde_json::from_str(&text)?)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            stop(c, 10);
        }
    }
}

/// Copies the job's output (the guest's $NOFTL_OUT files, stdout, stderr, console and job
/// logs, the job's steps with their status and guest clock) into `out`, created if missing; files of the same names are replaced.
fn copy_out(work: &Path, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("--out {}", out.display()))?;
    let job = work.join("job");
    for (from, to) in [
        (job.join("stdout"), "stdout.txt"),
        (job.join("stderr"), "stderr.txt"),
        (job.join("log"), "job.log"),
        (job.join("phases"), "steps.txt"),
        (work.join("console.log"), "console.log"),
    ] {
        if from.is_file() {
            std::fs::copy(&from, out.join(to))?;
        }
    }
    copy_tree(&job.join("out"), out)
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    for e in std::fs::read_dir(from).with_context(|| from.display().to_string())? {
        let e = e?;
        let dest = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            std::fs::create_dir_all(&dest)?;
            copy_tree(&e.path(), &dest)?;
        } else if e.file_type()?.is_file() {
            std::fs::copy(e.path(), &dest)?;
        }
    }
    Ok(())
}

/// Runs the guest (module doc: the order of work).
pub fn run(spec: &Spec) -> anyhow::Result<VmResult> {
    let cfg = spec.target.run_config()?;
    let export_bytes = spec.target.export_bytes(&cfg)?;
    spec.check(export_bytes)?;
    let qemu_bin = qemu::find_qemu()?;
    let kernel = guest::find_kernel()?;
    let chosen = qemu::choose(&qemu_bin, &kernel, spec.accel)?;

    let work = tempfile::tempdir().context("work directory")?;
    let job = work.path().join("job");
    std::fs::create_dir_all(job.join("out"))?;
    std::fs::write(
        job.join("run.sh"),
        guest::run_script(spec.fs, spec.mkfs, &spec.command),
    )?;
    let (sock, stats) = (work.path().join("nbd.sock"), work.path().join("stats.json"));
    let console = work.path().join("console.log");
    let server = Server(Some(start_serve(
        &spec.noftl,
        &spec.target.cli_args(),
        &sock,
        &stats,
        &spec.clock,
    )?));
    let rounds_sock = work.path().join("rounds.sock");
    let measurer = match spec.max_rounds {
        Some(max) => Some(measure::Measurer::start(
            &rounds_sock,
            measure::ServerView {
                label: spec.label.clone(),
                pid: server.0.as_ref().map_or(0, |c| c.id()),
                stats: stats.clone(),
                dies: cfg.geometry.dies(),
            },
            crate::experiments::rounds::Rule {
                max_rounds: max,
                device_bytes: cfg.geometry.capacity_bytes(),
            },
        )?),
        None => None,
    };
    let booted = qemu::Boot {
        qemu: &qemu_bin,
        kernel: &kernel,
        accel: &chosen,
        memory_mib: spec.memory_mib,
        socket: &sock,
        job_dir: &job,
        console: &console,
        qemu_log: &work.path().join("qemu.log"),
        timeout_s: spec.timeout_s,
        rounds_socket: measurer.as_ref().map(|_| rounds_sock.as_path()),
    }
    .run();
    // QEMU has exited: the measurer's connection is closed.
    let rounds = match measurer {
        Some(m) => m.finish(),
        None => Ok(Vec::new()),
    };
    // The server is stopped whatever the guest did: its final flush makes the image whole.
    let server_stats = server.finish(&stats)?;
    if let Some(out) = &spec.out {
        copy_out(work.path(), out)?;
    }
    let boot_s = booted?;
    let rounds = rounds?;
    let outcome = guest::outcome(&job, || qemu::tail(&console, 15))?;
    Ok(VmResult {
        fs: spec.fs,
        store: spec.target.target.clone(),
        export_bytes,
        mkfs: spec.mkfs,
        command: spec.command.clone(),
        accelerator: chosen.accel.to_string(),
        accelerator_note: chosen.note.clone(),
        kernel_version: kernel.version.clone(),
        guest_exit_status: outcome.status,
        guest_stdout: outcome.stdout,
        guest_stderr: outcome.stderr,
        guest_timing: GuestTiming {
            accelerator: chosen.accel.to_string(),
            boot_to_poweroff_s: boot_s,
            boot_s: outcome.boot_s,
            command_s: outcome.command_s,
            note: TIMING_NOTE,
        },
        device: counters(&server_stats, cfg.geometry.dies()),
        server: server_stats,
        rounds,
    })
}
