//! Shared by the `nbd_*` integration tests: starting `noftl serve` on a temporary unix socket,
//! making sure the real clients are installed, and skipping (with a printed reason) only when
//! a tool cannot be had.
#![allow(dead_code)] // each test binary uses a different part

pub mod client;

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

/// The memdisk export used by most tests: the tiny preset grown to 64 MiB.
pub const MEMDISK_64M: &[&str] = &[
    "--target",
    "memdisk",
    "--preset",
    "tiny",
    "--set",
    "geometry.blocks_per_plane=128",
];
pub const MEMDISK_64M_BYTES: u64 = 64 << 20;

/// The page FTL on TLC chips with 16 KiB pages (the `tlc16k` preset shrunk to 288 MiB: 8 dies,
/// 12 blocks of 96 pages per plane): 4 KiB sectors mapped into 16 KiB pages through the
/// controller's write buffer, paired-page safety at every FLUSH and GC erase.
pub const PAGE_TLC16K: &[&str] = &[
    "--target",
    "page",
    "--preset",
    "tlc16k",
    "--set",
    "geometry.blocks_per_plane=12",
    "--set",
    "geometry.pages_per_block=96",
];

static INSTALL: Once = Once::new();

fn have(tool: &str) -> bool {
    if Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        return true;
    }
    ["/sbin", "/usr/sbin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists())
}

/// Full path of a tool (e2fsck and mkfs live in /sbin, which a non-root PATH may lack).
pub fn tool(name: &str) -> String {
    for d in ["/usr/sbin", "/sbin"] {
        let p = Path::new(d).join(name);
        if p.exists() && !have_on_path(name) {
            return p.display().to_string();
        }
    }
    name.to_string()
}

fn have_on_path(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure `tools` exist, running scripts/install-test-deps.sh once if any is missing.
/// `Err(reason)` means the test must skip.
pub fn require(tools: &[&str]) -> Result<(), String> {
    if tools.iter().all(|t| have(t)) {
        return Ok(());
    }
    INSTALL.call_once(|| {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-test-deps.sh");
        eprintln!("installing missing test tools with {}", script.display());
        match Command::new("bash").arg(&script).status() {
            Ok(s) if s.success() => {}
            Ok(s) => eprintln!("install-test-deps.sh exited with {s}"),
            Err(e) => eprintln!("cannot run install-test-deps.sh: {e}"),
        }
    });
    let missing: Vec<_> = tools.iter().filter(|t| !have(t)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "missing {missing:?} and scripts/install-test-deps.sh could not install them"
        ))
    }
}

/// Prints why a test is skipped; use as `let Ok(()) = require(..).map_err(skip) else { return };`.
/// `tools` installed (see `require`) and FUSE usable here (`/dev/fuse` exists).
pub fn fuse_available(tools: &[&str]) -> Result<(), String> {
    require(tools)?;
    if !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse is missing (FUSE is not available in this container)".into());
    }
    Ok(())
}

/// Whether a file system is mounted at `dir` (by /proc/self/mounts).
pub fn is_mounted(dir: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let d = dir.display().to_string();
    mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(d.as_str()))
}

pub fn skip(reason: String) {
    eprintln!("SKIPPED: {reason}");
}

