//! Running terminals: a deterministic virtual-time scheduler, and a real-time runner with one
//! thread per terminal.
//!
//! Virtual time. Every terminal has its own clock. The scheduler always runs the entity with the
//! smallest clock next (terminals in index order on ties, then the log daemon, then the
//! flusher), sets the engine's clock to it, runs one step (one storage-manager call or a few),
//! and takes the engine's clock back as the terminal's new time. The step's I/O is submitted to
//! the device at the terminal's clock, so terminals contend for dies and channels in the
//! emulator's timing model. Commits use group commit: a committing terminal waits; the log
//! daemon issues one force for everything appended when it runs (at the first waiting commit's
//! time, or when the previous force completes), and acknowledges the waiting commits at that
//! force's completion time. The background entity (the engine's checkpointer and page cleaner,
//! `Engine::background`) runs a due checkpoint, or writes back dirty pages one per die at a
//! time while the pool is more than half (down to a quarter) dirty, and looks again every
//! millisecond of virtual time otherwise. Nothing reads the wall clock: a run is a function of
//! the seed.
//!
//! Approximations (also in docs/storage.md):
//! - A step runs to completion before any other entity runs; I/O inside a step is submitted at
//!   successive times of that terminal's clock, so another terminal with a smaller clock may
//!   later submit "in the past"; the device serves it from its latest submission time on
//!   (nand timing.rs invariant 4).
//! - CPU time comes from the engine's `CpuModel`, and each terminal has a core of its own.
//! - A lock conflict parks the terminal until some transaction ends; it then retries at the
//!   later of its clock and that end time.
//!
//! Invariants:
//! 1. Entities run in non-decreasing order of their clocks, ties broken by a fixed order.
//! 2. A terminal waiting for a commit resumes only at the completion time of a force that
//!    covered its commit record.
//! 3. The same engine state, terminals and seed give the same schedule.
//! 4. The measured window `[start_ns, end_ns]` contains every flash operation issued by the
//!    run: it starts on a drained device and ends on one, after every commit requested before
//!    the stop is acknowledged (`run_virtual`).

use std::sync::{Arc, Condvar, Mutex};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::{Lsn, Nanos};

/// What a terminal's step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Made progress; the engine's clock is the terminal's new time.
    Ran,
    /// Waits for a lock held by another transaction; retry the same step later.
    Blocked,
    /// Appended a commit record at this LSN; call `durable` when it is durable.
    WaitDurable(Lsn),
    /// Nothing more to do.
    Finished,
}

pub trait Terminal {
    /// Runs the next step against the engine (whose clock is this terminal's time).
    fn step(&mut self, eng: &mut Engine) -> Result<Step>;
    /// The commit this terminal waited for is durable; the engine's clock is the time it became
    /// so. The terminal finishes the commit here (`Engine::commit_finish`).
    fn durable(&mut self, eng: &mut Engine) -> Result<()>;
    /// Has the terminal begun a transaction it has not ended (committed, rolled back or given
    /// up)? A run that stops at a time lets such a transaction finish, so that the measured
    /// window holds whole transactions. The default, false, stops the terminal at the time
    /// limit wherever it is.
    fn in_transaction(&self) -> bool {
        false
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ready,
    Blocked,
    Waiting(Lsn),
    Done,
}

/// What the scheduler observed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SchedStats {
    pub steps: u64,
    pub blocked: u64,
    pub group_forces: u64,
    /// Commits acknowledged per force, summed (divide by `group_forces` for the mean group).
    pub grouped_commits: u64,
    pub flusher_runs: u64,
    /// Checkpoints completed in the window.
    pub checkpoints: u64,
    /// The window went on past `until_ns` to a checkpoint and reached one.
    pub ended_on_checkpoint: bool,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

#[derive(Clone, Copy, Debug)]
pub struct VirtualOptions {
    /// Stop when every runnable terminal's clock passed this time (None: run to completion).
    pub until_ns: Option<Nanos>,
    pub flusher: bool,
    pub flusher_period_ns: Nanos,
    /// With `until_ns`: go on past it until a checkpoint completes (at most this long past it),
    /// and stop there. A window that starts right after a checkpoint then holds whole
    /// checkpoint cycles, so whether a checkpoint (and, on NoFTL, the log release that follows
    /// it) falls inside a window no longer depends on the store's speed.
    pub end_on_checkpoint_within_ns: Option<Nanos>,
}

impl Default for VirtualOptions {
    fn default() -> Self {
        VirtualOptions {
            until_ns: None,
            flusher: true,
            flusher_period_ns: 1_000_000,
            end_on_checkpoint_within_ns: None,
        }
    }
}

/// One transaction as the result files record it (`noftl ... --results`, docs/results.md):
/// when it began, how long it took to its end (commit acknowledged or rolled back), its type
/// (the kit's index), whether it committed and which worker ran it (terminal or queue slot).
/// Terminals append one per finished transaction to a `Vec` they are given, and only then: 24
/// bytes, no other work on the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnEvent {
    pub start_ns: Nanos,
    pub latency_ns: Nanos,
    /// The terminal (from 0) or `io`'s queue slot: BenchBase's worker id.
    pub worker: u32,
    pub kind: u8,
    pub committed: bool,
}

