//! Virtual-time flash operations per second on one core: the emulator's own speed.
//!
//! Run: cargo bench -p nand --bench ops
//! Each iteration is one 4 KiB page operation on the `noftl13` device (the NoFTL paper's layout). Reads
//! hit programmed pages (data copied out, bit errors sampled); programs walk the device, erasing
//! each block before reuse, so their figure includes the erases (1 per 64 programs).
//!
//! `copy_bound/read_4k_memcpy` is the floor under a read that keeps data: the same scattered
//! 4 KiB copies out of a 1 GiB anonymous mapping advised for huge pages, as the RAM store keeps
//! its arenas, with no emulator around them. A read with data cannot be faster than this copy.

mod common;

use common::filled_device;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nand::{Ppn, Purpose};

fn bench(c: &mut Criterion) {
    for store in ["ram", "meta"] {
        let mut g = c.benchmark_group(format!("nand_{store}"));
        g.throughput(Throughput::Elements(1));
        let mut n = filled_device(store);
        let pages = n.geometry().pages();
        let mut buf = vec![0u8; 4096];
        let mut i = 0u64;
        let mut at = n.now_ns();
        g.bench_function("read_4k", |b| {
            b.iter(|| {
                // A multiplicative stride visits pages in a scattered but cheap order.
                i = i.wrapping_add(0x9E37_79B9) % pages;
                at = n
                    .read(at, Ppn(i), &mut buf, &mut [], Purpose::Host)
                    .expect("read")
                    .done_ns;
            })
        });
        let data = vec![0xA5u8; 4096];
        let mut p = 0u64;
        g.bench_function("program_4k_with_erase_ahead", |b| {
            b.iter(|| {
                let ppn = Ppn(p);
                if p.is_multiple_of(64) {
                    let pbn = n.geometry().block_of(ppn);
                    at = n
                        .erase(at, pbn, nand::CellMode::Slc, Purpose::Host)
                        .expect("erase")
                        .done_ns;
                }
                at = n
                    .program(at, ppn, &data, &[], Purpose::Host)
                    .expect("program")
                    .done_ns;
                p = (p + 1) % pages;
            })
        });
        g.finish();
    }
}

/// The copy a read with data must do, alone (module documentation).
fn copy_bound(c: &mut Criterion) {
    const BYTES: usize = 1 << 30;
    const PAGE: usize = 4096;
    let mut map = memmap2::MmapMut::map_anon(BYTES).expect("a 1 GiB anonymous mapping");
    let _ = map.advise(memmap2::Advice::HugePage);
    map.fill(0x5A);
    let pages = (BYTES / PAGE) as u64;
    let mut buf = vec![0u8; PAGE];
    let mut i = 0u64;
    let mut g = c.benchmark_group("copy_bound");
    g.throughput(Throughput::Elements(1));
    g.bench_function("read_4k_memcpy", |b| {
        b.iter(|| {
            i = i.wrapping_add(0x9E37_79B9) % pages;
            let at = i as usize * PAGE;
            buf.copy_from_slice(&map[at..at + PAGE]);
            std::hint::black_box(&mut buf);
        })
    });
    g.finish();
}

criterion_group!(benches, bench, copy_bound);
criterion_main!(benches);
