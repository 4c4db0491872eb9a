//! The guest's side: the kernel cache `scripts/vm-kernel.sh` fills, the job script the guest's
//! /init runs (`/job/run.sh`: mkfs, mount, the command in the host's root, unmount), and what
//! the job leaves in its directory.
//!
//! The guest sees the host's root read-only over 9p at /host and the job directory read-write
//! at /job. Host programs (mkfs.*, fio, sha256sum) are dynamically linked against the host's
//! libraries, so the command runs `chroot /host`, with /dev, /proc, /sys, /tmp and /run mounted
//! fresh over the host's (read-only) directories, the file system under test at
//! /tmp/noftl-fs and the job's output directory at /tmp/noftl-out ($NOFTL_OUT).

use std::path::{Path, PathBuf};

use super::spec::{Fs, VmError};

/// The files `scripts/vm-kernel.sh` leaves in its cache.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub vmlinuz: PathBuf,
    pub initramfs: PathBuf,
    /// e.g. 6.1.0-56-amd64.
    pub version: String,
}

/// The cache directory of `scripts/vm-kernel.sh`: $NOFTL_VM_CACHE, else
/// $XDG_CACHE_HOME/noftl/vm, else ~/.cache/noftl/vm (the script's own rule).
pub fn cache_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("NOFTL_VM_CACHE") {
        return d;
    }
    let base = var("XDG_CACHE_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("noftl").join("vm")
}

