//! DFS as a [`PosixFs`]: errno mapping, wall-clock timestamps, and the device clock.
//!
//! Device time: DFS runs on the emulator's virtual clock. With `--clock real` every request
//! also takes its modelled device time on the wall clock (the caller sleeps until the wall
//! clock has caught up with the device's), so fio and applications see the emulated latency;
//! with `--clock none` requests run as fast as the host allows. Under the real clock a request
//! is submitted at the wall clock's now and answered at its modelled completion by the
//! adapter's reply thread, so requests of several threads overlap on the device's dies.

use std::time::{Duration, Instant};

use dfs::fs::{Dfs, FsError, Inode, S_IFLNK};

use crate::{attr_from, kind_of, now_ns, Attr, AttrChange, Errno, Kind, PosixFs, Totals};

#[derive(Debug)]
pub struct DfsPosix {
    pub fs: Dfs,
    real_clock: bool,
    epoch: Instant,
    virt_start: u64,
}

fn errno(e: FsError) -> Errno {
    if matches!(e, FsError::Vsl(_) | FsError::Corrupt(_)) {
        eprintln!("noftl mount: dfs: {e}");
    }
    e.errno()
}

fn ino32(ino: u64) -> Result<u32, FsError> {
    u32::try_from(ino).map_err(|_| FsError::NotFound)
}

fn attr(ino: u32, i: &Inode, mapped_blocks: u64) -> Attr {
    let times = [i.atime_ns, i.mtime_ns, i.ctime_ns];
    attr_from(
        u64::from(ino),
        i.mode,
        i.nlink,
        i.uid,
        i.gid,
        i.size,
        times,
        mapped_blocks,
    )
}

impl DfsPosix {
    pub fn new(fs: Dfs, real_clock: bool) -> Self {
        let virt_start = fs.now_ns();
        DfsPosix {
            fs,
            real_clock,
            epoch: Instant::now(),
            virt_start,
        }
    }

    fn attr_of(&self, ino: u32, i: &Inode) -> Attr {
        attr(ino, i, self.fs.mapped_blocks_of(ino).unwrap_or(0))
    }

    /// Runs one request: submitted at the wall clock's now (real clock) or at the device's
    /// latest completion (none); the adapter replies at its completion (`completion`).
    fn op<T>(&mut self, f: impl FnOnce(&mut Dfs) -> Result<T, FsError>) -> Result<T, Errno> {
        if self.real_clock {
            self.fs
                .submit_at(self.virt_start + self.epoch.elapsed().as_nanos() as u64);
        }
        f(&mut self.fs).map_err(errno)
    }
}

impl PosixFs for DfsPosix {
    fn lookup(&mut self, parent: u64, name: &[u8]) -> Result<Attr, Errno> {
        let (ino, i) = self.op(|fs| fs.lookup(ino32(parent)?, name))?;
        Ok(self.attr_of(ino, &i))
    }
    fn getattr(&mut self, ino: u64) -> Result<Attr, Errno> {
        let n = ino32(ino).map_err(errno)?;
        let i = self.fs.getattr(n).map_err(errno)?;
        Ok(self.attr_of(n, &i))
    }
    fn setattr(&mut self, ino: u64, c: AttrChange) -> Result<Attr, Errno> {
        let n = ino32(ino).map_err(errno)?;
        let i = self.op(|fs| fs.setattr(n, c, now_ns()))?;
        Ok(self.attr_of(n, &i))
    }
    fn make(
        &mut self,
        parent: u64,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno> {
        let (ino, i) =
            self.op(|fs| fs.create(ino32(parent)?, name, mode, uid, gid, now_ns(), None))?;
        Ok(self.attr_of(ino, &i))
    }
    fn symlink(
        &mut self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno> {
        let (ino, i) = self.op(|fs| {
            fs.create(
                ino32(parent)?,
                name,
                S_IFLNK | 0o777,
                uid,
                gid,
                now_ns(),
                Some(target),
            )
        })?;
        Ok(self.attr_of(ino, &i))
    }
    fn readlink(&mut self, ino: u64) -> Result<Vec<u8>, Errno> {
        self.op(|fs| fs.readlink(ino32(ino)?))
    }
    fn link(&mut self, ino: u64, parent: u64, name: &[u8]) -> Result<Attr, Errno> {
        let n = ino32(ino).map_err(errno)?;
        let i = self.op(|fs| fs.link(n, ino32(parent)?, name, now_ns()))?;
        Ok(self.attr_of(n, &i))
    }
    fn unlink(&mut self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        self.op(|fs| fs.remove(ino32(parent)?, name, false, now_ns()))
    }
    fn rmdir(&mut self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        self.op(|fs| fs.remove(ino32(parent)?, name, true, now_ns()))
    }
    fn rename(&mut self, parent: u64, name: &[u8], np: u64, nn: &[u8]) -> Result<(), Errno> {
        self.op(|fs| fs.rename(ino32(parent)?, name, ino32(np)?, nn, now_ns()))
    }
    fn open(&mut self, ino: u64) -> Result<(), Errno> {
        self.fs.open_file(ino32(ino).map_err(errno)?).map_err(errno)
    }
    fn release(&mut self, ino: u64) -> Result<(), Errno> {
        self.op(|fs| fs.release(ino32(ino)?))
    }
    fn read(&mut self, ino: u64, off: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        self.op(|fs| fs.read(ino32(ino)?, off, buf))
    }
    fn write(&mut self, ino: u64, off: u64, data: &[u8]) -> Result<usize, Errno> {
        self.op(|fs| fs.write(ino32(ino)?, off, data, now_ns()))
    }
    fn readdir(
        &mut self,
        ino: u64,
        pos: u64,
        out: &mut Vec<(u64, u64, Kind, Vec<u8>)>,
    ) -> Result<(), Errno> {
        let mut ents = Vec::new();
        self.fs
            .readdir(ino32(ino).map_err(errno)?, pos, &mut ents)
            .map_err(errno)?;
        out.clear();
        for (next, e) in ents {
            out.push((next, u64::from(e.ino), kind_of(e.mode), e.name));
        }
        Ok(())
    }
    fn fsync(&mut self, ino: u64) -> Result<(), Errno> {
        self.op(|fs| fs.fsync(ino32(ino)?))
    }
    fn completion(&self) -> Option<Instant> {
        self.real_clock.then(|| {
            self.epoch + Duration::from_nanos(self.fs.now_ns().saturating_sub(self.virt_start))
        })
    }
    fn statfs(&mut self) -> Totals {
        let s = self.fs.statfs();
        Totals {
            block_bytes: s.block_bytes,
            blocks: s.blocks,
            blocks_free: s.blocks_free,
            files: s.files,
            files_free: s.files_free,
            name_max: s.name_max,
        }
    }
}
