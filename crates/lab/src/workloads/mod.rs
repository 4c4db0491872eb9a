//! The workloads, each one file implementing [`Workload`](crate::workload::Workload), and the
//! registry that makes them by name from plain parameters.

pub mod tatp;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;

use anyhow::bail;

use crate::workload::Workload;

/// What a workload is made from: the parameters an experiment gives every workload, the
/// scale in the workload's own unit (branches, subscribers, warehouses) and the few knobs
/// only some workloads read.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// None: the workload's default scale.
    pub scale: Option<u32>,
    /// The population's seed (TATP); run seeds are the runner's.
    pub seed: u64,
    /// TPC-B: accounts per branch (the specification's 100,000).
    pub accounts_per_branch: u32,
    /// TPC-C: a REDUCED population (items, customers per district), for tests.
    pub tpcc_reduced: Option<(u32, u32)>,
    /// TPC-C: how a terminal picks its home warehouse (`fixed` or `random`; None: random).
    pub home_warehouse: Option<String>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            scale: None,
            seed: 1,
            accounts_per_branch: 100_000,
            tpcc_reduced: None,
            home_warehouse: None,
        }
    }
}

/// One registered workload: its name and how to make it.
#[derive(Debug)]
pub struct Registration {
    pub name: &'static str,
    /// One line for listings and help.
    pub about: &'static str,
    /// The scale when none is given.
    pub default_scale: u32,
    /// Makes the workload at `scale` from the parameters.
    pub make: fn(scale: u32, p: &Params) -> anyhow::Result<Box<dyn Workload>>,
}

/// Every workload the experiments can run by name. Adding one: a file in this folder and one
/// line here.
pub const REGISTRY: &[Registration] = &[tpcb::REGISTRATION, tatp::REGISTRATION, tpcc::REGISTRATION];

/// The workload `name` made from `p`, and its scale.
pub fn make(name: &str, p: &Params) -> anyhow::Result<(Box<dyn Workload>, u32)> {
    make_from(REGISTRY, name, p)
}

/// `make` over any registry (tests register their own workloads).
pub fn make_from(
    registry: &[Registration],
    name: &str,
    p: &Params,
) -> anyhow::Result<(Box<dyn Workload>, u32)> {
    let Some(r) = registry.iter().find(|r| r.name == name) else {
        let names: Vec<&str> = registry.iter().map(|r| r.name).collect();
        bail!("no workload '{name}' (there are {})", names.join(", "));
    };
    if p.home_warehouse.is_some() && name != "tpcc" {
        bail!("--home-warehouse is TPC-C's (--workload tpcc)");
    }
    let scale = p.scale.unwrap_or(r.default_scale);
    Ok(((r.make)(scale, p)?, scale))
}
