//! TPC-H as a [`Workload`] for loading and sizing: the eight tables in bulk. It runs queries,
//! not terminals (`kits::tpch::query`), so it makes none.

use anyhow::bail;
use kits::tpch::{self, TpchConfig};
use kits::LoadMethod;
use storage::Engine;

use crate::workload::{Loaded, Workload, WorkloadTerminal};

/// TPC-H at a scale factor.
#[derive(Clone, Copy, Debug)]
pub struct Tpch(pub TpchConfig);

impl Workload for Tpch {
    fn name(&self) -> &'static str {
        "tpch"
    }
    fn label(&self) -> &'static str {
        "TPC-H"
    }
    fn load_method(&self, asked: Option<LoadMethod>) -> anyhow::Result<LoadMethod> {
        match asked {
            Some(LoadMethod::Rows) => {
                bail!("TPC-H loads in bulk; --load rows is TPC-B's and TPC-C's")
            }
            m => Ok(m.unwrap_or_default()),
        }
    }
    fn txn_types(&self) -> Vec<&'static str> {
        vec!["query"]
    }
    fn db_pages_estimate(&self) -> u64 {
        self.0.db_pages_estimate(4096)
    }
    fn rows_estimate(&self) -> u64 {
        self.0.rows()
    }
    fn load(
        &self,
        e: &mut Engine,
        _method: LoadMethod,
        progress: &dyn Fn(u64),
    ) -> anyhow::Result<Loaded> {
        Ok(Box::new(tpch::load(e, self.0, progress)?.0))
    }
    fn terminals(
        &self,
        _loaded: &Loaded,
        _n: u32,
        _seed: u64,
    ) -> anyhow::Result<Vec<Box<dyn WorkloadTerminal>>> {
        bail!("TPC-H runs queries, not terminals (kits::tpch::query)")
    }
}
