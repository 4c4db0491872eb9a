//! Steady-state rounds for the `fs waf` workloads that can repeat their work
//! (`ROUND_WORKLOADS`), measured by someone outside the file system: the host that reads the
//! emulated device's counters, while a kernel file system runs the workload in a guest
//! (`reproduce amf`, `vm::measure`) or a FUSE mount runs it on the host (`fs waf --steady`).
//!
//! The workload lays out its data set (the preconditioning: seqwrite's and randwrite's file,
//! kv's load, a Postmark run, the engine's database loaded and run once), syncs and *marks*
//! it (round 0); then it runs rounds of a fixed size, syncing and marking after each (rounds
//! 1, 2, ...). At each mark the measurer snapshots the counters and
//! answers whether to go on. The rounds are what `crate::steady` judges: per round, its
//! throughput (application bytes per second of modelled device time) and its FTL write
//! amplification; the workload stops when the last `steady::WINDOW_ROUNDS` rounds are in band
//! or after the cap.
//!
//! The protocol on a line (a serial port between guest and host): the workload writes
//! `MARK <round> <app_bytes>\n` (the application bytes written since the workload started,
//! preconditioning included) and reads one line back, `GO` or `STOP`. The mark is written
//! after `sync(2)`, so every byte the round made the file system write has been acknowledged by
//! the device when the measurer reads it.
//!
//! Pieces, bottom up: the protocol's lines (`Mark`, `parse_mark`, `reply`); the marker a
//! workload calls (`Marker`; `Tty` over a serial device; `Always` for tests) and the round
//! loop it runs (`in_rounds`); the measurer's side (`Snapshot`, `rounds`, `go_on`, `window`,
//! `note`).
//!
//! Invariants:
//! 1. Marks arrive with rounds 0, 1, 2, ... in order and non-decreasing application bytes;
//!    `rounds` refuses anything else.
//! 2. A round's figures are differences of two consecutive snapshots, so preconditioning
//!    (before mark 0) is never in a round.
//! 3. `go_on` answers STOP once the rounds are steady or `max_rounds` rounds have run, and only
//!    then.
//! 4. Rounds are judged steady only when the last `steady::WINDOW_ROUNDS` of them began after
//!    the FTL had been asked to write the device's capacity in all (preconditioning included):
//!    before that it has collected no garbage, and equal rounds at an FTL WAF of 1.00 would be
//!    the fresh device's state, not the workload's steady one (a weaker form of SNIA SSS PTS's
//!    workload-independent preconditioning, which a file system on a fresh device cannot run).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{bail, ensure, Context};
use serde::{Deserialize, Serialize};

use crate::steady::{self, Round, SteadyState};

/// The workloads that run in rounds: the data set laid out once, then the same kind of writes
/// again and again (the engine's rows: the database loaded and run once, then reopened for
/// every round; Postmark's high row: a Postmark run, then one more per round). The others are
/// whole runs: the Hadoop jobs write their files once, and Postmark's low row leaves 1-6% of
/// its bytes to the device in a guest (the rest dies in the page cache), so 25 rounds would
/// not write the device over once.
pub const ROUND_WORKLOADS: [&str; 6] = [
    "seqwrite",
    "randwrite",
    "kv",
    "postmark-high",
    "tpcb",
    "tpcc",
];

/// One mark: the end of round `round` (0: the end of preconditioning) after `app_bytes` written
/// in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub round: u32,
    pub app_bytes: u64,
}

impl Mark {
    /// The line the workload writes.
    pub fn line(&self) -> String {
        format!("MARK {} {}\n", self.round, self.app_bytes)
    }
}

