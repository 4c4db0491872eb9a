//! What `noftl reproduce` takes and the set-up it runs: below the runs and the table, which
//! both read it.

use std::path::PathBuf;

use serde::Serialize;

/// The papers `reproduce` knows.
pub const PAPERS: [&str; 3] = ["noftl", "amf", "dfs"];

/// What `noftl reproduce` takes.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The paper: noftl, amf or dfs.
    pub paper: String,
    /// The noftl program (amf: its `serve` exports the device, and the guest runs its `fs
    /// waf-workload`; dfs: its `serve` and `mount`, and the guest runs its `fs app-workload`;
    /// the CLI passes itself).
    pub noftl: PathBuf,
    /// Small scales (CI): the machinery, not the paper's set-up.
    pub quick: bool,
    /// Rows run at once.
    pub jobs: usize,
    /// The host CPU profile (default paper-noftl).
    pub cpu: String,
    /// Measured windows per store (None: 3; 2 with `quick`).
    pub repeat: Option<u32>,
    /// Virtual length of a window (None: 30s; 5s with `quick`).
    pub duration: Option<String>,
    /// Only the OLTP rows, or only TPC-H, or only Fig. 4, or only today's chips (None: the
    /// paper's figures, without today's chips). amf: the workloads of the rows to run,
    /// comma-separated (None: all ten of `amf::DEFAULT_WORKLOADS`). dfs: the applications of
    /// the rows, comma-separated (None: sort, zipf, vmupdate, scan).
    pub only: Option<String>,
    /// Also the OLTP rows on today's chips (beyond the paper; a second table).
    pub today: bool,
    /// The OLTP rows' warm-up: auto (None) or precondition (`compare`'s `--warmup`).
    pub warmup: Option<String>,
    /// RAM one run may take beside the others the local scheduler runs at once (`schedule`);
    /// None: what is available.
    pub memory_cap_bytes: Option<u64>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            paper: "noftl".into(),
            noftl: PathBuf::from("noftl"),
            quick: false,
            jobs: 2,
            cpu: "paper-noftl".into(),
            repeat: None,
            duration: None,
            only: None,
            today: false,
            warmup: None,
            memory_cap_bytes: None,
        }
    }
}

/// The set-up, as run.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    pub preset: &'static str,
    pub spare_factor: f64,
    pub page_bytes: usize,
    pub buffer_bytes: u64,
    pub log_device: &'static str,
    pub terminals: u32,
    pub repeat: u32,
    pub window: String,
    pub warmup: String,
    pub dftl: &'static str,
}

/// What a long reproduction tells while it goes.
pub type Progress<'a> = dyn FnMut(&str) + Send + 'a;
