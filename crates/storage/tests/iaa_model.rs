//! Insert Address Assist and U2DI (storage::iaa, docs/iaa.md): placement follows the flash's
//! hint, on the page FTL behind the block interface and on the native store; U2DI keeps every
//! index consistent (a property test against a model, with rollbacks).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;

use ftl::FtlOptions;
use nand::{DeviceConfig, Nand};
use proptest::prelude::*;
use storage::tuple::Value;
use storage::{BlockPageStore, Engine, EngineConfig, NativeConfig, NativeStore, PageStore, Rid};

fn nand() -> Nand {
    nand_of(4096)
}

/// The test device with flash pages of `flash_page_bytes` (4 or 16 KiB); larger pages come in
/// fewer per block, so that blocks stay 64 KiB and the aged device holds closed blocks with
/// many valid pages, as the 4 KiB device does (a victim with one valid page is emptied by one
/// insert and teaches nothing about placement).
fn nand_of(flash_page_bytes: usize) -> Nand {
    let mut set = vec!["geometry.blocks_per_plane=16".to_string()];
    if flash_page_bytes != 4096 {
        set.push(format!("geometry.page_size_bytes={flash_page_bytes}"));
        set.push("geometry.oob_size_bytes=512".into());
        set.push(format!(
            "geometry.pages_per_block={}",
            16 * 4096 / flash_page_bytes
        ));
    }
    Nand::new(DeviceConfig::preset("tiny", &set).unwrap()).unwrap()
}

fn store(native: bool) -> Box<dyn PageStore> {
    store_of(native, 4096, 4096)
}

/// The page FTL's block store or the native store on flash pages of `flash_page_bytes`, with
/// DB pages of `page_bytes`.
fn store_of(native: bool, flash_page_bytes: usize, page_bytes: usize) -> Box<dyn PageStore> {
    let nand = nand_of(flash_page_bytes);
    if native {
        Box::new(
            NativeStore::format(
                nand,
                NativeConfig {
                    page_bytes,
                    log_blocks: Some(128 * (page_bytes / 4096) as u64),
                    spare_factor: 0.2,
                    ..NativeConfig::default()
                },
            )
            .unwrap(),
        )
    } else {
        let opts = FtlOptions {
            spare_factor: 0.2,
            ..FtlOptions::default()
        };
        Box::new(
            BlockPageStore::new(
                ftl::build("page", nand, &opts).unwrap(),
                page_bytes,
                // Room for the full-page images of 16 KiB DB pages on the page FTL.
                Some(128 * (page_bytes / 4096) as u64),
            )
            .unwrap(),
        )
    }
}

const DDL: &str = "CREATE TABLESPACE ts (IAA=on, U2DI=on);
    CREATE TABLE t (id BIGINT, grp BIGINT, ver BIGINT, pad CHAR(200)) TABLESPACE ts;
    CREATE UNIQUE INDEX t_pk ON t (id) TABLESPACE ts;
    CREATE INDEX t_grp ON t (grp) TABLESPACE ts";

fn row(e: &Engine, id: i64, grp: i64, ver: i64) -> Vec<u8> {
    let t = e.table("t").unwrap();
    t.schema
        .encode(&[
            Value::Int(id),
            Value::Int(grp),
            Value::Int(ver),
            Value::Str(format!("{id}/{ver}")),
        ])
        .unwrap()
}

fn rid_of(e: &mut Engine, txn: u64, id: i64) -> Rid {
    let pk = e.index("t_pk").unwrap().id;
    e.lookup(txn, pk, &[Value::Int(id)], true).unwrap()[0]
}

/// An engine with `rows` rows loaded, then one row in five deleted (holes), then enough
/// updates that the flash has closed blocks (GC candidates, so victims can be committed).
fn loaded(native: bool, rows: i64) -> (Engine, BTreeMap<i64, (i64, i64)>) {
    loaded_on(store(native), rows)
}

