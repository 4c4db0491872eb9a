//! Progress of a long run, told to whoever draws it: the lab says what it is doing (a phase of
//! so many steps, the steps done, a line for the human) and an [`Observer`] the caller installs
//! draws it. The CLI installs one that draws a bar with ETA on standard error (indicatif,
//! `noftl`'s `cli/progress.rs`); without one (the Python package, a test, a program) phases
//! cost an atomic load and notes go to standard error as plain lines.
//!
//! Invariants:
//! 1. Progress never changes a result: observers only draw; nothing here is read back by an
//!    experiment (`crates/noftl/tests/compare_cli.rs` checks the JSON with and without bars).
//! 2. One phase at a time is drawn: a phase begun while another is open replaces it (the rows
//!    of a comparison share one phase across their threads, so its steps are counted, not set).

use std::sync::{Arc, RwLock};

/// What draws progress. Called from the run's threads: implementations must be cheap, and
/// `position` may come often (once per row loaded).
pub trait Observer: Send + Sync {
    /// A phase of `total` steps (0: unknown) named `what`, counted in `unit`, begins.
    fn begin(&self, what: &str, total: u64, unit: &str);
    /// `done` steps of the phase are done.
    fn position(&self, done: u64);
    /// `n` more steps of the phase are done.
    fn advance(&self, n: u64);
    /// The phase has ended.
    fn end(&self);
    /// A line for the human (standard error), drawn above a bar when one is shown.
    fn note(&self, line: &str);
}

static OBSERVER: RwLock<Option<Arc<dyn Observer>>> = RwLock::new(None);

/// Installs `observer` for every run of this process from now on (None: plain lines).
pub fn observe(observer: Option<Arc<dyn Observer>>) {
    if let Ok(mut o) = OBSERVER.write() {
        *o = observer;
    }
}

fn current() -> Option<Arc<dyn Observer>> {
    OBSERVER.read().ok().and_then(|o| o.clone())
}

/// A line for the human: above the bar, or on standard error when nothing draws.
pub fn note(line: &str) {
    match current() {
        Some(o) => o.note(line),
        None => eprintln!("{line}"),
    }
}

/// An open phase; ends when finished or dropped (an error leaves no bar behind).
#[derive(Default)]
pub struct Phase {
    observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phase")
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

/// Begins a phase of `total` steps (0: unknown) in `unit`.
pub fn phase(what: &str, total: u64, unit: &str) -> Phase {
    let observer = current();
    if let Some(o) = &observer {
        o.begin(what, total, unit);
    }
    Phase { observer }
}

impl Phase {
    pub fn set_position(&self, done: u64) {
        if let Some(o) = &self.observer {
            o.position(done);
        }
    }

    pub fn inc(&self, n: u64) {
        if let Some(o) = &self.observer {
            o.advance(n);
        }
    }

    /// Ends the phase (its bar is cleared).
    pub fn finish_and_clear(self) {}
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(o) = self.observer.take() {
            o.end();
        }
    }
}
