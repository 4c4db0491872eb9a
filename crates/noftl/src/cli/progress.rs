//! The one drawer of progress for every verb: `lab::progress`'s observer, drawn as an
//! indicatif bar with ETA on standard error. A phase's bar appears once the phase has run for
//! [`SHOW_AFTER`] (a short run draws nothing), and never when standard error is not a terminal
//! (a log, CI, a pipe) or with the global `--quiet`. Bars never touch standard output or a
//! result file (lab::progress invariant 1): `compare --json` writes the same bytes either way.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a phase runs before its bar is drawn.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// The phase open now, and its bar once drawn.
#[derive(Debug)]
struct Open {
    what: String,
    unit: String,
    total: u64,
    done: u64,
    started: Instant,
    bar: Option<ProgressBar>,
}

#[derive(Debug)]
struct Bars {
    /// Bars are drawn (standard error is a terminal and not --quiet).
    draw: bool,
    /// --quiet: the progress lines (`lab::progress::note`) are left out too.
    quiet: bool,
    open: Mutex<Option<Open>>,
}

fn style(o: &Open) -> ProgressStyle {
    let template = if o.total == 0 {
        format!(
            "{{spinner}} {} [{{elapsed_precise}}] {{pos}} {}",
            o.what, o.unit
        )
    } else {
        format!(
            "{} {{wide_bar}} {{pos}}/{{len}} {} ({{elapsed}} elapsed, ETA {{eta}})",
            o.what, o.unit
        )
    };
    ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl Bars {
    /// Moves the open phase to `done` steps, drawing its bar once it has run long enough.
    fn update(&self, step: impl FnOnce(u64) -> u64) {
        if !self.draw {
            return;
        }
        let Ok(mut open) = self.open.lock() else {
            return;
        };
        let Some(o) = open.as_mut() else { return };
        o.done = step(o.done);
        if o.bar.is_none() && o.started.elapsed() >= SHOW_AFTER {
            let bar = ProgressBar::with_draw_target(
                (o.total > 0).then_some(o.total),
                ProgressDrawTarget::stderr(),
            )
            // The bar's elapsed time and ETA count from the phase's start, not from when it
            // appeared.
            .with_elapsed(o.started.elapsed());
            bar.set_style(style(o));
            bar.enable_steady_tick(Duration::from_millis(200));
            o.bar = Some(bar);
        }
        if let Some(bar) = &o.bar {
            bar.set_position(o.done);
        }
    }
}

impl lab::progress::Observer for Bars {
    fn begin(&self, what: &str, total: u64, unit: &str) {
        if !self.draw {
            return;
        }
        if let Ok(mut open) = self.open.lock() {
            if let Some(bar) = open.take().and_then(|o| o.bar) {
                bar.finish_and_clear();
            }
            *open = Some(Open {
                what: what.to_string(),
                unit: unit.to_string(),
                total,
                done: 0,
                started: Instant::now(),
                bar: None,
            });
        }
    }

    fn position(&self, done: u64) {
        self.update(|_| done);
    }

    fn advance(&self, n: u64) {
        self.update(|d| d + n);
    }

    fn end(&self) {
        if let Ok(mut open) = self.open.lock() {
            if let Some(bar) = open.take().and_then(|o| o.bar) {
                bar.finish_and_clear();
            }
        }
    }

    fn note(&self, line: &str) {
        if self.quiet {
            return;
        }
        let drawn = self
            .open
            .lock()
            .ok()
            .and_then(|o| o.as_ref().and_then(|o| o.bar.clone()));
        match drawn {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

/// Whether bars are drawn in this process (standard error a terminal, no --quiet).
pub fn drawing(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// Installs the drawer for the whole process (main, before the verb runs).
pub fn install(quiet: bool) {
    lab::progress::observe(Some(Arc::new(Bars {
        draw: drawing(quiet),
        quiet,
        open: Mutex::new(None),
    })));
}
