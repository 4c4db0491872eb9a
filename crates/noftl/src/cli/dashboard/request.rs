//! What the dashboard's form asks for, checked and turned into the CLI's command line.
//!
//! Every field is checked before anything runs and refused with 400 and a message naming it;
//! every number is bounded here, before it is used (issue 32: a speed of 1e-300 panicked the
//! run's pacing, warm-ups had no bound).

use lab::experiments::compare::Warmup;
use serde::{Deserialize, Serialize};

use super::super::launch::{Job, Launcher};

/// Virtual time a run (and a warm-up) may ask for here: 600 s.
const MAX_VIRTUAL_NS: u64 = 600_000_000_000;
/// Virtual seconds per wall second, at least and at most (0: no pacing).
const MIN_SPEED: f64 = 0.01;
const MAX_SPEED: f64 = 1000.0;

/// What the form asks for.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct RunRequest {
    /// `bench` (one store; the default), `compare` (several side by side, NoFTL Fig. 3),
    /// `ipa` (`ipa compare`: IPA Table I's configurations side by side) or `iaa` (`iaa
    /// compare`: IAA Fig. 11's schemes over free-space levels; no workload or scale).
    #[serde(default = "bench")]
    pub scenario: String,
    #[serde(default)]
    pub workload: String,
    /// bench: the store; iaa: page, dftl or native.
    #[serde(default)]
    pub storage: String,
    /// compare: the stores (compare's names; native among them).
    #[serde(default)]
    pub stores: Vec<String>,
    /// ipa: the configurations (`ipa compare`'s names).
    #[serde(default)]
    pub configs: Vec<String>,
    /// iaa: the schemes (`iaa compare`'s names).
    #[serde(default)]
    pub schemes: Vec<String>,
    /// iaa: the device's free-space levels, e.g. 10%.
    #[serde(default)]
    pub free: Vec<String>,
    /// compare, ipa: measured windows per store or configuration.
    #[serde(default = "one")]
    pub repeat: u32,
    /// compare: before each store's windows (none, auto or a virtual time); ipa: a virtual
    /// time; iaa: writes in device capacities (e.g. 0.5).
    #[serde(default = "none")]
    pub warmup: String,
    #[serde(default)]
    pub scale: u32,
    pub terminals: u32,
    /// Virtual run time, e.g. 10s.
    pub duration: String,
    pub preset: String,
    /// Virtual seconds shown per wall-clock second (0: as fast as the emulator runs).
    #[serde(default)]
    pub speed: f64,
}

fn bench() -> String {
    "bench".into()
}
fn one() -> u32 {
    1
}
fn none() -> String {
    "none".into()
}

/// Flash requests a live point carries at most (the last of its window; NoFTL Fig. 7's table).
const RECENT_REQUESTS: usize = 8;

const STORAGES: [&str; 8] = [
    "native",
    "page",
    "dftl",
    "dftl-orig",
    "fast",
    "block",
    "amf",
    "memdisk",
];

impl RunRequest {
    /// `argv_with` the CLI's own launcher (`cli::launcher()`), for the tests.
    #[cfg(test)]
    pub fn argv(&self, dir: &std::path::Path) -> Result<Vec<String>, String> {
        self.argv_with(dir, &super::super::launcher())
    }

