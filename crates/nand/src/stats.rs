//! Counters, histograms, energy and the optional per-operation trace.
//!
//! Every counter is split by the purpose the caller tags an operation with, so that the layers
//! above (FTLs, the engine) get their host/GC/mapping breakdowns without counting twice.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::config::PageType;
use crate::timing::Nanos;

/// Why an operation was issued. Callers pass it; the device only counts by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Host,
    Gc,
    Mapping,
    WearLevel,
    Log,
    Meta,
    Recovery,
    /// Filler pages that complete a word line of an MLC/TLC block before data on its lower pages
    /// is relied upon (paired-page safety, ftl space.rs invariant 9).
    Pad,
}

impl Purpose {
    pub const ALL: [Purpose; 8] = [
        Purpose::Host,
        Purpose::Gc,
        Purpose::Mapping,
        Purpose::WearLevel,
        Purpose::Log,
        Purpose::Meta,
        Purpose::Recovery,
        Purpose::Pad,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Host => "host",
            Purpose::Gc => "gc",
            Purpose::Mapping => "mapping",
            Purpose::WearLevel => "wear_level",
            Purpose::Log => "log",
            Purpose::Meta => "meta",
            Purpose::Recovery => "recovery",
            Purpose::Pad => "pad",
        }
    }
}

/// The kinds of flash operation that are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Read,
    Program,
    PartialProgram,
    Erase,
    OobRead,
    OobWrite,
}

impl OpKind {
    pub const ALL: [OpKind; 6] = [
        OpKind::Read,
        OpKind::Program,
        OpKind::PartialProgram,
        OpKind::Erase,
        OpKind::OobRead,
        OpKind::OobWrite,
    ];
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Program => "program",
            OpKind::PartialProgram => "partial_program",
            OpKind::Erase => "erase",
            OpKind::OobRead => "oob_read",
            OpKind::OobWrite => "oob_write",
        }
    }
}

/// One line of the per-operation trace (NoFTL Fig. 7, at the flash level).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    pub seq: u64,
    pub op: OpKind,
    pub purpose: Purpose,
    /// Page number, or block number for erases.
    pub address: u64,
    pub die: u32,
    pub submit_ns: Nanos,
    pub start_ns: Nanos,
    pub done_ns: Nanos,
    /// "ok", or the error's short name.
    pub status: String,
}

#[derive(Debug, Clone)]
pub struct Stats {
    counts: [[u64; 8]; 6],
    pub bytes_read: u64,
    pub bytes_programmed: u64,
    pub corrected_bits: u64,
    pub corrected_reads: u64,
    pub uncorrectable_reads: u64,
    pub failed_programs: u64,
    pub failed_erases: u64,
    pub power_losses: u64,
    /// Partial programs of programmed pages (appends) cut by a power loss or a status fail.
    pub torn_appends: u64,
    /// Energy of the operations themselves (array and bus), joules.
    pub active_joules: f64,
    latency_ns: [Histogram<u64>; 4],
    /// Per page type (`PAGE_TYPES` order): reads, programs, and their array nanoseconds.
    page_types: [[u64; 4]; 4],
}

/// The page types in the order of `Stats::page_types`.
const PAGE_TYPES: [PageType; 4] = [
    PageType::Slc,
    PageType::Lower,
    PageType::Middle,
    PageType::Upper,
];

/// Reads and programs of one page type, with the array time they took: MLC/TLC results are
/// read per page type, because lower, middle and upper pages differ several times in latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageTypeCounts {
    pub page_type: PageType,
    pub reads: u64,
    pub programs: u64,
    /// Sum of the array times (tR, tPROG) of those reads and programs.
    pub read_array_ns: u64,
    pub program_array_ns: u64,
}

impl PageTypeCounts {
    /// `after` minus `before` per page type (types with no operation in between are left out).
    pub fn between(before: &[PageTypeCounts], after: &[PageTypeCounts]) -> Vec<PageTypeCounts> {
        after
            .iter()
            .map(|a| {
                let b = before.iter().find(|b| b.page_type == a.page_type);
                let sub = |f: fn(&PageTypeCounts) -> u64| f(a) - b.map_or(0, f);
                PageTypeCounts {
                    page_type: a.page_type,
                    reads: sub(|c| c.reads),
                    programs: sub(|c| c.programs),
                    read_array_ns: sub(|c| c.read_array_ns),
                    program_array_ns: sub(|c| c.program_array_ns),
                }
            })
            .filter(|c| c.reads + c.programs > 0)
            .collect()
    }
}

