//! Why a cell of AMF's table misses the slides, read off its own run's counters: one sentence
//! per cell outside its tolerance, chosen by rules over the counters (never by the cell's
//! name), so that a re-run with other counters gets another reason, or none.
//!
//! The rules, in the order they are tried (the first that holds is the reason):
//! - FS level below the slides:
//!   1. the file system wrote less than the application (FS WAF < 0.95): the bytes died in the
//!      page cache (files deleted or rewritten before writeback);
//!   2. it wrote the application's bytes about once (FS WAF <= `ONCE`): in place, no log copy,
//!      cleaning or journal on the device for this workload;
//!   3. otherwise: fewer extra pages per application page than the slides' (named).
//! - FS level above the slides:
//!   4. a log-structured file system of ours: what its cleaner copied, when that is at least
//!      its node pages; otherwise its node and data pages per application page;
//!   5. a kernel file system: its bytes written per application byte and its flushes.
//! - FTL level below the slides ("almost none": extra programs at most `ALMOST_NONE` of the
//!   host's pages):
//!   6. almost no extra programs while the file system trimmed: nothing valid left for the
//!      FTL to move;
//!   7. almost no extra programs and the device not yet written over: GC had not started;
//!   8. not steady (a whole run, or rounds stopped at the cap) with the device written over
//!      fewer than `SETTLED_DEVICE_WRITES` times: GC still settling;
//!   9. otherwise: in the FTL's steady state, the file system leaves it more room than the
//!      slides' device (whose fill the slides do not state), with the trims it sent.
//! - FTL level above the slides:
//!   10. no trims: every block the file system ever wrote stays valid to the FTL;
//!   11. otherwise: the FTL's extra programs per host page at this fill.
//!
//! `model_reason` does the same for a pair of kernel F2FS and our f2fs mode on one row: per
//! level outside its tolerance, what each wrote.
//!
//! Invariant: a cell or pair within its tolerance has no reason (None).

/// Which level of the table a cell is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Fs,
    Ftl,
}

/// What a row's counters say, as the rules read them (the measured window's for a row in
/// rounds, the whole run's otherwise).
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// "kernel ext4", "kernel f2fs", "our alfs", ...
    pub fs: String,
    /// Our log-structured file system's own counts (f2fs mode, ALFS).
    pub lfs: Option<LfsPages>,
    pub app_bytes: u64,
    /// What the file system wrote to the device.
    pub fs_write_bytes: u64,
    pub fs_waf: f64,
    pub ftl_waf: f64,
    /// Pages the FTL was asked to write.
    pub host_write_pages: u64,
    /// Flash programs beyond the host's pages (GC copies, and DFTL's mapping pages).
    pub extra_programs: u64,
    /// Trim requests (kernel rows) or trimmed pages (ours) of the run.
    pub trims: u64,
    /// Flush requests of the run (kernel rows).
    pub flushes: u64,
    /// How often the device had been written over when the measurement began (a whole run:
    /// when it ended).
    pub device_writes: f64,
    /// Whether the figures are a steady window (rounds that met the rule).
    pub steady: bool,
    /// "rounds (steady)", "rounds (at the cap)" or "a whole run".
    pub regime: String,
}

/// Our log-structured file system's pages by purpose, and its cleaner's copies.
#[derive(Clone, Copy, Debug, Default)]
pub struct LfsPages {
    pub data: u64,
    pub node: u64,
    pub meta: u64,
    pub checkpoint: u64,
    pub cleaned: u64,
}

/// An FS level up to this is the application's bytes written once (a few metadata pages).
pub const ONCE: f64 = 1.05;

/// Extra programs up to this share of the host's pages are "almost none" (a few metadata
/// blocks collected).
pub const ALMOST_NONE: f64 = 0.01;

/// A whole run that wrote the device over fewer times than this had not settled its GC
/// (a page FTL's level settles within about two device writes after its first copy).
pub const SETTLED_DEVICE_WRITES: f64 = 3.0;

const PAGE_BYTES: f64 = 4096.0;

