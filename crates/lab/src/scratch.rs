//! Where a loaded database waits for its copies: an unlinked file in the temporary directory
//! (`TMPDIR`, else /tmp) when that directory is on a disk with room, RAM otherwise.
//!
//! `compare` and `reproduce` load a database once and copy it page by page onto every row's
//! device (`compare::rig::Probe`). Held in RAM, that image sat beside every device for the whole
//! scale: at the paper's 10 GiB scales 6.6 GiB of loaded TPC-B next to a 10.3 GiB device, so on
//! a 24 GiB machine only the 1 GiB runs fitted beside such a scale, and on a 16 GiB one the
//! scale did not fit at all. In a file, the image is page cache: the kernel keeps what it can
//! and drops the rest, and the copies read it back in order (pages ascending), which its
//! read-ahead serves at disk speed.
//!
//! Invariants:
//! 1. A RAM file system (tmpfs, ramfs) never holds the image: there it would take the same RAM
//!    and hide it from the memory estimates, so the image stays in the process's RAM instead.
//! 2. A file is used only when its file system has the image's estimated size free, plus a
//!    margin (`MARGIN_BYTES`); the file is unlinked at creation, so no run, killed or not,
//!    leaves it behind.
//! 3. Where the image lives changes no result: the same pages are written and read back in
//!    the same order, and neither store charges virtual time (completion at submit).

use std::fs::File;
use std::path::{Path, PathBuf};

/// Room left on the scratch file system beside the image (other writers, the image's growth
/// beyond its estimate).
pub const MARGIN_BYTES: u64 = 1 << 30;

/// `statfs` magic numbers of the RAM file systems (linux/magic.h).
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// Where a loaded image of about `need_bytes` goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// An unlinked file in this directory.
    Disk(PathBuf),
    /// The process's RAM, and why not a file.
    Ram(String),
}

/// The temporary directory's verdict for an image of `need_bytes` (invariants 1 and 2).
pub fn place(need_bytes: u64) -> Place {
    let dir = std::env::temp_dir();
    match fs_stats(&dir) {
        Ok((kind, free_bytes)) => decide(dir, kind, free_bytes, need_bytes),
        Err(e) => Place::Ram(format!("{} cannot be examined: {e}", dir.display())),
    }
}

/// The pure rule behind `place`.
fn decide(dir: PathBuf, fs_kind: i64, free_bytes: u64, need_bytes: u64) -> Place {
    if fs_kind == TMPFS_MAGIC || fs_kind == RAMFS_MAGIC {
        return Place::Ram(format!("{} is a RAM file system", dir.display()));
    }
    if free_bytes < need_bytes.saturating_add(MARGIN_BYTES) {
        return Place::Ram(format!(
            "{} has {:.1} GiB free, the loaded database needs about {:.1} GiB",
            dir.display(),
            free_bytes as f64 / f64::from(1u32 << 30),
            need_bytes as f64 / f64::from(1u32 << 30)
        ));
    }
    Place::Disk(dir)
}

/// Where an image of about `need_bytes` was put: an unlinked file (and the directory it is in),
/// or RAM (and why).
#[derive(Debug)]
pub enum Image {
    File(File, PathBuf),
    Ram(String),
}

impl Image {
    /// For progress lines: "in an unlinked file in /tmp", "in RAM (/tmp is a RAM file system)".
    pub fn describe(&self) -> String {
        match self {
            Image::File(_, dir) => Self::describe_file(dir),
            Image::Ram(why) => format!("in RAM ({why})"),
        }
    }
    /// `describe` of a file in `dir`.
    pub fn describe_file(dir: &Path) -> String {
        format!("in an unlinked file in {}", dir.display())
    }
}

/// An unlinked file for an image of about `need_bytes`, or RAM where `place` says so or the
/// file cannot be made (the run goes on as it did before files: an image is never the reason a
/// run fails).
pub fn image(need_bytes: u64) -> Image {
    match place(need_bytes) {
        Place::Disk(dir) => match tempfile::tempfile_in(&dir) {
            Ok(f) => Image::File(f, dir),
            Err(e) => Image::Ram(format!("no file could be made in {}: {e}", dir.display())),
        },
        Place::Ram(why) => Image::Ram(why),
    }
}

/// The bytes free to an unprivileged writer on `dir`'s file system (`statvfs`'s `f_bavail` in
/// fragments): what `fs waf` and the image's room are judged by.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    fs_stats(dir).map(|(_, free)| free)
}

/// The file system's kind (`f_type`) and `free_bytes`, from one `statfs`.
fn fs_stats(dir: &Path) -> std::io::Result<(i64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statfs reads a NUL-terminated path and writes one statfs struct into a zeroed
    // local that lives across the call.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // As statvfs: the fragment size, or the block size where the file system gives none.
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    let unit = if s.f_frsize > 0 {
        s.f_frsize as u64
    } else {
        s.f_bsize as u64
    };
    #[allow(clippy::unnecessary_cast)]
    Ok((s.f_type as i64, (s.f_bavail as u64).saturating_mul(unit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_file_systems_and_full_disks_keep_the_image_in_ram() {
        let dir = PathBuf::from("/t");
        let gib = 1u64 << 30;
        assert_eq!(
            decide(dir.clone(), 0xEF53, 20 * gib, 7 * gib),
            Place::Disk(dir.clone())
        );
        assert!(
            matches!(decide(dir.clone(), TMPFS_MAGIC, 20 * gib, gib), Place::Ram(w) if w.contains("RAM file system"))
        );
        assert!(matches!(
            decide(dir.clone(), RAMFS_MAGIC, 20 * gib, gib),
            Place::Ram(_)
        ));
        // The margin counts: 7 GiB free is not enough for 6.5 GiB.
        assert!(
            matches!(decide(dir, 0xEF53, 7 * gib, 6 * gib + gib / 2), Place::Ram(w) if w.contains("7.0 GiB free"))
        );
    }

    #[test]
    fn the_temporary_directory_gets_a_verdict() {
        // Whatever this machine's /tmp is, asking never fails and a file, when offered, is
        // writable and already unlinked (nothing to clean up).
        if let Image::File(f, _) = image(1 << 20) {
            use std::os::unix::fs::FileExt;
            f.write_all_at(b"x", 0).expect("write");
            let mut b = [0u8; 1];
            f.read_exact_at(&mut b, 0).expect("read");
            assert_eq!(&b, b"x");
        }
    }
}
