//! The log-structured file system (`lfs`, modes f2fs and alfs) as a [`PosixFs`]. Device time
//! as for DFS (`dfs_fs.rs`): with `--clock real` a request is submitted at the wall clock's now
//! and answered at its modelled completion.

use std::time::{Duration, Instant};

use lfs::{Inode, Lfs, LfsError, SetAttr};

use crate::{attr_from, kind_of, now_ns, Attr, AttrChange, Errno, PosixFs, Totals};

#[derive(Debug)]
pub struct LfsPosix {
    pub fs: Lfs,
    real_clock: bool,
    epoch: Instant,
    virt_start: u64,
}

fn errno(e: LfsError) -> Errno {
    // Damage is logged where the mount's user sees it; the caller gets EIO.
    if matches!(
        e,
        LfsError::Device(_) | LfsError::Corrupt(_) | LfsError::DataChecksum { .. }
    ) {
        eprintln!("noftl mount: lfs: {e}");
    }
    e.errno()
}

fn ino32(ino: u64) -> Result<u32, LfsError> {
    u32::try_from(ino).map_err(|_| LfsError::NotFound)
}

impl LfsPosix {
    pub fn new(fs: Lfs, real_clock: bool) -> Self {
        let virt_start = fs.now_ns();
        LfsPosix {
            fs,
            real_clock,
            epoch: Instant::now(),
            virt_start,
        }
    }

    fn attr_of(&self, ino: u32, i: &Inode) -> Attr {
        let times = [i.atime_ns, i.mtime_ns, i.ctime_ns];
        let mapped = self.fs.mapped_blocks_of(ino);
        attr_from(
            u64::from(ino),
            i.mode,
            i.nlink,
            i.uid,
            i.gid,
            i.size,
            times,
            mapped,
        )
    }

    fn op<T>(&mut self, f: impl FnOnce(&mut Lfs) -> Result<T, LfsError>) -> Result<T, Errno> {
        if self.real_clock {
            self.fs
                .submit_at(self.virt_start + self.epoch.elapsed().as_nanos() as u64);
        }
        f(&mut self.fs).map_err(errno)
    }
}

impl PosixFs for LfsPosix {
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
        let change = SetAttr {
            mode: c.mode,
            uid: c.uid,
            gid: c.gid,
            size: c.size,
            atime_ns: c.atime_ns,
            mtime_ns: c.mtime_ns,
        };
        let i = self.op(|fs| fs.setattr(n, change, now_ns()))?;
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
        let mode = lfs::layout::S_IFLNK | 0o777;
        let (ino, i) =
            self.op(|fs| fs.create(ino32(parent)?, name, mode, uid, gid, now_ns(), Some(target)))?;
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
        self.op(|fs| fs.open_file(ino32(ino)?))
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
        out: &mut Vec<(u64, u64, crate::Kind, Vec<u8>)>,
    ) -> Result<(), Errno> {
        let mut ents = Vec::new();
        self.op(|fs| fs.readdir(ino32(ino)?, pos, &mut ents))?;
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
