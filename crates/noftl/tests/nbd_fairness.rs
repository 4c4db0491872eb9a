//! `noftl serve` against clients that hold on to what they get (issue 32, "Nothing lost,
//! nothing hidden"): a request or a handshake trickled one byte at a time, connections from one
//! peer that stay busy, a connect flood, and 64 connections flushing in a loop beside a real
//! client. Each test is named after the behaviour that was broken and is fixed now.
//!
//! Timing: these tests run on loaded machines (two cores shared with other builds). Every bound
//! below is either a lower bound the server cannot beat (a deadline counted from after the
//! client sent its first byte) or an upper bound many times the expected value, with the
//! reason next to it; states are waited for (`wait_until`), never assumed after a sleep.

mod nbd_support;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nbd_support::client::*;
use nbd_support::*;

const PEER_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const PEER_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn connect_unix(server: &Server) -> UnixStream {
    let mut s = UnixStream::connect(&server.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    handshake(&mut s);
    s
}

/// One 4 KiB read at `offset`; panics unless it succeeds.
fn read_4k<S: Read + Write>(s: &mut S, handle: u64, offset: u64) {
    send_request(s, CMD_READ, 0, handle, offset, 4096, &[]).expect("send READ");
    let (err, h) = read_reply(s, 4096).expect("READ reply");
    assert_eq!((err, h), (0, handle));
}

/// Sends `bytes` one at a time, `every` apart, until they are all sent or the server closes the
/// connection; returns when the last write failed (None: all were sent).
fn trickle(mut s: impl Write, bytes: &[u8], every: Duration) -> Option<Instant> {
    for b in bytes {
        std::thread::sleep(every);
        if s.write_all(std::slice::from_ref(b)).is_err() {
            return Some(Instant::now());
        }
    }
    None
}

/// Finding: a WRITE whose payload came one byte every 8 s never timed out (the socket's read
/// timeout restarts with every byte), so one client held a connection, a thread and a 64 KiB
/// buffer forever. Now the whole request must arrive within `--request-timeout` of its first
/// byte; the trickling connection is closed, and another connection is unaffected.
#[test]
fn trickled_write_payload_is_closed_at_the_request_deadline() {
    let server = Server::start(
        &[
            MEMDISK_64M,
            &[
                "--clock",
                "none",
                "--request-timeout",
                "1s",
                "--handshake-timeout",
                "10s",
            ],
        ]
        .concat(),
    );
    let mut good = connect_unix(&server);
    let mut slow = connect_unix(&server);
    let sent = Instant::now();
    send_request(&mut slow, CMD_WRITE, 0, 1, 0, 65536, &[]).expect("WRITE header");
    // One byte every 200 ms: each far inside the 10 s stall limit, the whole far beyond 1 s.
    let writer = slow.try_clone().expect("clone");
    let trickler =
        std::thread::spawn(move || trickle(writer, &[0xa5; 200], Duration::from_millis(200)));
    // The other connection is served while the trickle goes on.
    for i in 0..5 {
        read_4k(&mut good, i, i * 4096);
    }
    assert!(
        closed_by_server(&mut slow),
        "the trickling connection is still open after 30 s: {}",
        server.log()
    );
    let closed_after = sent.elapsed();
    // The deadline counts from the server's read of the first header byte, which follows our
    // send: the close cannot come earlier than 1 s. 15 s is the bug's "never" with room for a
    // loaded machine.
    assert!(
        closed_after >= Duration::from_secs(1) && closed_after < Duration::from_secs(15),
        "closed after {closed_after:?}"
    );
    assert!(trickler.join().expect("trickler").is_some());
    read_4k(&mut good, 99, 0);
    drop(good);
    let stats = server.stop();
    assert_eq!(stats["connections"]["timed_out"], 1, "{stats}");
    assert_eq!(stats["requests"]["write"], 0, "{stats}");
}

/// Finding (the same, in the handshake): option data trickled one byte every 200 ms kept a
/// handshake open past `--handshake-timeout`, since only a stall that long was counted. Now the
/// whole handshake must end within `--handshake-timeout` of the accept.
#[test]
fn trickled_handshake_is_closed_at_the_handshake_deadline() {
    let server = Server::start(
        &[
            MEMDISK_64M,
            &["--clock", "none", "--handshake-timeout", "1s"],
        ]
        .concat(),
    );
    let connected = Instant::now();
    let mut s = UnixStream::connect(&server.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).expect("greeting");
    let mut head = Vec::new();
    head.extend_from_slice(&3u32.to_be_bytes());
    head.extend_from_slice(b"IHAVEOPT");
    head.extend_from_slice(&1u32.to_be_bytes()); // EXPORT_NAME
    head.extend_from_slice(&1000u32.to_be_bytes());
    s.write_all(&head).expect("option header");
    let writer = s.try_clone().expect("clone");
    let trickler =
        std::thread::spawn(move || trickle(writer, &[b'x'; 1000], Duration::from_millis(200)));
    assert!(
        closed_by_server(&mut s),
        "the trickling handshake is still open after 30 s"
    );
    let closed_after = connected.elapsed();
    // Not before the deadline (counted from the accept, after our connect); 15 s: see above.
    assert!(
        closed_after >= Duration::from_secs(1) && closed_after < Duration::from_secs(15),
        "closed after {closed_after:?}"
    );
    assert!(trickler.join().expect("trickler").is_some());
    let stats = server.stop();
    assert_eq!(stats["connections"]["timed_out"], 1, "{stats}");
}

/// Opens `n` connections from `from` to a TCP server; returns those that entered transmission
/// and the refusals' messages.
fn open_from(server: &Server, from: IpAddr, n: usize) -> (Vec<TcpStream>, Vec<String>) {
    let addr = server.tcp.expect("a TCP server");
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..n {
        let mut s = tcp_from(from, addr).expect("connect");
        match try_handshake(&mut s) {
            Ok(()) => admitted.push(s),
            Err(e) => refused.push(e),
        }
    }
    (admitted, refused)
}

/// Keeps `conns` busy: a FLUSH on each in turn, `every` apart, until `stop`.
fn keep_flushing(conns: Vec<TcpStream>, every: Duration, stop: Arc<AtomicBool>) {
    let mut conns = conns;
    let mut handle = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for c in &mut conns {
            handle += 1;
            let ok = send_request(c, CMD_FLUSH, 0, handle, 0, 0, &[]).is_ok()
                && read_reply(c, 0).is_ok_and(|(e, _)| e == 0);
            assert!(ok, "a busy connection was closed");
        }
        std::thread::sleep(every);
    }
}