impl TxnEvent {
    pub fn end_ns(&self) -> Nanos {
        self.start_ns + self.latency_ns
    }
}

/// Periodic samples of a virtual-time run: `on_sample(t, engine)` is called at the window's
/// start, then at every `window_ns` boundary before the first event at or after it runs (so the
/// engine's and device's counters hold everything submitted before `t`), never after the run.
/// The caller takes the final sample at `SchedStats::end_ns` itself.
#[allow(missing_debug_implementations)]
pub struct Sampler<'a> {
    pub window_ns: Nanos,
    pub on_sample: &'a mut dyn FnMut(Nanos, &Engine),
}

/// Runs `terms` in virtual time from `start_ns` until all finish (or `until_ns`).
///
/// The measured window (docs/storage.md, "The measured window"): it starts at `start_ns` or,
/// if the device is still busy with earlier work, when the device has drained (so that no
/// operation counted in the window started before it); it stops admitting work at `until_ns`
/// (no transaction and no background work starts at or after it); and it ends when every
/// transaction begun before the stop has ended (`Terminal::in_transaction`), every commit
/// requested is acknowledged, and the device has drained. So the window's elapsed time
/// (`end_ns - start_ns`) covers every flash operation issued in it, and it holds whole
/// transactions. The engine's clock is left at `end_ns`.
pub fn run_virtual<T: Terminal>(
    eng: &mut Engine,
    terms: &mut [T],
    start_ns: Nanos,
    opts: VirtualOptions,
) -> Result<SchedStats> {
    run_virtual_sampled(eng, terms, start_ns, opts, None)
}

/// `run_virtual`, with periodic samples (`Sampler`). One comparison per scheduled event when
/// given, none when not.
pub fn run_virtual_sampled<T: Terminal>(
    eng: &mut Engine,
    terms: &mut [T],
    start_ns: Nanos,
    opts: VirtualOptions,
    sampler: Option<&mut Sampler<'_>>,
) -> Result<SchedStats> {
    eng.set_background_mode(opts.flusher);
    let r = run_virtual_inner(eng, terms, start_ns, opts, sampler);
    eng.set_background_mode(false);
    let stats = r?;
    eng.set_now(stats.end_ns);
    Ok(stats)
}

/// What the scheduler runs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    Terminal(usize),
    Daemon,
    Flusher,
}

