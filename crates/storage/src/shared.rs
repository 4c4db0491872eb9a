//! A block device shared between the engine and whoever must reach it while the engine runs: a
//! crash test arms faults and cuts power through its own handle, then takes the device back to
//! recover from it.
//!
//! Invariants:
//! 1. Every handle reaches the same device; each call runs under one mutex, so calls from
//!    different handles never interleave inside an operation.
//! 2. `into_inner` gives the device back only to the last handle (the engine's page store must
//!    be dropped first), so nobody can use a device that was taken.
//! 3. On a device with power-loss protection, the operation during which the power failed
//!    completes on the capacitors (the flash raises `Nand::power_warning`); right after it, the
//!    handle has the controller write back what it buffers (`BlockDevice::power_fail`), which
//!    leaves the flash unpowered, so every later operation fails with a power loss as on a
//!    device without protection. Nothing runs on power the device no longer has.

use std::sync::{Arc, Mutex, PoisonError};

use ftl::{BlockDevice, FtlError, FtlReport};
use nand::{Nand, Nanos};

pub struct SharedDevice<D>(Arc<Mutex<D>>);

impl<D> Clone for SharedDevice<D> {
    fn clone(&self) -> Self {
        SharedDevice(Arc::clone(&self.0))
    }
}

impl<D: BlockDevice> std::fmt::Debug for SharedDevice<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedDevice({})", self.with(|d| d.name()))
    }
}

impl<D: BlockDevice> SharedDevice<D> {
    pub fn new(d: D) -> Self {
        SharedDevice(Arc::new(Mutex::new(d)))
    }
    /// Runs `f` on the device. A panic elsewhere while holding the lock does not hide the device
    /// (a crash test must still inspect it).
    pub fn with<T>(&self, f: impl FnOnce(&mut D) -> T) -> T {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut g)
    }
    /// One operation of the block interface, and the capacitors' write-back if the power
    /// failed during it (invariant 3).
    fn op(&self, f: impl FnOnce(&mut D) -> Result<Nanos, FtlError>) -> Result<Nanos, FtlError> {
        self.with(|d| {
            let result = f(d);
            let warned = d.nand().filter(|n| n.power_warning() && n.is_powered());
            if let Some(now_ns) = warned.map(|n| n.now_ns()) {
                let at_ns = result.as_ref().map_or(now_ns, |&done| done.max(now_ns));
                d.power_fail(at_ns)?;
                debug_assert!(d.nand().is_none_or(|n| !n.is_powered()));
            }
            result
        })
    }
    /// The device, if this is the last handle (invariant 2).
    pub fn into_inner(self) -> Option<D> {
        Arc::try_unwrap(self.0)
            .ok()
            .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
    }
}

impl<D: BlockDevice> BlockDevice for SharedDevice<D> {
    fn name(&self) -> String {
        self.with(|d| d.name())
    }
    fn capacity_pages(&self) -> u64 {
        self.with(|d| d.capacity_pages())
    }
    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        self.op(|d| d.read(at_ns, lpn, buf))
    }
    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        self.op(|d| d.write(at_ns, lpn, data, fua))
    }
    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        self.op(|d| d.trim(at_ns, lpn, pages))
    }
    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        self.op(|d| d.flush(at_ns))
    }
    fn power_fail(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        self.with(|d| d.power_fail(at_ns))
    }
    fn report(&self) -> FtlReport {
        self.with(|d| d.report())
    }
    /// The flash cannot be lent out through the mutex; use `with` to reach it.
    fn nand(&self) -> Option<&Nand> {
        None
    }
    fn nand_mut(&mut self) -> Option<&mut Nand> {
        None
    }
    fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        self.op(|d| d.background(at_ns, max_victims))
    }
    /// Insert Address Assist: the device's channel, each query through the mutex (the shared
    /// handle answers for the device when the device has one).
    fn gc_informed(&mut self) -> Option<&mut dyn ftl::GcInformed> {
        if self.with(|d| d.gc_informed().is_some()) {
            Some(self)
        } else {
            None
        }
    }
}

impl<D: BlockDevice> ftl::GcInformed for SharedDevice<D> {
    fn flash_page_bytes(&self) -> usize {
        self.with(|d| d.gc_informed().map_or(0, |g| g.flash_page_bytes()))
    }
    fn commit_victims(&mut self, victims: u32) -> u64 {
        self.with(|d| d.gc_informed().map_or(0, |g| g.commit_victims(victims)))
    }
    fn victim_lpns(&mut self, out: &mut Vec<u64>) {
        self.with(|d| {
            if let Some(g) = d.gc_informed() {
                g.victim_lpns(out);
            }
        })
    }
}
