//! DFS on a virtualized flash storage layer (after Josephson et al., "DFS: A File System for
//! Virtualized Flash Storage", FAST 2010; see docs/dfs.md).
//!
//! - [`vsl`]: the virtualized flash storage layer on `ftl`'s `FlashSpace`: a sparse virtual
//!   block space, atomic multi-block writes, trim, crash-recoverable allocation.
//! - [`fs`]: DFS, the file system over the VSL: files in contiguous virtual ranges, no block
//!   allocator of its own.

pub mod fs;
pub mod map;
pub mod vsl;

pub use fs::{Dfs, FormatParams, FsError};
pub use vsl::{Vsl, VslConfig, VslError, BLOCK_BYTES, VIRTUAL_BLOCKS};
