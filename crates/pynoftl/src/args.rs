//! Keyword arguments to the lab's specs: each experiment's keywords are its CLI flags with `_`
//! for `-` (`page_size='8KiB'`, `accounts_per_branch=5000`), applied over the lab's defaults
//! (the CLI's, `Spec::default()`), each value parsed by the lab's own parsers (sizes, shares,
//! region options), so that Python and the CLI accept and refuse the same inputs with the same
//! messages. Plain Rust on `serde_json::Value`s: tested without Python.

use std::path::PathBuf;

use lab::experiments::{bench, compare, crashtest, io};
use serde_json::Value;

/// Bad input: refused before any work, with the message to show (a Python `ValueError`).
#[derive(Debug, Clone, PartialEq)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Kwargs = Vec<(String, Value)>;

fn bad<T>(msg: impl Into<String>) -> Result<T, BadInput> {
    Err(BadInput(msg.into()))
}

fn text(key: &str, v: &Value) -> Result<String, BadInput> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => bad(format!("{key} takes a string, not {other}")),
    }
}

fn unsigned(key: &str, v: &Value) -> Result<u64, BadInput> {
    match v.as_u64() {
        Some(n) => Ok(n),
        None => bad(format!("{key} takes a whole number of at least 0, not {v}")),
    }
}

fn u32_of(key: &str, v: &Value) -> Result<u32, BadInput> {
    let n = unsigned(key, v)?;
    u32::try_from(n).or_else(|_| bad(format!("{key} is at most {}, not {n}", u32::MAX)))
}

fn flag(key: &str, v: &Value) -> Result<bool, BadInput> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => bad(format!("{key} takes True or False, not {other}")),
    }
}

/// A size: bytes as a number, or the CLI's text (`'1GiB'`, `'16KiB'`).
fn size(key: &str, v: &Value) -> Result<u64, BadInput> {
    match v {
        Value::String(s) => lab::units::parse_size(s).or_else(|e| bad(format!("{key}: {e}"))),
        _ => unsigned(key, v),
    }
}

/// A share: a fraction as a number (0.02), or the CLI's text (`'2%'`).
fn share(key: &str, v: &Value) -> Result<f64, BadInput> {
    match v {
        Value::String(s) => lab::units::parse_percent(s).or_else(|e| bad(format!("{key}: {e}"))),
        Value::Number(n) => match n.as_f64() {
            Some(x) if (0.0..1.0).contains(&x) => Ok(x),
            _ => bad(format!(
                "{key} takes a fraction in [0, 1) or a percentage such as '2%', not {n}"
            )),
        },
        other => bad(format!(
            "{key} takes a fraction or a percentage such as '2%', not {other}"
        )),
    }
}

/// A duration in the CLI's text (`'300ms'`, `'10s'`), checked now.
fn duration(key: &str, v: &Value) -> Result<String, BadInput> {
    let s = match v {
        Value::String(s) => s.clone(),
        other => {
            return bad(format!(
                "{key} takes a duration such as '300ms' or '10s', not {other}"
            ))
        }
    };
    lab::units::parse_duration_ns(&s).or_else(|e| bad(format!("{key}: {e}")))?;
    Ok(s)
}

/// A list of names: a Python list of strings, or the CLI's comma-separated text.
fn names(key: &str, v: &Value) -> Result<Vec<String>, BadInput> {
    match v {
        Value::String(s) => Ok(s.split(',').map(|x| x.trim().to_string()).collect()),
        Value::Array(a) => a.iter().map(|x| text(key, x)).collect(),
        other => bad(format!(
            "{key} takes a list of names or a comma-separated string, not {other}"
        )),
    }
}

fn parsed<T, E: std::fmt::Display>(
    key: &str,
    v: &Value,
    f: impl Fn(&str) -> Result<T, E>,
) -> Result<T, BadInput> {
    f(&text(key, v)?).or_else(|e| bad(format!("{key}: {e}")))
}

/// `None` from Python leaves the default; anything else is the key's value.
fn given(kwargs: &Kwargs) -> impl Iterator<Item = (&str, &Value)> {
    kwargs
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.as_str(), v))
}