/// Finding: 64 connections from one client, each sending a FLUSH every few seconds, took every
/// slot of `--max-connections` (64) and, never idle, kept every other client out for as long
/// as they liked. Now one peer (a TCP source address) holds at most `--max-peer-connections`
/// (16) of them; a second peer gets in while the first keeps its 16 busy.
#[test]
fn busy_connections_from_one_peer_do_not_lock_out_another_peer() {
    let server = Server::start_tcp(&[MEMDISK_64M, &["--clock", "none"]].concat());
    let (busy, refused) = open_from(&server, PEER_A, 64);
    assert_eq!(busy.len(), 16, "refusals: {refused:?}");
    assert!(
        refused[0].contains("connections from this peer"),
        "{refused:?}"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let flusher = std::thread::spawn(move || keep_flushing(busy, Duration::from_millis(50), stop2));
    let (mut other, refused_b) = open_from(&server, PEER_B, 1);
    assert_eq!(other.len(), 1, "{refused_b:?}\n{}", server.log());
    read_4k(&mut other[0], 1, 0);
    stop.store(true, Ordering::Relaxed);
    flusher.join().expect("flusher");
    let stats = server.stop();
    assert_eq!(stats["connections"]["refused"], 48, "{stats}");
}

/// A real client over a slow link: connect from `from`, wait `rtt` after the greeting (the
/// round trip), then GO and one 4 KiB read.
fn slow_client(from: IpAddr, addr: std::net::SocketAddr, rtt: Duration) -> Result<(), String> {
    slow_session(
        tcp_from(from, addr).map_err(|e| format!("connect: {e}"))?,
        rtt,
    )
}

/// A real client `rtt` away on stream `s`: greeting, `rtt`, handshake, one 4 KiB read.
fn slow_session<S: Read + Write>(mut s: S, rtt: Duration) -> Result<(), String> {
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting)
        .map_err(|e| format!("greeting: {e}"))?;
    std::thread::sleep(rtt);
    // The greeting is read again by `try_handshake`: give it a copy in front of the stream.
    let mut s = Prefixed {
        head: std::io::Cursor::new(greeting.to_vec()),
        s,
    };
    try_handshake(&mut s)?;
    send_request(&mut s.s, CMD_READ, 0, 1, 0, 4096, &[]).map_err(|e| e.to_string())?;
    read_reply(&mut s.s, 4096)
        .map(|_| ())
        .map_err(|e| format!("READ: {e}"))
}

