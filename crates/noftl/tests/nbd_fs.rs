//! A real file system on the export, all in userspace (no kernel nbd module): `nbdfuse` shows
//! the export as a file, `mkfs.ext4` formats it, `fuse2fs` mounts it and files are written,
//! `e2fsck -fn` must find it clean, and the files read back through a read-only remount (and,
//! with a flash target kept in an `--image`, after the server is restarted on that image).

mod nbd_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nbd_support::*;

const TOOLS: &[&str] = &["nbdfuse", "fuse2fs", "fusermount3", "mkfs.ext4", "e2fsck"];

fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A FUSE process (nbdfuse or fuse2fs) in the foreground, unmounted and reaped on drop.
struct Mount {
    child: Child,
    dir: PathBuf,
}

impl Mount {
    fn unmount(mut self) {
        self.unmount_now();
    }
    fn unmount_now(&mut self) {
        // On a loaded machine the first unmount can find the file system busy (the kernel
        // still releasing the last file): try again for a while.
        for _ in 0..50 {
            if !is_mounted(&self.dir) {
                break;
            }
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg(&self.dir)
                .status();
            if is_mounted(&self.dir) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        // Wait for the process itself: fuse2fs writes its last metadata after the unmount.
        if reap(&mut self.child, Duration::from_secs(30)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Never leave a dead mount behind for the next mount on this directory.
        if is_mounted(&self.dir) {
            let _ = Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.dir)
                .status();
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.unmount_now();
        }
    }
}

/// The export as the file `<dir>/nbd`.
fn nbdfuse(server: &Server, dir: &Path) -> (Mount, PathBuf) {
    std::fs::create_dir_all(dir).expect("mountpoint");
    let pidfile = dir.with_extension("pid");
    let child = Command::new("nbdfuse")
        .arg("-P")
        .arg(&pidfile)
        .arg(dir)
        .arg(server.uri())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn nbdfuse");
    let m = Mount {
        child,
        dir: dir.to_path_buf(),
    };
    wait_for("nbdfuse", Duration::from_secs(30), || {
        pidfile.exists() && is_mounted(dir)
    });
    (m, dir.join("nbd"))
}

fn fuse2fs(image: &Path, dir: &Path, read_only: bool) -> Mount {
    std::fs::create_dir_all(dir).expect("mountpoint");
    let opts = if read_only { "ro,fakeroot" } else { "fakeroot" };
    let child = Command::new(tool("fuse2fs"))
        .arg(image)
        .arg(dir)
        .arg("-o")
        .arg(opts)
        .arg("-f")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn fuse2fs");
    let m = Mount {
        child,
        dir: dir.to_path_buf(),
    };
    wait_for("fuse2fs", Duration::from_secs(30), || is_mounted(dir));
    m
}

/// The files written: a few sizes, some not multiples of a block, in two directories.
fn files() -> Vec<(String, Vec<u8>)> {
    let sizes = [
        0usize,
        1,
        511,
        4096,
        5000,
        65_536,
        300_000,
        1 << 20,
        3 << 20,
    ];
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            (
                format!("{}/file-{i}.bin", if i % 2 == 0 { "a" } else { "b/c" }),
                pseudo_random(n, 77 + i as u64),
            )
        })
        .collect()
}

fn write_files(root: &Path) {
    for (name, data) in files() {
        let p = root.join(&name);
        std::fs::create_dir_all(p.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(&p, &data).expect("write file");
    }
}

fn check_files(root: &Path) {
    for (name, data) in files() {
        let back = std::fs::read(root.join(&name)).unwrap_or_else(|e| panic!("read {name}: {e}"));
        assert!(back == data, "{name} differs after the round trip");
    }
}

fn fsck_clean(image: &Path) {
    let out = Command::new(tool("e2fsck"))
        .arg("-fn")
        .arg(image)
        .output()
        .expect("run e2fsck");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "e2fsck -fn exited with {}:\n{text}",
        out.status
    );
    assert!(
        !text.contains("Fix?") && !text.contains("Clear?") && !text.contains("wrong"),
        "e2fsck found problems:\n{text}"
    );
}

/// Formats the export, writes the files, unmounts, checks; then reads them back read-only.
fn make_fs_and_files(server: &Server, work: &Path) {
    let (dev, image) = nbdfuse(server, &work.join("dev"));
    run(Command::new(tool("mkfs.ext4"))
        .args(["-F", "-q"])
        .arg(&image));
    let fs = fuse2fs(&image, &work.join("fs"), false);
    write_files(&work.join("fs"));
    fs.unmount();
    fsck_clean(&image);
    dev.unmount();
}

fn read_back(server: &Server, work: &Path) {
    let (dev, image) = nbdfuse(server, &work.join("dev"));
    fsck_clean(&image);
    let fs = fuse2fs(&image, &work.join("fs"), true);
    check_files(&work.join("fs"));
    fs.unmount();
    dev.unmount();
}

#[test]
fn ext4_through_nbdfuse_and_fuse2fs() {
    let Ok(()) = fuse_available(TOOLS).map_err(skip) else {
        return;
    };
    let work = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&[MEMDISK_64M, &["--clock", "none"]].concat());
    make_fs_and_files(&server, work.path());
    read_back(&server, work.path());
    let stats = server.stop();
    assert_eq!(stats["requests"]["errors"], 0, "{stats}");
}

/// The same on TLC chips with 16 KiB pages behind the page FTL (4 KiB sectors in 16 KiB pages).
#[test]
fn ext4_on_tlc_16k_pages_through_the_page_ftl() {
    let Ok(()) = fuse_available(TOOLS).map_err(skip) else {
        return;
    };
    let work = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&[PAGE_TLC16K, &["--clock", "none"]].concat());
    make_fs_and_files(&server, work.path());
    read_back(&server, work.path());
    let stats = server.stop();
    assert_eq!(stats["requests"]["errors"], 0, "{stats}");
}

#[test]
fn ext4_files_survive_a_server_restart_on_its_image() {
    let Ok(()) = fuse_available(TOOLS).map_err(skip) else {
        return;
    };
    let work = tempfile::tempdir().expect("temp dir");
    let image = work.path().join("flash.img");
    let image_arg = image.display().to_string();
    // ~80 MiB of raw flash on the tiny preset's chips; the page FTL exports what OP leaves.
    let args: Vec<&str> = vec![
        "--target",
        "page",
        "--preset",
        "tiny",
        "--set",
        "geometry.blocks_per_plane=160",
        "--image",
        &image_arg,
        "--clock",
        "none",
    ];
    let socket = work.path().join("nbd.sock");
    let stats = work.path().join("stats.json");
    let server = Server::start_at(&socket, &stats, &args);
    make_fs_and_files(&server, work.path());
    server.stop();
    let server = Server::start_at(&socket, &stats, &args);
    read_back(&server, work.path());
    let end = server.stop();
    assert_eq!(end["requests"]["errors"], 0, "{end}");
}
