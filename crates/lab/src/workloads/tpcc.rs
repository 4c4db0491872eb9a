//! TPC-C as a [`Workload`]: nine tables, the five transactions (45/43/4/4/4); NOTPM.
//!
//! Invariant: every load holds the same population (a fixed load seed), and the run's NURand
//! constants derive from the load's per clause 2.1.6.1, so the same run seed gives the same
//! inputs on every store.

use kits::tpcc::{self, HomeWarehouse, NurandConsts, TpccConfig, TpccTerminal};
use kits::LoadMethod;
use storage::Engine;

use crate::workload::{handles, Loaded, Registration, Workload, WorkloadTerminal};

/// The load's seed: fixed, so that every row and repeat holds the same database.
const LOAD_SEED: u64 = 0x7C;

/// TPC-C at a configuration.
#[derive(Clone, Copy, Debug)]
pub struct Tpcc(pub TpccConfig);

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }
    fn label(&self) -> &'static str {
        "TPC-C"
    }
    fn txn_types(&self) -> Vec<&'static str> {
        kits::tpcc::input::Kind::ALL
            .iter()
            .map(|k| k.name())
            .collect()
    }
    fn db_pages_estimate(&self) -> u64 {
        self.0.db_pages_estimate(4096)
    }
    fn rows_estimate(&self) -> u64 {
        self.0.rows_estimate()
    }
    fn load(
        &self,
        e: &mut Engine,
        method: LoadMethod,
        progress: &dyn Fn(u64),
    ) -> anyhow::Result<Loaded> {
        Ok(Box::new(tpcc::load_using(
            e,
            self.0,
            tpcc::DDL,
            LOAD_SEED,
            method,
            progress,
        )?))
    }
    fn terminals(
        &self,
        loaded: &Loaded,
        n: u32,
        seed: u64,
    ) -> anyhow::Result<Vec<Box<dyn WorkloadTerminal>>> {
        let l = handles::<tpcc::load::Loaded>(loaded, self.label())?;
        let run_c = NurandConsts::run_from(l.c_load, seed);
        Ok((0..n)
            .map(|i| {
                Box::new(TpccTerminal::new(i, l.h, self.0, run_c, seed, None))
                    as Box<dyn WorkloadTerminal>
            })
            .collect())
    }
    fn home_warehouse(&self) -> Option<HomeWarehouse> {
        Some(self.0.home_warehouse)
    }
    fn counts_new_orders(&self) -> bool {
        true
    }
}

crate::kit_terminal!(
    TpccTerminal,
    counted: |t| t.committed(),
    new_orders: |t| t.counts.committed[0] + t.counts.rolled_back
);

/// The registry's entry.
pub const REGISTRATION: Registration = Registration {
    name: "tpcc",
    about: "TPC-C: nine tables, five transactions, NOTPM (scale: warehouses)",
    default_scale: 1,
    make: |scale, p| {
        let mut c = match p.tpcc_reduced {
            Some((items, customers)) => TpccConfig::reduced(scale, items, customers),
            None => TpccConfig::spec(scale),
        };
        c.home_warehouse = HomeWarehouse::parse(p.home_warehouse.as_deref().unwrap_or("random"))?;
        c.validate()?;
        Ok(Box::new(Tpcc(c)))
    },
};