/// Parses a workload's line (`Mark::line`, with or without its newline).
pub fn parse_mark(line: &str) -> anyhow::Result<Mark> {
    let mut it = line.trim_end_matches(['\r', '\n']).split(' ');
    let (Some("MARK"), Some(round), Some(app), None) = (it.next(), it.next(), it.next(), it.next())
    else {
        bail!("not a round mark: {line:?} (MARK <round> <app_bytes>)");
    };
    Ok(Mark {
        round: round
            .parse()
            .with_context(|| format!("round in {line:?}"))?,
        app_bytes: app
            .parse()
            .with_context(|| format!("app bytes in {line:?}"))?,
    })
}

/// The measurer's answer.
pub fn reply(go: bool) -> &'static str {
    if go {
        "GO\n"
    } else {
        "STOP\n"
    }
}

/// What a workload calls at each mark: true to run another round.
pub trait Marker {
    fn mark(&mut self, m: Mark) -> anyhow::Result<bool>;
}

/// Marks on a serial device (the guest's second serial port): raw mode, a line each way.
#[derive(Debug)]
pub struct Tty {
    reader: BufReader<std::fs::File>,
    writer: std::fs::File,
}

impl Tty {
    /// Opens `path` and puts it in raw mode (no echo, no line editing, no CR/LF translation):
    /// the lines are the protocol's, byte for byte.
    pub fn open(path: &Path) -> anyhow::Result<Tty> {
        use std::os::unix::io::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("--rounds-tty {}", path.display()))?;
        // SAFETY: termios calls on a descriptor we own, into a zeroed struct we own.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(f.as_raw_fd(), &mut t) == 0 {
                libc::cfmakeraw(&mut t);
                if libc::tcsetattr(f.as_raw_fd(), libc::TCSANOW, &t) != 0 {
                    bail!(
                        "--rounds-tty {}: cannot set raw mode: {}",
                        path.display(),
                        std::io::Error::last_os_error()
                    );
                }
            }
            // Not a terminal (a pipe or socket in tests): lines pass unchanged anyway.
        }
        Ok(Tty {
            reader: BufReader::new(f.try_clone()?),
            writer: f,
        })
    }
}

impl Marker for Tty {
    fn mark(&mut self, m: Mark) -> anyhow::Result<bool> {
        self.writer.write_all(m.line().as_bytes())?;
        self.writer.flush()?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("the measurer closed the round line after mark {}", m.round);
        }
        match line.trim() {
            "GO" => Ok(true),
            "STOP" => Ok(false),
            other => bail!("the measurer answered {other:?} to mark {}", m.round),
        }
    }
}

/// The marker of a run in rounds: `sync(2)` first, so that everything the round made the file
/// system write has reached the device when the measurer reads its counters.
fn mark_synced(marker: &mut dyn Marker, round: u32, app_bytes: u64) -> anyhow::Result<bool> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    marker.mark(Mark { round, app_bytes })
}

/// Rounds of `round` (which returns the bytes it wrote) after preconditioning wrote `app`
/// bytes: marks 0, 1, ... until the marker says stop; the bytes written in all.
pub fn in_rounds(
    marker: &mut dyn Marker,
    mut app: u64,
    mut round: impl FnMut(u32) -> anyhow::Result<u64>,
) -> anyhow::Result<u64> {
    let mut k = 0;
    while mark_synced(marker, k, app)? {
        k += 1;
        app += round(k)?;
    }
    Ok(app)
}

/// A marker that runs a fixed number of rounds (tests, and a run without a measurer).
#[derive(Debug)]
pub struct Always {
    pub rounds: u32,
    pub marks: Vec<Mark>,
}

impl Marker for Always {
    fn mark(&mut self, m: Mark) -> anyhow::Result<bool> {
        self.marks.push(m);
        Ok(m.round < self.rounds)
    }
}

/// The device's counters at a mark (the measurer's side).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub round: u32,
    /// The workload's bytes so far (its mark).
    pub app_bytes: u64,
    /// Bytes the file system has written to the device (NBD write payload).
    pub fs_write_bytes: u64,
    /// Pages the FTL was asked to write (payload and zeroing).
    pub host_write_pages: u64,
    pub flash_programs: u64,
    /// The device's modelled clock (its last operation's completion): under `serve --clock
    /// none` a QD1 workload's requests follow one another in it, so its advance over a round is
    /// the round's modelled device time.
    pub device_clock_us: f64,
}

