//! Listening, accepting, signals and statistics.
//!
//! Invariants:
//! 1. Each connection runs on its own thread (plus its reply writer); a failing connection is
//!    logged and closed and never affects the others or the listener.
//! 2. At most `max_connections` connections are in the transmission phase at once, and at
//!    most `max_peer_connections` of them from one peer (a TCP source address; on a unix socket
//!    the client process, from `SO_PEERCRED`, or only the global limit where the kernel does not
//!    say). The limits count
//!    established connections only: idle or slow clients cannot exhaust them by connecting and
//!    sending nothing.
//!    - A connection in its handshake (half-open) is closed when the handshake has not ended
//!      `handshake_timeout` after the accept, however the client spreads its bytes (`conn`).
//!    - At most `max_connections` connections are half-open at once, and at most
//!      `max_peer_connections` from one peer. A new one beyond its peer's limit closes that
//!      peer's oldest half-open connection; one beyond the global limit closes the oldest of
//!      the peer holding the most. A connect flood from one peer therefore only displaces its
//!      own sockets, never another peer's client in the middle of its handshake.
//!    - A client entering transmission when its peer's slots, or all slots, are taken gets the
//!      slot of the connection (of that peer, or of any) idle the longest, if that one has sent
//!      nothing for `idle_timeout`; else it is refused (GO gets `ERR_POLICY` with the reason).
//!      An idle client keeps its connection as long as nobody needs the slot (a mounted file
//!      system may be idle for hours).
//!    - A reply the client does not take within `idle_timeout` (the socket's write timeout)
//!      ends the connection.
//! 3. SIGINT/SIGTERM: the device is flushed (acknowledged writes become durable), statistics
//!    are printed and written, the unix socket is removed, and the process exits 0.
//!    SIGUSR1: statistics are printed and written; serving goes on.
//! 4. Every connection that ends is counted once: a connection the server closed itself
//!    (half-open or idle, counted when closed) is not counted again as a protocol error when
//!    its thread sees the socket go.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::conn;
use crate::export::Export;
use crate::handshake::Refusal;

/// Where to listen.
#[derive(Clone, Debug)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

#[derive(Debug)]
pub struct ServerConfig {
    pub endpoint: Endpoint,
    pub max_connections: u64,
    /// Connections from one TCP source address, established and half-open each (invariant 2).
    pub max_peer_connections: u64,
    pub stats_file: Option<PathBuf>,
    /// The whole handshake must end within this time of the accept.
    pub handshake_timeout: Duration,
    /// A request (header and payload) must arrive in full within this time of its first byte.
    pub request_timeout: Duration,
    /// An established connection idle this long gives its slot to a new client that needs it.
    pub idle_timeout: Duration,
}

/// Who a connection comes from, for the per-peer limits: its TCP source address, or the
/// process at the other end of a unix socket (`SO_PEERCRED`); `None` when the kernel does not
/// say (then only the global limits apply).
type Peer = Option<PeerKey>;

/// A peer of the per-peer limits (invariant 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum PeerKey {
    Ip(IpAddr),
    /// A unix socket's client process: a local connect flood is one process (or a few), and
    /// its sockets then displace only each other, as a TCP peer's do.
    Process(u32),
}

/// The process at the other end of unix socket `s` (Linux `SO_PEERCRED`).
fn unix_peer(s: &UnixStream) -> Peer {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of a `ucred` and its size; the descriptor
    // is the stream's own, open for the duration of the call.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(PeerKey::Process(cred.pid as u32))
}

/// One connection as the slots see it.
struct Entry {
    peer: Peer,
    established: bool,
    /// Export clock time of the last request (or of the accept).
    last_active_ns: Arc<AtomicU64>,
    /// Set when the server closes the connection itself (invariant 4).
    closed_by_server: Arc<AtomicBool>,
    /// Closes the socket (the connection's thread then ends and removes the entry).
    closer: Arc<dyn Fn() + Send + Sync>,
}

impl Entry {
    fn close(&self) {
        self.closed_by_server.store(true, Ordering::Relaxed);
        (self.closer)();
    }
}

