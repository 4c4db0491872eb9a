//! TATP input generation, kept apart from execution: a seed and a terminal number give the
//! same transaction stream on every run and every page store.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{digits, sub_nbr, TatpConfig};

/// The seven transactions, in the TATP description's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TxnType {
    GetSubscriberData,
    GetNewDestination,
    GetAccessData,
    UpdateSubscriberData,
    UpdateLocation,
    InsertCallForwarding,
    DeleteCallForwarding,
}

pub const TXN_TYPES: [TxnType; 7] = [
    TxnType::GetSubscriberData,
    TxnType::GetNewDestination,
    TxnType::GetAccessData,
    TxnType::UpdateSubscriberData,
    TxnType::UpdateLocation,
    TxnType::InsertCallForwarding,
    TxnType::DeleteCallForwarding,
];

/// The TATP mix, in percent, in `TXN_TYPES` order (35/10/35/2/14/2/2).
pub const MIX_PERCENT: [u32; 7] = [35, 10, 35, 2, 14, 2, 2];

impl TxnType {
    pub fn name(self) -> &'static str {
        match self {
            TxnType::GetSubscriberData => "GET_SUBSCRIBER_DATA",
            TxnType::GetNewDestination => "GET_NEW_DESTINATION",
            TxnType::GetAccessData => "GET_ACCESS_DATA",
            TxnType::UpdateSubscriberData => "UPDATE_SUBSCRIBER_DATA",
            TxnType::UpdateLocation => "UPDATE_LOCATION",
            TxnType::InsertCallForwarding => "INSERT_CALL_FORWARDING",
            TxnType::DeleteCallForwarding => "DELETE_CALL_FORWARDING",
        }
    }
    pub fn index(self) -> usize {
        TXN_TYPES.iter().position(|&t| t == self).unwrap_or(0)
    }
}

/// One transaction's parameters (fields a type does not use are 0 / empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    pub kind: TxnType,
    pub s_id: u32,
    /// UPDATE_LOCATION, INSERT_ and DELETE_CALL_FORWARDING address the subscriber by number.
    pub sub_nbr: String,
    /// ai_type or sf_type, 1..=4.
    pub typ: i64,
    pub start_time: i64,
    pub end_time: i64,
    pub bit_1: i64,
    pub data_a: i64,
    pub vlr_location: i64,
    pub numberx: String,
}

/// The input generator of one terminal.
#[derive(Debug, Clone)]
pub struct InputGen {
    cfg: TatpConfig,
    rng: Xoshiro256PlusPlus,
}

impl InputGen {
    pub fn new(cfg: TatpConfig, seed: u64, terminal: u32) -> Self {
        let s = seed ^ (u64::from(terminal) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x7A7F;
        InputGen {
            cfg,
            rng: Xoshiro256PlusPlus::seed_from_u64(s),
        }
    }

    /// NURand(A, 1, P) = ((rand(0, A) | rand(1, P)) % P) + 1.
    pub fn nurand_s_id(&mut self) -> u32 {
        let p = self.cfg.subscribers.max(1);
        let a = self.rng.random_range(0..=self.cfg.nurand_a());
        let b = self.rng.random_range(1..=p);
        ((a | b) % p) + 1
    }

    pub fn next_input(&mut self) -> Input {
        let mut x = self.rng.random_range(0..100u32);
        let mut kind = TxnType::DeleteCallForwarding;
        for (t, &pct) in TXN_TYPES.iter().zip(&MIX_PERCENT) {
            if x < pct {
                kind = *t;
                break;
            }
            x -= pct;
        }
        let s_id = self.nurand_s_id();
        let mut inp = Input {
            kind,
            s_id,
            sub_nbr: String::new(),
            typ: 0,
            start_time: 0,
            end_time: 0,
            bit_1: 0,
            data_a: 0,
            vlr_location: 0,
            numberx: String::new(),
        };
        let r = &mut self.rng;
        match kind {
            TxnType::GetSubscriberData => {}
            TxnType::GetNewDestination => {
                inp.typ = r.random_range(1..=4);
                inp.start_time = 8 * r.random_range(0..3);
                inp.end_time = r.random_range(1..=24);
            }
            TxnType::GetAccessData => inp.typ = r.random_range(1..=4),
            TxnType::UpdateSubscriberData => {
                inp.bit_1 = r.random_range(0..=1);
                inp.data_a = r.random_range(0..=255);
                inp.typ = r.random_range(1..=4);
            }
            TxnType::UpdateLocation => {
                inp.sub_nbr = sub_nbr(s_id);
                inp.vlr_location = r.random_range(1..=i64::from(u32::MAX));
            }
            TxnType::InsertCallForwarding => {
                inp.sub_nbr = sub_nbr(s_id);
                inp.typ = r.random_range(1..=4);
                inp.start_time = 8 * r.random_range(0..3);
                // As the description says: 1..=24, not tied to start_time (unlike the load).
                inp.end_time = r.random_range(1..=24);
                inp.numberx = digits(r, 15);
            }
            TxnType::DeleteCallForwarding => {
                inp.sub_nbr = sub_nbr(s_id);
                inp.typ = r.random_range(1..=4);
                inp.start_time = 8 * r.random_range(0..3);
            }
        }
        inp
    }
}
