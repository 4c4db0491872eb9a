//! `--warmup precondition`: the auto warm-up's two device writes, most of them done as page
//! rewrites instead of transactions (issue "answers in minutes": the warm-ups were three
//! quarters of `compare`'s CPU, and most of a transaction's CPU is the engine's, not the
//! device's).
//!
//! Three phases, each until the store has written a share of the device's pages for the engine
//! (host writes, as `Auto` counts them):
//! 1. **Sample** (`SAMPLE_DEVICE_WRITES`): the workload runs as in `Auto`, and the buffer pool
//!    counts its write-backs per page (`Engine::count_page_writes`).
//! 2. **Rewrite** (up to `WARMUP_DEVICE_WRITES - TAIL_DEVICE_WRITES`): pages drawn from the
//!    sample's write mix (`Mix`) are rewritten with the bytes they hold
//!    (`Engine::rewrite_pages`: a read and a write each, no transaction, nothing the database
//!    can see changes).
//! 3. **Tail** (`TAIL_DEVICE_WRITES`): the workload runs again, so that what a rewrite does not
//!    reproduce settles as the workload leaves it: a mapping cache's contents (a rewrite looks a
//!    page up once, a transaction reads and writes around it), the buffer pool, the log, and the
//!    blocks written last.
//!
//! The mix (`Mix::new`): pages written at least twice in the sample are the hot ones and are
//! drawn by their counts; an object's pages written once are taken as a sample of a background
//! spread evenly over the object, so their writes are spread over every page of that object that
//! was not written twice, written in the sample or not (with the sample about a fifth of the
//! device, a uniformly updated table such as TPC-B's accounts shows most of its pages once or not
//! at all, and drawing only the pages seen would concentrate its writes on a quarter of them).
//! Objects not written in the sample (read-only tables) get no rewrites.
//!
//! What it does not reproduce: pages that a workload allocates (TPC-B's history, TPC-C's
//! orders) are rewritten in place during phase 2 instead of new pages being filled, so the
//! database grows during the sample and the tail only; at the NoFTL paper's scales that growth
//! is about 1% of the device over the whole auto warm-up.

use std::collections::BTreeMap;

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::buffer::PageWrites;
use storage::{ObjectId, PageId};

/// Phase 1's share of the device's pages.
pub const SAMPLE_DEVICE_WRITES: f64 = 0.2;
/// Phase 3's share of the device's pages.
pub const TAIL_DEVICE_WRITES: f64 = 0.2;
/// Rewrites drawn between two checks of the host writes.
pub const REWRITE_BATCH: usize = 4096;

/// The pages phase 2 rewrites, with their weights (module doc).
pub struct Mix {
    pids: Vec<PageId>,
    index: WeightedIndex<f64>,
    rng: Xoshiro256PlusPlus,
}

#[derive(Default)]
struct Object {
    /// Pages written twice or more in the sample, with their counts.
    hot: Vec<(PageId, u32)>,
    /// Pages written once, and allocated pages never written: the background's pages.
    background: Vec<PageId>,
    /// Writes of the pages written once.
    once: u64,
}