/// One round's figures, the difference of two snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RoundFigures {
    pub round: u32,
    pub app_bytes: u64,
    pub fs_write_bytes: u64,
    pub host_write_pages: u64,
    pub flash_programs: u64,
    pub device_us: f64,
    pub fs_waf: f64,
    pub ftl_waf: f64,
    /// Application MiB per second of modelled device time.
    pub app_mib_per_device_s: f64,
}

fn figures(a: &Snapshot, b: &Snapshot) -> RoundFigures {
    let app_bytes = b.app_bytes - a.app_bytes;
    let fs_write_bytes = b.fs_write_bytes.saturating_sub(a.fs_write_bytes);
    let host_write_pages = b.host_write_pages.saturating_sub(a.host_write_pages);
    let flash_programs = b.flash_programs.saturating_sub(a.flash_programs);
    let device_us = (b.device_clock_us - a.device_clock_us).max(0.0);
    RoundFigures {
        round: b.round,
        app_bytes,
        fs_write_bytes,
        host_write_pages,
        flash_programs,
        device_us,
        fs_waf: fs_write_bytes as f64 / app_bytes.max(1) as f64,
        ftl_waf: flash_programs as f64 / host_write_pages.max(1) as f64,
        app_mib_per_device_s: if device_us > 0.0 {
            app_bytes as f64 / 1_048_576.0 / (device_us / 1e6)
        } else {
            0.0
        },
    }
}

/// Every round's figures (invariant 2), checked (invariant 1).
pub fn rounds(snaps: &[Snapshot]) -> anyhow::Result<Vec<RoundFigures>> {
    for (i, s) in snaps.iter().enumerate() {
        ensure!(
            s.round as usize == i,
            "mark {} arrived as the {}th: marks come in order from 0",
            s.round,
            i + 1
        );
    }
    for w in snaps.windows(2) {
        ensure!(
            w[1].app_bytes >= w[0].app_bytes,
            "mark {}'s application bytes went down ({} after {})",
            w[1].round,
            w[1].app_bytes,
            w[0].app_bytes
        );
    }
    Ok(snaps.windows(2).map(|w| figures(&w[0], &w[1])).collect())
}

/// The rounds as the steady-state rule tracks them: throughput and FTL WAF.
fn samples(r: &[RoundFigures]) -> Vec<Round> {
    r.iter()
        .map(|f| Round {
            throughput: f.app_mib_per_device_s,
            waf: Some(f.ftl_waf),
        })
        .collect()
}

/// When the rounds stop: the cap, and the device the writes count against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub max_rounds: u32,
    /// The emulated device's capacity: the rounds judged steady all begin after the device
    /// was written over once (invariant 4).
    pub device_bytes: u64,
}

/// Whether `snaps`' rounds are steady (invariant 4): the last `steady::WINDOW_ROUNDS` rounds
/// all begin after the device was written over once in all (the FTL cannot have collected
/// garbage before: a run of rounds at an FTL WAF of 1.00 before its first copy is not its
/// steady state), and are in band by `steady::is_steady`.
fn steady_after_fill(snaps: &[Snapshot], r: &[RoundFigures], device_bytes: u64) -> bool {
    // Round r[i] begins at snapshot i.
    let Some(filled) = snaps
        .iter()
        .position(|s| s.host_write_pages * ftl::LOGICAL_PAGE_BYTES as u64 >= device_bytes)
    else {
        return false;
    };
    filled < r.len() && steady::is_steady(&samples(&r[filled..]))
}

