//! `ftl`: flash management written once, used in two places: inside a device behind a block
//! interface (the FTLs of a conventional SSD) and inside the database engine (NoFTL).
//!
//! The block interface every FTL implements is [`BlockDevice`]: logical 4 KiB pages, each
//! request carrying its virtual submit time and returning its completion time. [`ByteDevice`]
//! adapts any block device to byte offsets with 512-byte sectors (what NBD and file systems send),
//! by read-modify-write at the edges.

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