/// A stream with bytes already read put back in front.
struct Prefixed<S> {
    head: std::io::Cursor<Vec<u8>>,
    s: S,
}
impl<S: Read> Read for Prefixed<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.head.read(buf)? {
            0 => self.s.read(buf),
            n => Ok(n),
        }
    }
}
impl<S: Write> Write for Prefixed<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.s.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.s.flush()
    }
}

/// Finding: a connect flood (sockets opened as fast as possible and left silent) made 3 of 10
/// real clients fail: every new socket closed the oldest half-open one, which was as often a
/// real client in the middle of its handshake (any client further away than a few hundred
/// connects' time). Now a peer's half-open sockets beyond `--max-peer-connections` close that
/// peer's own oldest, and when the server's half-open limit is reached the peer holding the
/// most gives one up: the flood only displaces itself.
#[test]
fn connect_flood_from_one_peer_does_not_fail_real_clients() {
    // The default limits: 64 connections half-open, 16 of them from one peer.
    let server = Server::start_tcp(&[MEMDISK_64M, &["--clock", "none"]].concat());
    let addr = server.tcp.expect("TCP");
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    // The flood comes from 127.0.0.2, the real clients from 127.0.0.1. A connect that is not
    // answered at once (its SYN dropped by a full accept queue, or its port picked again while
    // the server's side of its last connection waits in TIME_WAIT) would stall for a second
    // before the SYN is sent again, which is no flood: it is given up after 20 ms for a new one.
    let floods: Vec<_> = (0..2)
        .map(|_| {
            let (stop, opened) = (stop.clone(), opened.clone());
            std::thread::spawn(move || {
                // The last 1,000 sockets of each thread are kept open.
                let mut held = std::collections::VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(s) = tcp_from_within(PEER_B, addr, Duration::from_millis(20)) {
                        held.push_back(s);
                        opened.fetch_add(1, Ordering::Relaxed);
                    }
                    if held.len() > 1000 {
                        held.pop_front();
                    }
                }
            })
        })
        .collect();
    // Let the flood get going before the real clients come.
    assert!(wait_until(Duration::from_secs(30), || opened
        .load(Ordering::Relaxed)
        >= 100));
    // 200 ms between greeting and GO: the round trip of a distant client.
    let clients: Vec<_> = (0..10)
        .map(|_| std::thread::spawn(move || slow_client(PEER_A, addr, Duration::from_millis(200))))
        .collect();
    let failures: Vec<String> = clients
        .into_iter()
        .filter_map(|c| c.join().expect("client").err())
        .collect();
    let connects = opened.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for f in floods {
        f.join().expect("flood");
    }
    let stats = server.stop();
    eprintln!("flood: {connects} connects; {}", stats["connections"]);
    assert!(
        failures.is_empty(),
        "{} of 10 real clients failed during a flood of {connects} connects: {failures:?}",
        failures.len(),
    );
    // The flood was real: it filled the half-open slots many times over.
    assert!(
        stats["connections"]["half_open_closed"].as_u64() >= Some(50),
        "{stats}"
    );
}

