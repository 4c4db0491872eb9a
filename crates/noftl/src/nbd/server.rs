//! Listening, accepting, signals and statistics.
//!
//! Invariants:
//! 1. Each connection runs on its own thread (plus its reply writer); a failing connection is
//!    logged and closed and never affects the others or the listener.
//! 2. At most `max_connections` connections are served at once; more are closed at accept.
//! 3. SIGINT/SIGTERM: the device is flushed (acknowledged writes become durable), statistics
//!    are printed and written, the unix socket is removed, and the process exits 0.
//!    SIGUSR1: statistics are printed and written; serving goes on.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};

use super::conn;
use super::export::Export;

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

    let mut next_id = 0u64;
    loop {
        let accepted = match &listener {
            Listener::Unix(l) => l.accept().map(|(s, _)| job(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| job(s)),
        };
        let job = match accepted {
            Ok(j) => j,
            Err(e) => {
                // EMFILE and the like: log, back off briefly, keep listening.
                eprintln!("noftl serve: accept failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        let c = &export.counters;
        if c.connections_active.load(Ordering::Relaxed) >= cfg.max_connections {
            c.connections_refused.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "noftl serve: refusing a connection: {} already open",
                cfg.max_connections
            );
            continue; // dropping the job closes the socket
        }
        next_id += 1;
        let id = next_id;
        c.connections_accepted.fetch_add(1, Ordering::Relaxed);
        c.connections_active.fetch_add(1, Ordering::Relaxed);
        let ex = export.clone();
        let spawned = std::thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
            // A bug below (in an FTL, say) must cost this connection only (invariant 1); the
            // device mutex survives poisoning.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&ex, id))).is_err() {
                eprintln!("noftl serve: connection {id} ended by an internal error (see the panic above)");
            }
            ex.counters.connections_active.fetch_sub(1, Ordering::Relaxed);
        });
        if let Err(e) = spawned {
            c.connections_active.fetch_sub(1, Ordering::Relaxed);
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
}

impl Socket for UnixStream {
    fn clone_handle(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn shut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
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
}

type Job = Box<dyn FnOnce(&Export, u64) + Send>;

fn job<S: Socket>(s: S) -> Job {
    Box::new(move |export, id| serve_socket(export, s, id))
}

fn serve_socket<S: Socket>(export: &Export, s: S, id: u64) {
    let handles = s.clone_handle().and_then(|w| Ok((w, s.clone_handle()?)));
    let (w, closer) = match handles {
        Ok(h) => h,
        Err(e) => return eprintln!("noftl serve: connection {id}: {e}"),
    };
    log_end(
        export,
        id,
        conn::serve(export, s, w, &move || closer.shut()),
    );
}

fn log_end(export: &Export, id: u64, end: Result<conn::Ended, super::proto::ProtoError>) {
    if let Err(e) = end {
        export
            .counters
            .protocol_errors
            .fetch_add(1, Ordering::Relaxed);
        eprintln!("noftl serve: connection {id} dropped: {e}");
    }
}

/// Prints the statistics to stderr and writes them to the stats file, if any.
pub fn emit_stats(export: &Export, started: Instant, stats_file: Option<&Path>) {
    let report = export.report(started.elapsed().as_secs_f64());
    let text =
        serde_json::to_string_pretty(&report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "noftl serve: statistics\n{text}");
    if let Some(path) = stats_file {
        // Write then rename, so a reader never sees half a file.
        let tmp = path.with_extension("tmp");
        let res =
            std::fs::write(&tmp, format!("{text}\n")).and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = res {
            let _ = writeln!(err, "noftl serve: cannot write {}: {e}", path.display());
        }
    }
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
                if let Err(e) = export.flush_device() {
                    eprintln!("noftl serve: final flush failed: {e}");
                }
                emit_stats(&export, started, stats_file.as_deref());
                if let Some(p) = &socket {
                    let _ = std::fs::remove_file(p);
                }
                std::process::exit(0);
            }
        })?;
    Ok(())
}
