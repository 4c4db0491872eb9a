//! Block I/O traces for `noftl io --replay FILE --format blktrace|msr|iolog`: read into one list
//! of requests (time from the first request, operation, byte offset and length), in time order.
//!
//! Formats (the facts of each, from its own definition):
//! - `blktrace`: the binary event stream blktrace writes (`struct blk_io_trace`, version 7: a
//!   48-byte header, then `pdu_len` bytes), in the machine's byte order (recognised by the
//!   magic either way). A request is a *queue* event (`Q`, action 1) of a read, write or
//!   discard; the other events of its life (G, I, D, C, merges) and notes are skipped. Per-CPU
//!   files may be concatenated: events are put in time order.
//! - `msr`: the MSR Cambridge traces (SNIA IOTTA), CSV lines `Timestamp,Hostname,DiskNumber,
//!   Type,Offset,Size,ResponseTime`, the timestamp in Windows file time (100 ns ticks), `Type`
//!   Read or Write, offset and size in bytes; a header line is skipped.
//! - `iolog`: fio's I/O logs, version 2 (`filename action [offset length]`, no times; `wait`
//!   lines carry a delay in microseconds) and version 3 (each line starts with its time in
//!   microseconds). Actions read, write, trim are requests; add, open, close, sync, datasync are
//!   skipped (counted).
//!
//! Invariant: `requests` are sorted by `at_ns` (stable: the file's order among equal times),
//! the first at 0; every request has a length above 0.

use std::fmt;
use std::str::FromStr;

/// When the replayed requests are submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// At the trace's times (open loop).
    Trace,
    /// As fast as possible, `--qd` in flight (closed loop).
    Afap,
}

impl std::str::FromStr for Pace {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "trace" => Ok(Pace::Trace),
            "afap" => Ok(Pace::Afap),
            other => Err(format!("unknown replay pace {other:?} (trace, afap)")),
        }
    }
}

/// A trace to replay.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The file, as named on the command line (for the result).
    pub file: String,
    pub format: Format,
    pub trace: Trace,
    pub pace: Pace,
}

/// What the result says of a replay.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplayInfo {
    pub file: String,
    pub format: String,
    pub pace: &'static str,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    /// Bytes the requests touched, rounded out to 4 KiB pages.
    pub bytes: u64,
    /// Requests beyond the device's end, folded onto it.
    pub folded: u64,
    /// Trace events or lines that were no request.
    pub skipped: u64,
    /// The trace's own span, first to last request (s).
    pub trace_seconds: f64,
    /// The most requests in flight at once.
    pub peak_in_flight: u32,
}

/// A trace file's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Blktrace,
    Msr,
    Iolog,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "blktrace" => Ok(Format::Blktrace),
            "msr" => Ok(Format::Msr),
            "iolog" => Ok(Format::Iolog),
            other => Err(format!(
                "unknown trace format {other:?} (blktrace, msr, iolog)"
            )),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Blktrace => "blktrace",
            Format::Msr => "msr",
            Format::Iolog => "iolog",
        })
    }
}

/// What a traced request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Trim,
}

/// One traced request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// From the first request of the trace.
    pub at_ns: u64,
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

/// A trace, read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub requests: Vec<Request>,
    /// Events or lines that are no request (file actions, syncs, completions, notes).
    pub skipped: u64,
}

/// Why a trace was refused: where (a line, or a byte offset for blktrace) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError(pub String);

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TraceError {}

/// Reads a trace of `format`.
pub fn parse(format: Format, bytes: &[u8]) -> Result<Trace, TraceError> {
    let mut t = match format {
        Format::Blktrace => blktrace(bytes)?,
        Format::Msr => msr(text(bytes)?)?,
        Format::Iolog => iolog(text(bytes)?)?,
    };
    if t.requests.is_empty() {
        return Err(TraceError(format!("the {format} trace holds no request")));
    }
    t.requests.sort_by_key(|r| r.at_ns);
    let first = t.requests[0].at_ns;
    for r in &mut t.requests {
        r.at_ns -= first;
    }
    Ok(t)
}

fn text(bytes: &[u8]) -> Result<&str, TraceError> {
    std::str::from_utf8(bytes).map_err(|e| {
        TraceError(format!(
            "not text at byte {} (a binary trace? --format blktrace reads blktrace's)",
            e.valid_up_to()
        ))
    })
}

