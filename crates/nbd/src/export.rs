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
//! 6. Fairness across connections (fair queueing into the device):
//!    - a READ, WRITE, TRIM or WRITE_ZEROES holds the lock for at most `CHUNK_BYTES` at a time
//!      (a large one runs as chunks, other connections' requests scheduled in between);
//!    - under `--clock real`, each connection may have at most `WINDOW_BYTES` of device work
//!      ahead of the wall clock in the model (its `Pacer`, kept across its requests): a client
//!      writing 32 MiB requests back to back cannot queue seconds of programming in front of
//!      everyone else's reads, and N busy connections put at most N windows in front of a new
//!      request. FLUSH is not paced (it carries no data; it is scheduled under the lock like
//!      any request and does not hold the lock while it completes).
//!    - The lock itself is the standard mutex, which wakes a waiter at every release but does
//!      not hand the lock over in arrival order. A FIFO lock (tokio's, tried) gave the same
//!      tail latency beside four 32 MiB writers (p99 112 ms against 111-124 ms, debug build)
//!      and 4 ms against 6-9 ms beside 64 connections flushing in a loop, but cost 25-35% of
//!      the requests per second of four connections at QD8 under `--clock none`, since every
//!      release then waits for the next waiter to be scheduled: bounded holds and the window
//!      are what keep other connections served.
//!
//!    A large request is therefore not atomic with respect to concurrent requests on other
//!    connections that overlap it, which NBD does not promise either.
//! 7. BLOCK_STATUS reports a hole only where the device's map says the page is unmapped
//!    (trimmed or never written: it reads as zeros); everything else is data.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use ftl::{BlockDevice, ByteDevice, FtlError};
use hdrhistogram::Histogram;
use nand::{ClockMode, Nanos, RealClock};
use serde_json::json;

use crate::proto::{self, Command};

/// A device shared by the connections of one server.
#[derive(Debug)]
pub struct Export {
    /// The device lock: the standard mutex, not a FIFO one (invariant 6 says why).
    dev: Mutex<DeviceState>,
    clock: RealClock,
    mode: ClockMode,
    size_bytes: u64,
    name: String,
    pub counters: Counters,
    /// Latency histograms, one per shard: a connection's thread records into its own shard
    /// (`latency_shard`), so that connections on different cores do not take one lock (and
    /// move one cache line) per request; the report adds the shards up.
    latency: Box<[LatencyShard]>,
}

/// Shards of the latency histograms: more than the connections usually busy at once.
const LATENCY_SHARDS: usize = 8;

/// One shard, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct LatencyShard(Mutex<Latency>);

/// The shard of the calling thread: threads take shards in turn as they first record.
fn latency_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % LATENCY_SHARDS;
    }
    SHARD.with(|s| *s)
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

/// Appends one `base:allocation` extent; `len` is at most `MAX_STATUS_BYTES`, so it fits.
fn push_extent(out: &mut Vec<u8>, len: u64, flags: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
}

/// Bytes of a READ, TRIM or WRITE_ZEROES served under one hold of the device lock (invariant
/// 6): 256 logical pages. On `tiny` (8 planes, 200 us programs) a NO_HOLE write-zeroes chunk is
/// 6.4 ms of modelled programming, so a request on another connection waits for at most two
/// chunks, not for the whole request (tests/nbd_hardening.rs measured a 4 KiB read at 20 ms
/// beside a 256 MiB write-zeroes that took 3.7 s).
pub const CHUNK_BYTES: u64 = 1 << 20;

/// Device work one connection may have ahead of the wall clock in the model, under `--clock
/// real` (invariant 6): two chunks, so that a large request keeps the device busy (one chunk
/// runs while the next is scheduled) without queueing more in front of other connections.
/// Small requests are not held back by it: 64 requests of 4 KiB in flight are 256 KiB.
pub const WINDOW_BYTES: u64 = 2 * CHUNK_BYTES;

/// The device work one connection has scheduled that the wall clock has not reached yet
/// (invariant 6). Each connection's reader keeps one across its requests.
#[derive(Debug, Default)]
pub struct Pacer {
    /// (modelled completion, bytes) of each chunk still ahead of the clock.
    ahead: Vec<(Nanos, u64)>,
    bytes: u64,
}