impl Mix {
    /// The mix of `writes` (the sample's write-backs) over the allocated pages `objects` of
    /// the loaded database; None when the sample wrote no page.
    pub fn new(
        writes: &PageWrites,
        objects: &[Option<ObjectId>],
        seed: u64,
    ) -> anyhow::Result<Option<Mix>> {
        let mut by_object: BTreeMap<ObjectId, Object> = BTreeMap::new();
        for (pid, &c) in writes.counts.iter().enumerate() {
            let o = by_object.entry(writes.objects[pid]).or_default();
            match c {
                0 => {}
                1 => {
                    o.background.push(pid as PageId);
                    o.once += 1;
                }
                _ => o.hot.push((pid as PageId, c)),
            }
        }
        by_object.retain(|_, o| !o.hot.is_empty() || o.once > 0);
        for (pid, o) in objects.iter().enumerate() {
            let seen = writes.counts.get(pid).is_some_and(|&c| c > 0);
            if let (Some(o), false) = (o, seen) {
                if let Some(obj) = by_object.get_mut(o) {
                    obj.background.push(pid as PageId);
                }
            }
        }
        let mut pids = Vec::new();
        let mut weights = Vec::new();
        for o in by_object.values() {
            for &(pid, c) in &o.hot {
                pids.push(pid);
                weights.push(f64::from(c));
            }
            if o.once > 0 {
                let each = o.once as f64 / o.background.len() as f64;
                for &pid in &o.background {
                    pids.push(pid);
                    weights.push(each);
                }
            }
        }
        if pids.is_empty() {
            return Ok(None);
        }
        debug_assert!(
            (weights.iter().sum::<f64>() - writes.total() as f64).abs()
                <= 1e-6 * writes.total() as f64,
            "the mix keeps the sample's writes"
        );
        let index = WeightedIndex::new(&weights)
            .map_err(|e| anyhow::anyhow!("the sample's write mix has no weight: {e}"))?;
        Ok(Some(Mix {
            pids,
            index,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }))
    }

    /// The next `n` pages to rewrite, into `out` (cleared first).
    pub fn draw(&mut self, n: usize, out: &mut Vec<PageId>) {
        out.clear();
        out.extend((0..n).map(|_| self.pids[self.index.sample(&mut self.rng)]));
    }

    /// Pages the mix can draw.
    pub fn pages(&self) -> usize {
        self.pids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(counts: &[u32], objects: &[ObjectId]) -> PageWrites {
        PageWrites {
            counts: counts.to_vec(),
            objects: objects.to_vec(),
        }
    }

    #[test]
    fn hot_pages_keep_their_counts_and_singletons_spread_over_their_object() {
        // Object 7: page 0 written 8 times (hot), pages 1 and 2 once, pages 3-5 allocated and
        // never written. Object 9: page 6 once; object 11 (page 7) read-only.
        let w = writes(&[8, 1, 1, 0, 0, 0, 1], &[7, 7, 7, 0, 0, 0, 9]);
        let objects: Vec<Option<ObjectId>> = [7, 7, 7, 7, 7, 7, 9, 11].map(Some).to_vec();
        let mut mix = Mix::new(&w, &objects, 1).unwrap().unwrap();
        assert_eq!(mix.pages(), 7, "page 7's object was not written");
        let mut seen = [0u64; 8];
        let mut out = Vec::new();
        let n = 110_000;
        mix.draw(n, &mut out);
        for &p in &out {
            seen[p as usize] += 1;
        }
        let share = |p: usize| seen[p] as f64 / n as f64;
        // Weights: page 0: 8; pages 1-5: 2 writes over 5 pages = 0.4 each; page 6: 1. Sum 11.
        assert!((share(0) - 8.0 / 11.0).abs() < 0.01, "{seen:?}");
        for p in 1..6 {
            assert!((share(p) - 0.4 / 11.0).abs() < 0.005, "{seen:?}");
        }
        assert!((share(6) - 1.0 / 11.0).abs() < 0.005, "{seen:?}");
        assert_eq!(seen[7], 0);
    }

    #[test]
    fn an_empty_sample_gives_no_mix_and_draws_replay_from_the_seed() {
        assert!(Mix::new(&PageWrites::default(), &[Some(1)], 1)
            .unwrap()
            .is_none());
        let w = writes(&[3, 1, 0, 2], &[1, 1, 0, 2]);
        let objects = vec![Some(1), Some(1), Some(1), Some(2)];
        let (mut a, mut b) = (Vec::new(), Vec::new());
        Mix::new(&w, &objects, 5)
            .unwrap()
            .unwrap()
            .draw(100, &mut a);
        Mix::new(&w, &objects, 5)
            .unwrap()
            .unwrap()
            .draw(100, &mut b);
        assert_eq!(a, b);
    }
}
