//! Exclusive advisory locks (`flock`) on the files a run owns: `--image` flash images and
//! `--storage file` databases.
//!
//! Why: two servers on one image both started, wrote through their own copies of the flash
//! state, and corrupted it (A read back wrong data; after a restart A's flushed region read as
//! zeros). Now the second one is refused, with the pid of the process that holds the file.
//!
//! Invariants:
//! 1. A path is locked before it is created, opened, truncated or recovered, and stays locked
//!    until the process ends (the kernel drops the lock then, whatever the exit path).
//! 2. A second lock on the same file from this process succeeds (the run already owns it).
//! 3. The lock is advisory: it keeps out other noftl processes, not other programs.
//! 4. [`holder`] tells who holds a file (this process, or another one) without taking the
//!    lock for longer than a probe: the output rule (`output`) refuses to replace such a file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{flag} {path} is in use by another process{holder}: two processes on one file would corrupt it")]
    Busy {
        flag: &'static str,
        path: PathBuf,
        holder: String,
    },
    #[error("cannot open {flag} {path} to lock it: {source}")]
    Io {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A file this process holds locked.
#[derive(Debug)]
struct Held {
    /// (device, inode)
    key: (u64, u64),
    /// The flag its path came from.
    flag: &'static str,
    /// The open file carrying the lock (closed, and the lock dropped, only at exit).
    _file: File,
}

static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

/// Locks `path` exclusively for the rest of the process, creating it (empty) when missing.
/// `flag` names the option the path came from, for the message.
pub fn hold(path: &Path, flag: &'static str) -> Result<(), LockError> {
    let io = |source| LockError::Io {
        flag,
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let key = (meta.dev(), meta.ino());
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    if held.iter().any(|h| h.key == key) {
        return Ok(()); // invariant 2
    }
    // SAFETY: flock on a valid, open descriptor owned by `file`; no memory is involved.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let holder = holder_pid(meta.dev(), meta.ino())
                .map(|pid| format!(" (pid {pid}{})", command_of(pid)))
                .unwrap_or_default();
            return Err(LockError::Busy {
                flag,
                path: path.to_path_buf(),
                holder,
            });
        }
        return Err(io(e));
    }
    held.push(Held {
        key,
        flag,
        _file: file,
    });
    Ok(())
}

/// Who holds the regular file at `path` (whose metadata is `meta`) locked, in words: this
/// process (an `--image` or `--path` it owns) or another process (with its pid when
/// /proc/locks names it); `None` when nobody does, or when the file cannot be opened to ask.
///
/// Why a probe: `flock` has no query. A shared lock cannot be taken while another open file
/// holds the exclusive one `hold` takes, and is dropped again at once (when the probe's file
/// closes), so a noftl starting at that very instant could only be refused, never corrupted.
pub fn holder(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    let key = (meta.dev(), meta.ino());
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = held.iter().find(|h| h.key == key) {
        return Some(format!("this process (its {})", h.flag));
    }
    drop(held);
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: the caller checked the file is regular, but it may have changed since, and a
    // FIFO must not block the probe.
    let probe = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    // SAFETY: flock on a valid, open descriptor owned by `probe`; no memory is involved.
    let r = unsafe { libc::flock(probe.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if r == 0 {
        return None; // nobody holds it; dropping `probe` releases the shared lock
    }
    let e = std::io::Error::last_os_error();
    (e.raw_os_error() == Some(libc::EWOULDBLOCK)).then(|| match holder_pid(key.0, key.1) {
        Some(pid) => format!("another process (pid {pid}{})", command_of(pid)),
        None => "another process".to_string(),
    })
}

/// The pid holding a `flock` on the file (device, inode), from /proc/locks, whose lines read
/// `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (major:minor in hex, inode in decimal).
fn holder_pid(dev: u64, ino: u64) -> Option<u32> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Blocked waiters are listed with "->" and shift the fields; skip them.
        (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&want.as_str()))
            .then(|| f.get(4)?.parse().ok())
            .flatten()
    })
}

fn command_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| format!(", {}", c.trim()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_locked_elsewhere_is_refused_with_the_holder() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("img");
        // Another open file description stands for another process (flock is per description).
        let other = File::create(&p).expect("create");
        // SAFETY: as in `hold`.
        assert_eq!(
            unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        let e = hold(&p, "--image").expect_err("busy");
        let msg = e.to_string();
        assert!(msg.contains("in use by another process"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(other);
        hold(&p, "--image").expect("free now");
        hold(&p, "--image").expect("held by this process already");
    }

    #[test]
    fn the_holder_of_a_file_is_this_process_another_one_or_nobody() {
        let d = tempfile::tempdir().expect("tempdir");
        let free = d.path().join("free");
        std::fs::write(&free, b"x").expect("write");
        let meta = |p: &Path| std::fs::metadata(p).expect("meta");
        assert_eq!(holder(&free, &meta(&free)), None);
        let other = d.path().join("other");
        let f = File::create(&other).expect("create");
        // SAFETY: as in `hold`.
        assert_eq!(
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        let h = holder(&other, &meta(&other)).expect("held");
        assert!(h.starts_with("another process"), "{h}");
        let mine = d.path().join("mine");
        hold(&mine, "--image").expect("hold");
        let h = holder(&mine, &meta(&mine)).expect("held");
        assert_eq!(h, "this process (its --image)");
        // The probe took no lock that stays: the file is still free to lock.
        drop(f);
        assert_eq!(holder(&free, &meta(&free)), None);
        hold(&free, "--path").expect("still free");
    }
}
