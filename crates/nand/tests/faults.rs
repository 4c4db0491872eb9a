//! Power loss, injected failures, bit errors and ECC.

mod common;
use common::*;
use nand::{BlockState, CellMode, FaultPlan, NandError, Pbn, Ppn};

/// Two blocks per plane of `preset`, no bad blocks and no bit errors (so that every loss a test
/// sees is the power cut's), with `extra` overrides.
fn small_exact(preset: &str, extra: &[&str]) -> nand::Nand {
    let mut o = vec![
        "geometry.blocks_per_plane=2",
        "reliability.factory_bad_block_ratio=0",
        "reliability.rber_fresh=0",
        "reliability.rber_at_endurance=0",
    ];
    o.extend_from_slice(extra);
    dev(preset, &o)
}

#[test]
fn power_loss_during_a_program_tears_that_page_and_keeps_completed_ones() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 1), &[], H).unwrap();
    n.set_fault_plan(FaultPlan {
        cut_at_op: Some(2),
        ..Default::default()
    });
    assert_eq!(
        n.program(0, Ppn(1), &page(&n, 2), &[], H),
        Err(NandError::PowerLost)
    );
    assert!(!n.is_powered());
    let mut d = page(&n, 0);
    assert_eq!(
        n.read(0, Ppn(0), &mut d, &mut [], H),
        Err(NandError::PoweredOff),
        "refused until powered on"
    );
    n.power_on();
    assert_eq!(
        read_back(&mut n, Ppn(0)).0,
        page(&n, 1),
        "completed programs persist"
    );
    let at = n.now_ns();
    assert_eq!(
        n.read(at, Ppn(1), &mut d, &mut [], H),
        Err(NandError::Torn(Ppn(1)))
    );
    // The torn page counts as programmed: the block goes on after it.
    assert!(matches!(
        n.program(at, Ppn(1), &page(&n, 3), &[], H),
        Err(NandError::AlreadyProgrammed { .. })
    ));
    n.program(at, Ppn(2), &page(&n, 3), &[], H).unwrap();
    assert_eq!(n.report().power_losses, 1);
}

#[test]
fn power_loss_during_an_upper_page_program_corrupts_its_lower_page() {
    let mut n = small_exact("mlc16k", &[]);
    let p = page(&n, 0x5A);
    n.program(0, ppn(&n, 0, 0), &p, &[], H).unwrap(); // lower page of word line 0
    n.program(0, ppn(&n, 0, 1), &p, &[], H).unwrap(); // upper page of word line 0
    n.program(0, ppn(&n, 0, 2), &p, &[], H).unwrap(); // lower page of word line 1
    n.set_fault_plan(FaultPlan {
        cut_at_op: Some(4),
        ..Default::default()
    });
    assert_eq!(
        n.program(0, ppn(&n, 0, 3), &p, &[], H),
        Err(NandError::PowerLost)
    ); // upper of word line 1
    n.power_on();
    let mut d = page(&n, 0);
    let at = n.now_ns();
    assert_eq!(
        n.read(at, ppn(&n, 0, 2), &mut d, &mut [], H),
        Err(NandError::Torn(ppn(&n, 0, 2))),
        "paired lower page lost"
    );
    assert_eq!(
        n.read(at, ppn(&n, 0, 3), &mut d, &mut [], H),
        Err(NandError::Torn(ppn(&n, 0, 3)))
    );
    n.read(at, ppn(&n, 0, 1), &mut d, &mut [], H).unwrap();
    assert_eq!(d, p, "the completed word line is intact");
}

