//! Every NAND rule: each allowed case and each refused case. A refused operation changes nothing.

mod common;
use common::*;
use nand::{CellMode, NandError, Pbn, Ppn, Purpose};

#[test]
fn erased_pages_read_as_ff_in_data_and_oob() {
    let mut n = dev("tiny", &[]);
    let (d, o) = read_back(&mut n, Ppn(5));
    assert!(d.iter().all(|&b| b == 0xFF) && o.iter().all(|&b| b == 0xFF));
}

#[test]
fn program_then_read_returns_the_data_and_oob() {
    let mut n = dev("tiny", &[]);
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let o = oob(&n, 0x42);
    n.program(0, Ppn(0), &data, &o, H).unwrap();
    assert_eq!(read_back(&mut n, Ppn(0)), (data, o));
}

#[test]
fn program_without_oob_leaves_oob_erased() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 1), &[], H).unwrap();
    let (_, o) = read_back(&mut n, Ppn(0));
    assert!(o.iter().all(|&b| b == 0xFF));
}

#[test]
fn programming_a_programmed_page_is_refused_and_changes_nothing() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 1), &[], H).unwrap();
    let before = (n.report(), n.now_ns());
    let err = n.program(0, Ppn(0), &page(&n, 2), &[], H).unwrap_err();
    assert_eq!(err, NandError::AlreadyProgrammed { ppn: Ppn(0) });
    assert_eq!(
        (n.report(), n.now_ns()),
        before,
        "a refused operation changes nothing"
    );
    assert_eq!(read_back(&mut n, Ppn(0)).0, page(&n, 1));
}

#[test]
fn pages_are_programmed_in_increasing_order_and_slc_may_skip() {
    let mut n = dev("tiny", &[]);
    n.program(0, ppn(&n, 0, 3), &page(&n, 1), &[], H).unwrap(); // skipping 0..2 is allowed on SLC
    let err = n
        .program(0, ppn(&n, 0, 1), &page(&n, 1), &[], H)
        .unwrap_err();
    assert!(
        matches!(err, NandError::ProgramOutOfOrder { next: 4, .. }),
        "{err}"
    );
    n.program(0, ppn(&n, 0, 4), &page(&n, 1), &[], H).unwrap();
}

#[test]
fn mlc_blocks_are_programmed_strictly_consecutively() {
    let mut n = dev(
        "mlc16k",
        &[
            "geometry.blocks_per_plane=4",
            "reliability.factory_bad_block_ratio=0",
        ],
    );
    let p = page(&n, 3);
    n.program(0, ppn(&n, 0, 0), &p, &[], H).unwrap();
    let err = n.program(0, ppn(&n, 0, 2), &p, &[], H).unwrap_err();
    assert!(
        matches!(err, NandError::ProgramOutOfOrder { next: 1, .. }),
        "{err}"
    );
    n.program(0, ppn(&n, 0, 1), &p, &[], H).unwrap();
}

#[test]
fn erase_before_program_again() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 1), &[], H).unwrap();
    erase(&mut n, 0, CellMode::Slc);
    assert_eq!(n.page_programs(Ppn(0)), 0);
    let (d, _) = read_back(&mut n, Ppn(0));
    assert!(d.iter().all(|&b| b == 0xFF));
    n.program(n.now_ns(), Ppn(0), &page(&n, 2), &[], H).unwrap();
    assert_eq!(n.block_info(Pbn(0)).unwrap().erase_count, 1);
}

#[test]
fn partial_programs_only_clear_bits_and_stop_at_the_nop_limit() {
    let mut n = dev("tiny", &["cell.nop=3"]);
    let mut base = page(&n, 0xFF);
    base[..100].fill(0x0F);
    n.program(0, Ppn(0), &base, &[], H).unwrap();
    // Appending into the erased tail is allowed: new = old AND data.
    n.partial_program(0, Ppn(0), 4000, &[0xA5; 16], 0, &[], H)
        .unwrap();
    // Rewriting the same bytes with the same value is allowed (no bit goes 0 -> 1).
    n.partial_program(0, Ppn(0), 4000, &[0xA5; 16], 0, &[], H)
        .unwrap();
    let (d, _) = read_back(&mut n, Ppn(0));
    assert_eq!(&d[4000..4016], &[0xA5; 16]);
    assert_eq!(&d[..100], &[0x0F; 100][..]);
    // Three programs in all: the NOP limit is reached.
    let err = n
        .partial_program(0, Ppn(0), 4090, &[0x00], 0, &[], H)
        .unwrap_err();
    assert_eq!(
        err,
        NandError::NopExceeded {
            ppn: Ppn(0),
            limit: 3
        }
    );
}