    /// The CLI command line of this request (without the program name), or what is wrong with
    /// it; `iaa compare`'s own checks run on the command line parsed by `launch.parse`.
    pub fn argv_with(
        &self,
        dir: &std::path::Path,
        launch: &Launcher,
    ) -> Result<Vec<String>, String> {
        let mut argv = if self.scenario == "iaa" {
            self.iaa_argv()?
        } else {
            self.tpc_argv()?
        };
        if self.terminals == 0 || self.terminals > 64 {
            return Err(format!("terminals: 1 to 64, not {}", self.terminals));
        }
        let ns =
            lab::units::parse_duration_ns(&self.duration).map_err(|e| format!("duration: {e}"))?;
        if ns > MAX_VIRTUAL_NS {
            return Err("duration: at most 600s of virtual time here".into());
        }
        if !nand::PRESETS.iter().any(|(n, _)| *n == self.preset) {
            let names: Vec<&str> = nand::PRESETS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "preset: one of {}, not '{}'",
                names.join(", "),
                self.preset
            ));
        }
        // A speed of 1e-300 made the pacing wait overflow a Duration (a panic): the pace is a
        // virtual time divided by it, so it stays within what a wait can be.
        if !(self.speed == 0.0 || (MIN_SPEED..=MAX_SPEED).contains(&self.speed)) {
            return Err(format!(
                "speed: 0 (no pacing) or {MIN_SPEED} to {MAX_SPEED} virtual seconds per second, not {}",
                self.speed
            ));
        }
        // About a hundred points per run, at least 10 ms apart.
        let window_ms = (ns / 100 / 1_000_000).max(10);
        argv.extend(
            [
                "--terminals",
                &self.terminals.to_string(),
                "--duration",
                &self.duration,
                "--preset",
                &self.preset,
                // The device keeps its last operations for the page's request table.
                "--set",
                &format!("trace_recent={RECENT_REQUESTS}"),
                "--results",
                &dir.display().to_string(),
                "--sample-window",
                &format!("{window_ms}ms"),
            ]
            .map(String::from),
        );
        if self.scenario == "iaa" {
            // `iaa compare`'s own checks, with its messages, on the parsed command line.
            let parsed = parse_with(&argv, launch);
            if let Some(a) = parsed.as_ref().ok().and_then(launch.iaa_compare) {
                super::super::iaa::checked(a).map_err(|e| format!("{e:#}"))?;
                let runs = a.free.len()
                    * super::super::iaa::schemes(a)
                        .map_err(|e| format!("schemes: {e:#}"))?
                        .len();
                if runs > 20 {
                    return Err(format!("free x schemes: at most 20 runs here, not {runs}"));
                }
            }
        }
        Ok(argv)
    }

    /// `iaa compare`'s part of the command line.
    fn iaa_argv(&self) -> Result<Vec<String>, String> {
        if !["page", "dftl", "native"].contains(&self.storage.as_str()) {
            return Err(format!(
                "storage: page, dftl or native for IAA, not '{}'",
                self.storage
            ));
        }
        if self.schemes.is_empty() {
            return Err("schemes: one or more of conventional, iaa, u2di, iaa+u2di".into());
        }
        if self.free.is_empty() {
            return Err("free: one or more free-space levels, e.g. 10%,30%".into());
        }
        // The sweep is free x schemes runs (at most 20, below); the lists are bounded before
        // each entry is parsed.
        if self.free.len() > 20 || self.schemes.len() > 20 {
            return Err("free, schemes: at most 20 entries each here".into());
        }
        for f in &self.free {
            super::super::common::parse_percent(f).map_err(|e| format!("free: {e}"))?;
        }
        let warmup = if self.warmup == "none" {
            "0"
        } else {
            self.warmup.as_str()
        };
        let capacities = warmup
            .parse::<f64>()
            .map_err(|_| format!("warmup: device capacities (e.g. 0.5) for IAA, not '{warmup}'"))?;
        if !(0.0..=10.0).contains(&capacities) {
            return Err(format!(
                "warmup: 0 to 10 device capacities for IAA here, not {warmup}"
            ));
        }
        Ok([
            "iaa",
            "compare",
            "--storage",
            &self.storage,
            "--schemes",
            &self.schemes.join(","),
            "--free",
            &self.free.join(","),
            "--warmup",
            warmup,
        ]
        .map(String::from)
        .to_vec())
    }

    /// The command line's part for the TPC scenarios (bench, compare, ipa), with the scale.
    fn tpc_argv(&self) -> Result<Vec<String>, String> {
        let (max_scale, what) = match self.workload.as_str() {
            "tpcb" => (64, "branches"),
            "tatp" => (500_000, "subscribers"),
            "tpcc" => (4, "warehouses"),
            other => return Err(format!("workload: tpcb, tatp or tpcc, not '{other}'")),
        };
        let mut argv: Vec<String> = match self.scenario.as_str() {
            "bench" => {
                if !STORAGES.contains(&self.storage.as_str()) {
                    return Err(format!(
                        "storage: one of {}, not '{}'",
                        STORAGES.join(", "),
                        self.storage
                    ));
                }
                ["bench", &self.workload, "--storage", &self.storage]
                    .map(String::from)
                    .to_vec()
            }
            "compare" => {
                // compare's own checks, with its messages.
                lab::experiments::compare::parse_stores(&self.stores)
                    .map_err(|e| format!("stores: {e}"))?;
                let warmup = lab::experiments::compare::parse_warmup(&self.warmup)
                    .map_err(|e| format!("warmup: {e}"))?;
                if matches!(warmup, Warmup::VirtualNs(ns) if ns > MAX_VIRTUAL_NS) {
                    return Err("warmup: at most 600s of virtual time here".into());
                }
                self.check_repeat()?;
                [
                    "compare",
                    "--workload",
                    &self.workload,
                    "--stores",
                    &self.stores.join(","),
                    "--repeat",
                    &self.repeat.to_string(),
                    "--warmup",
                    &self.warmup,
                ]
                .map(String::from)
                .to_vec()
            }
            "ipa" => {
                if self.configs.is_empty() {
                    return Err(format!(
                        "configs: one or more of {}",
                        super::super::ipa::CONFIGS.join(", ")
                    ));
                }
                if let Some(c) = self
                    .configs
                    .iter()
                    .find(|c| !super::super::ipa::CONFIGS.contains(&c.as_str()))
                {
                    return Err(format!(
                        "configs: '{c}' is not one of {}",
                        super::super::ipa::CONFIGS.join(", ")
                    ));
                }
                if let Some((i, c)) = self
                    .configs
                    .iter()
                    .enumerate()
                    .find(|(i, c)| self.configs[..*i].contains(c))
                {
                    return Err(format!("configs: '{c}' twice (entry {})", i + 1));
                }
                let warmup = &self.warmup;
                let ns =
                    lab::units::parse_duration_ns(warmup).map_err(|e| format!("warmup: {e}"))?;
                if ns > MAX_VIRTUAL_NS {
                    return Err("warmup: at most 600s of virtual time here".into());
                }
                self.check_repeat()?;
                [
                    "ipa",
                    "compare",
                    "--workload",
                    &self.workload,
                    "--configs",
                    &self.configs.join(","),
                    "--repeat",
                    &self.repeat.to_string(),
                    "--warmup",
                    warmup,
                ]
                .map(String::from)
                .to_vec()
            }
            other => {
                return Err(format!(
                    "scenario: bench, compare, ipa or iaa, not '{other}'"
                ))
            }
        };
        if self.scale == 0 || self.scale > max_scale {
            return Err(format!(
                "scale: 1 to {max_scale} {what} here, not {}",
                self.scale
            ));
        }
        argv.extend(["--scale".to_string(), self.scale.to_string()]);
        Ok(argv)
    }

    fn check_repeat(&self) -> Result<(), String> {
        if self.repeat == 0 || self.repeat > 10 {
            return Err(format!("repeat: 1 to 10, not {}", self.repeat));
        }
        Ok(())
    }
}

