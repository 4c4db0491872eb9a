//! NBD wire format: constants, request decoding and reply encoding, written from the upstream
//! protocol document (NetworkBlockDevice `doc/proto.md`). Everything here is pure (no I/O
//! beyond the `Read`/`Write` it is handed) so that it can be fuzzed.
//!
//! Invariants:
//! 1. Decoding never panics and never allocates from a length field: every length is checked
//!    against a fixed bound before any buffer is sized from it.
//! 2. A request is classified into exactly one of: a command to run, an error to reply with
//!    (the connection goes on), or a fatal protocol violation (the connection is dropped).
//! 3. All integers on the wire are big-endian.

use std::io::{self, Read, Write};

// Handshake magics.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943; // "NBDMAGIC"
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054; // "IHAVEOPT"
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const TF_HAS_FLAGS: u16 = 1 << 0;
pub const TF_SEND_FLUSH: u16 = 1 << 2;
pub const TF_SEND_FUA: u16 = 1 << 3;
pub const TF_SEND_TRIM: u16 = 1 << 5;
pub const TF_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TF_CAN_MULTI_CONN: u16 = 1 << 8;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR + 1;
pub const REP_ERR_POLICY: u32 = REP_ERR + 2;
pub const REP_ERR_INVALID: u32 = REP_ERR + 3;

// Info types carried by REP_INFO.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Transmission.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const REQUEST_HEADER_BYTES: usize = 28;
pub const SIMPLE_REPLY_BYTES: usize = 16;

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

// Structured replies.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;
pub const STRUCTURED_REPLY_HEADER_BYTES: usize = 20;
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// The one metadata context served, and the id it is announced under.
pub const META_BASE_ALLOCATION: &str = "base:allocation";
pub const BASE_ALLOCATION_ID: u32 = 1;
/// `base:allocation` status bits: the range reads as zeros and takes no storage (trimmed or
/// never written).
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;
/// Most extents in one BLOCK_STATUS reply (8 bytes each): the client asks again for the rest.
pub const MAX_EXTENTS: usize = 1024;
/// Most bytes one BLOCK_STATUS reply covers, so that one request holds the device lock only
/// briefly (a map lookup per 4 KiB page).
pub const MAX_STATUS_BYTES: u64 = 256 << 20;
/// Bytes of a BLOCK_STATUS reply payload at most: the context id and the extents.
pub const MAX_STATUS_REPLY_BYTES: usize = 4 + 8 * MAX_EXTENTS;
/// Metadata-context queries accepted in one LIST/SET option (each at most 4 KiB by the spec;
/// the option's data is bounded by `MAX_OPTION_BYTES` anyway).
pub const MAX_META_QUERIES: u32 = 64;

// Error values (the protocol's fixed set).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;

/// Largest READ or WRITE payload served, bytes: the protocol's default maximum payload, and
/// what we advertise in `INFO_BLOCK_SIZE`.
pub const MAX_PAYLOAD_BYTES: u32 = 32 << 20;
/// Smallest unit a request may address: any byte (see `export`: sub-sector requests are
/// served by read-modify-write, since libnbd clients refuse to send requests finer than the
/// advertised minimum, and file systems write single superblock fields).
pub const MIN_BLOCK_BYTES: u32 = 1;
/// Preferred request unit: the logical page of the block device.
pub const PREFERRED_BLOCK_BYTES: u32 = 4096;
/// Largest option payload accepted during the handshake. Strings are at most 4096 bytes by the
/// spec; INFO/GO add a name length and a list of 16-bit info requests.
pub const MAX_OPTION_BYTES: u32 = 16 << 10;
/// Options one client may send before it is judged hostile and dropped.
pub const MAX_OPTIONS: u32 = 256;

/// A fatal protocol violation: the connection is dropped (a hard disconnect, as the spec allows
/// on a breach of a mandatory condition).
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("i/o: {0}")]
    Io(io::Error),
    #[error("{0}")]
    TimedOut(Deadline),
    #[error("the client sent unknown client flags {0:#x}")]
    ClientFlags(u32),
    #[error("bad option magic {0:#018x}")]
    OptionMagic(u64),
    #[error("option {option} has {bytes} bytes of data (at most {MAX_OPTION_BYTES})")]
    OptionTooLong { option: u32, bytes: u32 },
    #[error("more than {MAX_OPTIONS} options during the handshake")]
    TooManyOptions,
    #[error("bad request magic {0:#010x}")]
    RequestMagic(u32),
    #[error("write of {0} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte maximum payload")]
    PayloadTooLarge(u32),
    #[error("the client closed the connection in the middle of a message")]
    Truncated,
}

