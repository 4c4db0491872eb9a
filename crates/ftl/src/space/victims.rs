//! Victim commitment for Insert Address Assist (docs/iaa.md; Miyaji, Sun and Takeuchi, "IAA").
//!
//! A host that wants its writes to empty the next GC victim has to know that victim before GC
//! reaches it, and the space must then keep its word. [`FlashSpace::commit_victims`] picks the
//! next `n` victims in greedy order (fewest valid units first) among the closed blocks of the
//! streams the caller names, and *freezes* them: GC collects committed victims before any other
//! block (except a block with no valid unit at all, which costs nothing to collect and so
//! cannot hurt the commitment), in the order committed. The commitment lasts until the block
//! is collected (or taken by wear levelling); the window of a committed victim is therefore the
//! host writes between its commitment and its collection. No other block changes that order.
//!
//! Invariants:
//! 1. Every committed block is `Closed` (a block leaves the list as it leaves `Closed`).
//! 2. The epoch changes exactly when the committed list changes, so a caller that caches the
//!    list's keys refreshes only then; between two changes, the valid keys of the committed
//!    blocks only shrink (a closed block receives no new data).
//! 3. Without a call to `commit_victims`, GC behaves exactly as before (nothing is committed).

use super::{BlockUse, FlashSpace, NIL, NO_KEY};
use nand::Pbn;

/// The victims a space has committed to.
#[derive(Clone, Debug, Default)]
pub(crate) struct VictimCommit {
    /// Committed blocks, in the order GC will collect them.
    blocks: Vec<u32>,
    /// Bumped on every change of `blocks` (invariant 2).
    epoch: u64,
}

impl FlashSpace {
    /// Commits to the next `n` GC victims among the closed blocks of the streams in
    /// `streams_mask` (bit `s`: stream `s`), topping the list up in greedy order; returns the
    /// epoch (invariant 2). Cheap when the list is already full: no scan.
    pub fn commit_victims(&mut self, n: u32, streams_mask: u64) -> u64 {
        let n = n as usize;
        if self.victims.blocks.len() >= n {
            return self.victims.epoch;
        }
        // Greedy order: bucket v holds the closed blocks with v valid units, oldest first. A
        // block with no valid unit is skipped: GC takes it for free (`committed_victim`) and
        // it has nothing for the host to empty.
        'scan: for v in 1..self.bucket_head.len() {
            let mut b = self.bucket_head[v];
            while b != NIL {
                let blk = &self.blocks[b as usize];
                if streams_mask & (1u64 << blk.stream.min(63)) != 0
                    && !self.victims.blocks.contains(&b)
                {
                    self.victims.blocks.push(b);
                    self.victims.epoch += 1;
                    if self.victims.blocks.len() >= n {
                        break 'scan;
                    }
                }
                b = self.blocks[b as usize].next;
            }
        }
        self.victims.epoch
    }

    /// The committed victims, in the order GC will collect them.
    pub fn committed_victims(&self) -> &[u32] {
        &self.victims.blocks
    }

    /// The epoch of the committed list (invariant 2).
    pub fn victim_epoch(&self) -> u64 {
        self.victims.epoch
    }

    /// Appends to `out` the keys still valid in the committed victims, victim by victim, in
    /// page order.
    pub fn committed_keys(&self, out: &mut Vec<u64>) {
        let upp = self.upp as usize;
        let ppb = self.geo.pages_per_block as usize;
        for &b in &self.victims.blocks {
            let first = self.geo.first_page(Pbn(b)).0 as usize * upp;
            out.extend(
                self.rmap[first..first + ppb * upp]
                    .iter()
                    .copied()
                    .filter(|&k| k != NO_KEY),
            );
        }
    }

    /// GC's choice when victims are committed: the first committed one, unless some closed
    /// block has no valid unit (free to collect). `None`: nothing committed, the policy decides.
    pub(super) fn committed_victim(&self) -> Option<u32> {
        let &b = self.victims.blocks.first()?;
        debug_assert_eq!(
            self.blocks[b as usize].usage,
            BlockUse::Closed,
            "invariant 1: a committed victim is closed"
        );
        if self.bucket_head[0] != NIL {
            return Some(self.bucket_head[0]);
        }
        Some(b)
    }

    /// Block `b` leaves `Closed`: it leaves the commitment too (invariant 1).
    pub(super) fn uncommit(&mut self, b: u32) {
        if let Some(i) = self.victims.blocks.iter().position(|&c| c == b) {
            self.victims.blocks.remove(i);
            self.victims.epoch += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::SpaceConfig;
    use nand::{Nand, Purpose};

    fn space() -> FlashSpace {
        let mut cfg = nand::DeviceConfig::preset("tiny", &[]).expect("tiny preset");
        cfg.seed = 3;
        let (s, _) = FlashSpace::format(
            Nand::new(cfg).unwrap(),
            SpaceConfig {
                streams: 1,
                ..SpaceConfig::default()
            },
            0,
        )
        .unwrap();
        s
    }

    /// A committed victim is the next one GC collects, and once the caller has rewritten every
    /// key it held, GC collects it without a copy.
    #[test]
    fn gc_collects_the_committed_victim_and_copies_nothing_when_it_was_emptied() {
        let mut s = space();
        let keys = s.usable_pages() * u64::from(s.units_per_page()) * 7 / 10;
        let data = vec![7u8; s.unit_bytes()];
        let mut map = vec![u64::MAX; keys as usize];
        let mut t = 0;
        let mut moves = Vec::new();
        let mut write = |s: &mut FlashSpace, k: u64, map: &mut Vec<u64>, t: &mut u64| {
            let rec = crate::oob::OobRecord::new(crate::oob::PageKind::Data, k, s.alloc_seq(), 0);
            let (p, done) = s.write(*t, 0, &rec, &data, Purpose::Host).unwrap();
            *t = done;
            moves.clear();
            s.take_moves(&mut moves);
            for m in &moves {
                map[m.key as usize] = m.to.0;
            }
            let old = std::mem::replace(&mut map[k as usize], p.0);
            if old != u64::MAX {
                s.invalidate(nand::Ppn(old));
            }
        };
        for k in 0..keys {
            write(&mut s, k, &mut map, &mut t);
        }
        // Random overwrites until GC has run for a while.
        let mut x = 12345u64;
        for _ in 0..keys * 2 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            write(&mut s, (x >> 33) % keys, &mut map, &mut t);
        }
        let epoch = s.commit_victims(1, 1);
        assert_eq!(s.commit_victims(1, 1), epoch, "a full list changes nothing");
        let victim = s.committed_victims()[0];
        let mut hinted = Vec::new();
        s.committed_keys(&mut hinted);
        assert_eq!(hinted.len() as u32, s.valid_pages(Pbn(victim)));
        let copies0 = s.counts().gc_migrations;
        for k in hinted {
            write(&mut s, k, &mut map, &mut t);
        }
        // Write until the victim is collected.
        let mut n = 0;
        while s.committed_victims().contains(&victim) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            write(&mut s, (x >> 33) % keys, &mut map, &mut t);
            n += 1;
            assert!(n < keys * 4, "the committed victim is never collected");
        }
        assert_ne!(s.victim_epoch(), epoch);
        assert_eq!(s.block_use(Pbn(victim)), BlockUse::Free);
        // Other victims GC took meanwhile may have needed copies; this one needed none, so the
        // copies made are at most those of the blocks collected before it (none: it was first).
        assert_eq!(
            s.counts().gc_migrations,
            copies0,
            "the emptied victim needed no copy"
        );
        s.check().unwrap();
    }
}
