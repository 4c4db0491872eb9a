//! The VSL's sparse forward map: virtual block -> flash unit location.
//!
//! Structure: a hash table of fixed leaves. A leaf covers `LEAF_BLOCKS` (512) consecutive
//! virtual blocks and holds their locations as `u32` (2 KiB of entries) plus a count of mapped
//! entries; it is allocated when the first block of its range is written and freed when the last
//! one is trimmed. Memory therefore grows with what is written, never with the virtual space:
//! written densely (DFS lays files out contiguously) a GiB of 4 KiB blocks is 262,144 entries in
//! 512 leaves, 1 MiB of entries plus about 40 bytes of table and allocation overhead per leaf
//! (~1.02 MiB per written GiB); the worst case, one block written per leaf, costs one leaf
//! (~2.1 KiB) per written block.
//!
//! Invariants:
//! 1. A leaf is in the table iff it maps at least one block; `used` is its number of mapped
//!    entries; `mapped` is the sum of `used` over all leaves.

use fnv::FnvHashMap;

/// Virtual blocks per leaf.
pub const LEAF_BLOCKS: u64 = 512;
/// An unmapped entry.
pub const NONE: u32 = u32::MAX;

#[derive(Debug)]
struct Leaf {
    loc: [u32; LEAF_BLOCKS as usize],
    used: u32,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct SparseMap {
    leaves: FnvHashMap<u64, Box<Leaf>>,
    mapped: u64,
}

impl SparseMap {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn get(&self, vbn: u64) -> Option<u32> {
        let leaf = self.leaves.get(&(vbn / LEAF_BLOCKS))?;
        let l = leaf.loc[(vbn % LEAF_BLOCKS) as usize];
        (l != NONE).then_some(l)
    }

    /// Maps `vbn` to `loc`; returns the previous location.
    pub fn set(&mut self, vbn: u64, loc: u32) -> Option<u32> {
        debug_assert!(loc != NONE);
        let leaf = self.leaves.entry(vbn / LEAF_BLOCKS).or_insert_with(|| {
            Box::new(Leaf {
                loc: [NONE; LEAF_BLOCKS as usize],
                used: 0,
            })
        });
        let e = &mut leaf.loc[(vbn % LEAF_BLOCKS) as usize];
        let old = std::mem::replace(e, loc);
        if old == NONE {
            leaf.used += 1;
            self.mapped += 1;
            None
        } else {
            Some(old)
        }
    }

    /// Unmaps `vbn`; returns its location if it was mapped.
    pub fn remove(&mut self, vbn: u64) -> Option<u32> {
        let key = vbn / LEAF_BLOCKS;
        let leaf = self.leaves.get_mut(&key)?;
        let e = &mut leaf.loc[(vbn % LEAF_BLOCKS) as usize];
        if *e == NONE {
            return None;
        }
        let old = std::mem::replace(e, NONE);
        leaf.used -= 1;
        self.mapped -= 1;
        if leaf.used == 0 {
            self.leaves.remove(&key);
        }
        Some(old)
    }

    /// Blocks mapped.
    pub fn mapped(&self) -> u64 {
        self.mapped
    }

    /// Leaves allocated.
    pub fn leaves(&self) -> usize {
        self.leaves.len()
    }

    /// Bytes of memory the map holds (entries, counts and the table's slots).
    pub fn memory_bytes(&self) -> u64 {
        let leaf = std::mem::size_of::<Leaf>() as u64;
        let slot = (std::mem::size_of::<u64>() + std::mem::size_of::<Box<Leaf>>()) as u64;
        self.leaves.len() as u64 * leaf + self.leaves.capacity() as u64 * slot
    }

    /// The mapped blocks in `start..end`, in increasing order, with their locations. Visits
    /// only allocated leaves, so a huge sparse range costs what is mapped in it.
    pub fn mapped_in(&self, start: u64, end: u64, out: &mut Vec<(u64, u32)>) {
        out.clear();
        if start >= end {
            return;
        }
        let first = start / LEAF_BLOCKS;
        let last = (end - 1) / LEAF_BLOCKS;
        let mut visit = |k: u64, leaf: &Leaf| {
            let base = k * LEAF_BLOCKS;
            for (i, &l) in leaf.loc.iter().enumerate() {
                let v = base + i as u64;
                if l != NONE && v >= start && v < end {
                    out.push((v, l));
                }
            }
        };
        if last - first < self.leaves.len() as u64 {
            for k in first..=last {
                if let Some(leaf) = self.leaves.get(&k) {
                    visit(k, leaf);
                }
            }
        } else {
            let mut keys: Vec<u64> = self
                .leaves
                .keys()
                .copied()
                .filter(|k| (first..=last).contains(k))
                .collect();
            keys.sort_unstable();
            for k in keys {
                visit(k, &self.leaves[&k]);
            }
        }
    }

