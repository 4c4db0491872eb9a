//! A headless Chromium driven over the DevTools protocol (CDP), for the dashboard's browser test.
//!
//! Why this way: the system's browser (Debian's `chromium`, installed by
//! `scripts/install-test-deps.sh`), no browser download, no Node.js and no websocket crate.
//! Chromium started with `--remote-debugging-pipe` reads CDP commands from its file descriptor 3
//! and writes replies and events to its descriptor 4, each message a JSON text ended by a NUL
//! byte (the transport Playwright and Puppeteer use too). One page target is created and
//! attached in flat mode, so page commands carry its `sessionId`.
#![allow(dead_code)] // each test file uses its own subset

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The browser to use: `$NOFTL_CHROMIUM`, else `chromium` or `chromium-browser` on the PATH.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NOFTL_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| [d.join("chromium"), d.join("chromium-browser")])
        .find(|p| p.is_file())
}

#[derive(Debug)]
pub struct Browser {
    child: Child,
    to: File,
    from: mpsc::Receiver<Value>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    /// Asks the browser to close (it ends its renderer and helper processes), and kills it if
    /// it has not exited after 10 s.
    fn drop(&mut self) {
        let close = br#"{"id":0,"method":"Browser.close","params":{}}"#;
        let _ = self
            .to
            .write_all(close)
            .and_then(|()| self.to.write_all(b"\0"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints, as pipe2 requires.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    (fds[0], fds[1])
}

impl Browser {
    /// Starts `chromium` headless with a fresh profile and one blank page of `width` x `height`.
    pub fn start(chromium: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().expect("profile directory");
        // Commands: we write `cmd_w`, the browser reads `cmd_r` as fd 3. Replies: it writes
        // `out_w` as fd 4, we read `out_r`. All four are close-on-exec; the child's two are
        // moved to 3 and 4 (dup2 clears close-on-exec there) after being copied above 9, so
        // that a pipe that itself got fd 3 or 4 is not overwritten before it is used.
        let (cmd_r, cmd_w) = pipe();
        let (out_r, out_w) = pipe();
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless",
            "--remote-debugging-pipe",
            "--no-sandbox", // tests may run as root in a container, where the sandbox refuses
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            &format!("--window-size={width},{height}"),
            "about:blank",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: between fork and exec only async-signal-safe calls (fcntl, dup2) are made.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(cmd_r, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(out_w, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        // SAFETY: each descriptor came from pipe2 above and is owned by exactly one File.
        let (to, from_file) = unsafe {
            drop(File::from_raw_fd(cmd_r));
            drop(File::from_raw_fd(out_w));
            (File::from_raw_fd(cmd_w), File::from_raw_fd(out_r))
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(from_file);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to,
            from: rx,
            next_id: 1,
            session: String::new(),
            _profile: profile,
        };
        let target = b.call("Target.createTarget", json!({ "url": "about:blank" }));
        let target_id = target["targetId"].as_str().expect("targetId").to_string();
        let attached = b.call(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("sessionId")
            .to_string();
        b.page(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        );
        b
    }

    fn send(&mut self, method: &str, params: Value, session: Option<String>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s);
        }
        let mut bytes = serde_json::to_vec(&msg).expect("JSON");
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        // Generous: a loaded 2-core CI machine can take seconds for a screenshot.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no reply from chromium to {method} in 60 s: {e}"));
            if v["id"].as_u64() == Some(id) {
                if let Some(err) = v.get("error") {
                    panic!("{method}: {err}");
                }
                return v["result"].clone();
            }
            // Events (no `id`) are not needed: the test polls the page's state instead.
        }
    }

    /// A browser-level command.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A command to the page.
    pub fn page(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.send(method, params, Some(s))
    }

    pub fn navigate(&mut self, url: &str) {
        self.page("Page.navigate", json!({ "url": url }));
    }

    /// Evaluates `expr` in the page (awaiting a promise) and returns its value as JSON; a
    /// JavaScript exception fails the test with its text.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.page(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("{expr}: {ex}");
        }
        r["result"]["value"].clone()
    }

    /// Evaluates `expr` every 50 ms until it is truthy; returns that value, or fails after
    /// `timeout` with `what`.
    pub fn wait_for(&mut self, expr: &str, timeout: Duration, what: &str) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(expr);
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "waited {timeout:?} for {what}; last: {v}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A PNG screenshot of the page's viewport.
    pub fn screenshot_png(&mut self) -> Vec<u8> {
        let r = self.page("Page.captureScreenshot", json!({ "format": "png" }));
        base64_decode(r["data"].as_str().expect("screenshot data"))
    }
}

/// Standard base64 (RFC 4648, with padding), as CDP sends binary data.
pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a') as u32 + 26,
            b'0'..=b'9' => (c - b'0') as u32 + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    assert_eq!(bytes.len() % 4, 0, "base64 comes in groups of four");
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for g in bytes.chunks(4) {
        let pad = g.iter().filter(|&&c| c == b'=').count();
        let n = g
            .iter()
            .take(4 - pad)
            .fold(0u32, |acc, &c| (acc << 6) | val(c))
            << (6 * pad);
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    out
}
