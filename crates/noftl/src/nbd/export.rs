//! The exported device: one block device behind a mutex, shared by every connection, with the
//! clock that times its requests and the counters the server reports.
//!
//! Invariants:
//! 1. The device lock is held only to schedule a request (compute its effect and its modelled
//!    completion time), never while waiting for that time, so connections overlap exactly as
//!    the device model lets them.
//! 2. Under `--clock real`, a request is submitted at the wall clock's `now_ns()` taken inside
//!    the lock (so submit times are monotone in lock order) and its reply is not sent before
//!    the wall clock reaches its modelled completion.
//! 3. Under `--clock none`, a request is submitted at the device's virtual now (the latest
//!    completion it has reported) and replied to at once; device time is still counted.
//! 4. Every request gets exactly one outcome: success or one protocol error value.
//! 5. Any byte range inside the export can be read and written; ranges that are not
//!    sector-aligned are served by a sector read-modify-write under the lock (atomic with
//!    respect to every other request, on every connection).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use ftl::{BlockDevice, ByteDevice, FtlError};
use hdrhistogram::Histogram;
use nand::{ClockMode, Nanos, RealClock};
use serde_json::json;

use super::proto::{self, Command};

/// A device shared by the connections of one server.
#[derive(Debug)]
pub struct Export {
    dev: Mutex<DeviceState>,
    clock: RealClock,
    mode: ClockMode,
    size_bytes: u64,
    name: String,
    pub counters: Counters,
    latency: Mutex<Latency>,
}

struct DeviceState {
    dev: ByteDevice<Box<dyn BlockDevice>>,
    /// The latest completion time the device has reported (`--clock none` submits here).
    virtual_now_ns: Nanos,
    /// Reused buffer for sub-sector read-modify-write.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for DeviceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceState")
            .field("device", &self.dev.inner().name())
            .field("virtual_now_ns", &self.virtual_now_ns)
            .finish()
    }
}

const SECTOR: u64 = ftl::SECTOR_BYTES as u64;

/// The sector-aligned span `[start, end)` that covers `[offset, offset + len)`.
fn sector_span(offset: u64, len: usize) -> (u64, u64) {
    (
        offset / SECTOR * SECTOR,
        (offset + len as u64).div_ceil(SECTOR) * SECTOR,
    )
}

fn is_aligned(offset: u64, len: usize) -> bool {
    offset.is_multiple_of(SECTOR) && (len as u64).is_multiple_of(SECTOR)
}

/// Byte-granular access on top of the sector-granular [`ByteDevice`]: clients (ext2fs through
/// nbdfuse, for one) write single bytes of a superblock, so a request that is not
/// sector-aligned is served by reading the sectors it touches, merging and writing them back,
/// all under the device lock so that it is atomic with respect to other requests. The caller
/// has checked the range; sizes are whole pages, so the rounded span stays inside.
impl DeviceState {
    fn read(&mut self, at: Nanos, offset: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        if is_aligned(offset, buf.len()) {
            return self.dev.read(at, offset, buf);
        }
        let (start, end) = sector_span(offset, buf.len());
        self.scratch.resize((end - start) as usize, 0);
        let done = self.dev.read(at, start, &mut self.scratch)?;
        let skip = (offset - start) as usize;
        buf.copy_from_slice(&self.scratch[skip..skip + buf.len()]);
        Ok(done)
    }

    fn write(&mut self, at: Nanos, offset: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        if is_aligned(offset, data.len()) {
            return self.dev.write(at, offset, data, fua);
        }
        self.rmw(at, offset, data.len(), fua, |span| {
            span.copy_from_slice(data)
        })
    }

    /// Reads the sectors around `[offset, offset + len)`, lets `merge` change that part, and
    /// writes them back; the write is issued when the read completes.
    fn rmw(
        &mut self,
        at: Nanos,
        offset: u64,
        len: usize,
        fua: bool,
        merge: impl FnOnce(&mut [u8]),
    ) -> Result<Nanos, FtlError> {
        let (start, end) = sector_span(offset, len);
        self.scratch.resize((end - start) as usize, 0);
        let read_done = self.dev.read(at, start, &mut self.scratch)?;
        let skip = (offset - start) as usize;
        merge(&mut self.scratch[skip..skip + len]);
        self.dev.write(read_done, start, &self.scratch, fua)
    }

    fn write_zeroes(
        &mut self,
        at: Nanos,
        offset: u64,
        len: usize,
        may_trim: bool,
        fua: bool,
    ) -> Result<Nanos, FtlError> {
        let end = offset + len as u64;
        let inner_start = offset.div_ceil(SECTOR) * SECTOR;
        let inner_end = end / SECTOR * SECTOR;
        if inner_end <= inner_start {
            // No whole sector inside: one read-modify-write of the (at most two) sectors touched.
            return if len == 0 {
                Ok(at)
            } else {
                self.rmw(at, offset, len, fua, |s| s.fill(0))
            };
        }
        let mut done = self.dev.write_zeroes(
            at,
            inner_start,
            (inner_end - inner_start) as usize,
            may_trim,
            fua,
        )?;
        if offset < inner_start {
            done = done.max(
                self.rmw(at, offset, (inner_start - offset) as usize, fua, |s| {
                    s.fill(0)
                })?,
            );
        }
        if inner_end < end {
            done = done.max(
                self.rmw(at, inner_end, (end - inner_end) as usize, fua, |s| {
                    s.fill(0)
                })?,
            );
        }
        Ok(done)
    }

