//! `nbd`: a Network Block Device server for any [`ftl::BlockDevice`], written from the
//! upstream NBD protocol document: the fixed newstyle handshake (EXPORT_NAME, INFO, GO, LIST,
//! ABORT, STRUCTURED_REPLY, LIST/SET_META_CONTEXT with `base:allocation`) and the transmission
//! phase (READ, WRITE, DISC, FLUSH, TRIM, WRITE_ZEROES, BLOCK_STATUS, FUA), simple replies or
//! structured ones when negotiated, multi-conn, connection limits and timeouts. `noftl serve`
//! is its command line.
//! See `docs/nbd.md` for the subset, the limits and the error mapping.
//!
//! Layers, bottom up (each module imports only modules listed before it):
//! - [`proto`]: wire format (pure, fuzzed);
//! - [`export`]: the shared device, the clock, counters and latency;
//! - [`handshake`]: option haggling;
//! - [`conn`]: one connection, a reader that schedules and a writer that replies when due;
//! - [`server`]: listeners, connection slots and timeouts, signals, statistics.
//!
//! Invariants of the whole (each module lists its own):
//! 1. No input from a client panics the server or affects other connections: a malformed
//!    request gets an error reply, a protocol violation closes that connection only.
//! 2. The device lock is held only while a request is scheduled, never while it waits.
//! 3. Acknowledged writes follow the device's durability contract: a FLUSH reply or a FUA
//!    write's reply is sent only after the device's flush/FUA write has returned.

pub mod conn;
pub mod export;
pub mod handshake;
pub mod proto;
pub mod server;

pub use export::Export;
pub use server::{Endpoint, ServerConfig};
