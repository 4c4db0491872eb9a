//! A RAM block device with a volatile write cache and injected faults, for crash tests on the
//! page-store seam (the equivalent of the emulator's `FaultPlan` for devices without flash).
//!
//! Model: a write lands in a volatile cache; `flush` (or a `fua` write) moves the cache to the
//! durable image. A power cut at operation N stops the device: that operation and all later ones
//! fail with `PowerLost`. `after_power_loss(seed)` builds the device as found at the next power-on:
//! the durable image plus a seeded random subset of the cached pages (writes may persist in any
//! order), and, with `tear_sectors`, some persisted pages only in part (their first sectors new,
//! the rest old): a torn write.
//!
//! Invariants:
//! 1. Every page written before a completed `flush` survives every power cut.
//! 2. A page written after the last flush survives whole, torn (only with `tear_sectors`), or not
//!    at all; which one depends only on the seed.
//! 3. An injected I/O error (`fail_op`) changes nothing and leaves the device powered.

use std::collections::BTreeMap;

use ftl::block_device::{check_range, check_request};
use ftl::{BlockDevice, FtlError, FtlReport, HostCounts, LOGICAL_PAGE_BYTES, SECTOR_BYTES};
use nand::{NandError, Nanos};

pub use crate::shared::SharedDevice;

/// Faults to inject, counted in device operations (reads, writes, trims, flushes) from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrashPlan {
    pub cut_at_op: Option<u64>,
    pub fail_op: Option<u64>,
    /// Persisted-but-unflushed pages may tear at sector granularity.
    pub tear_sectors: bool,
}

#[derive(Debug, Clone)]
pub struct CrashDisk {
    durable: Vec<Option<Box<[u8]>>>,
    cache: BTreeMap<u64, Option<Box<[u8]>>>,
    ops: u64,
    plan: CrashPlan,
    powered: bool,
    host: HostCounts,
    /// Virtual latency per page read / written and per flush (0: an instant device).
    pub read_ns: Nanos,
    pub write_ns: Nanos,
    pub flush_ns: Nanos,
}

/// splitmix64: a tiny deterministic generator (the crash image must depend on the seed only).
fn mix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl CrashDisk {
    pub fn new(capacity_pages: u64) -> Self {
        CrashDisk {
            durable: vec![None; capacity_pages as usize],
            cache: BTreeMap::new(),
            ops: 0,
            plan: CrashPlan::default(),
            powered: true,
            host: HostCounts::default(),
            read_ns: 0,
            write_ns: 0,
            flush_ns: 0,
        }
    }
    pub fn set_plan(&mut self, plan: CrashPlan) {
        self.plan = plan;
    }
    pub fn ops(&self) -> u64 {
        self.ops
    }
    pub fn is_powered(&self) -> bool {
        self.powered
    }
    /// Cuts power now, between operations.
    pub fn cut_power(&mut self) {
        self.powered = false;
    }

    /// The device as found at the next power-on (see the module doc).
    pub fn after_power_loss(&self, seed: u64) -> CrashDisk {
        let mut rng = seed ^ 0xC0FF_EE00_D15C;
        let mut durable = self.durable.clone();
        for (&lpn, page) in &self.cache {
            let r = mix(&mut rng);
            match r % 4 {
                0 | 1 => {} // lost
                2 if self.plan.tear_sectors => {
                    let sectors = LOGICAL_PAGE_BYTES / SECTOR_BYTES;
                    let keep = 1 + (mix(&mut rng) as usize % (sectors - 1));
                    let old = durable[lpn as usize]
                        .clone()
                        .unwrap_or_else(|| vec![0u8; LOGICAL_PAGE_BYTES].into());
                    let mut torn = old.to_vec();
                    let new = page
                        .clone()
                        .unwrap_or_else(|| vec![0u8; LOGICAL_PAGE_BYTES].into());
                    torn[..keep * SECTOR_BYTES].copy_from_slice(&new[..keep * SECTOR_BYTES]);
                    durable[lpn as usize] = Some(torn.into());
                }
                _ => durable[lpn as usize] = page.clone(),
            }
        }
        CrashDisk {
            durable,
            cache: BTreeMap::new(),
            ops: 0,
            plan: CrashPlan::default(),
            powered: true,
            host: HostCounts::default(),
            read_ns: self.read_ns,
            write_ns: self.write_ns,
            flush_ns: self.flush_ns,
        }
    }

    /// Counts the operation and applies the plan; `Err` when it must not proceed.
    fn gate(&mut self) -> Result<Fate, FtlError> {
        if !self.powered {
            return Err(FtlError::Flash(NandError::PoweredOff));
        }
        self.ops += 1;
        if self.plan.cut_at_op == Some(self.ops) {
            self.powered = false;
            return Ok(Fate::Cut);
        }
        if self.plan.fail_op == Some(self.ops) {
            return Err(FtlError::Flash(NandError::Uncorrectable {
                ppn: nand::Ppn(self.ops),
                bit_errors: 99,
                correctable: 40,
            }));
        }
        Ok(Fate::Proceed)
    }

    fn page(&self, lpn: u64) -> Option<&[u8]> {
        match self.cache.get(&lpn) {
            Some(p) => p.as_deref(),
            None => self.durable[lpn as usize].as_deref(),
        }
    }
}

