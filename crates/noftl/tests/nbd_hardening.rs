//! `noftl serve` against careless and hostile users, and the NBD features real clients expect
//! (issue 16). Each hardening test is named after the behaviour that was broken and is fixed
//! now.

mod nbd_support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use nbd_support::*;

const NBD_REQUEST_MAGIC: u32 = 0x2560_9513;

/// Client side of a fixed-newstyle GO handshake.
fn handshake(s: &mut UnixStream) {
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).expect("greeting");
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    let mut msg = Vec::new();
    msg.extend_from_slice(&3u32.to_be_bytes()); // FIXED_NEWSTYLE | NO_ZEROES
    msg.extend_from_slice(b"IHAVEOPT");
    msg.extend_from_slice(&7u32.to_be_bytes()); // GO
    msg.extend_from_slice(&6u32.to_be_bytes());
    msg.extend_from_slice(&[0; 6]);
    s.write_all(&msg).expect("send GO");
    loop {
        let mut head = [0u8; 20];
        s.read_exact(&mut head).expect("option reply");
        let kind = u32::from_be_bytes(head[12..16].try_into().expect("4 bytes"));
        let len = u32::from_be_bytes(head[16..20].try_into().expect("4 bytes")) as usize;
        let mut data = vec![0u8; len];
        s.read_exact(&mut data).expect("option reply data");
        assert!(
            kind < 1 << 31,
            "GO refused: {}",
            String::from_utf8_lossy(&data)
        );
        if kind == 1 {
            return;
        }
    }
}

fn connect(server: &Server) -> UnixStream {
    let mut s = UnixStream::connect(&server.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    handshake(&mut s);
    s
}

fn request(
    s: &mut UnixStream,
    kind: u16,
    flags: u16,
    handle: u64,
    offset: u64,
    length: u32,
    payload: &[u8],
) {
    let mut m = Vec::new();
    m.extend_from_slice(&NBD_REQUEST_MAGIC.to_be_bytes());
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&handle.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&length.to_be_bytes());
    m.extend_from_slice(payload);
    s.write_all(&m).expect("send request");
}

/// Reads a simple reply and `data_len` bytes of data on success; returns the error.
fn reply(s: &mut UnixStream, data_len: usize) -> u32 {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).expect("reply");
    assert_eq!(h[..4], 0x6744_6698u32.to_be_bytes());
    let err = u32::from_be_bytes(h[4..8].try_into().expect("4 bytes"));
    if err == 0 {
        let mut d = vec![0u8; data_len];
        s.read_exact(&mut d).expect("reply data");
    }
    err
}

