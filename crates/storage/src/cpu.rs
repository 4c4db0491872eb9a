//! Host CPU in virtual time: what the engine's own work costs, per kind of work.
//!
//! The engine charges a cost to its clock wherever the work happens (a terminal's clock for a
//! terminal's work, the background entity's for the page cleaner's write-backs), so host CPU is
//! serialized with the flash waits of the same entity, as in a synchronous engine, and overlaps
//! with the device's work for other entities (a cleaner's writes proceed while a terminal
//! computes). `CpuCounts` counts each kind of work once, where it is charged, so a result can
//! say how much host time a transaction took and of which kind (docs/noftl.md, "Host CPU in
//! virtual time").
//!
//! Invariants:
//! 1. Every charge adds exactly `count x cost` of its kind to the clock and to `charged_ns`;
//!    `CpuCounts::cost_ns(model)` recomputes `charged_ns` from the counts.
//! 2. A kind of work is counted where it is charged and nowhere else (one place per kind).

use serde::{Deserialize, Serialize};

/// Virtual nanoseconds per kind of work. `Default` is this engine on the development machine
/// (the profile `measured`; its source is on each field); `NONE` charges nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuModel {
    /// A call of the record API, begin, commit or abort.
    pub ns_per_call: u64,
    /// A buffer fix (a page visited: a B+-tree level, a heap page).
    pub ns_per_fix: u64,
    /// A log record built and appended.
    pub ns_per_record: u64,
    /// A lock request.
    pub ns_per_lock: u64,
    /// A commit that logged something: the host's commit path (on an engine whose log lives
    /// on another device, that device's force too).
    pub ns_per_commit: u64,
    /// A page read from the store (a buffer miss or a read-ahead): the host's I/O path.
    pub ns_per_page_read: u64,
    /// A page written to the store (a write-back), charged to whoever writes it.
    pub ns_per_page_write: u64,
}

impl CpuModel {
    /// The cost of one piece of `kind` (the one place that maps a kind to its field).
    pub fn ns_of(&self, kind: CpuKind) -> u64 {
        match kind {
            CpuKind::Call => self.ns_per_call,
            CpuKind::Fix => self.ns_per_fix,
            CpuKind::Record => self.ns_per_record,
            CpuKind::Lock => self.ns_per_lock,
            CpuKind::Commit => self.ns_per_commit,
            CpuKind::PageRead => self.ns_per_page_read,
            CpuKind::PageWrite => self.ns_per_page_write,
        }
    }

    /// Charges nothing: real-time runs (the CPU time is real there) and the profile `none`.
    pub const NONE: CpuModel = CpuModel {
        ns_per_call: 0,
        ns_per_fix: 0,
        ns_per_record: 0,
        ns_per_lock: 0,
        ns_per_commit: 0,
        ns_per_page_read: 0,
        ns_per_page_write: 0,
    };
}

impl Default for CpuModel {
    /// Calibrated once so that one TPC-B transaction costs about what it measured with the real
    /// clock on MemDisk (release build, one terminal, 2% buffer): 13.2 us on the development
    /// machine (docs/storage.md, Measurements). The I/O path and the commit were inside those
    /// 13.2 us on a RAM disk, so they are not charged apart.
    fn default() -> Self {
        CpuModel {
            ns_per_call: 600,
            ns_per_fix: 120,
            ns_per_record: 500,
            ns_per_lock: 150,
            ns_per_commit: 0,
            ns_per_page_read: 0,
            ns_per_page_write: 0,
        }
    }
}

/// The kinds of work the engine charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuKind {
    Call,
    Fix,
    Record,
    Lock,
    Commit,
    PageRead,
    PageWrite,
}

impl CpuKind {
    pub const ALL: [CpuKind; 7] = [
        CpuKind::Call,
        CpuKind::Fix,
        CpuKind::Record,
        CpuKind::Lock,
        CpuKind::Commit,
        CpuKind::PageRead,
        CpuKind::PageWrite,
    ];
}

