//! A block device over a plain file: logical 4 KiB pages at offset `lpn * 4096`, completion at
//! submit time (the host's own file I/O takes real time, not virtual time). `flush` is
//! `fdatasync`. Pages beyond the file's end read as zeros; trim writes zeros.
//!
//! Invariants: 1. the file's length is never shorter than needed by a completed write;
//! 2. `flush` returns only after the data reached the file system's stable storage.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use ftl::block_device::{check_range, check_request};
use ftl::{BlockDevice, FtlError, FtlReport, HostCounts, LOGICAL_PAGE_BYTES};
use nand::Nanos;

#[derive(Debug)]
pub struct FileDevice {
    file: File,
    capacity_pages: u64,
    host: HostCounts,
}

impl FileDevice {
    /// Opens (creating if missing) a file of `capacity_pages` logical pages.
    pub fn open(path: &Path, capacity_pages: u64) -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Self::from_file(file, capacity_pages)
    }

    /// The same over a file already open for reading and writing (an unlinked temporary
    /// file, for example), grown to `capacity_pages` when shorter (sparse: nothing is written).
    pub fn from_file(file: File, capacity_pages: u64) -> std::io::Result<Self> {
        let want = capacity_pages * LOGICAL_PAGE_BYTES as u64;
        if file.metadata()?.len() < want {
            file.set_len(want)?;
        }
        Ok(FileDevice {
            file,
            capacity_pages,
            host: HostCounts::default(),
        })
    }
}

fn io(e: std::io::Error) -> FtlError {
    FtlError::Unsupported(format!("file I/O: {e}"))
}

impl BlockDevice for FileDevice {
    fn name(&self) -> String {
        "file".into()
    }
    fn capacity_pages(&self) -> u64 {
        self.capacity_pages
    }
    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        let n = check_request(lpn, buf.len(), self.capacity_pages)?;
        self.file
            .read_exact_at(buf, lpn * LOGICAL_PAGE_BYTES as u64)
            .map_err(io)?;
        self.host.reads += n;
        Ok(at_ns)
    }
    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        let n = check_request(lpn, data.len(), self.capacity_pages)?;
        self.file
            .write_all_at(data, lpn * LOGICAL_PAGE_BYTES as u64)
            .map_err(io)?;
        if fua {
            self.file.sync_data().map_err(io)?;
        }
        self.host.writes += n;
        Ok(at_ns)
    }
    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity_pages)?;
        let zeros = vec![0u8; LOGICAL_PAGE_BYTES];
        for p in lpn..lpn + pages {
            self.file
                .write_all_at(&zeros, p * LOGICAL_PAGE_BYTES as u64)
                .map_err(io)?;
        }
        self.host.trims += pages;
        Ok(at_ns)
    }
    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        self.file.sync_data().map_err(io)?;
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