/// A run's command line through the CLI's own parser (`launch.parse`).
pub fn parse_with(argv: &[String], launch: &Launcher) -> Result<Job, String> {
    (launch.parse)(argv).map_err(|e| e.to_string())
}

/// `parse_with` the CLI's own launcher (`cli::launcher()`), for the tests.
#[cfg(test)]
fn parse(argv: &[String]) -> Result<Job, String> {
    parse_with(argv, &super::super::launcher())
}

/// The series a run's live points come in, in the order of its plan's rows: the page's legend
/// keeps this order whichever row's first point arrives first (rows run in parallel). Empty
/// for a bench (one series). `job` is the request's command line, parsed.
pub fn series_order(req: &RunRequest, job: &Job, launch: &Launcher) -> Vec<String> {
    // As the experiments name them: `ROW`, or `ROW #K` for each of several repeats.
    let with_repeats = |rows: Vec<String>| -> Vec<String> {
        if req.repeat <= 1 {
            return rows;
        }
        rows.iter()
            .flat_map(|r| (1..=req.repeat).map(move |k| format!("{r} #{k}")))
            .collect()
    };
    match req.scenario.as_str() {
        "compare" => {
            // parse_stores gives the comparison's rows, in the order it runs and reports them.
            let rows = lab::experiments::compare::parse_stores(&req.stores).unwrap_or_default();
            with_repeats(
                rows.iter()
                    .filter_map(|&i| lab::experiments::compare::STORE_ROWS.get(i))
                    .map(|r| r.0.to_string())
                    .collect(),
            )
        }
        "ipa" => with_repeats(req.configs.clone()),
        "iaa" => (launch.iaa_compare)(job)
            .and_then(|a| super::super::iaa::series(a).ok())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> RunRequest {
        RunRequest {
            scenario: "bench".into(),
            stores: Vec::new(),
            configs: Vec::new(),
            schemes: Vec::new(),
            free: Vec::new(),
            repeat: 1,
            warmup: "none".into(),
            workload: "tpcb".into(),
            storage: "native".into(),
            scale: 1,
            terminals: 2,
            duration: "2s".into(),
            preset: "noftl13".into(),
            speed: 0.0,
        }
    }

    #[test]
    fn an_iaa_request_becomes_iaa_compare_without_a_scale() {
        let iaa = RunRequest {
            scenario: "iaa".into(),
            workload: String::new(),
            scale: 0,
            schemes: vec!["conventional".into(), "iaa".into()],
            free: vec!["20%".into()],
            ..req()
        };
        let argv = iaa.argv(std::path::Path::new("d/run-2")).unwrap();
        assert_eq!(&argv[..2], ["iaa", "compare"]);
        assert!(argv.windows(2).any(|w| w == ["--warmup", "0"]), "none is 0");
        assert!(!argv.iter().any(|a| a == "--scale"));
        assert!(parse(&argv).is_ok());
        for (bad, word) in [
            (
                RunRequest {
                    warmup: "1s".into(),
                    ..iaa.clone()
                },
                "warmup: device capacities",
            ),
            (
                RunRequest {
                    schemes: vec!["lru".into()],
                    ..iaa.clone()
                },
                "schemes: ",
            ),
            (
                RunRequest {
                    free: vec!["ten".into()],
                    ..iaa.clone()
                },
                "free: ",
            ),
        ] {
            let e = bad.argv(std::path::Path::new("d")).unwrap_err();
            assert!(e.starts_with(word), "{e}");
        }
    }

    #[test]
    fn a_request_becomes_the_bench_command_line_or_a_message() {
        let argv = req().argv(std::path::Path::new("d/run-1")).unwrap();
        assert_eq!(&argv[..2], ["bench", "tpcb"]);
        assert!(argv.windows(2).any(|w| w == ["--results", "d/run-1"]));
        assert!(argv.windows(2).any(|w| w == ["--sample-window", "20ms"]));
        assert!(parse(&argv).is_ok());
        for (bad, word) in [
            (
                RunRequest {
                    workload: "tpch".into(),
                    ..req()
                },
                "workload",
            ),
            (
                RunRequest {
                    storage: "ssd".into(),
                    ..req()
                },
                "storage",
            ),
            (RunRequest { scale: 0, ..req() }, "scale"),
            (
                RunRequest {
                    terminals: 1000,
                    ..req()
                },
                "terminals",
            ),
            (
                RunRequest {
                    duration: "soon".into(),
                    ..req()
                },
                "duration",
            ),
            (
                RunRequest {
                    preset: "x".into(),
                    ..req()
                },
                "preset",
            ),
            (
                RunRequest {
                    speed: -1.0,
                    ..req()
                },
                "speed",
            ),
            // Used to panic in the run's pacing (a Duration overflowed).
            (
                RunRequest {
                    speed: 1e-300,
                    ..req()
                },
                "speed",
            ),
        ] {
            let e = bad.argv(std::path::Path::new("d")).unwrap_err();
            assert!(e.starts_with(word), "{e}");
        }
    }

    fn compare() -> RunRequest {
        RunRequest {
            scenario: "compare".into(),
            stores: vec!["native".into(), "dftl-2%".into()],
            ..req()
        }
    }

    #[test]
    fn a_comparison_becomes_the_compare_command_line_or_compares_own_message() {
        let argv = compare().argv(std::path::Path::new("d/run-2")).unwrap();
        assert_eq!(&argv[..1], ["compare"]);
        assert!(argv.windows(2).any(|w| w == ["--stores", "native,dftl-2%"]));
        assert!(argv.windows(2).any(|w| w == ["--warmup", "none"]));
        assert!(parse(&argv).is_ok(), "{argv:?}");
        let ipa = RunRequest {
            scenario: "ipa".into(),
            configs: vec!["baseline".into(), "ipa-regions".into()],
            warmup: "1s".into(),
            ..compare()
        };
        let argv = ipa.argv(std::path::Path::new("d/run-3")).unwrap();
        assert_eq!(&argv[..2], ["ipa", "compare"]);
        assert!(argv.windows(2).any(|w| w == ["--warmup", "1s"]), "{argv:?}");
        assert!(parse(&argv).is_ok(), "{argv:?}");
        for (bad, word) in [
            (
                RunRequest {
                    stores: vec!["dftl-2%".into()],
                    ..compare()
                },
                "stores: --stores must include native",
            ),
            (
                RunRequest {
                    stores: vec!["native".into(), "ssd".into()],
                    ..compare()
                },
                "stores: --stores: no store 'ssd'",
            ),
            (
                RunRequest {
                    warmup: "later".into(),
                    ..compare()
                },
                "warmup",
            ),
            (
                RunRequest {
                    repeat: 0,
                    ..compare()
                },
                "repeat",
            ),
            (
                RunRequest {
                    scenario: "ipa".into(),
                    configs: vec!["baseline".into(), "ipa-everything".into()],
                    ..compare()
                },
                "configs: 'ipa-everything'",
            ),
            (
                RunRequest {
                    scenario: "ipa".into(),
                    configs: vec!["baseline".into()],
                    warmup: "auto".into(),
                    ..compare()
                },
                "warmup",
            ),
            (
                RunRequest {
                    scenario: "sweep".into(),
                    ..compare()
                },
                "scenario",
            ),
        ] {
            let e = bad.argv(std::path::Path::new("d")).unwrap_err();
            assert!(e.starts_with(word), "{e}");
        }
    }

    #[test]
    fn warm_ups_and_lists_are_bounded_before_anything_runs() {
        for (bad, word) in [
            (
                RunRequest {
                    warmup: "100000s".into(),
                    ..compare()
                },
                "warmup: at most 600s",
            ),
            (
                RunRequest {
                    scenario: "ipa".into(),
                    configs: vec!["baseline".into()],
                    warmup: "1e9s".into(),
                    ..compare()
                },
                "warmup",
            ),
            (
                RunRequest {
                    scenario: "ipa".into(),
                    configs: vec!["baseline".into(), "baseline".into()],
                    warmup: "1s".into(),
                    ..compare()
                },
                "configs: 'baseline' twice",
            ),
            (
                RunRequest {
                    scenario: "iaa".into(),
                    schemes: vec!["conventional".into()],
                    free: vec!["20%".into(); 1000],
                    ..req()
                },
                "free, schemes: at most 20",
            ),
            (
                RunRequest {
                    scenario: "iaa".into(),
                    schemes: vec!["conventional".into()],
                    free: vec!["20%".into()],
                    warmup: "1e300".into(),
                    ..req()
                },
                "warmup: 0 to 10",
            ),
        ] {
            let e = bad.argv(std::path::Path::new("d")).unwrap_err();
            assert!(e.starts_with(word), "{e}");
        }
    }

    #[test]
    fn live_series_come_in_the_order_of_the_plans_rows() {
        let launch = super::super::super::launcher();
        let order = |r: &RunRequest| {
            let argv = r.argv(std::path::Path::new("d")).unwrap();
            series_order(r, &parse(&argv).unwrap(), &launch)
        };
        // compare runs its rows in its own order, whatever the order asked.
        let c = RunRequest {
            stores: vec!["page".into(), "native".into(), "dftl-2%".into()],
            ..compare()
        };
        assert_eq!(order(&c), ["native", "dftl-2%", "page"]);
        let twice = RunRequest { repeat: 2, ..c };
        assert_eq!(order(&twice)[..3], ["native #1", "native #2", "dftl-2% #1"]);
        let ipa = RunRequest {
            scenario: "ipa".into(),
            configs: vec!["ipa-regions".into(), "baseline".into()],
            warmup: "1s".into(),
            ..compare()
        };
        assert_eq!(order(&ipa), ["ipa-regions", "baseline"]);
        let iaa = RunRequest {
            scenario: "iaa".into(),
            workload: String::new(),
            scale: 0,
            schemes: vec!["conventional".into(), "iaa+u2di".into()],
            free: vec!["40%".into(), "20%".into()],
            warmup: "0".into(),
            ..req()
        };
        assert_eq!(
            order(&iaa),
            [
                "40% conventional",
                "40% iaa+u2di",
                "20% conventional",
                "20% iaa+u2di"
            ]
        );
        assert!(order(&req()).is_empty(), "a bench is one series");
    }
}
