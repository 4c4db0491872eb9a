//! In-Place Appends on the native store: small updates become appends to the same flash page,
//! pages read back equal to what was committed (across evictions, restarts and GC), and regions
//! the device cannot append to are refused before anything is written.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, Nand, OpKind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::tuple::Value;
use storage::{Engine, EngineConfig, NativeConfig, NativeStore};

/// `tiny` (SLC, NOP 4): 2 channels x 2 chips of 64 blocks per plane.
fn slc_device() -> Nand {
    let o = ["geometry.blocks_per_plane=64".to_string()];
    Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
}

/// `mlc16k` made small: 16 KiB pages, pSLC capable.
fn mlc_device() -> Nand {
    let o = [
        "geometry.blocks_per_plane=24".to_string(),
        "geometry.pages_per_block=64".to_string(),
        "geometry.channels=2".to_string(),
        "geometry.chips_per_channel=2".to_string(),
    ];
    Nand::new(DeviceConfig::preset("mlc16k", &o).unwrap()).unwrap()
}

fn cfg(page_bytes: usize) -> NativeConfig {
    NativeConfig {
        page_bytes,
        log_blocks: Some(512),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

fn small_pool() -> EngineConfig {
    EngineConfig {
        buffer_frames: 24,
        ..EngineConfig::default()
    }
}

/// Creates the region and a table of `rows` rows in it, then updates one small column of random
/// rows `updates` times (a transaction each), checking every row against the model at the end
/// and after a restart. Returns the engine's buffer counters and the store's appends.
fn run_updates(
    nand: Nand,
    page_bytes: usize,
    region: &str,
    rows: i64,
    updates: usize,
) -> (u64, u64) {
    let store = NativeStore::format(nand, cfg(page_bytes)).unwrap();
    let mut e = Engine::create(Box::new(store), small_pool()).unwrap();
    let txn = e.begin().unwrap();
    e.execute_ddl(
        txn,
        &format!(
            "CREATE REGION rg_ipa ({region});\n\
             CREATE TABLESPACE ts_ipa (REGION=rg_ipa);\n\
             CREATE TABLE t (id INT, v INT, pad CHAR(100)) TABLESPACE ts_ipa;"
        ),
    )
    .unwrap();
    e.commit(txn).unwrap();
    let t = e.table("t").unwrap().id;
    let mut rids = Vec::new();
    for chunk in (0..rows).collect::<Vec<_>>().chunks(1000) {
        let txn = e.begin().unwrap();
        for &i in chunk {
            let row = [Value::Int(i), Value::Int(0), Value::Str("p".repeat(100))];
            rids.push(e.insert(txn, t, &row).unwrap());
        }
        e.commit(txn).unwrap();
        e.checkpoint().unwrap();
    }
    let mut model = vec![0i64; rows as usize];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for _ in 0..updates {
        let i = rng.random_range(0..rows as usize);
        model[i] = rng.random_range(1..1_000_000);
        let txn = e.begin().unwrap();
        let row = [
            Value::Int(i as i64),
            Value::Int(model[i]),
            Value::Str("p".repeat(100)),
        ];
        e.update(txn, t, rids[i], &row).unwrap();
        e.commit(txn).unwrap();
    }
    let check = |e: &mut Engine| {
        let txn = e.begin().unwrap();
        for (i, &rid) in rids.iter().enumerate() {
            let row = e.get(txn, t, rid).unwrap().unwrap();
            assert_eq!(row[1], Value::Int(model[i]), "row {i}");
        }
        e.commit(txn).unwrap();
    };
    check(&mut e);
    let buffer = e.buffer_stats();
    let store = e.shutdown().unwrap();
    let appends = store
        .as_any()
        .and_then(|a| a.downcast_ref::<NativeStore>())
        .unwrap()
        .ipa_appends();
    let partial = store.nand().unwrap().stats().total(OpKind::PartialProgram);
    assert_eq!(appends, partial, "every append is one partial program");
    // The shutdown's flush may append more after the counters were read.
    assert!(buffer.ipa_appends <= appends);
    let s = NativeStore::open(store.into_nand().unwrap(), cfg(page_bytes)).unwrap();
    let mut e = Engine::open(Box::new(s), small_pool()).unwrap();
    check(&mut e);
    (buffer.ipa_appends, buffer.ipa_out_of_place)
}

#[test]
fn small_updates_become_appends_and_read_back_after_a_restart_on_slc() {
    let (appends, out_of_place) =
        run_updates(slc_device(), 4096, "MAX_CHIPS=2, IPA_MODE=SLC", 2000, 3000);
    assert!(appends > 100, "{appends} appends");
    assert!(out_of_place > 0, "a page with [2x3] full goes out of place");
}

#[test]
fn pslc_regions_on_mlc_append_to_16k_pages() {
    let (appends, _) = run_updates(
        mlc_device(),
        16384,
        "MAX_CHIPS=2, IPA_MODE=pSLC, IPA_SCHEME=3x2",
        20_000,
        3000,
    );
    assert!(appends > 100, "{appends} appends");
}

#[test]
fn regions_the_chips_cannot_append_to_are_refused_before_anything_is_written() {
    type Case = (fn() -> Nand, &'static str, &'static str);
    let cases: [Case; 5] = [
        (slc_device, "MAX_CHIPS=1, IPA_MODE=pSLC", "needs MLC or TLC"),
        (mlc_device, "MAX_CHIPS=1, IPA_MODE=SLC", "needs SLC chips"),
        (
            slc_device,
            "MAX_CHIPS=1, IPA_MODE=SLC, IPA_SCHEME=4x3",
            "allow 4",
        ),
        (slc_device, "MAX_CHIPS=1, IPA_MODE=odd_MLC", "not offered"),
        (
            slc_device,
            "MAX_CHIPS=1, IPA_MODE=SLC, IPA_SCHEME=3x8, IPA_RECORD=64",
            "an eighth",
        ),
    ];
    for (device, region, why) in cases {
        let nand = device();
        let store = NativeStore::format(nand, cfg(4096)).unwrap();
        let mut e = Engine::create(Box::new(store), small_pool()).unwrap();
        let txn = e.begin().unwrap();
        let err = e
            .execute_ddl(txn, &format!("CREATE REGION r ({region})"))
            .unwrap_err();
        assert!(err.to_string().contains(why), "{region}: {err}");
        e.abort(txn).unwrap();
        assert!(e.catalog().region_by_name("R").is_none(), "{region}");
    }
}
