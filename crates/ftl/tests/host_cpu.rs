//! Host CPU per 4 KiB random write through the page FTL, beside the emulator's own cost for
//! the same flash programs. `#[ignore]`d: a measurement, run in release mode:
//! `cargo test --release -p ftl --test host_cpu -- --ignored --nocapture`.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::time::Instant;

use ftl::page::PageFtl;
use ftl::{BlockDevice, FtlOptions};
use nand::{DeviceConfig, Nand, OpKind, Ppn, Purpose};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn device() -> Nand {
    let o = [
        "geometry.blocks_per_plane=512",
        "geometry.pages_per_block=64",
        "store=\"meta\"",
    ];
    Nand::new(DeviceConfig::preset("tiny", &o.map(String::from)).unwrap()).unwrap()
}

#[test]
#[ignore = "a measurement; run in release mode"]
fn page_ftl_host_cpu_per_random_write() {
    let opts = FtlOptions {
        spare_factor: 0.5,
        wl_threshold: 0,
        ..FtlOptions::default()
    };
    let mut ftl = PageFtl::new(device(), &opts).unwrap();
    let cap = ftl.capacity_pages();
    let page = vec![0u8; 4096];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut t = 0;
    for lpn in 0..cap {
        t = ftl.write(t, lpn, &page, false).unwrap();
    }
    let n = 2 * cap;
    let p0 = ftl.space().nand().stats().total(OpKind::Program)
        + ftl.space().nand().stats().total(OpKind::Read)
        + ftl.space().nand().stats().total(OpKind::Erase);
    let start = Instant::now();
    for _ in 0..n {
        t = ftl.write(t, rng.next_u64() % cap, &page, false).unwrap();
    }
    let ftl_ns = start.elapsed().as_nanos() as f64 / n as f64;
    let st = ftl.space().nand().stats();
    let ops = st.total(OpKind::Program) + st.total(OpKind::Read) + st.total(OpKind::Erase) - p0;

    // The emulator alone: the same number of programs, sequential pages, erases as needed.
    let mut nand = device();
    let g = nand.geometry().clone();
    let oob = vec![0xFFu8; g.oob_size_bytes as usize];
    let start = Instant::now();
    let mut t = 0;
    for i in 0..ops {
        let ppn = Ppn(i % g.pages());
        if g.page_in_block(ppn) == 0 && i >= g.pages() {
            nand.erase(t, g.block_of(ppn), nand::CellMode::Slc, Purpose::Gc)
                .unwrap();
        }
        t = nand
            .program(t, ppn, &page, &oob, Purpose::Host)
            .unwrap()
            .done_ns;
    }
    let nand_ns = start.elapsed().as_nanos() as f64 / n as f64;
    println!("page FTL: {ftl_ns:.0} ns per random 4 KiB write ({:.2} flash ops each); the emulator alone for those ops: {nand_ns:.0} ns; FTL share {:.0} ns", ops as f64 / n as f64, ftl_ns - nand_ns);
}
