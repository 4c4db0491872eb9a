//! One client connection: handshake, then the transmission phase as a pipeline of two threads.
//!
//! The *reader* (the connection's own thread) reads a request, schedules it on the export (the
//! device lock is held only for that), and hands the reply to the *writer*, then reads the next
//! request at once. The writer sends each reply when its modelled completion time comes (at
//! once under `--clock none`), the earliest first, so a client with many requests in flight
//! sees them complete as the device model says, not one after another.
//!
//! Invariants:
//! 1. Requests of a connection are scheduled in the order they arrive.
//! 2. Every request except DISC gets exactly one reply, carrying its handle; a READ reply
//!    carries data only on success.
//! 3. A reply is not sent before its due time (real clock); replies due at the same time go
//!    out in arrival order.
//! 4. Memory per connection is bounded: at most `MAX_IN_FLIGHT` requests and
//!    `MAX_IN_FLIGHT_BYTES` of payload wait for the writer; the reader stops reading until the
//!    writer catches up. Buffers are reused (no allocation per request once warm).
//! 5. A protocol violation, or an I/O error on either side, ends this connection only.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use nand::Nanos;

use super::export::Export;
use super::handshake::{negotiate, Handshake};
use super::proto::*;

/// Requests that may wait for the writer at once, per connection.
pub const MAX_IN_FLIGHT: usize = 64;
/// Payload bytes that may wait for the writer at once, per connection (two maximal requests).
pub const MAX_IN_FLIGHT_BYTES: usize = 2 * MAX_PAYLOAD_BYTES as usize;
/// Buffers kept for reuse, and the largest one kept.
const POOL_BUFFERS: usize = MAX_IN_FLIGHT;
const POOL_MAX_BUFFER_BYTES: usize = 1 << 20;
/// Socket buffer sizes: a few maximal-QD 4 KiB requests or one 128 KiB request per syscall.
const IO_BUFFER_BYTES: usize = 256 << 10;
/// Below this much time before a reply is due, the writer spins instead of sleeping.
const SPIN_WINDOW_NS: u64 = 200_000;

/// How a connection ended, for the log.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// NBD_OPT_ABORT, or the client left during the handshake.
    Handshake,
    /// NBD_CMD_DISC.
    Disconnect,
    /// The client closed the socket between requests.
    Closed,
    /// The writer could not send (the client went away).
    WriteFailed,
}

/// A reply waiting for its due time.
struct Reply {
    due_ns: Nanos,
    seq: u64,
    handle: u64,
    errno: u32,
    /// The read data (`len` bytes of `buf`) or a buffer to give back.
    buf: Vec<u8>,
    data_len: usize,
    model_ns: Nanos,
    arrived_ns: Nanos,
    /// Payload bytes reserved in the budget for this request.
    reserved: usize,
}

impl PartialEq for Reply {
    fn eq(&self, o: &Self) -> bool {
        (self.due_ns, self.seq) == (o.due_ns, o.seq)
    }
}
impl Eq for Reply {}
impl PartialOrd for Reply {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Reply {
    /// Reversed, so that `BinaryHeap` (a max-heap) yields the earliest due first.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        (o.due_ns, o.seq).cmp(&(self.due_ns, self.seq))
    }
}

/// The in-flight budget shared by reader and writer (invariant 4), and the buffer pool.
#[derive(Default)]
struct Budget {
    state: Mutex<BudgetState>,
    freed: Condvar,
}

#[derive(Default)]
struct BudgetState {
    requests: usize,
    bytes: usize,
    writer_gone: bool,
    pool: Vec<Vec<u8>>,
}

