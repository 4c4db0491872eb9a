//! Behaviour of Application-Managed Flash's AFTL (`ftl::amf`).
#![allow(clippy::unwrap_used)]

mod block_harness;

use block_harness::*;
use ftl::amf::{mapping_bytes_for, Amf, AmfOptions};
use ftl::{BlockDevice, FtlError};
use nand::FaultPlan;

fn fresh(overrides: &[&str]) -> Amf {
    Amf::new(tiny(overrides), &AmfOptions::default()).expect("format")
}

/// An append-only host (as ALFS is): appends at each segment's write pointer (sometimes
/// leaving a small gap), trims whole full segments, reads anywhere, flushes now and then.
fn log_structured_host(seg: u64, segments: u64) -> impl FnMut(&mut Rng, &Model) -> Op {
    let mut wp = vec![0u64; segments as usize];
    move |r, _| {
        let s = r.below(segments);
        let base = s * seg;
        match r.below(20) {
            0..=12 if wp[s as usize] < seg => {
                let start = (wp[s as usize] + if r.below(8) == 0 { 1 } else { 0 }).min(seg - 1);
                let pages = (1 + r.below(8)).min(seg - start);
                wp[s as usize] = start + pages;
                Op::Write {
                    lpn: base + start,
                    pages,
                }
            }
            0..=14 => {
                wp[s as usize] = 0;
                Op::Trim {
                    lpn: base,
                    pages: seg,
                }
            }
            15..=18 => Op::Read {
                lpn: base + r.below(seg - 4),
                pages: 4,
            },
            _ => Op::Flush,
        }
    }
}

#[test]
fn geometry_of_segments_and_capacity() {
    let d = fresh(&[]);
    // Tiny: 4 dies (2 channels x 2 chips); 32 blocks per die, 1 spare (2%) -> 31 segments.
    assert_eq!(d.segment_pages(), 4 * 16);
    assert_eq!(d.segments(), 31);
    assert_eq!(d.capacity_pages(), 31 * 64);
    assert_eq!(d.report().mapping_bytes, 4 * 31 * 4);
}

#[test]
fn append_only_workload_matches_the_model() {
    for seed in 1..=4 {
        let d = fresh(&[]);
        let (seg, segs) = (d.segment_pages(), u64::from(d.segments()));
        let (_, r, _) = checked_run(d, seed, 2000, &mut log_structured_host(seg, segs));
        assert_eq!(r.gc.migrations, 0, "AMF has no device-side GC");
        assert!((r.waf - 1.0).abs() < 1e-9, "waf {}", r.waf);
    }
}

#[test]
fn overwrites_are_refused_and_change_nothing() {
    let mut d = fresh(&[]);
    d.write(0, 0, &vec![1u8; 8 * PAGE], false).unwrap();
    let before = d.report();
    let err = d.write(0, 3, &vec![2u8; 2 * PAGE], false).unwrap_err();
    match &err {
        FtlError::Overwrite { lpn, why } => {
            assert_eq!(*lpn, 3);
            assert!(
                why.contains("append-only") && why.contains("trim the whole segment"),
                "{why}"
            );
        }
        e => panic!("wrong error {e}"),
    }
    // A request whose later part crosses into an already-written segment is refused whole.
    d.write(0, 64, &vec![3u8; PAGE], false).unwrap();
    let before2 = d.report();
    assert!(matches!(
        d.write(0, 60, &vec![4u8; 8 * PAGE], false),
        Err(FtlError::Overwrite { lpn: 64, .. })
    ));
    assert_eq!(d.report(), before2);
    assert_eq!(d.write_pointer(0), Some(8));
    let mut b = vec![0u8; 8 * PAGE];
    d.read(0, 0, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 1));
    assert_eq!(before.host.writes + 1, d.report().host.writes);
}

#[test]
fn gaps_read_as_zeros_and_cannot_be_filled_later() {
    let mut d = fresh(&[]);
    d.write(0, 0, &vec![1u8; PAGE], false).unwrap();
    d.write(0, 5, &vec![2u8; PAGE], false).unwrap();
    let mut b = vec![9u8; 6 * PAGE];
    d.read(0, 0, &mut b).unwrap();
    assert!(b[PAGE..5 * PAGE].iter().all(|&x| x == 0));
    assert!(matches!(
        d.write(0, 3, &vec![1u8; PAGE], false),
        Err(FtlError::Overwrite { .. })
    ));
}

#[test]
fn trims_must_cover_whole_segments() {
    let mut d = fresh(&[]);
    d.write(0, 0, &vec![1u8; 64 * PAGE], false).unwrap();
    for (lpn, pages) in [(0, 1), (0, 63), (1, 64), (32, 64), (0, 65)] {
        match d.trim(0, lpn, pages) {
            Err(FtlError::Unsupported(msg)) => assert!(
                msg.contains("whole segments") && msg.contains("64 pages"),
                "{msg}"
            ),
            r => panic!("trim {lpn}+{pages}: {r:?}"),
        }
    }
    let mut b = vec![0u8; 64 * PAGE];
    d.read(0, 0, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 1));
    d.trim(0, 0, 0).unwrap();
}

