//! The QEMU process: finding the program, choosing the accelerator, the command line, and a
//! boot bounded by a timeout (a guest still running past it is killed).
//!
//! The disk is the NBD export through QEMU's built-in NBD client (no host kernel nbd module),
//! `cache=none` (no host page cache between the guest and the export: every write the guest's
//! block layer sends reaches the server, and its flushes become NBD FLUSH) and `discard=unmap`
//! (the guest's discards reach the FTL as NBD TRIM).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::guest::Kernel;
use super::spec::{Accel, VmError};

/// `qemu-system-x86_64` on PATH.
pub fn find_qemu() -> Result<PathBuf, VmError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("qemu-system-x86_64"))
        .find(|p| p.is_file())
        .ok_or(VmError::NoQemu)
}

/// The accelerator that ran, and why it was chosen.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// "kvm" or "tcg".
    pub accel: &'static str,
    pub note: String,
}

/// How long the KVM probe waits for the kernel's first console line. A kernel under KVM prints
/// it well within a second; where /dev/kvm opens but runs no ordinary guest (a PVM-only
/// host), nothing ever comes.
const PROBE_S: u64 = 5;

/// KVM if asked, or (auto) if /dev/kvm opens and a probe boot prints the kernel's first line;
/// else TCG.
pub fn choose(qemu: &Path, kernel: &Kernel, want: Accel) -> Result<Chosen, VmError> {
    let tcg = |note: String| Chosen { accel: "tcg", note };
    if want == Accel::Tcg {
        return Ok(tcg("asked for (--accel tcg)".into()));
    }
    let probe = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(|e| format!("/dev/kvm: {e}"))
        .and_then(|_| probe_kvm(qemu, kernel));
    match (probe, want) {
        (Ok(()), _) => Ok(Chosen {
            accel: "kvm",
            note: "the KVM probe boot printed the kernel's first line".into(),
        }),
        (Err(why), Accel::Kvm) => Err(VmError::KvmUnusable(why)),
        (Err(why), _) => Ok(tcg(format!("KVM unusable: {why}"))),
    }
}

/// Boots the kernel under KVM with no initramfs and its console on a pipe; Ok once the kernel's
/// "Linux version" line arrives, within `PROBE_S`. The probe is killed either way.
fn probe_kvm(qemu: &Path, kernel: &Kernel) -> Result<(), String> {
    let mut child = Command::new(qemu)
        .args([
            "-accel",
            "kvm",
            "-cpu",
            "host",
            "-m",
            "128",
            "-nodefaults",
            "-display",
        ])
        .args(["none", "-no-reboot", "-serial", "stdio", "-kernel"])
        .arg(&kernel.vmlinuz)
        .args(["-append", "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", qemu.display()))?;
    let mut out = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if seen.windows(13).any(|w| w == b"Linux version") {
                let _ = tx.send(());
                return;
            }
        }
    });
    let got = rx.recv_timeout(Duration::from_secs(PROBE_S));
    let _ = child.kill();
    let _ = child.wait();
    got.map_err(|_| format!("no kernel console output in {PROBE_S} s"))
}

/// One boot of the guest.
#[derive(Debug)]
pub struct Boot<'a> {
    pub qemu: &'a Path,
    pub kernel: &'a Kernel,
    pub accel: &'a Chosen,
    pub memory_mib: u32,
    /// The NBD server's unix socket.
    pub socket: &'a Path,
    /// Shared read-write with the guest as tag `job`.
    pub job_dir: &'a Path,
    /// The guest's serial console, written by QEMU.
    pub console: &'a Path,
    /// QEMU's own stderr.
    pub qemu_log: &'a Path,
    pub timeout_s: u64,
    /// The guest's second serial port (`/dev/ttyS1`) connected to this unix socket, where the
    /// host listens (the rounds protocol).
    pub rounds_socket: Option<&'a Path>,
}

/// The last `n` lines of a log file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Boot<'_> {
    fn command(&self) -> Command {
        let mut c = Command::new(self.qemu);
        c.args(["-accel", self.accel.accel]);
        if self.accel.accel == "kvm" {
            c.args(["-cpu", "host"]);
        }
        c.args([
            "-m",
            &self.memory_mib.to_string(),
            "-smp",
            "1",
            "-nodefaults",
        ])
        .args(["-display", "none", "-no-reboot", "-serial"])
        .arg(format!("file:{}", self.console.display()));
        if let Some(s) = self.rounds_socket {
            // The second -serial is the guest's ttyS1; QEMU connects to our listener.
            c.arg("-serial").arg(format!("unix:{}", s.display()));
        }
        c.arg("-kernel")
            .arg(&self.kernel.vmlinuz)
            .arg("-initrd")
            .arg(&self.kernel.initramfs)
            // panic=-1: a panicking guest reboots at once, which -no-reboot turns into an exit.
            .args(["-append", "console=ttyS0 quiet panic=-1"])
            .arg("-drive")
            .arg(format!(
                "file=nbd:unix:{},format=raw,if=virtio,cache=none,discard=unmap",
                self.socket.display()
            ))
            // multidevs=remap: the host's root spans several file systems, whose inode numbers
            // would otherwise collide in the guest.
            .args([
                "-virtfs",
                "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            ])
            .arg("-virtfs")
            .arg(format!(
                "local,path={},mount_tag=job,security_model=none",
                self.job_dir.display()
            ));
        c
    }

    /// Runs the guest to its power-off; the wall seconds it took. A guest still running after
    /// `timeout_s` is killed (`GuestHung`); QEMU failing (say, the NBD connection) is
    /// `QemuFailed` with its stderr.
    pub fn run(&self) -> Result<f64, VmError> {
        let log = std::fs::File::create(self.qemu_log).map_err(|e| VmError::QemuFailed {
            status: format!("cannot create its log {}: {e}", self.qemu_log.display()),
            stderr: String::new(),
        })?;
        let started = Instant::now();
        let mut child: Child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| VmError::QemuFailed {
                status: format!("cannot start {}: {e}", self.qemu.display()),
                stderr: String::new(),
            })?;
        let deadline = started + Duration::from_secs(self.timeout_s);
        loop {
            match child.try_wait() {
                Ok(Some(st)) if st.success() => return Ok(started.elapsed().as_secs_f64()),
                Ok(Some(st)) => {
                    return Err(VmError::QemuFailed {
                        status: st.to_string(),
                        stderr: tail(self.qemu_log, 10),
                    })
                }
                Ok(None) | Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let steps = std::fs::read_to_string(self.job_dir.join("phases"))
                        .unwrap_or_default()
                        .lines()
                        .map(|l| l.split(' ').next().unwrap_or(""))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(VmError::GuestHung {
                        timeout_s: self.timeout_s,
                        // The job writes a step's line when it ends: after "mount" the
                        // command was running.
                        steps_done: if steps.is_empty() {
                            "nothing".into()
                        } else {
                            steps
                        },
                        console_tail: tail(self.console, 15),
                    });
                }
            }
        }
    }
}