/// Finding: the same flood on the unix socket, where every client was one peer (no source
/// address): each silent socket closed the oldest half-open one, often a real client in its
/// handshake. Now a unix socket's peer is its client process (`SO_PEERCRED`): the flooding
/// process (a child here: a python3 loop that connects as fast as it can and keeps its last
/// 1,000 sockets) displaces only its own sockets, and 10 real clients with a 200 ms round trip
/// between greeting and GO all get their read. With the unix peer unknown (the code before),
/// 10 of 10 failed ("send GO: Broken pipe") during 2,250 connects. Skipped without python3.
#[test]
fn unix_connect_flood_from_one_process_does_not_fail_real_clients() {
    if std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!("skipped: python3 floods the socket from a process of its own");
        return;
    }
    let server = Server::start(&[MEMDISK_64M, &["--clock", "none"]].concat());
    let count = server.socket.with_extension("flood-count");
    // Bounded: the flood stops by itself after 60 s, or when the test kills it.
    let script = format!(
        r#"
import socket, collections, time
held = collections.deque()
n = 0
end = time.time() + 60
while time.time() < end:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect({sock:?})
        held.append(s)
        n += 1
        if n % 50 == 0:
            open({count:?}, "w").write(str(n))
    except OSError:
        time.sleep(0.001)
    if len(held) > 1000:
        held.popleft().close()
"#,
        sock = server.socket.display().to_string(),
        count = count.display().to_string(),
    );
    let mut flood = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .spawn()
        .expect("python3");
    let opened = |c: &std::path::Path| {
        std::fs::read_to_string(c)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(wait_until(Duration::from_secs(30), || opened(&count) >= 200));
    let socket = server.socket.clone();
    let clients: Vec<_> = (0..10)
        .map(|_| {
            let socket = socket.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let s = UnixStream::connect(&socket).map_err(|e| format!("connect: {e}"))?;
                s.set_read_timeout(Some(Duration::from_secs(30)))
                    .map_err(|e| e.to_string())?;
                slow_session(s, Duration::from_millis(200))
            })
        })
        .collect();
    let failures: Vec<String> = clients
        .into_iter()
        .filter_map(|c| c.join().expect("client").err())
        .collect();
    let connects = opened(&count);
    let _ = flood.kill();
    let _ = flood.wait();
    let stats = server.stop();
    eprintln!("unix flood: {connects} connects; {}", stats["connections"]);
    assert!(
        failures.is_empty(),
        "{} of 10 real clients failed during a unix flood of {connects} connects: {failures:?}",
        failures.len(),
    );
    assert!(
        stats["connections"]["half_open_closed"].as_u64() >= Some(50),
        "the flood filled the half-open slots: {stats}"
    );
}

/// What the soak's hostile connections did.
#[derive(Default)]
struct Hostile {
    /// Connections in the transmission phase.
    connected: AtomicU64,
    /// Flushes answered, over all connections.
    flushes: AtomicU64,
    /// Connections with at least one flush answered.
    served: AtomicU64,
    /// Connections closed by the server (a FLUSH is legitimate: must stay 0).
    closed: AtomicU64,
}

/// A hostile connection: FLUSH in a loop, each sent as soon as the last is answered.
fn flush_in_a_loop(server: &Server, h: &Hostile, stop: &AtomicBool) {
    let mut s = connect_unix(server);
    h.connected.fetch_add(1, Ordering::SeqCst);
    for handle in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let ok = send_request(&mut s, CMD_FLUSH, 0, handle, 0, 0, &[]).is_ok()
            && read_reply(&mut s, 0).is_ok_and(|r| r == (0, handle));
        if !ok {
            h.closed.fetch_add(1, Ordering::SeqCst);
            return;
        }
        if handle == 0 {
            h.served.fetch_add(1, Ordering::SeqCst);
        }
        h.flushes.fetch_add(1, Ordering::Relaxed);
    }
}

/// 4 KiB reads at QD1 on pseudo-random pages of the first `span` bytes for `length`; returns
/// their latencies, sorted.
fn timed_reads(s: &mut UnixStream, span: u64, length: Duration) -> Vec<Duration> {
    let mut lat = Vec::new();
    let start = Instant::now();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while start.elapsed() < length {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let t = Instant::now();
        read_4k(s, lat.len() as u64, x % (span / 4096) * 4096);
        lat.push(t.elapsed());
    }
    lat.sort();
    lat
}

