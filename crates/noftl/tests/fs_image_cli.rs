//! `noftl mount` and `noftl fsck` against images they must not trust (issue 32, "Nothing lost,
//! nothing hidden"): a mount refused for an image of another kind leaves every byte of it as
//! it was; fsck names the user's image, never a temporary copy, and reports a flipped byte in a
//! file instead of calling the image clean. Each test is named after the behaviour it protects.

mod cli_support;
mod nbd_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use dfs::fs::{Dfs, FormatParams, ROOT_INO, S_IFREG};
use dfs::vsl::VslConfig;
use nand::{DeviceConfig, ImageLayout, Nand};
use nbd_support::{reap, Server};

const PAGE_TINY: &[&str] = &["--target", "page", "--preset", "tiny", "--clock", "none"];

/// A page-FTL image written by `noftl serve` (then stopped).
fn page_ftl_image(dir: &Path) -> PathBuf {
    let img = dir.join("page.img");
    let args = [PAGE_TINY, &["--image", img.to_str().expect("utf-8")]].concat();
    Server::start_at(&dir.join("s.sock"), &dir.join("s.json"), &args).stop();
    assert!(std::fs::metadata(&img).expect("image").len() > 0);
    img
}

/// The DFS parameters of these tests' images: small chunks, so that a file sits in a few
/// blocks of the tiny device.
fn params() -> FormatParams {
    FormatParams {
        chunk_blocks: 1 << 12,
        max_inodes: 4096,
        small_blocks: 4,
    }
}

/// A DFS image holding one file, `hello` (3 blocks of a pattern): the image and the flash unit
/// of the file's block 1.
fn dfs_image(dir: &Path) -> (PathBuf, u64) {
    let img = dir.join("dfs.img");
    let cfg = DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=32".into()]).expect("tiny");
    let nand = Nand::create_image(cfg, &img).expect("create image");
    let mut fs = Dfs::format(nand, &VslConfig::default(), params(), 0).expect("format");
    let (ino, _) = fs
        .create(ROOT_INO, b"hello", S_IFREG | 0o644, 0, 0, 0, None)
        .expect("create");
    let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i * 7 % 251) as u8).collect();
    fs.write(ino, 0, &data, 0).expect("write");
    let i = fs.getattr(ino).expect("inode");
    let vbn = fs.base_of(ino, &i) + 1;
    let unit = fs.vsl().map().get(vbn).expect("block 1 is mapped");
    let mut nand = fs.unmount().expect("unmount");
    nand.flush().expect("flush");
    (img, u64::from(unit))
}

/// Runs noftl with `args` (and `env`) for at most 30 s: (exit success, stdout, stderr). A run
/// still going then (a mount that was not refused) is killed and reported as `None`.
fn run_briefly(args: &[&str], env: &[(&str, &Path)]) -> Option<(bool, String, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noftl"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn noftl");
    let Some(status) = reap(&mut child, Duration::from_secs(30)) else {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    };
    use std::io::Read as _;
    let (mut out, mut err) = (String::new(), String::new());
    let _ = child.stdout.take().map(|mut o| o.read_to_string(&mut out));
    let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
    Some((status.success(), out, err))
}

/// Issue 32: `noftl mount` of a page-FTL image (as DFS, which it is not) was refused, but only
/// after the image had been opened for writing: 4 bytes of its header changed. A mount of an
/// image of another kind must be refused before anything is written: the bytes are the same
/// afterwards, for DFS on a page-FTL image and for f2fs and alfs on a DFS image.
#[test]
fn a_refused_mount_changes_no_byte_of_the_image() {
    let d = tempfile::tempdir().expect("tempdir");
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let page = page_ftl_image(d.path());
    let (dfs, _) = dfs_image(d.path());
    let cases: [(&str, &Path, &[&str]); 3] = [
        ("dfs", &page, &[]),
        ("f2fs", &dfs, &["--target", "page"]),
        ("alfs", &dfs, &[]),
    ];
    for (fs, img, extra) in cases {
        let before = std::fs::read(img).expect("read image");
        let args = [
            &["mount", "--fs", fs, mnt.to_str().expect("utf-8")],
            extra,
            &["--image", img.to_str().expect("utf-8")],
        ]
        .concat();
        let (ok, _, err) = run_briefly(&args, &[]).expect("refused, not mounted");
        assert!(!ok, "mount --fs {fs} of {} was not refused", img.display());
        assert!(err.contains(img.to_str().expect("utf-8")), "{err}");
        let after = std::fs::read(img).expect("read image");
        let changed: Vec<usize> = (0..before.len().min(after.len()))
            .filter(|&i| before[i] != after[i])
            .collect();
        assert!(
            before.len() == after.len() && changed.is_empty(),
            "mount --fs {fs} refused {} but changed {} bytes (first at {:?}); {err}",
            img.display(),
            changed.len(),
            changed.first()
        );
    }
}

