//! Byte-addressed access to a block device, in 512-byte sectors, as NBD and file systems use it.
//!
//! Requests must be sector-aligned (offset and length multiples of 512). A request that covers
//! only part of a 4 KiB logical page at either edge is served by reading that page, merging, and
//! writing it back (read-modify-write); whole pages in the middle go straight through.

use nand::Nanos;

use crate::block_device::{BlockDevice, FtlError, LOGICAL_PAGE_BYTES, SECTOR_BYTES};

/// A byte view of any block device.
#[derive(Debug)]
pub struct ByteDevice<D> {
    dev: D,
    scratch: Vec<u8>,
}

const PAGE: u64 = LOGICAL_PAGE_BYTES as u64;

impl<D: BlockDevice> ByteDevice<D> {
    pub fn new(dev: D) -> Self {
        ByteDevice {
            dev,
            scratch: vec![0; LOGICAL_PAGE_BYTES],
        }
    }
    pub fn inner(&self) -> &D {
        &self.dev
    }
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.dev
    }
    pub fn into_inner(self) -> D {
        self.dev
    }
    pub fn size_bytes(&self) -> u64 {
        self.dev.capacity_pages() * PAGE
    }

    fn check(&self, offset: u64, len: usize) -> Result<(), FtlError> {
        if !offset.is_multiple_of(SECTOR_BYTES as u64) || !len.is_multiple_of(SECTOR_BYTES) {
            return Err(FtlError::Misaligned {
                offset,
                bytes: len,
                align: SECTOR_BYTES,
            });
        }
        let end = offset.checked_add(len as u64);
        match end {
            Some(end) if end <= self.size_bytes() => Ok(()),
            _ => Err(FtlError::OutOfRange {
                start: offset / PAGE,
                end: end.unwrap_or(u64::MAX).div_ceil(PAGE),
                capacity: self.dev.capacity_pages(),
            }),
        }
    }

    /// Reads `buf.len()` bytes at byte `offset`.
    pub fn read(&mut self, at_ns: Nanos, offset: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        self.check(offset, buf.len())?;
        let mut done = at_ns;
        let mut pos = 0usize;
        while pos < buf.len() {
            let abs = offset + pos as u64;
            let lpn = abs / PAGE;
            let in_page = (abs % PAGE) as usize;
            if in_page == 0 && buf.len() - pos >= LOGICAL_PAGE_BYTES {
                // The aligned middle in one request, so the FTL can spread it over dies.
                let whole = (buf.len() - pos) / LOGICAL_PAGE_BYTES * LOGICAL_PAGE_BYTES;
                done = done.max(self.dev.read(at_ns, lpn, &mut buf[pos..pos + whole])?);
                pos += whole;
            } else {
                let take = (LOGICAL_PAGE_BYTES - in_page).min(buf.len() - pos);
                done = done.max(self.dev.read(at_ns, lpn, &mut self.scratch)?);
                buf[pos..pos + take].copy_from_slice(&self.scratch[in_page..in_page + take]);
                pos += take;
            }
        }
        Ok(done)
    }

    /// Writes `data` at byte `offset`; with `fua` it is durable when this returns.
    pub fn write(
        &mut self,
        at_ns: Nanos,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<Nanos, FtlError> {
        self.check(offset, data.len())?;
        let mut done = at_ns;
        let mut pos = 0usize;
        while pos < data.len() {
            let abs = offset + pos as u64;
            let lpn = abs / PAGE;
            let in_page = (abs % PAGE) as usize;
            if in_page == 0 && data.len() - pos >= LOGICAL_PAGE_BYTES {
                let whole = (data.len() - pos) / LOGICAL_PAGE_BYTES * LOGICAL_PAGE_BYTES;
                done = done.max(self.dev.write(at_ns, lpn, &data[pos..pos + whole], fua)?);
                pos += whole;
            } else {
                let take = (LOGICAL_PAGE_BYTES - in_page).min(data.len() - pos);
                // Read-modify-write of a partly covered page: the write waits for the read.
                let read_done = self.dev.read(at_ns, lpn, &mut self.scratch)?;
                self.scratch[in_page..in_page + take].copy_from_slice(&data[pos..pos + take]);
                done = done.max(self.dev.write(read_done, lpn, &self.scratch, fua)?);
                pos += take;
            }
        }
        Ok(done)
    }

    /// Writes `len` zero bytes at `offset`. Whole pages are trimmed (they read as zeros), and
    /// partial pages at the edges are written with zeros, unless `may_trim` is false, in which
    /// case zeros are written everywhere.
    pub fn write_zeroes(
        &mut self,
        at_ns: Nanos,
        offset: u64,
        len: usize,
        may_trim: bool,
        fua: bool,
    ) -> Result<Nanos, FtlError> {
        self.check(offset, len)?;
        let first_whole = offset.div_ceil(PAGE);
        let end = offset + len as u64;
        let last_whole = end / PAGE;
        let mut done = at_ns;
        if may_trim && last_whole > first_whole {
            let head = (first_whole * PAGE - offset) as usize;
            if head > 0 {
                done = done.max(self.write(at_ns, offset, &vec![0; head], fua)?);
            }
            done = done.max(
                self.dev
                    .trim(at_ns, first_whole, last_whole - first_whole)?,
            );
            let tail = (end - last_whole * PAGE) as usize;
            if tail > 0 {
                done = done.max(self.write(at_ns, last_whole * PAGE, &vec![0; tail], fua)?);
            }
            if fua {
                done = done.max(self.dev.flush(done)?);
            }
            return Ok(done);
        }
        let zeros = vec![0u8; len.min(1 << 20)];
        let mut pos = 0usize;
        while pos < len {
            let n = zeros.len().min(len - pos);
            done = done.max(self.write(at_ns, offset + pos as u64, &zeros[..n], fua)?);
            pos += n;
        }
        Ok(done)
    }

    /// Discards the whole pages inside `[offset, offset + len)`; partial pages are left alone
    /// (a trim is advisory, and the contract only promises zeros for the pages it discards).
    pub fn trim(&mut self, at_ns: Nanos, offset: u64, len: usize) -> Result<Nanos, FtlError> {
        self.check(offset, len)?;
        let first = offset.div_ceil(PAGE);
        let last = (offset + len as u64) / PAGE;
        if last > first {
            return self.dev.trim(at_ns, first, last - first);
        }
        Ok(at_ns)
    }

    pub fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        self.dev.flush(at_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDisk;

    #[test]
    fn unaligned_edges_are_read_modify_written() {
        let mut d = ByteDevice::new(MemDisk::new(4));
        d.write(0, 0, &vec![7u8; 4 * 4096], false).unwrap();
        d.write(0, 512 * 3, &vec![9u8; 4096 + 1024], false).unwrap();
        let mut all = vec![0u8; 4 * 4096];
        d.read(0, 0, &mut all).unwrap();
        assert!(all[..1536].iter().all(|&b| b == 7));
        assert!(all[1536..1536 + 5120].iter().all(|&b| b == 9));
        assert!(all[1536 + 5120..].iter().all(|&b| b == 7));
        let mut part = vec![0u8; 1024];
        d.read(0, 512 * 2, &mut part).unwrap();
        assert!(part[..512].iter().all(|&b| b == 7) && part[512..].iter().all(|&b| b == 9));
    }

    #[test]
    fn misaligned_and_out_of_range_requests_are_refused() {
        let mut d = ByteDevice::new(MemDisk::new(2));
        assert!(matches!(
            d.write(0, 100, &[0; 512], false),
            Err(FtlError::Misaligned { .. })
        ));
        assert!(matches!(
            d.write(0, 0, &[0; 100], false),
            Err(FtlError::Misaligned { .. })
        ));
        assert!(matches!(
            d.read(0, 8192, &mut [0; 512]),
            Err(FtlError::OutOfRange { .. })
        ));
        assert!(matches!(
            d.read(0, u64::MAX - 511, &mut [0; 512]),
            Err(FtlError::OutOfRange { .. })
        ));
    }

    #[test]
    fn write_zeroes_trims_whole_pages_and_zeroes_edges() {
        let mut d = ByteDevice::new(MemDisk::new(4));
        d.write(0, 0, &vec![5u8; 4 * 4096], false).unwrap();
        d.write_zeroes(0, 2048, 3 * 4096, true, false).unwrap();
        let mut all = vec![0u8; 4 * 4096];
        d.read(0, 0, &mut all).unwrap();
        assert!(all[..2048].iter().all(|&b| b == 5));
        assert!(all[2048..2048 + 3 * 4096].iter().all(|&b| b == 0));
        assert!(all[2048 + 3 * 4096..].iter().all(|&b| b == 5));
        assert_eq!(d.inner().report().host.trims, 2);
    }
}
