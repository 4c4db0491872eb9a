//! A file system mounted for the file-system experiments (`fs_bench`, `fs_waf`): a fresh
//! emulated device served by the noftl program in child processes (`noftl serve`/`noftl
//! mount`: the caller names the program, the CLI itself), the mount, and its teardown with the
//! device's statistics; and the data files the benchmarks write. Below the experiments, which
//! import it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::device::DeviceSpec;

fn is_mounted(dir: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let d = dir.display().to_string();
    mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(d.as_str()))
}

fn wait_for(what: &str, secs: u64, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// CPU time (user + system) of a process so far, in seconds.
fn cpu_s(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after the state field.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// SIGTERM, then SIGKILL after `secs` seconds.
pub fn stop(child: &mut Child, secs: u64) {
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn unmount(dir: &Path) {
    for _ in 0..100 {
        if !is_mounted(dir) {
            return;
        }
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(dir)
            .stderr(Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A mounted file system on a fresh emulated device, and the processes that serve it.
#[derive(Debug)]
pub struct Mounted {
    /// The mount point.
    pub root: PathBuf,
    children: Vec<(Child, Option<PathBuf>)>,
    stats: PathBuf,
    _work: tempfile::TempDir,
}

impl Mounted {
    /// The statistics so far of the process that serves the device (`mount` or `serve`: the
    /// first started), asked for with SIGUSR1 (`stats_now`).
    pub fn stats_now(&self) -> anyhow::Result<Value> {
        let (child, _) = self.children.first().context("nothing serves this mount")?;
        stats_now(child.id(), &self.stats)
    }

    /// CPU time (user + system) of the serving processes so far, in seconds.
    pub fn cpu_s(&self) -> f64 {
        self.children.iter().map(|(c, _)| cpu_s(c.id())).sum()
    }

    /// Unmounts and returns the device statistics.
    pub fn finish(mut self) -> anyhow::Result<Value> {
        // Innermost first: the file system, then (ext4) the NBD file, then the server.
        for (child, mnt) in self.children.iter_mut().rev() {
            match mnt {
                Some(d) => {
                    unmount(d);
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    if !matches!(child.try_wait(), Ok(Some(_))) {
                        stop(child, 10);
                    }
                }
                None => stop(child, 60),
            }
        }
        self.children.clear();
        let text = std::fs::read_to_string(&self.stats)
            .with_context(|| format!("no statistics in {}", self.stats.display()))?;
        Ok(serde_json::from_str(&text)?)
    }
}

/// Starts `noftl serve` (the program `noftl`) with `args` (the target and device flags) on the
/// unix socket `sock`, writing its statistics to `stats` at shutdown, and waits until it is
/// ready (its "; ready" line). A server that does not become ready within 30 s is stopped.
/// How long a server may take to rewrite its statistics after SIGUSR1.
const STATS_TIMEOUT: Duration = Duration::from_secs(60);

/// Asks the process `pid` (`noftl serve` or `noftl mount` with `--stats-file stats`) for its
/// statistics now: the old file removed, SIGUSR1, the new one read (the process writes it whole,
/// through a temporary file and a rename) and parsed.
pub fn stats_now(pid: u32, stats: &Path) -> anyhow::Result<Value> {
    let _ = std::fs::remove_file(stats);
    // SAFETY: kill(2) on a process we started.
    if unsafe { libc::kill(pid as i32, libc::SIGUSR1) } != 0 {
        bail!(
            "cannot signal the server for its statistics: {}",
            std::io::Error::last_os_error()
        );
    }
    let deadline = Instant::now() + STATS_TIMEOUT;
    loop {
        if let Ok(text) = std::fs::read_to_string(stats) {
            return serde_json::from_str(&text).context("the server's statistics");
        }
        if Instant::now() > deadline {
            bail!(
                "the server wrote no statistics within {} s of SIGUSR1",
                STATS_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn start_serve(
    noftl: &Path,
    args: &[String],
    sock: &Path,
    stats: &Path,
    clock: &str,
) -> anyhow::Result<Child> {
    let mut serve = Command::new(noftl)
        .arg("serve")
        .args(args)
        .arg("--socket")
        .arg(sock)
        .args(["--clock", clock, "--stats-file"])
        .arg(stats)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("noftl serve")?;
    let err = serve.stderr.take().context("serve's stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Its other lines (a refusal, say) are kept for the error when it never gets ready.
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("; ready") {
                let _ = tx.send(Ok(()));
            } else if !line.starts_with("noftl serve: exporting") {
                let _ = tx.send(Err(line));
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut said = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(())) => return Ok(serve),
            Ok(Err(line)) => said.push(line),
            Err(_) => {
                stop(&mut serve, 10);
                bail!(
                    "noftl serve did not become ready{}",
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", said.join("; "))
                    }
                );
            }
        }
    }
}

/// A fresh mount of `fs` (dfs, ext4, f2fs, alfs) on `target` (ext4, f2fs and alfs: the block
/// FTL under it; ignored for dfs), served by `noftl` (the program whose `serve` and `mount`
/// verbs run the device) on `device` with `clock` (its `--clock`).
pub fn mount_on(
    noftl: &Path,
    fs: &str,
    target: &str,
    device: &DeviceSpec,
    clock: &str,
) -> anyhow::Result<Mounted> {
    let work = tempfile::tempdir().context("work directory")?;
    let exe = noftl;
    let root = work.path().join("mnt");
    std::fs::create_dir(&root)?;
    let stats = work.path().join("stats.json");
    let dev = device.cli_args();
    let work_path = work.path().to_path_buf();
    // Built first, so that a failure below stops whatever was started (Drop).
    let mut m = Mounted {
        root: root.clone(),
        children: Vec::new(),
        stats: stats.clone(),
        _work: work,
    };
    let children = &mut m.children;
    match fs {
        "dfs" | "f2fs" | "alfs" => {
            let mut cmd = Command::new(exe);
            cmd.args(["mount", "--fs", fs]).arg(&root).args(&dev);
            if fs != "dfs" {
                cmd.args(["--target", target]);
            }
            let child = cmd
                .args(["--clock", clock, "--stats-file"])
                .arg(&stats)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("noftl mount")?;
            children.push((child, None));
            wait_for("the FUSE mount", 30, || is_mounted(&root))?;
        }
        "ext4" => {
            let sock = work_path.join("nbd.sock");
            let mut args: Vec<String> = vec!["--target".into(), target.into()];
            args.extend(dev.iter().cloned());
            let serve = start_serve(exe, &args, &sock, &stats, clock)?;
            children.push((serve, None));
            let nbd_dir = work_path.join("nbd");
            std::fs::create_dir(&nbd_dir)?;
            let pidfile = work_path.join("nbdfuse.pid");
            let uri = format!("nbd+unix:///?socket={}", sock.display());
            let nbdfuse = Command::new("nbdfuse")
                .arg("-P")
                .arg(&pidfile)
                .arg(&nbd_dir)
                .arg(&uri)
                .stdin(Stdio::null())
                .spawn()
                .context("nbdfuse (Debian package libnbd-bin)")?;
            children.push((nbdfuse, Some(nbd_dir.clone())));
            wait_for("nbdfuse", 30, || pidfile.exists() && is_mounted(&nbd_dir))?;
            let img = nbd_dir.join("nbd");
            let st = Command::new("mkfs.ext4")
                // 4 KiB blocks, as on any ext4 over 512 MiB: mkfs picks 1 KiB blocks for small
                // devices, each of which the 4 KiB-page FTL would take as a page rewrite.
                .args(["-F", "-q", "-b", "4096", "-E", "nodiscard"])
                .arg(&img)
                .status()
                .context("mkfs.ext4")?;
            if !st.success() {
                bail!("mkfs.ext4 failed: {st}");
            }
            let fuse2fs = Command::new("fuse2fs")
                .arg(&img)
                .arg(&root)
                .args(["-o", "fakeroot", "-f"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .context("fuse2fs")?;
            children.push((fuse2fs, Some(root.clone())));
            wait_for("fuse2fs", 30, || is_mounted(&root))?;
        }
        other => bail!("unknown file system '{other}' (dfs, ext4, f2fs, alfs)"),
    }
    Ok(m)
}

impl Drop for Mounted {
    fn drop(&mut self) {
        for (child, mnt) in self.children.iter_mut().rev() {
            if let Some(d) = mnt {
                unmount(d);
            }
            if !matches!(child.try_wait(), Ok(Some(_))) {
                stop(child, 10);
            }
        }
    }
}

/// Drops a file's pages from the page cache, so that the next read goes to the file system.
pub fn fadvise_dontneed(f: &std::fs::File) {
    // SAFETY: a valid descriptor; the advice only drops cached pages.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// Writes a file of `mib` MiB of seeded random data, fsynced and dropped from the page cache.
pub fn make_file(path: &Path, mib: u32, seed: u64) -> anyhow::Result<()> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut f = std::fs::File::create(path)?;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mib {
        rng.fill(&mut buf[..]);
        f.write_all(&buf)?;
    }
    f.sync_all()?;
    fadvise_dontneed(&f);
    Ok(())
}