impl Default for Stats {
    fn default() -> Self {
        let h = || {
            Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds")
        };
        Stats {
            counts: [[0; 8]; 6],
            bytes_read: 0,
            bytes_programmed: 0,
            corrected_bits: 0,
            corrected_reads: 0,
            uncorrectable_reads: 0,
            failed_programs: 0,
            failed_erases: 0,
            power_losses: 0,
            torn_appends: 0,
            active_joules: 0.0,
            latency_ns: [h(), h(), h(), h()],
            page_types: [[0; 4]; 4],
        }
    }
}

fn latency_slot(op: OpKind) -> usize {
    match op {
        OpKind::Read | OpKind::OobRead => 0,
        OpKind::Program => 1,
        OpKind::PartialProgram | OpKind::OobWrite => 2,
        OpKind::Erase => 3,
    }
}

impl Stats {
    #[inline]
    pub fn count(&mut self, op: OpKind, purpose: Purpose, latency_ns: Nanos) {
        self.counts[op as usize][purpose as usize] += 1;
        // Saturating: a latency beyond the histogram's hour-long range is recorded at its top.
        let _ = self.latency_ns[latency_slot(op)].record(latency_ns.clamp(1, 3_600_000_000_000));
    }

    /// A data read (`program == false`) or a full-page program of a page of type `t`, whose
    /// array time was `array_ns`.
    #[inline]
    pub fn count_page_type(&mut self, t: PageType, program: bool, array_ns: Nanos) {
        let c = &mut self.page_types[t as usize];
        c[usize::from(program)] += 1;
        c[2 + usize::from(program)] += array_ns;
    }

    /// Reads and programs per page type, the types with any.
    pub fn page_type_counts(&self) -> Vec<PageTypeCounts> {
        PAGE_TYPES
            .iter()
            .zip(self.page_types.iter())
            .filter(|(_, c)| c[0] + c[1] > 0)
            .map(|(&page_type, c)| PageTypeCounts {
                page_type,
                reads: c[0],
                programs: c[1],
                read_array_ns: c[2],
                program_array_ns: c[3],
            })
            .collect()
    }

    pub fn get(&self, op: OpKind, purpose: Purpose) -> u64 {
        self.counts[op as usize][purpose as usize]
    }

    pub fn total(&self, op: OpKind) -> u64 {
        self.counts[op as usize].iter().sum()
    }

    pub fn latency(&self, op: OpKind) -> &Histogram<u64> {
        &self.latency_ns[latency_slot(op)]
    }

    /// Counts as a serializable table.
    pub fn flash_counts(&self) -> FlashCounts {
        FlashCounts {
            reads: self.total(OpKind::Read),
            programs: self.total(OpKind::Program),
            partial_programs: self.total(OpKind::PartialProgram),
            erases: self.total(OpKind::Erase),
            oob_reads: self.total(OpKind::OobRead),
            oob_writes: self.total(OpKind::OobWrite),
        }
    }

    /// Counts of one purpose.
    pub fn flash_counts_for(&self, p: Purpose) -> FlashCounts {
        FlashCounts {
            reads: self.get(OpKind::Read, p),
            programs: self.get(OpKind::Program, p),
            partial_programs: self.get(OpKind::PartialProgram, p),
            erases: self.get(OpKind::Erase, p),
            oob_reads: self.get(OpKind::OobRead, p),
            oob_writes: self.get(OpKind::OobWrite, p),
        }
    }
}

/// Flash operation counts: the stable field names of every JSON result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlashCounts {
    pub reads: u64,
    pub programs: u64,
    pub partial_programs: u64,
    pub erases: u64,
    pub oob_reads: u64,
    pub oob_writes: u64,
}

impl FlashCounts {
    pub fn saturating_sub(&self, o: &FlashCounts) -> FlashCounts {
        FlashCounts {
            reads: self.reads.saturating_sub(o.reads),
            programs: self.programs.saturating_sub(o.programs),
            partial_programs: self.partial_programs.saturating_sub(o.partial_programs),
            erases: self.erases.saturating_sub(o.erases),
            oob_reads: self.oob_reads.saturating_sub(o.oob_reads),
            oob_writes: self.oob_writes.saturating_sub(o.oob_writes),
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl LatencySummary {
    pub fn from_ns_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: h.value_at_quantile(0.50) as f64 / 1000.0,
            p99: h.value_at_quantile(0.99) as f64 / 1000.0,
            max: h.max() as f64 / 1000.0,
        }
    }
}

/// Energy split into its sources, joules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    pub active_joules: f64,
    pub idle_joules: f64,
    pub total_joules: f64,
}