fn unknown<T>(what: &str, key: &str, keys: &[&str]) -> Result<T, BadInput> {
    bad(format!(
        "{what}() got an unknown argument '{key}' (it takes {})",
        keys.join(", ")
    ))
}

/// The device keywords every experiment shares (the CLI's `--preset/--config/--set`).
fn device(spec: &mut lab::device::DeviceSpec, key: &str, v: &Value) -> Result<bool, BadInput> {
    match key {
        "preset" => spec.preset = text(key, v)?,
        "config" => spec.config = Some(PathBuf::from(text(key, v)?)),
        "set" => spec.set = names(key, v)?,
        _ => return Ok(false),
    }
    Ok(true)
}

pub const COMPARE_KEYS: [&str; 30] = [
    "workload",
    "quick",
    "scale",
    "sf",
    "repeat",
    "duration",
    "warmup",
    "terminals",
    "op",
    "log_region",
    "buffer",
    "page_size",
    "read_ahead",
    "flash",
    "cpu",
    "log_device",
    "preset",
    "config",
    "set",
    "accounts_per_branch",
    "tpcc_reduced",
    "seed",
    "stores",
    "jobs",
    "paper",
    "home_warehouse",
    "load",
    "results",
    "sample_window",
    "raw",
];

/// `noftl.compare(...)`'s spec: `quick=True` starts from `compare::Spec::quick` (seconds, not
/// the paper's set-up), every other keyword overrides.
pub fn compare_spec(kwargs: &Kwargs) -> Result<compare::Spec, BadInput> {
    let workload = match kwargs.iter().find(|(k, _)| k == "workload") {
        Some((k, v)) if !v.is_null() => text(k, v)?,
        _ => "tpcb".into(),
    };
    let quick = match kwargs.iter().find(|(k, _)| k == "quick") {
        Some((k, v)) if !v.is_null() => flag(k, v)?,
        _ => false,
    };
    let mut s = if quick {
        compare::Spec::quick(&workload)
    } else {
        compare::Spec {
            workload,
            ..compare::Spec::default()
        }
    };
    for (k, v) in given(kwargs) {
        match k {
            "workload" | "quick" => {}
            "scale" => s.scale = Some(u32_of(k, v)?),
            "sf" => {
                s.sf = Some(
                    v.as_f64()
                        .map_or_else(|| bad(format!("sf takes a number, not {v}")), Ok)?,
                )
            }
            "repeat" => s.repeat = u32_of(k, v)?,
            "duration" => s.duration = Some(duration(k, v)?),
            "warmup" => s.warmup = text(k, v)?,
            "terminals" => s.terminals = u32_of(k, v)?,
            "op" => s.op = share(k, v)?,
            "log_region" => s.log_region = Some(parsed(k, v, lab::stores::parse_log_region)?),
            "buffer" => {
                s.buffer = match v {
                    Value::Number(_) => compare::BufferSize::Share(share(k, v)?),
                    _ => parsed(k, v, str::parse::<compare::BufferSize>)?,
                }
            }
            "page_size" => s.page_bytes = usize::try_from(size(k, v)?).unwrap_or(usize::MAX),
            "read_ahead" => s.read_ahead_pages = Some(unsigned(k, v)? as usize),
            "flash" => s.flash_bytes = Some(size(k, v)?),
            "cpu" => s.cpu = text(k, v)?,
            "log_device" => s.log_device = parsed(k, v, str::parse::<compare::LogDevice>)?,
            "accounts_per_branch" => s.accounts_per_branch = u32_of(k, v)?,
            "tpcc_reduced" => match v {
                Value::Array(a) if a.len() == 2 => {
                    s.tpcc_reduced = Some(vec![u32_of(k, &a[0])?, u32_of(k, &a[1])?]);
                }
                _ => return bad(format!("tpcc_reduced takes [items, customers], not {v}")),
            },
            "seed" => s.seed = unsigned(k, v)?,
            "stores" | "store" => s.stores = Some(names(k, v)?),
            "jobs" => s.jobs = unsigned(k, v)?.max(1) as usize,
            "paper" => s.paper = flag(k, v)?,
            "home_warehouse" => s.home_warehouse = Some(text(k, v)?),
            "load" => s.load = Some(parsed(k, v, str::parse::<kits::LoadMethod>)?),
            "results" => s.results = Some(PathBuf::from(text(k, v)?)),
            "sample_window" => s.sample_window = duration(k, v)?,
            "raw" => s.raw = flag(k, v)?,
            _ if device(&mut s.device, k, v)? => {}
            _ => return unknown("compare", k, &COMPARE_KEYS),
        }
    }
    Ok(s)
}

