//! `nand`: an emulated NAND flash device that behaves like real chips and keeps real data.
//!
//! - [`Geometry`] and typed addresses ([`Ppn`], [`Pbn`], [`PhysAddr`]);
//! - [`DeviceConfig`] with embedded presets and `key=value` overrides;
//! - [`Nand`]: the NAND rules enforced with typed errors, wear and endurance, bit errors with ECC,
//!   power loss and injected failures, timing with die and channel parallelism in virtual time;
//! - [`RealTimeNand`]: the same device in real time, shared by threads;
//! - statistics split by [`Purpose`], energy, and an optional per-operation trace.
//!
//! See `docs/nand.md` for the model, its sources and its invariants.

pub mod clock;
pub mod config;
pub mod device;
pub mod error;
pub mod geometry;
pub mod host_memory;
pub mod stats;
pub mod store;
pub mod timing;
pub mod workload;

pub use clock::{ClockMode, RealClock, RealTimeNand};
pub use config::{CellMode, DeviceConfig, PageType, StoreKind, DEFAULT_PRESET, PRESETS};
pub use device::{BlockInfo, Done, FaultPlan, Nand};
pub use error::{ConfigError, NandError};
pub use geometry::{DieId, Geometry, Pbn, PhysAddr, Ppn};
pub use stats::{
    FlashCounts, LatencySummary, OpKind, PageTypeCounts, Purpose, StatsReport, TraceEntry,
};
pub use store::{BlockState, ImageLayout};
pub use timing::Nanos;
