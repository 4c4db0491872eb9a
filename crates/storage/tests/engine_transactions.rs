//! Transactions on the engine: commit, abort, reopen, DDL errors, lock conflicts.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use storage::crashdisk::{CrashDisk, SharedCrashDisk};
use storage::tuple::Value;
use storage::{BlockPageStore, Engine, EngineConfig, Error};

const DDL: &str = "CREATE TABLESPACE ts (EXTENT_SIZE=128K);
CREATE TABLE acct (id INT, owner VARCHAR(40), bal MONEY) TABLESPACE ts;
CREATE UNIQUE INDEX acct_pk ON acct (id);
CREATE INDEX acct_owner ON acct (owner);";

fn new_engine(frames: usize) -> (Engine, SharedCrashDisk) {
    let disk = SharedCrashDisk::new(CrashDisk::new(4096));
    let store = BlockPageStore::new(Box::new(disk.clone()), 4096, Some(256)).unwrap();
    let e = Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames: frames,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    (e, disk)
}

fn reopen_after_crash(disk: &SharedCrashDisk, seed: u64) -> Engine {
    disk.cut_power();
    let d2 = SharedCrashDisk::new(disk.after_power_loss(seed));
    let store = BlockPageStore::new(Box::new(d2), 4096, Some(256)).unwrap();
    Engine::open(
        Box::new(store),
        EngineConfig {
            buffer_frames: 64,
            ..EngineConfig::default()
        },
    )
    .unwrap()
}

/// Creates the test schema; returns the table and its primary index.
fn with_schema(e: &mut Engine) -> (u32, u32) {
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    e.commit(t).unwrap();
    (e.table("acct").unwrap().id, e.index("acct_pk").unwrap().id)
}

fn row(id: i64, owner: &str, bal: i64) -> Vec<Value> {
    vec![Value::Int(id), Value::Str(owner.into()), Value::Money(bal)]
}

#[test]
fn committed_rows_survive_a_crash_and_uncommitted_ones_vanish() {
    let (mut e, disk) = new_engine(32);
    let (acct, pk) = with_schema(&mut e);
    let t = e.begin().unwrap();
    for i in 0..500 {
        e.insert(t, acct, &row(i, &format!("owner{}", i % 7), i * 100))
            .unwrap();
    }
    e.commit(t).unwrap();
    let loser = e.begin().unwrap();
    for i in 500..600 {
        e.insert(loser, acct, &row(i, "loser", 1)).unwrap();
    }
    let r = e.lookup(loser, pk, &[Value::Int(3)], true).unwrap();
    e.add_to_column(loser, acct, r[0], 2, 5).unwrap();
    e.log_durable_lsn();
    e.force_log().unwrap(); // the loser's records are durable, its commit is not
    for seed in 0..3 {
        let mut e2 = reopen_after_crash(&disk, seed);
        let acct = e2.table("acct").unwrap().id;
        let t = e2.begin().unwrap();
        let rows = e2.scan_table(t, acct).unwrap();
        assert_eq!(rows.len(), 500, "seed {seed}");
        let r = e2.lookup(t, pk, &[Value::Int(3)], false).unwrap();
        assert_eq!(
            e2.get(t, acct, r[0]).unwrap().unwrap(),
            row(3, "owner3", 300)
        );
        assert_eq!(e2.lookup(t, pk, &[Value::Int(550)], false).unwrap(), vec![]);
        assert_eq!(
            e2.lookup(
                t,
                e2.index("acct_owner").unwrap().id,
                &[Value::Str("owner2".into())],
                false
            )
            .unwrap()
            .len(),
            72
        );
        e2.commit(t).unwrap();
        assert_eq!(e2.check().unwrap(), Vec::<String>::new());
    }
}

