//! The information channel of Insert Address Assist (docs/iaa.md; Miyaji, Sun and Takeuchi,
//! "Co-design of application software and NAND flash memory for database storage system":
//! "IAA" below).
//!
//! In IAA the FTL tells the storage engine two things through the block interface: (i) the
//! flash page size, so the engine knows which logical pages share a flash page, and (ii) the
//! logical pages still valid in the block GC will erase next, so the engine can put its next
//! writes there and GC finds nothing left to copy. A plain block device offers neither: this is
//! an extension trait, reached through [`crate::BlockDevice::gc_informed`], which returns
//! `None` unless the device implements it (the page FTL and DFTL do).
//!
//! The victim commitment (`space.rs`, "Victim commitment"): the FTL commits to its next victims
//! in greedy order and collects them first, so that the answer stays true until the engine has
//! acted on it. The commitment lasts until the block is collected.
//!
//! Contract:
//! 1. `flash_page_bytes` is the device's flash page size; logical pages `l` with equal
//!    `l / (flash_page_bytes / LOGICAL_PAGE_BYTES)` are not thereby on one flash page (the FTL
//!    maps each on its own), it is the program unit the engine should fill.
//! 2. `commit_victims(n)` returns an epoch that changes exactly when the committed set changes;
//!    `victim_lpns` lists the logical pages valid in the committed set now (a subset of what it
//!    listed at any earlier call in the same epoch).
//! 3. Neither query writes flash or changes what any logical page reads as.

/// Victims committed ahead by default: two blocks give the engine room to place a round of
/// inserts while GC collects the first (the IAA paper commits one; one more keeps a hint alive
/// across the collection, when the first one's pages are gone).
pub const DEFAULT_COMMITTED_VICTIMS: u32 = 2;

/// The extension of the block interface (see the module doc).
pub trait GcInformed {
    /// The flash page size in bytes (contract 1).
    fn flash_page_bytes(&self) -> usize;
    /// Commits to the next `victims` GC victims of the host's data (tops the list up); returns
    /// the epoch (contract 2).
    fn commit_victims(&mut self, victims: u32) -> u64;
    /// Appends the logical pages still valid in the committed victims to `out`.
    fn victim_lpns(&mut self, out: &mut Vec<u64>);
}
