//! Property test: B+-tree indexes against a model (BTreeMap), with random inserts, deletes,
//! point lookups and range scans in both directions, inside transactions that commit or abort.
//! Long keys and a small buffer pool force splits, merges and evictions.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;

use proptest::prelude::*;
use storage::crashdisk::CrashDisk;
use storage::tuple::Value;
use storage::{BlockPageStore, Engine, EngineConfig};

#[derive(Clone, Debug)]
enum Op {
    Insert(i64, usize),
    Delete(i64),
    Get(i64),
    Scan(i64, i64, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i64..3000, 0usize..180).prop_map(|(k, n)| Op::Insert(k, n)),
        3 => (0i64..3000).prop_map(Op::Delete),
        1 => (0i64..3000).prop_map(Op::Get),
        1 => (0i64..3000, 0i64..3000, any::<bool>()).prop_map(|(a, b, r)| Op::Scan(a.min(b), a.max(b), r)),
    ]
}

fn name(k: i64, n: usize) -> String {
    format!("{k:05}{}", "x".repeat(n))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    #[test]
    fn indexes_agree_with_a_model(batches in proptest::collection::vec((proptest::collection::vec(op(), 1..600), any::<bool>()), 1..10)) {
        let store = BlockPageStore::new(Box::new(CrashDisk::new(8192)), 4096, Some(512)).unwrap();
        let mut e = Engine::create(Box::new(store), EngineConfig { buffer_frames: 24, ..EngineConfig::default() }).unwrap();
        let t = e.begin().unwrap();
        e.execute_ddl(t, "CREATE TABLE t (k INT, name VARCHAR(200)); CREATE UNIQUE INDEX t_k ON t (k); CREATE INDEX t_name ON t (name)").unwrap();
        e.commit(t).unwrap();
        let table = e.table("t").unwrap().id;
        let by_k = e.index("t_k").unwrap().id;
        let by_name = e.index("t_name").unwrap().id;
        let mut model: BTreeMap<i64, String> = BTreeMap::new();
        for (ops, commit) in batches {
            let saved = model.clone();
            let t = e.begin().unwrap();
            for op in ops {
                match op {
                    Op::Insert(k, n) => {
                        let r = e.insert(t, table, &[Value::Int(k), Value::Str(name(k, n))]);
                        if let std::collections::btree_map::Entry::Vacant(e) = model.entry(k) {
                            r.unwrap();
                            e.insert(name(k, n));
                        } else {
                            prop_assert!(r.is_err());
                        }
                    }
                    Op::Delete(k) => {
                        let rids = e.lookup(t, by_k, &[Value::Int(k)], true).unwrap();
                        prop_assert_eq!(rids.len(), usize::from(model.contains_key(&k)));
                        if let Some(r) = rids.first() {
                            e.delete(t, table, *r).unwrap();
                            model.remove(&k);
                        }
                    }
                    Op::Get(k) => {
                        let rids = e.lookup(t, by_k, &[Value::Int(k)], false).unwrap();
                        let got = rids.first().map(|r| e.get(t, table, *r).unwrap().unwrap());
                        prop_assert_eq!(got, model.get(&k).map(|s| vec![Value::Int(k), Value::Str(s.clone())]));
                    }
                    Op::Scan(lo, hi, rev) => {
                        let got: Vec<i64> = e.scan_index(t, by_k, Some(&[Value::Int(lo)]), Some(&[Value::Int(hi)]), rev, usize::MAX).unwrap()
                            .into_iter().map(|(_, r)| match e.get(t, table, r).unwrap().unwrap()[0] { Value::Int(k) => k, _ => -1 }).collect();
                        let mut want: Vec<i64> = model.range(lo..=hi).map(|(k, _)| *k).collect();
                        if rev { want.reverse(); }
                        prop_assert_eq!(got, want);
                        // The non-unique index, by name prefix order.
                        let names: Vec<(Vec<u8>, _)> = e.scan_index(t, by_name, None, None, rev, usize::MAX).unwrap();
                        prop_assert_eq!(names.len(), model.len());
                    }
                }
            }
            if commit { e.commit(t).unwrap(); } else { e.abort(t).unwrap(); model = saved; }
        }
        prop_assert_eq!(e.check().unwrap(), Vec::<String>::new());
        let t = e.begin().unwrap();
        prop_assert_eq!(e.scan_table(t, table).unwrap().len(), model.len());
        e.commit(t).unwrap();
    }
}

#[test]
fn deleting_most_keys_merges_nodes_and_collapses_the_root() {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let store = BlockPageStore::new(Box::new(CrashDisk::new(8192)), 4096, Some(512)).unwrap();
    let mut e = Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames: 32,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let t = e.begin().unwrap();
    e.execute_ddl(t, "CREATE TABLE t (k INT, name VARCHAR(200)); CREATE UNIQUE INDEX t_k ON t (k); CREATE INDEX t_name ON t (name)").unwrap();
    let table = e.table("t").unwrap().id;
    let by_k = e.index("t_k").unwrap().id;
    e.commit(t).unwrap();
    let mut keys: Vec<i64> = (0..2500).collect();
    for chunk in keys.chunks(500) {
        let t = e.begin().unwrap();
        for &k in chunk {
            e.insert(t, table, &[Value::Int(k), Value::Str(name(k, 150))])
                .unwrap();
        }
        e.commit(t).unwrap();
    }
    let splits = e.stats().btree_splits;
    assert!(splits > 100, "{splits} splits");
    keys.shuffle(&mut rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7));
    for chunk in keys[..2490].chunks(500) {
        let t = e.begin().unwrap();
        for &k in chunk {
            let r = e.lookup(t, by_k, &[Value::Int(k)], true).unwrap();
            e.delete(t, table, r[0]).unwrap();
        }
        e.commit(t).unwrap();
        assert_eq!(e.check().unwrap(), Vec::<String>::new());
    }
    assert!(
        e.stats().btree_merges > 50,
        "{} merges",
        e.stats().btree_merges
    );
    let t = e.begin().unwrap();
    let mut left: Vec<i64> = keys[2490..].to_vec();
    left.sort_unstable();
    let got: Vec<i64> = e
        .scan_index(t, by_k, None, None, false, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(_, r)| match e.get(t, table, r).unwrap().unwrap()[0] {
            Value::Int(k) => k,
            _ => -1,
        })
        .collect();
    assert_eq!(got, left);
    e.commit(t).unwrap();
}