#[test]
fn abort_undoes_inserts_updates_and_deletes_in_heap_and_indexes() {
    let (mut e, _disk) = new_engine(16);
    let (acct, pk) = with_schema(&mut e);
    let t = e.begin().unwrap();
    let mut rids = vec![];
    for i in 0..300 {
        rids.push(e.insert(t, acct, &row(i, "a", i)).unwrap());
    }
    e.commit(t).unwrap();
    let t = e.begin().unwrap();
    for i in 300..700 {
        e.insert(t, acct, &row(i, &"x".repeat(40), i)).unwrap();
    }
    for (i, rid) in rids.iter().enumerate().take(100) {
        e.update(t, acct, *rid, &row(i as i64 + 10_000, "b", 0))
            .unwrap();
    }
    for rid in &rids[100..200] {
        e.delete(t, acct, *rid).unwrap();
    }
    e.abort(t).unwrap();
    let t = e.begin().unwrap();
    assert_eq!(e.scan_table(t, acct).unwrap().len(), 300);
    for i in 0..300 {
        let r = e.lookup(t, pk, &[Value::Int(i)], false).unwrap();
        assert_eq!(e.get(t, acct, r[0]).unwrap().unwrap(), row(i, "a", i));
    }
    e.commit(t).unwrap();
    assert_eq!(e.check().unwrap(), Vec::<String>::new());
}