#[test]
fn partial_program_that_would_set_a_cleared_bit_is_refused() {
    let mut n = dev("tiny", &[]);
    let mut base = page(&n, 0xFF);
    base[10] = 0xF0;
    n.program(0, Ppn(0), &base, &[], H).unwrap();
    let before = n.report();
    let err = n
        .partial_program(0, Ppn(0), 8, &[0xFF, 0xFF, 0xFF], 0, &[], H)
        .unwrap_err();
    assert_eq!(
        err,
        NandError::WouldSetBits {
            ppn: Ppn(0),
            area: "data",
            offset: 10
        }
    );
    assert_eq!(n.report(), before);
    assert_eq!(n.page_programs(Ppn(0)), 1);
}

#[test]
fn oob_is_programmed_with_the_page_or_by_partial_program_under_the_same_rules() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 1), &[], H).unwrap();
    n.partial_program(0, Ppn(0), 0, &[], 0, &[0x00, 0x11], H)
        .unwrap();
    let (_, o) = read_back(&mut n, Ppn(0));
    assert_eq!(&o[..3], &[0x00, 0x11, 0xFF]);
    let err = n
        .partial_program(0, Ppn(0), 0, &[], 0, &[0xFF], H)
        .unwrap_err();
    assert!(
        matches!(
            err,
            NandError::WouldSetBits {
                area: "oob",
                offset: 0,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(n.stats().flash_counts().oob_writes, 1);
}

#[test]
fn a_partial_program_may_be_the_first_program_of_an_erased_page() {
    let mut n = dev("tiny", &[]);
    n.partial_program(0, Ppn(2), 100, &[1, 2, 3], 0, &[], H)
        .unwrap();
    let (d, _) = read_back(&mut n, Ppn(2));
    assert_eq!(&d[99..104], &[0xFF, 1, 2, 3, 0xFF]);
    // It advanced the write pointer like any program.
    assert!(matches!(
        n.program(0, Ppn(1), &page(&n, 0), &[], H),
        Err(NandError::ProgramOutOfOrder { .. })
    ));
}

#[test]
fn mlc_and_tlc_pages_cannot_be_partially_reprogrammed_but_pslc_pages_can() {
    let mut n = dev(
        "mlc16k",
        &[
            "geometry.blocks_per_plane=4",
            "reliability.factory_bad_block_ratio=0",
        ],
    );
    let p = page(&n, 0xFF);
    n.program(0, ppn(&n, 0, 0), &p, &[], H).unwrap();
    let err = n
        .partial_program(0, ppn(&n, 0, 0), 0, &[0], 0, &[], H)
        .unwrap_err();
    assert!(
        matches!(
            err,
            NandError::PartialProgramNotAllowed {
                mode: CellMode::Mlc,
                ..
            }
        ),
        "{err}"
    );
    erase(&mut n, 1, CellMode::Pslc);
    let info = n.block_info(Pbn(1)).unwrap();
    assert_eq!((info.mode, info.usable_pages), (CellMode::Pslc, 256));
    n.program(n.now_ns(), ppn(&n, 1, 0), &p, &[], H).unwrap();
    n.partial_program(n.now_ns(), ppn(&n, 1, 0), 16000, &[0x12; 8], 0, &[], H)
        .unwrap();
    // A pSLC block exposes only the lower pages: half the capacity.
    let err = n
        .program(n.now_ns(), ppn(&n, 1, 256), &p, &[], H)
        .unwrap_err();
    assert!(
        matches!(err, NandError::PageBeyondMode { usable: 256, .. }),
        "{err}"
    );
}

#[test]
fn pslc_is_refused_on_slc_chips_and_native_modes_must_match() {
    let mut n = dev("tiny", &[]);
    assert!(matches!(
        n.erase(0, Pbn(0), CellMode::Pslc, H),
        Err(NandError::ModeUnsupported { .. })
    ));
    assert!(matches!(
        n.erase(0, Pbn(0), CellMode::Mlc, H),
        Err(NandError::ModeUnsupported { .. })
    ));
    let mut t = dev(
        "tlc16k",
        &[
            "geometry.blocks_per_plane=2",
            "reliability.factory_bad_block_ratio=0",
        ],
    );
    assert!(matches!(
        t.erase(0, Pbn(0), CellMode::Mlc, H),
        Err(NandError::ModeUnsupported { .. })
    ));
    t.erase(0, Pbn(0), CellMode::Pslc, H).unwrap();
    assert_eq!(t.block_info(Pbn(0)).unwrap().usable_pages, 128);
}

#[test]
fn out_of_range_addresses_and_wrong_buffers_are_refused() {
    let mut n = dev("tiny", &[]);
    let pages = n.geometry().pages();
    let blocks = n.geometry().blocks();
    let p = page(&n, 0);
    assert!(matches!(
        n.program(0, Ppn(pages), &p, &[], H),
        Err(NandError::PageOutOfRange(..))
    ));
    assert!(matches!(
        n.erase(0, Pbn(blocks), CellMode::Slc, H),
        Err(NandError::BlockOutOfRange(..))
    ));
    assert!(matches!(
        n.program(0, Ppn(0), &p[..100], &[], H),
        Err(NandError::BufferSize { what: "data", .. })
    ));
    assert!(matches!(
        n.program(0, Ppn(0), &p, &[0; 3], H),
        Err(NandError::BufferSize { what: "oob", .. })
    ));
    assert!(matches!(
        n.read(0, Ppn(0), &mut [0; 10], &mut [], H),
        Err(NandError::BufferSize { .. })
    ));
    assert!(matches!(
        n.partial_program(0, Ppn(0), 4095, &[0, 0], 0, &[], H),
        Err(NandError::RangeOutOfArea { .. })
    ));
    assert!(matches!(
        n.partial_program(0, Ppn(0), usize::MAX, &[0], 0, &[], H),
        Err(NandError::RangeOutOfArea { .. })
    ));
    assert!(matches!(
        n.partial_program(0, Ppn(0), 0, &[], 0, &[], H),
        Err(NandError::EmptyProgram)
    ));
    assert_eq!(n.stats().flash_counts(), Default::default());
    assert_eq!(n.now_ns(), 0);
}

#[test]
fn factory_bad_blocks_are_seeded_marked_and_refuse_writes_but_block_zero_is_good() {
    let n1 = dev(
        "tiny",
        &["reliability.factory_bad_block_ratio=0.3", "seed=9"],
    );
    let n2 = dev(
        "tiny",
        &["reliability.factory_bad_block_ratio=0.3", "seed=9"],
    );
    let bad: Vec<u32> = (0..n1.geometry().blocks())
        .filter(|&b| n1.is_bad(Pbn(b)))
        .collect();
    let bad2: Vec<u32> = (0..n2.geometry().blocks())
        .filter(|&b| n2.is_bad(Pbn(b)))
        .collect();
    assert_eq!(bad, bad2, "same seed, same bad blocks");
    assert!(
        bad.len() > 10 && bad.len() < 70,
        "about 30% of 128 blocks: {}",
        bad.len()
    );
    let per_die = n1.geometry().blocks_per_die();
    assert!(
        bad.iter().all(|b| b % per_die != 0),
        "block 0 of each die is good"
    );
    let mut n = n1;
    let b = bad[0];
    assert_eq!(
        n.erase(0, Pbn(b), CellMode::Slc, H),
        Err(NandError::BadBlock(Pbn(b)))
    );
    let first = n.geometry().first_page(Pbn(b));
    let err = n.program(0, first, &page(&n, 0), &[], H).unwrap_err();
    assert_eq!(err, NandError::BadBlock(Pbn(b)));
    let (_, o) = read_back(&mut n, first);
    assert_eq!(
        o[0], 0x00,
        "the factory marks bad blocks in the first OOB byte of page 0"
    );
}

#[test]
fn a_block_delivers_its_rated_cycles_and_the_next_erase_fails_for_good() {
    let mut n = dev("tiny", &["endurance.native_cycles=5"]);
    for _ in 0..5 {
        erase(&mut n, 3, CellMode::Slc);
    }
    let at = n.now_ns();
    let err = n.erase(at, Pbn(3), CellMode::Slc, H).unwrap_err();
    assert!(
        matches!(
            err,
            NandError::WornOut {
                erase_count: 5,
                endurance: 5,
                ..
            }
        ),
        "{err}"
    );
    assert!(n.is_bad(Pbn(3)));
    assert_eq!(n.report().bad_blocks.grown, 1);
    let at = n.now_ns();
    assert_eq!(
        n.erase(at, Pbn(3), CellMode::Slc, H),
        Err(NandError::BadBlock(Pbn(3)))
    );
    assert!(matches!(
        n.program(at, n.geometry().first_page(Pbn(3)), &page(&n, 0), &[], H),
        Err(NandError::BadBlock(_))
    ));
}

#[test]
fn pslc_cycles_wear_a_block_less_than_native_ones() {
    let mut n = dev(
        "mlc16k",
        &[
            "geometry.blocks_per_plane=2",
            "reliability.factory_bad_block_ratio=0",
            "endurance.native_cycles=10",
            "endurance.pslc_cycles=100",
        ],
    );
    for _ in 0..50 {
        erase(&mut n, 0, CellMode::Pslc);
    }
    assert!((n.block_info(Pbn(0)).unwrap().wear - 0.5).abs() < 1e-6);
    for _ in 0..5 {
        erase(&mut n, 0, CellMode::Mlc);
    }
    let at = n.now_ns();
    assert!(matches!(
        n.erase(at, Pbn(0), CellMode::Mlc, H),
        Err(NandError::WornOut { .. })
    ));
}

#[test]
fn the_purpose_tag_splits_every_counter() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 0), &[], Purpose::Gc)
        .unwrap();
    n.program(0, Ppn(1), &page(&n, 0), &[], Purpose::Host)
        .unwrap();
    let mut o = oob(&n, 0);
    n.read_oob(0, Ppn(0), &mut o, Purpose::Mapping).unwrap();
    n.erase(0, Pbn(5), CellMode::Slc, Purpose::WearLevel)
        .unwrap();
    let s = n.stats();
    assert_eq!(s.flash_counts_for(Purpose::Gc).programs, 1);
    assert_eq!(s.flash_counts_for(Purpose::Host).programs, 1);
    assert_eq!(s.flash_counts_for(Purpose::Mapping).oob_reads, 1);
    assert_eq!(s.flash_counts_for(Purpose::WearLevel).erases, 1);
    assert_eq!(
        s.flash_counts().reads,
        0,
        "an OOB-only read is not a page read"
    );
}

