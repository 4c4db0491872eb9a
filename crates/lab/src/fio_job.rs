//! fio job files for `noftl io --job FILE.fio`: the common subset of fio's syntax, read into an
//! `io` experiment. Anything outside the subset is refused with the option, its section and its
//! line named, before any work, so a job never silently means something else here.
//!
//! The syntax is fio's: `[section]` headers, `key=value` or a bare `key` (a flag), `;` and `#`
//! comments; `[global]` gives every job its options, a job's own override them. One job
//! section per file (fio's `numjobs=N` runs N clones of it; several different jobs would run at
//! once in fio, which one `io` run does not model).
//!
//! Supported: `rw`/`readwrite` (read, write, randread, randwrite, randrw, randtrim), `bs`/
//! `blocksize`, `size`, `offset`, `iodepth`, `numjobs`, `random_distribution` (random,
//! zipf:THETA, pareto:H, normal:DEV), `rwmixread`/`rwmixwrite`, `runtime`, `ramp_time`,
//! `time_based`, `number_ios`, `randseed`; and, since they change nothing the emulated device
//! sees, `name`, `description`, `ioengine`, `filename`, `direct=1`, `thread` and
//! `group_reporting` (one job's figures are reported as one group anyway).
//!
//! Sizes take fio's suffixes (k, m, g, t, with or without `i`/`b`: powers of 1024, fio's
//! default `kb_base`); times are seconds unless they carry a unit (fio's default for `runtime`
//! and `ramp_time`).

use std::fmt;

use crate::distribution::Distribution;
use crate::experiments::io::{JobInfo, Spec};

/// A job file's workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// The job section's name.
    pub name: String,
    /// Our pattern's name (fio's `randtrim` is `trim`).
    pub rw: String,
    pub bs_bytes: u64,
    /// The region's length and the bytes each job transfers (None: the device from `offset`).
    pub size_bytes: Option<u64>,
    pub offset_bytes: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    pub distribution: Distribution,
    pub rwmixread_percent: u32,
    pub runtime_ns: Option<u64>,
    pub ramp_ns: u64,
    pub time_based: bool,
    pub number_ios: Option<u64>,
    pub randseed: Option<u64>,
    /// Every option as written (`[global]` first, then the job's; `readwrite` as `rw`).
    pub options: Vec<(String, String)>,
}

/// Why a job file was refused: its line (from 1; 0 for the file as a whole) and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for JobError {}

const SUPPORTED: &str = "rw, bs, size, offset, iodepth, numjobs, random_distribution, \
                         rwmixread, rwmixwrite, runtime, ramp_time, time_based, number_ios, \
                         randseed (and name, description, ioengine, filename, direct=1, thread, \
                         group_reporting)";

/// One `key[=value]` of a section, with its line.
#[derive(Clone, Debug)]
struct Opt {
    key: String,
    value: Option<String>,
    line: usize,
}

/// Parses a job file.
pub fn parse(text: &str) -> Result<Job, JobError> {
    let mut sections: Vec<(String, usize, Vec<Opt>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with(';') || l.starts_with('#') {
            continue;
        }
        if let Some(name) = l.strip_prefix('[') {
            let name = name.strip_suffix(']').ok_or_else(|| JobError {
                line,
                message: format!("{l:?} is not a section header ([name])"),
            })?;
            sections.push((name.trim().to_string(), line, Vec::new()));
            continue;
        }
        let Some(sec) = sections.last_mut() else {
            return Err(JobError {
                line,
                message: format!("{l:?} is outside any [section]"),
            });
        };
        let (key, value) = match l.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (l, None),
        };
        sec.2.push(Opt {
            key: key.to_ascii_lowercase(),
            value,
            line,
        });
    }
    let global: Vec<Opt> = sections
        .iter()
        .filter(|s| s.0 == "global")
        .flat_map(|s| s.2.clone())
        .collect();
    let jobs: Vec<&(String, usize, Vec<Opt>)> =
        sections.iter().filter(|s| s.0 != "global").collect();
    let job = match jobs.as_slice() {
        [j] => j,
        [] => {
            return Err(JobError {
                line: 0,
                message: "no job section (only [global], or nothing)".into(),
            })
        }
        [_, second, ..] => {
            return Err(JobError {
                line: second.1,
                message: format!(
                    "{} job sections: one io run is one job (numjobs=N runs N clones of it)",
                    jobs.len()
                ),
            })
        }
    };
    let mut j = Job {
        name: job.0.clone(),
        rw: "read".into(),
        bs_bytes: 4096,
        size_bytes: None,
        offset_bytes: 0,
        iodepth: 1,
        numjobs: 1,
        distribution: Distribution::Uniform,
        rwmixread_percent: 50,
        runtime_ns: None,
        ramp_ns: 0,
        time_based: false,
        number_ios: None,
        randseed: None,
        options: Vec::new(),
    };
    for o in global.iter().chain(&job.2) {
        apply(&mut j, o)?;
    }
    if j.time_based && j.runtime_ns.is_none() {
        return Err(JobError {
            line: 0,
            message: "time_based needs a runtime".into(),
        });
    }
    Ok(j)
}