/// The connections of a server, half-open and established (invariant 2).
struct Slots {
    max: u64,
    max_per_peer: u64,
    idle_timeout_ns: u64,
    conns: Mutex<HashMap<u64, Entry>>,
}

type Conns = HashMap<u64, Entry>;

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new half-open connection (invariant 2): beyond its peer's limit, that
    /// peer's oldest half-open connection is closed; beyond the global one, the oldest of the
    /// peer holding the most.
    fn add(&self, export: &Export, id: u64, entry: Entry) {
        let mut conns = self.lock();
        // Half-open connections per peer, with the oldest of each (ids grow with accepts).
        let mut per_peer: HashMap<Peer, (u64, u64)> = HashMap::new();
        for (&i, e) in conns.iter().filter(|(_, e)| !e.established) {
            let p = per_peer.entry(e.peer).or_insert((0, i));
            p.0 += 1;
            p.1 = p.1.min(i);
        }
        let total: u64 = per_peer.values().map(|p| p.0).sum();
        let victim = match per_peer.get(&entry.peer) {
            Some(&(n, oldest)) if entry.peer.is_some() && n >= self.max_per_peer => Some(oldest),
            _ if total >= self.max => per_peer
                .values()
                .max_by_key(|&&(n, oldest)| (n, std::cmp::Reverse(oldest)))
                .map(|&(_, oldest)| oldest),
            _ => None,
        };
        if let Some(e) = victim.and_then(|v| conns.remove(&v)) {
            e.close();
            export
                .counters
                .connections_evicted_half_open
                .fetch_add(1, Ordering::Relaxed);
        }
        conns.insert(id, entry);
    }

    /// A slot for connection `id` entering transmission (invariant 2): within its peer's limit
    /// (TCP), then within the global one.
    fn admit(&self, export: &Export, id: u64) -> Result<(), Refusal> {
        let c = &export.counters;
        let mut conns = self.lock();
        // Closed while it negotiated (as the oldest half-open one): no slot.
        let Some(peer) = conns.get(&id).map(|e| e.peer) else {
            return Err(Refusal::ServerFull(self.max));
        };
        let refused = |why: Refusal| {
            c.connections_refused.fetch_add(1, Ordering::Relaxed);
            eprintln!("noftl serve: refusing connection {id}: {why}");
            Err(why)
        };
        if peer.is_some()
            && !self.make_room(export, &mut conns, |e| e.peer == peer, self.max_per_peer)
        {
            return refused(Refusal::PeerFull(self.max_per_peer));
        }
        if !self.make_room(export, &mut conns, |_| true, self.max) {
            return refused(Refusal::ServerFull(self.max));
        }
        match conns.get_mut(&id) {
            Some(e) => {
                e.established = true;
                e.last_active_ns
                    .store(export.clock().now_ns(), Ordering::Relaxed);
                c.connections_active.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            None => Err(Refusal::ServerFull(self.max)),
        }
    }

    /// Makes sure fewer than `limit` established connections satisfy `group`, closing the one
    /// of them idle the longest if it has been idle for `idle_timeout`; false if none has.
    fn make_room(
        &self,
        export: &Export,
        conns: &mut Conns,
        group: impl Fn(&Entry) -> bool,
        limit: u64,
    ) -> bool {
        let members = || conns.iter().filter(|(_, e)| e.established && group(e));
        if (members().count() as u64) < limit {
            return true;
        }
        let now = export.clock().now_ns();
        let idlest = members()
            .map(|(&i, e)| (e.last_active_ns.load(Ordering::Relaxed), i))
            .min();
        match idlest {
            Some((last, victim)) if now.saturating_sub(last) >= self.idle_timeout_ns => {
                if let Some(e) = conns.remove(&victim) {
                    e.close();
                    let c = &export.counters;
                    c.connections_idle_closed.fetch_add(1, Ordering::Relaxed);
                    c.connections_active.fetch_sub(1, Ordering::Relaxed);
                    eprintln!(
                        "noftl serve: closing connection {victim}, idle for {:.1} s, for a new client",
                        (now - last) as f64 / 1e9
                    );
                }
                true
            }
            _ => false,
        }
    }

    /// The connection's thread ended.
    fn remove(&self, export: &Export, id: u64) {
        if let Some(e) = self.lock().remove(&id) {
            if e.established {
                export
                    .counters
                    .connections_active
                    .fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// The session of one connection: its slot and its idle clock.
struct SlotSession<'a> {
    slots: &'a Slots,
    export: &'a Export,
    id: u64,
    last_active_ns: Arc<AtomicU64>,
}

impl conn::Session for SlotSession<'_> {
    fn admit(&self) -> Result<(), Refusal> {
        self.slots.admit(self.export, self.id)
    }
    fn active(&self, now_ns: nand::Nanos) {
        self.last_active_ns.store(now_ns, Ordering::Relaxed);
    }
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// Binds the endpoint. A stale unix socket (nobody accepting) is replaced; a live one is an
/// error, and so is any other file at that path.
fn bind(endpoint: &Endpoint) -> anyhow::Result<Listener> {
    match endpoint {
        Endpoint::Unix(path) => {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                use std::os::unix::fs::FileTypeExt;
                if !meta.file_type().is_socket() {
                    bail!("{} exists and is not a socket", path.display());
                }
                if UnixStream::connect(path).is_ok() {
                    bail!("{} is in use by a running server", path.display());
                }
                std::fs::remove_file(path)
                    .with_context(|| format!("cannot remove stale socket {}", path.display()))?;
            }
            Ok(Listener::Unix(UnixListener::bind(path).with_context(
                || format!("cannot listen on {}", path.display()),
            )?))
        }
        Endpoint::Tcp(addr) => Ok(Listener::Tcp(
            tcp_listener(*addr).with_context(|| format!("cannot listen on {addr}"))?,
        )),
    }
}

/// A TCP listener as `TcpListener::bind` makes it (SO_REUSEADDR, so that a restarted server
/// can bind while old connections linger in TIME_WAIT), but with the kernel's largest accept
/// queue (`net.core.somaxconn`) instead of std's 128: a burst of more than 128 connects made
/// the kernel drop the SYNs of the rest, and each of those clients waited a second or more
/// for its retransmission. (std's unix listener already asks for the largest.)
fn tcp_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    // The kernel caps the backlog at somaxconn.
    s.listen(i32::MAX)?;
    Ok(s.into())
}

/// Serves `export` until SIGINT/SIGTERM.
pub fn run(export: Export, cfg: ServerConfig) -> anyhow::Result<()> {
    let export = Arc::new(export);
    let started = Instant::now();
    let listener = bind(&cfg.endpoint)?;
    let stats_file = cfg.stats_file.clone();
    let socket_path = match &cfg.endpoint {
        Endpoint::Unix(p) => Some(p.clone()),
        Endpoint::Tcp(_) => None,
    };
    spawn_signal_thread(export.clone(), started, stats_file, socket_path)?;

    let where_ = match &listener {
        Listener::Unix(_) => format!("unix socket {}", endpoint_text(&cfg.endpoint)),
        Listener::Tcp(l) => l
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| endpoint_text(&cfg.endpoint)),
    };
    eprintln!(
        "noftl serve: exporting {} ({} bytes, clock {}) on {where_}; ready",
        export.name(),
        export.size_bytes(),
        export.clock_name()
    );

    let slots = Arc::new(Slots {
        max: cfg.max_connections,
        max_per_peer: cfg.max_peer_connections,
        idle_timeout_ns: cfg.idle_timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
        conns: Mutex::new(HashMap::new()),
    });
    let mut next_id = 0u64;
    loop {
        let accepted = match &listener {
            Listener::Unix(l) => l.accept().and_then(|(s, _)| {
                let peer = unix_peer(&s);
                prepare(s, peer, &cfg)
            }),
            Listener::Tcp(l) => l
                .accept()
                .and_then(|(s, a)| prepare(s, Some(PeerKey::Ip(a.ip().to_canonical())), &cfg)),
        };
        let (job, closer, peer) = match accepted {
            Ok(j) => j,
            Err(e) => {
                // EMFILE and the like: log, back off briefly, keep listening.
                eprintln!("noftl serve: accept failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        next_id += 1;
        start_connection(&export, &slots, next_id, peer, job, closer);
    }
}

/// Registers connection `id` in the slots and starts its thread.
fn start_connection(
    export: &Arc<Export>,
    slots: &Arc<Slots>,
    id: u64,
    peer: Peer,
    job: Job,
    closer: Closer,
) {
    export
        .counters
        .connections_accepted
        .fetch_add(1, Ordering::Relaxed);
    let last_active_ns = Arc::new(AtomicU64::new(export.clock().now_ns()));
    let closed_by_server = Arc::new(AtomicBool::new(false));
    slots.add(
        export,
        id,
        Entry {
            peer,
            established: false,
            last_active_ns: last_active_ns.clone(),
            closed_by_server: closed_by_server.clone(),
            closer,
        },
    );
    let ex = export.clone();
    let sl = slots.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("nbd-conn-{id}"))
        .spawn(move || {
            let session = SlotSession {
                slots: &sl,
                export: &ex,
                id,
                last_active_ns,
            };
            // A bug below (in an FTL, say) must cost this connection only (invariant 1); the
            // device lock is released when the panic unwinds and leaves no poison.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&ex, &session))) {
                // Closed by the server, and counted then (invariant 4).
                Ok(_) if closed_by_server.load(Ordering::Relaxed) => {}
                Ok(end) => log_end(&ex, id, end),
                Err(_) => eprintln!(
                    "noftl serve: connection {id} ended by an internal error (see the panic above)"
                ),
            }
            sl.remove(&ex, id);
        });
    if let Err(e) = spawned {
        slots.remove(export, id);
        eprintln!("noftl serve: cannot start a connection thread: {e}");
    }
}

fn endpoint_text(e: &Endpoint) -> String {
    match e {
        Endpoint::Unix(p) => p.display().to_string(),
        Endpoint::Tcp(a) => a.to_string(),
    }
}

/// What the server needs of a connected socket: a second handle for the reply writer, a way
/// to wake a reader blocked on it, and reads bounded in time (`conn::TimedRead`).
trait Socket: conn::TimedRead + Write + Send + Sync + Sized + 'static {
    fn clone_handle(&self) -> std::io::Result<Self>;
    fn shut(&self);
    fn set_write_timeout(&self, write: Duration) -> std::io::Result<()>;
}

