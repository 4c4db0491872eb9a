//! `fsmount`: mounting the project's file systems with FUSE (the `fuser` crate, no libfuse: the
//! kernel protocol directly, `fusermount3` for the mount itself). `noftl mount` is its command
//! line.
//!
//! One adapter for every file system: a file system implements [`PosixFs`] (inode numbers,
//! byte names, errno errors) and [`serve`] mounts it, runs until SIGINT/SIGTERM or an external
//! `fusermount3 -u`, unmounts, and hands the file system back for a clean shutdown. DFS is the
//! first user (`dfs_fs.rs`); the log-structured file system (`lfs_fs.rs`, f2fs and alfs modes)
//! the second.
//!
//! Layers, bottom up (each module imports only modules listed before it):
//! - the crate root: [`PosixFs`] and its types, the FUSE adapter, [`serve`];
//! - [`dfs_fs`] ([`dfs_fs::DfsPosix`]), [`lfs_fs`] ([`lfs_fs::LfsPosix`]): one file system each.

pub mod dfs_fs;
pub mod lfs_fs;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use fuser::{
    FileAttr, FileType, Filesystem, MountOption, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};

/// An errno.
pub type Errno = i32;

/// Kinds of files the adapter passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// Attributes of an inode.
#[derive(Clone, Copy, Debug)]
pub struct Attr {
    pub ino: u64,
    pub size: u64,
    /// 512-byte sectors that hold data.
    pub sectors: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub kind: Kind,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
}

/// What `setattr` asks to change: the file-system layer's own type, so that a file system takes
/// it as the mount hands it over.
pub use dfs::fs::SetAttr as AttrChange;

/// File-system totals for statfs.
#[derive(Clone, Copy, Debug)]
pub struct Totals {
    pub block_bytes: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_max: u32,
}

/// What a file system offers the FUSE adapter. Inode 1 is the root.
pub trait PosixFs: Send + 'static {
    fn lookup(&mut self, parent: u64, name: &[u8]) -> Result<Attr, Errno>;
    fn getattr(&mut self, ino: u64) -> Result<Attr, Errno>;
    fn setattr(&mut self, ino: u64, change: AttrChange) -> Result<Attr, Errno>;
    /// A regular file (`mode` with S_IFREG) or a directory (S_IFDIR).
    fn make(
        &mut self,
        parent: u64,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno>;
    fn symlink(
        &mut self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno>;
    fn readlink(&mut self, ino: u64) -> Result<Vec<u8>, Errno>;
    fn link(&mut self, ino: u64, parent: u64, name: &[u8]) -> Result<Attr, Errno>;
    fn unlink(&mut self, parent: u64, name: &[u8]) -> Result<(), Errno>;
    fn rmdir(&mut self, parent: u64, name: &[u8]) -> Result<(), Errno>;
    fn rename(
        &mut self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
    ) -> Result<(), Errno>;
    fn open(&mut self, ino: u64) -> Result<(), Errno>;
    fn release(&mut self, ino: u64) -> Result<(), Errno>;
    fn read(&mut self, ino: u64, off: u64, buf: &mut [u8]) -> Result<usize, Errno>;
    fn write(&mut self, ino: u64, off: u64, data: &[u8]) -> Result<usize, Errno>;
    /// Entries from position `pos`: (next position, inode, kind, name).
    fn readdir(
        &mut self,
        ino: u64,
        pos: u64,
        out: &mut Vec<(u64, u64, Kind, Vec<u8>)>,
    ) -> Result<(), Errno>;
    fn fsync(&mut self, ino: u64) -> Result<(), Errno>;
    fn statfs(&mut self) -> Totals;
    /// The wall-clock instant at which the last request completes on the device (`--clock
    /// real`), or `None` to reply at once. The adapter replies then, without holding the file
    /// system, so that requests from several threads overlap on the device as they would on
    /// hardware.
    fn completion(&self) -> Option<Instant>;
}

/// The wall clock in nanoseconds since the epoch (file timestamps).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}

/// The kind of a file from its mode bits.
pub fn kind_of(mode: u32) -> Kind {
    match mode & 0o170_000 {
        0o040_000 => Kind::Dir,
        0o120_000 => Kind::Symlink,
        _ => Kind::File,
    }
}

/// Attributes from an inode's fields (`mapped_blocks` of 4 KiB); a directory has at least one
/// link.
#[allow(clippy::too_many_arguments)]
pub fn attr_from(
    ino: u64,
    mode: u32,
    nlink: u32,
    uid: u32,
    gid: u32,
    size: u64,
    times_ns: [i64; 3],
    mapped_blocks: u64,
) -> Attr {
    let kind = kind_of(mode);
    Attr {
        ino,
        size,
        sectors: mapped_blocks * 8,
        atime_ns: times_ns[0],
        mtime_ns: times_ns[1],
        ctime_ns: times_ns[2],
        kind,
        perm: (mode & 0o7777) as u16,
        nlink: nlink.max(u32::from(kind == Kind::Dir)),
        uid,
        gid,
    }
}

const TTL: Duration = Duration::from_secs(1);
const EINVAL: i32 = 22;

fn time_of(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH
    }
}