/// Issue 32: fsck checked a temporary copy of the image and its messages named the copy
/// (`/tmp/.tmpXXXX`), not the user's file. Every message now names the user's image, whatever
/// the outcome (not an image at all, clean, damaged), and nothing is left in the temporary
/// directory.
#[test]
fn fsck_names_the_users_image_in_every_message_never_a_temporary_copy() {
    let d = tempfile::tempdir().expect("tempdir");
    let tmp = d.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    let (good, _) = dfs_image(d.path());
    let junk = d.path().join("junk.img");
    std::fs::write(&junk, vec![0x5Au8; 200_000]).expect("write junk");
    for img in [&good, &junk] {
        let s = img.to_str().expect("utf-8");
        for json in [false, true] {
            let mut args = vec!["fsck", "--fs", "dfs", "--image", s];
            if json {
                args.push("--json");
            }
            let (_, out, err) = run_briefly(&args, &[("TMPDIR", &tmp)]).expect("fsck finishes");
            let text = format!("{out}{err}");
            assert!(text.contains(s), "fsck of {s} does not name it:\n{text}");
            assert!(
                !text.contains(tmp.to_str().expect("utf-8")),
                "fsck of {s} names a temporary file:\n{text}"
            );
        }
    }
    let left: Vec<_> = std::fs::read_dir(&tmp).expect("tmp").collect();
    assert!(left.is_empty(), "fsck left {left:?} in TMPDIR");
}

/// Issue 32: a byte flipped in a file's data on flash: `noftl fsck` said `clean`. Now it
/// reports the damaged block (the file system's block and the flash unit), names the image,
/// exits with failure, and leaves the image unchanged.
#[test]
fn fsck_reports_a_flipped_byte_in_a_file_instead_of_clean() {
    let d = tempfile::tempdir().expect("tempdir");
    let (img, unit) = dfs_image(d.path());
    let s = img.to_str().expect("utf-8");
    let (ok, out, err) = cli_support::noftl(&["fsck", "--fs", "dfs", "--image", s]);
    assert!(ok && out.contains("clean"), "{out}{err}");
    let cfg = Nand::open_image_private(&img)
        .expect("image")
        .config()
        .clone();
    let g = &cfg.geometry;
    let at = ImageLayout::of(g).data_at + unit * u64::from(g.page_size_bytes) + 100;
    let mut bytes = std::fs::read(&img).expect("read");
    bytes[at as usize] ^= 0x40;
    std::fs::write(&img, &bytes).expect("write");
    let (ok, out, err) = cli_support::noftl(&["fsck", "--fs", "dfs", "--image", s]);
    assert!(!ok, "fsck passed a flipped byte:\n{out}{err}");
    assert!(out.contains(s) && out.contains("PROBLEMS"), "{out}{err}");
    assert!(
        out.contains(&format!("unit {unit}")) && out.contains("checksum"),
        "the problem does not name the block and its checksum:\n{out}"
    );
    assert_eq!(
        std::fs::read(&img).expect("read"),
        bytes,
        "fsck changed the image"
    );
}

/// A byte flipped in the OOB record of a file's block (the record names the block and holds
/// its checksum): recovery cannot know which block lost its newest version. `mount` refuses
/// the image before writing anything and points to fsck; fsck lists the damaged record by its
/// place on the chip.
#[test]
fn a_damaged_oob_record_makes_mount_refuse_and_fsck_name_it() {
    let d = tempfile::tempdir().expect("tempdir");
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let (img, unit) = dfs_image(d.path());
    let s = img.to_str().expect("utf-8");
    let cfg = Nand::open_image_private(&img)
        .expect("image")
        .config()
        .clone();
    let g = &cfg.geometry;
    let at = ImageLayout::of(g).oob_at + unit * u64::from(g.oob_size_bytes) + 3;
    let mut bytes = std::fs::read(&img).expect("read");
    bytes[at as usize] ^= 0x10;
    std::fs::write(&img, &bytes).expect("write");
    let args = [
        "mount",
        "--fs",
        "dfs",
        mnt.to_str().expect("utf-8"),
        "--image",
        s,
    ];
    let (ok, _, err) = run_briefly(&args, &[]).expect("refused, not mounted");
    assert!(!ok, "mounted a damaged image");
    assert!(
        err.contains(s) && err.contains("damaged OOB record") && err.contains("noftl fsck"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&img).expect("read"),
        bytes,
        "the refusal wrote"
    );
    let (ok, out, err) = cli_support::noftl(&["fsck", "--fs", "dfs", "--image", s]);
    assert!(!ok, "{out}{err}");
    assert!(
        out.contains(&format!("flash unit {unit} ")) && out.contains("OOB record is damaged"),
        "{out}{err}"
    );
}
