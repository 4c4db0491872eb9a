//! TATP as a [`Workload`]: subscribers, access info, special facilities, call forwarding;
//! seven transactions. Loaded row by row only.

use anyhow::bail;
use kits::tatp::{self, TatpConfig, TatpTerminal};
use kits::LoadMethod;
use storage::Engine;

use crate::workload::{handles, Loaded, Registration, Workload, WorkloadTerminal};

/// TATP at a configuration, with the seed of its population.
#[derive(Clone, Copy, Debug)]
pub struct Tatp(pub TatpConfig, pub u64);

impl Workload for Tatp {
    fn name(&self) -> &'static str {
        "tatp"
    }
    fn label(&self) -> &'static str {
        "TATP"
    }
    fn load_method(&self, asked: Option<LoadMethod>) -> anyhow::Result<LoadMethod> {
        match asked {
            None | Some(LoadMethod::Rows) => Ok(LoadMethod::Rows),
            Some(LoadMethod::Bulk) => {
                bail!("TATP loads row by row (--load rows); --load bulk is TPC-B's and TPC-C's")
            }
        }
    }
    fn txn_types(&self) -> Vec<&'static str> {
        tatp::TXN_TYPES.iter().map(|t| t.name()).collect()
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
        _method: LoadMethod,
        progress: &dyn Fn(u64),
    ) -> anyhow::Result<Loaded> {
        Ok(Box::new(tatp::load(
            e,
            self.0,
            tatp::DDL,
            self.1,
            progress,
        )?))
    }
    fn terminals(
        &self,
        loaded: &Loaded,
        n: u32,
        seed: u64,
    ) -> anyhow::Result<Vec<Box<dyn WorkloadTerminal>>> {
        let h = *handles::<tatp::Handles>(loaded, self.label())?;
        Ok((0..n)
            .map(|i| {
                Box::new(TatpTerminal::new(i, h, self.0, seed, None)) as Box<dyn WorkloadTerminal>
            })
            .collect())
    }
}

crate::kit_terminal!(TatpTerminal, counted: |t| t.succeeded());

/// The registry's entry.
pub const REGISTRATION: Registration = Registration {
    name: "tatp",
    about: "TATP: seven transactions on subscribers (scale: subscribers)",
    default_scale: 20_000,
    make: |scale, p| Ok(Box::new(Tatp(TatpConfig { subscribers: scale }, p.seed))),
};