impl Pacer {
    /// Waits (outside the lock) until `bytes` more fit in the window. A chunk larger than the
    /// window, or any chunk when nothing is ahead, goes at once.
    fn wait_for_room(&mut self, clock: &RealClock, bytes: u64) {
        loop {
            let now = clock.now_ns();
            let mut passed = 0;
            self.ahead.retain(|&(done, b)| {
                let ahead = done > now;
                if !ahead {
                    passed += b;
                }
                ahead
            });
            self.bytes -= passed;
            if self.ahead.is_empty() || self.bytes + bytes <= WINDOW_BYTES {
                return;
            }
            let earliest = self.ahead.iter().map(|&(d, _)| d).min().unwrap_or(now);
            // A plain sleep: pacing needs no precision (the window keeps a chunk in reserve).
            std::thread::sleep(Duration::from_nanos(
                earliest.saturating_sub(now).max(1_000),
            ));
        }
    }

    fn add(&mut self, done: Nanos, bytes: u64) {
        self.ahead.push((done, bytes));
        self.bytes += bytes;
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
    pub block_status: AtomicU64,
    pub errors: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub connections_accepted: AtomicU64,
    pub connections_active: AtomicU64,
    pub connections_refused: AtomicU64,
    /// Connections closed for a stalled handshake or a request cut short by a stall.
    pub connections_timed_out: AtomicU64,
    /// Idle established connections closed to give their slot to a new client.
    pub connections_idle_closed: AtomicU64,
    /// Half-open connections closed (oldest first) to make room for a new one.
    pub connections_evicted_half_open: AtomicU64,
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

impl Latency {
    fn new() -> Self {
        Latency {
            model_ns: histogram(),
            served_ns: histogram(),
        }
    }
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
            latency: (0..LATENCY_SHARDS)
                .map(|_| LatencyShard(Mutex::new(Latency::new())))
                .collect(),
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

    /// The submit time of a request scheduled now (invariants 2 and 3).
    fn submit_ns(&self, st: &DeviceState) -> Nanos {
        match self.mode {
            ClockMode::Real => self.clock.now_ns(),
            _ => st
                .virtual_now_ns
                .max(st.dev.inner().nand().map_or(0, |n| n.now_ns())),
        }
    }

    /// Runs `cmd` on the device (invariant 1: under the lock only for the call itself; READ,
    /// WRITE, TRIM and WRITE_ZEROES in chunks, paced by the connection's `pacer`, invariant 6).
    /// `buf` holds the payload of a write or receives the data of a read.
    pub fn schedule(&self, cmd: &Command, buf: &mut [u8], pacer: &mut Pacer) -> Scheduled {
        let c = &self.counters;
        let (submit_ns, result) = match *cmd {
            Command::Read { offset, len } => {
                c.reads.fetch_add(1, Ordering::Relaxed);
                c.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
                self.chunked(offset, len, false, pacer, |st, at, off, rel, n, _| {
                    st.read(at, off, &mut buf[rel..rel + n])
                        .map_err(|e| errno(&e, false))
                })
            }
            Command::Write { offset, len, fua } => self.write_cmd(offset, len, fua, buf, pacer),
            Command::Flush => {
                c.flushes.fetch_add(1, Ordering::Relaxed);
                self.once(|st, at| st.dev.flush(at).map_err(|e| errno(&e, false)))
            }
            Command::Trim { offset, len, fua } => {
                c.trims.fetch_add(1, Ordering::Relaxed);
                // FUA: one flush after the last chunk covers them all.
                self.chunked(offset, len, false, pacer, |st, at, off, _, n, last| {
                    st.trim(at, off, n, fua && last)
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
                self.chunked(offset, len, true, pacer, |st, at, off, _, n, _| {
                    st.write_zeroes(at, off, n, may_trim, fua)
                        .map_err(|e| errno(&e, true))
                })
            }
            // Served by `block_status` (its reply is not a plain buffer); here only if the
            // caller did not route it, which is a refusal, not a panic.
            Command::BlockStatus { .. } => self.once(|_, _| Err(proto::EINVAL)),
            Command::Disc => self.once(|_, at| Ok(at)),
        };
        self.finish(submit_ns, result)
    }

    /// Runs a WRITE whose data is `data` (`len` bytes; the caller's buffer, which may be the
    /// connection's input buffer: no copy before the device's own). Other commands are refused.
    pub fn schedule_write(&self, cmd: &Command, data: &[u8], pacer: &mut Pacer) -> Scheduled {
        let (submit_ns, result) = match *cmd {
            Command::Write { offset, len, fua } if data.len() >= len => {
                self.write_cmd(offset, len, fua, data, pacer)
            }
            _ => self.once(|_, _| Err(proto::EINVAL)),
        };
        self.finish(submit_ns, result)
    }

    fn write_cmd(
        &self,
        offset: u64,
        len: usize,
        fua: bool,
        data: &[u8],
        pacer: &mut Pacer,
    ) -> (Nanos, Result<Nanos, u32>) {
        let c = &self.counters;
        c.writes.fetch_add(1, Ordering::Relaxed);
        c.bytes_written.fetch_add(len as u64, Ordering::Relaxed);
        // FUA on every chunk: each is durable when its call returns, as the device's contract
        // says of a FUA write (ByteDevice::write_zeroes does the same).
        self.chunked(offset, len, true, pacer, |st, at, off, rel, n, _| {
            st.write(at, off, &data[rel..rel + n], fua)
                .map_err(|e| errno(&e, true))
        })
    }

    /// The outcome of a request submitted at `submit_ns`.
    fn finish(&self, submit_ns: Nanos, result: Result<Nanos, u32>) -> Scheduled {
        let (errno, done_ns) = match result {
            Ok(done) => (0, done.max(submit_ns)),
            Err(e) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                (e, submit_ns)
            }
        };
        let due_ns = if self.waits() { done_ns } else { 0 };
        Scheduled {
            errno,
            model_ns: done_ns - submit_ns,
            due_ns,
        }
    }

    /// Runs `f` under one hold of the lock; returns the submit time and the completion.
    fn once(
        &self,
        f: impl FnOnce(&mut DeviceState, Nanos) -> Result<Nanos, u32>,
    ) -> (Nanos, Result<Nanos, u32>) {
        let mut st = self.lock();
        let at = self.submit_ns(&st);
        let r = f(&mut st, at);
        if let Ok(done) = r {
            st.virtual_now_ns = st.virtual_now_ns.max(done);
        }
        (at, r)
    }

    /// Runs a READ, WRITE, TRIM or WRITE_ZEROES of `[offset, offset + len)` in chunks that end
    /// on multiples of `CHUNK_BYTES` (invariant 6), releasing the lock between them so that
    /// other connections' requests are scheduled in between. `f(state, at, offset, offset from
    /// the start, bytes, last)` runs one chunk. Under `--clock real` a chunk is submitted at
    /// the wall clock's now, once the connection's `pacer` has room for it: the request keeps
    /// the device busy (two chunks in the model at once) without queueing seconds of work in
    /// front of everyone else. Under `--clock none` every chunk is submitted at the first one's
    /// time, so the model's figures are those of the unsplit request.
    fn chunked(
        &self,
        offset: u64,
        len: usize,
        writing: bool,
        pacer: &mut Pacer,
        mut f: impl FnMut(&mut DeviceState, Nanos, u64, usize, usize, bool) -> Result<Nanos, u32>,
    ) -> (Nanos, Result<Nanos, u32>) {
        if let Err(e) = self.check_range(offset, len, writing) {
            let st = self.lock();
            return (self.submit_ns(&st), Err(e));
        }
        let end = offset + len as u64;
        let mut pos = offset;
        let mut first_at = None;
        let mut done_all: Nanos = 0;
        loop {
            let next = end.min((pos / CHUNK_BYTES + 1) * CHUNK_BYTES);
            if self.waits() {
                pacer.wait_for_room(&self.clock, next - pos);
            }
            let mut st = self.lock();
            let at = match (self.mode, first_at) {
                (ClockMode::Real, _) | (_, None) => self.submit_ns(&st),
                (_, Some(t)) => t,
            };
            let first = *first_at.get_or_insert(at);
            let r = f(
                &mut st,
                at,
                pos,
                (pos - offset) as usize,
                (next - pos) as usize,
                next >= end,
            );
            match r {
                Ok(done) => {
                    st.virtual_now_ns = st.virtual_now_ns.max(done);
                    done_all = done_all.max(done);
                    if self.waits() {
                        pacer.add(done, next - pos);
                    }
                }
                Err(e) => return (first, Err(e)),
            }
            drop(st);
            pos = next;
            if pos >= end {
                return (first, Ok(done_all));
            }
        }
    }

    /// BLOCK_STATUS for `base:allocation`: writes the reply payload (the context id, then
    /// (length, flags) extents) into `out`. Pages the device reports unmapped are holes that
    /// read as zeros; pages it reports mapped, or cannot tell about, are data. Extents are
    /// merged, cover at most `MAX_STATUS_BYTES` and `MAX_EXTENTS` (the client asks again for
    /// the rest), and never reach past the request. The answer comes from the device's map in
    /// host memory: no flash operation, no modelled time.
    pub fn block_status(
        &self,
        offset: u64,
        len: usize,
        req_one: bool,
        out: &mut Vec<u8>,
    ) -> Scheduled {
        self.counters.block_status.fetch_add(1, Ordering::Relaxed);
        out.clear();
        let (at, r) = self.once(|st, at| {
            self.check_range(offset, len, false)?;
            let page = ftl::LOGICAL_PAGE_BYTES as u64;
            let end = offset + (len as u64).min(proto::MAX_STATUS_BYTES);
            out.extend_from_slice(&proto::BASE_ALLOCATION_ID.to_be_bytes());
            let mut extents = 0usize;
            let mut cur: Option<(u64, u32)> = None;
            let mut pos = offset;
            while pos < end {
                let lpn = pos / page;
                let upto = end.min((lpn + 1) * page);
                let flags = match st.dev.inner().mapped(lpn) {
                    Some(false) => proto::STATE_HOLE | proto::STATE_ZERO,
                    _ => 0,
                };
                cur = match cur {
                    Some((l, f)) if f == flags => Some((l + (upto - pos), f)),
                    Some((l, f)) => {
                        push_extent(out, l, f);
                        extents += 1;
                        if req_one || extents == proto::MAX_EXTENTS {
                            return Ok(at);
                        }
                        Some((upto - pos, flags))
                    }
                    None => Some((upto - pos, flags)),
                };
                pos = upto;
            }
            if let Some((l, f)) = cur {
                push_extent(out, l, f);
            }
            Ok(at)
        });
        if r.is_err() {
            out.clear();
        }
        self.finish(at, r)
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
        let mut l = self.latency[latency_shard()]
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner());
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
        let mut lat = Latency::new();
        for shard in self.latency.iter() {
            let l = shard.0.lock().unwrap_or_else(|p| p.into_inner());
            // Same bounds in every shard: adding cannot fail.
            let _ = lat.model_ns.add(&l.model_ns);
            let _ = lat.served_ns.add(&l.served_ns);
        }
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
                "timed_out": get(&c.connections_timed_out),
                "idle_closed": get(&c.connections_idle_closed),
                "half_open_closed": get(&c.connections_evicted_half_open),
                "protocol_errors": get(&c.protocol_errors),
            },
            "requests": {
                "read": get(&c.reads),
                "write": get(&c.writes),
                "flush": get(&c.flushes),
                "trim": get(&c.trims),
                "write_zeroes": get(&c.write_zeroes),
                "block_status": get(&c.block_status),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection's work ahead of the clock stays within `WINDOW_BYTES`: with two chunks
    /// ahead (completing 50 ms and 10 s from now: far enough that no stall of a loaded
    /// machine reaches it), a third waits for the first to complete, and small requests do
    /// not wait while there is room.
    #[test]
    fn pacer_holds_a_connection_to_its_window() {
        let clock = RealClock::new();
        let mut p = Pacer::default();
        let now = clock.now_ns();
        p.add(now + 50_000_000, CHUNK_BYTES);
        p.add(now + 10_000_000_000, CHUNK_BYTES - 4096);
        let t = std::time::Instant::now();
        p.wait_for_room(&clock, 4096);
        // Room for 4 KiB: no wait (no upper bound asserted: a loaded machine may be slow).
        p.add(now + 10_000_000_000, 4096);
        p.wait_for_room(&clock, CHUNK_BYTES);
        // A lower bound only: the wait cannot end before the first chunk's completion.
        assert!(
            clock.now_ns() >= now + 50_000_000,
            "waited {:?}",
            t.elapsed()
        );
        assert_eq!(p.bytes, CHUNK_BYTES);
        assert_eq!(p.ahead.len(), 2);
    }

    /// Nothing ahead: even a request larger than the window goes at once.
    #[test]
    fn pacer_lets_any_chunk_go_when_nothing_is_ahead() {
        let clock = RealClock::new();
        let mut p = Pacer::default();
        p.wait_for_room(&clock, 64 * CHUNK_BYTES);
        p.add(clock.now_ns(), 64 * CHUNK_BYTES);
        // Its completion has passed: the next one goes at once as well.
        p.wait_for_room(&clock, CHUNK_BYTES);
        assert_eq!(p.bytes, 0);
    }

    /// A long WRITE is scheduled in chunks (invariant 6): under `--clock none` all at the first
    /// chunk's time, so the model's figures are those of the unsplit write, and the data lands.
    #[test]
    fn long_write_runs_in_chunks_and_lands_whole() {
        let ex = Export::new(Box::new(ftl::MemDisk::new(2048)), ClockMode::None);
        let len = 3 * CHUNK_BYTES as usize + 1000;
        let mut data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut pacer = Pacer::default();
        let s = ex.schedule(
            &Command::Write {
                offset: 700,
                len,
                fua: true,
            },
            &mut data,
            &mut pacer,
        );
        assert_eq!(s.errno, 0);
        let mut back = vec![0u8; len];
        let r = ex.schedule(&Command::Read { offset: 700, len }, &mut back, &mut pacer);
        assert_eq!(r.errno, 0);
        assert!(back == data, "data read back differs");
        assert!(pacer.ahead.is_empty(), "--clock none paces nothing");
    }
}
