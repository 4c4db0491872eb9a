//! How much memory the host can still give: the RAM store's budget (`store.rs`) and the CLI's
//! up-front memory plan read the same figure.

/// Memory the process may still allocate: `MemAvailable` of /proc/meminfo, and no more than
/// what the cgroup (a container's limit) leaves, plus the spare device arenas this process
/// holds for its next RAM store (`spare`). `None` where neither can be read.
pub fn available_bytes() -> Option<u64> {
    system_available_bytes().map(|b| b.saturating_add(spare::bytes()))
}

fn system_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        });
    let cgroup = cgroup_room_bytes();
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// cgroup v2: `memory.max - memory.current` of this process's cgroup, if limited.
fn cgroup_room_bytes() -> Option<u64> {
    let rel = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = rel.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let max = read("memory.max")?; // "max" (no limit) does not parse: None
    Some(max.saturating_sub(read("memory.current").unwrap_or(0)))
}

/// Arenas of dropped RAM stores, kept mapped for the next store of this process. An arena
/// keeps the bytes its last store left: nothing reads them before a program writes them (a
/// page's state says whether it was programmed, and a first program after an erase writes the
/// whole page: the RAM store's `apply`), so reuse needs no clearing. The memory they hold counts
/// as available (`available_bytes`): this process gets it back first.
pub mod spare {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use memmap2::MmapMut;

    static ARENAS: Mutex<Vec<MmapMut>> = Mutex::new(Vec::new());
    static BYTES: AtomicU64 = AtomicU64::new(0);

    /// Bytes held by spare arenas.
    pub fn bytes() -> u64 {
        BYTES.load(Ordering::Relaxed)
    }

    /// A spare arena of `len` bytes; spare arenas of other lengths are unmapped (another
    /// geometry asks now: they would only hold memory).
    pub(crate) fn take(len: usize) -> Option<MmapMut> {
        let mut arenas = ARENAS.lock().unwrap_or_else(|p| p.into_inner());
        let dropped: u64 = arenas
            .iter()
            .filter(|m| m.len() != len)
            .map(|m| m.len() as u64)
            .sum();
        arenas.retain(|m| m.len() == len);
        let map = arenas.pop();
        let taken = map.as_ref().map_or(0, |m| m.len() as u64);
        BYTES.fetch_sub(dropped + taken, Ordering::Relaxed);
        map
    }

    pub(crate) fn give(map: MmapMut) {
        let mut arenas = ARENAS.lock().unwrap_or_else(|p| p.into_inner());
        BYTES.fetch_add(map.len() as u64, Ordering::Relaxed);
        arenas.push(map);
    }
}