fn nbdinfo_ok(uri: &str) -> Result<String, String> {
    let out = Command::new("nbdinfo")
        .arg(uri)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Item 1: 64 connected sockets that never send a byte used to fill every slot, so that the
/// next real client got "server disconnected unexpectedly". Now half-open connections do not
/// count against the limit (and the oldest is closed when too many wait).
#[test]
fn idle_half_open_sockets_do_not_lock_out_a_real_client() {
    let Ok(()) = require(&["nbdinfo"]).map_err(skip) else {
        return;
    };
    let server =
        Server::start(&[MEMDISK_64M, &["--clock", "none", "--max-connections", "8"]].concat());
    let idle: Vec<UnixStream> = (0..40)
        .map(|_| UnixStream::connect(&server.socket).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let info = nbdinfo_ok(&server.uri());
    assert!(
        info.is_ok(),
        "a real client was locked out: {info:?}\n{}",
        server.log()
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    drop(idle);
    let stats = server.stop();
    assert!(
        stats["connections"]["half_open_closed"].as_u64() >= Some(32),
        "{stats}"
    );
}

/// Item 1: a handshake that sends nothing is closed after `--handshake-timeout`.
#[test]
fn stalled_handshake_is_closed_after_the_handshake_timeout() {
    let server = Server::start(
        &[
            MEMDISK_64M,
            &["--clock", "none", "--handshake-timeout", "500ms"],
        ]
        .concat(),
    );
    // The deadline counts from the accept, which follows this instant: the close cannot come
    // earlier than 500 ms after it, however late this thread is scheduled.
    let t = Instant::now();
    let mut s = UnixStream::connect(&server.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).expect("greeting");
    let mut b = [0u8; 1];
    let n = s.read(&mut b).unwrap_or(0);
    assert_eq!(n, 0, "the server should have closed the stalled handshake");
    let waited = t.elapsed();
    // The upper bound only tells "closed" from "never closed" (a loaded machine is slow).
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let stats = server.stop();
    assert_eq!(stats["connections"]["timed_out"], 1, "{stats}");
}

/// Item 1: established connections that stay idle hold their slots only while nobody needs
/// them: when every slot is taken, the one idle the longest (past `--idle-timeout`) is closed
/// for the new client; without an idle one, GO is refused with a reason, not a hang-up.
#[test]
fn idle_established_connections_give_their_slot_to_a_new_client() {
    let Ok(()) = require(&["nbdinfo"]).map_err(skip) else {
        return;
    };
    let server = Server::start(
        &[
            MEMDISK_64M,
            &[
                "--clock",
                "none",
                "--max-connections",
                "3",
                "--idle-timeout",
                "1s",
            ],
        ]
        .concat(),
    );
    let mut held: Vec<UnixStream> = (0..3).map(|_| connect(&server)).collect();
    // All three were active a moment ago: the fourth is refused, with the reason.
    let refused = nbdinfo_ok(&server.uri());
    assert!(refused.is_err(), "no slot is free: {refused:?}");
    // The server logs the refusal before it answers, but the log reaches us through a pipe
    // and another thread: wait for the line instead of expecting it at once (this assertion
    // flaked under load).
    assert!(
        server.wait_for_log("refusing connection", Duration::from_secs(30)),
        "{}",
        server.log()
    );
    // Keep one busy, let two idle past the timeout.
    for i in 0..12 {
        std::thread::sleep(Duration::from_millis(100));
        request(&mut held[0], 0, 0, i, 0, 4096, &[]);
        assert_eq!(reply(&mut held[0], 4096), 0);
    }
    assert!(nbdinfo_ok(&server.uri()).is_ok(), "{}", server.log());
    // The busy one kept its connection.
    request(&mut held[0], 0, 0, 99, 0, 4096, &[]);
    assert_eq!(reply(&mut held[0], 4096), 0);
    let stats = server.stop();
    assert!(
        stats["connections"]["idle_closed"].as_u64() >= Some(1),
        "{stats}"
    );
    assert!(
        stats["connections"]["refused"].as_u64() >= Some(1),
        "{stats}"
    );
}

/// Item 2: two servers on one image both started and corrupted it; the second is refused now,
/// naming the first one's pid.
#[test]
fn second_server_on_one_image_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().expect("temp dir");
    let image = dir.path().join("two.img");
    let img = image.to_str().expect("utf-8");
    let a = Server::start(&[
        "--target", "page", "--preset", "tiny", "--clock", "none", "--image", img,
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "serve", "--target", "page", "--preset", "tiny", "--clock", "none", "--image", img,
        ])
        .arg("--socket")
        .arg(dir.path().join("b.sock"))
        .output()
        .expect("run noftl");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("in use by another process"), "{err}");
    assert!(err.contains(&format!("pid {}", a.pid())), "{err}");
    a.stop();
    // Once the first has stopped, the image is free again (and recovered).
    let b = Server::start(&[
        "--target", "page", "--preset", "tiny", "--clock", "none", "--image", img,
    ]);
    b.stop();
}

/// Item 3: `--stats-file` naming a FIFO (or a device, as root) used to be replaced by a JSON
/// file at shutdown; now it is refused at start-up and left alone.
#[test]
fn stats_file_that_is_not_a_regular_file_is_refused_at_startup() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("stats.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success()));
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "serve", "--target", "memdisk", "--preset", "tiny", "--clock", "none",
        ])
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--stats-file")
        .arg(&fifo)
        .output()
        .expect("run noftl");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("not a regular file"),
        "{err}"
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .expect("fifo")
        .file_type()
        .is_fifo());
}

/// Item 3: when the final statistics cannot be written, the exit status used to be 0; now it
/// is 1, and no temporary file is left next to the target.
#[test]
fn failed_final_stats_write_exits_non_zero_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("s.sock");
    let stats = dir.path().join("stats.json");
    let mut server = Server::start_at(
        &socket,
        &stats,
        &[MEMDISK_64M, &["--clock", "none"]].concat(),
    );
    // The path becomes a directory while the server runs.
    std::fs::create_dir(&stats).expect("mkdir");
    server.signal("TERM");
    let status = server.wait(Duration::from_secs(30)).expect("server exits");
    assert_eq!(status.code(), Some(1), "{}", server.log());
    assert!(
        server.log().contains("not a regular file"),
        "{}",
        server.log()
    );
    let tmp: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
}

