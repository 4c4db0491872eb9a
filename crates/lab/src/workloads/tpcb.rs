//! TPC-B as a [`Workload`]: branches, tellers, accounts, history; the one transaction.

use kits::tpcb::{self, TpcbConfig, TpcbTerminal};
use kits::LoadMethod;
use storage::Engine;

use crate::workload::{handles, Loaded, Registration, Workload, WorkloadTerminal};

/// TPC-B at a configuration.
#[derive(Clone, Copy, Debug)]
pub struct Tpcb(pub TpcbConfig);

impl Workload for Tpcb {
    fn name(&self) -> &'static str {
        "tpcb"
    }
    fn label(&self) -> &'static str {
        "TPC-B"
    }
    fn txn_types(&self) -> Vec<&'static str> {
        vec!["tpcb"]
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
        method: LoadMethod,
        progress: &dyn Fn(u64),
    ) -> anyhow::Result<Loaded> {
        Ok(Box::new(tpcb::load_using(
            e,
            self.0,
            tpcb::DDL,
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
        let h = *handles::<tpcb::Handles>(loaded, self.label())?;
        Ok((0..n)
            .map(|i| {
                Box::new(TpcbTerminal::new(i, h, self.0, seed, None)) as Box<dyn WorkloadTerminal>
            })
            .collect())
    }
}

crate::kit_terminal!(TpcbTerminal, counted: |t| t.committed);

/// The registry's entry.
pub const REGISTRATION: Registration = Registration {
    name: "tpcb",
    about: "TPC-B: branches, tellers, accounts, history; the one transaction (scale: branches)",
    default_scale: 12,
    make: |scale, p| {
        Ok(Box::new(Tpcb(TpcbConfig {
            scale,
            tellers_per_branch: 10,
            accounts_per_branch: p.accounts_per_branch,
        })))
    },
};
