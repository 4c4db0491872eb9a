//! Typed errors. Every refused operation changes nothing on the device (see `device.rs`, invariant 1).

use crate::config::CellMode;
use crate::geometry::{Pbn, Ppn};

/// A configuration that cannot describe a device. Names the offending field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid {field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("unknown preset '{0}' (known: {1})")]
    UnknownPreset(String, String),
    #[error("cannot parse device config: {0}")]
    Parse(String),
    #[error("bad --set '{0}': {1}")]
    BadOverride(String, String),
}

impl ConfigError {
    pub fn invalid(field: &str, reason: impl Into<String>) -> Self {
        ConfigError::Invalid {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// Why a flash operation was refused or failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NandError {
    #[error("page {0:?} is beyond the device ({1} pages)")]
    PageOutOfRange(Ppn, u64),
    #[error("block {0:?} is beyond the device ({1} blocks)")]
    BlockOutOfRange(Pbn, u32),
    #[error("page {page} of block {pbn:?} is beyond the {usable} usable pages of a {mode} block")]
    PageBeyondMode {
        pbn: Pbn,
        page: u32,
        usable: u32,
        mode: CellMode,
    },
    #[error("{what} buffer holds {got} bytes, the operation needs {expected}")]
    BufferSize {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("byte range {offset}..{end} is beyond the {size}-byte {area}")]
    RangeOutOfArea {
        area: &'static str,
        offset: usize,
        end: usize,
        size: usize,
    },
    #[error("page {ppn:?} is already programmed; only a partial program may add to it")]
    AlreadyProgrammed { ppn: Ppn },
    #[error("page {ppn:?} programmed out of order: block {pbn:?} accepts pages from {next} on")]
    ProgramOutOfOrder { ppn: Ppn, pbn: Pbn, next: u32 },
    #[error("page {ppn:?} lies in a {mode} block, which does not allow partial programs")]
    PartialProgramNotAllowed { ppn: Ppn, mode: CellMode },
    #[error("page {ppn:?} has had {limit} programs, the partial-program limit (NOP) of its mode")]
    NopExceeded { ppn: Ppn, limit: u8 },
    #[error("partial program of page {ppn:?} would turn programmed bits back to erased at {area} byte {offset}")]
    WouldSetBits {
        ppn: Ppn,
        area: &'static str,
        offset: usize,
    },
    #[error("block {pbn:?} cannot be erased as {mode}: the chip is {native}")]
    ModeUnsupported {
        pbn: Pbn,
        mode: CellMode,
        native: CellMode,
    },
    #[error("block {0:?} is bad")]
    BadBlock(Pbn),
    #[error(
        "block {pbn:?} wore out after {erase_count} erases (endurance {endurance}); it is now bad"
    )]
    WornOut {
        pbn: Pbn,
        erase_count: u32,
        endurance: u32,
    },
    #[error("block {0:?} was interrupted while erasing and must be erased again")]
    NeedsErase(Pbn),
    #[error("page {ppn:?} is uncorrectable: {bit_errors} bit errors in one codeword, ECC corrects {correctable}")]
    Uncorrectable {
        ppn: Ppn,
        bit_errors: u32,
        correctable: u32,
    },
    #[error("page {0:?} is torn (its program, or a program above it on its word line, was interrupted by a power loss or failed on the media) and is uncorrectable")]
    Torn(Ppn),
    #[error("program of page {0:?} failed (status fail); its block is now bad")]
    ProgramFailed(Ppn),
    #[error("erase of block {0:?} failed (status fail); it is now bad")]
    EraseFailed(Pbn),
    #[error("a partial program must write at least one byte of data or OOB")]
    EmptyProgram,
    #[error("power was lost during this operation")]
    PowerLost,
    #[error("the device is powered off; power it on first")]
    PoweredOff,
    #[error("the device keeps its data in RAM, and {mapped_bytes} bytes of it would leave less than the {available_bytes} bytes the host had free; use store = \"meta\" (no data kept), an image file, or a smaller device")]
    OutOfMemory {
        mapped_bytes: u64,
        available_bytes: u64,
    },
    #[error("multi-plane operation: {0}")]
    MultiPlane(String),
    #[error("device image: {0}")]
    Image(String),
}

impl NandError {
    /// True for failures that the flash itself reports (status fail, ECC) rather than misuse.
    pub fn is_media_error(&self) -> bool {
        matches!(
            self,
            NandError::BadBlock(_)
                | NandError::WornOut { .. }
                | NandError::NeedsErase(_)
                | NandError::Uncorrectable { .. }
                | NandError::Torn(_)
                | NandError::ProgramFailed(_)
                | NandError::EraseFailed(_)
                | NandError::PowerLost
                | NandError::PoweredOff
        )
    }
}