/// Everything the device knows about a run, as exported to JSON and CSV.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatsReport {
    pub device: String,
    pub virtual_ns: Nanos,
    pub flash: FlashCounts,
    pub by_purpose: Vec<PurposeCounts>,
    /// Data reads and full-page programs per page type (lower/middle/upper on MLC/TLC).
    #[serde(default)]
    pub by_page_type: Vec<PageTypeCounts>,
    pub bytes_read: u64,
    pub bytes_programmed: u64,
    pub ecc: EccReport,
    pub failed_programs: u64,
    pub failed_erases: u64,
    pub power_losses: u64,
    /// Appends (partial programs of programmed pages) cut by a power loss or a status fail.
    #[serde(default)]
    pub torn_appends: u64,
    pub bad_blocks: BadBlockReport,
    pub erase_count: EraseCountReport,
    pub latency_us: LatencyReport,
    pub energy: EnergyReport,
    pub die_utilization: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PurposeCounts {
    pub purpose: Purpose,
    #[serde(flatten)]
    pub counts: FlashCounts,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccReport {
    pub corrected_bits: u64,
    pub corrected_reads: u64,
    pub uncorrectable_reads: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadBlockReport {
    pub factory: u32,
    pub grown: u32,
}

/// Erase counts over all blocks: extremes, mean and a histogram of `buckets` equal-width bins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EraseCountReport {
    pub min: u32,
    pub max: u32,
    pub mean: f64,
    pub bucket_width: u32,
    pub histogram: Vec<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    pub read: LatencySummary,
    pub program: LatencySummary,
    pub partial_program: LatencySummary,
    pub erase: LatencySummary,
}

impl StatsReport {
    /// One `key,value` line per scalar, for spreadsheets and plots.
    pub fn to_csv(&self) -> String {
        let mut out = String::from("metric,value\n");
        let mut line = |k: &str, v: String| {
            out.push_str(k);
            out.push(',');
            out.push_str(&v);
            out.push('\n');
        };
        line("virtual_ns", self.virtual_ns.to_string());
        let f = &self.flash;
        for (k, v) in [
            ("reads", f.reads),
            ("programs", f.programs),
            ("partial_programs", f.partial_programs),
            ("erases", f.erases),
            ("oob_reads", f.oob_reads),
            ("oob_writes", f.oob_writes),
        ] {
            line(&format!("flash.{k}"), v.to_string());
        }
        for p in &self.by_purpose {
            let c = &p.counts;
            for (k, v) in [
                ("reads", c.reads),
                ("programs", c.programs),
                ("partial_programs", c.partial_programs),
                ("erases", c.erases),
                ("oob_reads", c.oob_reads),
                ("oob_writes", c.oob_writes),
            ] {
                line(&format!("purpose.{}.{k}", p.purpose.name()), v.to_string());
            }
        }
        line("ecc.corrected_bits", self.ecc.corrected_bits.to_string());
        line(
            "ecc.uncorrectable_reads",
            self.ecc.uncorrectable_reads.to_string(),
        );
        line("bad_blocks.factory", self.bad_blocks.factory.to_string());
        line("bad_blocks.grown", self.bad_blocks.grown.to_string());
        line("erase_count.min", self.erase_count.min.to_string());
        line("erase_count.max", self.erase_count.max.to_string());
        line("erase_count.mean", format!("{:.3}", self.erase_count.mean));
        for (k, l) in [
            ("read", self.latency_us.read),
            ("program", self.latency_us.program),
            ("erase", self.latency_us.erase),
        ] {
            line(&format!("latency_us.{k}.mean"), format!("{:.3}", l.mean));
            line(&format!("latency_us.{k}.p99"), format!("{:.3}", l.p99));
        }
        line(
            "energy.active_joules",
            format!("{:.9}", self.energy.active_joules),
        );
        line(
            "energy.idle_joules",
            format!("{:.9}", self.energy.idle_joules),
        );
        line(
            "energy.total_joules",
            format!("{:.9}", self.energy.total_joules),
        );
        line("die_utilization", format!("{:.6}", self.die_utilization));
        out
    }
}
