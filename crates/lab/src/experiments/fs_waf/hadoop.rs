//! The slides' Hadoop rows, as the jobs' file traffic on one node (no HDFS, no replication):
//! - `dfsio` (TestDFSIO): one large file written sequentially in 1 MiB writes and fsynced,
//!   then read back whole;
//! - `terasort` (TeraGen + TeraSort + TeraValidate): an input file of 100-byte records (a
//!   10-byte random key, 90 bytes of payload) written and fsynced; an external merge sort of
//!   it into a second file: runs of `RUNS` equal parts sorted in memory, each written to a run
//!   file and fsynced, then merged into the output file (fsynced) and the run files deleted;
//!   then the output read and checked to be the input's records in key order.
//!
//! Every byte written goes to a file that is fsynced before it is deleted, so the file
//! system's bytes to the device are at least the application's (the consistency bound 7 of
//! `storage::measure` applies).

use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use anyhow::{ensure, Context};
use rand::{Rng, SeedableRng};

use crate::experiments::fs_mount::make_file;

pub(super) const RECORD_BYTES: usize = 100;
const KEY_BYTES: usize = 10;
/// Sorted runs of the external sort: the run files and the merge's fan-in.
pub(super) const RUNS: u64 = 8;

/// Writes a `mib` MiB file and reads it back; returns the bytes written.
pub(super) fn dfsio(root: &Path, mib: u32, seed: u64) -> anyhow::Result<u64> {
    let path = root.join("dfsio.dat");
    make_file(&path, mib, seed)?;
    let mut f = std::fs::File::open(&path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut read = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    let written = u64::from(mib) << 20;
    ensure!(read == written, "dfsio read {read} bytes of {written}");
    Ok(written)
}

fn key(rec: &[u8]) -> [u8; KEY_BYTES] {
    rec[..KEY_BYTES].try_into().expect("a record holds its key")
}

/// TeraGen, TeraSort, TeraValidate on `records` records; returns the bytes written (input,
/// runs and output).
pub(super) fn terasort(root: &Path, records: u64, seed: u64) -> anyhow::Result<u64> {
    ensure!(records >= RUNS, "terasort needs at least {RUNS} records");
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let input = root.join("tera-in.dat");
    let output = root.join("tera-out.dat");
    // TeraGen; the key sum is the validation's checksum (order-independent).
    let mut key_sum = 0u64;
    {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&input)?);
        let mut rec = [0u8; RECORD_BYTES];
        for i in 0..records {
            rng.fill(&mut rec[..KEY_BYTES]);
            rec[KEY_BYTES..KEY_BYTES + 8].copy_from_slice(&i.to_le_bytes());
            key_sum = key_sum.wrapping_add(key_checksum(&rec));
            w.write_all(&rec)?;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    let mut written = records * RECORD_BYTES as u64;
    // Sorted runs.
    let per_run = records.div_ceil(RUNS);
    let mut runs = Vec::new();
    {
        let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(&input)?);
        let mut left = records;
        while left > 0 {
            let n = left.min(per_run);
            let mut buf = vec![0u8; n as usize * RECORD_BYTES];
            r.read_exact(&mut buf)?;
            let mut recs: Vec<&[u8]> = buf.chunks_exact(RECORD_BYTES).collect();
            recs.sort_unstable_by_key(|rec| key(rec));
            let path = root.join(format!("tera-run-{}.dat", runs.len()));
            let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
            for rec in recs {
                w.write_all(rec)?;
            }
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            written += n * RECORD_BYTES as u64;
            runs.push(path);
            left -= n;
        }
    }
    // The merge: a heap of each run's next record (smallest key first).
    {
        let mut readers = Vec::new();
        let mut heap = BinaryHeap::new();
        for (i, p) in runs.iter().enumerate() {
            let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(p)?);
            let mut rec = [0u8; RECORD_BYTES];
            r.read_exact(&mut rec)?;
            heap.push(std::cmp::Reverse((key(&rec), i, rec)));
            readers.push(r);
        }
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&output)?);
        while let Some(std::cmp::Reverse((_, i, rec))) = heap.pop() {
            w.write_all(&rec)?;
            let mut next = [0u8; RECORD_BYTES];
            match readers[i].read_exact(&mut next) {
                Ok(()) => heap.push(std::cmp::Reverse((key(&next), i, next))),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
                Err(e) => return Err(e).context("reading a run"),
            }
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        written += records * RECORD_BYTES as u64;
    }
    for p in &runs {
        std::fs::remove_file(p)?;
    }
    // TeraValidate: every record, in key order, the input's keys.
    let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(&output)?);
    let (mut n, mut sum, mut prev) = (0u64, 0u64, [0u8; KEY_BYTES]);
    let mut rec = [0u8; RECORD_BYTES];
    loop {
        match r.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e).context("reading the output"),
        }
        ensure!(
            key(&rec) >= prev,
            "terasort output out of order at record {n}"
        );
        prev = key(&rec);
        sum = sum.wrapping_add(key_checksum(&rec));
        n += 1;
    }
    ensure!(
        n == records && sum == key_sum,
        "terasort output holds {n} of {records} records (checksum {sum:x} against {key_sum:x})"
    );
    Ok(written)
}

/// A record's contribution to the order-independent checksum: its key and sequence number.
fn key_checksum(rec: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in &rec[..KEY_BYTES + 8] {
        h = (h ^ u64::from(*b)).wrapping_mul(0x1000_0000_01b3);
    }
    h
}