fn loaded_on(store: Box<dyn PageStore>, rows: i64) -> (Engine, BTreeMap<i64, (i64, i64)>) {
    let mut e = Engine::create(
        store,
        EngineConfig {
            buffer_frames: 32,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    e.commit(t).unwrap();
    let table = e.table("t").unwrap().id;
    let mut model = BTreeMap::new();
    for chunk in (0..rows).collect::<Vec<_>>().chunks(200) {
        let t = e.begin().unwrap();
        for &id in chunk {
            let b = row(&e, id, id % 7, 0);
            e.insert_raw(t, table, &b).unwrap();
            model.insert(id, (id % 7, 0));
        }
        e.commit(t).unwrap();
    }
    for chunk in (0..rows)
        .filter(|i| i % 5 == 4)
        .collect::<Vec<_>>()
        .chunks(200)
    {
        let t = e.begin().unwrap();
        for &id in chunk {
            let r = rid_of(&mut e, t, id);
            e.delete(t, table, r).unwrap();
            model.remove(&id);
        }
        e.commit(t).unwrap();
    }
    e.checkpoint().unwrap();
    (e, model)
}

/// The DB pages the store names as valid in its committed victims now.
fn hinted(e: &mut Engine) -> Vec<u32> {
    let mut pages = Vec::new();
    e.store_mut()
        .gc_victims(2, u64::MAX, &mut pages)
        .expect("the store has the GC information channel");
    pages
}

/// In-place updates of pseudo-random rows until the flash has written `passes` times its
/// table: blocks then hold a mix of valid and stale heap pages, as in a steady state.
fn age(e: &mut Engine, model: &BTreeMap<i64, (i64, i64)>, updates: usize) {
    let table = e.table("t").unwrap().id;
    let keys: Vec<i64> = model.keys().copied().collect();
    let mut x = 88172645463325252u64;
    for chunk in 0..updates / 50 {
        let t = e.begin().unwrap();
        for _ in 0..50 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = keys[(x % keys.len() as u64) as usize];
            let r = rid_of(e, t, id);
            let (g, v) = model[&id];
            let b = row(e, id, g, v);
            e.update_raw(t, table, r, &b).unwrap();
        }
        e.commit(t).unwrap();
        if chunk % 20 == 19 {
            e.checkpoint().unwrap();
        }
    }
}

fn placement_follows_the_hint(native: bool) {
    placement_follows_the_hint_on(store(native), 9_000, 10_000, 4096, 20);
}

/// Inserts after `updates` aging updates of `rows` loaded rows go to hinted pages (one per
/// page per round; at least `min_placed` of 400), and the store names flash pages of
/// `flash_page_bytes`.
fn placement_follows_the_hint_on(
    store: Box<dyn PageStore>,
    rows: i64,
    updates: usize,
    flash_page_bytes: usize,
    min_placed: usize,
) {
    let (mut e, model) = loaded_on(store, rows);
    age(&mut e, &model, updates);
    let mut probe = Vec::new();
    let info = e.store_mut().gc_victims(2, u64::MAX, &mut probe).unwrap();
    assert_eq!(info.flash_page_bytes, flash_page_bytes);
    let table = e.table("t").unwrap().id;
    let mut placed = 0;
    let mut seen_in_round = std::collections::HashSet::new();
    let mut last_refreshes = e.iaa_stats().hint_refreshes;
    for id in 1_000_000..1_000_400 {
        let before = e.iaa_stats().hinted_inserts;
        let t = e.begin().unwrap();
        let b = row(&e, id, 1, 0);
        let rid = e.insert_raw(t, table, &b).unwrap();
        // Before the commit writes the page back (which takes it out of the victim).
        let pages = hinted(&mut e);
        e.commit(t).unwrap();
        let s = e.iaa_stats();
        if s.hint_refreshes != last_refreshes {
            seen_in_round.clear();
            last_refreshes = s.hint_refreshes;
        }
        if s.hinted_inserts > before {
            placed += 1;
            assert!(
                pages.contains(&rid.page),
                "insert {id} went to page {} which is not hinted ({pages:?})",
                rid.page
            );
            // Rotation: one record per hinted page per round.
            assert!(
                seen_in_round.insert(rid.page),
                "page {} took two records in one round",
                rid.page
            );
        }
    }
    let h = hinted(&mut e);
    assert!(
        placed >= min_placed,
        "only {placed} of 400 inserts were placed by the hint ({:?}; hinted now {:?})",
        e.iaa_stats(),
        h
    );
    assert!(e.check().unwrap().is_empty());
}

#[test]
fn inserts_go_to_the_hinted_pages_of_the_page_ftl_victims() {
    placement_follows_the_hint(false);
}

#[test]
fn inserts_go_to_the_hinted_pages_of_the_native_store_victims() {
    placement_follows_the_hint(true);
}

/// The native store on 16 KiB flash pages (the IAA paper's page size): the hint names DB pages
/// of 16 KiB (one flash page each) and of 4 KiB (four to a flash page, from their units),
/// and inserts follow it. A 64 KiB block holds four 16 KiB DB pages, and greedy commits the
/// emptiest blocks, so a victim holds a heap page or two: fewer inserts are placed per round
/// than on 4 KiB pages, but every one goes to a hinted page, over many rounds.
#[test]
fn inserts_follow_the_native_store_hint_on_16_kib_flash_pages() {
    placement_follows_the_hint_on(store_of(true, 16384, 16384), 9_000, 6_000, 16384, 10);
    placement_follows_the_hint_on(store_of(true, 16384, 4096), 9_000, 6_000, 16384, 20);
}

/// The same on the page FTL with 16 KiB flash pages and 16 KiB DB pages.
#[test]
fn inserts_follow_the_page_ftl_hint_on_16_kib_flash_pages() {
    placement_follows_the_hint_on(store_of(false, 16384, 16384), 9_000, 6_000, 16384, 10);
}

#[test]
fn a_plain_block_device_offers_no_hint_and_iaa_falls_back() {
    let dev = Box::new(storage::crashdisk::SharedCrashDisk::new(
        storage::crashdisk::CrashDisk::new(4096),
    ));
    let mut s = BlockPageStore::new(dev, 4096, Some(64)).unwrap();
    let mut pages = Vec::new();
    assert!(s.gc_victims(2, u64::MAX, &mut pages).is_none());
}

#[test]
fn bad_iaa_options_are_refused_with_an_error() {
    let mut e = Engine::create(store(false), EngineConfig::default()).unwrap();
    let t = e.begin().unwrap();
    assert!(e.execute_ddl(t, "CREATE TABLESPACE x (IAA=maybe)").is_err());
}

#[derive(Clone, Debug)]
enum Q {
    Insert(i64),
    Delete(usize),
    Update(usize, i64),
}

fn q() -> impl Strategy<Value = (Q, bool)> {
    (
        prop_oneof![
            (0i64..1_000_000).prop_map(Q::Insert),
            any::<usize>().prop_map(Q::Delete),
            (any::<usize>(), 0i64..7).prop_map(|(i, g)| Q::Update(i, g)),
        ],
        prop::bool::weighted(0.15),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// U2DI moves rows (new record ids); both indexes follow every move, rollbacks restore the
    /// old record ids, and the table matches the model at the end.
    #[test]
    fn u2di_keeps_every_index_consistent(native: bool, qs in prop::collection::vec(q(), 150..300)) {
        let (mut e, mut model) = loaded(native, 1500);
        let table = e.table("t").unwrap().id;
        let (pk, gi) = (e.index("t_pk").unwrap().id, e.index("t_grp").unwrap().id);
        for (q, abort) in qs {
            let t = e.begin().unwrap();
            let keys: Vec<i64> = model.keys().copied().collect();
            let change = match q {
                Q::Insert(id) if !model.contains_key(&(id + 100_000)) => {
                    let id = id + 100_000;
                    let b = row(&e, id, id % 7, 0);
                    e.insert_raw(t, table, &b).unwrap();
                    Some((id, Some((id % 7, 0))))
                }
                Q::Delete(i) if !keys.is_empty() => {
                    let id = keys[i % keys.len()];
                    let r = rid_of(&mut e, t, id);
                    e.delete(t, table, r).unwrap();
                    Some((id, None))
                }
                Q::Update(i, g) if !keys.is_empty() => {
                    let id = keys[i % keys.len()];
                    let ver = model[&id].1 + 1;
                    let r = rid_of(&mut e, t, id);
                    let b = row(&e, id, g, ver);
                    e.update_row(t, table, r, &b).unwrap();
                    Some((id, Some((g, ver))))
                }
                _ => None,
            };
            if abort {
                e.abort(t).unwrap();
            } else {
                e.commit(t).unwrap();
                if let Some((id, v)) = change {
                    match v {
                        Some(v) => { model.insert(id, v); }
                        None => { model.remove(&id); }
                    }
                }
            }
        }
        prop_assert!(e.iaa_stats().moved_updates > 0 || e.iaa_stats().in_place_updates > 0);
        let t = e.begin().unwrap();
        let rows = e.scan_table(t, table).unwrap();
        prop_assert_eq!(rows.len(), model.len());
        let schema = e.table("t").unwrap().schema.clone();
        for (rid, b) in &rows {
            let v = schema.decode(b).unwrap();
            let (id, grp, ver) = (v[0].as_i64().unwrap(), v[1].as_i64().unwrap(), v[2].as_i64().unwrap());
            prop_assert_eq!(model.get(&id), Some(&(grp, ver)), "row {}", id);
            prop_assert_eq!(e.lookup(t, pk, &[Value::Int(id)], false).unwrap(), vec![*rid]);
            prop_assert!(e.lookup(t, gi, &[Value::Int(grp)], false).unwrap().contains(rid));
        }
        for i in [pk, gi] {
            prop_assert_eq!(e.scan_index(t, i, None, None, false, usize::MAX).unwrap().len(), model.len());
        }
        e.commit(t).unwrap();
        prop_assert!(e.check().unwrap().is_empty());
    }
}

/// DFTL answers the same queries as the page FTL (its data stream's victims): after random
/// overwrites, the committed victims name DB pages, and the epoch holds until they change.
#[test]
fn dftl_answers_the_gc_information_queries() {
    let opts = FtlOptions {
        spare_factor: 0.2,
        ..FtlOptions::default()
    };
    let mut s =
        BlockPageStore::new(ftl::build("dftl", nand(), &opts).unwrap(), 4096, Some(64)).unwrap();
    let hint = storage::pagestore::WriteHint {
        object: 9,
        kind: storage::pagestore::PageKind::Heap,
    };
    let n = (s.db_pages() * 3 / 4) as u32;
    let mut t = 0;
    let mut x = 7u64;
    for i in 0..n * 4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let pid = if i < n { i } else { (x % u64::from(n)) as u32 };
        t = s.write_page(t, pid, &vec![i as u8; 4096], hint).unwrap();
    }
    let mut pages = Vec::new();
    let info = s.gc_victims(2, u64::MAX, &mut pages).unwrap();
    assert_eq!(info.flash_page_bytes, 4096);
    assert!(
        !pages.is_empty(),
        "the committed victims hold valid DB pages"
    );
    assert!(pages.iter().all(|&p| p < n));
    let mut again = vec![u32::MAX];
    let same = s.gc_victims(2, info.epoch, &mut again).unwrap();
    assert_eq!(same.epoch, info.epoch);
    assert_eq!(
        again,
        vec![u32::MAX],
        "same epoch: the list is not rewritten"
    );
}
