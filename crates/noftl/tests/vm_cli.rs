//! `noftl vm`: kernel file systems in a QEMU guest on the NBD export. ext4 is made, a file
//! written and fsynced, the guest powered off and the server stopped; a second server on the
//! same `--image` and a second guest find the file's checksum unchanged. f2fs and xfs get a
//! quick write. Bad input is refused before anything starts, and a hung guest is killed.
//!
//! Needs qemu-system-x86_64 and the kernel cache of scripts/vm-kernel.sh (both fetched by
//! scripts/install-test-deps.sh); without them the guest tests say so and skip. Under TCG (no
//! usable KVM) each guest boots in 10-20 s on 2 cores.

mod nbd_support;

use std::path::Path;
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use nbd_support::{require, skip};
use serde_json::Value;

/// A 64 MiB tiny device (59 MiB exported by the page FTL at 7% spare).
const SMALL: &[&str] = &[
    "--store",
    "page",
    "--preset",
    "tiny",
    "--set",
    "geometry.blocks_per_plane=128",
    "--clock",
    "none",
];

static KERNEL: Once = Once::new();

/// QEMU and the kernel cache, fetched once if missing; `Err(reason)` means skip.
fn vm_available() -> Result<(), String> {
    require(&["qemu-system-x86_64", "sha256sum", "dd"])?;
    if lab::experiments::vm::guest::find_kernel().is_err() {
        KERNEL.call_once(|| {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/vm-kernel.sh");
            eprintln!("fetching the guest kernel with {}", script.display());
            let _ = Command::new("bash").arg(&script).status();
        });
    }
    lab::experiments::vm::guest::find_kernel()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Runs `noftl vm ARGS --json -`: (success, the JSON result or Null, stderr).
fn vm(args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .arg("vm")
        .args(args)
        .output()
        .expect("run noftl");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The guest ran and the server's counters are there, with what the result must say.
fn check_result(r: &Value, fs: &str) {
    assert_eq!(r["fs"], fs, "{r}");
    assert_eq!(r["guest_exit_status"], 0, "{r}");
    let accel = r["accelerator"].as_str().expect("accelerator");
    assert!(accel == "kvm" || accel == "tcg", "{r}");
    assert_eq!(r["guest_timing"]["accelerator"], accel);
    assert!(r["guest_timing"]["note"]
        .as_str()
        .unwrap_or("")
        .contains("not a result"));
    assert!(
        !r["kernel_version"].as_str().unwrap_or("").is_empty(),
        "{r}"
    );
    let d = &r["device"];
    assert!(
        d["flash_programs"].as_u64() >= d["host_write_pages"].as_u64(),
        "{d}"
    );
    assert!(d["die_busy_us"].as_f64().unwrap_or(0.0) > 0.0, "{d}");
    assert_eq!(r["server"]["requests"]["errors"], 0, "{r}");
}

#[test]
fn ext4_data_survives_a_second_guest_on_the_same_image() {
    let Ok(()) = vm_available().map_err(skip) else {
        return;
    };
    let work = tempfile::tempdir().expect("temp dir");
    let image = work.path().join("ssd.img");
    let out = work.path().join("out");
    let (image_s, out_s) = (image.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    let t = Instant::now();
    let write = "dd if=/dev/urandom of=data bs=1M count=4 conv=fsync 2>/dev/null && sha256sum data >$NOFTL_OUT/sum";
    let base = [
        SMALL,
        &["--image", image_s, "--timeout", "3m", "--json", "-"],
    ]
    .concat();
    let (ok, r, err) = vm(&[
        &base[..],
        &["--fs", "ext4", "--out", out_s, "--", "sh", "-c", write],
    ]
    .concat());
    assert!(ok, "{err}");
    check_result(&r, "ext4");
    assert!(
        r["device"]["host_write_bytes"].as_u64() >= Some(4 << 20),
        "{r}"
    );
    let sum = std::fs::read_to_string(out.join("sum")).expect("the guest's $NOFTL_OUT/sum");
    assert!(out.join("console.log").is_file());
    eprintln!("ext4, first guest: {:.1} s", t.elapsed().as_secs_f64());

    let (ok, r2, err) = vm(&[
        &base[..],
        &["--fs", "ext4", "--no-mkfs", "--", "sha256sum", "data"],
    ]
    .concat());
    assert!(ok, "{err}");
    check_result(&r2, "ext4");
    assert_eq!(r2["guest_stdout"].as_str(), Some(sum.as_str()), "{r2}");
    assert!(
        r2["device"]["host_read_bytes"].as_u64() >= Some(4 << 20),
        "{r2}"
    );
    eprintln!("ext4, both guests: {:.1} s", t.elapsed().as_secs_f64());
}

/// A file written and fsynced on a freshly made `fs`.
fn smoke(fs: &str, device: &[&str]) {
    let Ok(()) = vm_available().map_err(skip) else {
        return;
    };
    let t = Instant::now();
    let write = format!(
        "dd if=/dev/zero of=data bs=1M count=2 conv=fsync 2>/dev/null && grep -c ' /tmp/noftl-fs {fs} ' /proc/mounts"
    );
    let (ok, r, err) = vm(&[
        device,
        &[
            "--fs",
            fs,
            "--timeout",
            "3m",
            "--json",
            "-",
            "--",
            "sh",
            "-c",
            &write,
        ],
    ]
    .concat());
    assert!(ok, "{err}");
    check_result(&r, fs);
    assert_eq!(r["guest_stdout"].as_str().map(str::trim), Some("1"), "{r}");
    eprintln!("{fs}: {:.1} s", t.elapsed().as_secs_f64());
}

#[test]
fn f2fs_smoke() {
    smoke("f2fs", SMALL);
}

#[test]
fn xfs_smoke() {
    // 384 MiB of flash, 357 MiB exported: over XFS's 300 MiB.
    let big = [
        &SMALL[..4],
        &["--set", "geometry.blocks_per_plane=768", "--clock", "none"],
    ]
    .concat();
    smoke("xfs", &big);
}

#[test]
fn bad_input_is_refused_before_anything_starts() {
    let cases: &[(&[&str], &str)] = &[
        (&["--fs", "zfs", "--", "true"], "unknown file system 'zfs'"),
        (
            &["--fs", "xfs", "--", "true"],
            "xfs needs an export over 300 MiB",
        ),
        (
            &["--no-mkfs", "--", "true"],
            "--no-mkfs mounts the file system already on --image",
        ),
        (&["--fs", "ext4"], "no command for the guest"),
        (
            &["--accel", "hvf", "--", "true"],
            "unknown accelerator 'hvf'",
        ),
        (
            &["--timeout", "0s", "--", "true"],
            "--timeout: duration '0s' is out of range",
        ),
    ];
    for (args, want) in cases {
        let t = Instant::now();
        let (ok, _, err) = vm(&[SMALL, args].concat());
        assert!(!ok && err.contains(want), "{args:?}: {err}");
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{args:?} took {:?}",
            t.elapsed()
        );
    }
    // A missing kernel is named with the script that fetches it (QEMU, when missing, first).
    let empty = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([&["vm"], SMALL, &["--", "true"]].concat())
        .env("NOFTL_VM_CACHE", empty.path())
        .output()
        .expect("run noftl");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("scripts/vm-kernel.sh") || err.contains("no qemu-system-x86_64"),
        "{err}"
    );
}

#[test]
fn a_hung_guest_is_killed_at_its_timeout() {
    let Ok(()) = vm_available().map_err(skip) else {
        return;
    };
    let t = Instant::now();
    let (ok, _, err) = vm(&[
        SMALL,
        &["--accel", "tcg", "--timeout", "8s", "--", "sleep", "600"],
    ]
    .concat());
    assert!(
        !ok && err.contains("did not power off within 8 s and was killed"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
}
