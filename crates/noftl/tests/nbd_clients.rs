//! `noftl serve` with real clients (libnbd's nbdinfo and nbdcopy) and with a hand-rolled
//! client that sends hostile input, on a temporary unix socket.

mod nbd_support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use nbd_support::*;

#[test]
fn nbdinfo_sees_size_and_features() {
    let Ok(()) = require(&["nbdinfo"]).map_err(skip) else {
        return;
    };
    let server = Server::start(&[MEMDISK_64M, &["--clock", "none"]].concat());
    let out = run(Command::new("nbdinfo").arg("--json").arg(server.uri()));
    let info: serde_json::Value = serde_json::from_str(&out).expect("nbdinfo --json");
    let export = &info["exports"][0];
    assert_eq!(export["export-size"], MEMDISK_64M_BYTES);
    for feature in [
        "can_flush",
        "can_fua",
        "can_trim",
        "can_zero",
        "can_multi_conn",
    ] {
        assert_eq!(export[feature], true, "{feature} in {export}");
    }
    assert_eq!(export["block_size_minimum"], 1);
    assert_eq!(export["block_size_preferred"], 4096);
    let stats = server.stop();
    assert!(stats["connections"]["accepted"].as_u64() >= Some(1));
}

#[test]
fn nbdcopy_round_trip_over_several_connections() {
    let Ok(()) = require(&["nbdcopy"]).map_err(skip) else {
        return;
    };
    let server = Server::start(&[MEMDISK_64M, &["--clock", "none"]].concat());
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    // 48 MiB of data, then the rest of the export stays zero.
    let data = pseudo_random(48 << 20, 0x5eed);
    std::fs::write(&input, &data).expect("write input");
    run(Command::new("nbdcopy")
        .args(["--connections=4", "--requests=16"])
        .arg(&input)
        .arg(server.uri()));
    run(Command::new("nbdcopy")
        .args(["--connections=4", "--requests=16"])
        .arg(server.uri())
        .arg(&output));
    let back = std::fs::read(&output).expect("read output");
    assert_eq!(back.len() as u64, MEMDISK_64M_BYTES);
    assert!(
        back[..data.len()] == data[..],
        "data copied out differs from data copied in"
    );
    assert!(
        back[data.len()..].iter().all(|&b| b == 0),
        "never-written tail must read as zeros"
    );
    let stats = server.stop();
    assert_eq!(stats["requests"]["errors"], 0, "{stats}");
    assert!(
        stats["connections"]["accepted"].as_u64() >= Some(2),
        "{stats}"
    );
    assert!(stats["requests"]["bytes_written"].as_u64() >= Some(48 << 20));
}

/// Client side of a fixed-newstyle GO handshake; returns the export size.
fn handshake(s: &mut UnixStream) -> u64 {
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
    let mut size = 0;
    loop {
        let mut head = [0u8; 20];
        s.read_exact(&mut head).expect("option reply");
        let kind = u32::from_be_bytes(head[12..16].try_into().expect("4 bytes"));
        let len = u32::from_be_bytes(head[16..20].try_into().expect("4 bytes")) as usize;
        let mut data = vec![0u8; len];
        s.read_exact(&mut data).expect("option reply data");
        if kind == 3 && data[..2] == [0, 0] {
            size = u64::from_be_bytes(data[2..10].try_into().expect("8 bytes"));
        }
        if kind == 1 {
            return size;
        }
    }
}

fn request(
    s: &mut UnixStream,
    kind: u16,
    flags: u16,
    handle: u64,
    offset: u64,
    payload: &[u8],
    length: u32,
) {
    let mut m = Vec::new();
    m.extend_from_slice(&0x2560_9513u32.to_be_bytes());
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&handle.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&length.to_be_bytes());
    m.extend_from_slice(payload);
    s.write_all(&m).expect("send request");
}

/// Reads a simple reply; returns (error, handle).
fn reply(s: &mut UnixStream, data: &mut [u8]) -> (u32, u64) {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).expect("reply");
    assert_eq!(h[..4], 0x6744_6698u32.to_be_bytes());
    let err = u32::from_be_bytes(h[4..8].try_into().expect("4 bytes"));
    if err == 0 {
        s.read_exact(data).expect("reply data");
    }
    (
        err,
        u64::from_be_bytes(h[8..16].try_into().expect("8 bytes")),
    )
}