/// Power-loss protection (`plp = true`): the same cut completes the upper-page program on the
/// capacitors and raises `power_warning`; operations go on until the holder cuts the power,
/// and nothing is torn.
#[test]
fn with_power_loss_protection_a_cut_upper_page_program_completes_and_warns() {
    let mut n = small_exact("mlc16k", &["plp=true"]);
    let p = page(&n, 0x5A);
    n.program(0, ppn(&n, 0, 0), &p, &[], H).unwrap();
    n.set_fault_plan(FaultPlan {
        cut_at_op: Some(2),
        ..Default::default()
    });
    assert!(!n.power_warning());
    n.program(0, ppn(&n, 0, 1), &p, &[], H).unwrap(); // upper page: completes
    assert!(n.power_warning() && n.is_powered());
    n.program(0, ppn(&n, 0, 2), &p, &[], H).unwrap(); // the controller's write-back
    n.power_cut();
    assert!(!n.is_powered() && !n.power_warning());
    assert_eq!(n.stats().power_losses, 1);
    n.power_on();
    let mut d = page(&n, 0);
    let at = n.now_ns();
    for page_no in 0..3 {
        n.read(at, ppn(&n, 0, page_no), &mut d, &mut [], H).unwrap();
        assert_eq!(d, p, "page {page_no} intact");
    }
}

#[test]
fn power_loss_during_a_tlc_upper_page_corrupts_both_lower_pages_of_its_word_line() {
    let mut n = small_exact("tlc16k", &[]);
    let p = page(&n, 1);
    n.program(0, ppn(&n, 0, 0), &p, &[], H).unwrap();
    n.program(0, ppn(&n, 0, 1), &p, &[], H).unwrap();
    n.set_fault_plan(FaultPlan {
        cut_at_op: Some(3),
        ..Default::default()
    });
    assert_eq!(
        n.program(0, ppn(&n, 0, 2), &p, &[], H),
        Err(NandError::PowerLost)
    );
    n.power_on();
    for i in 0..3 {
        let mut d = page(&n, 0);
        assert!(
            matches!(
                n.read(n.now_ns(), ppn(&n, 0, i), &mut d, &mut [], H),
                Err(NandError::Torn(_))
            ),
            "page {i}"
        );
    }
}

/// `fail_paired_program_from`: the first upper- or middle-page program from that operation on
/// fails on the media (no power loss): the block goes bad and the pages below it on its word
/// line are torn with it, as a real MLC/TLC program failure leaves them; lower-page programs
/// before it pass.
#[test]
fn an_injected_paired_program_failure_tears_the_lower_pages_of_its_word_line_without_a_power_loss()
{
    for (preset, bits) in [("mlc16k", 2u32), ("tlc16k", 3)] {
        let mut n = small_exact(preset, &[]);
        let p = page(&n, 1);
        n.set_fault_plan(FaultPlan {
            fail_paired_program_from: Some(1),
            ..Default::default()
        });
        // The lower page (and on TLC the middle page, the first paired one) come first.
        n.program(0, ppn(&n, 0, 0), &p, &[], H).unwrap();
        let failed = ppn(&n, 0, 1);
        assert_eq!(
            n.program(0, failed, &p, &[], H),
            Err(NandError::ProgramFailed(failed)),
            "{preset}"
        );
        assert!(n.is_powered(), "{preset}: a media failure is no power loss");
        assert_eq!(n.block_info(Pbn(0)).unwrap().state, BlockState::GrownBad);
        for i in 0..2 {
            let mut d = page(&n, 0);
            assert!(
                matches!(
                    n.read(n.now_ns(), ppn(&n, 0, i), &mut d, &mut [], H),
                    Err(NandError::Torn(_))
                ),
                "{preset}: page {i}"
            );
        }
        // One shot: the next block's paired programs pass.
        for i in 0..bits {
            n.program(0, ppn(&n, 1, i), &p, &[], H).unwrap();
        }
        assert_eq!(n.stats().failed_programs, 1);
    }
}