/// Sets one option of `j`.
fn apply(j: &mut Job, o: &Opt) -> Result<(), JobError> {
    let err = |message: String| JobError {
        line: o.line,
        message,
    };
    let value = || {
        o.value
            .clone()
            .ok_or_else(|| err(format!("{} needs a value ({}=...)", o.key, o.key)))
    };
    let size = |what: &str| -> Result<u64, JobError> {
        let v = value()?;
        if v.ends_with('%') {
            return Err(err(format!(
                "{what}={v}: percentages of the device are not supported; give bytes (e.g. 64m)"
            )));
        }
        crate::units::parse_size(&v).map_err(|e| err(format!("{what}: {e}")))
    };
    let count = |what: &str| -> Result<u64, JobError> {
        let v = value()?;
        v.parse::<u64>()
            .map_err(|_| err(format!("{what}={v} is not a whole number")))
    };
    let time = |what: &str| -> Result<u64, JobError> {
        let v = value()?;
        if v.trim() == "0" {
            return Ok(0);
        }
        crate::units::parse_duration_ns(&v).map_err(|e| err(format!("{what}: {e:#}")))
    };
    let mut key = o.key.as_str();
    match key {
        "rw" | "readwrite" => {
            key = "rw";
            let v = value()?;
            j.rw = match v.as_str() {
                "read" | "write" | "randread" | "randwrite" | "randrw" => v.clone(),
                "randtrim" => "trim".into(),
                other => {
                    return Err(err(format!(
                        "rw={other} is not supported (read, write, randread, randwrite, randrw, \
                         randtrim are)"
                    )))
                }
            };
        }
        "bs" | "blocksize" => {
            key = "bs";
            let v = value()?;
            if v.contains(',') || v.contains(':') {
                return Err(err(format!(
                    "bs={v}: per-direction block sizes are not supported; give one size"
                )));
            }
            j.bs_bytes = size("bs")?;
        }
        "size" => j.size_bytes = Some(size("size")?),
        "offset" => j.offset_bytes = size("offset")?,
        "iodepth" => {
            j.iodepth =
                u32::try_from(count("iodepth")?).map_err(|_| err("iodepth is too large".into()))?
        }
        "numjobs" => {
            j.numjobs =
                u32::try_from(count("numjobs")?).map_err(|_| err("numjobs is too large".into()))?
        }
        "random_distribution" => {
            j.distribution = value()?.parse().map_err(err)?;
        }
        "rwmixread" | "rwmixwrite" => {
            let p = count(key)?;
            if p > 100 {
                return Err(err(format!("{key}={p} is a percentage (0..100)")));
            }
            j.rwmixread_percent = if key == "rwmixread" { p } else { 100 - p } as u32;
        }
        "runtime" => j.runtime_ns = Some(time("runtime")?).filter(|&t| t > 0),
        "ramp_time" => j.ramp_ns = time("ramp_time")?,
        "time_based" => j.time_based = o.value.as_deref().is_none_or(|v| v != "0"),
        "number_ios" => j.number_ios = Some(count("number_ios")?),
        "randseed" => j.randseed = Some(count("randseed")?),
        "direct" => {
            if value()? != "1" {
                return Err(err(
                    "direct=0 (buffered I/O) is not supported: the emulated device has no page \
                     cache in front of it"
                        .into(),
                ));
            }
        }
        "name" | "description" | "ioengine" | "filename" | "thread" | "group_reporting" => {}
        other => {
            return Err(err(format!(
                "fio option `{other}` is not supported (supported: {SUPPORTED})"
            )))
        }
    }
    j.options.retain(|(k, _)| k != key);
    j.options
        .push((key.to_string(), o.value.clone().unwrap_or_default()));
    Ok(())
}

