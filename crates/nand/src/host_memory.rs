//! How much memory the host can still give: the RAM store's budget (`store.rs`) and the CLI's
//! up-front memory plan read the same figure.

/// Memory the process may still allocate: `MemAvailable` of /proc/meminfo, and no more than
/// what the cgroup (a container's limit) leaves, plus the spare device arenas this process
/// holds for its next RAM store (`store::spare`). `None` where neither can be read.
pub fn available_bytes() -> Option<u64> {
    system_available_bytes().map(|b| b.saturating_add(crate::store::spare::bytes()))
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
