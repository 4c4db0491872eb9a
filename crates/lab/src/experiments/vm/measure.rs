//! The host side of the rounds protocol (`experiments::rounds`) for a guest: QEMU connects the
//! guest's second serial port (`/dev/ttyS1`) to a unix socket this module listens on; at each
//! of the workload's marks the server is asked for its statistics (SIGUSR1: it rewrites its
//! stats file and goes on serving), the counters are kept as a `Snapshot`, and the workload is
//! told to go on until the rounds are steady or the cap (`rounds::go_on`).
//!
//! The workload has synced before it marks and waits for the answer, so the counters read at a
//! mark hold exactly the writes of the rounds before it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::experiments::rounds::{self, Snapshot};

/// The measurer: started before QEMU, stopped after it exits.
pub(super) struct Measurer {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<anyhow::Result<Vec<Snapshot>>>,
}

/// Where the measurer reads the server: its process id, its stats file, the device's dies.
pub(super) struct ServerView {
    /// What the progress lines call this guest.
    pub label: String,
    pub pid: u32,
    pub stats: PathBuf,
    pub dies: u32,
}

impl Measurer {
    /// Listens on `socket` (QEMU's `-serial unix:SOCKET` connects to it) and serves marks
    /// until the connection ends, answering until steady or the cap (`rule`).
    pub fn start(
        socket: &Path,
        server: ServerView,
        rule: rounds::Rule,
    ) -> anyhow::Result<Measurer> {
        let listener = UnixListener::bind(socket)
            .with_context(|| format!("the rounds socket {}", socket.display()))?;
        listener.set_nonblocking(true)?;
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&done);
        let thread = std::thread::spawn(move || -> anyhow::Result<Vec<Snapshot>> {
            // QEMU connects at its start; a QEMU that never started never connects.
            let stream = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if stop.load(Ordering::Acquire) {
                            return Ok(Vec::new());
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => return Err(e).context("accepting QEMU's serial connection"),
                }
            };
            stream.set_nonblocking(false)?;
            serve_marks(stream, &server, rule)
        });
        Ok(Measurer { done, thread })
    }

    /// The snapshots, once QEMU has exited (its end of the socket is closed).
    pub fn finish(self) -> anyhow::Result<Vec<Snapshot>> {
        self.done.store(true, Ordering::Release);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the rounds measurer panicked"))?
    }
}

fn serve_marks(
    stream: UnixStream,
    server: &ServerView,
    rule: rounds::Rule,
) -> anyhow::Result<Vec<Snapshot>> {
    let mut writer = stream.try_clone()?;
    let mut snaps = Vec::new();
    for line in BufReader::new(stream).lines() {
        let line = match line {
            Ok(l) => l,
            // The guest powered off: QEMU closed the socket.
            Err(_) => break,
        };
        if line.trim().is_empty() {
            continue;
        }
        let mark = rounds::parse_mark(&line)?;
        let stats = crate::experiments::fs_mount::stats_now(server.pid, &server.stats)?;
        let c = super::counters::counters(&stats, server.dies);
        snaps.push(Snapshot {
            round: mark.round,
            app_bytes: mark.app_bytes,
            fs_write_bytes: c.host_write_bytes,
            host_write_pages: c.host_write_pages,
            flash_programs: c.flash_programs,
            device_clock_us: c.device_clock_us,
        });
        rounds::note(&server.label, &snaps);
        let go = rounds::go_on(&snaps, rule);
        writer.write_all(rounds::reply(go).as_bytes())?;
        writer.flush()?;
    }
    Ok(snaps)
}
