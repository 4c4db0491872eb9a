//! `ftl::build` and `ftl::open` know every FTL by name and refuse bad options with typed errors.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::options::KINDS;
use ftl::{BlockDevice, FtlError, FtlOptions};
use nand::{DeviceConfig, Nand};

fn tiny() -> Nand {
    Nand::new(DeviceConfig::preset("tiny", &[]).unwrap()).unwrap()
}

#[test]
fn every_kind_builds_writes_and_reopens_from_its_flash() {
    for kind in KINDS {
        let opts = FtlOptions::default();
        let mut dev = ftl::build(kind, tiny(), &opts).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(
            dev.name().starts_with(kind),
            "{kind} is called {}",
            dev.name()
        );
        let page = vec![7u8; ftl::LOGICAL_PAGE_BYTES];
        let t = dev.write(0, 0, &page, true).unwrap();
        dev.flush(t).unwrap();
        if let Some(mut nand) = dev.into_nand() {
            nand.power_cut();
            nand.power_on();
            let mut dev =
                ftl::open(kind, nand, &opts).unwrap_or_else(|e| panic!("reopen {kind}: {e}"));
            let mut buf = vec![0u8; ftl::LOGICAL_PAGE_BYTES];
            dev.read(0, 0, &mut buf).unwrap();
            assert_eq!(buf, page, "{kind}");
        }
    }
}

#[test]
fn unknown_kinds_and_bad_options_are_typed_errors() {
    assert!(matches!(
        ftl::build("nosuch", tiny(), &FtlOptions::default()),
        Err(FtlError::Config(_))
    ));
    for bad in [
        FtlOptions {
            spare_factor: 1.5,
            ..FtlOptions::default()
        },
        FtlOptions {
            spare_factor: 0.0,
            ..FtlOptions::default()
        },
        FtlOptions {
            cache_fraction: 0.0,
            ..FtlOptions::default()
        },
        FtlOptions {
            cache_fraction: f64::NAN,
            ..FtlOptions::default()
        },
    ] {
        for kind in ["page", "dftl"] {
            assert!(
                matches!(ftl::build(kind, tiny(), &bad), Err(FtlError::Config(_))),
                "{kind} {bad:?}"
            );
        }
    }
    // A 16 KiB-page device: the page-mapped FTLs map 4 KiB logical pages into its pages
    // (four per page); the block-mapped ones map whole pages behind 4 KiB sectors
    // (`sectors.rs`), and their own constructors refuse it.
    let mlc = || {
        let o = [
            "geometry.blocks_per_plane=16".to_string(),
            "store=\"meta\"".into(),
        ];
        Nand::new(DeviceConfig::preset("mlc16k", &o).unwrap()).unwrap()
    };
    let page = ftl::build("page", mlc(), &FtlOptions::default()).unwrap();
    let pages = mlc().geometry().pages();
    assert!(page.capacity_pages() > 3 * pages && page.capacity_pages() < 4 * pages);
    // AMF needs power-loss protection on MLC (its fixed placement cannot pad word lines).
    let protected = || {
        let mut cfg = mlc().config().clone();
        cfg.plp = true;
        Nand::new(cfg).unwrap()
    };
    assert!(matches!(
        ftl::build("amf", mlc(), &FtlOptions::default()),
        Err(FtlError::Config(_))
    ));
    for kind in ["block", "fast", "amf"] {
        let dev = ftl::build(kind, protected(), &FtlOptions::default()).unwrap();
        assert_eq!(
            dev.capacity_pages() % 4,
            0,
            "{kind}: whole flash pages of sectors"
        );
        assert!(dev.capacity_pages() < 4 * pages, "{kind}");
    }
    assert!(matches!(
        ftl::block::BlockFtl::new(mlc(), &ftl::block::BlockOptions::default()),
        Err(FtlError::Config(_))
    ));
    // The NoFTL paper's device (one die, 32-byte OOB) works.
    let noftl =
        Nand::new(DeviceConfig::preset("noftl13", &["store=\"meta\"".into()]).unwrap()).unwrap();
    let dev = ftl::build("dftl", noftl, &FtlOptions::default()).unwrap();
    assert_eq!(dev.name(), "dftl-2%");
}
