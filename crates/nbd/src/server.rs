//! Listening, accepting, signals and statistics.
//!
//! Invariants:
//! 1. Each connection runs on its own thread (plus its reply writer); a failing connection is
//!    logged and closed and never affects the others or the listener.
//! 2. At most `max_connections` connections are in the transmission phase at once. The limit
//!    counts established connections only: idle or slow clients cannot exhaust it by
//!    connecting and sending nothing.
//!    - A connection in its handshake (half-open) is closed when the handshake stalls for
//!      `handshake_timeout` (the socket's read timeout), and at most `max_connections` are
//!      half-open at once: a new one closes the oldest.
//!    - A client entering transmission when every slot is taken gets the slot of the
//!      connection idle the longest, if that one has sent nothing for `idle_timeout`; else it
//!      is refused (GO gets `ERR_POLICY` with the reason). An idle client keeps its connection
//!      as long as nobody needs the slot (a mounted file system may be idle for hours).
//!    - A reply the client does not take within `idle_timeout` (the socket's write timeout)
//!      ends the connection.
//! 3. SIGINT/SIGTERM: the device is flushed (acknowledged writes become durable), statistics
//!    are printed and written, the unix socket is removed, and the process exits 0.
//!    SIGUSR1: statistics are printed and written; serving goes on.

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::conn;
use crate::export::Export;

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
    pub stats_file: Option<PathBuf>,
    /// A handshake that sends nothing for this long is closed; also the longest stall allowed
    /// inside a request.
    pub handshake_timeout: Duration,
    /// An established connection idle this long gives its slot to a new client that needs it.
    pub idle_timeout: Duration,
}

/// One connection as the slots see it.
struct Entry {
    established: bool,
    /// Export clock time of the last request (or of the accept).
    last_active_ns: Arc<AtomicU64>,
    /// Closes the socket (the connection's thread then ends and removes the entry).
    closer: Arc<dyn Fn() + Send + Sync>,
}

/// The connections of a server, half-open and established (invariant 2).
struct Slots {
    max: u64,
    idle_timeout_ns: u64,
    conns: Mutex<HashMap<u64, Entry>>,
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new half-open connection; closes the oldest half-open one if there are
    /// `max` already.
    fn add(&self, export: &Export, id: u64, entry: Entry) {
        let mut conns = self.lock();
        let half_open: Vec<u64> = conns
            .iter()
            .filter(|(_, e)| !e.established)
            .map(|(&i, _)| i)
            .collect();
        if half_open.len() as u64 >= self.max {
            // Ids grow with accepts: the smallest is the oldest.
            if let Some(oldest) = half_open.iter().min() {
                if let Some(e) = conns.remove(oldest) {
                    (e.closer)();
                    export
                        .counters
                        .connections_evicted_half_open
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        conns.insert(id, entry);
    }

    /// A slot for connection `id` entering transmission (invariant 2).
    fn admit(&self, export: &Export, id: u64) -> bool {
        let c = &export.counters;
        let mut conns = self.lock();
        let established = conns.values().filter(|e| e.established).count() as u64;
        if established >= self.max {
            let now = export.clock().now_ns();
            let idlest = conns
                .iter()
                .filter(|(_, e)| e.established)
                .map(|(&i, e)| (e.last_active_ns.load(Ordering::Relaxed), i))
                .min();
            match idlest {
                Some((last, victim)) if now.saturating_sub(last) >= self.idle_timeout_ns => {
                    if let Some(e) = conns.remove(&victim) {
                        (e.closer)();
                        c.connections_idle_closed.fetch_add(1, Ordering::Relaxed);
                        c.connections_active.fetch_sub(1, Ordering::Relaxed);
                        eprintln!("noftl serve: closing connection {victim}, idle for {:.1} s, for a new client", (now - last) as f64 / 1e9);
                    }
                }
                _ => {
                    c.connections_refused.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "noftl serve: refusing connection {id}: {} connections are open and none has been idle for {:.0} s",
                        self.max,
                        self.idle_timeout_ns as f64 / 1e9
                    );
                    return false;
                }
            }
        }
        match conns.get_mut(&id) {
            Some(e) => {
                e.established = true;
                e.last_active_ns
                    .store(export.clock().now_ns(), Ordering::Relaxed);
                c.connections_active.fetch_add(1, Ordering::Relaxed);
                true
            }
            // Closed while it negotiated (as the oldest half-open one): no slot.
            None => false,
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
    fn admit(&self) -> bool {
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
            TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?,
        )),
    }
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
        idle_timeout_ns: cfg.idle_timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
        conns: Mutex::new(HashMap::new()),
    });
    let timeouts = (cfg.handshake_timeout, cfg.idle_timeout);
    let mut next_id = 0u64;
    loop {
        let accepted = match &listener {
            Listener::Unix(l) => l.accept().and_then(|(s, _)| prepare(s, timeouts)),
            Listener::Tcp(l) => l.accept().and_then(|(s, _)| prepare(s, timeouts)),
        };
        let (job, closer) = match accepted {
            Ok(j) => j,
            Err(e) => {
                // EMFILE and the like: log, back off briefly, keep listening.
                eprintln!("noftl serve: accept failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        export
            .counters
            .connections_accepted
            .fetch_add(1, Ordering::Relaxed);
        let last_active_ns = Arc::new(AtomicU64::new(export.clock().now_ns()));
        slots.add(
            &export,
            id,
            Entry {
                established: false,
                last_active_ns: last_active_ns.clone(),
                closer,
            },
        );
        let ex = export.clone();
        let sl = slots.clone();
        let spawned = std::thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
            let session = SlotSession {
                slots: &sl,
                export: &ex,
                id,
                last_active_ns,
            };
            // A bug below (in an FTL, say) must cost this connection only (invariant 1); the
            // device mutex survives poisoning.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&ex, id, &session))).is_err() {
                eprintln!("noftl serve: connection {id} ended by an internal error (see the panic above)");
            }
            sl.remove(&ex, id);
        });
        if let Err(e) = spawned {
            slots.remove(&export, id);
            eprintln!("noftl serve: cannot start a connection thread: {e}");
        }
    }
}