pub const BENCH_KEYS: [&str; 21] = [
    "workload",
    "store",
    "preset",
    "config",
    "set",
    "scale",
    "accounts_per_branch",
    "terminals",
    "txns",
    "duration",
    "buffer_pages",
    "page_size",
    "seed",
    "check",
    "load",
    "precondition",
    "round",
    "max_rounds",
    "results",
    "sample_window",
    "raw",
];

/// `noftl.bench(...)`'s workload (tpcb or tatp) and spec; `txns` or `duration` is needed, as
/// on the command line.
pub fn bench_spec(kwargs: &Kwargs) -> Result<(String, bench::Spec), BadInput> {
    let mut workload = "tpcb".to_string();
    let mut s = bench::Spec::default();
    for (k, v) in given(kwargs) {
        match k {
            "workload" => workload = text(k, v)?,
            "store" | "storage" => s.storage = text(k, v)?,
            "scale" => s.scale = u32_of(k, v)?,
            "accounts_per_branch" => s.accounts_per_branch = u32_of(k, v)?,
            "terminals" => s.terminals = u32_of(k, v)?,
            "txns" => s.txns = Some(unsigned(k, v)?),
            "duration" => s.duration = Some(duration(k, v)?),
            "buffer_pages" => s.buffer_pages = Some(unsigned(k, v)? as usize),
            "page_size" => s.page_size = usize::try_from(size(k, v)?).unwrap_or(usize::MAX),
            "seed" => s.seed = unsigned(k, v)?,
            "check" => s.check = flag(k, v)?,
            "load" => s.load = Some(parsed(k, v, str::parse::<kits::LoadMethod>)?),
            "precondition" => {
                s.precondition_device_writes = v.as_f64().map_or_else(
                    || {
                        bad(format!(
                            "precondition takes a number of device writes, not {v}"
                        ))
                    },
                    Ok,
                )?;
            }
            "round" => s.round = duration(k, v)?,
            "max_rounds" => s.max_rounds = u32_of(k, v)?,
            "results" => s.results = Some(PathBuf::from(text(k, v)?)),
            "sample_window" => s.sample_window = duration(k, v)?,
            "raw" => s.raw = flag(k, v)?,
            _ if device(&mut s.device, k, v)? => {}
            _ => return unknown("bench", k, &BENCH_KEYS),
        }
    }
    if !matches!(workload.as_str(), "tpcb" | "tatp") {
        return bad(format!(
            "bench() runs workload 'tpcb' or 'tatp' (the CLI's `noftl bench tpcc|tpch` are not in the Python package yet), not '{workload}'"
        ));
    }
    Ok((workload, s))
}

pub const IO_KEYS: [&str; 13] = [
    "target",
    "preset",
    "config",
    "set",
    "rw",
    "bs",
    "qd",
    "ops",
    "io_bytes",
    "seed",
    "precondition",
    "rwmixread",
    "numjobs",
];

/// `noftl.io(...)`'s spec, over `io::Spec::default()` (the CLI's defaults).
pub fn io_spec(kwargs: &Kwargs) -> Result<io::Spec, BadInput> {
    let mut s = io::Spec::default();
    for (k, v) in given(kwargs) {
        match k {
            "target" | "store" => s.target.target = text(k, v)?,
            "rw" => s.rw = Some(text(k, v)?),
            "bs" => s.bs_bytes = size(k, v)?,
            "qd" => s.qd = u32_of(k, v)?,
            "ops" => s.ops = Some(unsigned(k, v)?),
            "io_bytes" => s.io_bytes = Some(size(k, v)?),
            "seed" => s.seed = unsigned(k, v)?,
            "precondition" => s.precondition = flag(k, v)?,
            "rwmixread" => s.rwmixread_percent = u32_of(k, v)?,
            "numjobs" => s.numjobs = u32_of(k, v)?,
            _ if device(&mut s.target.device, k, v)? => {}
            _ => return unknown("io", k, &IO_KEYS),
        }
    }
    Ok(s)
}