/// How much of each kind of work the engine did, and the virtual time it charged for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuCounts {
    pub calls: u64,
    pub fixes: u64,
    pub records: u64,
    pub locks: u64,
    pub commits: u64,
    pub page_reads: u64,
    pub page_writes: u64,
    pub charged_ns: u64,
}

impl CpuCounts {
    /// Counts `n` of `kind` under `model`; returns the virtual time to charge.
    pub fn charge(&mut self, model: &CpuModel, kind: CpuKind, n: u64) -> u64 {
        *self.count_mut(kind) += n;
        let ns = n.saturating_mul(model.ns_of(kind));
        self.charged_ns = self.charged_ns.saturating_add(ns);
        ns
    }

    /// How much of `kind` was done.
    pub fn count(&self, kind: CpuKind) -> u64 {
        match kind {
            CpuKind::Call => self.calls,
            CpuKind::Fix => self.fixes,
            CpuKind::Record => self.records,
            CpuKind::Lock => self.locks,
            CpuKind::Commit => self.commits,
            CpuKind::PageRead => self.page_reads,
            CpuKind::PageWrite => self.page_writes,
        }
    }

    fn count_mut(&mut self, kind: CpuKind) -> &mut u64 {
        match kind {
            CpuKind::Call => &mut self.calls,
            CpuKind::Fix => &mut self.fixes,
            CpuKind::Record => &mut self.records,
            CpuKind::Lock => &mut self.locks,
            CpuKind::Commit => &mut self.commits,
            CpuKind::PageRead => &mut self.page_reads,
            CpuKind::PageWrite => &mut self.page_writes,
        }
    }

    /// What these counts cost under `model` (invariant 1: `charged_ns` when `model` charged them).
    pub fn cost_ns(&self, model: &CpuModel) -> u64 {
        CpuKind::ALL
            .iter()
            .map(|&k| self.count(k) * model.ns_of(k))
            .sum()
    }

    /// The work done between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuCounts) -> CpuCounts {
        CpuCounts {
            calls: self.calls - earlier.calls,
            fixes: self.fixes - earlier.fixes,
            records: self.records - earlier.records,
            locks: self.locks - earlier.locks,
            commits: self.commits - earlier.commits,
            page_reads: self.page_reads - earlier.page_reads,
            page_writes: self.page_writes - earlier.page_writes,
            charged_ns: self.charged_ns - earlier.charged_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_counted_once_and_charged_its_own_cost() {
        let m = CpuModel {
            ns_per_call: 1,
            ns_per_fix: 10,
            ns_per_record: 100,
            ns_per_lock: 1_000,
            ns_per_commit: 10_000,
            ns_per_page_read: 100_000,
            ns_per_page_write: 1_000_000,
        };
        let mut c = CpuCounts::default();
        let mut total = 0;
        for (i, k) in CpuKind::ALL.into_iter().enumerate() {
            total += c.charge(&m, k, 2);
            assert_eq!(total, 2 * (10u64.pow(i as u32 + 1) - 1) / 9, "{k:?}");
        }
        assert_eq!(c.charged_ns, 2_222_222);
        assert_eq!(c.cost_ns(&m), c.charged_ns);
        assert_eq!(c.since(&CpuCounts::default()), c);
        assert_eq!(
            CpuCounts::default().charge(&CpuModel::NONE, CpuKind::Fix, 5),
            0
        );
    }

    #[test]
    fn a_profile_file_names_only_known_kinds() {
        let m: CpuModel = toml::from_str("ns_per_fix = 7\nns_per_commit = 9").unwrap();
        assert_eq!((m.ns_per_fix, m.ns_per_commit, m.ns_per_call), (7, 9, 600));
        assert!(toml::from_str::<CpuModel>("ns_per_fox = 7").is_err());
    }
}
