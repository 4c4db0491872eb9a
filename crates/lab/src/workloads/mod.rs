//! The workloads, each one file implementing [`Workload`](crate::workload::Workload), and the
//! registry that makes them by name from plain parameters.

pub mod tatp;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;

use anyhow::bail;

use crate::workload::{Params, Registration, Workload};

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
