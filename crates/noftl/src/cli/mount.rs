//! `noftl mount`: a file system on an emulated flash device, mounted with FUSE; and
//! `noftl fsck`: an offline check of a file-system image.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use dfs::fs::{Dfs, FormatParams, MountReport};
use dfs::vsl::VslConfig;
use nand::Nand;

use crate::cli::common::DeviceArgs;
use crate::fsmount::dfs_fs::DfsPosix;

/// The file systems `mount` knows.
pub const FILE_SYSTEMS: &[&str] = &["dfs"];

#[derive(Debug, Args)]
pub struct MountArgs {
    /// File system: dfs.
    #[arg(long = "fs", default_value = "dfs")]
    pub fs: String,
    /// Where to mount (an existing empty directory).
    pub mountpoint: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Keep the flash in this image file: formatted when missing or empty (or with --format),
    /// recovered and mounted when it holds a file system.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// real: each request also takes its modelled device time on the wall clock; none: as
    /// fast as the host allows (device time still counted).
    #[arg(long, default_value = "none", value_parser = ["none", "real"])]
    pub clock: String,
    /// Format even if the image holds a file system.
    #[arg(long)]
    pub format: bool,
    /// Write device and file-system statistics as JSON here at unmount.
    #[arg(long)]
    pub stats_file: Option<PathBuf>,
    /// DFS: blocks per allocation chunk (a power of two; the largest file), at format.
    #[arg(long, default_value_t = 1 << 22)]
    pub chunk_blocks: u64,
    /// DFS: blocks of a small file's slot in the shared chunks, at format.
    #[arg(long, default_value_t = 8)]
    pub small_blocks: u32,
}

#[derive(Debug, Args)]
pub struct FsckArgs {
    /// File system: dfs.
    #[arg(long = "fs", default_value = "dfs")]
    pub fs: String,
    /// The image to check (recovered in memory: the file is not changed).
    #[arg(long)]
    pub image: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn check_fs(name: &str) -> anyhow::Result<()> {
    if !FILE_SYSTEMS.contains(&name) {
        bail!("unknown file system '{name}' ({})", FILE_SYSTEMS.join(", "));
    }
    Ok(())
}

fn holds_data(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.len() > 0)
}

/// Formats or recovers DFS as the arguments say.
pub fn open_dfs(a: &MountArgs) -> anyhow::Result<(Dfs, Option<MountReport>)> {
    let vcfg = VslConfig::default();
    let params = FormatParams {
        chunk_blocks: a.chunk_blocks,
        small_blocks: a.small_blocks,
        ..FormatParams::default()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    if let Some(path) = &a.image {
        crate::filelock::hold(path, "--image")?;
        if holds_data(path) && !a.format {
            let nand = Nand::open_image(path)
                .with_context(|| format!("cannot reopen {}", path.display()))?;
            let (fs, rep) = Dfs::open(nand, &vcfg)
                .with_context(|| format!("cannot mount DFS from {}", path.display()))?;
            return Ok((fs, Some(rep)));
        }
        let cfg = a.device.load()?;
        let nand = Nand::create_image(cfg, path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        return Ok((Dfs::format(nand, &vcfg, params, now)?, None));
    }
    let cfg = a.device.load()?;
    Ok((Dfs::format(Nand::new(cfg)?, &vcfg, params, now)?, None))
}

/// Statistics of a DFS mount (printed and written at unmount).
pub fn dfs_stats(fs: &Dfs, mount: Option<&MountReport>) -> serde_json::Value {
    let v = fs.vsl();
    serde_json::json!({
        "fs": "dfs",
        "device": v.nand().config().name,
        "vsl": v.counts(),
        "space": v.space_counts(),
        "mapped_blocks": v.mapped_blocks(),
        "capacity_blocks": v.capacity_blocks(),
        "map_memory_bytes": v.map().memory_bytes(),
        "statfs": fs.statfs(),
        "mount": mount,
        "flash": v.nand().report(),
        "device_time_ns": fs.now_ns(),
    })
}

pub fn run_mount(a: MountArgs) -> anyhow::Result<()> {
    check_fs(&a.fs)?;
    if let Some(p) = &a.stats_file {
        crate::output::check_writable(p)?;
    }
    if !a.mountpoint.is_dir() {
        bail!("mount point {} is not a directory", a.mountpoint.display());
    }
    let (fs, rep) = open_dfs(&a)?;
    if let Some(r) = &rep {
        eprintln!(
            "noftl mount: recovered: {} records, {} unfinished groups dropped, {} orphans freed, {} blocks trimmed",
            r.vsl.records, r.vsl.groups_dropped, r.orphans_freed, r.blocks_trimmed
        );
    }
    let posix = DfsPosix::new(fs, a.clock == "real");
    let mp = a.mountpoint.display().to_string();
    let posix = crate::fsmount::serve(posix, &a.mountpoint, "dfs", || {
        eprintln!("noftl mount: dfs mounted on {mp}; SIGINT or SIGTERM unmounts");
    })?;
    let mut fs = posix.fs;
    fs.sync_all().context("final sync")?;
    let stats = dfs_stats(&fs, rep.as_ref());
    let mut nand = fs.unmount()?;
    nand.flush().context("cannot flush the image")?;
    let text = serde_json::to_string_pretty(&stats)?;
    eprintln!("noftl mount: statistics\n{text}");
    if let Some(p) = &a.stats_file {
        crate::output::write_atomic(p, format!("{text}\n").as_bytes())?;
    }
    Ok(())
}

pub fn run_fsck(a: FsckArgs) -> anyhow::Result<()> {
    check_fs(&a.fs)?;
    if !holds_data(&a.image) {
        bail!("{} is missing or empty", a.image.display());
    }
    crate::filelock::hold(&a.image, "--image")?;
    // A private copy: recovery writes (trims, orphan frees) must not change the image.
    let tmp = tempfile::NamedTempFile::new().context("temporary copy")?;
    std::fs::copy(&a.image, tmp.path()).context("cannot copy the image")?;
    let nand = Nand::open_image(tmp.path())
        .with_context(|| format!("cannot open {}", a.image.display()))?;
    let (mut fs, rep) = Dfs::open(nand, &VslConfig::default())
        .with_context(|| format!("cannot mount DFS from {}", a.image.display()))?;
    let problems = fs.fsck()?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "image": a.image,
                "clean": problems.is_empty(),
                "problems": problems,
                "recovery": rep,
                "mapped_blocks": fs.vsl().mapped_blocks(),
            }))?
        );
    } else {
        println!(
            "fsck dfs {}: {} ({} records read, {} unfinished groups dropped, {} orphans, {} stray blocks)",
            a.image.display(),
            if problems.is_empty() { "clean" } else { "PROBLEMS" },
            rep.vsl.records,
            rep.vsl.groups_dropped,
            rep.orphans_freed,
            rep.blocks_trimmed
        );
        for p in &problems {
            println!("  {p}");
        }
    }
    if !problems.is_empty() {
        bail!("{} problems", problems.len());
    }
    Ok(())
}