/// The kernel in the cache, or `NoKernel` naming the script that fetches it.
pub fn find_kernel() -> Result<Kernel, VmError> {
    let cache = cache_dir();
    let k = Kernel {
        vmlinuz: cache.join("vmlinuz"),
        initramfs: cache.join("initramfs.cpio.gz"),
        version: std::fs::read_to_string(cache.join("kernel-version"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    };
    if k.version.is_empty() || !k.vmlinuz.is_file() || !k.initramfs.is_file() {
        return Err(VmError::NoKernel { cache });
    }
    Ok(k)
}

/// `s` quoted for a POSIX shell: in single quotes, each single quote closed, escaped and
/// reopened.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The guest's mount point and output directory, inside the host's root (the chroot).
pub const FS_DIR: &str = "/tmp/noftl-fs";
pub const OUT_DIR: &str = "/tmp/noftl-out";

/// The job script the guest's /init runs with busybox's sh. Each phase appends to /job/phases
/// (`name status uptime_s`, the first line `boot 0 uptime_s`: the guest's clock when the job
/// started), the command's exit status goes to /job/status, its stdout and stderr to
/// /job/stdout and /job/stderr, the guest's uptime around the command to /job/command_s.
pub fn run_script(fs: Fs, mkfs: bool, command: &[String]) -> String {
    let (fstype, opts) = fs.mount();
    let args: Vec<String> = command.iter().map(|a| quote(a)).collect();
    let mkfs_line = if mkfs {
        format!(
            "phase mkfs chroot /host /bin/sh -c {}",
            quote(&format!("{} >/dev/null", fs.mkfs()))
        )
    } else {
        "echo 'mkfs skipped' >>/job/phases".to_string()
    };
    format!(
        r#"# Written by noftl vm (crates/lab/src/experiments/vm/guest.rs); run by the guest's /init.
export H=/host
echo "boot 0 $(cut -d' ' -f1 /proc/uptime)" >>/job/phases
# Each phase's status is kept; the first failure ends the job (the host reads /job/phases).
phase() {{
  name=$1; shift
  "$@" >>/job/log 2>&1
  st=$?
  echo "$name $st $(cut -d' ' -f1 /proc/uptime)" >>/job/phases
  [ $st -eq 0 ] || {{ echo "noftl-job: $name failed ($st); /job/log has its output"; exit 1; }}
}}
phase mounts sh -c 'mount -t devtmpfs devtmpfs $H/dev && mount -t proc proc $H/proc &&
  mount -t sysfs sysfs $H/sys && mount -t tmpfs tmpfs $H/tmp && mount -t tmpfs tmpfs $H/run &&
  mkdir -p $H{fs_dir} $H{out_dir} /job/out && mount --bind /job/out $H{out_dir}'
{mkfs_line}
phase mount mount -t {fstype} -o {opts} /dev/vda $H{fs_dir}
t0=$(cut -d' ' -f1 /proc/uptime)
chroot $H /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp NOFTL_OUT={out_dir} /bin/sh -c 'cd "$1" && shift && exec "$@"' sh {fs_dir} {args} \
  >/job/stdout 2>/job/stderr </dev/null
echo $? >/job/status
t1=$(cut -d' ' -f1 /proc/uptime)
echo "$t0 $t1" | awk '{{print $2 - $1}}' >/job/command_s
phase umount umount $H{fs_dir}
phase sync sync
"#,
        fs_dir = FS_DIR,
        out_dir = OUT_DIR,
        args = args.join(" "),
    )
}

/// What the job left in its directory.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command's exit status.
    pub status: i32,
    /// Guest seconds around the command (TCG's or KVM's time, not a result).
    pub command_s: f64,
    /// The guest's clock when the job started: kernel boot, modules, 9p mounts (likewise).
    pub boot_s: f64,
    pub stdout: String,
    pub stderr: String,
}

/// Reads the job directory after the guest powered off: every phase must have ended 0 and the
/// command must have left its status, else `GuestFailed` with the phase and its log.
pub fn outcome(job: &Path, console_tail: impl Fn() -> String) -> Result<Outcome, VmError> {
    let read = |name: &str| std::fs::read_to_string(job.join(name)).unwrap_or_default();
    let failed = |reason: String| VmError::GuestFailed {
        reason,
        console_tail: console_tail(),
    };
    let phases = read("phases");
    for line in phases.lines() {
        let mut words = line.split_whitespace();
        if let (Some(name), Some(st)) = (words.next(), words.next()) {
            if st != "0" && st != "skipped" {
                let log = read("log");
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(failed(format!(
                    "its {name} step failed with status {st}: {}",
                    tail.join(" | ")
                )));
            }
        }
    }
    let status = read("status").trim().parse::<i32>().map_err(|_| {
        failed(if phases.is_empty() {
            "the job script never ran: no 9p shares or no /job/run.sh".to_string()
        } else {
            format!(
                "the command left no exit status (phases: {})",
                phases.replace('\n', ", ")
            )
        })
    })?;
    if !phases.lines().any(|l| l.starts_with("umount 0")) {
        return Err(failed(
            "the file system was not unmounted: its last writes may not have reached the export"
                .to_string(),
        ));
    }
    Ok(Outcome {
        status,
        command_s: read("command_s").trim().parse().unwrap_or(f64::NAN),
        boot_s: phases
            .lines()
            .find_map(|l| l.strip_prefix("boot 0 ")?.trim().parse().ok())
            .unwrap_or(f64::NAN),
        stdout: read("stdout"),
        stderr: read("stderr"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_for_the_guest_shell() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        let s = run_script(
            Fs::Ext4,
            true,
            &["sh".into(), "-c".into(), "echo 'x' > y".into()],
        );
        assert!(s.contains(r#"'sh' '-c' 'echo '\''x'\'' > y'"#), "{s}");
        assert!(s.contains("mkfs.ext4"));
        assert!(!run_script(Fs::Xfs, false, &["true".into()]).contains("mkfs.xfs"));
    }

    #[test]
    fn a_failed_phase_or_a_missing_status_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tail = || "console".to_string();
        assert!(matches!(
            outcome(dir.path(), tail),
            Err(VmError::GuestFailed { .. })
        ));
        std::fs::write(dir.path().join("phases"), "mounts 0\nmkfs 1\n").expect("write");
        std::fs::write(dir.path().join("log"), "mkfs.ext4: no such device\n").expect("write");
        let e = outcome(dir.path(), tail).expect_err("mkfs failed");
        assert!(e.to_string().contains("mkfs step failed"), "{e}");
        std::fs::write(
            dir.path().join("phases"),
            "boot 0 4.5\nmounts 0 4.6\nmkfs 0 5\nmount 0 6\numount 0 7\nsync 0 7\n",
        )
        .expect("write");
        std::fs::write(dir.path().join("status"), "3\n").expect("write");
        let o = outcome(dir.path(), tail).expect("ran");
        assert_eq!((o.status, o.boot_s), (3, 4.5));
    }
}
