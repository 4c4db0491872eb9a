//! Bulk loads (bulk.rs) and scans with read-ahead (scan.rs): the loaded table reads back like
//! one loaded row by row, its trees pass the engine's structural check and answer lookups and
//! range scans, the load survives a crash after `bulk_finish`, and a scan sees every row
//! whatever its read-ahead.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use storage::bulk::BulkOptions;
use storage::crashdisk::{CrashDisk, SharedCrashDisk};
use storage::scan::ScanOptions;
use storage::tuple::Value;
use storage::{BlockPageStore, Engine, EngineConfig, Error};

const DDL: &str = "CREATE TABLESPACE ts;
CREATE TABLE t (id BIGINT, grp INT, name VARCHAR(40), amount MONEY) TABLESPACE ts;
CREATE UNIQUE INDEX t_pk ON t (id);
CREATE INDEX t_grp ON t (grp);";

fn new_engine(frames: usize) -> (Engine, SharedCrashDisk) {
    let disk = SharedCrashDisk::new(CrashDisk::new(8192));
    let store = BlockPageStore::new(Box::new(disk.clone()), 4096, Some(256)).unwrap();
    let cfg = EngineConfig {
        buffer_frames: frames,
        ..EngineConfig::default()
    };
    (Engine::create(Box::new(store), cfg).unwrap(), disk)
}

fn row(i: i64) -> Vec<Value> {
    vec![
        Value::Int(i),
        // Not in load order: the secondary index is sorted by the loader.
        Value::Int((i * 7919) % 97),
        Value::Str(format!("name-{}", "x".repeat((i % 30) as usize))),
        Value::Money(i * 3),
    ]
}

fn load(e: &mut Engine, n: i64, fill_percent: u8) -> u32 {
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    e.commit(t).unwrap();
    let table = e.table("t").unwrap().id;
    let schema = e.table("t").unwrap().schema.clone();
    let mut b = e.bulk_begin(table, BulkOptions { fill_percent }).unwrap();
    for i in 0..n {
        e.bulk_insert(&mut b, &schema.encode(&row(i)).unwrap())
            .unwrap();
    }
    let st = e.bulk_finish(b).unwrap();
    assert_eq!(st.rows, n as u64);
    table
}

#[test]
fn a_bulk_loaded_table_reads_back_through_its_indexes_and_scans() {
    let (mut e, _disk) = new_engine(64);
    let n = 20_000;
    let table = load(&mut e, n, 100);
    assert!(e.check().unwrap().is_empty(), "{:?}", e.check());
    let pk = e.index("t_pk").unwrap().id;
    let grp = e.index("t_grp").unwrap().id;
    let t = e.begin().unwrap();
    for i in [0, 1, 4_999, 12_345, n - 1] {
        let rids = e.lookup(t, pk, &[Value::Int(i)], false).unwrap();
        assert_eq!(rids.len(), 1);
        assert_eq!(e.get(t, table, rids[0]).unwrap().unwrap(), row(i));
    }
    assert!(e.lookup(t, pk, &[Value::Int(n)], false).unwrap().is_empty());
    let in_grp = e.lookup(t, grp, &[Value::Int(5)], false).unwrap();
    assert_eq!(
        in_grp.len() as i64,
        (0..n).filter(|i| (i * 7919) % 97 == 5).count() as i64
    );
    let all = e.scan_index(t, pk, None, None, false, usize::MAX).unwrap();
    assert_eq!(all.len() as i64, n);
    e.commit(t).unwrap();
    // The scan sees every row once, in load order, with and without read-ahead.
    for depth in [0, 1, 8, 64] {
        let mut next = 0i64;
        let st = e
            .scan_rows(
                table,
                ScanOptions {
                    read_ahead_pages: depth,
                    cpu_ns_per_row: 10,
                },
                |r| {
                    let id = i64::from_le_bytes(r[..8].try_into().unwrap());
                    assert_eq!(id, next);
                    next += 1;
                    0
                },
            )
            .unwrap();
        assert_eq!(next, n);
        assert_eq!(st.rows, n as u64);
        if depth > 1 {
            assert!(st.read_ahead_used > st.pages / 2, "{st:?}");
        }
    }
    // Row-at-a-time work goes on after a bulk load.
    let t = e.begin().unwrap();
    e.insert(t, table, &row(n)).unwrap();
    assert!(matches!(
        e.insert(t, table, &row(3)),
        Err(Error::DuplicateKey { .. })
    ));
    e.commit(t).unwrap();
    assert!(e.check().unwrap().is_empty());
}

#[test]
fn the_pages_are_dense_and_the_fill_factor_leaves_room() {
    let (mut e, _d) = new_engine(64);
    load(&mut e, 5_000, 100);
    let dense = e.stats().pages_allocated;
    let (mut e2, _d2) = new_engine(64);
    load(&mut e2, 5_000, 70);
    let loose = e2.stats().pages_allocated;
    assert!(
        loose as f64 > dense as f64 * 1.3,
        "70% fill {loose} pages vs 100% {dense}"
    );
}

#[test]
fn a_finished_bulk_load_survives_a_crash() {
    let (mut e, disk) = new_engine(32);
    let table = load(&mut e, 3_000, 90);
    disk.cut_power();
    let d2 = SharedCrashDisk::new(disk.after_power_loss(7));
    let store = BlockPageStore::new(Box::new(d2), 4096, Some(256)).unwrap();
    let mut e = Engine::open(Box::new(store), EngineConfig::default()).unwrap();
    assert!(e.check().unwrap().is_empty());
    let t = e.begin().unwrap();
    assert_eq!(e.scan_table(t, table).unwrap().len(), 3_000);
    let pk = e.index("t_pk").unwrap().id;
    assert_eq!(
        e.lookup(t, pk, &[Value::Int(2_999)], false).unwrap().len(),
        1
    );
    e.commit(t).unwrap();
}

#[test]
fn bulk_loads_refuse_a_table_that_has_rows_and_duplicate_keys() {
    let (mut e, _d) = new_engine(32);
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    let table = e.table("t").unwrap().id;
    e.insert(t, table, &row(1)).unwrap();
    e.commit(t).unwrap();
    assert!(matches!(
        e.bulk_begin(table, BulkOptions::default()),
        Err(Error::Unsupported(_))
    ));
    let (mut e, _d) = new_engine(32);
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    e.commit(t).unwrap();
    let table = e.table("t").unwrap().id;
    let schema = e.table("t").unwrap().schema.clone();
    let mut b = e.bulk_begin(table, BulkOptions::default()).unwrap();
    for i in [1, 2, 2] {
        e.bulk_insert(&mut b, &schema.encode(&row(i)).unwrap())
            .unwrap();
    }
    assert!(matches!(e.bulk_finish(b), Err(Error::DuplicateKey { .. })));
    assert!(matches!(
        e.bulk_begin(table, BulkOptions { fill_percent: 0 }),
        Err(Error::Config(_))
    ));
}