/// Waits up to `timeout` for `child` to exit; returns its status, or `None` if it is still
/// running.
pub fn reap(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// A running `noftl serve`, stopped with SIGTERM on drop.
pub struct Server {
    child: Child,
    pub socket: PathBuf,
    /// The TCP address, for a server started with `start_tcp`.
    pub tcp: Option<SocketAddr>,
    pub stats: PathBuf,
    log: Arc<Mutex<String>>,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts the server on a fresh socket in a fresh temporary directory.
    pub fn start(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("nbd.sock");
        let stats = dir.path().join("stats.json");
        let mut s = Self::start_at(&socket, &stats, args);
        s._dir = Some(dir);
        s
    }

    /// Starts the server on `socket`, writing statistics to `stats`.
    pub fn start_at(socket: &Path, stats: &Path, args: &[&str]) -> Server {
        let endpoint = ["--socket".into(), socket.as_os_str().to_owned()];
        let (mut s, _) = Self::spawn(&endpoint, stats, args);
        s.socket = socket.to_path_buf();
        s
    }

    /// Starts the server on TCP, on a free port of 127.0.0.1 (the ready line tells which).
    pub fn start_tcp(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let stats = dir.path().join("stats.json");
        let endpoint = ["--listen".into(), "127.0.0.1:0".into()];
        let (mut s, ready) = Self::spawn(&endpoint, &stats, args);
        let addr = ready
            .split(" on ")
            .nth(1)
            .and_then(|t| t.strip_suffix("; ready"))
            .and_then(|a| a.parse().ok());
        assert!(addr.is_some(), "no address in the ready line: {ready}");
        s.tcp = addr;
        s._dir = Some(dir);
        s
    }

    /// Spawns `noftl serve` on `endpoint` and waits for its ready line, which it returns.
    fn spawn(endpoint: &[OsString], stats: &Path, args: &[&str]) -> (Server, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_noftl"))
            .arg("serve")
            .args(args)
            .args(endpoint)
            .arg("--stats-file")
            .arg(stats)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn noftl serve");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("; ready") {
                    let _ = tx.send(line.clone());
                }
                let mut l = log2.lock().unwrap_or_else(|p| p.into_inner());
                l.push_str(&line);
                l.push('\n');
            }
        });
        let Ok(ready) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!(
                "noftl serve did not become ready: {}",
                log.lock().unwrap_or_else(|p| p.into_inner())
            );
        };
        let server = Server {
            child,
            socket: PathBuf::new(),
            tcp: None,
            stats: stats.to_path_buf(),
            log,
            _dir: None,
        };
        (server, ready)
    }

    /// Waits up to `timeout` for the server to exit (after a signal sent with `signal`).
    pub fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        reap(&mut self.child, timeout)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} failed");
    }

    /// Waits up to `timeout` for the server's log to contain `text` (the log is read by another
    /// thread, so a line the server printed before answering may not be here yet).
    pub fn wait_for_log(&self, text: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.log().contains(text))
    }

    /// The statistics now: asks for them with SIGUSR1 and waits (up to 30 s) until the file
    /// has been rewritten (its `uptime_s` changes every time; it is renamed into place whole).
    pub fn stats_now(&self) -> serde_json::Value {
        let before = std::fs::read_to_string(&self.stats).ok();
        self.signal("USR1");
        let mut stats = None;
        let fresh = wait_until(Duration::from_secs(30), || {
            let now = std::fs::read_to_string(&self.stats).ok();
            if now.is_some() && now != before {
                stats = now.and_then(|t| serde_json::from_str(&t).ok());
            }
            stats.is_some()
        });
        assert!(fresh, "no statistics after SIGUSR1: {}", self.log());
        stats.unwrap_or_default()
    }

    /// Stops with SIGTERM and returns the exit status and the statistics JSON.
    pub fn stop(mut self) -> serde_json::Value {
        self.signal("TERM");
        match reap(&mut self.child, Duration::from_secs(30)) {
            Some(status) => assert!(
                status.success(),
                "noftl serve exited with {status}: {}",
                self.log()
            ),
            None => panic!("noftl serve did not stop on SIGTERM"),
        }
        let text = std::fs::read_to_string(&self.stats).expect("stats file written at shutdown");
        serde_json::from_str(&text).expect("stats file is JSON")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            if reap(&mut self.child, Duration::from_secs(10)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// Polls `cond` every 10 ms until it holds or `timeout` has passed; returns whether it held.
/// Tests wait for a state this way instead of sleeping for a time that a loaded machine may
/// not honour.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs a command, panicking with its output if it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed with {}:\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// `noftl reproduce PAPER --quick --json -`'s result, or `None` (with the reason printed) when
/// this machine lacks `tools`, FUSE or the guest kernel (scripts/vm-kernel.sh's cache).
pub fn quick_reproduce_in_guest(paper: &str, tools: &[&str]) -> Option<serde_json::Value> {
    let ready = fuse_available(tools).and_then(|()| {
        lab::experiments::vm::guest::find_kernel()
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    if let Err(why) = ready {
        skip(why);
        return None;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["reproduce", paper, "--quick", "--json", "-"])
        .output()
        .expect("run noftl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(r["paper"], paper);
    assert_eq!(r["quick"], true);
    Some(r)
}
