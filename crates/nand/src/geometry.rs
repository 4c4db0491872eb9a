//! Device geometry and physical addresses.
//!
//! Invariants:
//! 1. Every count in a [`Geometry`] is at least 1 and the product of all counts (the number of
//!    pages) fits in a `u64` and every flat block number fits in a `u32`.
//! 2. The flat order is channel-major: `channel, chip, die, plane, block, page`. A flat page number
//!    (`Ppn`) therefore divides by `pages_per_block` into a flat block number (`Pbn`), and a flat
//!    block number divides by `blocks_per_plane * planes_per_die` into a flat die number.
//! 3. Conversions are exact inverses: `addr(ppn(a)) == a` for every valid address `a`.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Flat physical page number: one integer per page of the device (in the block's native layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ppn(pub u64);

/// Flat physical block number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pbn(pub u32);

/// Flat die (LUN) number: the unit that executes array operations in parallel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DieId(pub u32);

/// A page's address with every level of the hierarchy spelled out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PhysAddr {
    pub channel: u32,
    pub chip: u32,
    pub die: u32,
    pub plane: u32,
    pub block: u32,
    pub page: u32,
}

/// The shape of the device. Counts are per parent level (e.g. `chips_per_channel`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size_bytes: u32,
    pub oob_size_bytes: u32,
}

