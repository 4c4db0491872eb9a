//! What `vm` runs (`Spec`), the kernel file systems and accelerators it knows, and its typed
//! errors. Everything here is checked before anything is started.

use std::path::PathBuf;

use serde::Serialize;

use crate::targets::TargetSpec;

/// The kernel file systems a guest makes and mounts on the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    /// ext4 with its ordered journal (`data=ordered`).
    Ext4,
    /// ext3 (`mkfs.ext3`: no extents, no flex groups), mounted by ext4's driver in ext3 mode.
    Ext3,
    /// Linux F2FS.
    F2fs,
    /// XFS (its mkfs refuses devices of 300 MiB or less).
    Xfs,
}

/// Every `Fs`, as its names.
pub const FS_NAMES: &[&str] = &["ext4", "ext3", "f2fs", "xfs"];

/// mkfs.xfs (xfsprogs 5.19 and later) refuses a file system of less than 300 MiB.
pub const XFS_MIN_BYTES: u64 = 300 << 20;

impl std::str::FromStr for Fs {
    type Err = VmError;
    fn from_str(s: &str) -> Result<Fs, VmError> {
        match s {
            "ext4" => Ok(Fs::Ext4),
            "ext3" => Ok(Fs::Ext3),
            "f2fs" => Ok(Fs::F2fs),
            "xfs" => Ok(Fs::Xfs),
            other => Err(VmError::UnknownFs(other.to_string())),
        }
    }
}

impl Fs {
    pub fn name(self) -> &'static str {
        match self {
            Fs::Ext4 => "ext4",
            Fs::Ext3 => "ext3",
            Fs::F2fs => "f2fs",
            Fs::Xfs => "xfs",
        }
    }

    /// The guest's mkfs command line for /dev/vda (a host program, run in the host's root).
    pub fn mkfs(self) -> &'static str {
        match self {
            // 4 KiB blocks, as on any ext4 over 512 MiB (mkfs picks 1 KiB blocks on small
            // devices, each of which a 4 KiB-page FTL takes as a page rewrite); no discard of
            // the whole device at mkfs, as `fs bench`'s ext4 (fuse2fs) is made.
            Fs::Ext4 => "mkfs.ext4 -F -q -b 4096 -E nodiscard /dev/vda",
            Fs::Ext3 => "mkfs.ext3 -F -q -b 4096 -E nodiscard /dev/vda",
            Fs::F2fs => "mkfs.f2fs -f -q /dev/vda",
            Fs::Xfs => "mkfs.xfs -f -q /dev/vda",
        }
    }

    /// The guest's mount type and options.
    pub fn mount(self) -> (&'static str, &'static str) {
        match self {
            Fs::Ext4 => ("ext4", "data=ordered"),
            Fs::Ext3 => ("ext3", "data=ordered"),
            Fs::F2fs => ("f2fs", "defaults"),
            Fs::Xfs => ("xfs", "defaults"),
        }
    }
}

/// How QEMU runs the guest's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// KVM when /dev/kvm runs the guest (a probe boot prints the kernel's first line), else TCG.
    Auto,
    Kvm,
    Tcg,
}

impl std::str::FromStr for Accel {
    type Err = VmError;
    fn from_str(s: &str) -> Result<Accel, VmError> {
        match s {
            "auto" => Ok(Accel::Auto),
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            other => Err(VmError::UnknownAccel(other.to_string())),
        }
    }
}

/// One guest run: the export, the file system, the command, and the guest's limits.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The noftl program whose `serve` verb exports the target (the CLI passes itself).
    pub noftl: PathBuf,
    pub target: TargetSpec,
    /// `serve`'s `--clock`: real or none.
    pub clock: String,
    pub fs: Fs,
    /// Make the file system (false: mount the one already on `target.image`).
    pub mkfs: bool,
    /// The command the guest runs in the mounted file system's directory.
    pub command: Vec<String>,
    /// Where the guest's files ($NOFTL_OUT), its stdout, stderr and console log are copied.
    pub out: Option<PathBuf>,
    pub accel: Accel,
    /// The whole guest, boot to power-off, wall-clock seconds: past it, QEMU is killed.
    pub timeout_s: u64,
    pub memory_mib: u32,
    /// Steady-state rounds (`experiments::rounds`): the command marks them on the guest's
    /// `/dev/ttyS1`; the host reads the server's counters at each mark and answers until the
    /// rounds are steady or this many have run. None: no second serial port.
    pub max_rounds: Option<u32>,
    /// What progress lines call this guest.
    pub label: String,
}

