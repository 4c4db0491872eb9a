//! What the kit tests share: an engine on a RAM disk with a flash-like latency profile.

use storage::crashdisk::CrashDisk;
use storage::{BlockPageStore, Engine, EngineConfig};

/// A fresh engine on a 64 MiB `CrashDisk` (50 us reads, 250 us writes, 10 us flushes) with a
/// buffer pool of `buffer_frames` 4 KiB frames.
pub fn engine_with_frames(buffer_frames: usize) -> Engine {
    let mut d = CrashDisk::new(16384);
    d.read_ns = 50_000;
    d.write_ns = 250_000;
    d.flush_ns = 10_000;
    let store = BlockPageStore::new(Box::new(d), 4096, Some(1024)).expect("page store");
    Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames,
            ..EngineConfig::default()
        },
    )
    .expect("engine")
}
