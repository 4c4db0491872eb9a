//! `--warmup precondition`: the auto warm-up's two device writes, most of them done as page
//! rewrites instead of transactions (issue "answers in minutes": the warm-ups were three
//! quarters of `compare`'s CPU, and most of a transaction's CPU is the engine's, not the
//! device's).
//!
//! Three phases, each until the store has written a share of the device's pages for the engine
//! (host writes, as `Auto` counts them):
//! 1. **Sample** (`SAMPLE_DEVICE_WRITES`): the workload runs as in `Auto`, and the buffer pool
//!    records its reads from the store and its write-backs, in order (`Engine::count_page_io`).
//! 2. **Replay** (up to `WARMUP_DEVICE_WRITES - TAIL_DEVICE_WRITES`): the sample's page
//!    operations again and again, in their order (`Replay`; `Engine::replay_page_io`: pages read,
//!    pages written back with the bytes they hold, no transaction, nothing the database can see
//!    changes). The order matters to a DFTL: an independent draw of each operation from the
//!    sample's mix left the published DFTL's two-level cache (its entries' ages) far from where
//!    the workload leaves it, and its mapping time per transaction at 35% still moving by a
//!    third over the next 3,000 TPC-C transactions.
//! 3. **Tail** (`TAIL_DEVICE_WRITES`): the workload runs again, so that the buffer pool, the log
//!    and the blocks written last are as the workload leaves them.
//!
//! Each pass of the replay moves the sample's *background* pages: an object's pages read at
//! most once and written at most once in the sample (an account page of TPC-B: read on a miss,
//! written back once) are mapped, pass by pass, onto distinct pages drawn afresh among all of
//! that object's pages that are not hot (read or written twice or more: TPC-B's branches and
//! tellers, a B+-tree's upper levels); hot pages keep their place. With the sample a fifth of the
//! device, a uniformly updated table shows most of its pages once or not at all, and replaying
//! the same pages would concentrate its writes on the quarter it saw. Pages the sample allocated
//! (not in the loaded database) keep their place too.
//!
//! What it does not reproduce: pages that a workload allocates (TPC-B's history, TPC-C's
//! orders) are written again in place during phase 2 instead of new pages being filled, so the
//! database grows during the sample and the tail only; at the NoFTL paper's scales that growth
//! is about 1% of the device over the whole auto warm-up.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::buffer::PageIo;
use storage::{ObjectId, PageId, PageOp};

/// Phase 1's share of the device's pages.
pub const SAMPLE_DEVICE_WRITES: f64 = 0.2;
/// Phase 3's share of the device's pages.
pub const TAIL_DEVICE_WRITES: f64 = 0.2;
/// Page operations replayed between two checks of the host writes.
pub const REPLAY_BATCH: usize = 8192;

/// Phase 2's operations (module doc).
pub struct Replay {
    trace: Vec<PageOp>,
    /// Where the next operation comes from in `trace`.
    at: usize,
    /// Completed passes over `trace`.
    passes: u64,
    /// Each object's background pages seen in the sample, and every page it may move them to.
    moves: Vec<Moves>,
    /// This pass's page for each page id (identity outside the moved pages).
    map: Vec<PageId>,
    rng: Xoshiro256PlusPlus,
}

struct Moves {
    seen: Vec<PageId>,
    eligible: Vec<PageId>,
}

