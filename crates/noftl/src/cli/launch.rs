//! The seam between the top of the command line and the verbs that run other verbs.
//!
//! `cli` (the top) holds the parser (`Cli`) and the dispatch (`cli::run`) and names every verb.
//! The dashboard runs a command line on a thread of its own process and the sweep checks each
//! job's command line before any job starts: both need the parser, the dashboard the dispatch
//! too, and each reads a little of a parsed command. They get these from the top as a
//! [`Launcher`] (built by `cli::launcher`), never by naming `Cli` or `Command` themselves, so
//! the imports go one way: `cli` -> dashboard, sweep -> launch.
//!
//! A parsed command line is a [`Job`]: opaque here and below, taken apart only by the top.

use std::any::Any;

use super::common::DeviceArgs;
use super::iaa;

/// A command line parsed by the CLI's parser, opaque to every module but the one that built it.
pub struct Job(Box<dyn Any + Send>);

impl Job {
    /// Wraps a parsed command (`cli::Cli`).
    pub fn new<T: Any + Send>(parsed: T) -> Job {
        Job(Box::new(parsed))
    }

    /// The parsed command, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }

    /// The parsed command, if it is a `T`; otherwise the job back.
    pub fn take<T: Any>(self) -> Result<T, Job> {
        self.0.downcast().map(|b| *b).map_err(Job)
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job(..)")
    }
}

/// What the verbs that run other verbs get of the command line: its parser, its dispatch and
/// the parts of a parsed command they read. Plain functions, so a `Launcher` is `Copy` and can
/// go to any thread.
#[derive(Clone, Copy, Debug)]
pub struct Launcher {
    /// Parses a command line (without the program name; errors name the program `noftl`) with
    /// the CLI's own parser.
    pub parse: fn(&[String]) -> Result<Job, clap::Error>,
    /// Runs a parsed command with the CLI's own dispatch.
    pub run: fn(Job) -> anyhow::Result<()>,
    /// The device arguments of `io`, `bench tpcb`, `bench tatp` and `bench tpcc`: the verbs
    /// whose memory a sweep estimates from their device. None for the others.
    pub device: fn(&Job) -> Option<&DeviceArgs>,
    /// The arguments of an `iaa compare`; None for every other command.
    pub iaa_compare: fn(&Job) -> Option<&iaa::CompareArgs>,
}
