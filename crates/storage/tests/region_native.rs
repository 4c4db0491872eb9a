//! NoFTL regions on the native page store: placement, independent GC, refusals, persistence,
//! and the DDL path through the engine.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, Nand, OpKind};
use storage::pagestore::{PageKind, WriteHint};
use storage::{BlockPageStore, Engine, EngineConfig, Error, NativeConfig, NativeStore, PageStore};

/// 2 channels x 2 chips, 128 blocks of 16 pages per die (32 MiB).
fn device() -> Nand {
    let o = ["geometry.blocks_per_plane=64".to_string()];
    Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
}

fn cfg() -> NativeConfig {
    NativeConfig {
        log_blocks: Some(512),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

fn opts(s: &[(&str, &str)]) -> Vec<(String, String)> {
    s.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn page(pid: u32, version: u8) -> Vec<u8> {
    let mut p = vec![version; 4096];
    p[..4].copy_from_slice(&pid.to_le_bytes());
    p
}

const HOT: WriteHint = WriteHint {
    object: 9,
    kind: PageKind::Heap,
};
const OTHER: WriteHint = WriteHint {
    object: 7,
    kind: PageKind::Heap,
};

fn die_of(s: &NativeStore, pid: u32) -> u32 {
    let g = s.space().geometry();
    g.die_of_block(g.block_of(s.location(pid).unwrap())).0
}

#[test]
fn a_regions_pages_land_on_its_dies_and_it_collects_on_its_own() {
    let mut s = NativeStore::format(device(), cfg()).unwrap();
    let mut t = 0;
    for pid in 0..200 {
        t = s.write_page(t, pid, &page(pid, 1), OTHER).unwrap();
    }
    t = s
        .create_region(
            t,
            "rg_hot",
            &opts(&[
                ("MAX_CHIPS", "1"),
                ("MAX_CHANNELS", "1"),
                ("GC", "fifo"),
                ("OP", "20%"),
            ]),
        )
        .unwrap();
    let (_, dies) = s.region("rg_hot").unwrap();
    let dies = dies.to_vec();
    assert_eq!(dies.len(), 1, "one chip of one die");
    // The default region's pages moved off the region's die and read back.
    let mut buf = vec![0u8; 4096];
    for pid in 0..200 {
        assert!(!dies.contains(&die_of(&s, pid)));
        t = s.read_page(t, pid, &mut buf).unwrap();
        assert_eq!(buf, page(pid, 1));
    }
    s.bind_object(9, "rg_hot").unwrap();
    let default_gc = s.space().counts().gc_erases;
    // Churn 300 pages of the hot object until its region collects many times.
    for round in 0..12u8 {
        for pid in 1000..1300 {
            t = s.write_page(t, pid, &page(pid, round), HOT).unwrap();
        }
    }
    for pid in 1000..1300 {
        assert!(
            dies.contains(&die_of(&s, pid)),
            "page {pid} of the region's object"
        );
        t = s.read_page(t, pid, &mut buf).unwrap();
        assert_eq!(buf, page(pid, 11));
    }
    let (rs, _) = s.region("rg_hot").unwrap();
    assert!(rs.counts().gc_erases > 0, "the region collected");
    assert_eq!(
        s.space().counts().gc_erases,
        default_gc,
        "the default region did not collect for it"
    );
    assert_eq!(rs.config().gc, ftl::GcPolicy::Fifo);
    s.space().check().unwrap();
    // Power cut: the region table, the dies and the data come back.
    let mut r = NativeStore::open(s.into_nand_raw(), cfg()).unwrap();
    let (_, d2) = r.region("rg_hot").unwrap();
    assert_eq!(d2, &dies[..]);
    for pid in (0..200).chain(1000..1300) {
        r.read_page(t, pid, &mut buf).unwrap();
        assert_eq!(buf[..4], pid.to_le_bytes());
    }
    assert!(dies.contains(&die_of(&r, 1000)));
    // Registering it again with the same options is a no-op; other options are refused.
    r.create_region(
        t,
        "rg_hot",
        &opts(&[
            ("MAX_CHIPS", "1"),
            ("MAX_CHANNELS", "1"),
            ("GC", "fifo"),
            ("OP", "20%"),
        ]),
    )
    .unwrap();
    assert!(r
        .create_region(t, "RG_HOT", &opts(&[("MAX_CHIPS", "2")]))
        .is_err());
}

#[test]
fn regions_that_do_not_fit_are_refused_before_anything_is_written() {
    let mut s = NativeStore::format(device(), cfg()).unwrap();
    let mut t = 0;
    for pid in 0..50 {
        t = s.write_page(t, pid, &page(pid, 1), OTHER).unwrap();
    }
    let programs = s.nand().unwrap().stats().total(OpKind::Program);
    let bad: [&[(&str, &str)]; 4] = [
        &[("MAX_CHIPS", "4")], // leaves the default region nothing
        &[("MAX_CHIPS", "3"), ("MAX_CHANNELS", "1")], // one channel has two chips
        &[("MAX_CHIPS", "1"), ("MAX_SIZE", "8M")], // a chip holds 8 MiB raw, less usable
        &[("MAX_CHIPS", "1"), ("OP", "150%")], // not a percentage
    ];
    for o in bad {
        assert!(s.create_region(t, "r", &opts(o)).is_err(), "{o:?}");
    }
    assert_eq!(
        s.nand().unwrap().stats().total(OpKind::Program),
        programs,
        "nothing written"
    );
    t = s
        .create_region(t, "a", &opts(&[("MAX_CHIPS", "2"), ("MAX_SIZE", "4M")]))
        .unwrap();
    assert!(
        s.create_region(t, "b", &opts(&[("MAX_CHIPS", "2")]))
            .is_err(),
        "chips already taken"
    );
    s.create_region(t, "b", &opts(&[("MAX_CHIPS", "1")]))
        .unwrap();
    let (_, a) = s.region("a").unwrap();
    let (_, b) = s.region("b").unwrap();
    assert!(a.iter().all(|d| !b.contains(d)));
}

fn native_engine() -> Engine {
    let store = NativeStore::format(device(), cfg()).unwrap();
    Engine::create(Box::new(store), EngineConfig::default()).unwrap()
}

const DDL: &str = "CREATE REGION rg_hot (MAX_SIZE=2M, MAX_CHIPS=1, MAX_CHANNELS=1, GC=greedy, OP=10%, IPA_MODE=SLC);\n\
                   CREATE TABLESPACE ts_hot (REGION=rg_hot, EXTENT_SIZE=128K);\n\
                   CREATE TABLE hot (id INT, v CHAR(200)) TABLESPACE ts_hot;\n\
                   CREATE UNIQUE INDEX hot_pk ON hot (id);\n\
                   CREATE TABLE cold (id INT, v CHAR(200))";

#[test]
fn ddl_places_tables_in_regions_and_regions_survive_a_restart() {
    use storage::tuple::Value;
    let mut e = native_engine();
    let txn = e.begin().unwrap();
    e.execute_ddl(txn, DDL).unwrap();
    e.commit(txn).unwrap();
    let (hot, cold) = (e.table("hot").unwrap().id, e.table("cold").unwrap().id);
    let txn = e.begin().unwrap();
    for i in 0..300 {
        e.insert(txn, hot, &[Value::Int(i), Value::Str("h".into())])
            .unwrap();
        e.insert(txn, cold, &[Value::Int(i), Value::Str("c".into())])
            .unwrap();
    }
    e.commit(txn).unwrap();
    e.checkpoint().unwrap();
    let store = e.shutdown().unwrap();
    let s = NativeStore::open(store.into_nand().unwrap(), cfg()).unwrap();
    let (_, dies) = s.region("rg_hot").unwrap();
    let dies = dies.to_vec();
    let mut e = Engine::open(Box::new(s), EngineConfig::default()).unwrap();
    assert!(e.catalog().region_by_name("RG_HOT").is_some());
    let txn = e.begin().unwrap();
    let idx = e.index("hot_pk").unwrap().id;
    assert_eq!(
        e.lookup(txn, idx, &[Value::Int(299)], false).unwrap().len(),
        1
    );
    e.commit(txn).unwrap();
    // Pages written after the restart still go to the region.
    let txn = e.begin().unwrap();
    for i in 300..400 {
        e.insert(txn, hot, &[Value::Int(i), Value::Str("h".into())])
            .unwrap();
    }
    e.commit(txn).unwrap();
    e.checkpoint().unwrap();
    let hot_pages = pages_of(&mut e, "hot");
    let cold_pages = pages_of(&mut e, "cold");
    assert!(hot_pages.len() > 5 && cold_pages.len() > 5);
    let s = NativeStore::open(e.shutdown().unwrap().into_nand().unwrap(), cfg()).unwrap();
    for p in hot_pages {
        assert!(dies.contains(&die_of(&s, p)), "hot page {p}");
    }
    for p in cold_pages {
        assert!(!dies.contains(&die_of(&s, p)), "cold page {p}");
    }
}

fn pages_of(e: &mut Engine, table: &str) -> Vec<u32> {
    let t = e.table(table).unwrap().id;
    let txn = e.begin().unwrap();
    let mut pages: Vec<u32> = e
        .scan_table(txn, t)
        .unwrap()
        .iter()
        .map(|(rid, _)| rid.page)
        .collect();
    e.commit(txn).unwrap();
    pages.sort_unstable();
    pages.dedup();
    pages
}

#[test]
fn bad_region_ddl_is_refused_with_its_position_and_block_stores_refuse_regions() {
    let mut e = native_engine();
    let txn = e.begin().unwrap();
    let err = e
        .execute_ddl(txn, "CREATE REGION r (MAX_CHIPS=1,\n OP=200%)")
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Ddl {
                line: 2,
                column: 5,
                ..
            }
        ),
        "{err}"
    );
    let err = e
        .execute_ddl(txn, "CREATE TABLESPACE ts (REGION=nowhere)")
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound { kind: "region", .. }),
        "{err}"
    );
    let err = e
        .execute_ddl(txn, "CREATE REGION r (MAX_CHIPS=9)")
        .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    e.commit(txn).unwrap();
    let store = BlockPageStore::new(
        Box::new(storage::crashdisk::CrashDisk::new(8192)),
        4096,
        Some(512),
    )
    .unwrap();
    let mut e = Engine::create(Box::new(store), EngineConfig::default()).unwrap();
    let txn = e.begin().unwrap();
    let err = e
        .execute_ddl(txn, "CREATE REGION r (MAX_CHIPS=1)")
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");
}