    /// Whether any block of `start..end` is mapped.
    pub fn any_in(&self, start: u64, end: u64) -> bool {
        if start >= end {
            return false;
        }
        let first = start / LEAF_BLOCKS;
        let last = (end - 1) / LEAF_BLOCKS;
        let check = |k: u64, leaf: &Leaf| {
            let base = k * LEAF_BLOCKS;
            let lo = start.max(base) - base;
            let hi = end.min(base + LEAF_BLOCKS) - base;
            leaf.loc[lo as usize..hi as usize]
                .iter()
                .any(|&l| l != NONE)
        };
        if last - first < self.leaves.len() as u64 {
            (first..=last).any(|k| self.leaves.get(&k).is_some_and(|l| check(k, l)))
        } else {
            self.leaves
                .iter()
                .any(|(&k, l)| (first..=last).contains(&k) && check(k, l))
        }
    }

    /// The mapped extents (start, blocks) in increasing order.
    pub fn extents(&self) -> Vec<(u64, u64)> {
        let mut keys: Vec<u64> = self.leaves.keys().copied().collect();
        keys.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for k in keys {
            let leaf = &self.leaves[&k];
            for (i, &l) in leaf.loc.iter().enumerate() {
                if l == NONE {
                    continue;
                }
                let v = k * LEAF_BLOCKS + i as u64;
                match out.last_mut() {
                    Some((s, n)) if *s + *n == v => *n += 1,
                    _ => out.push((v, 1)),
                }
            }
        }
        out
    }

    /// Changes the location of a mapped block from `from` to `to` (a GC move). False if `vbn`
    /// is not mapped at `from`.
    pub fn relocate(&mut self, vbn: u64, from: u32, to: u32) -> bool {
        match self.leaves.get_mut(&(vbn / LEAF_BLOCKS)) {
            Some(leaf) if leaf.loc[(vbn % LEAF_BLOCKS) as usize] == from => {
                leaf.loc[(vbn % LEAF_BLOCKS) as usize] = to;
                true
            }
            _ => false,
        }
    }

    /// Invariant 1.
    pub fn check(&self) -> Result<(), String> {
        let mut total = 0;
        for (k, leaf) in &self.leaves {
            let used = leaf.loc.iter().filter(|&&l| l != NONE).count() as u32;
            if used != leaf.used || used == 0 {
                return Err(format!("leaf {k}: used {} but {used} mapped", leaf.used));
            }
            total += u64::from(used);
        }
        if total != self.mapped {
            return Err(format!("mapped {} but leaves hold {total}", self.mapped));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_map_grows_with_what_is_written() {
        let mut m = SparseMap::new();
        assert_eq!(m.memory_bytes(), 0);
        let far = 1u64 << 43;
        assert_eq!(m.set(far, 7), None);
        assert_eq!(m.set(far, 8), Some(7));
        assert_eq!(m.set(3, 1), None);
        assert_eq!(m.get(far), Some(8));
        assert_eq!(m.get(far + 1), None);
        assert_eq!(m.leaves(), 2);
        assert!(m.any_in(0, u64::MAX / 2));
        assert!(!m.any_in(4, far));
        let mut v = Vec::new();
        m.mapped_in(0, 1 << 50, &mut v);
        assert_eq!(v, vec![(3, 1), (far, 8)]);
        assert_eq!(m.extents(), vec![(3, 1), (far, 1)]);
        assert_eq!(m.remove(far), Some(8));
        assert_eq!(m.leaves(), 1);
        m.check().unwrap();
        // 1 GiB of 4 KiB blocks written contiguously: about 1 MiB of map.
        let mut m = SparseMap::new();
        for b in 0..262_144u64 {
            m.set((1 << 40) + b, b as u32);
        }
        let mib = m.memory_bytes() as f64 / (1 << 20) as f64;
        assert!(mib > 1.0 && mib < 1.1, "{mib} MiB per written GiB");
    }
}
