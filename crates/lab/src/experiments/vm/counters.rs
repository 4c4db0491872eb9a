//! The server's counters as a guest run reports them (`DeviceCounters`), read from `noftl
//! serve`'s statistics: at shutdown (the run's results) and at each round's mark (`measure`).

use serde::Serialize;
use serde_json::Value;

/// The server's counters at shutdown: the run's results.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceCounters {
    /// Bytes the guest wrote and read through the export (NBD requests).
    pub host_write_bytes: u64,
    pub host_read_bytes: u64,
    /// NBD requests by kind.
    pub write_requests: u64,
    pub read_requests: u64,
    pub flush_requests: u64,
    pub trim_requests: u64,
    /// Zeroing requests (mkfs.ext4 zeroes its journal this way): host writes at the FTL that
    /// carry no payload, so not in `host_write_bytes`.
    pub write_zeroes_requests: u64,
    /// Logical pages the FTL was asked to write (payload and zeroing requests).
    pub host_write_pages: u64,
    /// Flash operations of the whole run (mkfs, mount, the command, unmount).
    pub flash_programs: u64,
    pub flash_reads: u64,
    pub flash_erases: u64,
    pub flash_bytes_programmed: u64,
    pub gc_migrations: Value,
    /// The FTL's flash programs per host page written (null on memdisk).
    pub waf: Value,
    /// The modelled time the dies were busy, summed over the dies.
    pub die_busy_us: f64,
    /// The device's modelled clock at shutdown (its last operation's completion).
    pub device_clock_us: f64,
    pub die_utilization: f64,
}

/// The results from the server's statistics; `dies` from the device's geometry.
pub(super) fn counters(stats: &Value, dies: u32) -> DeviceCounters {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let (req, nand, ftl) = (&stats["requests"], &stats["nand"], &stats["ftl"]);
    let clock_us = n(&nand["virtual_ns"]) as f64 / 1e3;
    let utilization = nand["die_utilization"].as_f64().unwrap_or(0.0);
    DeviceCounters {
        host_write_bytes: n(&req["bytes_written"]),
        host_read_bytes: n(&req["bytes_read"]),
        write_requests: n(&req["write"]),
        read_requests: n(&req["read"]),
        flush_requests: n(&req["flush"]),
        trim_requests: n(&req["trim"]),
        write_zeroes_requests: n(&req["write_zeroes"]),
        host_write_pages: n(&ftl["host"]["writes"]),
        flash_programs: n(&nand["flash"]["programs"]),
        flash_reads: n(&nand["flash"]["reads"]),
        flash_erases: n(&nand["flash"]["erases"]),
        flash_bytes_programmed: n(&nand["bytes_programmed"]),
        gc_migrations: ftl["gc"]["migrations"].clone(),
        waf: ftl["waf"].clone(),
        // die_utilization is busy time over (dies x clock) (nand's StatsReport).
        die_busy_us: utilization * f64::from(dies) * clock_us,
        device_clock_us: clock_us,
        die_utilization: utilization,
    }
}
