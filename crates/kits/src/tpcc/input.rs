//! The TPC-C input generator: the transaction mix and every transaction's parameters, from a
//! seed and a terminal number alone (no engine state), per clauses 2.4.1, 2.5.1, 2.6.1, 2.7.1
//! and 2.8.1.
//!
//! Invariants:
//! 1. The mix is 45% New-Order, 43% Payment, 4% each Order-Status, Delivery and Stock-Level,
//!    drawn independently per transaction.
//! 2. A terminal has a fixed home warehouse (terminal mod W, 1-based) and, for Stock-Level, a
//!    fixed district (clause 2.8.1); with `HomeWarehouse::Random` the home warehouse is drawn
//!    uniformly for every transaction instead (before its other parameters).
//! 3. 1% of New-Orders carry an unused item id (items + 1) as their last item, so they roll
//!    back; 1% of order lines are supplied by a remote warehouse and 15% of Payments pay for a
//!    customer of a remote warehouse (only when W > 1); 60% of Payments and Order-Statuses
//!    select the customer by last name.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::config::{last_name, nurand, rng_for, NurandConsts, TpccConfig};

/// The five transaction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        [
            "new_order",
            "payment",
            "order_status",
            "delivery",
            "stock_level",
        ][self as usize]
    }
}

/// How a customer is selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomerBy {
    Id(u32),
    LastName(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderLineIn {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    NewOrder {
        w_id: u32,
        d_id: u32,
        c_id: u32,
        lines: Vec<OrderLineIn>,
        rollback: bool,
    },
    Payment {
        w_id: u32,
        d_id: u32,
        c_w_id: u32,
        c_d_id: u32,
        customer: CustomerBy,
        amount_cents: i64,
    },
    OrderStatus {
        w_id: u32,
        d_id: u32,
        customer: CustomerBy,
    },
    Delivery {
        w_id: u32,
        carrier_id: u32,
    },
    StockLevel {
        w_id: u32,
        d_id: u32,
        threshold: u32,
    },
}

impl Input {
    pub fn kind(&self) -> Kind {
        match self {
            Input::NewOrder { .. } => Kind::NewOrder,
            Input::Payment { .. } => Kind::Payment,
            Input::OrderStatus { .. } => Kind::OrderStatus,
            Input::Delivery { .. } => Kind::Delivery,
            Input::StockLevel { .. } => Kind::StockLevel,
        }
    }
}

/// The transaction stream of one terminal.
#[derive(Debug, Clone)]
pub struct InputGen {
    cfg: TpccConfig,
    c: NurandConsts,
    rng: Xoshiro256PlusPlus,
    pub w_id: u32,
    pub d_id: u32,
}

impl InputGen {
    /// `run`: the run-time NURand constants (clause 2.1.6.1, `NurandConsts::run_from`).
    pub fn new(cfg: TpccConfig, run: NurandConsts, seed: u64, terminal: u32) -> Self {
        let w_id = terminal % cfg.warehouses + 1;
        let d_id = (terminal / cfg.warehouses) % cfg.districts_per_warehouse + 1;
        InputGen {
            cfg,
            c: run,
            rng: rng_for(seed, u64::from(terminal)),
            w_id,
            d_id,
        }
    }

    fn other_warehouse(&mut self) -> u32 {
        // Uniform over the warehouses other than the home one (W > 1).
        let o = self.rng.random_range(1..self.cfg.warehouses);
        if o >= self.w_id {
            o + 1
        } else {
            o
        }
    }

    fn customer(&mut self) -> CustomerBy {
        if self.rng.random_range(1..=100) <= 60 {
            CustomerBy::LastName(last_name(nurand(
                &mut self.rng,
                255,
                0,
                self.cfg.last_name_max(),
                self.c.c_last,
            )))
        } else {
            CustomerBy::Id(nurand(
                &mut self.rng,
                1023,
                1,
                self.cfg.customers_per_district,
                self.c.c_id,
            ))
        }
    }

    fn district(&mut self) -> u32 {
        self.rng.random_range(1..=self.cfg.districts_per_warehouse)
    }

    pub fn next_kind(&mut self) -> Kind {
        match self.rng.random_range(0..100) {
            0..45 => Kind::NewOrder,
            45..88 => Kind::Payment,
            88..92 => Kind::OrderStatus,
            92..96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }

    pub fn next_input(&mut self) -> Input {
        let kind = self.next_kind();
        self.input_of(kind)
    }

    pub fn input_of(&mut self, kind: Kind) -> Input {
        if self.cfg.home_warehouse == super::config::HomeWarehouse::Random {
            self.w_id = self.rng.random_range(1..=self.cfg.warehouses);
        }
        let w_id = self.w_id;
        let multi = self.cfg.warehouses > 1;
        match kind {
            Kind::NewOrder => {
                let d_id = self.district();
                let c_id = nurand(
                    &mut self.rng,
                    1023,
                    1,
                    self.cfg.customers_per_district,
                    self.c.c_id,
                );
                let n = self.rng.random_range(5..=15);
                let rollback = self.rng.random_range(1..=100) == 1;
                let mut lines = Vec::with_capacity(n);
                for k in 0..n {
                    let i_id = if rollback && k == n - 1 {
                        self.cfg.items + 1
                    } else {
                        nurand(&mut self.rng, 8191, 1, self.cfg.items, self.c.ol_i_id)
                    };
                    let supply_w_id = if multi && self.rng.random_range(1..=100) == 1 {
                        self.other_warehouse()
                    } else {
                        w_id
                    };
                    lines.push(OrderLineIn {
                        i_id,
                        supply_w_id,
                        quantity: self.rng.random_range(1..=10),
                    });
                }
                Input::NewOrder {
                    w_id,
                    d_id,
                    c_id,
                    lines,
                    rollback,
                }
            }
            Kind::Payment => {
                let d_id = self.district();
                let (c_w_id, c_d_id) = if multi && self.rng.random_range(1..=100) > 85 {
                    (self.other_warehouse(), self.district())
                } else {
                    (w_id, d_id)
                };
                let customer = self.customer();
                let amount_cents = self.rng.random_range(100..=500_000);
                Input::Payment {
                    w_id,
                    d_id,
                    c_w_id,
                    c_d_id,
                    customer,
                    amount_cents,
                }
            }
            Kind::OrderStatus => {
                let d_id = self.district();
                Input::OrderStatus {
                    w_id,
                    d_id,
                    customer: self.customer(),
                }
            }
            Kind::Delivery => Input::Delivery {
                w_id,
                carrier_id: self.rng.random_range(1..=10),
            },
            Kind::StockLevel => Input::StockLevel {
                w_id,
                d_id: self.d_id,
                threshold: self.rng.random_range(10..=20),
            },
        }
    }
}
