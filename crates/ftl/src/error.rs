//! The error every part of the crate returns, from the flash space and the OOB scan up to the
//! block interface. It sits on the bottom floor (it imports nothing of the crate) so that the
//! lowest modules (`oob`, `space`) can return it without importing the block interface above
//! them; `block_device` re-exports it, where other crates have always named it.

use nand::NandError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FtlError {
    #[error("logical pages {start}..{end} are beyond the device's {capacity} pages")]
    OutOfRange { start: u64, end: u64, capacity: u64 },
    #[error("request of {bytes} bytes at offset {offset} is not aligned to {align}-byte units")]
    Misaligned {
        offset: u64,
        bytes: usize,
        align: usize,
    },
    #[error("the device is full: no free flash block left for {0}")]
    NoSpace(&'static str),
    #[error("logical page {lpn} cannot be overwritten: {why}")]
    Overwrite { lpn: u64, why: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("flash: {0}")]
    Flash(#[from] NandError),
    #[error("recovery failed: {0}")]
    Recovery(String),
    #[error("invalid FTL configuration: {0}")]
    Config(String),
}