fn run_virtual_inner<T: Terminal>(
    eng: &mut Engine,
    terms: &mut [T],
    start_ns: Nanos,
    opts: VirtualOptions,
    mut sampler: Option<&mut Sampler<'_>>,
) -> Result<SchedStats> {
    let n = terms.len();
    // Start on a quiescent device: work issued before the window completes before it.
    let start_ns = start_ns.max(eng.device_idle_ns());
    let mut next_sample = Nanos::MAX;
    if let Some(s) = sampler.as_deref_mut() {
        (s.on_sample)(start_ns, eng);
        next_sample = start_ns.saturating_add(s.window_ns.max(1));
    }
    let mut clock = vec![start_ns; n];
    let mut state = vec![State::Ready; n];
    let mut stats = SchedStats {
        start_ns,
        end_ns: start_ns,
        ..SchedStats::default()
    };
    let mut limit_ns = opts.until_ns.unwrap_or(Nanos::MAX);
    // Past `until_ns`, waiting for a checkpoint: the count when the wait began.
    let mut waiting_for_checkpoint: Option<u64> = None;
    let checkpoints0 = eng.stats().checkpoints;
    // Log daemon: a force in flight covers LSNs below `.0` and completes at `.1`.
    let mut in_flight: Option<(Lsn, Nanos)> = None;
    let mut acked_below: Lsn = 0;
    let mut last_force_done: Nanos = start_ns;
    let mut flusher_at = start_ns + opts.flusher_period_ns;
    let early = eng.acks_early();
    let mut ended = eng.stats().commits + eng.stats().aborts;
    loop {
        let next_term = next_terminal(terms, &state, &clock, limit_ns);
        let daemon_at = daemon_next(&state, &clock, acked_below, in_flight, last_force_done);
        let term_at = next_term.map(|i| clock[i]);
        let flusher_next = (opts.flusher && flusher_at < limit_ns).then_some(flusher_at);
        if let (Some(until), Some(within), None) = (
            opts.until_ns,
            opts.end_on_checkpoint_within_ns,
            waiting_for_checkpoint,
        ) {
            // No terminal or log-daemon event left before the duration's end (background work
            // alone does not keep a window going): the wait begins.
            let next_event = [term_at, daemon_at].into_iter().flatten().min();
            if limit_ns == until && next_event.is_none_or(|t| t >= until) {
                // The window reached its duration: go on to the next checkpoint's end.
                waiting_for_checkpoint = Some(eng.stats().checkpoints);
                limit_ns = until.saturating_add(within);
                continue;
            }
        }
        // Earliest event first; ties: terminals, then the daemon, then the flusher (invariant 1).
        let Some(next) = pick_next(
            (term_at, next_term),
            daemon_at,
            flusher_next,
            opts.until_ns,
            &state,
        )?
        else {
            break;
        };
        if next.0 >= next_sample {
            if let Some(s) = sampler.as_deref_mut() {
                while next.0 >= next_sample {
                    (s.on_sample)(next_sample, eng);
                    next_sample = next_sample.saturating_add(s.window_ns.max(1));
                }
            }
        }
        let next = next.1;
        match next {
            Next::Flusher => {
                let (done, more) = eng.background(flusher_at)?;
                if waiting_for_checkpoint.is_some_and(|c| eng.stats().checkpoints > c) {
                    limit_ns = limit_ns.min(done);
                    stats.ended_on_checkpoint = true;
                }
                stats.flusher_runs += 1;
                stats.end_ns = stats.end_ns.max(done);
                flusher_at = if more && done > flusher_at {
                    done
                } else {
                    done.max(flusher_at + opts.flusher_period_ns)
                };
            }
            Next::Daemon => match in_flight.take() {
                Some((covered, done)) => {
                    acked_below = acked_below.max(covered);
                    last_force_done = done;
                    stats.end_ns = stats.end_ns.max(done);
                    acknowledge(
                        eng,
                        terms,
                        (&mut state, &mut clock),
                        acked_below,
                        done,
                        &mut stats,
                    )?;
                }
                None => {
                    eng.set_now(daemon_at.unwrap_or(start_ns));
                    let done = eng.force_log()?;
                    stats.group_forces += 1;
                    in_flight = Some((eng.log_durable_lsn(), done));
                }
            },
            Next::Terminal(i) => {
                state[i] = step_terminal(eng, &mut terms[i], &mut clock[i], early, &mut stats)?;
                // A full log makes a terminal checkpoint inline: that ends the wait too.
                if waiting_for_checkpoint.is_some_and(|c| eng.stats().checkpoints > c) {
                    limit_ns = limit_ns.min(clock[i]);
                    stats.ended_on_checkpoint = true;
                }
            }
        }
        // A transaction ended: wake the blocked terminals at the waker's time.
        let e = eng.stats().commits + eng.stats().aborts;
        if e != ended {
            ended = e;
            wake_blocked(&mut state, &mut clock, eng.now());
        }
    }
    // End on a drained device: everything issued in the window has completed by `end_ns`.
    stats.end_ns = stats.end_ns.max(eng.device_idle_ns());
    stats.checkpoints = eng.stats().checkpoints - checkpoints0;
    debug_assert!(
        stats.end_ns >= stats.start_ns,
        "a window never ends before it starts"
    );
    Ok(stats)
}

