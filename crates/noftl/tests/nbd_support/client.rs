//! A minimal NBD client for the tests that play hostile or measuring clients themselves:
//! a GO handshake and simple requests and replies over any stream (unix or TCP).

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
const REQUEST_MAGIC: u32 = 0x2560_9513;
const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// The client side of a fixed-newstyle GO handshake. `Err` carries the server's refusal
/// (`ERR_POLICY` and its message) or the I/O error that ended it.
pub fn try_handshake<S: Read + Write>(s: &mut S) -> Result<(), String> {
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting)
        .map_err(|e| format!("greeting: {e}"))?;
    if &greeting[..8] != b"NBDMAGIC" {
        return Err(format!("greeting: {greeting:?}"));
    }
    let mut msg = Vec::new();
    msg.extend_from_slice(&3u32.to_be_bytes()); // FIXED_NEWSTYLE | NO_ZEROES
    msg.extend_from_slice(b"IHAVEOPT");
    msg.extend_from_slice(&7u32.to_be_bytes()); // GO
    msg.extend_from_slice(&6u32.to_be_bytes());
    msg.extend_from_slice(&[0; 6]);
    s.write_all(&msg).map_err(|e| format!("send GO: {e}"))?;
    loop {
        let mut head = [0u8; 20];
        s.read_exact(&mut head)
            .map_err(|e| format!("option reply: {e}"))?;
        let kind = u32::from_be_bytes([head[12], head[13], head[14], head[15]]);
        let len = u32::from_be_bytes([head[16], head[17], head[18], head[19]]) as usize;
        let mut data = vec![0u8; len];
        s.read_exact(&mut data)
            .map_err(|e| format!("option reply data: {e}"))?;
        if kind >= 1 << 31 {
            return Err(format!(
                "GO refused ({kind:#x}): {}",
                String::from_utf8_lossy(&data)
            ));
        }
        if kind == 1 {
            return Ok(());
        }
    }
}

/// As `try_handshake`, panicking on failure.
pub fn handshake<S: Read + Write>(s: &mut S) {
    if let Err(e) = try_handshake(s) {
        panic!("handshake: {e}");
    }
}

/// The 28 bytes of a request header.
pub fn request_header(kind: u16, flags: u16, handle: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(28);
    m.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&handle.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&length.to_be_bytes());
    m
}

/// Sends one request and its payload (for WRITE) in one write.
pub fn send_request<S: Write>(
    s: &mut S,
    kind: u16,
    flags: u16,
    handle: u64,
    offset: u64,
    length: u32,
    payload: &[u8],
) -> io::Result<()> {
    let mut m = request_header(kind, flags, handle, offset, length);
    m.extend_from_slice(payload);
    s.write_all(&m)
}

/// Reads a simple reply and, on success, `data_len` bytes of data; returns (error, handle).
pub fn read_reply<S: Read>(s: &mut S, data_len: usize) -> io::Result<(u32, u64)> {
    let mut h = [0u8; 16];
    s.read_exact(&mut h)?;
    if h[..4] != SIMPLE_REPLY_MAGIC.to_be_bytes() {
        return Err(io::Error::other(format!("not a simple reply: {h:?}")));
    }
    let err = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    if err == 0 && data_len > 0 {
        let mut d = vec![0u8; data_len];
        s.read_exact(&mut d)?;
    }
    let mut handle = [0u8; 8];
    handle.copy_from_slice(&h[8..16]);
    Ok((err, u64::from_be_bytes(handle)))
}

/// A TCP connection to `server` from the loopback address `from` (any of 127.0.0.0/8 is this
/// host on Linux), so that one test can play several peers.
pub fn tcp_from(from: IpAddr, server: SocketAddr) -> io::Result<TcpStream> {
    tcp_from_within(from, server, Duration::from_secs(10))
}

/// As `tcp_from`, giving up after `timeout`.
pub fn tcp_from_within(
    from: IpAddr,
    server: SocketAddr,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        None,
    )?;
    sock.bind(&SocketAddr::new(from, 0).into())?;
    sock.connect_timeout(&server.into(), timeout)?;
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Whether the server has closed `s`: a read returns end of stream or a reset (anything the
/// server sent before is skipped). False when a read timed out with the connection open.
pub fn closed_by_server<S: Read>(s: &mut S) -> bool {
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}