#[test]
fn multi_plane_groups_must_be_one_die_distinct_planes_same_page() {
    let mut n = dev("tiny", &[]);
    let g = n.geometry().clone();
    let a = g.block_on_die(nand::DieId(0), 0, 1);
    let b = g.block_on_die(nand::DieId(0), 1, 1);
    let other_die = g.block_on_die(nand::DieId(1), 1, 1);
    let p = page(&n, 9);
    let done = n
        .program_multi_plane(
            0,
            &[(g.first_page(a), &p, &[]), (g.first_page(b), &p, &[])],
            H,
        )
        .unwrap();
    let single = g.ppn_in_block(a, 1);
    let one = n.program(done.done_ns, single, &p, &[], H).unwrap();
    // tiny: 35 ns of command cycles and 4096 B at 200 MT/s (20,480 ns) per page, tPROG 200 us.
    assert_eq!(one.done_ns - one.start_ns, 35 + 20_480 + 200_000);
    assert_eq!(
        done.done_ns - done.start_ns,
        2 * (35 + 20_480) + 200_000,
        "one array time, two transfers"
    );
    assert!(matches!(
        n.program_multi_plane(
            0,
            &[
                (g.ppn_in_block(a, 2), &p, &[]),
                (g.ppn_in_block(other_die, 2), &p, &[])
            ],
            H
        ),
        Err(NandError::MultiPlane(_))
    ));
    assert!(matches!(
        n.program_multi_plane(
            0,
            &[
                (g.ppn_in_block(a, 2), &p, &[]),
                (g.ppn_in_block(a, 3), &p, &[])
            ],
            H
        ),
        Err(NandError::MultiPlane(_))
    ));
    assert!(matches!(
        n.program_multi_plane(
            0,
            &[
                (g.ppn_in_block(a, 2), &p, &[]),
                (g.ppn_in_block(b, 3), &p, &[])
            ],
            H
        ),
        Err(NandError::MultiPlane(_))
    ));
    let mut d1 = page(&n, 0);
    let mut d2 = page(&n, 0);
    n.read_multi_plane(
        n.now_ns(),
        &mut [
            (g.first_page(a), &mut d1[..], &mut []),
            (g.first_page(b), &mut d2[..], &mut []),
        ],
        H,
    )
    .unwrap();
    assert_eq!((d1, d2), (p.clone(), p));
    n.erase_multi_plane(n.now_ns(), &[a, b], CellMode::Slc, H)
        .unwrap();
    assert_eq!(n.block_info(a).unwrap().erase_count, 1);
    assert_eq!(n.block_info(b).unwrap().erase_count, 1);
}
