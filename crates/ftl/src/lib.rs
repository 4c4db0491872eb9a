//! `ftl`: flash management written once, used in two places: inside a device behind a block
//! interface (the FTLs of a conventional SSD) and inside the database engine (NoFTL).
//!
//! The block interface every FTL implements is [`BlockDevice`]: logical 4 KiB pages, each
//! request carrying its virtual submit time and returning its completion time. [`ByteDevice`]
//! adapts any block device to byte offsets with 512-byte sectors (what NBD and file systems send),
//! by read-modify-write at the edges.
//!
//! Layers. The modules form floors: each imports only from floors below it, so there is no
//! import circle (a child module counts as a module of its own: it imports nothing from its
//! parent). Bottom-up:
//! 0. `error` (`FtlError`), `units` (the 4 KiB unit, units per flash page), `controller` (the
//!    controller core and its DRAM cost), `iaa` (the `GcInformed` extension trait), `memory`
//!    and `theory` (tables and formulas): nothing of the crate.
//! 1. `block_device` (the contract, `FtlReport`, the counters), `oob` (the OOB record and the
//!    recovery scan), `host` (the host CPU model).
//! 2. `space` (`FlashSpace`: allocation, GC, wear levelling, IAA victim commitment); `bytes`,
//!    `memdisk` and `sectors`, which only wrap a `BlockDevice`.
//! 3. `journal` (trim records, checkpoints, the page-mapped FTLs' recovery), on `space`;
//!    `testkit`, on `memdisk`.
//! 4. `options`: `FtlOptions` and what the FTLs share (capacity, checks, cycle costs and their
//!    charge). It names no FTL.
//! 5. `wbuf` (the write buffer of `page` and `dftl`) and `block::common` (what `block`, `fast`
//!    and `amf` share).
//! 6. The FTLs: `page`, `dftl`, `block`, `fast`, `amf`. None imports another (`block::common`
//!    is floor 5, not the `block` FTL).
//! 7. `dftl_orig`, built on DFTL's flash side (`dftl::DftlCore`).
//! 8. `factory` (`build`, `open`): names every FTL; only this root imports it.
//!
//! This root only declares the modules and re-exports their public names.

pub mod amf;
pub mod block;
pub mod block_device;
pub mod bytes;
pub mod controller;
pub mod dftl;
pub mod dftl_orig;
pub mod error;
pub mod factory;
pub mod fast;
pub mod host;
pub mod iaa;
pub mod journal;
pub mod lower_pages;
pub mod memdisk;
pub mod memory;
pub mod oob;
pub mod options;
pub mod page;
pub mod sectors;
pub mod space;
pub mod testkit;
pub mod theory;
mod units;
pub(crate) mod wbuf;

pub use block_device::{
    BlockDevice, FtlError, FtlReport, GcCounts, HostCounts, LOGICAL_PAGE_BYTES, SECTOR_BYTES,
};
pub use bytes::ByteDevice;
pub use controller::{Controller, ControllerConfig};
pub use factory::{build, open};
pub use iaa::GcInformed;
pub use memdisk::MemDisk;
pub use options::FtlOptions;
pub use space::{FlashSpace, GcPolicy, LivePage, Move, SpaceConfig, SpaceCounts};
