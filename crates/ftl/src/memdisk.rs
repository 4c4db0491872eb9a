//! A block device in plain memory with no flash and no time: the reference the FTLs are checked
//! against, and a stand-in for tests of the layers above.

use nand::Nanos;

use crate::block_device::{
    check_range, check_request, BlockDevice, FtlError, FtlReport, HostCounts, LOGICAL_PAGE_BYTES,
};

#[derive(Debug, Clone)]
pub struct MemDisk {
    pages: Vec<Option<Box<[u8]>>>,
    host: HostCounts,
}

impl MemDisk {
    pub fn new(capacity_pages: u64) -> Self {
        MemDisk {
            pages: (0..capacity_pages).map(|_| None).collect(),
            host: HostCounts::default(),
        }
    }
}

impl BlockDevice for MemDisk {
    fn name(&self) -> String {
        "memdisk".into()
    }
    fn capacity_pages(&self) -> u64 {
        self.pages.len() as u64
    }
    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        check_request(lpn, buf.len(), self.capacity_pages())?;
        for (i, chunk) in buf.chunks_mut(LOGICAL_PAGE_BYTES).enumerate() {
            match &self.pages[lpn as usize + i] {
                Some(p) => chunk.copy_from_slice(p),
                None => chunk.fill(0),
            }
            self.host.reads += 1;
        }
        Ok(at_ns)
    }
    fn write(
        &mut self,
        at_ns: Nanos,
        lpn: u64,
        data: &[u8],
        _fua: bool,
    ) -> Result<Nanos, FtlError> {
        check_request(lpn, data.len(), self.capacity_pages())?;
        for (i, chunk) in data.chunks(LOGICAL_PAGE_BYTES).enumerate() {
            // A rewrite copies into the page's buffer: a fresh box per write was a malloc and
            // a free per page on the engine's hot path.
            match &mut self.pages[lpn as usize + i] {
                Some(p) if p.len() == chunk.len() => p.copy_from_slice(chunk),
                slot => *slot = Some(chunk.into()),
            }
            self.host.writes += 1;
        }
        Ok(at_ns)
    }
    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity_pages())?;
        for p in &mut self.pages[lpn as usize..(lpn + pages) as usize] {
            *p = None;
        }
        self.host.trims += pages;
        Ok(at_ns)
    }
    fn mapped(&self, lpn: u64) -> Option<bool> {
        self.pages.get(lpn as usize).map(Option::is_some)
    }
    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        self.host.flushes += 1;
        Ok(at_ns)
    }
    fn report(&self) -> FtlReport {
        FtlReport {
            name: self.name(),
            host: self.host,
            waf: 1.0,
            ..FtlReport::default()
        }
    }
}
