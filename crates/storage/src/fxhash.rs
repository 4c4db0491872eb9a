//! A fast, non-cryptographic hasher for the engine's hot maps (the buffer pool's page table, the
//! lock table), after rustc's `FxHasher`: a multiply and a rotate per word.
//!
//! Why not the standard `RandomState` (SipHash-1-3): its keys are chosen per process to resist
//! hash flooding from untrusted keys; the keys here are page ids and lock names the engine makes
//! itself, and SipHash cost several percent of a TPC-B transaction's CPU. Why not a crate: the
//! hasher is a dozen lines, and `storage` stays lean in dependencies.
//!
//! Determinism: no result may depend on a map's iteration order. The standard hasher is seeded
//! at random per process, so an order dependence would already have shown as runs that differ;
//! this hasher is fixed, which only makes any such dependence repeatable.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier of rustc's FxHasher (64-bit).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
pub type FxHashMap<K, V> = HashMap<K, V, FxBuildHasher>;
pub type FxHashSet<T> = HashSet<T, FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_with_the_fast_hasher_finds_what_it_holds() {
        let mut m: FxHashMap<u32, usize> = FxHashMap::default();
        for i in 0..10_000u32 {
            m.insert(i * 7, i as usize);
        }
        for i in 0..10_000u32 {
            assert_eq!(m.get(&(i * 7)), Some(&(i as usize)));
            assert_eq!(m.get(&(i * 7 + 1)), None);
        }
    }

    #[test]
    fn byte_strings_of_every_tail_length_hash_apart() {
        let h = |b: &[u8]| {
            let mut x = FxHasher::default();
            x.write(b);
            x.finish()
        };
        let all: Vec<u64> = (0..=17u8).map(|n| h(&vec![n; usize::from(n)])).collect();
        let mut uniq = all.clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), all.len());
    }
}
