//! `noftl mount`: a file system on an emulated flash device, mounted with FUSE; and
//! `noftl fsck`: an offline check of a file-system image.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use dfs::fs::{Dfs, FormatParams, MountReport};
use dfs::vsl::VslConfig;
use fsmount::dfs_fs::DfsPosix;
use nand::Nand;

use crate::cli::common::DeviceArgs;

/// The file systems `mount` knows.
pub const FILE_SYSTEMS: &[&str] = &["dfs", "f2fs", "alfs"];

#[derive(Debug, Args)]
pub struct MountArgs {
    /// File system: dfs, f2fs (log-structured, metadata in place), alfs (log-structured,
    /// append-only; on amf).
    #[arg(long = "fs", default_value = "dfs")]
    pub fs: String,
    /// f2fs and alfs: the block FTL under the file system (f2fs: page, dftl, ...; alfs: amf,
    /// its default and only choice).
    #[arg(long = "store", visible_alias = "target")]
    pub target: Option<String>,
    /// f2fs and alfs: host cleaning's victim selection.
    #[arg(long, default_value = "greedy", value_parser = ["greedy", "cost-benefit"])]
    pub cleaning: String,
    /// Where to mount (an existing empty directory).
    pub mountpoint: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Keep the flash in this image file: formatted when missing or empty (or with --format),
    /// recovered and mounted when it holds a file system.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// real: each request also takes its modelled device time on the wall clock; none: as
    /// fast as the host allows (device time still counted). mount supports real and none.
    #[arg(long, default_value = "none", value_parser = super::clock::parser("mount", &["real", "none"]))]
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
    /// f2fs and alfs: keep every data block's CRC-32 beside its address in the node, checked
    /// on every read (EIO instead of other bytes) and by fsck; the largest file is then half
    /// as large (about 0.97 GiB). At format; recorded in the superblock. DFS always checks its
    /// data (the CRC rides in each block's OOB record), so there it changes nothing.
    #[arg(long)]
    pub data_checksums: bool,
    /// DFS: mount an image whose OOB records `noftl fsck` reports damaged (refused otherwise):
    /// a block such a record held may read as its previous version or as zeros; blocks that
    /// fail their checksum still read as EIO. To copy files off a damaged image.
    #[arg(long)]
    pub allow_damaged: bool,
}

