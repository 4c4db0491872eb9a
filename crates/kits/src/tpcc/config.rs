//! The TPC-C definitions every other part of the kit draws on: the population's size
//! ([`TpccConfig`], invariant 1 of the module), how a terminal picks its home warehouse
//! ([`HomeWarehouse`]), NURand and its C constants ([`nurand`], [`NurandConsts`], invariant 2),
//! the last names of clause 4.3.2.3 ([`last_name`]), and the seeded random streams
//! (`rng_for`).
//!
//! They sit below `load`, `input`, `txn`, `check` and `crash` (and `tpcc` itself, which
//! re-exports them as `kits::tpcc::TpccConfig` and so on), so that each imports them downward:
//! the input generator and the loader both draw names and NURand values, and the constants'
//! streams are the generator's.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::Result;

/// Size of the database (invariant 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TpccConfig {
    pub warehouses: u32,
    pub items: u32,
    pub districts_per_warehouse: u32,
    pub customers_per_district: u32,
    /// Orders loaded per district (one per customer, as the specification has it).
    pub orders_per_district: u32,
    /// The last this many loaded orders of a district are undelivered (new orders).
    pub new_orders_per_district: u32,
    /// True when anything is below the specification's population (tests only).
    pub reduced: bool,
    /// How a terminal picks each transaction's home warehouse.
    pub home_warehouse: HomeWarehouse,
}

/// How a terminal picks the home warehouse of its transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HomeWarehouse {
    /// The specification's: a terminal keeps one home warehouse (clause 2.4.1.1; terminal
    /// mod W here).
    #[default]
    Fixed,
    /// Drawn uniformly over all warehouses for every transaction, as Shore-MT's TPC-C kit does
    /// when it runs fewer threads than warehouses (the NoFTL paper's runs, one thread): one
    /// terminal then touches the whole database, not one warehouse.
    Random,
}

impl HomeWarehouse {
    pub fn parse(s: &str) -> Result<HomeWarehouse> {
        match s {
            "fixed" => Ok(HomeWarehouse::Fixed),
            "random" => Ok(HomeWarehouse::Random),
            other => Err(storage::Error::Config(format!(
                "--home-warehouse is fixed or random, not '{other}'"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            HomeWarehouse::Fixed => "fixed",
            HomeWarehouse::Random => "random",
        }
    }
}

impl TpccConfig {
    pub fn spec(warehouses: u32) -> Self {
        TpccConfig {
            warehouses,
            items: 100_000,
            districts_per_warehouse: 10,
            customers_per_district: 3000,
            orders_per_district: 3000,
            new_orders_per_district: 900,
            reduced: false,
            home_warehouse: HomeWarehouse::Fixed,
        }
    }
    /// A REDUCED population for fast tests: `items` items and `customers` customers (and
    /// orders) per district, with the specification's 30% of them undelivered.
    pub fn reduced(warehouses: u32, items: u32, customers: u32) -> Self {
        TpccConfig {
            warehouses,
            items,
            districts_per_warehouse: 10,
            customers_per_district: customers,
            orders_per_district: customers,
            new_orders_per_district: customers * 3 / 10,
            reduced: true,
            home_warehouse: HomeWarehouse::Fixed,
        }
    }
    pub fn validate(&self) -> Result<()> {
        let ok = self.warehouses >= 1
            && self.warehouses <= 100_000
            && self.items >= 15
            && self.districts_per_warehouse >= 1
            && self.districts_per_warehouse <= 10
            && self.customers_per_district >= 2
            && self.orders_per_district == self.customers_per_district
            && self.new_orders_per_district < self.orders_per_district;
        if ok {
            Ok(())
        } else {
            Err(storage::Error::Config(format!(
                "not a usable TPC-C population: {self:?}"
            )))
        }
    }
    /// Orders per district delivered at load (2,100 in the specification; condition 11).
    pub fn delivered_per_district(&self) -> u32 {
        self.orders_per_district - self.new_orders_per_district
    }
    pub fn districts(&self) -> u64 {
        u64::from(self.warehouses) * u64::from(self.districts_per_warehouse)
    }
    /// The last-name numbers drawn (0..=999 in the specification; fewer if fewer customers,
    /// so that every drawn name exists).
    pub fn last_name_max(&self) -> u32 {
        self.customers_per_district.min(1000) - 1
    }
    /// Rows loaded, approximately (order lines average 10 per order), for progress.
    pub fn rows_estimate(&self) -> u64 {
        let w = u64::from(self.warehouses);
        let d = self.districts();
        let c = u64::from(self.customers_per_district);
        let o = u64::from(self.orders_per_district);
        u64::from(self.items)
            + w * (1 + u64::from(self.items))
            + d * (1 + 2 * c + o * 11 + u64::from(self.new_orders_per_district))
    }
    /// DB pages the loaded database takes, estimated before loading: 216 bytes of page space
    /// per row of `rows_estimate`, the nine tables and their indexes, as measured by loading 2
    /// warehouses on 4 KiB pages (58,067 pages for 1,098,022 rows, 2026-11-23), plus the
    /// catalog's pages.
    pub fn db_pages_estimate(&self, page_bytes: usize) -> u64 {
        crate::pages_for(self.rows_estimate(), 216, page_bytes)
    }
}

/// NURand's C constants (clause 2.1.6): one each for C_LAST (A = 255), C_ID (A = 1023) and
/// OL_I_ID (A = 8191).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NurandConsts {
    pub c_last: u32,
    pub c_id: u32,
    pub ol_i_id: u32,
}

impl NurandConsts {
    /// Seeded load constants.
    pub fn load(seed: u64) -> Self {
        let mut r = rng_for(seed, u64::MAX);
        NurandConsts {
            c_last: r.random_range(0..=255),
            c_id: r.random_range(0..=1023),
            ol_i_id: r.random_range(0..=8191),
        }
    }
    /// Run constants for a database loaded with `load` (clause 2.1.6.1): C_LAST's delta is in
    /// [65, 119] and is neither 96 nor 112; C_ID and OL_I_ID are drawn anew.
    pub fn run_from(load: NurandConsts, seed: u64) -> Self {
        let mut r = rng_for(seed, u64::MAX - 1);
        loop {
            let c: u32 = r.random_range(0..=255);
            if Self::valid_delta(load.c_last, c) {
                return NurandConsts {
                    c_last: c,
                    c_id: r.random_range(0..=1023),
                    ol_i_id: r.random_range(0..=8191),
                };
            }
        }
    }
    /// The rule of clause 2.1.6.1 for C_LAST.
    pub fn valid_delta(c_load: u32, c_run: u32) -> bool {
        let d = c_load.abs_diff(c_run);
        (65..=119).contains(&d) && d != 96 && d != 112
    }
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x (clause 2.1.6).
pub fn nurand(rng: &mut impl Rng, a: u32, x: u32, y: u32, c: u32) -> u32 {
    let r1 = rng.random_range(0..=a);
    let r2 = rng.random_range(x..=y);
    (((r1 | r2) + c) % (y - x + 1)) + x
}

/// Clause 4.3.2.3: the last name of number 0..=999 from its three digits.
pub fn last_name(n: u32) -> String {
    const SYL: [&str; 10] = [
        "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
    ];
    let n = n % 1000;
    format!(
        "{}{}{}",
        SYL[(n / 100) as usize],
        SYL[(n / 10 % 10) as usize],
        SYL[(n % 10) as usize]
    )
}

/// The seeded random stream number `stream` of `seed` (one per terminal, and one each for the
/// load's draws and the NURand constants).
pub(crate) fn rng_for(seed: u64, stream: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(
        seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    )
}