#[test]
fn a_trimmed_segment_can_be_written_again() {
    let mut d = fresh(&[]);
    let cap = d.capacity_pages();
    d.write(0, 0, &vec![1u8; cap as usize * PAGE], false)
        .unwrap();
    assert!(matches!(
        d.write(0, 64, &vec![2u8; PAGE], false),
        Err(FtlError::Overwrite { .. })
    ));
    d.trim(0, 64, 128).unwrap();
    assert_eq!(d.write_pointer(1), Some(0));
    let mut b = vec![9u8; 128 * PAGE];
    d.read(0, 64, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0));
    d.write(0, 64, &vec![2u8; 64 * PAGE], false).unwrap();
    d.read(0, 64, &mut b[..64 * PAGE]).unwrap();
    assert!(b[..64 * PAGE].iter().all(|&x| x == 2));
    let by = d.nand().unwrap().report().by_purpose;
    let host = by
        .iter()
        .find(|p| p.purpose == nand::Purpose::Host)
        .unwrap();
    assert_eq!(host.counts.erases, 8, "two segments of four blocks");
    // The trim survives a restart.
    let mut d = Amf::open(d.into_nand(), &AmfOptions::default()).unwrap();
    d.read(0, 128, &mut b[..64 * PAGE]).unwrap();
    assert!(b[..64 * PAGE].iter().all(|&x| x == 0));
}

#[test]
fn a_segment_write_runs_on_all_dies_at_once() {
    let mut d = fresh(&[]);
    let one = d.write(0, 0, &vec![1u8; PAGE], false).unwrap();
    let mut d = fresh(&[]);
    let four = d.write(0, 0, &vec![1u8; 4 * PAGE], false).unwrap();
    assert!(
        four < one + one / 2,
        "4 pages on 4 dies took {four} ns, 1 page {one} ns"
    );
}

#[test]
fn factory_bad_blocks_are_remapped_to_spares() {
    let opts = AmfOptions {
        spare_blocks_per_die: Some(6),
        ..AmfOptions::default()
    };
    let mut d = Amf::new(
        tiny(&["reliability.factory_bad_block_ratio=0.08", "seed=5"]),
        &opts,
    )
    .unwrap();
    assert!(
        d.remaps() > 0,
        "the seed should give some factory-bad blocks"
    );
    let cap = d.capacity_pages();
    let mut m = Model::new(cap);
    let mut now = 0;
    let (seg, segs) = (d.segment_pages(), u64::from(d.segments()));
    run(
        &mut d,
        &mut m,
        &mut Rng::new(3),
        800,
        &mut now,
        &mut log_structured_host(seg, segs),
    );
    verify_all(&mut d, &m, now);
    let mut d = Amf::open(d.into_nand(), &opts).unwrap();
    verify_all(&mut d, &m, now);
}

#[test]
fn a_program_failure_remaps_the_block_and_keeps_its_pages() {
    let mut d = fresh(&[]);
    d.write(0, 0, &vec![1u8; 20 * PAGE], false).unwrap();
    let next = d.nand().unwrap().ops_issued() + 2;
    d.nand_mut().unwrap().set_fault_plan(FaultPlan {
        fail_op: Some(next),
        ..FaultPlan::default()
    });
    d.write(0, 20, &vec![2u8; 4 * PAGE], false).unwrap();
    assert_eq!(d.remaps(), 1);
    assert!(
        d.report().gc.migrations >= 5,
        "the failed block's pages were moved"
    );
    let check = |d: &mut Amf| {
        let mut b = vec![0u8; 24 * PAGE];
        d.read(0, 0, &mut b).unwrap();
        assert!(b[..20 * PAGE].iter().all(|&x| x == 1) && b[20 * PAGE..].iter().all(|&x| x == 2));
    };
    check(&mut d);
    let mut d = Amf::open(d.into_nand(), &AmfOptions::default()).unwrap();
    check(&mut d);
    d.write(0, 24, &vec![3u8; 8 * PAGE], false).unwrap();
}

#[test]
fn same_seed_same_report() {
    let go = || {
        let d = fresh(&[]);
        let (seg, segs) = (d.segment_pages(), u64::from(d.segments()));
        let (_, report, ns) = checked_run(d, 11, 700, &mut log_structured_host(seg, segs));
        (report, ns)
    };
    assert_eq!(go(), go());
}

#[test]
fn mapping_memory_matches_amfs_table() {
    const GIB: u64 = 1 << 30;
    assert_eq!(mapping_bytes_for(512 * GIB, 4096, 128), 4 << 20);
    assert_eq!(mapping_bytes_for(1024 * GIB, 4096, 128), 8 << 20);
}

/// With 2% factory-bad blocks drawn at random, some dies hold more than 2%: the default spare
/// covers the worst die (plus 1% for blocks that go bad in use), so AMF formats, writes a
/// segment over every die, and reopens with the same capacity.
#[test]
fn amf_with_two_percent_factory_bad_blocks_has_a_spare_for_each_and_a_stable_capacity() {
    let dev = || {
        let o: Vec<String> = vec![
            "geometry.page_size_bytes=4096".into(),
            "geometry.oob_size_bytes=128".into(),
            "geometry.blocks_per_plane=512".into(),
            "geometry.pages_per_block=16".into(),
            "reliability.factory_bad_block_ratio=0.02".into(),
            "reliability.ecc_codeword_bytes=512".into(),
            "cell.native=\"slc\"".into(),
            "store=\"meta\"".into(),
        ];
        nand::Nand::new(nand::DeviceConfig::preset("mlc16k", &o).unwrap()).unwrap()
    };
    let mut amf = Amf::new(dev(), &AmfOptions::default()).expect("format");
    let capacity = amf.capacity_pages();
    let seg = amf.segment_pages();
    let mut t = 0;
    let page = vec![7u8; 4096 * seg as usize];
    for s in [0, capacity / seg - 1] {
        t = amf.write(t, s * seg, &page, false).unwrap();
    }
    let n = BlockDevice::into_nand(Box::new(amf)).unwrap();
    let reopened = Amf::open(n, &AmfOptions::default()).unwrap();
    assert_eq!(reopened.capacity_pages(), capacity);
}