impl Budget {
    fn lock(&self) -> std::sync::MutexGuard<'_, BudgetState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for room for one request of `bytes` and returns a buffer of at least that size;
    /// `None` if the writer is gone.
    fn acquire(&self, bytes: usize) -> Option<Vec<u8>> {
        let mut st = self.lock();
        // A request always fits when nothing is in flight, whatever its size.
        while !st.writer_gone && st.requests > 0 && (st.requests >= MAX_IN_FLIGHT || st.bytes + bytes > MAX_IN_FLIGHT_BYTES) {
            st = self.freed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.writer_gone {
            return None;
        }
        st.requests += 1;
        st.bytes += bytes;
        let mut buf = st.pool.pop().unwrap_or_default();
        drop(st);
        if buf.len() < bytes {
            buf.resize(bytes, 0); // zeroing happens once per buffer growth, not per request
        }
        Some(buf)
    }

    fn release(&self, bytes: usize, buf: Vec<u8>) {
        let mut st = self.lock();
        st.requests -= 1;
        st.bytes -= bytes;
        if st.pool.len() < POOL_BUFFERS && buf.capacity() <= POOL_MAX_BUFFER_BYTES {
            st.pool.push(buf);
        }
        drop(st);
        self.freed.notify_one();
    }

    fn writer_gone(&self) {
        self.lock().writer_gone = true;
        self.freed.notify_all();
    }
}

/// Serves one connection from handshake to end. `shutdown` is called when the writer fails so
/// that a reader blocked on the socket wakes up (a no-op for in-memory streams).
pub fn serve<R: Read, W: Write + Send>(export: &Export, reader: R, writer: W, shutdown: &(dyn Fn() + Sync)) -> Result<Ended, ProtoError> {
    let mut r = BufReader::with_capacity(IO_BUFFER_BYTES, reader);
    let mut w = BufWriter::with_capacity(IO_BUFFER_BYTES, writer);
    if negotiate(export, &mut r, &mut w)? == Handshake::Ended {
        return Ok(Ended::Handshake);
    }
    let budget = Budget::default();
    let (tx, rx) = mpsc::channel::<Reply>();
    std::thread::scope(|s| {
        let writer = std::thread::Builder::new()
            .name("nbd-writer".into())
            .spawn_scoped(s, || {
                let res = write_replies(export, &mut w, rx, &budget);
                budget.writer_gone();
                if res.is_err() {
                    shutdown();
                }
                res
            });
        let writer = match writer {
            Ok(h) => h,
            Err(e) => return Err(ProtoError::Io(e)),
        };
        let read_result = read_requests(export, &mut r, tx, &budget);
        let write_result = writer.join().unwrap_or_else(|_| Err(std::io::Error::other("reply writer panicked")));
        match (read_result, write_result) {
            (Err(e), _) => Err(e),
            (Ok(_), Err(_)) => Ok(Ended::WriteFailed),
            (Ok(end), Ok(())) => Ok(end),
        }
    })
}

/// The reader: reads and schedules requests until DISC, end of stream or a violation.
fn read_requests(export: &Export, r: &mut impl Read, tx: mpsc::Sender<Reply>, budget: &Budget) -> Result<Ended, ProtoError> {
    let mut head = [0u8; REQUEST_HEADER_BYTES];
    let mut seq = 0u64;
    loop {
        if !read_exact_or_eof(r, &mut head)? {
            return Ok(Ended::Closed);
        }
        let h = RequestHeader::decode(&head)?;
        let payload = h.payload_bytes();
        if payload > MAX_PAYLOAD_BYTES {
            // We cannot stay in step without reading it all; the client broke the advertised
            // maximum, so this is a hard disconnect (the spec allows it).
            return Err(ProtoError::PayloadTooLarge(payload));
        }
        let cmd = h.command();
        if cmd == Ok(Command::Disc) {
            return Ok(Ended::Disconnect);
        }
        let bytes = match cmd {
            Ok(Command::Read { len, .. }) => len,
            _ => payload as usize,
        };
        let Some(mut buf) = budget.acquire(bytes) else {
            return Ok(Ended::WriteFailed);
        };
        read_full(r, &mut buf[..payload as usize])?;
        let arrived_ns = export.clock().now_ns();
        let (sched, data_len) = match cmd {
            Ok(c) => {
                let s = export.schedule(&c, &mut buf);
                let data = if let Command::Read { len, .. } = c { len } else { 0 };
                (s, if s.errno == 0 { data } else { 0 })
            }
            Err(errno) => {
                export.counters.errors.fetch_add(1, Ordering::Relaxed);
                (super::export::Scheduled { errno, model_ns: 0, due_ns: 0 }, 0)
            }
        };
        seq += 1;
        let reply = Reply { due_ns: sched.due_ns, seq, handle: h.handle, errno: sched.errno, buf, data_len, model_ns: sched.model_ns, arrived_ns, reserved: bytes };
        if tx.send(reply).is_err() {
            return Ok(Ended::WriteFailed);
        }
    }
}

/// The writer: sends replies when due, earliest first (invariant 3), flushing the socket
/// whenever nothing else is ready to go.
fn write_replies(export: &Export, w: &mut impl Write, rx: mpsc::Receiver<Reply>, budget: &Budget) -> std::io::Result<()> {
    let clock = export.clock();
    let mut heap: BinaryHeap<Reply> = BinaryHeap::new();
    let mut open = true;
    let mut dirty = false;
    loop {
        // Take everything already queued, without blocking.
        while open {
            match rx.try_recv() {
                Ok(r) => heap.push(r),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        let now = clock.now_ns();
        let next_due = heap.peek().map(|r| r.due_ns);
        if dirty && next_due.is_none_or(|d| d > now) {
            w.flush()?;
            dirty = false;
        }
        let Some(due) = next_due else {
            if !open {
                return Ok(());
            }
            match rx.recv() {
                Ok(r) => heap.push(r),
                Err(_) => open = false,
            }
            continue;
        };
        if due > now {
            let left = due - now;
            if open && left > SPIN_WINDOW_NS {
                // Sleep until nearly due, but wake for a new reply that may be due earlier.
                match rx.recv_timeout(Duration::from_nanos(left - SPIN_WINDOW_NS)) {
                    Ok(r) => heap.push(r),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => open = false,
                }
                continue;
            }
            clock.wait_until(due);
        }
        let Some(r) = heap.pop() else { continue };
        let sent = send_reply(w, &r);
        export.record(r.model_ns, r.arrived_ns);
        budget.release(r.reserved, r.buf);
        sent?;
        dirty = true;
    }
}

fn send_reply(w: &mut impl Write, r: &Reply) -> std::io::Result<()> {
    w.write_all(&simple_reply(r.errno, r.handle))?;
    if r.data_len > 0 {
        w.write_all(&r.buf[..r.data_len])?;
    }
    Ok(())
}
