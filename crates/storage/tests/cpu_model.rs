//! Host CPU in virtual time (storage::cpu): each kind of work is charged once, to the clock of
//! whoever does it; the page cleaner's write-backs go on its own clock, so they overlap with
//! the terminals' work instead of adding to it.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use storage::cpu::{CpuCounts, CpuModel};
use storage::crashdisk::{CrashDisk, SharedCrashDisk};
use storage::tuple::Value;
use storage::{BlockPageStore, Engine, EngineConfig};

const DDL: &str = "CREATE TABLESPACE ts (EXTENT_SIZE=128K);
CREATE TABLE acct (id INT, owner VARCHAR(40), bal MONEY) TABLESPACE ts;
CREATE UNIQUE INDEX acct_pk ON acct (id);";

fn engine(frames: usize, cpu: CpuModel) -> Engine {
    let disk = SharedCrashDisk::new(CrashDisk::new(8192));
    let store = BlockPageStore::new(Box::new(disk), 4096, Some(256)).unwrap();
    let mut e = Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames: frames,
            cpu,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    e.commit(t).unwrap();
    e
}

fn insert_rows(e: &mut Engine, from: i64, n: i64) {
    let acct = e.table("acct").unwrap().id;
    let t = e.begin().unwrap();
    for i in from..from + n {
        let row = [
            Value::Int(i),
            Value::Str(format!("owner {i:06} {}", "x".repeat(25))),
            Value::Money(i),
        ];
        e.insert(t, acct, &row).unwrap();
    }
    e.commit(t).unwrap();
}

/// Every kind at a cost of its own power of ten, so a sum names what was charged.
const DISTINCT: CpuModel = CpuModel {
    ns_per_call: 1,
    ns_per_fix: 10,
    ns_per_record: 100,
    ns_per_lock: 1_000,
    ns_per_commit: 10_000,
    ns_per_page_read: 100_000,
    ns_per_page_write: 1_000_000,
};

#[test]
fn each_kind_of_work_is_counted_once_and_charged_at_its_cost() {
    let mut e = engine(16, DISTINCT);
    let c0 = e.cpu_counts();
    let t0 = e.now();
    insert_rows(&mut e, 0, 3000);
    let c = e.cpu_counts().since(&c0);
    // One transaction that logged: one commit; begin and commit are calls, and so is each insert.
    assert_eq!(c.commits, 1);
    assert!(c.calls >= 3002, "{c:?}");
    assert!(c.fixes > 0 && c.records >= 3000 && c.locks > 0, "{c:?}");
    // A 16-frame pool taking 3,000 rows of ~60 bytes evicts: pages were written back and read.
    assert!(c.page_writes > 0, "{c:?}");
    assert_eq!(c.cost_ns(&DISTINCT), c.charged_ns, "invariant 1");
    // The terminal's clock moved by at least what was charged on it (the device adds its own
    // time; a CrashDisk takes none).
    assert!(e.now() - t0 >= c.charged_ns - c.page_writes * DISTINCT.ns_per_page_write);
    assert_eq!(e.cpu_model(), DISTINCT);
}

#[test]
fn the_cleaners_write_backs_are_charged_to_its_clock_not_the_terminals() {
    let write = CpuModel {
        ns_per_page_write: 1_000_000,
        ..CpuModel::NONE
    };
    let mut e = engine(24, write);
    e.set_background_mode(true);
    insert_rows(&mut e, 0, 3000);
    let before: CpuCounts = e.cpu_counts();
    let now = e.now();
    // The cleaner (after a due checkpoint, if any) writes back from `now` on its own clock.
    let mut done = now;
    for _ in 0..8 {
        done = e.background(done).unwrap().0;
        if e.cpu_counts().page_writes > before.page_writes {
            break;
        }
    }
    let c = e.cpu_counts().since(&before);
    assert!(c.page_writes > 0, "the cleaner wrote nothing back: {c:?}");
    assert_eq!(e.now(), now, "the terminal's clock did not move");
    assert!(
        done - now >= c.page_writes * 1_000_000,
        "the cleaner's clock carries its write-backs: {} ns for {} pages",
        done - now,
        c.page_writes
    );
}

#[test]
fn no_profile_charges_nothing() {
    let mut e = engine(16, CpuModel::NONE);
    let t0 = e.now();
    insert_rows(&mut e, 0, 200);
    let c = e.cpu_counts();
    assert_eq!(c.charged_ns, 0);
    assert!(
        c.calls > 0 && c.fixes > 0,
        "work is counted even when it costs nothing"
    );
    assert_eq!(
        e.now(),
        t0,
        "a device that takes no time and no CPU: no virtual time"
    );
}