/// blktrace's magic (`BLK_IO_TRACE_MAGIC`) and the version read here.
const BLK_MAGIC: u32 = 0x6561_7400;
const BLK_VERSION: u32 = 0x07;
const BLK_HEADER: usize = 48;
/// `action`: the low 16 bits are the action, the high ones its categories (`BLK_TC_*`).
const BLK_TA_QUEUE: u32 = 1;
const BLK_TC_READ: u32 = 1 << 16;
const BLK_TC_WRITE: u32 = 1 << 17;
const BLK_TC_NOTIFY: u32 = 1 << 26;
const BLK_TC_DISCARD: u32 = 1 << 29;
const SECTOR: u64 = 512;

fn blktrace(b: &[u8]) -> Result<Trace, TraceError> {
    let mut t = Trace::default();
    let mut at = 0;
    while at < b.len() {
        if b.len() - at < BLK_HEADER {
            return Err(TraceError(format!(
                "byte {at}: {} bytes left, a blktrace event has 48",
                b.len() - at
            )));
        }
        let h = &b[at..at + BLK_HEADER];
        let le = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
        let be = |o: usize| u32::from_be_bytes(h[o..o + 4].try_into().expect("4 bytes"));
        // The writer's byte order: the one in which the magic reads right.
        let little = le(0) & 0xFFFF_FF00 == BLK_MAGIC;
        if !little && be(0) & 0xFFFF_FF00 != BLK_MAGIC {
            return Err(TraceError(format!(
                "byte {at}: no blktrace magic (0x65617400) in this event's header"
            )));
        }
        let u32_at = |o: usize| if little { le(o) } else { be(o) };
        let u64_at = |o: usize| {
            let a = h[o..o + 8].try_into().expect("8 bytes");
            if little {
                u64::from_le_bytes(a)
            } else {
                u64::from_be_bytes(a)
            }
        };
        let version = u32_at(0) & 0xFF;
        if version != BLK_VERSION {
            return Err(TraceError(format!(
                "byte {at}: blktrace version {version}; version 7 is read"
            )));
        }
        let pdu = usize::from(if little {
            u16::from_le_bytes([h[46], h[47]])
        } else {
            u16::from_be_bytes([h[46], h[47]])
        });
        let (time, sector, bytes, action) = (u64_at(8), u64_at(16), u32_at(24), u32_at(28));
        at += BLK_HEADER + pdu;
        if at > b.len() {
            return Err(TraceError(format!(
                "the last event's {pdu} bytes of data run past the file's end"
            )));
        }
        let op = if action & 0xFFFF != BLK_TA_QUEUE || action & BLK_TC_NOTIFY != 0 || bytes == 0 {
            None
        } else if action & BLK_TC_DISCARD != 0 {
            Some(Op::Trim)
        } else if action & BLK_TC_WRITE != 0 {
            Some(Op::Write)
        } else if action & BLK_TC_READ != 0 {
            Some(Op::Read)
        } else {
            None
        };
        match op {
            Some(op) => t.requests.push(Request {
                at_ns: time,
                op,
                offset_bytes: sector * SECTOR,
                len_bytes: u64::from(bytes),
            }),
            None => t.skipped += 1,
        }
    }
    Ok(t)
}

/// 100 ns ticks (Windows file time) in ns.
const FILETIME_NS: u64 = 100;

fn msr(text: &str) -> Result<Trace, TraceError> {
    let mut t = Trace::default();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let bad = |what: &str| TraceError(format!("line {}: {what}: {l:?}", i + 1));
        if f.len() < 6 {
            return Err(bad(
                "an MSR line has 7 fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime)",
            ));
        }
        let Ok(ticks) = f[0].parse::<u64>() else {
            if i == 0 {
                t.skipped += 1; // a header
                continue;
            }
            return Err(bad("the timestamp is not a whole number"));
        };
        let op = match f[3].to_ascii_lowercase().as_str() {
            "read" => Op::Read,
            "write" => Op::Write,
            _ => return Err(bad("Type is Read or Write")),
        };
        let num = |s: &str, what: &str| s.parse::<u64>().map_err(|_| bad(what));
        let len = num(f[5], "Size is not a whole number of bytes")?;
        if len == 0 {
            t.skipped += 1;
            continue;
        }
        t.requests.push(Request {
            at_ns: ticks.saturating_mul(FILETIME_NS),
            op,
            offset_bytes: num(f[4], "Offset is not a whole number of bytes")?,
            len_bytes: len,
        });
    }
    Ok(t)
}