/// The soak (findings: FLUSH and long requests starving other connections, the trickled
/// payload): under `--clock real`, a real client's 4 KiB reads keep their p99 under a bound
/// while 64 connections FLUSH in a loop, every one of those is served too, and a trickling
/// writer stays connected only until `--request-timeout`.
#[test]
fn client_reads_keep_their_p99_while_64_connections_flush_in_a_loop() {
    // 80 slots: 64 flushers, the trickler and the client, all from this one process, which
    // the unix socket's peer credentials make one peer (neither limit is what is tested here;
    // `busy_connections_from_one_peer_do_not_lock_out_another_peer` is).
    let server = Server::start(&[
        "--target",
        "page",
        "--preset",
        "tiny",
        "--clock",
        "real",
        "--max-connections",
        "80",
        "--max-peer-connections",
        "80",
        "--request-timeout",
        "2s",
    ]);
    const SPAN: u64 = 4 << 20;
    let mut client = connect_unix(&server);
    for (i, off) in (0..SPAN).step_by(1 << 20).enumerate() {
        send_request(
            &mut client,
            CMD_WRITE,
            0,
            i as u64,
            off,
            1 << 20,
            &vec![7; 1 << 20],
        )
        .expect("WRITE");
        assert_eq!(read_reply(&mut client, 0).expect("reply"), (0, i as u64));
    }
    let hostile = Arc::new(Hostile::default());
    let stop = Arc::new(AtomicBool::new(false));
    let server = Arc::new(server);
    let flushers: Vec<_> = (0..64)
        .map(|_| {
            let (server, h, stop) = (server.clone(), hostile.clone(), stop.clone());
            std::thread::spawn(move || flush_in_a_loop(&server, &h, &stop))
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(60), || hostile
            .served
            .load(Ordering::SeqCst)
            == 64),
        "not every flusher got going: {}",
        server.log()
    );
    let mut slow = connect_unix(&server);
    let sent = Instant::now();
    send_request(&mut slow, CMD_WRITE, 0, 1, 0, 4096, &[]).expect("WRITE header");
    let writer = slow.try_clone().expect("clone");
    let trickler =
        std::thread::spawn(move || trickle(writer, &[1; 4096], Duration::from_millis(250)));
    // Blocks in a read until the server closes the trickling connection (or 30 s pass).
    let watcher = std::thread::spawn(move || closed_by_server(&mut slow).then(|| sent.elapsed()));
    let flushes_before = hostile.flushes.load(Ordering::SeqCst);
    let lat = timed_reads(&mut client, SPAN, Duration::from_secs(3));
    let flushes = hostile.flushes.load(Ordering::SeqCst) - flushes_before;
    stop.store(true, Ordering::SeqCst);
    for f in flushers {
        f.join().expect("flusher");
    }
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];
    let closed_after = watcher.join().expect("watcher");
    eprintln!(
        "soak: {} reads, p50 {:?}, p99 {:?}, max {:?}; {flushes} flushes meanwhile; the trickling \
         writer was closed after {closed_after:?}",
        lat.len(),
        p(0.5),
        p(0.99),
        lat[lat.len() - 1]
    );
    assert!(trickler.join().expect("trickler").is_some());
    assert_eq!(
        hostile.closed.load(Ordering::SeqCst),
        0,
        "a flusher was closed"
    );
    // Even a debug build on a loaded 2-core machine does a few hundred reads in 3 s.
    assert!(lat.len() >= 20, "only {} reads in 3 s", lat.len());
    // Each read waits for the device lock behind at most one turn of each flusher (a FLUSH
    // holds it for microseconds) and for CPU time among some 130 threads: p99 was 4 ms on an
    // idle machine and 6 ms before the fix (FLUSH was never the starving request; long writes
    // were, see `long_writes_on_other_connections_do_not_starve_a_4k_read`). 250 ms leaves
    // room for a machine loaded several times over.
    assert!(
        p(0.99) < Duration::from_millis(250),
        "p99 {:?} beside 64 flushing connections",
        p(0.99)
    );
    // Not before its deadline (counted from the server's read of its first byte, after our
    // send); well before 15 s, the bug's "never" with room for a loaded machine.
    let closed_after = closed_after.expect("the trickling writer was still connected after 30 s");
    assert!(
        closed_after >= Duration::from_secs(2) && closed_after < Duration::from_secs(15),
        "the trickling writer was closed after {closed_after:?}"
    );
    let server = Arc::into_inner(server).expect("threads joined");
    let stats = server.stop();
    assert_eq!(stats["connections"]["timed_out"], 1, "{stats}");
}