#[test]
fn hostile_clients_are_cut_off_and_others_keep_working() {
    let server = Server::start(&[MEMDISK_64M, &["--clock", "none"]].concat());
    // A good client, connected before the hostile ones and used after them.
    let mut good = UnixStream::connect(&server.socket).expect("connect");
    good.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let size = handshake(&mut good);
    assert_eq!(size, MEMDISK_64M_BYTES);

    let hostile: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),    // not NBD at all
        0xffff_ffffu32.to_be_bytes().to_vec(), // unknown client flags
        [
            &1u32.to_be_bytes()[..],
            b"IHAVEOPT",
            &7u32.to_be_bytes(),
            &u32::MAX.to_be_bytes(),
        ]
        .concat(), // huge option
        [
            &1u32.to_be_bytes()[..],
            b"IHAVEOPT",
            &7u32.to_be_bytes(),
            &100u32.to_be_bytes(),
            &[1, 2],
        ]
        .concat(), // short option
        vec![0u8; 100_000],                    // zeros
    ];
    for (i, bytes) in hostile.iter().enumerate() {
        let mut s = UnixStream::connect(&server.socket).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = s.write_all(bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        // The server must close its side: reading reaches the end (after any greeting/replies).
        let mut sink = Vec::new();
        s.read_to_end(&mut sink).unwrap_or_else(|e| {
            panic!(
                "server closes hostile connection {i}: {e}\n{}",
                server.log()
            )
        });
    }
    // After a good handshake: a bad magic, an oversized write, and a write cut short.
    let header = |len: u32| {
        [
            &0x2560_9513u32.to_be_bytes()[..],
            &[0, 0, 0, 1],
            &[0; 16],
            &len.to_be_bytes(),
        ]
        .concat()
    };
    for (i, tail) in [
        vec![0xde; 28],
        header(u32::MAX),
        [header(4096), vec![1; 100]].concat(),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = UnixStream::connect(&server.socket).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        handshake(&mut s);
        let _ = s.write_all(&tail);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        s.read_to_end(&mut sink).unwrap_or_else(|e| {
            panic!("server closes bad transmission {i}: {e}\n{}", server.log())
        });
        assert!(sink.is_empty(), "no reply to a violation");
    }

    // The good client still works, including sub-sector and out-of-range requests.
    request(&mut good, 1, 0, 1, 100, &[7u8; 1000], 1000); // unaligned write: read-modify-write
    assert_eq!(reply(&mut good, &mut []), (0, 1));
    let mut back = vec![0u8; 1200];
    request(&mut good, 0, 0, 2, 0, &[], 1200);
    assert_eq!(reply(&mut good, &mut back), (0, 2));
    assert!(
        back[..100].iter().all(|&b| b == 0)
            && back[100..1100].iter().all(|&b| b == 7)
            && back[1100..].iter().all(|&b| b == 0)
    );
    request(&mut good, 1, 0, 3, size - 512, &[1u8; 1024], 1024); // write past the end
    assert_eq!(reply(&mut good, &mut []), (28, 3), "ENOSPC");
    request(&mut good, 0, 0, 4, size, &[], 512); // read past the end
    assert_eq!(reply(&mut good, &mut []), (22, 4), "EINVAL");
    request(&mut good, 5, 0, 5, 0, &[], 512); // CACHE: not offered
    assert_eq!(reply(&mut good, &mut []), (22, 5), "EINVAL");
    request(&mut good, 0, 0, 6, 0, &[], 64 << 20); // read above the maximum payload
    assert_eq!(reply(&mut good, &mut []), (22, 6), "EINVAL");
    request(&mut good, 6, 1, 7, 0, &[], 4096); // WRITE_ZEROES with FUA
    assert_eq!(reply(&mut good, &mut []), (0, 7));
    request(&mut good, 3, 0, 8, 0, &[], 0); // FLUSH
    assert_eq!(reply(&mut good, &mut []), (0, 8));
    request(&mut good, 2, 0, 9, 0, &[], 0); // DISC
    let mut sink = Vec::new();
    good.read_to_end(&mut sink).expect("closed after DISC");
    assert!(sink.is_empty(), "no reply to DISC");

    // SIGUSR1 writes statistics and serving goes on. A connection's end is counted by its
    // thread after the socket closes, so the client can see the close first: ask again until
    // the counts settle (bounded), rather than trusting the first snapshot.
    let settled = |v: &serde_json::Value| {
        v["connections"]["protocol_errors"].as_u64() >= Some(5) && v["requests"]["errors"] == 4
    };
    let mut stats = serde_json::Value::Null;
    wait_until(Duration::from_secs(30), || {
        stats = server.stats_now();
        settled(&stats)
    });
    assert!(
        stats["connections"]["protocol_errors"].as_u64() >= Some(5),
        "{stats}"
    );
    assert_eq!(stats["requests"]["errors"], 4, "{stats}");
    // Printed before the file was written, but read from the server's stderr by another
    // thread: wait for it.
    assert!(
        server.wait_for_log("statistics", Duration::from_secs(30)),
        "{}",
        server.log()
    );
    let mut again = UnixStream::connect(&server.socket).expect("still accepting");
    again
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    handshake(&mut again);
    drop(again);
    let end = server.stop();
    assert_eq!(end["ftl"]["name"], "memdisk");
}

#[test]
fn tcp_listener_on_loopback_serves_nbdinfo() {
    use std::io::BufRead;
    let Ok(()) = require(&["nbdinfo"]).map_err(skip) else {
        return;
    };
    // Port 0: the system picks a free port, and the ready line tells which.
    let mut child = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "serve",
            "--target",
            "memdisk",
            "--preset",
            "tiny",
            "--clock",
            "none",
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn noftl serve");
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let ready = lines.next().and_then(Result::ok).unwrap_or_default();
    let addr = ready
        .split(" on ")
        .nth(1)
        .and_then(|t| t.strip_suffix("; ready"))
        .unwrap_or_default()
        .to_string();
    assert!(addr.starts_with("127.0.0.1:"), "ready line: {ready}");
    let out = Command::new("nbdinfo")
        .arg("--size")
        .arg(format!("nbd://{addr}"))
        .output()
        .expect("nbdinfo");
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let status = reap(&mut child, Duration::from_secs(10));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "8388608",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(status.is_some_and(|s| s.success()));
}