impl Geometry {
    /// Checks invariant 1 and names the offending field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fields: [(&'static str, u32); 8] = [
            ("geometry.channels", self.channels),
            ("geometry.chips_per_channel", self.chips_per_channel),
            ("geometry.dies_per_chip", self.dies_per_chip),
            ("geometry.planes_per_die", self.planes_per_die),
            ("geometry.blocks_per_plane", self.blocks_per_plane),
            ("geometry.pages_per_block", self.pages_per_block),
            ("geometry.page_size_bytes", self.page_size_bytes),
            ("geometry.oob_size_bytes", self.oob_size_bytes),
        ];
        for (field, value) in fields {
            if value == 0 {
                return Err(ConfigError::invalid(field, "must be at least 1"));
            }
        }
        // Blocks are addressed by a u32 and pages by a u64; refuse shapes that overflow either.
        let blocks = [
            self.channels,
            self.chips_per_channel,
            self.dies_per_chip,
            self.planes_per_die,
        ]
        .iter()
        .try_fold(u64::from(self.blocks_per_plane), |acc, &n| {
            acc.checked_mul(u64::from(n))
        })
        .filter(|&b| b <= u64::from(u32::MAX))
        .ok_or_else(|| {
            ConfigError::invalid(
                "geometry.blocks_per_plane",
                "the total number of blocks overflows a 32-bit block address",
            )
        })?;
        let pages = blocks
            .checked_mul(u64::from(self.pages_per_block))
            .ok_or_else(|| {
                ConfigError::invalid(
                    "geometry.pages_per_block",
                    "the total number of pages overflows a 64-bit page address",
                )
            })?;
        pages
            .checked_mul(u64::from(self.page_size_bytes))
            .ok_or_else(|| {
                ConfigError::invalid(
                    "geometry.page_size_bytes",
                    "the device capacity in bytes overflows 64 bits",
                )
            })?;
        if self.pages_per_block > u32::from(u16::MAX) {
            return Err(ConfigError::invalid(
                "geometry.pages_per_block",
                "at most 65535 pages per block",
            ));
        }
        if self.page_size_bytes > 1 << 20 {
            return Err(ConfigError::invalid(
                "geometry.page_size_bytes",
                "at most 1 MiB per page",
            ));
        }
        if self.oob_size_bytes > self.page_size_bytes {
            return Err(ConfigError::invalid(
                "geometry.oob_size_bytes",
                "must not exceed the page size",
            ));
        }
        Ok(())
    }

    pub fn dies(&self) -> u32 {
        self.channels * self.chips_per_channel * self.dies_per_chip
    }
    pub fn dies_per_channel(&self) -> u32 {
        self.chips_per_channel * self.dies_per_chip
    }
    pub fn blocks_per_die(&self) -> u32 {
        self.blocks_per_plane * self.planes_per_die
    }
    pub fn blocks(&self) -> u32 {
        self.dies() * self.blocks_per_die()
    }
    pub fn pages(&self) -> u64 {
        u64::from(self.blocks()) * u64::from(self.pages_per_block)
    }
    pub fn capacity_bytes(&self) -> u64 {
        self.pages() * u64::from(self.page_size_bytes)
    }

    #[inline]
    pub fn block_of(&self, ppn: Ppn) -> Pbn {
        Pbn((ppn.0 / u64::from(self.pages_per_block)) as u32)
    }
    #[inline]
    pub fn page_in_block(&self, ppn: Ppn) -> u32 {
        (ppn.0 % u64::from(self.pages_per_block)) as u32
    }
    #[inline]
    pub fn first_page(&self, pbn: Pbn) -> Ppn {
        Ppn(u64::from(pbn.0) * u64::from(self.pages_per_block))
    }
    #[inline]
    pub fn ppn_in_block(&self, pbn: Pbn, page: u32) -> Ppn {
        debug_assert!(page < self.pages_per_block);
        Ppn(self.first_page(pbn).0 + u64::from(page))
    }
    #[inline]
    pub fn die_of_block(&self, pbn: Pbn) -> DieId {
        DieId(pbn.0 / self.blocks_per_die())
    }
    #[inline]
    pub fn channel_of_die(&self, die: DieId) -> u32 {
        die.0 / self.dies_per_channel()
    }
    #[inline]
    pub fn plane_of_block(&self, pbn: Pbn) -> u32 {
        (pbn.0 % self.blocks_per_die()) / self.blocks_per_plane
    }

    /// The flat page number of a fully spelled-out address, or `None` if any level is out of range.
    pub fn ppn(&self, a: PhysAddr) -> Option<Ppn> {
        if a.channel >= self.channels
            || a.chip >= self.chips_per_channel
            || a.die >= self.dies_per_chip
            || a.plane >= self.planes_per_die
            || a.block >= self.blocks_per_plane
            || a.page >= self.pages_per_block
        {
            return None;
        }
        let die = (a.channel * self.chips_per_channel + a.chip) * self.dies_per_chip + a.die;
        let block = (die * self.planes_per_die + a.plane) * self.blocks_per_plane + a.block;
        Some(self.ppn_in_block(Pbn(block), a.page))
    }

    /// The spelled-out address of a flat page number, or `None` past the end of the device.
    pub fn addr(&self, ppn: Ppn) -> Option<PhysAddr> {
        if ppn.0 >= self.pages() {
            return None;
        }
        let page = self.page_in_block(ppn);
        let pbn = self.block_of(ppn).0;
        let block = pbn % self.blocks_per_plane;
        let plane_flat = pbn / self.blocks_per_plane;
        let plane = plane_flat % self.planes_per_die;
        let die_flat = plane_flat / self.planes_per_die;
        let die = die_flat % self.dies_per_chip;
        let chip_flat = die_flat / self.dies_per_chip;
        let chip = chip_flat % self.chips_per_channel;
        let channel = chip_flat / self.chips_per_channel;
        Some(PhysAddr {
            channel,
            chip,
            die,
            plane,
            block,
            page,
        })
    }

    /// Block `index` of plane `plane` of die `die`: the building block of striping allocators.
    pub fn block_on_die(&self, die: DieId, plane: u32, index: u32) -> Pbn {
        debug_assert!(
            die.0 < self.dies() && plane < self.planes_per_die && index < self.blocks_per_plane
        );
        Pbn((die.0 * self.planes_per_die + plane) * self.blocks_per_plane + index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            channels: 2,
            chips_per_channel: 3,
            dies_per_chip: 2,
            planes_per_die: 2,
            blocks_per_plane: 5,
            pages_per_block: 7,
            page_size_bytes: 4096,
            oob_size_bytes: 64,
        }
    }

    #[test]
    fn flat_and_spelled_out_addresses_round_trip() {
        let g = geo();
        g.validate().unwrap();
        for p in 0..g.pages() {
            let a = g.addr(Ppn(p)).unwrap();
            assert_eq!(g.ppn(a), Some(Ppn(p)));
            let die = g.die_of_block(g.block_of(Ppn(p)));
            assert_eq!(die.0, (a.channel * 3 + a.chip) * 2 + a.die);
            assert_eq!(g.channel_of_die(die), a.channel);
            assert_eq!(g.plane_of_block(g.block_of(Ppn(p))), a.plane);
        }
        assert_eq!(g.addr(Ppn(g.pages())), None);
    }

    #[test]
    fn out_of_range_levels_are_refused() {
        let g = geo();
        let ok = PhysAddr {
            channel: 1,
            chip: 2,
            die: 1,
            plane: 1,
            block: 4,
            page: 6,
        };
        assert!(g.ppn(ok).is_some());
        assert_eq!(g.ppn(PhysAddr { channel: 2, ..ok }), None);
        assert_eq!(g.ppn(PhysAddr { page: 7, ..ok }), None);
        assert_eq!(g.ppn(PhysAddr { block: 5, ..ok }), None);
    }

    #[test]
    fn zero_and_overflowing_shapes_name_the_field() {
        let err = Geometry {
            planes_per_die: 0,
            ..geo()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("geometry.planes_per_die"), "{err}");
        let huge = Geometry {
            channels: u32::MAX,
            blocks_per_plane: u32::MAX,
            ..geo()
        };
        let err = huge.validate().unwrap_err();
        assert!(err.to_string().contains("overflows"), "{err}");
        let err = Geometry {
            oob_size_bytes: 8192,
            ..geo()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("geometry.oob_size_bytes"), "{err}");
    }
}