/// The next terminal to step: the ready one with the earliest clock (ties to the lower index);
/// none starts a transaction at or after the limit, and one in a transaction finishes it (the
/// window's drain). A step because it is one half of the loop's "what is next".
fn next_terminal<T: Terminal>(
    terms: &[T],
    state: &[State],
    clock: &[Nanos],
    limit_ns: Nanos,
) -> Option<usize> {
    (0..terms.len())
        .filter(|&i| state[i] == State::Ready && (clock[i] < limit_ns || terms[i].in_transaction()))
        .min_by_key(|&i| (clock[i], i))
}

/// The log daemon's next event: the force in flight completing, or else a force for the
/// earliest commit not yet covered, no earlier than the last force's end. It also runs after
/// the limit, to acknowledge the commits requested before it (the window's drain). A step
/// because it is the other half of the loop's "what is next".
fn daemon_next(
    state: &[State],
    clock: &[Nanos],
    acked_below: Lsn,
    in_flight: Option<(Lsn, Nanos)>,
    last_force_done: Nanos,
) -> Option<Nanos> {
    let waiting_min = (0..state.len())
        .filter_map(|i| match state[i] {
            State::Waiting(l) if l >= acked_below => Some(clock[i]),
            _ => None,
        })
        .min();
    match in_flight {
        Some((_, done)) => Some(done),
        None => waiting_min.map(|t| t.max(last_force_done)),
    }
}

/// The scheduler's choice among the next terminal (its time and index), the log daemon and
/// the flusher: the earliest, ties to terminals, then the daemon, then the flusher (invariant
/// 1). `None` when the run is over (no terminal or daemon event left, and `until_ns` given or
/// every terminal done); an error when it stalled instead. A step because it is the rule of
/// the loop, apart from what each event does.
fn pick_next(
    (term_at, next_term): (Option<Nanos>, Option<usize>),
    daemon_at: Option<Nanos>,
    flusher_next: Option<Nanos>,
    until_ns: Option<Nanos>,
    state: &[State],
) -> Result<Option<(Nanos, Next)>> {
    let next = match (term_at, daemon_at) {
        (None, None) => {
            if until_ns.is_some() || state.iter().all(|s| *s == State::Done) {
                return Ok(None);
            }
            return Err(Error::Unsupported(
                "scheduler stalled: every terminal waits for a lock and nothing can end".into(),
            ));
        }
        (Some(a), Some(b)) if b < a => (b, Next::Daemon),
        (Some(a), _) => (
            a,
            Next::Terminal(next_term.expect("a terminal time comes from a terminal")),
        ),
        (None, Some(b)) => (b, Next::Daemon),
    };
    Ok(Some(match flusher_next {
        Some(f) if f < next.0 => (f, Next::Flusher),
        _ => next,
    }))
}

/// A log force completed at `done`: acknowledges, in terminal order, every commit it covers
/// (the group commit). A step because it is the daemon's half of a commit, done for a group.
fn acknowledge<T: Terminal>(
    eng: &mut Engine,
    terms: &mut [T],
    (state, clock): (&mut [State], &mut [Nanos]),
    acked_below: Lsn,
    done: Nanos,
    stats: &mut SchedStats,
) -> Result<()> {
    let mut group = 0;
    for i in 0..terms.len() {
        if let State::Waiting(l) = state[i] {
            if l < acked_below {
                clock[i] = clock[i].max(done);
                eng.set_now(clock[i]);
                terms[i].durable(eng)?;
                clock[i] = clock[i].max(eng.now());
                stats.end_ns = stats.end_ns.max(clock[i]);
                state[i] = State::Ready;
                group += 1;
            }
        }
    }
    stats.grouped_commits += group;
    Ok(())
}

/// Runs one step of a terminal at its clock and returns its new state (a commit is
/// acknowledged at once when the store acks early or nothing was logged). A step because it
/// is the terminal's event, apart from the checks the loop makes after it.
fn step_terminal<T: Terminal>(
    eng: &mut Engine,
    term: &mut T,
    clock: &mut Nanos,
    early: bool,
    stats: &mut SchedStats,
) -> Result<State> {
    eng.set_now(*clock);
    let r = term.step(eng)?;
    stats.steps += 1;
    *clock = (*clock).max(eng.now());
    let state = match r {
        Step::Ran => State::Ready,
        Step::Blocked => {
            stats.blocked += 1;
            State::Blocked
        }
        Step::WaitDurable(lsn) if early || lsn == 0 => {
            term.durable(eng)?;
            *clock = (*clock).max(eng.now());
            State::Ready
        }
        Step::WaitDurable(lsn) => State::Waiting(lsn),
        Step::Finished => State::Done,
    };
    stats.end_ns = stats.end_ns.max(*clock);
    Ok(state)
}

