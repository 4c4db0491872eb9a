//! Where results go (issue 32, "Nothing lost, nothing hidden"): a result file never replaces
//! the image it describes, an input, or a file another noftl process holds locked
//! (`lab::output`). Each test is named after the data loss it prevents.

mod cli_support;
mod nbd_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nbd_support::{reap, Server};

const PAGE_TINY: &[&str] = &["--target", "page", "--preset", "tiny", "--clock", "none"];

/// A flash image written by `noftl serve` (then stopped): what a user would lose.
fn served_image(dir: &Path) -> PathBuf {
    let img = dir.join("a.img");
    let args = [PAGE_TINY, &["--image", img.to_str().expect("utf-8")]].concat();
    Server::start_at(&dir.join("first.sock"), &dir.join("first.json"), &args).stop();
    assert!(std::fs::metadata(&img).expect("image").len() > 0);
    img
}

/// Runs noftl with `args` for at most 30 s: (exit success, stderr). A run still going then
/// (a server that was not refused) is killed and reported as `None`.
fn run_briefly(args: &[&str]) -> Option<(bool, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn noftl");
    let Some(status) = reap(&mut child, Duration::from_secs(30)) else {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    };
    let mut err = String::new();
    use std::io::Read as _;
    let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
    Some((status.success(), err))
}

/// Issue 32: `serve --image a.img --stats-file a.img`, then SIGTERM, replaced the image by its
/// statistics. Now the server is refused at start, whichever link names the image.
#[test]
fn a_stats_file_that_is_the_served_image_is_refused_and_the_image_kept() {
    let d = tempfile::tempdir().expect("tempdir");
    let img = served_image(d.path());
    let before = std::fs::read(&img).expect("image");
    let hard = d.path().join("hard.json");
    std::fs::hard_link(&img, &hard).expect("hard link");
    let soft = d.path().join("soft.json");
    std::os::unix::fs::symlink(&img, &soft).expect("symlink");
    let sock = d.path().join("s.sock");
    for stats in [&img, &hard, &soft] {
        let args = [
            &["serve"],
            PAGE_TINY,
            &[
                "--image",
                img.to_str().expect("utf-8"),
                "--socket",
                sock.to_str().expect("utf-8"),
                "--stats-file",
                stats.to_str().expect("utf-8"),
            ],
        ]
        .concat();
        let (ok, err) = run_briefly(&args).expect("refused at start, not served");
        assert!(!ok && err.contains("same file as --image"), "{err}");
    }
    assert_eq!(std::fs::read(&img).expect("image"), before, "the image");
    // An image the server would create: refused before it exists, and not created.
    let new = d.path().join("new.img");
    let spelled = d.path().join(".").join("new.img");
    let args = [
        &["serve"],
        PAGE_TINY,
        &[
            "--image",
            new.to_str().expect("utf-8"),
            "--socket",
            sock.to_str().expect("utf-8"),
            "--stats-file",
            spelled.to_str().expect("utf-8"),
        ],
    ]
    .concat();
    let (ok, err) = run_briefly(&args).expect("refused at start");
    assert!(!ok && err.contains("same file as --image"), "{err}");
    assert!(!new.exists());
}

/// Issue 32: the same with `mount`: its statistics replaced the file system's image at
/// unmount. Refused before anything is formatted or mounted.
#[test]
fn a_mount_stats_file_that_is_its_image_is_refused_before_mounting() {
    let d = tempfile::tempdir().expect("tempdir");
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let img = d.path().join("fs.img");
    let img_s = img.to_str().expect("utf-8");
    let (ok, err) = run_briefly(&[
        "mount",
        "--fs",
        "dfs",
        "--preset",
        "tiny",
        "--image",
        img_s,
        "--stats-file",
        img_s,
        mnt.to_str().expect("utf-8"),
    ])
    .expect("refused at start, not mounted");
    assert!(!ok && err.contains("same file as --image"), "{err}");
    assert!(!img.exists(), "nothing formatted");
}

/// Issue 32: `bench tpcb --json a.img` replaced the image of a running server (which holds a
/// lock on it), and the server went on acknowledging FLUSH into a file nobody could reach:
/// everything written was lost at exit. Now the bench is refused before it runs, naming the
/// server, and the image is the server's to the end.
#[test]
fn a_result_over_an_image_a_running_server_holds_is_refused_and_the_image_kept() {
    let d = tempfile::tempdir().expect("tempdir");
    let img = served_image(d.path());
    let img_s = img.to_str().expect("utf-8").to_string();
    let server = Server::start_at(
        &d.path().join("s.sock"),
        &d.path().join("stats.json"),
        &[PAGE_TINY, &["--image", &img_s]].concat(),
    );
    let t = Instant::now();
    let (ok, _, err) = cli_support::noftl(&[
        "bench",
        "tpcb",
        "--storage",
        "memdisk",
        "--scale",
        "1",
        "--txns",
        "5",
        "--json",
        &img_s,
    ]);
    assert!(!ok, "{err}");
    assert!(err.contains("holds it locked"), "{err}");
    assert!(err.contains(&format!("pid {}", server.pid())), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "refused before the run"
    );
    server.stop();
    // Still the server's image: it serves again.
    assert_ne!(std::fs::read(&img).expect("image").first(), Some(&b'{'));
    Server::start_at(
        &d.path().join("again.sock"),
        &d.path().join("again.json"),
        &[PAGE_TINY, &["--image", &img_s]].concat(),
    )
    .stop();
}

/// A result never replaces the file the run reads its device from.
#[test]
fn a_json_result_over_the_device_config_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let cfg = d.path().join("dev.toml");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/tiny.toml");
    std::fs::copy(root, &cfg).expect("copy preset");
    let before = std::fs::read(&cfg).expect("config");
    let cfg_s = cfg.to_str().expect("utf-8");
    let (ok, _, err) = cli_support::noftl(&[
        "io", "--target", "page", "--config", cfg_s, "--ops", "10", "--json", cfg_s,
    ]);
    assert!(!ok && err.contains("same file as --config"), "{err}");
    assert_eq!(std::fs::read(&cfg).expect("config"), before);
}
