//! Careless and hostile input to the CLI (issue 16): each test is named after the behaviour that
//! was broken and is fixed now.

mod cli_support;
use cli_support::noftl;

/// Item 5: `--set geometry.blocks_per_plane=4294967295` used to abort with "memory allocation of
/// 103079215080 bytes failed" (exit 134); now every verb refuses it with the memory it needs.
#[test]
fn absurd_geometry_is_refused_with_the_memory_it_needs_not_an_allocation_abort() {
    let set = "geometry.blocks_per_plane=4294967295";
    for args in [
        vec!["io", "--target", "page", "--set", set, "--ops", "10"],
        vec!["io", "--target", "dftl", "--set", set, "--ops", "10"],
        vec!["device", "show", "--set", set],
        vec![
            "bench",
            "tpcb",
            "--storage",
            "native",
            "--set",
            set,
            "--txns",
            "1",
        ],
        vec![
            "serve",
            "--target",
            "page",
            "--set",
            set,
            "--socket",
            "/nonexistent/s.sock",
        ],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(&args)
            .env("RUST_BACKTRACE", "1")
            .output()
            .expect("run noftl");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("needs about") && err.contains("is available"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
    }
}

/// `serve --prefault` maps the in-memory device's RAM; an image device's pages are its file's.
/// Asked for both, the server refuses before it creates, locks or maps anything.
#[test]
fn prefault_with_an_image_is_refused_before_the_image_is_touched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let image = dir.path().join("a.img");
    let sock = dir.path().join("s.sock");
    let (ok, _, err) = noftl(&[
        "serve",
        "--target",
        "page",
        "--preset",
        "tiny",
        "--prefault",
        "--image",
        image.to_str().expect("utf-8"),
        "--socket",
        sock.to_str().expect("utf-8"),
    ]);
    assert!(!ok);
    assert!(
        err.contains("--prefault") && err.contains("--image"),
        "{err}"
    );
    assert!(!image.exists() && !sock.exists(), "nothing created");
}