/// Power cuts at every few flash operations around `CREATE REGION` and the writes after it:
/// the store always reopens, every acknowledged write reads back (or the one in flight at the
/// cut), and a region that survived owns its pages.
#[test]
fn power_cuts_during_region_creation_and_use_lose_nothing_acknowledged() {
    use nand::FaultPlan;
    let region = opts(&[("MAX_CHIPS", "1"), ("GC", "greedy")]);
    for k in (1..1200).step_by(11) {
        let mut s = NativeStore::format(device(), cfg()).unwrap();
        let mut t = 0;
        for pid in 0..150 {
            t = s.write_page(t, pid, &page(pid, 1), OTHER).unwrap();
        }
        let nand = s.nand_mut().unwrap();
        let at = nand.ops_issued() + k;
        nand.set_fault_plan(FaultPlan {
            cut_at_op: Some(at),
            ..FaultPlan::default()
        });
        // (pid -> last acknowledged version, version in flight)
        let mut acked: Vec<(u32, u8, Option<u8>)> = (0..150).map(|p| (p, 1, None)).collect();
        let mut created = false;
        let mut go = || -> Result<(), Error> {
            t = s.create_region(t, "rg", &region)?;
            created = true;
            s.bind_object(9, "rg")?;
            for v in 2..5u8 {
                for pid in 0..150u32 {
                    let (hint, id) = if pid % 2 == 0 {
                        (HOT, pid + 1000)
                    } else {
                        (OTHER, pid)
                    };
                    let e = acked.iter_mut().find(|x| x.0 == id);
                    let slot = match e {
                        Some(x) => x,
                        None => {
                            acked.push((id, 0, None));
                            acked.last_mut().unwrap()
                        }
                    };
                    slot.2 = Some(v);
                    t = s.write_page(t, id, &page(id, v), hint)?;
                    slot.1 = v;
                    slot.2 = None;
                }
            }
            Ok(())
        };
        let _ = go();
        let mut nand = s.into_nand_raw();
        nand.set_fault_plan(FaultPlan::default());
        nand.power_cut();
        nand.power_on();
        let mut r = NativeStore::open(nand, cfg())
            .unwrap_or_else(|e| panic!("cut at op +{k}: reopen failed: {e}"));
        let mut buf = vec![0u8; 4096];
        for &(pid, v, in_flight) in &acked {
            r.read_page(0, pid, &mut buf).unwrap();
            let got = if buf.iter().all(|&b| b == 0) {
                0
            } else {
                buf[4]
            };
            assert!(
                got == v || Some(got) == in_flight,
                "cut at op +{k}: page {pid} reads version {got}, acknowledged {v}"
            );
        }
        if created {
            let (_, dies) = r
                .region("rg")
                .unwrap_or_else(|| panic!("cut at op +{k}: the acknowledged region is gone"));
            let dies = dies.to_vec();
            for &(pid, v, _) in &acked {
                if pid >= 1000 && v >= 2 {
                    assert!(
                        dies.contains(&die_of(&r, pid)),
                        "cut at op +{k}: region page {pid} off its dies"
                    );
                }
            }
        }
        r.space().check().unwrap();
    }
}