impl Job {
    /// The `io` experiment of this job on `base`'s target, device and flags that a job file does
    /// not set (precondition, clock, seed unless `randseed`).
    pub fn apply_to(&self, base: &Spec) -> Result<Spec, JobError> {
        let whole = |what: &str, v: u64| {
            if v.is_multiple_of(self.bs_bytes) {
                Ok(v / self.bs_bytes)
            } else {
                Err(JobError {
                    line: 0,
                    message: format!("{what} {v} is not a multiple of bs {}", self.bs_bytes),
                })
            }
        };
        // Requests per job: number_ios, else the region once (fio's size); with time_based
        // only time ends the run.
        let per_job = match (self.time_based, self.number_ios, self.size_bytes) {
            (true, _, _) => None,
            (false, Some(n), _) => Some(n),
            (false, None, Some(size)) => Some(whole("size", size)?),
            (false, None, None) if self.runtime_ns.is_some() => None,
            (false, None, None) => {
                return Err(JobError {
                    line: 0,
                    message: "size= is needed (the region each job covers and the bytes it \
                              transfers), or number_ios=, or time_based with runtime="
                        .into(),
                })
            }
        };
        if self.bs_bytes == 0 || self.iodepth == 0 || self.numjobs == 0 {
            return Err(JobError {
                line: 0,
                message: "bs, iodepth and numjobs must be at least 1".into(),
            });
        }
        let mut s = base.clone();
        s.rw = Some(self.rw.clone());
        s.bs_bytes = self.bs_bytes;
        s.qd = self.iodepth;
        s.numjobs = self.numjobs;
        s.ops = per_job.map(|n| n.saturating_mul(u64::from(self.numjobs)));
        s.io_bytes = None;
        s.distribution = self.distribution;
        s.rwmixread_percent = self.rwmixread_percent;
        s.offset_bytes = self.offset_bytes;
        s.region_bytes = self.size_bytes;
        s.runtime_ns = self.runtime_ns;
        s.ramp_ns = self.ramp_ns;
        if let Some(seed) = self.randseed {
            s.seed = seed;
        }
        s.job = Some(JobInfo {
            name: self.name.clone(),
            options: self.options.clone(),
        });
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_file_becomes_an_io_run() {
        let j = parse(
            "; a comment\n[global]\nbs=16k\niodepth=4\n\n[hot]\nrw=randwrite\nsize=64m\n\
             random_distribution=zipf:1.2\nnumjobs=2\nramp_time=1\nruntime=500ms\n\
             ioengine=libaio\ndirect=1\n",
        )
        .unwrap();
        assert_eq!(j.name, "hot");
        assert_eq!(j.bs_bytes, 16384);
        assert_eq!(j.size_bytes, Some(64 << 20));
        assert_eq!(j.distribution, Distribution::Zipf { theta: 1.2 });
        assert_eq!(j.ramp_ns, 1_000_000_000);
        assert_eq!(j.runtime_ns, Some(500_000_000));
        let s = j.apply_to(&Spec::default()).unwrap();
        assert_eq!(s.qd, 4);
        assert_eq!(
            s.ops,
            Some(2 * 4096),
            "each of 2 jobs writes 64 MiB in 16 KiB"
        );
        assert_eq!(s.region_bytes, Some(64 << 20));
        assert_eq!(
            s.job.unwrap().options[0],
            ("bs".to_string(), "16k".to_string())
        );
    }

    #[test]
    fn what_is_not_supported_is_named() {
        for (text, line, says) in [
            (
                "[a]\nrw=randwrite\nsize=1m\nverify=md5\n",
                4,
                "fio option `verify`",
            ),
            ("[a]\nrw=readwrite\n", 2, "rw=readwrite is not supported"),
            ("[a]\nsize=10%\n", 2, "percentages"),
            ("[a]\nrw=read\n[b]\nrw=write\n", 3, "2 job sections"),
            (
                "[a]\nrandom_distribution=zoned:60/10:40/90\n",
                2,
                "not supported",
            ),
            ("rw=read\n", 1, "outside any [section]"),
            ("[a]\ndirect=0\n", 2, "page cache"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
        let e = parse("[a]\nrw=write\n")
            .unwrap()
            .apply_to(&Spec::default())
            .unwrap_err();
        assert!(e.message.contains("size= is needed"), "{e}");
        assert!(parse("[a]\ntime_based\n")
            .unwrap_err()
            .message
            .contains("runtime"));
    }
}
