//! A new workload is one file implementing `Workload` and `WorkloadTerminal`, plus one line in a
//! registry: this test is that file. `Appends` inserts one row per transaction into one table;
//! registered beside the built-in workloads, it is made by name and driven by the same runner
//! (`lab::workload::run_window`) as TPC-B, TATP and TPC-C.

use hdrhistogram::Histogram;
use kits::LoadMethod;
use lab::workload::{
    handles, run_window, Loaded, Params, Registration, Workload, WorkloadTerminal,
};
use storage::sched::{Step, Terminal, TxnEvent, VirtualOptions};
use storage::tuple::Value;
use storage::{Engine, EngineConfig, ObjectId, Result, TxnId};

/// One table; each transaction appends a row.
#[derive(Debug)]
struct Appends {
    rows: u32,
}

struct AppendTerminal {
    table: ObjectId,
    next: i64,
    txn: Option<(TxnId, u64)>,
    committed: u64,
    latency_ns: Histogram<u64>,
    events: Option<Vec<TxnEvent>>,
}

impl Terminal for AppendTerminal {
    fn step(&mut self, e: &mut Engine) -> Result<Step> {
        let started_ns = e.now();
        let t = e.begin()?;
        e.insert(
            t,
            self.table,
            &[Value::Int(self.next), Value::Int(started_ns as i64)],
        )?;
        self.next += 1;
        self.txn = Some((t, started_ns));
        Ok(Step::WaitDurable(e.commit_request(t)?))
    }
    fn durable(&mut self, e: &mut Engine) -> Result<()> {
        let (t, started_ns) = self.txn.take().expect("a commit was requested");
        let latency_ns = e.now().saturating_sub(started_ns).max(1);
        e.commit_finish(t)?;
        self.committed += 1;
        let _ = self.latency_ns.record(latency_ns);
        if let Some(ev) = self.events.as_mut() {
            ev.push(TxnEvent {
                start_ns: started_ns,
                latency_ns,
                kind: 0,
                // The terminal's index, set when its events join the run's trace.
                worker: 0,
                committed: true,
            });
        }
        Ok(())
    }
    fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }
}

impl WorkloadTerminal for AppendTerminal {
    fn counted(&self) -> u64 {
        self.committed
    }
    fn latency_ns(&self) -> &Histogram<u64> {
        &self.latency_ns
    }
    fn record_events(&mut self) {
        self.events = Some(Vec::new());
    }
    fn take_events(&mut self) -> Option<Vec<TxnEvent>> {
        self.events.take()
    }
}

impl Workload for Appends {
    fn name(&self) -> &'static str {
        "appends"
    }
    fn label(&self) -> &'static str {
        "Appends"
    }
    fn txn_types(&self) -> Vec<&'static str> {
        vec!["append"]
    }
    fn db_pages_estimate(&self) -> u64 {
        u64::from(self.rows) / 100 + 16
    }
    fn rows_estimate(&self) -> u64 {
        u64::from(self.rows)
    }
    fn load(
        &self,
        e: &mut Engine,
        _: LoadMethod,
        progress: &dyn Fn(u64),
    ) -> anyhow::Result<Loaded> {
        let t = e.begin()?;
        e.execute_ddl(t, "CREATE TABLE appends (id BIGINT, at BIGINT);")?;
        let table = e.table("appends")?.id;
        for i in 0..self.rows {
            e.insert(t, table, &[Value::Int(-i64::from(i) - 1), Value::Int(0)])?;
            progress(u64::from(i) + 1);
        }
        e.commit(t)?;
        Ok(Box::new(table))
    }
    fn terminals(
        &self,
        loaded: &Loaded,
        n: u32,
        seed: u64,
    ) -> anyhow::Result<Vec<Box<dyn WorkloadTerminal>>> {
        let table = *handles::<ObjectId>(loaded, self.label())?;
        Ok((0..n)
            .map(|i| {
                Box::new(AppendTerminal {
                    table,
                    next: (seed as i64) << 32 | i64::from(i) << 24,
                    txn: None,
                    committed: 0,
                    latency_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                        .expect("bounds"),
                    events: None,
                }) as Box<dyn WorkloadTerminal>
            })
            .collect())
    }
}

/// The one registration line.
const APPENDS: Registration = Registration {
    name: "appends",
    about: "one insert per transaction (a test workload)",
    default_scale: 100,
    make: |scale, _| Ok(Box::new(Appends { rows: scale })),
};

/// Runs `terminals` terminals of the workload `name` for 50 ms of virtual time on a RAM disk.
fn run(registry: &[Registration], name: &str, terminals: u32) -> lab::workload::Ran {
    let (w, _) =
        lab::workloads::make_from(registry, name, &Params::default()).expect("made by name");
    let store = storage::BlockPageStore::new(Box::new(ftl::MemDisk::new(1 << 16)), 4096, None)
        .expect("store");
    let mut e = Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames: 256,
            ..EngineConfig::default()
        },
    )
    .expect("engine");
    let loaded = w
        .load(&mut e, w.load_method(None).expect("method"), &|_| {})
        .expect("loaded");
    let start = e.now();
    let opts = VirtualOptions {
        until_ns: Some(start + 50_000_000),
        ..VirtualOptions::default()
    };
    run_window(
        &*w,
        &mut e,
        &loaded,
        terminals,
        7,
        start,
        opts,
        Some(10_000_000),
    )
    .expect("ran")
}

#[test]
fn a_workload_is_one_file_and_one_registration_line() {
    let mut registry = lab::workloads::REGISTRY.to_vec();
    registry.push(APPENDS);
    let ran = run(&registry, "appends", 2);
    assert!(
        ran.counted > 0,
        "the runner drove the new workload's terminals"
    );
    assert_eq!(
        ran.latency_txns, ran.counted,
        "every counted transaction has a latency"
    );
    let trace = ran.trace.as_ref().expect("samples were asked for");
    assert_eq!(
        trace.events.len() as u64,
        ran.counted,
        "one event per transaction"
    );
    assert!(
        trace.marks.len() >= 5,
        "a mark every 10 ms over 50 ms, and the end"
    );
    // Virtual time and seeded inputs: the same run again gives the same figures.
    let again = run(&registry, "appends", 2);
    assert_eq!((again.counted, again.end_ns), (ran.counted, ran.end_ns));
    // The built-in workloads are still there by name, and an unknown name is refused.
    assert!(lab::workloads::make_from(&registry, "tpcb", &Params::default()).is_ok());
    let err = lab::workloads::make_from(&registry, "nope", &Params::default()).unwrap_err();
    assert!(
        err.to_string().contains("appends"),
        "the message lists the workloads: {err}"
    );
}