/// MAX_SIZE holds at run time: a region takes no more distinct pages than it allows; rewrites
/// and frees keep working, and the count survives a restart.
#[test]
fn a_region_refuses_pages_beyond_its_max_size() {
    let mut s = NativeStore::format(device(), cfg()).unwrap();
    let mut t = s
        .create_region(
            0,
            "small",
            &opts(&[("MAX_CHIPS", "1"), ("MAX_SIZE", "64K")]),
        )
        .unwrap();
    s.bind_object(9, "small").unwrap();
    for pid in 0..16 {
        t = s.write_page(t, pid, &page(pid, 1), HOT).unwrap();
    }
    let programs = s.nand().unwrap().stats().total(OpKind::Program);
    let err = s.write_page(t, 16, &page(16, 1), HOT).unwrap_err();
    assert!(err.to_string().contains("region small is full"), "{err}");
    assert_eq!(
        s.nand().unwrap().stats().total(OpKind::Program),
        programs,
        "refused before writing"
    );
    t = s.write_page(t, 3, &page(3, 2), HOT).unwrap();
    t = s.write_page(t, 100, &page(100, 1), OTHER).unwrap();
    t = s.page_freed(t, 5).unwrap();
    t = s.write_page(t, 16, &page(16, 1), HOT).unwrap();
    let mut r = NativeStore::open(s.into_nand_raw(), cfg()).unwrap();
    r.bind_object(9, "small").unwrap();
    // Page 5 may come back mapped (its free was not checkpointed): then the region is full.
    let mut buf = vec![0u8; 4096];
    r.read_page(t, 5, &mut buf).unwrap();
    let room = buf.iter().all(|&b| b == 0);
    assert_eq!(r.write_page(t, 17, &page(17, 1), HOT).is_ok(), room);
}

