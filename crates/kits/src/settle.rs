//! How a terminal's step ends when the engine refuses it: the one rule every kit's terminals
//! follow (TPC-C adds a backoff of its own on top).

use storage::sched::Step;
use storage::{Engine, Error, Result};

/// What became of a step.
#[derive(Debug)]
pub(crate) enum Settled {
    /// The step ran, blocked or finished as `Step` says.
    Step(Step),
    /// The terminal was a deadlock victim: its transaction was rolled back and a new one begun
    /// (id in `txn`); the caller resets its own stage to retry the same input.
    Retry,
}

/// A lock wait yields (the scheduler wakes the terminal when some transaction ends); a deadlock
/// victim rolls back and starts a new transaction for the same input; other errors go up.
pub(crate) fn settle(e: &mut Engine, txn: &mut u64, step: Result<Step>) -> Result<Settled> {
    match step {
        Ok(s) => Ok(Settled::Step(s)),
        Err(Error::WouldBlock { .. }) => Ok(Settled::Step(Step::Blocked)),
        Err(Error::Deadlock { .. }) => {
            e.abort(*txn)?;
            *txn = e.begin()?;
            Ok(Settled::Retry)
        }
        Err(err) => Err(err),
    }
}
