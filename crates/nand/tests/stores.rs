//! The three stores: RAM, a file image that survives a restart, and metadata only.

mod common;
use common::*;
use nand::{BlockState, CellMode, FaultPlan, Nand, NandError, Pbn, Ppn};

#[test]
fn an_image_keeps_data_oob_wear_bad_blocks_modes_and_clock_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let cfg = cfg(
        "mlc16k",
        &[
            "geometry.channels=1",
            "geometry.chips_per_channel=1",
            "geometry.blocks_per_plane=8",
            "reliability.factory_bad_block_ratio=0.2",
            "seed=3",
            "reliability.rber_fresh=0",
            "reliability.rber_at_endurance=0",
        ],
    );
    let data: Vec<u8> = (0..16384u32).map(|i| (i ^ (i >> 8)) as u8).collect();
    let (clock, bad) = {
        let mut n = Nand::create_image(cfg.clone(), &path).unwrap();
        let good = (1..16).find(|&b| !n.is_bad(Pbn(b))).unwrap();
        n.erase(0, Pbn(good), CellMode::Pslc, H).unwrap();
        let first = n.geometry().first_page(Pbn(good));
        n.program(n.now_ns(), first, &data, &oob(&n, 0x3C), H)
            .unwrap();
        n.partial_program(n.now_ns(), first, 16000, &[0; 4], 0, &[], H)
            .unwrap();
        n.program(n.now_ns(), Ppn(0), &data, &[], H).unwrap();
        n.program(n.now_ns(), Ppn(1), &data, &[], H).unwrap();
        // Page 2 is the lower page of word line 1: its loss tears only itself.
        n.set_fault_plan(FaultPlan {
            cut_at_op: Some(n.ops_issued() + 1),
            ..Default::default()
        });
        assert_eq!(
            n.program(n.now_ns(), Ppn(2), &data, &[], H),
            Err(NandError::PowerLost)
        );
        let bad: Vec<u32> = (0..16).filter(|&b| n.is_bad(Pbn(b))).collect();
        (n.now_ns(), (bad, good))
    };
    let (bad_blocks, good) = bad;
    let mut n = Nand::open_image(&path).unwrap();
    assert_eq!(n.config(), &cfg);
    assert_eq!(n.now_ns(), clock, "virtual time goes on where it stopped");
    assert_eq!(
        (0..16).filter(|&b| n.is_bad(Pbn(b))).collect::<Vec<_>>(),
        bad_blocks
    );
    let info = n.block_info(Pbn(good)).unwrap();
    assert_eq!(
        (info.mode, info.erase_count, info.state, info.next_page),
        (CellMode::Pslc, 1, BlockState::Good, 1)
    );
    let first = n.geometry().first_page(Pbn(good));
    let (d, o) = read_back(&mut n, first);
    let mut expect = data.clone();
    expect[16000..16004].fill(0);
    assert_eq!(d, expect);
    assert!(o.iter().all(|&b| b == 0x3C));
    assert_eq!(
        n.page_programs(first),
        2,
        "the partial program counts toward NOP after a reopen"
    );
    assert_eq!(read_back(&mut n, Ppn(0)).0, data);
    let mut buf = page(&n, 0);
    assert!(
        matches!(
            n.read(n.now_ns(), Ppn(2), &mut buf, &mut [], H),
            Err(NandError::Torn(_))
        ),
        "a torn page stays torn"
    );
}

#[test]
fn opening_something_that_is_not_an_image_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.img");
    std::fs::write(&path, vec![7u8; 100_000]).unwrap();
    let err = Nand::open_image(&path).unwrap_err();
    assert!(
        err.to_string().contains("not a noftl device image"),
        "{err}"
    );
    let err = Nand::open_image(&dir.path().join("missing.img")).unwrap_err();
    assert!(err.to_string().contains("cannot open image"), "{err}");
}

#[test]
fn metadata_only_reads_a_deterministic_pattern_and_keeps_oob() {
    let mut n = dev("tiny", &["store=\"meta\""]);
    assert_eq!(n.store_kind(), "meta");
    n.program(0, Ppn(9), &page(&n, 0xAB), &oob(&n, 0x11), H)
        .unwrap();
    let (d, o) = read_back(&mut n, Ppn(9));
    assert_eq!(&d[..8], &9u64.to_le_bytes());
    assert!(
        o.iter().all(|&b| b == 0x11),
        "OOB is kept: FTLs recover from it"
    );
    let (d, _) = read_back(&mut n, Ppn(10));
    assert!(
        d.iter().all(|&b| b == 0xFF),
        "erased pages still read as 0xFF"
    );
}

#[test]
fn a_bad_config_file_is_refused_with_the_reason() {
    assert!(nand::DeviceConfig::from_toml("name = 3", &[]).is_err());
    let err = nand::DeviceConfig::from_toml("this is not toml", &[]).unwrap_err();
    assert!(err.to_string().contains("cannot parse"), "{err}");
    let text = nand::PRESETS[0]
        .1
        .replace("pages_per_block = 64", "pages_per_block = 0");
    let err = nand::DeviceConfig::from_toml(&text, &[]).unwrap_err();
    assert!(
        err.to_string().contains("geometry.pages_per_block"),
        "{err}"
    );
}