/// The tiny device's geometry on the MLC chips of the 16 KiB preset, with 4 KiB pages.
fn mlc_device() -> Nand {
    let o: Vec<String> = [
        "geometry.page_size_bytes=4096",
        "geometry.oob_size_bytes=128",
        "geometry.channels=2",
        "geometry.chips_per_channel=2",
        "geometry.blocks_per_plane=64",
        "geometry.pages_per_block=32",
        "reliability.factory_bad_block_ratio=0",
        "reliability.ecc_codeword_bytes=512",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Nand::new(DeviceConfig::preset("mlc16k", &o).unwrap()).unwrap()
}

#[test]
fn a_pslc_region_erases_its_blocks_into_pslc_uses_half_of_each_block_and_survives_a_reopen() {
    let mut s = NativeStore::format(mlc_device(), cfg()).unwrap();
    let mut t = s
        .create_region(
            0,
            "rg_fast",
            &opts(&[("MAX_CHIPS", "1"), ("CELL_MODE", "pSLC"), ("OP", "20%")]),
        )
        .unwrap();
    let (sp, dies) = s.region("rg_fast").unwrap();
    let dies = dies.to_vec();
    // pSLC uses the lower page of each word line: half the pages of an MLC block.
    assert_eq!(sp.pages_per_block(), 16);
    assert_eq!(s.space().pages_per_block(), 32);
    s.bind_object(9, "rg_fast").unwrap();
    for round in 1..=20u8 {
        for pid in 0..300 {
            t = s.write_page(t, pid, &page(pid, round), HOT).unwrap();
        }
        t = s.sync_pages(t).unwrap();
    }
    let region_blocks: Vec<u32> = {
        let g = s.space().geometry();
        (0..g.blocks())
            .filter(|&b| dies.contains(&g.die_of_block(nand::Pbn(b)).0))
            .collect()
    };
    for &b in &region_blocks {
        let info = s.space().nand().block_info(nand::Pbn(b)).unwrap();
        assert_eq!(info.mode, nand::CellMode::Pslc, "block {b} of the region");
    }
    let (sp, _) = s.region("rg_fast").unwrap();
    assert!(sp.counts().gc_erases > 0, "the region collected garbage");
    assert_eq!(sp.counts().pad_pages, 0, "pSLC has no paired pages to pad");
    // Survives a reopen: the region's pages read back.
    let mut s = NativeStore::open(s.into_nand_raw(), cfg()).unwrap();
    let mut buf = vec![0u8; 4096];
    for pid in 0..300 {
        t = s.read_page(t, pid, &mut buf).unwrap();
        assert_eq!(buf, page(pid, 20), "page {pid}");
    }
}

#[test]
fn a_pslc_region_is_refused_on_slc_chips_and_unknown_modes_are_refused() {
    let mut s = NativeStore::format(device(), cfg()).unwrap();
    let e = s
        .create_region(0, "rg", &opts(&[("MAX_CHIPS", "1"), ("CELL_MODE", "pSLC")]))
        .unwrap_err();
    assert!(e.to_string().contains("needs MLC or TLC chips"), "{e}");
    assert!(s.region("rg").is_none(), "nothing changed");
    let e = s
        .create_region(0, "rg", &opts(&[("MAX_CHIPS", "1"), ("CELL_MODE", "tlc")]))
        .unwrap_err();
    assert!(
        e.to_string().contains("CELL_MODE must be native or pSLC"),
        "{e}"
    );
}

#[test]
fn the_native_store_on_mlc_pads_the_log_at_each_force_and_reads_everything_back() {
    let mut s = NativeStore::format(mlc_device(), cfg()).unwrap();
    let mut t = 0;
    let block = vec![7u8; 4096];
    for b in 0..5 {
        t = s.write_log(t, b, &block).unwrap();
        t = s.force_log(t).unwrap();
    }
    // Each forced log page sits on a lower page; its upper page is padded before the force
    // returns, so the next log write cannot destroy it.
    assert_eq!(s.space().counts().pad_pages, 5);
    let mut buf = vec![0u8; 4096];
    for b in 0..5 {
        t = s.read_log(t, b, &mut buf).unwrap();
        assert_eq!(buf, block);
    }
}
