//! The emulator's 4 KiB read with data against the bare copy that bounds it, on a loaded machine.
//!
//! Run: cargo bench -p nand --bench read_vs_copy [-- ROUNDS]
//! `ops` (Criterion) gives means over samples of milliseconds; on a 2-core machine shared with
//! other work most samples include time the process spent off its core, and the copy bound and
//! the read then move by 30% from run to run. This bench interleaves short batches of the three
//! loops (RAM read, metadata-only read, bare copy; 256 operations each, well under a scheduler
//! slice) and reports low percentiles over the batches: a batch the scheduler did not interrupt
//! shows the work itself. The loops are those of `ops` (same device, same page stride, same
//! 1 GiB huge-page mapping for the copy).

mod common;

use std::time::Instant;

use common::filled_device;
use nand::{Nand, Ppn, Purpose};

const PAGE: usize = 4096;
const BATCH: u64 = 256;

/// A device read loop: the page index and the virtual time carried from batch to batch.
struct Reader {
    nand: Nand,
    i: u64,
    at: u64,
}

impl Reader {
    fn batch(&mut self, buf: &mut [u8]) -> f64 {
        let pages = self.nand.geometry().pages();
        let t = Instant::now();
        for _ in 0..BATCH {
            self.i = self.i.wrapping_add(0x9E37_79B9) % pages;
            self.at = self
                .nand
                .read(self.at, Ppn(self.i), buf, &mut [], Purpose::Host)
                .expect("read")
                .done_ns;
        }
        t.elapsed().as_nanos() as f64 / BATCH as f64
    }
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let mut ram = Reader {
        nand: filled_device("ram"),
        i: 0,
        at: 0,
    };
    ram.at = ram.nand.now_ns();
    let mut meta = Reader {
        nand: filled_device("meta"),
        i: 0,
        at: 0,
    };
    meta.at = meta.nand.now_ns();
    let mut map = memmap2::MmapMut::map_anon(1 << 30).expect("a 1 GiB anonymous mapping");
    let _ = map.advise(memmap2::Advice::HugePage);
    map.fill(0x5A);
    let copy_pages = (map.len() / PAGE) as u64;
    let mut buf = vec![0u8; PAGE];
    let mut ci = 0u64;
    let (mut t_ram, mut t_meta, mut t_copy) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        t_ram.push(ram.batch(&mut buf));
        t_meta.push(meta.batch(&mut buf));
        let t = Instant::now();
        for _ in 0..BATCH {
            ci = ci.wrapping_add(0x9E37_79B9) % copy_pages;
            let at = ci as usize * PAGE;
            buf.copy_from_slice(&map[at..at + PAGE]);
            std::hint::black_box(&mut buf);
        }
        t_copy.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    let huge = std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("AnonHugePages:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
        })
        .unwrap_or_else(|| "?".into());
    println!(
        "{rounds} rounds of {BATCH} operations each; ns per operation; AnonHugePages {huge} kB"
    );
    println!("percentile   ram_read  meta_read  copy_bound  ram/copy");
    for q in [0.05, 0.10, 0.25, 0.50] {
        let (r, m, c) = (
            percentile(&mut t_ram, q),
            percentile(&mut t_meta, q),
            percentile(&mut t_copy, q),
        );
        println!(
            "p{:<10} {r:>9.0} {m:>10.0} {c:>11.0} {:>9.2}",
            (q * 100.0) as u32,
            r / c
        );
    }
}