#[test]
fn power_loss_during_an_erase_leaves_the_block_needing_an_erase() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 1), &[], H).unwrap();
    n.set_fault_plan(FaultPlan {
        cut_at_op: Some(2),
        ..Default::default()
    });
    assert_eq!(
        n.erase(0, Pbn(0), CellMode::Slc, H),
        Err(NandError::PowerLost)
    );
    n.power_on();
    assert_eq!(n.block_info(Pbn(0)).unwrap().state, BlockState::NeedsErase);
    let mut d = page(&n, 0);
    let at = n.now_ns();
    assert_eq!(
        n.read(at, Ppn(0), &mut d, &mut [], H),
        Err(NandError::NeedsErase(Pbn(0)))
    );
    assert_eq!(
        n.program(at, Ppn(0), &page(&n, 1), &[], H),
        Err(NandError::NeedsErase(Pbn(0)))
    );
    n.erase(at, Pbn(0), CellMode::Slc, H).unwrap();
    assert_eq!(n.block_info(Pbn(0)).unwrap().state, BlockState::Good);
    n.program(n.now_ns(), Ppn(0), &page(&n, 1), &[], H).unwrap();
}

#[test]
fn power_cut_at_a_virtual_time_interrupts_the_operation_in_flight_and_refuses_later_ones() {
    let mut n = dev(
        "tiny",
        &["geometry.channels=1", "geometry.chips_per_channel=1"],
    );
    n.set_fault_plan(FaultPlan {
        cut_at_ns: Some(300_000),
        ..Default::default()
    });
    n.program(0, Ppn(0), &page(&n, 1), &[], H).unwrap(); // 0 .. 220.5 us
    assert_eq!(
        n.program(0, Ppn(1), &page(&n, 1), &[], H),
        Err(NandError::PowerLost)
    ); // 220.5 .. 441 us
    n.power_on();
    let mut m = dev(
        "tiny",
        &["geometry.channels=1", "geometry.chips_per_channel=1"],
    );
    m.set_fault_plan(FaultPlan {
        cut_at_ns: Some(100),
        ..Default::default()
    });
    assert_eq!(
        m.program(500, Ppn(0), &page(&m, 1), &[], H),
        Err(NandError::PoweredOff),
        "it starts after the cut"
    );
    assert_eq!(m.page_programs(Ppn(0)), 0);
}

#[test]
fn an_injected_program_failure_retires_the_block_but_its_pages_stay_readable() {
    let mut n = dev("tiny", &[]);
    n.program(0, Ppn(0), &page(&n, 7), &[], H).unwrap();
    n.set_fault_plan(FaultPlan {
        fail_op: Some(2),
        ..Default::default()
    });
    assert_eq!(
        n.program(0, Ppn(1), &page(&n, 7), &[], H),
        Err(NandError::ProgramFailed(Ppn(1)))
    );
    assert!(n.is_powered());
    assert!(n.is_bad(Pbn(0)));
    assert_eq!(
        read_back(&mut n, Ppn(0)).0,
        page(&n, 7),
        "data is moved off a failing block by reading it"
    );
    assert_eq!(
        n.program(0, Ppn(2), &page(&n, 7), &[], H),
        Err(NandError::BadBlock(Pbn(0)))
    );
    n.set_fault_plan(FaultPlan {
        fail_op: Some(n.ops_issued() + 1),
        ..Default::default()
    });
    let mut d = page(&n, 0);
    assert!(matches!(
        n.read(n.now_ns(), Ppn(0), &mut d, &mut [], H),
        Err(NandError::Uncorrectable { .. })
    ));
}