    /// A trim is advisory: only the whole sectors inside the range are passed on (and the
    /// device discards only the whole pages among them).
    fn trim(&mut self, at: Nanos, offset: u64, len: usize, fua: bool) -> Result<Nanos, FtlError> {
        let start = offset.div_ceil(SECTOR) * SECTOR;
        let end = (offset + len as u64) / SECTOR * SECTOR;
        let done = if end > start {
            self.dev.trim(at, start, (end - start) as usize)?
        } else {
            at
        };
        if fua {
            return self.dev.flush(done);
        }
        Ok(done)
    }
}

/// Request counters; relaxed atomics, read only for reports.
#[derive(Debug, Default)]
pub struct Counters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub flushes: AtomicU64,
    pub trims: AtomicU64,
    pub write_zeroes: AtomicU64,
    pub errors: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub connections_accepted: AtomicU64,
    pub connections_active: AtomicU64,
    pub connections_refused: AtomicU64,
    pub protocol_errors: AtomicU64,
}

/// Latency histograms in nanoseconds.
#[derive(Debug)]
struct Latency {
    /// Modelled device time of each request (completion - submit).
    model_ns: Histogram<u64>,
    /// Wall time from the request fully received to its reply being sent.
    served_ns: Histogram<u64>,
}

/// The outcome of scheduling one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    /// 0 on success, else a protocol error value.
    pub errno: u32,
    /// Modelled device time of the request (completion - submit).
    pub model_ns: Nanos,
    /// When the reply may be sent, on this export's clock (0 = at once).
    pub due_ns: Nanos,
}

fn histogram() -> Histogram<u64> {
    // 1 ns .. 1 hour at 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("constant histogram bounds are valid")
}

impl Export {
    pub fn new(dev: Box<dyn BlockDevice>, mode: ClockMode) -> Self {
        let dev = ByteDevice::new(dev);
        let size_bytes = dev.size_bytes();
        let name = dev.inner().name();
        Export {
            dev: Mutex::new(DeviceState {
                dev,
                virtual_now_ns: 0,
                scratch: Vec::new(),
            }),
            clock: RealClock::new(),
            mode,
            size_bytes,
            name,
            counters: Counters::default(),
            latency: Mutex::new(Latency {
                model_ns: histogram(),
                served_ns: histogram(),
            }),
        }
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn clock(&self) -> &RealClock {
        &self.clock
    }
    /// The clock's name as on the command line.
    pub fn clock_name(&self) -> &'static str {
        match self.mode {
            ClockMode::Real => "real",
            ClockMode::None => "none",
            ClockMode::Virtual => "virtual",
        }
    }
    pub fn waits(&self) -> bool {
        self.mode == ClockMode::Real
    }

    /// The transmission flags this export offers: flush, FUA, trim, write-zeroes, and
    /// multi-conn, since every connection shares one device and a flush covers all of it.
    pub fn transmission_flags(&self) -> u16 {
        proto::TF_HAS_FLAGS
            | proto::TF_SEND_FLUSH
            | proto::TF_SEND_FUA
            | proto::TF_SEND_TRIM
            | proto::TF_SEND_WRITE_ZEROES
            | proto::TF_CAN_MULTI_CONN
    }