impl From<io::Error> for ProtoError {
    /// A read that ran past its deadline (see `Deadline`) is `TimedOut`, with the limit it
    /// broke; any other I/O error is `Io`.
    fn from(e: io::Error) -> Self {
        match e.get_ref().and_then(|i| i.downcast_ref::<Deadline>()) {
            Some(d) => ProtoError::TimedOut(*d),
            None => ProtoError::Io(e),
        }
    }
}

impl ProtoError {
    /// The client was too slow (a deadline or a socket timeout), as opposed to breaking the
    /// protocol.
    pub fn is_timeout(&self) -> bool {
        match self {
            ProtoError::TimedOut(_) => true,
            ProtoError::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            _ => false,
        }
    }
}

/// A part of a connection that must arrive in full within a time limit: a client that sends
/// it one byte at a time is closed when the limit is reached, however often bytes come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Deadline {
    #[error("the handshake did not end within {0:?} of the connection (--handshake-timeout)")]
    Handshake(std::time::Duration),
    #[error("a request did not arrive in full within {0:?} of its first byte (--request-timeout)")]
    Request(std::time::Duration),
}

impl Deadline {
    /// The error a read past this deadline returns.
    pub fn error(self) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, self)
    }
}

/// A request header as sent on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    pub flags: u16,
    pub kind: u16,
    pub handle: u64,
    pub offset: u64,
    pub length: u32,
}

impl RequestHeader {
    /// Decodes a header; only a wrong magic is fatal here (invariant 2).
    pub fn decode(b: &[u8; REQUEST_HEADER_BYTES]) -> Result<Self, ProtoError> {
        let magic = be_u32(&b[0..4]);
        if magic != REQUEST_MAGIC {
            return Err(ProtoError::RequestMagic(magic));
        }
        Ok(RequestHeader {
            flags: be_u16(&b[4..6]),
            kind: be_u16(&b[6..8]),
            handle: be_u64(&b[8..16]),
            offset: be_u64(&b[16..24]),
            length: be_u32(&b[24..28]),
        })
    }

    #[cfg(test)]
    pub fn encode(&self) -> [u8; REQUEST_HEADER_BYTES] {
        let mut b = [0u8; REQUEST_HEADER_BYTES];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.kind.to_be_bytes());
        b[8..16].copy_from_slice(&self.handle.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.length.to_be_bytes());
        b
    }

    /// Bytes of payload that follow this header on the wire (only WRITE carries any).
    pub fn payload_bytes(&self) -> u32 {
        if self.kind == CMD_WRITE {
            self.length
        } else {
            0
        }
    }

    /// What to do with this request. `Err(errno)` is answered with that error and the
    /// connection goes on.
    pub fn command(&self) -> Result<Command, u32> {
        let fua = self.flags & CMD_FLAG_FUA != 0;
        // FUA is valid on every command once negotiated (the spec asks servers to accept it
        // even where it means nothing); NO_HOLE only on WRITE_ZEROES; any other bit is EINVAL.
        let allowed = match self.kind {
            CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
            CMD_BLOCK_STATUS => CMD_FLAG_FUA | CMD_FLAG_REQ_ONE,
            _ => CMD_FLAG_FUA,
        };
        if self.flags & !allowed != 0 {
            return Err(EINVAL);
        }
        let len = self.length as usize;
        let off = self.offset;
        match self.kind {
            CMD_READ | CMD_WRITE if self.length > MAX_PAYLOAD_BYTES => Err(EINVAL),
            CMD_READ => Ok(Command::Read { offset: off, len }),
            CMD_WRITE => Ok(Command::Write {
                offset: off,
                len,
                fua,
            }),
            CMD_DISC => Ok(Command::Disc),
            CMD_FLUSH => Ok(Command::Flush),
            CMD_TRIM => Ok(Command::Trim {
                offset: off,
                len,
                fua,
            }),
            CMD_WRITE_ZEROES => Ok(Command::WriteZeroes {
                offset: off,
                len,
                fua,
                may_trim: self.flags & CMD_FLAG_NO_HOLE == 0,
            }),
            // A zero length is unspecified by the spec; refused, as qemu-nbd does.
            CMD_BLOCK_STATUS if self.length == 0 => Err(EINVAL),
            CMD_BLOCK_STATUS => Ok(Command::BlockStatus {
                offset: off,
                len,
                req_one: self.flags & CMD_FLAG_REQ_ONE != 0,
            }),
            _ => Err(EINVAL),
        }
    }
}