#[test]
fn bit_errors_within_the_ecc_limit_are_corrected_and_beyond_it_fail_never_wrong_data() {
    // About 2 raw bit errors per 512-byte codeword: many reads correct, some exceed 4 bits.
    let mut n = dev(
        "tiny",
        &[
            "reliability.rber_fresh=5e-4",
            "reliability.rber_at_endurance=5e-4",
        ],
    );
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    for p in 0..16 {
        n.program(0, Ppn(p), &data, &[], H).unwrap();
    }
    let (mut ok, mut failed) = (0, 0);
    for i in 0..4_000u64 {
        let mut d = page(&n, 0);
        match n.read(n.now_ns(), Ppn(i % 16), &mut d, &mut [], H) {
            Ok(_) => {
                assert_eq!(d, data, "a successful read is exact");
                ok += 1;
            }
            Err(NandError::Uncorrectable {
                bit_errors,
                correctable: 4,
                ..
            }) => {
                assert!(bit_errors > 4);
                failed += 1;
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    let r = n.report();
    assert!(ok > 0 && failed > 0, "ok {ok}, failed {failed}");
    assert_eq!(r.ecc.uncorrectable_reads, failed);
    assert!(
        r.ecc.corrected_bits > ok as u64,
        "most successful reads corrected something"
    );
    // With a stronger code the same errors are all corrected.
    let mut strong = dev(
        "tiny",
        &[
            "reliability.rber_fresh=5e-4",
            "reliability.rber_at_endurance=5e-4",
            "reliability.ecc_correctable_bits=40",
        ],
    );
    strong.program(0, Ppn(0), &data, &[], H).unwrap();
    for _ in 0..500 {
        let mut d = page(&strong, 0);
        strong
            .read(strong.now_ns(), Ppn(0), &mut d, &mut [], H)
            .unwrap();
    }
}

#[test]
fn the_raw_bit_error_rate_grows_with_wear_and_with_retention() {
    let corrected = |erases: u32, wait_ns: u64| {
        let mut n = dev(
            "tiny",
            &[
                "endurance.native_cycles=100",
                "reliability.rber_fresh=1e-6",
                "reliability.rber_at_endurance=1e-4",
                "reliability.rber_retention_per_year=1e-4",
                "reliability.ecc_correctable_bits=100",
            ],
        );
        for _ in 0..erases {
            erase(&mut n, 0, CellMode::Slc);
        }
        let at = n.now_ns();
        n.program(at, Ppn(0), &page(&n, 0), &[], H).unwrap();
        let mut at = n.now_ns() + wait_ns;
        for _ in 0..2_000 {
            let mut d = page(&n, 0);
            at = n.read(at, Ppn(0), &mut d, &mut [], H).unwrap().done_ns;
        }
        n.report().ecc.corrected_bits
    };
    let fresh = corrected(0, 0);
    let worn = corrected(90, 0);
    let year_ns = 365 * 24 * 3600 * 1_000_000_000u64;
    let old = corrected(0, year_ns);
    assert!(worn > 10 * fresh.max(1), "fresh {fresh}, worn {worn}");
    assert!(old > 10 * fresh.max(1), "fresh {fresh}, a year old {old}");
}

#[test]
fn power_loss_during_an_append_damages_only_the_appended_bytes() {
    let mut n = dev(
        "tiny",
        &[
            "reliability.rber_fresh=0",
            "reliability.rber_at_endurance=0",
        ],
    );
    let mut base = page(&n, 0x11);
    let len = base.len();
    base[len - 64..].fill(0xFF); // an erased area for appends
    n.program(0, Ppn(0), &base, &[], H).unwrap();
    n.set_fault_plan(FaultPlan {
        cut_at_op: Some(2),
        ..Default::default()
    });
    let delta = [0x00u8; 32];
    assert_eq!(
        n.partial_program(0, Ppn(0), len - 64, &delta, 0, &[], H),
        Err(NandError::PowerLost)
    );
    n.power_on();
    let (got, _) = read_back(&mut n, Ppn(0));
    assert_eq!(
        got[..len - 64],
        base[..len - 64],
        "the page's earlier bytes survive"
    );
    assert_eq!(
        got[len - 32..],
        base[len - 32..],
        "bytes outside the append stay erased"
    );
    let appended = &got[len - 64..len - 32];
    assert_ne!(appended, &delta[..], "the cut append is not complete");
    assert_ne!(
        appended,
        &[0xFFu8; 32][..],
        "some of its bits were programmed"
    );
    assert_eq!(n.report().torn_appends, 1);
    assert_eq!(
        n.page_programs(Ppn(0)),
        2,
        "the cut append counts against NOP"
    );
}
