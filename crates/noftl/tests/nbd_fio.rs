//! fio through its `nbd` engine (libnbd) against `noftl serve`: random writes, then every
//! block read back and checked (crc32c + header), at queue depth 1 and 16, and with 1 KiB
//! blocks that cost a read-modify-write of a 4 KiB page each.

mod nbd_support;

use std::process::Command;

use nbd_support::*;

fn fio_verify(
    server: &Server,
    name: &str,
    bs: &str,
    iodepth: u32,
    size: &str,
) -> serde_json::Value {
    let out = run(Command::new("fio")
        .arg(format!("--name={name}"))
        .arg("--ioengine=nbd")
        .arg(format!("--uri={}", server.uri()))
        .arg("--rw=randwrite")
        .arg(format!("--bs={bs}"))
        .arg(format!("--iodepth={iodepth}"))
        .arg(format!("--size={size}"))
        .arg("--verify=crc32c")
        .arg("--do_verify=1")
        .arg("--verify_fatal=1")
        // fio would leave a `*-verify.state` file in the working directory (the crate's).
        .arg("--verify_state_save=0")
        .arg("--randseed=1234")
        .arg("--output-format=json"));
    // The nbd engine prints "fio: connected to NBD server" before the JSON.
    let json = out.find('{').map_or("", |i| &out[i..]);
    let v: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("fio JSON: {e}\n{out}"));
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "fio job error: {job}");
    job.clone()
}

#[test]
fn fio_randwrite_then_verify_qd1_and_qd16() {
    let Ok(()) = require(&["fio"]).map_err(skip) else {
        return;
    };
    let server = Server::start(&[MEMDISK_64M, &["--clock", "none"]].concat());
    for (name, bs, qd, size) in [
        ("qd1", "4k", 1, "16m"),
        ("qd16", "4k", 16, "48m"),
        ("rmw-1k-qd16", "1k", 16, "8m"),
    ] {
        let job = fio_verify(&server, name, bs, qd, size);
        let written = job["write"]["io_bytes"].as_u64().unwrap_or(0);
        let verified = job["read"]["io_bytes"].as_u64().unwrap_or(0);
        eprintln!(
            "fio {name}: wrote {written} B, verified {verified} B, {:.0} write IOPS",
            job["write"]["iops"].as_f64().unwrap_or(0.0)
        );
        assert!(
            written > 0 && verified == written,
            "{name}: wrote {written}, verified {verified}"
        );
    }
    let stats = server.stop();
    assert_eq!(stats["requests"]["errors"], 0, "{stats}");
}

/// The same through the real-clock pipeline (reader and reply-writer threads).
#[test]
fn fio_verify_through_the_real_clock_pipeline() {
    let Ok(()) = require(&["fio"]).map_err(skip) else {
        return;
    };
    let server = Server::start(&[MEMDISK_64M, &["--clock", "real"]].concat());
    let job = fio_verify(&server, "real-qd16", "4k", 16, "16m");
    assert_eq!(job["write"]["io_bytes"], job["read"]["io_bytes"]);
    let stats = server.stop();
    assert_eq!(stats["requests"]["errors"], 0, "{stats}");
}

/// fio's verify on TLC chips with 16 KiB pages behind the page FTL: 4 KiB random writes over
/// most of the export, and 1 KiB writes (a read-modify-write of a 4 KiB sector each), go through
/// the controller's write buffer and sub-page map; every block reads back intact.
#[test]
fn fio_verify_on_tlc_16k_pages_through_the_page_ftl() {
    let Ok(()) = require(&["fio"]).map_err(skip) else {
        return;
    };
    let server = Server::start(&[PAGE_TLC16K, &["--clock", "none"]].concat());
    for (name, bs, qd, size) in [
        ("tlc-qd16", "4k", 16, "200m"),
        ("tlc-rmw-1k", "1k", 4, "8m"),
    ] {
        let job = fio_verify(&server, name, bs, qd, size);
        assert_eq!(job["write"]["io_bytes"], job["read"]["io_bytes"], "{name}");
    }
    let stats = server.stop();
    assert_eq!(stats["requests"]["errors"], 0, "{stats}");
}
