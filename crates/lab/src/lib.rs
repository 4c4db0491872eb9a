//! `lab`: the experiment library. Everything an experiment is, callable from the CLI, the
//! dashboard, sweeps or a program: the units of its inputs, the device and store it runs on
//! (built from plain spec structs, not from command-line arguments), the result files it
//! writes, and the runner that drives workloads.
//!
//! Layers, bottom up (each module imports only modules listed before it):
//! - [`units`]: sizes, percentages, durations, parsed one way for every caller.
//! - [`limits`]: every size-like input checked against its range and the machine's memory.
//! - [`cpu`]: host CPU profiles (measured, paper-noftl, none, a file) in virtual time.
//! - [`filelock`], [`output`]: locks on the files a run owns; every file the tool writes,
//!   through one rule (never over an input, an image or a file another process holds).
//! - [`progress`]: what a long run tells while it goes (phases, steps, lines), to the observer
//!   its caller installs (the CLI draws bars); no drawing here.
//! - [`device`]: `DeviceSpec`, a preset or TOML file with overrides.
//! - [`targets`]: `TargetSpec`, a block device (an FTL or a RAM disk) on a device.
//! - [`results`]: result directories (summary, samples, raw rows, fio-shaped JSON).
//! - [`stores`]: the NoFTL store on a device, its log or objects in regions of their own.
//! - [`measure`]: snapshots of the counters, figures per transaction, the window's self-check.
//! - [`steady`]: the steady-state rule (SNIA SSS PTS 2.1.24) over rounds, and its round loop.
//! - [`runner`]: terminals run in virtual or real time, marks for samples, result directories.
//! - [`workload`]: the `Workload` trait every transactional workload implements, and the one
//!   runner of a measured window (`run_window`).
//! - [`workloads`]: TPC-B, TATP, TPC-C and TPC-H, one file each, and the registry by name.
//! - [`experiments`]: the experiments, one module each: a spec in, a result out.
//!
//! The crate sits between the benchmark kits (`kits`) and the command line
//! (`noftl`), which only parses and prints. docs/ARCHITECTURE.md draws the whole stack.

pub mod cpu;
pub mod device;
pub mod distribution;
pub mod experiments;
pub mod filelock;
pub mod fio_job;
pub mod limits;
pub mod measure;
pub mod output;
pub mod progress;
pub mod results;
pub mod runner;
pub mod scratch;
pub mod steady;
pub mod stores;
pub mod targets;
pub mod trace;
pub mod units;
pub mod workload;
pub mod workloads;