fn iolog(text: &str) -> Result<Trace, TraceError> {
    let mut lines = text.lines().enumerate();
    let version = match lines.next().map(|(_, l)| l.trim()) {
        Some("fio version 2 iolog") => 2,
        Some("fio version 3 iolog") => 3,
        other => {
            return Err(TraceError(format!(
            "line 1: {other:?} is no fio iolog header (fio version 2 iolog, fio version 3 iolog)"
        )))
        }
    };
    let mut t = Trace::default();
    let mut now_ns = 0u64;
    for (i, line) in lines {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        let bad = |what: &str| TraceError(format!("line {}: {what}: {l:?}", i + 1));
        let mut f: Vec<&str> = l.split_whitespace().collect();
        if version == 3 {
            let us: u64 = f
                .first()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("a version 3 line starts with its time in microseconds"))?;
            now_ns = us.saturating_mul(1000);
            f.remove(0);
        }
        let action = f.get(1).copied().ok_or_else(|| bad("no action"))?;
        let num = |k: usize, what: &str| {
            f.get(k)
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| bad(what))
        };
        let op = match action {
            "read" => Op::Read,
            "write" => Op::Write,
            "trim" => Op::Trim,
            // The delay (us) is in the offset field, as fio reads it.
            "wait" if version == 2 => {
                now_ns += num(2, "wait needs its delay in microseconds")?.saturating_mul(1000);
                t.skipped += 1;
                continue;
            }
            "add" | "open" | "close" | "sync" | "datasync" => {
                t.skipped += 1;
                continue;
            }
            other => return Err(bad(&format!("unknown action {other}"))),
        };
        let len = num(3, "no length in bytes")?;
        if len == 0 {
            t.skipped += 1;
            continue;
        }
        t.requests.push(Request {
            at_ns: now_ns,
            op,
            offset_bytes: num(2, "no offset in bytes")?,
            len_bytes: len,
        });
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk_event(time: u64, sector: u64, bytes: u32, action: u32, pdu: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((BLK_MAGIC | BLK_VERSION).to_le_bytes());
        v.extend(0u32.to_le_bytes());
        v.extend(time.to_le_bytes());
        v.extend(sector.to_le_bytes());
        v.extend(bytes.to_le_bytes());
        v.extend(action.to_le_bytes());
        v.extend([0u8; 12]); // pid, device, cpu
        v.extend(0u16.to_le_bytes());
        v.extend((pdu.len() as u16).to_le_bytes());
        v.extend(pdu);
        v
    }

    #[test]
    fn the_three_formats_read_the_same_requests() {
        let mut blk = blk_event(5_000, 0, 0, 4 | BLK_TC_NOTIFY, b"proc\0");
        blk.extend(blk_event(
            1_000_000,
            8,
            4096,
            BLK_TA_QUEUE | BLK_TC_READ,
            &[],
        ));
        blk.extend(blk_event(1_000_500, 8, 4096, 8 | BLK_TC_READ, &[])); // its completion
        blk.extend(blk_event(
            3_000_000,
            16,
            8192,
            BLK_TA_QUEUE | BLK_TC_WRITE,
            &[],
        ));
        let msr = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                   10000,hm,0,Read,4096,4096,30\n30000,hm,0,Write,8192,8192,40\n";
        let iolog = "fio version 3 iolog\n0 f add\n1000 f read 4096 4096\n3000 f write 8192 8192\n";
        let want = vec![
            Request {
                at_ns: 0,
                op: Op::Read,
                offset_bytes: 4096,
                len_bytes: 4096,
            },
            Request {
                at_ns: 2_000_000,
                op: Op::Write,
                offset_bytes: 8192,
                len_bytes: 8192,
            },
        ];
        for (f, b) in [
            (Format::Blktrace, blk.as_slice()),
            (Format::Msr, msr.as_bytes()),
            (Format::Iolog, iolog.as_bytes()),
        ] {
            assert_eq!(parse(f, b).unwrap().requests, want, "{f}");
        }
        assert_eq!(parse(Format::Blktrace, &blk).unwrap().skipped, 2);
    }

    #[test]
    fn bad_traces_are_refused_with_where() {
        let e = parse(Format::Msr, b"1,hm,0,Erase,0,4096,1\n").unwrap_err();
        assert!(
            e.0.contains("line 1") && e.0.contains("Read or Write"),
            "{e}"
        );
        let e = parse(Format::Iolog, b"1 f read 0 4096\n").unwrap_err();
        assert!(e.0.contains("no fio iolog header"), "{e}");
        let e = parse(Format::Blktrace, &[0u8; 48]).unwrap_err();
        assert!(e.0.contains("magic"), "{e}");
        let e = parse(Format::Iolog, b"fio version 2 iolog\nf add\n").unwrap_err();
        assert!(e.0.contains("no request"), "{e}");
        // v2: no times but waits.
        let t = parse(
            Format::Iolog,
            b"fio version 2 iolog\nf read 0 4096\nf wait 250 0\nf trim 0 8192\n",
        )
        .unwrap();
        assert_eq!(t.requests[1].at_ns, 250_000);
        assert_eq!(t.requests[1].op, Op::Trim);
    }
}