/// Item 5: 4 billion terminals used to grow the process until the OOM killer came; now the run
/// is refused before loading, with the terminals' share of the memory in the message.
#[test]
fn too_many_terminals_are_refused_before_loading_not_oom_killed() {
    let (ok, _, err) = noftl(&["bench", "tpcb", "--terminals", "4000000000", "--txns", "1"]);
    assert!(!ok);
    assert!(err.contains("4000000000 terminals"), "{err}");
    let (ok, _, err) = noftl(&["bench", "tpcb", "--scale", "100000", "--txns", "1"]);
    assert!(!ok);
    assert!(err.contains("--scale"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Item 5: a request size or queue depth that would allocate terabytes is refused.
#[test]
fn huge_request_size_and_queue_depth_are_refused() {
    let (ok, _, err) = noftl(&[
        "io", "--target", "page", "--preset", "tiny", "--bs", "1T", "--ops", "1",
    ]);
    assert!(!ok && err.contains("--bs is at most"), "{err}");
    let (ok, _, err) = noftl(&[
        "io",
        "--target",
        "page",
        "--preset",
        "tiny",
        "--qd",
        "4294967295",
        "--ops",
        "1",
    ]);
    assert!(!ok && err.contains("--qd is at most"), "{err}");
}

/// Item 6: `--txns 0` and `crashtest --seeds 0` used to report success on nothing.
#[test]
fn zero_transactions_and_zero_seeds_are_refused_not_reported_as_success() {
    let (ok, _, err) = noftl(&["bench", "tpcb", "--txns", "0"]);
    assert!(
        !ok && err.contains("--txns must be at least 1, got 0"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["bench", "tatp", "--txns", "0"]);
    assert!(!ok && err.contains("--txns must be at least 1"), "{err}");
    let (ok, _, err) = noftl(&["crashtest", "--seeds", "0"]);
    assert!(
        !ok && err.contains("--seeds must be at least 1, got 0"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["crashtest", "--seeds", "1", "--txns", "0"]);
    assert!(!ok && err.contains("--txns must be at least 1"), "{err}");
    let (ok, _, err) = noftl(&["bench", "tpcb", "--txns", "1", "--buffer-pages", "0"]);
    assert!(
        !ok && err.contains("--buffer-pages must be at least"),
        "{err}"
    );
}

fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", path.display());
}

/// Item 3: a result path holding a FIFO or a directory used to be replaced (a device node
/// turned into a JSON file when run as root) or left a stray `NAME.tmp`; now it is refused at
/// start-up, before any work, and nothing is left behind.
#[test]
fn result_path_that_is_not_a_regular_file_is_refused_at_startup_and_left_alone() {
    let d = tempfile::tempdir().expect("tempdir");
    let fifo = d.path().join("fifo.json");
    mkfifo(&fifo);
    let dir = d.path().join("dir.json");
    std::fs::create_dir(&dir).expect("mkdir");
    for p in [&fifo, &dir] {
        let t = std::time::Instant::now();
        let (ok, _, err) = noftl(&[
            "bench",
            "tpcb",
            "--preset",
            "tiny",
            "--txns",
            "1",
            "--json",
            p.to_str().expect("utf-8"),
        ]);
        assert!(!ok && err.contains("not a regular file"), "{err}");
        assert!(t.elapsed().as_secs() < 5, "refused only after the run");
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .expect("fifo")
        .file_type()
        .is_fifo());
    assert!(dir.is_dir());
    let (ok, _, err) = noftl(&[
        "bench",
        "tpcb",
        "--preset",
        "tiny",
        "--txns",
        "1",
        "--json",
        d.path().join("no/such/dir.json").to_str().expect("utf-8"),
    ]);
    assert!(!ok && err.contains("cannot write"), "{err}");
    let names: Vec<_> = std::fs::read_dir(d.path())
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

/// Item 4: `bench --storage file --path victim.bin` used to turn someone's file into a
/// database; now a file that is not a noftl database is refused unless `--force`.
#[test]
fn existing_file_that_is_not_a_database_is_not_overwritten_without_force() {
    let d = tempfile::tempdir().expect("tempdir");
    let victim = d.path().join("victim.bin");
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&victim, &data).expect("write victim");
    let path = victim.to_str().expect("utf-8");
    let base = [
        "bench",
        "tpcb",
        "--storage",
        "file",
        "--path",
        path,
        "--preset",
        "tiny",
        "--scale",
        "1",
        "--accounts-per-branch",
        "1000",
        "--txns",
        "5",
    ];
    let (ok, _, err) = noftl(&base);
    assert!(
        !ok && err.contains("not a noftl database") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&victim).expect("read"),
        data,
        "the file was changed"
    );
    let (ok, _, err) = noftl(&[&base[..], &["--force"]].concat());
    assert!(ok, "{err}");
    // Now it holds a database: reused without --force.
    let (ok, _, err) = noftl(&base);
    assert!(ok, "{err}");
    assert!(err.contains("reusing the TPC-B database"), "{err}");
}

/// Item 2, for databases: a `--storage file` path in use by another process is refused, with
/// that process's pid.
#[test]
fn database_file_in_use_by_another_process_is_refused_with_its_pid() {
    let d = tempfile::tempdir().expect("tempdir");
    let db = d.path().join("db.bin");
    let holder = std::process::Command::new("flock")
        .arg(&db)
        .args(["sleep", "30"])
        .spawn();
    let Ok(mut holder) = holder else {
        eprintln!("SKIPPED: no flock(1) to hold the file from another process");
        return;
    };
    let t = std::time::Instant::now();
    while std::fs::read_to_string("/proc/locks").is_ok_and(|l| !l.contains("FLOCK"))
        && t.elapsed().as_secs() < 10
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (ok, _, err) = noftl(&[
        "bench",
        "tpcb",
        "--storage",
        "file",
        "--path",
        db.to_str().expect("utf-8"),
        "--preset",
        "tiny",
        "--txns",
        "1",
    ]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!ok && err.contains("in use by another process"), "{err}");
    assert!(err.contains("pid "), "{err}");
}