/// Item 7: with `--clock real`, a huge WRITE_ZEROES on one connection used to hold the device
/// for its whole length (a 512 MiB one delayed another connection's 4 KiB read by 40 s). Now it
/// runs in chunks: the read completes within a bound while the write-zeroes goes on.
#[test]
fn huge_write_zeroes_does_not_starve_another_connections_read() {
    // tiny with 640 blocks per plane: 320 MiB of SLC, 8 planes; 256 MiB of zeros programmed
    // take about 1.6 s in the model (200 us per page, 8 planes at once).
    let server = Server::start(&[
        "--target",
        "page",
        "--preset",
        "tiny",
        "--set",
        "geometry.blocks_per_plane=640",
        "--clock",
        "real",
    ]);
    let mut big = connect(&server);
    let mut small = connect(&server);
    const ZEROES: u32 = 256 << 20;
    const NO_HOLE: u16 = 1 << 1;
    let t0 = Instant::now();
    request(&mut big, 6, NO_HOLE, 1, 0, ZEROES, &[]);
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    request(
        &mut small,
        0,
        0,
        2,
        u64::from(ZEROES) + (1 << 20),
        4096,
        &[],
    );
    assert_eq!(reply(&mut small, 4096), 0);
    let read_took = t.elapsed();
    assert_eq!(reply(&mut big, 0), 0);
    let zeroes_took = t0.elapsed();
    eprintln!("4 KiB read: {read_took:?} while a 256 MiB write-zeroes took {zeroes_took:?}");
    assert!(
        read_took < Duration::from_millis(500),
        "the read waited {read_took:?} behind the write-zeroes ({zeroes_took:?})"
    );
    assert!(
        read_took * 2 < zeroes_took,
        "the write-zeroes was not long enough to test anything"
    );
    server.stop();
}

/// `base:allocation`: `nbdinfo --map` used to fail ("server does not support metadata context");
/// now it shows trimmed and never-written ranges as holes, written ones as data.
#[test]
fn nbdinfo_map_shows_holes_after_a_trim() {
    let Ok(()) = require(&["nbdinfo"]).map_err(skip) else {
        return;
    };
    for target in [&["--target", "page", "--preset", "tiny"][..], MEMDISK_64M] {
        let server = Server::start(&[target, &["--clock", "none"]].concat());
        let mut s = connect(&server);
        request(&mut s, 1, 0, 1, 0, 65536, &vec![0xa5; 65536]); // WRITE 64 KiB
        assert_eq!(reply(&mut s, 0), 0);
        request(&mut s, 4, 0, 2, 16384, 16384, &[]); // TRIM 16 KiB of it
        assert_eq!(reply(&mut s, 0), 0);
        let map = run(Command::new("nbdinfo").arg("--map").arg(server.uri()));
        let rows: Vec<Vec<String>> = map
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect();
        let row = |off: &str| {
            rows.iter()
                .find(|r| r[0] == off)
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(row("0")[1..3], ["16384", "0"], "{map}");
        assert_eq!(row("16384")[1..4], ["16384", "3", "hole,zero"], "{map}");
        assert_eq!(row("32768")[1..3], ["32768", "0"], "{map}");
        assert_eq!(row("65536")[2..4], ["3", "hole,zero"], "{map}");
        drop(s);
        let stats = server.stop();
        assert!(
            stats["requests"]["block_status"].as_u64() >= Some(1),
            "{stats}"
        );
    }
}

/// Multi-conn is advertised honestly (every connection shares one device; FLUSH covers them
/// all): `nbdinfo --can multi-conn` succeeds, and nbdcopy over four connections copies a
/// sparse file onto the page FTL and back, holes included.
#[test]
fn multi_conn_is_advertised_and_nbdcopy_over_four_connections_keeps_data_and_holes() {
    let Ok(()) = require(&["nbdinfo", "nbdcopy"]).map_err(skip) else {
        return;
    };
    let server = Server::start(&[
        "--target",
        "page",
        "--preset",
        "tiny",
        "--set",
        "geometry.blocks_per_plane=128",
        "--clock",
        "none",
    ]);
    let ok = Command::new("nbdinfo")
        .args(["--can", "multi-conn"])
        .arg(server.uri())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "nbdinfo --can multi-conn");
    let size = run(Command::new("nbdinfo").arg("--size").arg(server.uri()))
        .trim()
        .parse::<u64>()
        .expect("size");
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("in.img");
    let output = dir.path().join("out.img");
    // Data in the first and third eighths, a hole between and after.
    let mut data = vec![0u8; size as usize];
    let eighth = (size / 8) as usize;
    data[..eighth].copy_from_slice(&pseudo_random(eighth, 7));
    data[2 * eighth..3 * eighth].copy_from_slice(&pseudo_random(eighth, 8));
    std::fs::write(&input, &data).expect("write input");
    run(Command::new("nbdcopy")
        .args(["--connections=4", "--threads=4", "--requests=16"])
        .arg(&input)
        .arg(server.uri()));
    run(Command::new("nbdcopy")
        .args(["--connections=4", "--threads=4", "--requests=16"])
        .arg(server.uri())
        .arg(&output));
    assert!(
        std::fs::read(&output).expect("read back") == data,
        "data differs"
    );
    let totals = run(Command::new("nbdinfo")
        .args(["--map", "--totals"])
        .arg(server.uri()));
    assert!(totals.contains("hole,zero"), "no holes reported: {totals}");
    let stats = server.stop();
    // nbdinfo three times, nbdcopy twice with four connections each.
    assert!(
        stats["connections"]["accepted"].as_u64() >= Some(11),
        "{stats}"
    );
    assert_eq!(stats["requests"]["errors"], 0, "{stats}");
}