    fn lock(&self) -> MutexGuard<'_, DeviceState> {
        // A panic elsewhere must not take the export down with it: the state is still usable.
        self.dev.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `cmd` on the device (invariant 1: under the lock only for the call itself).
    /// `buf` holds the payload of a write or receives the data of a read.
    pub fn schedule(&self, cmd: &Command, buf: &mut [u8]) -> Scheduled {
        let mut st = self.lock();
        let submit_ns = match self.mode {
            ClockMode::Real => self.clock.now_ns(),
            _ => st
                .virtual_now_ns
                .max(st.dev.inner().nand().map_or(0, |n| n.now_ns())),
        };
        let c = &self.counters;
        let result = match *cmd {
            Command::Read { offset, len } => {
                c.reads.fetch_add(1, Ordering::Relaxed);
                c.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
                self.check_range(offset, len, false).and_then(|_| {
                    st.read(submit_ns, offset, &mut buf[..len])
                        .map_err(|e| errno(&e, false))
                })
            }
            Command::Write { offset, len, fua } => {
                c.writes.fetch_add(1, Ordering::Relaxed);
                c.bytes_written.fetch_add(len as u64, Ordering::Relaxed);
                self.check_range(offset, len, true).and_then(|_| {
                    st.write(submit_ns, offset, &buf[..len], fua)
                        .map_err(|e| errno(&e, true))
                })
            }
            Command::Flush => {
                c.flushes.fetch_add(1, Ordering::Relaxed);
                st.dev.flush(submit_ns).map_err(|e| errno(&e, false))
            }
            Command::Trim { offset, len, fua } => {
                c.trims.fetch_add(1, Ordering::Relaxed);
                self.check_range(offset, len, false).and_then(|_| {
                    st.trim(submit_ns, offset, len, fua)
                        .map_err(|e| errno(&e, false))
                })
            }
            Command::WriteZeroes {
                offset,
                len,
                fua,
                may_trim,
            } => {
                c.write_zeroes.fetch_add(1, Ordering::Relaxed);
                self.check_range(offset, len, true).and_then(|_| {
                    st.write_zeroes(submit_ns, offset, len, may_trim, fua)
                        .map_err(|e| errno(&e, true))
                })
            }
            Command::Disc => Ok(submit_ns),
        };
        let (errno, done_ns) = match result {
            Ok(done) => (0, done.max(submit_ns)),
            Err(e) => {
                c.errors.fetch_add(1, Ordering::Relaxed);
                (e, submit_ns)
            }
        };
        st.virtual_now_ns = st.virtual_now_ns.max(done_ns);
        drop(st);
        let due_ns = if self.waits() { done_ns } else { 0 };
        Scheduled {
            errno,
            model_ns: done_ns - submit_ns,
            due_ns,
        }
    }

    /// Requests reaching past the end: ENOSPC for writes, EINVAL otherwise (the spec's values).
    fn check_range(&self, offset: u64, len: usize, writing: bool) -> Result<(), u32> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size_bytes => Ok(()),
            _ if writing => Err(proto::ENOSPC),
            _ => Err(proto::EINVAL),
        }
    }

    /// Records the latencies of a request whose reply is going out now.
    pub fn record(&self, model_ns: Nanos, arrived_ns: Nanos) {
        let served = self.clock.now_ns().saturating_sub(arrived_ns);
        let mut l = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        // Values beyond the histogram's hour are clamped rather than dropped.
        l.model_ns.saturating_record(model_ns.max(1));
        l.served_ns.saturating_record(served.max(1));
    }

    /// Flushes the device (used at shutdown so that acknowledged writes are durable).
    pub fn flush_device(&self) -> Result<(), FtlError> {
        let mut st = self.lock();
        let at = st.virtual_now_ns;
        st.dev.flush(at).map(|_| ())
    }

    /// Everything the server knows, as the JSON of `--stats-file`.
    pub fn report(&self, uptime_s: f64) -> serde_json::Value {
        let (ftl, nand) = {
            let st = self.lock();
            let d = st.dev.inner();
            (d.report(), d.nand().map(|n| n.report()))
        };
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let lat = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let summary = |h: &Histogram<u64>| {
            json!({
                "count": h.len(),
                "mean": h.mean() / 1e3,
                "p50": h.value_at_quantile(0.5) as f64 / 1e3,
                "p99": h.value_at_quantile(0.99) as f64 / 1e3,
                "max": h.max() as f64 / 1e3,
            })
        };
        json!({
            "target": self.name,
            "clock": self.mode,
            "size_bytes": self.size_bytes,
            "uptime_s": uptime_s,
            "connections": {
                "accepted": get(&c.connections_accepted),
                "active": get(&c.connections_active),
                "refused": get(&c.connections_refused),
                "protocol_errors": get(&c.protocol_errors),
            },
            "requests": {
                "read": get(&c.reads),
                "write": get(&c.writes),
                "flush": get(&c.flushes),
                "trim": get(&c.trims),
                "write_zeroes": get(&c.write_zeroes),
                "errors": get(&c.errors),
                "bytes_read": get(&c.bytes_read),
                "bytes_written": get(&c.bytes_written),
            },
            "latency_us": { "model": summary(&lat.model_ns), "served": summary(&lat.served_ns) },
            "ftl": ftl,
            "nand": nand,
        })
    }
}

/// Maps a device error to the protocol's error values. Out-of-range writes are ENOSPC and
/// out-of-range reads and trims EINVAL, as the spec asks.
pub fn errno(e: &FtlError, writing: bool) -> u32 {
    match e {
        FtlError::OutOfRange { .. } if writing => proto::ENOSPC,
        FtlError::OutOfRange { .. } | FtlError::Misaligned { .. } | FtlError::Unsupported(_) => {
            proto::EINVAL
        }
        FtlError::NoSpace(_) => proto::ENOSPC,
        FtlError::Overwrite { .. } => proto::EPERM,
        FtlError::Flash(_) | FtlError::Recovery(_) | FtlError::Config(_) => proto::EIO,
    }
}