/// The measurer's answer after the last of `snaps` (invariant 3): go on unless the rounds are
/// steady or `rule.max_rounds` have run. A bad sequence of marks stops the workload.
pub fn go_on(snaps: &[Snapshot], rule: Rule) -> bool {
    match rounds(snaps) {
        Ok(r) => {
            !steady_after_fill(snaps, &r, rule.device_bytes) && (r.len() as u32) < rule.max_rounds
        }
        Err(_) => false,
    }
}

/// The progress line of the latest mark of `snaps` (stderr): preconditioning done, or the
/// round's figures, so that a long run in rounds shows where it is.
pub fn note(label: &str, snaps: &[Snapshot]) {
    let line = match rounds(snaps).ok().and_then(|r| r.last().copied()) {
        Some(f) => format!(
            "{label}: round {}: FS WAF {:.2}, FTL WAF {:.2}, {:.1} MiB/s of modelled device time",
            f.round, f.fs_waf, f.ftl_waf, f.app_mib_per_device_s
        ),
        None => format!("{label}: preconditioned, rounds begin"),
    };
    crate::progress::note(&line);
}

/// The measured window: the last `steady::WINDOW_ROUNDS` rounds (fewer if fewer ran) as one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    /// The window's rounds together.
    pub figures: RoundFigures,
    /// Every round, in order.
    pub rounds: Vec<RoundFigures>,
    pub steady_state: SteadyState,
}