/// A transaction ended at `t`: every blocked terminal becomes ready, no earlier than `t`. A
/// step because it is the one place lock waiters wake.
fn wake_blocked(state: &mut [State], clock: &mut [Nanos], t: Nanos) {
    for i in 0..state.len() {
        if state[i] == State::Blocked {
            state[i] = State::Ready;
            clock[i] = clock[i].max(t);
        }
    }
}

impl SchedStats {
    /// The measured window's length.
    pub fn elapsed_ns(&self) -> Nanos {
        self.end_ns - self.start_ns
    }
}

fn lock_engine(m: &Mutex<Engine>) -> Result<std::sync::MutexGuard<'_, Engine>> {
    m.lock()
        .map_err(|_| Error::Unsupported("engine mutex poisoned".into()))
}

/// Runs `terms` in real time, one thread each, sharing the engine behind a mutex (steps are
/// atomic; lock waits sleep on a condition variable until some transaction ends; each commit
/// forces the log itself, so concurrent commits share forces only by chance).
///
/// The engine's clock follows the wall clock. A step's device requests are scheduled at the
/// wall-clock time the step starts and complete at their modelled times; the terminal then waits
/// for that completion on the wall clock *without the engine lock*, so that other terminals run
/// meanwhile and device waits overlap as they would on a real device. The commit is acknowledged
/// only once the wall clock has reached the log force's completion. The CPU model is switched
/// off: here the CPU time is real, and charging the model as well would count it twice.
pub fn run_real<T: Terminal + Send + 'static>(
    mut eng: Engine,
    terms: Vec<T>,
) -> Result<(Engine, Vec<T>)> {
    eng.set_cpu_model(crate::engine::CpuModel::NONE);
    // The wall clock starts where the engine's (and so the device's) virtual clock stands after
    // loading; otherwise the first requests would queue behind the load's device time.
    let offset_ns = eng.now();
    let shared = Arc::new((Mutex::new(eng), Condvar::new()));
    let clock = nand::RealClock::new();
    let now_ns = move || offset_ns + clock.now_ns();
    let wait_until = move |t_ns: Nanos| clock.wait_until(t_ns.saturating_sub(offset_ns));
    let handles: Vec<_> = terms
        .into_iter()
        .map(|mut t| {
            let sh = Arc::clone(&shared);
            std::thread::spawn(move || -> Result<T> {
                let (m, cv) = &*sh;
                let mut g = lock_engine(m)?;
                loop {
                    g.set_now(now_ns());
                    let ended = g.stats().commits + g.stats().aborts;
                    let r = t.step(&mut g)?;
                    // The step's device requests complete at g.now(): wait for them unlocked.
                    let io_done_ns = g.now();
                    match r {
                        Step::Ran => {}
                        Step::Blocked => {
                            g = cv
                                .wait(g)
                                .map_err(|_| Error::Unsupported("engine mutex poisoned".into()))?;
                        }
                        Step::WaitDurable(lsn) => {
                            if !g.is_durable(lsn) {
                                g.force_log()?;
                            }
                            // Acknowledge only when the force has completed on the wall clock.
                            let forced_ns = g.now();
                            drop(g);
                            wait_until(forced_ns);
                            g = lock_engine(m)?;
                            g.set_now(now_ns());
                            t.durable(&mut g)?;
                        }
                        Step::Finished => {
                            cv.notify_all();
                            return Ok(t);
                        }
                    }
                    if g.stats().commits + g.stats().aborts != ended {
                        cv.notify_all();
                    }
                    // Let other threads in between steps, and wait out this step's device time.
                    drop(g);
                    wait_until(io_done_ns);
                    g = lock_engine(m)?;
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(t)) => out.push(t),
            Ok(Err(e)) => err = Some(e),
            Err(_) => err = Some(Error::Unsupported("a terminal thread panicked".into())),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let (m, _) =
        Arc::try_unwrap(shared).map_err(|_| Error::Unsupported("engine still shared".into()))?;
    let eng = m
        .into_inner()
        .map_err(|_| Error::Unsupported("engine mutex poisoned".into()))?;
    Ok((eng, out))
}