/// Finding: long requests starved other connections. A WRITE ran under one hold of the device
/// lock and was queued in the model whole, so four connections writing 32 MiB at a time (and
/// reading their next request while the last was still being programmed) kept seconds of
/// programming ahead of everyone else: another connection's 4 KiB reads took 1.35 s at the
/// median (4 reads in 4 s). Now a WRITE runs in 1 MiB chunks like the other long requests,
/// and each connection has at most 2 MiB of work ahead of the wall clock in the model.
#[test]
fn long_writes_on_other_connections_do_not_starve_a_4k_read() {
    // tiny with 640 blocks per plane: 320 MiB of SLC, 8 planes, 200 us per page program.
    let server = Arc::new(Server::start(&[
        "--target",
        "page",
        "--preset",
        "tiny",
        "--set",
        "geometry.blocks_per_plane=640",
        "--clock",
        "real",
    ]));
    const SPAN: u64 = 4 << 20;
    let mut client = connect_unix(&server);
    send_request(
        &mut client,
        CMD_WRITE,
        0,
        1,
        0,
        SPAN as u32,
        &vec![1; SPAN as usize],
    )
    .expect("WRITE");
    assert_eq!(read_reply(&mut client, 0).expect("reply"), (0, 1));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4u64)
        .map(|k| {
            let (server, stop, started) = (server.clone(), stop.clone(), started.clone());
            std::thread::spawn(move || {
                let mut s = connect_unix(&server);
                let data = vec![3u8; 32 << 20];
                let mut n = 0u64;
                let offset = SPAN + k * (32 << 20);
                while !stop.load(Ordering::Relaxed) {
                    send_request(&mut s, CMD_WRITE, 0, n, offset, 32 << 20, &data).expect("WRITE");
                    started.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(read_reply(&mut s, 0).expect("reply"), (0, n));
                    n += 1;
                }
                n
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(30), || started
        .load(Ordering::SeqCst)
        >= 4));
    let lat = timed_reads(&mut client, SPAN, Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    let writes: u64 = writers.into_iter().map(|w| w.join().expect("writer")).sum();
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize];
    eprintln!(
        "long writes: {} reads, p50 {:?}, p99 {:?}, max {:?}; {writes} writes of 32 MiB",
        lat.len(),
        p(0.5),
        p(0.99),
        lat[lat.len() - 1]
    );
    // The model allows 4 connections x 2 MiB of programming ahead of a read: 2,048 pages over
    // 8 planes, 51 ms. A debug build spends some 25 ms of CPU on each 1 MiB chunk under the
    // lock, and a read may wait for one chunk of each writer: p99 was 106-116 ms on an idle
    // machine, up to 222 ms beside two CPU hogs and the other tests (max 756 ms, in a run of
    // 26 reads where p99 is the second largest). Before, the median was 1.35 s, with 2 to 4
    // reads in 3 s. So: the median under 500 ms and p99 under 1 s, and at least 10 reads.
    assert!(lat.len() >= 10, "only {} reads in 3 s", lat.len());
    assert!(
        p(0.5) < Duration::from_millis(500) && p(0.99) < Duration::from_secs(1),
        "p50 {:?}, p99 {:?} beside four 32 MiB writers",
        p(0.5),
        p(0.99)
    );
    assert!(writes >= 4, "the writers made no progress");
    let server = Arc::into_inner(server).expect("threads joined");
    server.stop();
}

/// The new limits are checked at start-up, with the flag named: 0 would refuse every client
/// or close every connection at once.
#[test]
fn zero_peer_limit_or_request_timeout_is_refused_at_startup() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (flag, value) in [("--max-peer-connections", "0"), ("--request-timeout", "0s")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(["serve", "--target", "memdisk", "--preset", "tiny"])
            .arg("--socket")
            .arg(dir.path().join("s.sock"))
            .args([flag, value])
            .output()
            .expect("run noftl");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
}
