//! Strict two-phase locking with intention locks and deadlock detection.
//!
//! Resources are tables and rows. Modes IS, IX, S, SIX, X with the usual compatibility matrix. A
//! request that conflicts is not queued: it returns `WouldBlock` and the caller (a terminal in
//! the scheduler) retries after some transaction ends. The waits-for graph records every
//! conflicting holder, and a request that would close a cycle returns `Deadlock` (the requester
//! is the victim).
//!
//! Invariants:
//! 1. Locks are released only all at once, when a transaction ends (strict 2PL).
//! 2. Two transactions never hold incompatible modes on one resource.
//! 3. The waits-for graph has no cycle.

use std::collections::BTreeMap;

use crate::fxhash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};
use crate::{ObjectId, Rid, TxnId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockMode {
    IS,
    IX,
    S,
    SIX,
    X,
}

impl LockMode {
    pub fn compatible(self, o: LockMode) -> bool {
        use LockMode::*;
        matches!(
            (self, o),
            (IS, IS)
                | (IS, IX)
                | (IS, S)
                | (IS, SIX)
                | (IX, IS)
                | (IX, IX)
                | (S, IS)
                | (S, S)
                | (SIX, IS)
        )
    }
    /// The weakest mode at least as strong as both.
    pub fn join(self, o: LockMode) -> LockMode {
        use LockMode::*;
        match (self, o) {
            (a, b) if a == b => a,
            (X, _) | (_, X) => X,
            (SIX, _) | (_, SIX) | (S, IX) | (IX, S) => SIX,
            (S, IS) | (IS, S) => S,
            (IX, IS) | (IS, IX) => IX,
            _ => X,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Table(ObjectId),
    Row(ObjectId, Rid),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LockStats {
    pub requests: u64,
    pub waits: u64,
    pub deadlocks: u64,
}

#[derive(Debug, Default)]
pub struct LockManager {
    /// Holders per resource. A table's entry stays when its last holder leaves (there are few
    /// tables, and every transaction locks them again); a row's goes.
    holders: FxHashMap<Resource, Vec<(TxnId, LockMode)>>,
    held: BTreeMap<TxnId, Vec<Resource>>,
    /// Emptied `held` lists, reused by the next transactions instead of allocated per one.
    spare_held: Vec<Vec<Resource>>,
    waits_for: BTreeMap<TxnId, Vec<TxnId>>,
    pub stats: LockStats,
}

impl LockManager {
    pub fn lock(&mut self, txn: TxnId, res: Resource, mode: LockMode) -> Result<()> {
        self.stats.requests += 1;
        let hs = self.holders.entry(res).or_default();
        let mine = hs.iter().position(|(t, _)| *t == txn);
        // The entry is looked up once: `hs` stays valid on the paths that grant the lock.
        let want = match mine {
            Some(i) if hs[i].1.join(mode) == hs[i].1 => return Ok(()),
            Some(i) => hs[i].1.join(mode),
            None => mode,
        };
        let blockers: Vec<TxnId> = hs
            .iter()
            .filter(|(t, m)| *t != txn && !m.compatible(want))
            .map(|(t, _)| *t)
            .collect();
        if !blockers.is_empty() {
            if self.reaches(&blockers, txn) {
                self.stats.deadlocks += 1;
                self.waits_for.remove(&txn);
                return Err(Error::Deadlock { victim: txn });
            }
            self.stats.waits += 1;
            let holder = blockers[0];
            self.waits_for.insert(txn, blockers);
            return Err(Error::WouldBlock { holder });
        }
        self.waits_for.remove(&txn);
        match mine {
            Some(i) => hs[i].1 = want,
            None => {
                hs.push((txn, want));
                let spare = &mut self.spare_held;
                self.held
                    .entry(txn)
                    .or_insert_with(|| spare.pop().unwrap_or_default())
                    .push(res);
            }
        }
        Ok(())
    }

    /// Does any of `from` wait (transitively) for `target`?
    fn reaches(&self, from: &[TxnId], target: TxnId) -> bool {
        let mut seen = FxHashSet::default();
        let mut stack: Vec<TxnId> = from.to_vec();
        while let Some(t) = stack.pop() {
            if t == target {
                return true;
            }
            if seen.insert(t) {
                if let Some(next) = self.waits_for.get(&t) {
                    stack.extend(next.iter().copied());
                }
            }
        }
        false
    }

    pub fn holds(&self, txn: TxnId, res: Resource) -> Option<LockMode> {
        self.holders
            .get(&res)?
            .iter()
            .find(|(t, _)| *t == txn)
            .map(|(_, m)| *m)
    }
    /// Is the resource locked by anyone in a mode that conflicts with S?
    pub fn is_x_locked(&self, res: Resource) -> bool {
        self.holders
            .get(&res)
            .is_some_and(|h| h.iter().any(|(_, m)| !m.compatible(LockMode::S)))
    }

    /// Releases everything `txn` holds (invariant 1).
    pub fn release_all(&mut self, txn: TxnId) {
        self.waits_for.remove(&txn);
        let Some(mut held) = self.held.remove(&txn) else {
            return;
        };
        for &res in &held {
            if let Some(hs) = self.holders.get_mut(&res) {
                hs.retain(|(t, _)| *t != txn);
                if hs.is_empty() && matches!(res, Resource::Row(..)) {
                    self.holders.remove(&res);
                }
            }
        }
        // A few lists are enough: one per transaction that is running at once.
        if self.spare_held.len() < 64 {
            held.clear();
            self.spare_held.push(held);
        }
    }
    pub fn locks_held(&self) -> usize {
        self.held.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_block_and_cycles_are_deadlocks() {
        let mut lm = LockManager::default();
        let a = Resource::Row(1, Rid { page: 1, slot: 0 });
        let b = Resource::Row(1, Rid { page: 1, slot: 1 });
        lm.lock(1, Resource::Table(1), LockMode::IX).unwrap();
        lm.lock(2, Resource::Table(1), LockMode::IX).unwrap();
        lm.lock(1, a, LockMode::X).unwrap();
        lm.lock(2, b, LockMode::X).unwrap();
        assert!(matches!(
            lm.lock(1, b, LockMode::S),
            Err(Error::WouldBlock { holder: 2 })
        ));
        assert!(matches!(
            lm.lock(2, a, LockMode::S),
            Err(Error::Deadlock { victim: 2 })
        ));
        assert!(matches!(
            lm.lock(3, Resource::Table(1), LockMode::S),
            Err(Error::WouldBlock { .. })
        ));
        lm.release_all(2);
        lm.lock(1, b, LockMode::S).unwrap();
        lm.lock(1, b, LockMode::X).unwrap();
        assert_eq!(lm.holds(1, b), Some(LockMode::X));
        assert_eq!(LockMode::S.join(LockMode::IX), LockMode::SIX);
    }
}