#[derive(Debug, Args)]
pub struct FsckArgs {
    /// File system: dfs, f2fs, alfs.
    #[arg(long = "fs", default_value = "dfs")]
    pub fs: String,
    /// f2fs and alfs: the block FTL the image was made with (f2fs default page; alfs amf).
    #[arg(long = "store", visible_alias = "target")]
    pub target: Option<String>,
    /// The image to check (recovered in memory: the file is not changed).
    #[arg(long)]
    pub image: PathBuf,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
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

/// Runs `mount` on a copy-on-write view of the image at `path`: the whole recovery and mount,
/// with nothing written to the file. A mount that would be refused (an image of another kind,
/// a damaged one) is refused here, before the image is opened for writing: recovery writes
/// (erases, trims, a checkpoint) and even opening an image marks its header, so a refusal after
/// a writable open changed the user's file.
fn probe(path: &Path, mount: impl FnOnce(Nand) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let nand = Nand::open_image_private(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    mount(nand)
}

/// The image at `path`, opened for writing (after a successful `probe`).
fn reopen(path: &Path) -> anyhow::Result<Nand> {
    Nand::open_image(path).with_context(|| format!("cannot reopen {}", path.display()))
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
        lab::filelock::hold(path, "--image")?;
        if holds_data(path) && !a.format {
            let mount = |nand: Nand| {
                let open = if a.allow_damaged {
                    Dfs::open_checking
                } else {
                    Dfs::open
                };
                open(nand, &vcfg)
                    .with_context(|| format!("cannot mount DFS from {}", path.display()))
            };
            probe(path, |nand| mount(nand).map(drop))?;
            let (fs, rep) = mount(reopen(path)?)?;
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
    // The statistics never replace the image or the config (the output rule).
    super::common::check_outputs(
        &[("--image", a.image.as_deref()), a.device.input()],
        &[a.stats_file.as_deref()],
    )?;
    if !a.mountpoint.is_dir() {
        bail!("mount point {} is not a directory", a.mountpoint.display());
    }
    if a.fs != "dfs" {
        if a.allow_damaged {
            bail!("--allow-damaged is for DFS (f2fs and alfs refuse an image they cannot trust)");
        }
        return run_mount_lfs(a);
    }
    if a.target.is_some() {
        bail!("--target is for f2fs and alfs (DFS runs on its own flash layer)");
    }
    let (fs, rep) = open_dfs(&a)?;
    for d in fs.damage() {
        eprintln!("noftl mount: damaged (mounted with --allow-damaged): {d}");
    }
    if let Some(r) = &rep {
        eprintln!(
            "noftl mount: recovered: {} records, {} unfinished groups dropped, {} orphans freed, {} blocks trimmed",
            r.vsl.records, r.vsl.groups_dropped, r.orphans_freed, r.blocks_trimmed
        );
    }
    let posix = DfsPosix::new(fs, a.clock == "real");
    let mp = a.mountpoint.display().to_string();
    let posix = fsmount::serve(
        posix,
        &a.mountpoint,
        "dfs",
        || {
            eprintln!(
                "noftl mount: dfs mounted on {mp}; SIGINT or SIGTERM unmounts, SIGUSR1 writes the statistics"
            );
        },
        |p: &DfsPosix| write_stats_now(a.stats_file.as_deref(), &dfs_stats(&p.fs, rep.as_ref())),
    )?;
    let mut fs = posix.fs;
    fs.sync_all().context("final sync")?;
    let stats = dfs_stats(&fs, rep.as_ref());
    let mut nand = fs.unmount()?;
    nand.flush().context("cannot flush the image")?;
    write_stats(a.stats_file.as_deref(), &stats)
}

/// The statistics to stderr and the stats file, if any (whole, through a temporary file: a
/// reader never sees half of it). At unmount, and on SIGUSR1 while mounted.
fn write_stats(path: Option<&std::path::Path>, stats: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(stats)?;
    eprintln!("noftl mount: statistics\n{text}");
    if let Some(p) = path {
        lab::output::write_atomic(p, format!("{text}\n").as_bytes())?;
    }
    Ok(())
}

/// SIGUSR1: the statistics so far; serving goes on whatever happens to the file.
fn write_stats_now(path: Option<&std::path::Path>, stats: &serde_json::Value) {
    if let Err(e) = write_stats(path, stats) {
        eprintln!("noftl mount: {e:#}");
    }
}

pub fn run_fsck(a: FsckArgs) -> anyhow::Result<()> {
    check_fs(&a.fs)?;
    let mode = lfs_mode(&a.fs);
    let target = match mode {
        Some(m) => Some(lfs_target(m, a.target.as_deref())?),
        None if a.target.is_some() => bail!("--target is for f2fs and alfs"),
        None => None,
    };
    if !holds_data(&a.image) {
        bail!("{} is missing or empty", a.image.display());
    }
    super::common::check_outputs(&[("--image", Some(&a.image))], &[a.json.as_deref()])?;
    lab::filelock::hold(&a.image, "--image")?;
    // Copy-on-write: recovery writes (trims, orphan frees) must not change the image, and no
    // temporary copy is made, so every message names the user's file.
    let nand = Nand::open_image_private(&a.image)
        .with_context(|| format!("cannot open {}", a.image.display()))?;
    if let (Some(mode), Some(target)) = (mode, target) {
        return fsck_lfs(&a, mode, &target, nand);
    }
    // A checking open: damage that makes `mount` refuse the image is listed among the problems.
    let (mut fs, rep) = Dfs::open_checking(nand, &VslConfig::default())
        .with_context(|| format!("cannot mount DFS from {}", a.image.display()))?;
    let problems = fs.fsck()?;
    report_fsck(
        &a,
        &problems,
        serde_json::json!({
            "image": a.image,
            "clean": problems.is_empty(),
            "problems": problems,
            "recovery": rep,
            "mapped_blocks": fs.vsl().mapped_blocks(),
        }),
        &format!(
            "fsck dfs {}: {} ({} records read, {} damaged, {} unfinished groups dropped, {} orphans, {} stray blocks)",
            a.image.display(),
            if problems.is_empty() { "clean" } else { "PROBLEMS" },
            rep.vsl.records,
            rep.vsl.damaged_records,
            rep.vsl.groups_dropped,
            rep.orphans_freed,
            rep.blocks_trimmed
        ),
    )
}

/// Prints an fsck's result (`json` with --json, else `line` and one line per problem) and
/// fails when it found problems.
fn report_fsck(
    a: &FsckArgs,
    problems: &[String],
    json: serde_json::Value,
    line: &str,
) -> anyhow::Result<()> {
    if super::common::emit_json(a.json.as_deref(), &json)? {
        println!("{line}");
        for p in problems {
            println!("  {p}");
        }
    }
    if !problems.is_empty() {
        bail!("{} problems", problems.len());
    }
    Ok(())
}

/// The log-structured mode a `--fs` name selects (`None`: DFS).
fn lfs_mode(fs: &str) -> Option<lfs::Mode> {
    match fs {
        "f2fs" => Some(lfs::Mode::F2fs),
        "alfs" => Some(lfs::Mode::Alfs),
        _ => None,
    }
}

/// The FTL under a log-structured mode: alfs only on amf (its default), f2fs on any block FTL
/// but amf (default page), since f2fs rewrites its checkpoint, NAT and SIT in place.
pub fn lfs_target(mode: lfs::Mode, target: Option<&str>) -> anyhow::Result<String> {
    let t = match (mode, target) {
        (lfs::Mode::Alfs, None) => "amf",
        (lfs::Mode::F2fs, None) => "page",
        (_, Some(t)) => t,
    };
    if !ftl::options::KINDS.contains(&t) {
        bail!(
            "unknown --target '{t}' ({})",
            ftl::options::KINDS.join(", ")
        );
    }
    match (mode, t) {
        (lfs::Mode::Alfs, t) if t != "amf" => {
            bail!("alfs runs on --target amf only (it needs append-only segments); got '{t}'")
        }
        (lfs::Mode::F2fs, "amf") => bail!(
            "f2fs updates its checkpoint, NAT and SIT in place, which amf refuses; use alfs on amf, or f2fs on page or dftl"
        ),
        _ => Ok(t.to_string()),
    }
}

/// Formats or recovers a log-structured file system as the arguments say.
fn open_lfs(
    a: &MountArgs,
    mode: lfs::Mode,
    target: &str,
) -> anyhow::Result<(lfs::Lfs, Option<lfs::MountReport>)> {
    let opts = ftl::FtlOptions::default();
    let now = fsmount::now_ns();
    let format = |nand: Nand| -> anyhow::Result<lfs::Lfs> {
        let (dev, seg) = lfs::device(mode, target, nand, &opts, true)?;
        let p = lfs::Params {
            mode,
            seg_pages: seg,
            max_nids: 0,
            data_checksums: a.data_checksums,
        };
        Ok(lfs::Lfs::format(dev, p, now)?)
    };
    if let Some(path) = &a.image {
        lab::filelock::hold(path, "--image")?;
        if holds_data(path) && !a.format {
            let mount = |nand: Nand| mount_lfs(nand, mode, target, &a.fs, path);
            probe(path, |nand| mount(nand).map(drop))?;
            let (fs, rep) = mount(reopen(path)?)?;
            return Ok((fs, Some(rep)));
        }
        let cfg = a.device.load()?;
        let nand = Nand::create_image(cfg, path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        return Ok((format(nand)?, None));
    }
    let cfg = a.device.load()?;
    Ok((format(Nand::new(cfg)?)?, None))
}

/// Recovers the `target` FTL and the log-structured file system of mode `mode` (`fs`, its
/// name) from `nand`, the image at `path`; refuses another mode.
fn mount_lfs(
    nand: Nand,
    mode: lfs::Mode,
    target: &str,
    fs: &str,
    path: &Path,
) -> anyhow::Result<(lfs::Lfs, lfs::MountReport)> {
    let opts = ftl::FtlOptions::default();
    let (dev, _) = lfs::device(mode, target, nand, &opts, false)
        .with_context(|| format!("cannot open the {target} FTL from {}", path.display()))?;
    let (lfs, rep) = lfs::Lfs::mount(dev)
        .with_context(|| format!("cannot mount {fs} from {}", path.display()))?;
    if lfs.superblock().mode != mode {
        bail!(
            "{} holds {}, not {fs}",
            path.display(),
            lfs.superblock().mode.name()
        );
    }
    Ok((lfs, rep))
}

/// Statistics of a log-structured mount: the file system's writes by purpose and its WAF
/// (bytes to the block device / bytes applications wrote), and the FTL's (flash programs /
/// host page writes).
pub fn lfs_stats(fs: &lfs::Lfs, mount: Option<&lfs::MountReport>) -> serde_json::Value {
    let dev = fs.device();
    let st = fs.stats();
    let rep = dev.report();
    serde_json::json!({
        "fs": fs.superblock().mode.name(),
        "target": dev.name(),
        "device": dev.nand().map(|n| n.config().name.clone()),
        "segment_pages": fs.superblock().seg_pages,
        "lfs": st,
        "fs_waf": st.fs_waf(),
        "ftl": rep,
        "ftl_waf": rep.waf,
        "statfs": fs.statfs(),
        "mount": mount,
        "flash": dev.nand().map(|n| n.report()),
        "device_time_ns": fs.now_ns(),
    })
}

fn run_mount_lfs(a: MountArgs) -> anyhow::Result<()> {
    let mode = lfs_mode(&a.fs).context("a log-structured mode")?;
    let target = lfs_target(mode, a.target.as_deref())?;
    let (mut fs, rep) = open_lfs(&a, mode, &target)?;
    if a.data_checksums && !fs.superblock().data_checksums {
        // A format-time choice: say so rather than let the user believe data is checked.
        eprintln!(
            "noftl mount: --data-checksums applies at format; this {} was formatted without \
             them: its data is not checked",
            a.fs
        );
    }
    fs.cleaning = match a.cleaning.as_str() {
        "cost-benefit" => lfs::Cleaning::CostBenefit,
        _ => lfs::Cleaning::Greedy,
    };
    if let Some(r) = &rep {
        eprintln!("noftl mount: recovered {}", recovery_summary(r));
    }
    let posix = fsmount::lfs_fs::LfsPosix::new(fs, a.clock == "real");
    let mp = a.mountpoint.display().to_string();
    let name = a.fs.clone();
    let posix = fsmount::serve(
        posix,
        &a.mountpoint,
        &name,
        || {
            eprintln!(
                "noftl mount: {name} on {target} mounted on {mp}; SIGINT or SIGTERM unmounts, SIGUSR1 writes the statistics"
            );
        },
        |p: &fsmount::lfs_fs::LfsPosix| {
            write_stats_now(a.stats_file.as_deref(), &lfs_stats(&p.fs, rep.as_ref()))
        },
    )?;
    let mut fs = posix.fs;
    fs.sync_all().context("final checkpoint")?;
    let stats = lfs_stats(&fs, rep.as_ref());
    let dev = fs.unmount()?;
    if let Some(mut nand) = dev.into_nand() {
        nand.flush().context("cannot flush the image")?;
    }
    write_stats(a.stats_file.as_deref(), &stats)
}

fn fsck_lfs(a: &FsckArgs, mode: lfs::Mode, target: &str, nand: Nand) -> anyhow::Result<()> {
    let (mut fs, rep) = mount_lfs(nand, mode, target, &a.fs, &a.image)?;
    let problems = fs.fsck()?;
    report_fsck(
        a,
        &problems,
        serde_json::json!({
            "image": a.image,
            "fs": a.fs,
            "clean": problems.is_empty(),
            "problems": problems,
            "recovery": rep,
            "statfs": fs.statfs(),
        }),
        &format!(
            "fsck {} {}: {} ({})",
            a.fs,
            a.image.display(),
            if problems.is_empty() {
                "clean"
            } else {
                "PROBLEMS"
            },
            recovery_summary(&rep)
        ),
    )
}

/// What a log-structured mount recovered, in words: the checkpoint, the roll-forward, the
/// orphans and, if any, the torn checkpoint packs it skipped (a power cut while one was
/// written; docs/lfs.md).
fn recovery_summary(r: &lfs::MountReport) -> String {
    let mut s = format!(
        "checkpoint {}, {} fsynced nodes rolled forward, {} orphans freed",
        r.checkpoint_version, r.rolled_forward_nodes, r.orphans_freed
    );
    if r.torn_checkpoints > 0 {
        s += &format!(", {} torn checkpoint pack(s) skipped", r.torn_checkpoints);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::recovery_summary;

    /// Torn checkpoint packs a mount skipped are named in the text, not only in the JSON.
    #[test]
    fn the_recovery_summary_names_torn_checkpoint_packs_when_there_are_any() {
        let mut r = lfs::MountReport {
            checkpoint_version: 7,
            rolled_forward_nodes: 3,
            ..lfs::MountReport::default()
        };
        let s = recovery_summary(&r);
        assert!(s.starts_with("checkpoint 7, 3 fsynced nodes"), "{s}");
        assert!(!s.contains("torn"), "{s}");
        r.torn_checkpoints = 1;
        assert!(
            recovery_summary(&r).ends_with(", 1 torn checkpoint pack(s) skipped"),
            "{}",
            recovery_summary(&r)
        );
    }
}