#[derive(PartialEq)]
enum Fate {
    Proceed,
    Cut,
}

impl BlockDevice for CrashDisk {
    fn name(&self) -> String {
        "crashdisk".into()
    }
    fn capacity_pages(&self) -> u64 {
        self.durable.len() as u64
    }
    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        let n = check_request(lpn, buf.len(), self.capacity_pages())?;
        if self.gate()? == Fate::Cut {
            return Err(FtlError::Flash(NandError::PowerLost));
        }
        for (i, chunk) in buf.chunks_mut(LOGICAL_PAGE_BYTES).enumerate() {
            match self.page(lpn + i as u64) {
                Some(p) => chunk.copy_from_slice(p),
                None => chunk.fill(0),
            }
        }
        self.host.reads += n;
        Ok(at_ns + self.read_ns * n)
    }
    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        let n = check_request(lpn, data.len(), self.capacity_pages())?;
        let fate = self.gate()?;
        // A cut during a multi-page write leaves its first half in the cache.
        let pages = if fate == Fate::Cut { n / 2 } else { n };
        for (i, chunk) in data
            .chunks(LOGICAL_PAGE_BYTES)
            .take(pages as usize)
            .enumerate()
        {
            let p = lpn + i as u64;
            if fua && fate == Fate::Proceed {
                self.cache.remove(&p);
                self.durable[p as usize] = Some(chunk.into());
            } else {
                self.cache.insert(p, Some(chunk.into()));
            }
        }
        if fate == Fate::Cut {
            return Err(FtlError::Flash(NandError::PowerLost));
        }
        self.host.writes += n;
        Ok(at_ns + self.write_ns * n)
    }
    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity_pages())?;
        if self.gate()? == Fate::Cut {
            return Err(FtlError::Flash(NandError::PowerLost));
        }
        for p in lpn..lpn + pages {
            self.cache.insert(p, None);
        }
        self.host.trims += pages;
        Ok(at_ns)
    }
    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        if self.gate()? == Fate::Cut {
            return Err(FtlError::Flash(NandError::PowerLost));
        }
        for (lpn, page) in std::mem::take(&mut self.cache) {
            self.durable[lpn as usize] = page;
        }
        self.host.flushes += 1;
        Ok(at_ns + self.flush_ns)
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

/// A `CrashDisk` shared with the test that cuts its power: the engine owns one handle, the test
/// another.
pub type SharedCrashDisk = SharedDevice<CrashDisk>;

impl SharedDevice<CrashDisk> {
    pub fn set_plan(&self, plan: CrashPlan) {
        self.with(|d| d.set_plan(plan))
    }
    pub fn cut_power(&self) {
        self.with(CrashDisk::cut_power)
    }
    pub fn is_powered(&self) -> bool {
        self.with(|d| d.is_powered())
    }
    pub fn ops(&self) -> u64 {
        self.with(|d| d.ops())
    }
    pub fn after_power_loss(&self, seed: u64) -> CrashDisk {
        self.with(|d| d.after_power_loss(seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushed_writes_survive_and_unflushed_may_not() {
        let mut d = CrashDisk::new(8);
        let a = vec![1u8; 4096];
        let b = vec![2u8; 4096];
        d.write(0, 0, &a, false).unwrap();
        d.flush(0).unwrap();
        d.write(0, 1, &b, false).unwrap();
        d.cut_power();
        assert!(d.read(0, 0, &mut vec![0; 4096]).is_err());
        let mut kept = 0;
        for seed in 0..32 {
            let mut r = d.after_power_loss(seed);
            let mut buf = vec![0u8; 4096];
            r.read(0, 0, &mut buf).unwrap();
            assert_eq!(buf, a);
            r.read(0, 1, &mut buf).unwrap();
            if buf == b {
                kept += 1;
            } else {
                assert!(buf.iter().all(|&x| x == 0));
            }
        }
        assert!(
            kept > 0 && kept < 32,
            "unflushed writes persist for some seeds only ({kept})"
        );
    }

    #[test]
    fn injected_error_changes_nothing() {
        let mut d = CrashDisk::new(4);
        d.set_plan(CrashPlan {
            fail_op: Some(1),
            ..CrashPlan::default()
        });
        assert!(d.write(0, 0, &[7u8; 4096], false).is_err());
        let mut buf = vec![1u8; 4096];
        d.read(0, 0, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0));
    }
}