impl Replay {
    /// The replay of `io` (the sample) over the allocated pages `objects` of the loaded
    /// database; None when the sample wrote no page.
    pub fn new(
        io: &PageIo,
        objects: &[Option<ObjectId>],
        seed: u64,
    ) -> anyhow::Result<Option<Replay>> {
        if io.total_writes() == 0 {
            return Ok(None);
        }
        // (reads, write-backs) per page in the sample.
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for op in &io.trace {
            let p = op.pid() as usize;
            if p >= counts.len() {
                counts.resize(p + 1, (0, 0));
            }
            match op {
                PageOp::Read(_) => counts[p].0 += 1,
                PageOp::Write(_) => counts[p].1 += 1,
            }
        }
        let count = |p: usize| counts.get(p).copied().unwrap_or((0, 0));
        let hot = |p: usize| {
            let (r, w) = count(p);
            r >= 2 || w >= 2
        };
        let seen = |p: usize| count(p) != (0, 0);
        let mut by_object: BTreeMap<ObjectId, Moves> = BTreeMap::new();
        for (p, o) in objects.iter().enumerate() {
            let Some(o) = *o else { continue };
            if hot(p) {
                continue;
            }
            let m = by_object.entry(o).or_insert_with(|| Moves {
                seen: Vec::new(),
                eligible: Vec::new(),
            });
            m.eligible.push(p as PageId);
            // A page of the loaded database keeps its object (the sample only allocates new
            // ones), so `objects` says which object's background it belongs to.
            if seen(p) {
                m.seen.push(p as PageId);
            }
        }
        by_object.retain(|_, m| !m.seen.is_empty());
        let len = objects.len().max(counts.len());
        let mut r = Replay {
            trace: io.trace.clone(),
            at: 0,
            passes: 0,
            moves: by_object.into_values().collect(),
            map: (0..len as PageId).collect(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        };
        r.new_pass();
        Ok(Some(r))
    }

    /// Draws this pass's places for the background pages: distinct pages of their object.
    fn new_pass(&mut self) {
        for m in &mut self.moves {
            let (chosen, _) = m.eligible.partial_shuffle(&mut self.rng, m.seen.len());
            for (&from, &to) in m.seen.iter().zip(chosen.iter()) {
                self.map[from as usize] = to;
            }
        }
    }

    /// The next `n` operations, into `out` (cleared first).
    pub fn draw(&mut self, n: usize, out: &mut Vec<PageOp>) {
        out.clear();
        while out.len() < n {
            if self.at == self.trace.len() {
                self.at = 0;
                self.passes += 1;
                self.new_pass();
            }
            let op = self.trace[self.at];
            self.at += 1;
            let to = self.map.get(op.pid() as usize).copied().unwrap_or(op.pid());
            out.push(match op {
                PageOp::Read(_) => PageOp::Read(to),
                PageOp::Write(_) => PageOp::Write(to),
            });
        }
    }

    /// Completed passes over the sample.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// Background pages moved each pass, over how many pages they may go to.
    pub fn moved(&self) -> (usize, usize) {
        self.moves
            .iter()
            .fold((0, 0), |(s, e), m| (s + m.seen.len(), e + m.eligible.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(trace: &[PageOp]) -> PageIo {
        PageIo {
            trace: trace.to_vec(),
        }
    }

    #[test]
    fn a_replay_keeps_hot_pages_and_moves_background_pages_within_their_object() {
        use PageOp::{Read, Write};
        // Object 7: page 0 hot (read twice, written twice); pages 1 and 2 read and written
        // once (background); pages 3-9 never touched. Object 9: page 10 written once, page 11
        // untouched. Object 11 (page 12) read-only and untouched.
        let trace = [
            Read(0),
            Read(1),
            Write(0),
            Read(2),
            Write(1),
            Read(0),
            Write(2),
            Write(0),
            Write(10),
        ];
        let sample = io(&trace);
        let objects: Vec<Option<ObjectId>> = (0..13)
            .map(|p| {
                Some(match p {
                    0..=9 => 7,
                    10 | 11 => 9,
                    _ => 11,
                })
            })
            .collect();
        let mut r = Replay::new(&sample, &objects, 3).unwrap().unwrap();
        assert_eq!(
            r.moved(),
            (3, 9 + 2),
            "pages 1, 2 over 1-9; page 10 over 10, 11"
        );
        let mut out = Vec::new();
        let mut page10 = std::collections::BTreeSet::new();
        for pass in 0..200 {
            r.draw(trace.len(), &mut out);
            assert_eq!(
                r.passes(),
                pass as u64,
                "one pass per draw of the trace's length"
            );
            // Order and kinds are the trace's; page 0 stays; 1 and 2 move together, apart.
            for (a, b) in out.iter().zip(&trace) {
                assert_eq!(std::mem::discriminant(a), std::mem::discriminant(b));
            }
            assert!(out.iter().filter(|o| o.pid() == 0).count() == 4);
            let (p1, p2) = (out[1].pid(), out[3].pid());
            assert_eq!(out[4].pid(), p1);
            assert_eq!(out[6].pid(), p2);
            assert!(p1 != p2 && (1..=9).contains(&p1) && (1..=9).contains(&p2));
            page10.insert(out[8].pid());
        }
        assert_eq!(
            page10,
            [10, 11].into(),
            "object 9's page moves over its two pages"
        );
        // The same seed replays the same passes.
        let mut a = Replay::new(&sample, &objects, 3).unwrap().unwrap();
        let mut b = Replay::new(&sample, &objects, 3).unwrap().unwrap();
        let (mut x, mut y) = (Vec::new(), Vec::new());
        a.draw(1000, &mut x);
        b.draw(1000, &mut y);
        assert_eq!(x, y);
        assert!(Replay::new(&PageIo::default(), &objects, 1)
            .unwrap()
            .is_none());
    }
}