/// A request the server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Read {
        offset: u64,
        len: usize,
    },
    Write {
        offset: u64,
        len: usize,
        fua: bool,
    },
    Disc,
    Flush,
    Trim {
        offset: u64,
        len: usize,
        fua: bool,
    },
    WriteZeroes {
        offset: u64,
        len: usize,
        fua: bool,
        may_trim: bool,
    },
    /// `base:allocation` of the range (needs a metadata context negotiated).
    BlockStatus {
        offset: u64,
        len: usize,
        req_one: bool,
    },
}

/// Encodes a structured reply chunk header.
pub fn structured_reply(
    flags: u16,
    kind: u16,
    handle: u64,
    length: u32,
) -> [u8; STRUCTURED_REPLY_HEADER_BYTES] {
    let mut b = [0u8; STRUCTURED_REPLY_HEADER_BYTES];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b[16..20].copy_from_slice(&length.to_be_bytes());
    b
}

/// The data of NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT: an export name and a
/// list of queries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaRequest<'a> {
    pub name: &'a [u8],
    pub queries: Vec<&'a [u8]>,
}

impl<'a> MetaRequest<'a> {
    /// Parses `u32 name length, name, u32 count, count × (u32 length, query)`; `None` if any
    /// length disagrees with the data, a string exceeds the spec's 4 KiB, or there are more than
    /// `MAX_META_QUERIES` queries (checked before anything is sized from the count).
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        const MAX_STRING: usize = 4096;
        let name_len = be_u32(data.get(0..4)?) as usize;
        if name_len > MAX_STRING {
            return None;
        }
        let mut p = 4 + name_len;
        let name = data.get(4..p)?;
        let count = be_u32(data.get(p..p + 4)?);
        if count > MAX_META_QUERIES {
            return None;
        }
        p += 4;
        let mut queries = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let len = be_u32(data.get(p..p + 4)?) as usize;
            if len > MAX_STRING {
                return None;
            }
            queries.push(data.get(p + 4..p + 4 + len)?);
            p += 4 + len;
        }
        (p == data.len()).then_some(MetaRequest { name, queries })
    }
}

/// Encodes a simple reply header.
pub fn simple_reply(errno: u32, handle: u64) -> [u8; SIMPLE_REPLY_BYTES] {
    let mut b = [0u8; SIMPLE_REPLY_BYTES];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&errno.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b
}

/// Writes an option reply (fixed newstyle).
pub fn write_option_reply(
    w: &mut impl Write,
    option: u32,
    kind: u32,
    data: &[&[u8]],
) -> io::Result<()> {
    let len: usize = data.iter().map(|d| d.len()).sum();
    w.write_all(&OPT_REPLY_MAGIC.to_be_bytes())?;
    w.write_all(&option.to_be_bytes())?;
    w.write_all(&kind.to_be_bytes())?;
    w.write_all(&(len as u32).to_be_bytes())?;
    for d in data {
        w.write_all(d)?;
    }
    Ok(())
}

/// The data of an NBD_OPT_INFO / NBD_OPT_GO option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfoRequest<'a> {
    pub name: &'a [u8],
    /// The info types requested, as big-endian u16 pairs (iterate with [`InfoRequest::infos`]).
    infos: &'a [u8],
}

