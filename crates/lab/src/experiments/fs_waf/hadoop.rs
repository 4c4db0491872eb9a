//! The slides' Hadoop rows, as the jobs' file traffic on one node (no HDFS, no replication):
//! - `dfsio` (TestDFSIO): one large file written sequentially in 1 MiB writes and fsynced,
//!   then read back whole;
//! - `terasort` (TeraGen + TeraSort + TeraValidate): an input file of 100-byte records (a
//!   10-byte random key, 90 bytes of payload) written and fsynced; an external merge sort of
//!   it into a second file: runs of `RUNS` equal parts sorted in memory, each written to a run
//!   file and fsynced, then merged into the output file (fsynced) and the run files deleted;
//!   then the output read and checked to be the input's records in key order;
//! - `wordcount` (RandomTextWriter + WordCount): an input text file of words drawn from a
//!   Zipf-like vocabulary (rank r with weight 1/r) written and fsynced; the map phase reads it
//!   in `SPLITS` splits, counts each split's words and writes the counts as a sorted spill file
//!   (`word\tcount\n`, the combiner's output), fsynced; the reduce phase merges the spills
//!   into the output file (fsynced) and deletes them; then the output is checked to count
//!   every word the input holds.
//!
//! Every byte written goes to a file that is fsynced before it is deleted, so the file
//! system's bytes to the device are at least the application's (the consistency bound 7 of
//! `storage::measure` applies).

use std::collections::{BTreeMap, BinaryHeap};
use std::io::BufRead;
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

/// Map tasks of `wordcount`: its spill files and the reduce's fan-in.
pub(super) const SPLITS: u64 = 8;
/// Words in `wordcount`'s vocabulary.
const VOCABULARY: usize = 50_000;

/// The `i`th word of the vocabulary: distinct for every `i`, 3 to 10 lowercase letters.
fn word(i: usize) -> String {
    let mut h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995;
    let len = 3 + (h % 8) as usize;
    let mut w = String::with_capacity(len + 6);
    for _ in 0..len {
        h = h.rotate_left(5).wrapping_mul(0x2545_f491_4f6c_dd1d);
        w.push((b'a' + (h >> 59) as u8 % 26) as char);
    }
    // The rank as a suffix keeps words distinct whatever the letters.
    w.push_str(&format!("{i:x}"));
    w
}

/// RandomTextWriter, WordCount and a check of its output on an input of about `input_bytes`;
/// returns the bytes written (input, spills and output).
pub(super) fn wordcount(root: &Path, input_bytes: u64, seed: u64) -> anyhow::Result<u64> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let words: Vec<String> = (0..VOCABULARY).map(word).collect();
    // Zipf-like weights 1/r: a draw is a binary search in the cumulative weights.
    let mut cumulative = Vec::with_capacity(VOCABULARY);
    let mut total = 0.0;
    for r in 1..=VOCABULARY {
        total += 1.0 / r as f64;
        cumulative.push(total);
    }
    let input = root.join("wc-in.txt");
    let mut words_in = 0u64;
    let mut written = 0u64;
    {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&input)?);
        let mut line = String::new();
        while written < input_bytes {
            line.clear();
            for _ in 0..12 {
                let x = rng.random::<f64>() * total;
                let r = cumulative.partition_point(|&c| c < x).min(VOCABULARY - 1);
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(&words[r]);
                words_in += 1;
            }
            line.push('\n');
            w.write_all(line.as_bytes())?;
            written += line.len() as u64;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    // Map: a split is a range of lines; its counts are the spill file, sorted by word.
    let lines_per_split = {
        let n = BufReader::new(std::fs::File::open(&input)?).lines().count() as u64;
        n.div_ceil(SPLITS).max(1)
    };
    let mut spills = Vec::new();
    let mut lines = BufReader::with_capacity(1 << 20, std::fs::File::open(&input)?).lines();
    loop {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for line in lines.by_ref().take(lines_per_split as usize) {
            for word in line?.split_ascii_whitespace() {
                *counts.entry(word.to_string()).or_insert(0) += 1;
            }
        }
        if counts.is_empty() {
            break;
        }
        let path = root.join(format!("wc-spill-{}.txt", spills.len()));
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
        for (word, n) in &counts {
            let rec = format!("{word}\t{n}\n");
            w.write_all(rec.as_bytes())?;
            written += rec.len() as u64;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        spills.push(path);
    }
    // Reduce: a merge of the sorted spills, equal words summed.
    let output = root.join("wc-out.txt");
    let mut words_out = 0u64;
    {
        let parse = |l: String| -> anyhow::Result<(String, u64)> {
            let (w, n) = l.split_once('\t').context("a spill line without a tab")?;
            Ok((w.to_string(), n.parse()?))
        };
        let mut readers = Vec::new();
        let mut heap = BinaryHeap::new();
        for (i, p) in spills.iter().enumerate() {
            let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(p)?).lines();
            if let Some(l) = r.next() {
                heap.push(std::cmp::Reverse((parse(l?)?, i)));
            }
            readers.push(r);
        }
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&output)?);
        let mut current: Option<(String, u64)> = None;
        while let Some(std::cmp::Reverse(((word, n), i))) = heap.pop() {
            if let Some(l) = readers[i].next() {
                heap.push(std::cmp::Reverse((parse(l?)?, i)));
            }
            match &mut current {
                Some((cw, cn)) if *cw == word => *cn += n,
                _ => {
                    if let Some((cw, cn)) = current.replace((word, n)) {
                        let rec = format!("{cw}\t{cn}\n");
                        w.write_all(rec.as_bytes())?;
                        written += rec.len() as u64;
                        words_out += cn;
                    }
                }
            }
        }
        if let Some((cw, cn)) = current {
            let rec = format!("{cw}\t{cn}\n");
            w.write_all(rec.as_bytes())?;
            written += rec.len() as u64;
            words_out += cn;
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    for p in &spills {
        std::fs::remove_file(p)?;
    }
    ensure!(
        words_out == words_in,
        "wordcount counted {words_out} words of the input's {words_in}"
    );
    Ok(written)
}