impl Socket for UnixStream {
    fn clone_handle(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn shut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
    fn set_write_timeout(&self, write: Duration) -> std::io::Result<()> {
        UnixStream::set_write_timeout(self, Some(write))
    }
}

impl Socket for TcpStream {
    fn clone_handle(&self) -> std::io::Result<Self> {
        // Replies are batched by our own buffer; Nagle would only add delay.
        let _ = self.set_nodelay(true);
        self.try_clone()
    }
    fn shut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
    fn set_write_timeout(&self, write: Duration) -> std::io::Result<()> {
        TcpStream::set_write_timeout(self, Some(write))
    }
}

type Job = Box<dyn FnOnce(&Export, &dyn conn::Session) -> ConnEnd + Send>;
type Closer = Arc<dyn Fn() + Send + Sync>;
type ConnEnd = Result<conn::Ended, crate::proto::ProtoError>;

/// Sets the socket's write timeout (invariant 2: a client that takes no replies; reads are
/// bounded by the connection's deadlines, see `conn`) and makes the connection's job, a
/// closer for it, and its peer.
fn prepare<S: Socket>(
    s: S,
    peer: Peer,
    cfg: &ServerConfig,
) -> std::io::Result<(Job, Closer, Peer)> {
    let timeouts = conn::Timeouts {
        accepted: Instant::now(),
        handshake: cfg.handshake_timeout,
        request: cfg.request_timeout,
    };
    s.set_write_timeout(cfg.idle_timeout)?;
    let closer = s.clone_handle()?;
    let job: Job = Box::new(move |export, session| serve_socket(export, s, session, &timeouts));
    Ok((job, Arc::new(move || closer.shut()), peer))
}

fn serve_socket<S: Socket>(
    export: &Export,
    s: S,
    session: &dyn conn::Session,
    timeouts: &conn::Timeouts,
) -> ConnEnd {
    let (w, closer) = s.clone_handle().and_then(|w| Ok((w, s.clone_handle()?)))?;
    conn::serve(export, s, w, &move || closer.shut(), session, timeouts)
}

fn log_end(export: &Export, id: u64, end: ConnEnd) {
    match end {
        Err(e) if e.is_timeout() => {
            export
                .counters
                .connections_timed_out
                .fetch_add(1, Ordering::Relaxed);
            eprintln!("noftl serve: connection {id} timed out: {e}");
        }
        Err(e) => {
            export
                .counters
                .protocol_errors
                .fetch_add(1, Ordering::Relaxed);
            eprintln!("noftl serve: connection {id} dropped: {e}");
        }
        Ok(_) => {}
    }
}

/// Prints the statistics to stderr and writes them to the stats file, if any (as a regular
/// file only, through a temporary file next to it: `lab::output`). Returns whether the file,
/// if any, was written.
pub fn emit_stats(export: &Export, started: Instant, stats_file: Option<&Path>) -> bool {
    let report = export.report(started.elapsed().as_secs_f64());
    let text =
        serde_json::to_string_pretty(&report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "noftl serve: statistics\n{text}");
    if let Some(path) = stats_file {
        if let Err(e) = lab::output::write_atomic(path, format!("{text}\n").as_bytes()) {
            let _ = writeln!(err, "noftl serve: {e}");
            return false;
        }
    }
    true
}

fn spawn_signal_thread(
    export: Arc<Export>,
    started: Instant,
    stats_file: Option<PathBuf>,
    socket: Option<PathBuf>,
) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1])
        .context("cannot install signal handlers")?;
    std::thread::Builder::new()
        .name("nbd-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGUSR1 {
                    emit_stats(&export, started, stats_file.as_deref());
                    continue;
                }
                eprintln!("noftl serve: shutting down (signal {sig})");
                let flushed = match export.flush_device() {
                    Ok(()) => true,
                    Err(e) => {
                        eprintln!("noftl serve: final flush failed: {e}");
                        false
                    }
                };
                let written = emit_stats(&export, started, stats_file.as_deref());
                if let Some(p) = &socket {
                    let _ = std::fs::remove_file(p);
                }
                // A failed final flush or statistics file is a failed run: say so in the status.
                std::process::exit(if flushed && written { 0 } else { 1 });
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nand::ClockMode;

    const A: Peer = Some(PeerKey::Ip(IpAddr::V4(std::net::Ipv4Addr::new(
        10, 0, 0, 1,
    ))));
    const B: Peer = Some(PeerKey::Ip(IpAddr::V4(std::net::Ipv4Addr::new(
        10, 0, 0, 2,
    ))));

    struct Fixture {
        export: Export,
        slots: Slots,
        closed: Arc<Mutex<Vec<u64>>>,
    }

    impl Fixture {
        fn new(max: u64, max_per_peer: u64, idle_timeout_ns: u64) -> Self {
            Fixture {
                export: Export::new(Box::new(ftl::MemDisk::new(16)), ClockMode::None),
                slots: Slots {
                    max,
                    max_per_peer,
                    idle_timeout_ns,
                    conns: Mutex::new(HashMap::new()),
                },
                closed: Arc::new(Mutex::new(Vec::new())),
            }
        }

        /// Accepts connection `id` from `peer`.
        fn add(&self, id: u64, peer: Peer) {
            let closed = self.closed.clone();
            self.slots.add(
                &self.export,
                id,
                Entry {
                    peer,
                    established: false,
                    last_active_ns: Arc::new(AtomicU64::new(self.export.clock().now_ns())),
                    closed_by_server: Arc::new(AtomicBool::new(false)),
                    closer: Arc::new(move || closed.lock().expect("closed").push(id)),
                },
            );
        }

        fn closed(&self) -> Vec<u64> {
            let mut v = self.closed.lock().expect("closed").clone();
            v.sort_unstable();
            v
        }
    }

    /// A flood of half-open connections from one peer displaces only its own (invariant 2):
    /// another peer's connections in their handshake stay, even with every slot taken.
    #[test]
    fn half_open_flood_from_one_peer_closes_only_its_own() {
        let f = Fixture::new(8, 4, u64::MAX);
        f.add(1, A);
        f.add(2, A);
        for id in 10..100 {
            f.add(id, B);
        }
        assert!(f.closed().iter().all(|&id| id >= 10), "{:?}", f.closed());
        // B keeps its 4 newest, A its 2.
        let open: Vec<u64> = {
            let mut v: Vec<u64> = f.slots.lock().keys().copied().collect();
            v.sort_unstable();
            v
        };
        assert_eq!(open, [1, 2, 96, 97, 98, 99]);
        // Past the global limit, the peer holding the most gives up its oldest.
        for id in 200..203 {
            f.add(
                id,
                Some(PeerKey::Ip(IpAddr::V4(std::net::Ipv4Addr::new(
                    10, 0, 1, id as u8,
                )))),
            );
        }
        assert!(
            f.slots.lock().contains_key(&1),
            "A lost its client to another peer's flood"
        );
        assert!(!f.slots.lock().contains_key(&96));
    }

    /// A unix socket whose peer process is unknown: only the global limit applies, the oldest
    /// half-open connection gives way.
    #[test]
    fn unix_clients_share_the_global_limits() {
        let f = Fixture::new(3, 1, u64::MAX);
        for id in 1..=5 {
            f.add(id, None);
        }
        assert_eq!(f.closed(), [1, 2]);
        for id in 3..=5 {
            assert_eq!(f.slots.admit(&f.export, id), Ok(()));
        }
    }

    /// Finding (issue 32): a connect flood on the unix socket made real clients fail, since
    /// every unix client was one peer and each new silent socket closed the oldest half-open
    /// one, often a real client in its handshake. Now a unix socket's peer is its process:
    /// the flooding process displaces only its own sockets.
    #[test]
    fn a_unix_connect_flood_from_one_process_closes_only_its_own() {
        let (real, flood) = (Some(PeerKey::Process(100)), Some(PeerKey::Process(200)));
        let f = Fixture::new(8, 4, u64::MAX);
        f.add(1, real);
        for id in 10..500 {
            f.add(id, flood);
        }
        assert!(f.slots.lock().contains_key(&1), "{:?}", f.closed());
        assert!(f.closed().iter().all(|&id| id >= 10));
        assert_eq!(f.slots.admit(&f.export, 1), Ok(()));
    }

    /// `unix_peer` names the process at the other end of a unix socket: this one.
    #[test]
    fn a_unix_socket_peer_is_its_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(unix_peer(&a), Some(PeerKey::Process(std::process::id())));
    }

    /// A peer at its limit is refused with the reason, while another peer still gets in; an
    /// idle connection of that peer gives its slot to the peer's new client.
    #[test]
    fn peer_limit_refuses_with_its_reason_and_idle_slots_are_reused() {
        // Connections are admitted as they come (established ones are not half-open).
        let join = |f: &Fixture, id: u64, peer: Peer| {
            f.add(id, peer);
            f.slots.admit(&f.export, id)
        };
        // idle_timeout 0: every established connection counts as idle at once.
        let f = Fixture::new(8, 2, 0);
        assert_eq!(join(&f, 1, A), Ok(()));
        assert_eq!(join(&f, 2, A), Ok(()));
        assert_eq!(join(&f, 3, A), Ok(()));
        assert_eq!(f.closed(), [1], "A's idlest gave its slot to A's third");
        let busy = Fixture::new(8, 2, u64::MAX);
        assert_eq!(join(&busy, 1, A), Ok(()));
        assert_eq!(join(&busy, 2, A), Ok(()));
        let refused = join(&busy, 3, A);
        assert_eq!(refused, Err(Refusal::PeerFull(2)));
        assert!(refused
            .err()
            .is_some_and(|r| r.to_string().contains("connections from this peer")));
        assert_eq!(join(&busy, 4, B), Ok(()));
        assert_eq!(
            busy.export
                .counters
                .connections_refused
                .load(Ordering::Relaxed),
            1
        );
    }
}