impl<'a> InfoRequest<'a> {
    /// Parses `u32 name length, name, u16 count, count × u16`; `None` if the lengths disagree.
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        let name_len = be_u32(data.get(0..4)?) as usize;
        let name_end = 4usize.checked_add(name_len)?;
        let name = data.get(4..name_end)?;
        let count = be_u16(data.get(name_end..name_end.checked_add(2)?)?) as usize;
        let infos = data.get(name_end + 2..)?;
        if infos.len() != count * 2 {
            return None;
        }
        Some(InfoRequest { name, infos })
    }

    pub fn infos(&self) -> impl Iterator<Item = u16> + 'a {
        self.infos.chunks_exact(2).map(be_u16)
    }
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` on a clean end of stream before the first byte,
/// `Err(Truncated)` on an end in the middle.
pub fn read_exact_or_eof(r: &mut impl Read, buf: &mut [u8]) -> Result<bool, ProtoError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(ProtoError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Reads exactly `buf.len()` bytes; any end of stream is `Truncated`.
pub fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<(), ProtoError> {
    if buf.is_empty() || read_exact_or_eof(r, buf)? {
        Ok(())
    } else {
        Err(ProtoError::Truncated)
    }
}

pub fn be_u16(b: &[u8]) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[..2]);
    u16::from_be_bytes(a)
}
pub fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}
pub fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trips_and_classifies() {
        let h = RequestHeader {
            flags: CMD_FLAG_FUA,
            kind: CMD_WRITE,
            handle: 7,
            offset: 4096,
            length: 512,
        };
        assert_eq!(RequestHeader::decode(&h.encode()).ok(), Some(h));
        assert_eq!(
            h.command(),
            Ok(Command::Write {
                offset: 4096,
                len: 512,
                fua: true
            })
        );
        let zeroes = RequestHeader {
            flags: CMD_FLAG_NO_HOLE,
            kind: CMD_WRITE_ZEROES,
            ..h
        };
        assert_eq!(
            zeroes.command(),
            Ok(Command::WriteZeroes {
                offset: 4096,
                len: 512,
                fua: false,
                may_trim: false
            })
        );
        assert_eq!(
            RequestHeader {
                flags: CMD_FLAG_NO_HOLE,
                ..h
            }
            .command(),
            Err(EINVAL)
        );
        assert_eq!(RequestHeader { kind: 5, ..h }.command(), Err(EINVAL));
        assert_eq!(
            RequestHeader {
                kind: CMD_READ,
                length: MAX_PAYLOAD_BYTES + 1,
                ..h
            }
            .command(),
            Err(EINVAL)
        );
        let mut bad = h.encode();
        bad[0] ^= 1;
        assert!(matches!(
            RequestHeader::decode(&bad),
            Err(ProtoError::RequestMagic(_))
        ));
    }

    #[test]
    fn info_request_lengths_must_agree() {
        let mut d = Vec::new();
        d.extend_from_slice(&3u32.to_be_bytes());
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&2u16.to_be_bytes());
        d.extend_from_slice(&INFO_NAME.to_be_bytes());
        d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        let r = InfoRequest::parse(&d).expect("well-formed");
        assert_eq!(r.name, b"abc");
        assert_eq!(
            r.infos().collect::<Vec<_>>(),
            vec![INFO_NAME, INFO_BLOCK_SIZE]
        );
        assert!(InfoRequest::parse(&d[..d.len() - 1]).is_none());
        assert!(InfoRequest::parse(&[0xff, 0xff, 0xff, 0xff, 0, 0]).is_none());
    }

    proptest! {
        /// Invariant 1 and 2: any 28 bytes decode to a header or a magic error, and any header
        /// classifies without panicking; payload lengths are bounded before use.
        #[test]
        fn any_header_bytes_are_handled(bytes in proptest::array::uniform28(any::<u8>()), magic in any::<bool>()) {
            let mut b = bytes;
            if magic {
                b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
            }
            if let Ok(h) = RequestHeader::decode(&b) {
                match h.command() {
                    Ok(Command::Read { len, .. } | Command::Write { len, .. }) => prop_assert!(len <= MAX_PAYLOAD_BYTES as usize),
                    Ok(_) => {}
                    Err(e) => prop_assert_eq!(e, EINVAL),
                }
            }
        }

        #[test]
        fn any_meta_context_data_parses_or_is_refused(data in proptest::collection::vec(any::<u8>(), 0..96)) {
            if let Some(r) = MetaRequest::parse(&data) {
                let used: usize = 8 + r.name.len() + r.queries.iter().map(|q| 4 + q.len()).sum::<usize>();
                prop_assert_eq!(used, data.len());
            }
        }

        #[test]
        fn any_option_data_parses_or_is_refused(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Some(r) = InfoRequest::parse(&data) {
                prop_assert!(r.name.len() + 6 + r.infos().count() * 2 == data.len());
            }
        }
    }
}