/// `vm`'s refusals and failures, each naming what to do.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("unknown file system '{0}' (ext4, ext3, f2fs, xfs)")]
    UnknownFs(String),
    #[error("unknown accelerator '{0}' (auto, kvm, tcg)")]
    UnknownAccel(String),
    #[error("no command for the guest: give it after --, e.g. noftl vm --fs ext4 -- fio --name=x --rw=write --size=16m")]
    NoCommand,
    #[error("--no-mkfs mounts the file system already on --image; without --image the device is fresh and holds none")]
    NoMkfsWithoutImage,
    #[error("xfs needs an export over 300 MiB ({min_bytes} bytes); this target exports {export_bytes} bytes: enlarge the device (e.g. --set geometry.blocks_per_plane=N) or lower --op")]
    TooSmallForXfs { export_bytes: u64, min_bytes: u64 },
    #[error("{what} must be between {min} and {max} {unit}; got {got}")]
    OutOfRange {
        what: &'static str,
        got: u64,
        min: u64,
        max: u64,
        unit: &'static str,
    },
    #[error("--out {0} exists and is not a directory")]
    OutNotDir(PathBuf),
    #[error("no qemu-system-x86_64 on PATH: install Debian's qemu-system-x86 (scripts/install-test-deps.sh does)")]
    NoQemu,
    #[error("no guest kernel in {cache}: run scripts/vm-kernel.sh (scripts/install-test-deps.sh calls it) to fetch Debian's kernel and build the initramfs there")]
    NoKernel { cache: PathBuf },
    #[error("--accel kvm: KVM did not run the guest ({0}); use --accel tcg or auto")]
    KvmUnusable(String),
    #[error("the guest did not power off within {timeout_s} s and was killed (raise --timeout if its command needs longer; TCG is slow); its job had done: {steps_done}. Console's last lines:\n{console_tail}")]
    GuestHung {
        timeout_s: u64,
        steps_done: String,
        console_tail: String,
    },
    #[error("qemu-system-x86_64 failed ({status}); its last lines:\n{stderr}")]
    QemuFailed { status: String, stderr: String },
    #[error("the guest powered off without running the job ({reason}). Console's last lines:\n{console_tail}")]
    GuestFailed {
        reason: String,
        console_tail: String,
    },
}

/// The most `--timeout` accepted: a day.
pub const MAX_TIMEOUT_S: u64 = 86_400;

impl Spec {
    /// Refuses bad input before anything is started: the command, the limits, --no-mkfs, and
    /// XFS on an export too small for it (`export_bytes`: the target's, `TargetSpec::export_bytes`).
    pub fn check(&self, export_bytes: u64) -> Result<(), VmError> {
        if self.command.is_empty() {
            return Err(VmError::NoCommand);
        }
        if !self.mkfs && self.target.image.is_none() {
            return Err(VmError::NoMkfsWithoutImage);
        }
        range("--timeout", self.timeout_s, 1, MAX_TIMEOUT_S, "seconds")?;
        // The guest runs host programs (mkfs, fio) from a busybox initramfs in this memory.
        range(
            "--memory-mib",
            u64::from(self.memory_mib),
            128,
            65_536,
            "MiB",
        )?;
        if let Some(out) = self.out.as_deref().filter(|o| o.exists() && !o.is_dir()) {
            return Err(VmError::OutNotDir(out.to_path_buf()));
        }
        if self.fs == Fs::Xfs && export_bytes <= XFS_MIN_BYTES {
            return Err(VmError::TooSmallForXfs {
                export_bytes,
                min_bytes: XFS_MIN_BYTES,
            });
        }
        Ok(())
    }
}

fn range(
    what: &'static str,
    got: u64,
    min: u64,
    max: u64,
    unit: &'static str,
) -> Result<(), VmError> {
    if (min..=max).contains(&got) {
        Ok(())
    } else {
        Err(VmError::OutOfRange {
            what,
            got,
            min,
            max,
            unit,
        })
    }
}