/// The reason a cell at `ours` misses the slides' `paper` by more than `tolerance`, from
/// `f`; None for a cell within.
pub fn reason(level: Level, paper: f64, ours: f64, tolerance: f64, f: &Facts) -> Option<String> {
    let error = if paper != 0.0 {
        ours / paper - 1.0
    } else {
        0.0
    };
    if error.abs() <= tolerance {
        return None;
    }
    let below = ours < paper;
    let almost_none = f.extra_programs as f64 <= ALMOST_NONE * f.host_write_pages as f64;
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let app_pages = (f.app_bytes as f64 / PAGE_BYTES).max(1.0);
    Some(match (level, below) {
        (Level::Fs, true) if f.fs_waf < 0.95 => format!(
            "{} wrote {:.1} MiB for the application's {:.1} MiB: bytes deleted or rewritten in \
             the page cache before writeback never reached the device ({})",
            f.fs,
            mib(f.fs_write_bytes),
            mib(f.app_bytes),
            f.regime
        ),
        (Level::Fs, true) if f.fs_waf <= ONCE => format!(
            "{} wrote the application's bytes about once (FS {:.2}): in place, with no log copy, \
             cleaning or journal write on the device for this workload, where the slides' \
             {paper:.2} implies writes out of place{}",
            f.fs,
            f.fs_waf,
            if f.fs.contains("f2fs") && f.lfs.is_none() {
                " (kernel F2FS's default mode=adaptive rewrites data in place where its \
                 in-place-update policy allows)"
            } else {
                ""
            }
        ),
        (Level::Fs, true) => format!(
            "{} wrote {:.2} pages per application page ({} flushes), fewer extra pages than the \
             slides' {paper:.2} ({})",
            f.fs, f.fs_waf, f.flushes, f.regime
        ),
        (Level::Fs, false) => match f.lfs {
            Some(l) if l.cleaned >= l.node => format!(
                "{}'s cleaner copied {} pages ({:.2} per application page) at this fill, the \
                 slides' not stated; {} data, {} node, {} meta and {} checkpoint pages written \
                 for {:.0} pages of application bytes",
                f.fs,
                l.cleaned,
                l.cleaned as f64 / app_pages,
                l.data,
                l.node,
                l.meta,
                l.checkpoint,
                app_pages
            ),
            Some(l) => format!(
                "{} wrote {} data, {} node, {} meta and {} checkpoint pages for {:.0} pages of \
                 application bytes ({:.2} node pages per application page: a node page per \
                 fsync'd or small file, no inline data) and its cleaner copied {} pages",
                f.fs,
                l.data,
                l.node,
                l.meta,
                l.checkpoint,
                app_pages,
                l.node as f64 / app_pages,
                l.cleaned
            ),
            None => format!(
                "{} wrote {:.1} MiB for the application's {:.1} MiB ({} flushes, {}), more per \
                 application byte than the slides' {paper:.2}",
                f.fs,
                mib(f.fs_write_bytes),
                mib(f.app_bytes),
                f.flushes,
                f.regime
            ),
        },
        (Level::Ftl, true) if almost_none && f.trims > 0 => format!(
            "the FTL programmed almost nothing beyond the host's pages ({} extra for {}): {} \
             trimmed what it freed ({} trims), so its victim blocks held almost no valid pages \
             ({}, the device written over {:.2}x)",
            f.extra_programs, f.host_write_pages, f.fs, f.trims, f.regime, f.device_writes
        ),
        (Level::Ftl, true) if almost_none && f.device_writes < 1.0 => format!(
            "the FTL had not collected garbage: the device was written over {:.2}x by then, \
             {} extra programs for {} host pages ({})",
            f.device_writes, f.extra_programs, f.host_write_pages, f.regime
        ),
        (Level::Ftl, true) if !f.steady && f.device_writes < SETTLED_DEVICE_WRITES => format!(
            "not in the FTL's steady state ({}): the device written over {:.2}x, {} extra \
             programs for {} host pages while GC was still settling",
            f.regime, f.device_writes, f.extra_programs, f.host_write_pages
        ),
        (Level::Ftl, true) => format!(
            "{} extra programs for {} host pages ({}; the device written over {:.2}x): the \
             file system's live data leave the FTL more free space than the slides' device, \
             whose fill they do not state ({} trims sent)",
            f.extra_programs, f.host_write_pages, f.regime, f.device_writes, f.trims
        ),
        (Level::Ftl, false) if f.trims == 0 => format!(
            "{} sent no trims while the workload deleted or rewrote data: every block it ever \
             wrote stays valid to the FTL, which then runs at the export's full logical capacity \
             on its spare alone ({} extra programs for {} host pages, {}); whether the slides' \
             file system was mounted with discard is not stated",
            f.fs, f.extra_programs, f.host_write_pages, f.regime
        ),
        (Level::Ftl, false) => format!(
            "{} extra programs for {} host pages ({}, {} trims): the FTL's level at our fill \
             and spare, which the slides do not state",
            f.extra_programs, f.host_write_pages, f.regime, f.trims
        ),
    })
}