pub const CRASHTEST_KEYS: [&str; 13] = [
    "workload",
    "store",
    "cache",
    "seeds",
    "first_seed",
    "fault",
    "page_size",
    "torn",
    "recovery_crash",
    "terminals",
    "txns",
    "log_region",
    "set",
];

/// `noftl.crashtest(...)`'s spec, over `crashtest::Spec::default()` (the crash test's own
/// device; `set` overrides its settings).
pub fn crashtest_spec(kwargs: &Kwargs) -> Result<crashtest::Spec, BadInput> {
    let mut s = crashtest::Spec::default();
    for (k, v) in given(kwargs) {
        match k {
            "workload" => s.workload = text(k, v)?,
            "store" | "storage" => s.storage = text(k, v)?,
            "cache" => s.cache = share(k, v)?,
            "seeds" => s.seeds = unsigned(k, v)?,
            "first_seed" => s.first_seed = unsigned(k, v)?,
            "fault" => s.fault = text(k, v)?,
            "page_size" => s.page_size = usize::try_from(size(k, v)?).unwrap_or(usize::MAX),
            "torn" => s.torn = flag(k, v)?,
            "recovery_crash" => s.recovery_crash = flag(k, v)?,
            "terminals" => s.terminals = Some(u32_of(k, v)?),
            "txns" => s.txns = Some(unsigned(k, v)?),
            "log_region" => s.log_region = Some(parsed(k, v, lab::stores::parse_log_region)?),
            "set" => s.device = crashtest::Device::Own(names(k, v)?),
            _ => return unknown("crashtest", k, &CRASHTEST_KEYS),
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kw(pairs: &[(&str, Value)]) -> Kwargs {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn quick_is_the_lab_preset_and_keywords_override_it() {
        let s = compare_spec(&kw(&[
            ("quick", Value::Bool(true)),
            ("repeat", Value::from(1)),
            ("stores", Value::from("native,page")),
            ("op", Value::from("5%")),
            ("page_size", Value::from("8KiB")),
        ]))
        .unwrap();
        let q = compare::Spec::quick("tpcb");
        assert_eq!(s.accounts_per_branch, q.accounts_per_branch);
        assert_eq!(s.duration, q.duration);
        assert_eq!(s.repeat, 1);
        assert_eq!(s.stores, Some(vec!["native".into(), "page".into()]));
        assert!((s.op - 0.05).abs() < 1e-12);
        assert_eq!(s.page_bytes, 8192);
    }

    #[test]
    fn no_keywords_give_the_lab_defaults() {
        let s = compare_spec(&Vec::new()).unwrap();
        assert_eq!(format!("{s:?}"), format!("{:?}", compare::Spec::default()));
        let c = crashtest_spec(&Vec::new()).unwrap();
        assert_eq!(
            format!("{c:?}"),
            format!("{:?}", crashtest::Spec::default())
        );
    }

    #[test]
    fn bad_keywords_are_refused_with_a_message() {
        let e = compare_spec(&kw(&[("colour", Value::from("red"))])).unwrap_err();
        assert!(e.0.contains("unknown argument 'colour'"), "{e}");
        let e = compare_spec(&kw(&[("duration", Value::from("soon"))])).unwrap_err();
        assert!(e.0.starts_with("duration:"), "{e}");
        let e = bench_spec(&kw(&[("workload", Value::from("ycsb"))])).unwrap_err();
        assert!(e.0.contains("'tpcb' or 'tatp'"), "{e}");
        let e = io_spec(&kw(&[("bs", Value::from(-1))])).unwrap_err();
        assert!(e.0.contains("bs takes a whole number"), "{e}");
    }
}