#[test]
fn ddl_errors_carry_positions_and_change_nothing() {
    let (mut e, _disk) = new_engine(16);
    let t = e.begin().unwrap();
    match e.execute_ddl(t, "CREATE TABLE t (a INT,\n b NUMBER)") {
        Err(Error::Ddl {
            line: 2, column: 4, ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        e.execute_ddl(t, "CREATE TABLE t (a INT) TABLESPACE nope"),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        e.execute_ddl(t, "CREATE REGION r (MAX_CHIPS=2)"),
        Err(Error::Unsupported(_))
    ));
    e.execute_ddl(t, "CREATE TABLE t (a INT)").unwrap();
    assert!(matches!(
        e.execute_ddl(t, "CREATE TABLE T (b INT)"),
        Err(Error::AlreadyExists { .. })
    ));
    assert!(matches!(
        e.execute_ddl(t, "CREATE INDEX i ON t (zz)"),
        Err(Error::NotFound { .. })
    ));
    e.commit(t).unwrap();
}

#[test]
fn conflicting_writers_block_and_duplicate_keys_are_refused() {
    let (mut e, _disk) = new_engine(16);
    let (acct, pk) = with_schema(&mut e);
    let a = e.begin().unwrap();
    let r = e.insert(a, acct, &row(1, "a", 1)).unwrap();
    let b = e.begin().unwrap();
    // b sees a's uncommitted key and must wait for a.
    assert!(matches!(
        e.insert(b, acct, &row(1, "b", 1)),
        Err(Error::WouldBlock { .. })
    ));
    assert!(matches!(
        e.get_raw(b, acct, r, false),
        Err(Error::WouldBlock { .. })
    ));
    e.commit(a).unwrap();
    assert!(matches!(
        e.insert(b, acct, &row(1, "b", 1)),
        Err(Error::DuplicateKey { .. })
    ));
    // A deleted unique key is reserved until its deleter ends.
    e.delete(b, acct, r).unwrap();
    let c = e.begin().unwrap();
    assert!(matches!(
        e.insert(c, acct, &row(1, "c", 1)),
        Err(Error::WouldBlock { .. })
    ));
    e.abort(b).unwrap();
    assert_eq!(e.lookup(c, pk, &[Value::Int(1)], false).unwrap(), vec![r]);
    e.commit(c).unwrap();
}

#[test]
fn a_clean_shutdown_reopens_with_the_same_rows() {
    let (mut e, disk) = new_engine(16);
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    let acct = e.table("acct").unwrap().id;
    for i in 0..200 {
        e.insert(t, acct, &row(i, "z", i)).unwrap();
    }
    e.commit(t).unwrap();
    let store = e.shutdown().unwrap();
    drop(store);
    let mut e2 = Engine::open(
        Box::new(BlockPageStore::new(Box::new(disk.clone()), 4096, Some(256)).unwrap()),
        EngineConfig::default(),
    )
    .unwrap();
    let t = e2.begin().unwrap();
    assert_eq!(e2.scan_table(t, acct).unwrap().len(), 200);
    e2.commit(t).unwrap();
}

/// A B-tree leaf that passes its checksum but whose entry claims a key longer than itself (only
/// an engine bug or a forged page can make one) is a typed `Corrupt` error on the lookup that
/// reads it, not a panic, and the engine stays usable for pages that are sound.
#[test]
fn a_checksum_valid_but_malformed_btree_page_is_a_corrupt_error() {
    use ftl::block_device::BlockDevice;
    use storage::page::{self, PageType};
    use storage::slotted;

    let (mut e, disk) = new_engine(32);
    let (acct, pk) = with_schema(&mut e);
    let t = e.begin().unwrap();
    for i in 0..50 {
        e.insert(t, acct, &row(i, "o", i)).unwrap();
    }
    e.commit(t).unwrap();
    e.shutdown().unwrap();

    // Forge the primary index's leaf on the device: every entry's key length = 0xFFFF.
    let mut dev = disk.clone();
    let mut buf = vec![0u8; 4096];
    let mut forged = 0;
    for lpn in 0..dev.capacity_pages() {
        dev.read(0, lpn, &mut buf).unwrap();
        if page::page_type(&buf) != PageType::BTreeLeaf || page::object(&buf) != pk {
            continue;
        }
        if !matches!(page::verify(&buf, page::page_id(&buf)), Ok(true)) {
            continue;
        }
        for i in 0..slotted::nslots(&buf) {
            let (off, _, _) = slotted::slot(&buf, i);
            buf[off..off + 2].copy_from_slice(&0xFFFFu16.to_le_bytes());
        }
        page::seal(&mut buf);
        dev.write(0, lpn, &buf, true).unwrap();
        forged += 1;
    }
    assert_eq!(forged, 1, "the 50-key index is one leaf");

    let store = BlockPageStore::new(Box::new(disk.clone()), 4096, Some(256)).unwrap();
    let mut e2 = Engine::open(Box::new(store), EngineConfig::default()).unwrap();
    let t = e2.begin().unwrap();
    match e2.lookup(t, pk, &[Value::Int(3)], false) {
        Err(Error::Corrupt { why, .. }) => assert!(why.contains("key length"), "{why}"),
        other => panic!("expected a Corrupt error, got {other:?}"),
    }
}

/// A commit whose record is durable but not yet acknowledged (its terminal waits for a force
/// that a block FTL's merge stalls for seconds) holds no log space: a committed transaction is
/// never undone. The engine once kept such a transaction's first record as the log tail, so the
/// other terminals filled the log behind it ("the log is full ... held by active transactions")
/// in fault-free TPC-C runs on the block and FAST FTLs. After a crash both the waiting commit
/// and every commit after it are there.
#[test]
fn a_commit_waiting_for_its_acknowledgement_holds_no_log_space() {
    let (mut e, disk) = new_engine(32);
    let (acct, pk) = with_schema(&mut e);
    let t = e.begin().unwrap();
    for i in 0..64 {
        e.insert(t, acct, &row(i, "owner", 0)).unwrap();
    }
    e.commit(t).unwrap();
    let waiting = e.begin().unwrap();
    let r = e.lookup(waiting, pk, &[Value::Int(0)], true).unwrap();
    e.add_to_column(waiting, acct, r[0], 2, 7).unwrap();
    let lsn = e.commit_request(waiting).unwrap();
    e.force_log().unwrap();
    assert!(e.is_durable(lsn));
    // The other terminal writes several laps of the log while the first is not acknowledged.
    let capacity_bytes = e.log_capacity_bytes();
    let mut rounds = 0u64;
    while e.log_next_lsn() < lsn + 3 * capacity_bytes {
        let t = e.begin().unwrap();
        let id = 1 + (rounds % 63) as i64;
        let r = e.lookup(t, pk, &[Value::Int(id)], true).unwrap();
        e.add_to_column(t, acct, r[0], 2, 1).unwrap();
        e.commit(t)
            .unwrap_or_else(|err| panic!("commit {rounds} after the waiting one: {err}"));
        rounds += 1;
    }
    e.commit_finish(waiting).unwrap();
    e.force_log().unwrap();
    let mut e2 = reopen_after_crash(&disk, 1);
    let acct = e2.table("acct").unwrap().id;
    let t = e2.begin().unwrap();
    let bal = |e2: &mut Engine, id: i64| {
        let r = e2.lookup(t, pk, &[Value::Int(id)], false).unwrap();
        e2.get(t, acct, r[0]).unwrap().unwrap()[2].clone()
    };
    assert_eq!(bal(&mut e2, 0), Value::Money(7));
    let total: i64 = (1..64)
        .map(|id| match bal(&mut e2, id) {
            Value::Money(m) => m,
            v => panic!("balance {v:?}"),
        })
        .sum();
    assert_eq!(total as u64, rounds);
}