/// The window of `snaps` on a device of `device_bytes` (None before the first round ended).
pub fn window(snaps: &[Snapshot], device_bytes: u64) -> anyhow::Result<Option<Window>> {
    let r = rounds(snaps)?;
    if r.is_empty() {
        return Ok(None);
    }
    let first = r.len().saturating_sub(steady::WINDOW_ROUNDS);
    // Snapshot i+1 ends round i+1, whose figures are r[i]: the window starts at snapshot
    // `first`.
    let mut figures = figures(&snaps[first], &snaps[snaps.len() - 1]);
    figures.round = r.len() as u32;
    let met = steady_after_fill(snaps, &r, device_bytes);
    let device_writes = (snaps[first].host_write_pages * ftl::LOGICAL_PAGE_BYTES as u64) as f64
        / device_bytes.max(1) as f64;
    let steady_state = SteadyState::of(
        &steady::Rounds {
            samples: samples(&r),
            met,
        },
        device_writes,
    );
    Ok(Some(Window {
        figures,
        rounds: r,
        steady_state,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(round: u32, app_mib: u64, pages: u64, programs: u64, clock_s: f64) -> Snapshot {
        Snapshot {
            round,
            app_bytes: app_mib << 20,
            fs_write_bytes: pages * 4096,
            host_write_pages: pages,
            flash_programs: programs,
            device_clock_us: clock_s * 1e6,
        }
    }

    fn rule(max_rounds: u32, device_bytes: u64) -> Rule {
        Rule {
            max_rounds,
            device_bytes,
        }
    }

    #[test]
    fn marks_round_trip_and_bad_lines_are_refused() {
        let m = Mark {
            round: 3,
            app_bytes: 12_345,
        };
        assert_eq!(parse_mark(&m.line()).unwrap(), m);
        for bad in ["", "MARK", "MARK 1", "MARK x 2", "MARK 1 2 3", "GO"] {
            assert!(parse_mark(bad).is_err(), "{bad:?}");
        }
        assert_eq!((reply(true), reply(false)), ("GO\n", "STOP\n"));
    }

    /// Rounds are differences of consecutive snapshots; preconditioning is not a round.
    #[test]
    fn a_round_is_the_difference_of_two_marks() {
        let snaps = [
            snap(0, 100, 25_600, 25_600, 10.0),
            snap(1, 150, 38_400, 51_200, 20.0),
        ];
        let r = rounds(&snaps).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].app_bytes, 50 << 20);
        assert!((r[0].fs_waf - 1.0).abs() < 1e-12);
        assert!((r[0].ftl_waf - 2.0).abs() < 1e-12);
        assert!((r[0].app_mib_per_device_s - 5.0).abs() < 1e-9);
        // Out of order, or bytes going down: refused, and the measurer says stop.
        assert!(rounds(&[snaps[1]]).is_err());
        let down = [snap(0, 100, 0, 0, 0.0), snap(1, 90, 0, 0, 1.0)];
        assert!(rounds(&down).is_err());
        assert!(!go_on(&down, rule(25, 0)));
    }

    /// Steady after five equal rounds; never steady before five; stops at the cap.
    #[test]
    fn the_measurer_stops_when_steady_or_at_the_cap() {
        let mut snaps = vec![snap(0, 0, 0, 0, 0.0)];
        for k in 1..=4 {
            snaps.push(snap(
                k,
                u64::from(k) * 10,
                u64::from(k) * 2560,
                u64::from(k) * 5120,
                f64::from(k),
            ));
            assert!(
                go_on(&snaps, rule(25, 0)),
                "round {k}: fewer than five rounds are never steady"
            );
        }
        snaps.push(snap(5, 50, 12_800, 25_600, 5.0));
        assert!(!go_on(&snaps, rule(25, 0)), "five equal rounds are steady");
        let w = window(&snaps, 0).unwrap().unwrap();
        assert!(w.steady_state.met);
        assert_eq!(w.rounds.len(), 5);
        assert!((w.figures.ftl_waf - 2.0).abs() < 1e-12);
        // A growing WAF is not steady: the cap stops it.
        let mut growing = vec![snap(0, 0, 0, 0, 0.0)];
        let mut programs = 0;
        for k in 1..=6u32 {
            programs += 2560 * u64::from(k);
            growing.push(snap(
                k,
                u64::from(k) * 10,
                u64::from(k) * 2560,
                programs,
                f64::from(k),
            ));
        }
        assert!(go_on(&growing, rule(25, 0)));
        assert!(!go_on(&growing, rule(6, 0)), "the cap");
        let w = window(&growing, 0).unwrap().unwrap();
        assert!(!w.steady_state.met);
        // The window is the last five rounds: from snapshot 1 to 6.
        assert_eq!(w.figures.app_bytes, 50 << 20);
        assert!(window(&growing[..1], 0).unwrap().is_none());
    }

    /// Invariant 4: equal rounds before the device was written over once are not steady; the
    /// five after it are.
    #[test]
    fn rounds_before_the_device_is_written_over_are_not_steady() {
        // 10 MiB per round on a 40 MiB device: written over at snapshot 4, so rounds 5 to 9
        // are the first five that count.
        let device_bytes = 40 << 20;
        let mut snaps = vec![snap(0, 0, 0, 0, 0.0)];
        for k in 1..=9u32 {
            let pages = u64::from(k) * 2560;
            snaps.push(snap(k, u64::from(k) * 10, pages, pages, f64::from(k)));
            let steady = !go_on(&snaps, rule(25, device_bytes));
            assert_eq!(steady, k == 9, "round {k}");
        }
        let w = window(&snaps, device_bytes).unwrap().unwrap();
        assert!(w.steady_state.met);
        assert!(
            !window(&snaps[..9], device_bytes)
                .unwrap()
                .unwrap()
                .steady_state
                .met
        );
        // Never written over: only the cap stops it.
        assert!(go_on(&snaps, rule(25, 1 << 30)));
        assert!(!go_on(&snaps, rule(9, 1 << 30)));
    }

    #[test]
    fn always_runs_its_rounds() {
        let mut m = Always {
            rounds: 2,
            marks: vec![],
        };
        let go: Vec<bool> = (0..3)
            .map(|round| {
                m.mark(Mark {
                    round,
                    app_bytes: 0,
                })
                .unwrap()
            })
            .collect();
        assert_eq!(go, [true, true, false]);
    }
}