/// Why kernel F2FS (`kernel`) and our f2fs mode (`ours`) on one row differ by more than
/// `tolerance` at a level, from the two rows' counters; None where both levels are within.
pub fn model_reason(kernel: &Facts, ours: &Facts, tolerance: f64) -> Option<String> {
    let rel = |a: f64, b: f64| if b != 0.0 { a / b - 1.0 } else { 0.0 };
    let (fs_d, ftl_d) = (
        rel(ours.fs_waf, kernel.fs_waf),
        rel(ours.ftl_waf, kernel.ftl_waf),
    );
    let mut parts = Vec::new();
    if fs_d.abs() > tolerance {
        let app_pages = (ours.app_bytes as f64 / PAGE_BYTES).max(1.0);
        let ours_pages = match ours.lfs {
            Some(l) => format!(
                "ours wrote {} data and {} node pages for {:.0} application pages and cleaned {}",
                l.data, l.node, app_pages, l.cleaned
            ),
            None => format!("ours wrote {:.2} pages per application page", ours.fs_waf),
        };
        parts.push(if kernel.fs_waf < 0.95 {
            format!(
                "FS: kernel F2FS wrote {:.1} of the application's {:.1} MiB (the rest died in \
                 its page cache before writeback), while {ours_pages}",
                kernel.fs_write_bytes as f64 / 1_048_576.0,
                kernel.app_bytes as f64 / 1_048_576.0
            )
        } else if kernel.fs_waf <= ONCE {
            format!(
                "FS: kernel F2FS wrote in place ({:.2}; mode=adaptive), while {ours_pages} out \
                 of place",
                kernel.fs_waf
            )
        } else {
            format!(
                "FS: kernel F2FS wrote {:.2} pages per application page with {} flushes, while {ours_pages}",
                kernel.fs_waf, kernel.flushes
            )
        });
    }
    if ftl_d.abs() > tolerance {
        parts.push(format!(
            "FTL: behind kernel F2FS {} extra programs for {} host pages ({} trims), behind \
             ours {} for {} ({} pages trimmed): the two file systems leave the FTL different \
             live data",
            kernel.extra_programs,
            kernel.host_write_pages,
            kernel.trims,
            ours.extra_programs,
            ours.host_write_pages,
            ours.trims
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            fs: "kernel ext4".into(),
            app_bytes: 100 << 20,
            fs_write_bytes: 100 << 20,
            fs_waf: 1.0,
            ftl_waf: 1.0,
            host_write_pages: 25_600,
            regime: "a whole run".into(),
            device_writes: 0.5,
            ..Facts::default()
        }
    }

    #[test]
    fn a_model_pair_within_has_no_reason_and_one_outside_names_its_level() {
        let k = facts();
        assert!(model_reason(&k, &k, 0.10).is_none());
        let mut ours = facts();
        ours.fs_waf = 1.5;
        let r = model_reason(&k, &ours, 0.10).unwrap();
        assert!(
            r.contains("FS: kernel F2FS wrote in place") && !r.contains("FTL:"),
            "{r}"
        );
        ours.fs_waf = 1.0;
        ours.ftl_waf = 1.3;
        let r = model_reason(&k, &ours, 0.10).unwrap();
        assert!(r.starts_with("FTL:"), "{r}");
    }

    #[test]
    fn a_cell_within_its_tolerance_has_no_reason() {
        assert!(reason(Level::Ftl, 1.0, 1.1, 0.15, &facts()).is_none());
        assert!(reason(Level::Ftl, 1.0, 1.2, 0.15, &facts()).is_some());
    }

    /// Each rule is chosen by the counters: the same cell gets another reason when they change.
    #[test]
    fn the_counters_choose_the_reason() {
        let mut f = facts();
        let r = |f: &Facts, level, paper, ours| reason(level, paper, ours, 0.15, f).unwrap();
        assert!(r(&f, Level::Ftl, 2.0, 1.0).contains("had not collected garbage"));
        f.trims = 40;
        assert!(r(&f, Level::Ftl, 2.0, 1.0).contains("trimmed what it freed"));
        f.extra_programs = 9000;
        f.device_writes = 1.5;
        assert!(r(&f, Level::Ftl, 2.0, 1.3).contains("still settling"));
        f.steady = true;
        assert!(r(&f, Level::Ftl, 2.0, 1.3).contains("more free space"));
        f.trims = 0;
        assert!(r(&f, Level::Ftl, 2.0, 3.5).contains("sent no trims"));
        f.trims = 5;
        assert!(r(&f, Level::Ftl, 2.0, 3.5).contains("fill and spare"));
        f.fs_waf = 0.06;
        f.fs_write_bytes = 6 << 20;
        assert!(r(&f, Level::Fs, 1.0, 0.06).contains("page cache"));
        f.fs_waf = 1.0;
        f.fs = "kernel f2fs".into();
        assert!(r(&f, Level::Fs, 1.35, 1.0).contains("mode=adaptive"));
        f.fs_waf = 1.2;
        assert!(r(&f, Level::Fs, 1.6, 1.2).contains("fewer extra pages"));
        assert!(r(&f, Level::Fs, 1.0, 1.45).contains("flushes"));
        f.lfs = Some(LfsPages {
            data: 100,
            node: 50,
            ..LfsPages::default()
        });
        f.fs = "our alfs".into();
        assert!(r(&f, Level::Fs, 1.0, 2.3).contains("node pages per application page"));
        f.lfs = Some(LfsPages {
            data: 100,
            node: 50,
            cleaned: 80,
            ..LfsPages::default()
        });
        assert!(r(&f, Level::Fs, 1.0, 2.3).contains("cleaner copied 80 pages"));
    }
}