fn ns_of(t: TimeOrNow) -> i64 {
    let st = match t {
        TimeOrNow::SpecificTime(s) => s,
        TimeOrNow::Now => SystemTime::now(),
    };
    st.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: a.ino,
        size: a.size,
        blocks: a.sectors,
        atime: time_of(a.atime_ns),
        mtime: time_of(a.mtime_ns),
        ctime: time_of(a.ctime_ns),
        crtime: time_of(a.ctime_ns),
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn file_type(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
    }
}

/// The FUSE side of a [`PosixFs`], shared with the thread that unmounts it.
#[derive(Debug)]
pub struct Adapter<F: PosixFs> {
    fs: Arc<Mutex<F>>,
    entries: Vec<(u64, u64, Kind, Vec<u8>)>,
    waiter: Arc<Waiter>,
}

type Job = Box<dyn FnOnce() + Send>;

/// Replies held until their request's modelled completion on the wall clock.
#[derive(Default)]
pub struct Waiter {
    jobs: Mutex<(Vec<(Instant, Job)>, bool)>,
    wake: Condvar,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waiter")
    }
}

impl Waiter {
    fn push(&self, at: Instant, job: Job) {
        let mut g = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        g.0.push((at, job));
        self.wake.notify_one();
    }

    /// Runs held replies at their instants until `stop`, then the rest at once.
    fn run(&self) {
        let mut g = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let stopping = g.1;
            let now = Instant::now();
            let due =
                g.0.iter()
                    .enumerate()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(i, (at, _))| (i, *at));
            match due {
                Some((i, at)) if at <= now || stopping => {
                    let (_, job) = g.0.swap_remove(i);
                    drop(g);
                    job();
                    g = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
                }
                Some((_, at)) => {
                    // No spinning: on a loaded machine a spinning reply thread takes the CPU
                    // from the session thread; the cost is the timer slack (~50 us) per reply.
                    g = self
                        .wake
                        .wait_timeout(g, at - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                None if stopping => return,
                None => g = self.wake.wait(g).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    fn stop(&self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.wake.notify_all();
    }
}

impl<F: PosixFs> Adapter<F> {
    /// Runs `f` on the file system; returns its result and when to reply.
    fn with<T>(&self, f: impl FnOnce(&mut F) -> T) -> (T, Option<Instant>) {
        let mut g = match self.fs.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let r = f(&mut g);
        (r, g.completion())
    }

    /// Replies now, or at `at` through the waiter.
    fn reply_at(&self, at: Option<Instant>, job: impl FnOnce() + Send + 'static) {
        match at {
            Some(t) if t > Instant::now() => self.waiter.push(t, Box::new(job)),
            _ => job(),
        }
    }
}

impl<F: PosixFs + std::fmt::Debug> Filesystem for Adapter<F> {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let (r, at) = self.with(|fs| fs.lookup(parent, name.as_bytes()));
        self.reply_at(at, move || match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e),
        });
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        let (r, at) = self.with(|fs| fs.getattr(ino));
        self.reply_at(at, move || match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        });
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let change = AttrChange {
            mode,
            uid,
            gid,
            size,
            atime_ns: atime.map(ns_of),
            mtime_ns: mtime.map(ns_of),
        };
        let (r, at) = self.with(|fs| fs.setattr(ino, change));
        self.reply_at(at, move || match r {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        });
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        let (r, at) = self.with(|fs| fs.readlink(ino));
        self.reply_at(at, move || match r {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        });
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & 0o170_000 != 0o100_000 && mode & 0o170_000 != 0 {
            reply.error(EINVAL); // regular files only (no devices, FIFOs, sockets)
            return;
        }
        let mode = 0o100_000 | (mode & !umask & 0o7777);
        let (r, at) = self.with(|fs| fs.make(parent, name.as_bytes(), mode, req.uid(), req.gid()));
        self.reply_at(at, move || match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e),
        });
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mode = 0o040_000 | (mode & !umask & 0o7777);
        let (r, at) = self.with(|fs| fs.make(parent, name.as_bytes(), mode, req.uid(), req.gid()));
        self.reply_at(at, move || match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e),
        });
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let (r, at) = self.with(|fs| fs.unlink(parent, name.as_bytes()));
        self.reply_at(at, move || match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        });
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let (r, at) = self.with(|fs| fs.rmdir(parent, name.as_bytes()));
        self.reply_at(at, move || match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        });
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let t = target.as_os_str().as_bytes();
        let (r, at) =
            self.with(|fs| fs.symlink(parent, link_name.as_bytes(), t, req.uid(), req.gid()));
        self.reply_at(at, move || match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e),
        });
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if flags != 0 {
            reply.error(EINVAL); // RENAME_EXCHANGE / NOREPLACE: not supported
            return;
        }
        let (r, at) =
            self.with(|fs| fs.rename(parent, name.as_bytes(), newparent, newname.as_bytes()));
        self.reply_at(at, move || match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        });
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (r, at) = self.with(|fs| fs.link(ino, newparent, newname.as_bytes()));
        self.reply_at(at, move || match r {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), 0),
            Err(e) => reply.error(e),
        });
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        let (r, at) = self.with(|fs| fs.open(ino));
        self.reply_at(at, move || match r {
            Ok(()) => reply.opened(0, 0),
            Err(e) => reply.error(e),
        });
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        if offset < 0 {
            reply.error(EINVAL);
            return;
        }
        let mut buf = vec![0u8; size as usize];
        let (r, at) = self.with(|fs| fs.read(ino, offset as u64, &mut buf));
        self.reply_at(at, move || match r {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(e),
        });
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        if offset < 0 {
            reply.error(EINVAL);
            return;
        }
        let (r, at) = self.with(|fs| fs.write(ino, offset as u64, data));
        self.reply_at(at, move || match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        });
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock: u64, reply: ReplyEmpty) {
        reply.ok(); // every write is durable when it returns
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let (r, at) = self.with(|fs| fs.release(ino));
        self.reply_at(at, move || match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        });
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let (r, at) = self.with(|fs| fs.fsync(ino));
        self.reply_at(at, move || match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        });
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        let (r, at) = self.with(|fs| fs.fsync(ino));
        self.reply_at(at, move || match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        });
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let mut entries = std::mem::take(&mut self.entries);
        match self
            .with(|fs| fs.readdir(ino, offset.max(0) as u64, &mut entries))
            .0
        {
            Ok(()) => {
                for (next, e_ino, kind, name) in &entries {
                    if reply.add(
                        *e_ino,
                        *next as i64,
                        file_type(*kind),
                        OsStr::from_bytes(name),
                    ) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
        self.entries = entries;
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let t = self.with(|fs| fs.statfs()).0;
        reply.statfs(
            t.blocks,
            t.blocks_free,
            t.blocks_free,
            t.files,
            t.files_free,
            t.block_bytes,
            t.name_max,
            t.block_bytes,
        );
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mode = 0o100_000 | (mode & !umask & 0o7777);
        let (r, at) = self.with(|fs| {
            let a = fs.make(parent, name.as_bytes(), mode, req.uid(), req.gid())?;
            fs.open(a.ino)?;
            Ok::<Attr, Errno>(a)
        });
        self.reply_at(at, move || match r {
            Ok(a) => reply.created(&TTL, &file_attr(&a), 0, 0, 0),
            Err(e) => reply.error(e),
        });
    }
}

/// Mounts `fs` at `mountpoint` and serves it until SIGINT or SIGTERM, or until someone
/// unmounts it (`fusermount3 -u`); then unmounts and returns the file system. On SIGUSR1,
/// `on_stats` is called with the file system (between two requests) and serving goes on: a
/// measurer's snapshot of the counters while the mount is in use.
pub fn serve<F: PosixFs + std::fmt::Debug>(
    fs: F,
    mountpoint: &Path,
    fs_name: &str,
    on_ready: impl FnOnce(),
    on_stats: impl Fn(&F),
) -> anyhow::Result<F> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
    let shared = Arc::new(Mutex::new(fs));
    let waiter = Arc::new(Waiter::default());
    let w = waiter.clone();
    let waiter_thread = std::thread::Builder::new()
        .name("fuse-replies".into())
        .spawn(move || w.run())
        .context("reply thread")?;
    let adapter = Adapter {
        fs: shared.clone(),
        entries: Vec::new(),
        waiter: waiter.clone(),
    };
    let opts = [
        MountOption::FSName(format!("noftl-{fs_name}")),
        MountOption::Subtype(fs_name.to_string()),
        MountOption::DefaultPermissions,
        MountOption::RW,
    ];
    // The handlers come first: a SIGTERM right after the mount appears (a driver that waits
    // for the mount and then stops it) must unmount, not kill the process and leave a dead
    // mount and no statistics behind.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1])
        .context("cannot install signal handlers")?;
    let session = fuser::spawn_mount2(adapter, mountpoint, &opts).with_context(|| {
        format!(
            "cannot mount on {} (is fusermount3 installed?)",
            mountpoint.display()
        )
    })?;
    on_ready();
    'serving: loop {
        for sig in signals.pending() {
            if sig == SIGUSR1 {
                on_stats(&shared.lock().unwrap_or_else(|p| p.into_inner()));
                continue;
            }
            eprintln!("noftl mount: unmounting ({fs_name})");
            break 'serving;
        }
        if session.guard.is_finished() {
            eprintln!("noftl mount: unmounted from outside");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Dropping the rest of the session unmounts; then the session thread ends.
    let guard = {
        let s = session;
        s.guard
    };
    match guard.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("noftl mount: the FUSE session ended with {e}"),
        Err(_) => anyhow::bail!("the FUSE session thread panicked"),
    }
    waiter.stop();
    if waiter_thread.join().is_err() {
        anyhow::bail!("the reply thread panicked");
    }
    let fs = match Arc::try_unwrap(shared) {
        Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
        Err(_) => anyhow::bail!("the FUSE session still holds the file system"),
    };
    Ok(fs)
}