fn endpoint_text(e: &Endpoint) -> String {
    match e {
        Endpoint::Unix(p) => p.display().to_string(),
        Endpoint::Tcp(a) => a.to_string(),
    }
}

/// What the server needs of a connected socket: a second handle for the reply writer, and a
/// way to wake a reader blocked on it.
trait Socket: std::io::Read + Write + Send + Sync + Sized + 'static {
    fn clone_handle(&self) -> std::io::Result<Self>;
    fn shut(&self);
    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()>;
}

impl Socket for UnixStream {
    fn clone_handle(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn shut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(read))?;
        self.set_write_timeout(Some(write))
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
    fn set_timeouts(&self, read: Duration, write: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(read))?;
        self.set_write_timeout(Some(write))
    }
}

type Job = Box<dyn FnOnce(&Export, u64, &dyn conn::Session) + Send>;
type Closer = Arc<dyn Fn() + Send + Sync>;

/// Sets the socket's timeouts (invariant 2: the read timeout bounds a stalled handshake and a
/// stall inside a request, the write timeout a client that takes no replies) and makes the
/// connection's job and a closer for it.
fn prepare<S: Socket>(
    s: S,
    (handshake, idle): (Duration, Duration),
) -> std::io::Result<(Job, Closer)> {
    s.set_timeouts(handshake, idle)?;
    let closer = s.clone_handle()?;
    let job: Job = Box::new(move |export, id, session| serve_socket(export, s, id, session));
    Ok((job, Arc::new(move || closer.shut())))
}

fn serve_socket<S: Socket>(export: &Export, s: S, id: u64, session: &dyn conn::Session) {
    let handles = s.clone_handle().and_then(|w| Ok((w, s.clone_handle()?)));
    let (w, closer) = match handles {
        Ok(h) => h,
        Err(e) => return eprintln!("noftl serve: connection {id}: {e}"),
    };
    log_end(
        export,
        id,
        conn::serve(export, s, w, &move || closer.shut(), session),
    );
}

fn log_end(export: &Export, id: u64, end: Result<conn::Ended, crate::proto::ProtoError>) {
    match end {
        Err(crate::proto::ProtoError::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
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
