//! `kv`: the slides' "Non-Trans" row, a non-transactional key-value load.
//!
//! We read the row as a database load without transactional durability: small records
//! inserted, updated and deleted at random, made durable by periodic syncs rather than a log
//! force per commit, on a store whose own structure adds write traffic. The store is
//! Bitcask-like (a hash-partitioned log store, as many non-transactional key-value stores are):
//! - `BUCKETS` bucket files; a key's bucket is the key modulo `BUCKETS` (keys are random, so
//!   this is a hash partition);
//! - each bucket is an append log of records: a 16-byte header (key u64, value length u32,
//!   flags u32: 1 a value, 2 a tombstone) and the value (`VALUE_BYTES` uniform);
//! - an in-memory index maps every live key to its record's bucket, offset and length;
//! - the operation mix: 50% update of a live key, 25% insert of a new key, 25% delete (a
//!   tombstone), so the number of live keys stays near its start;
//! - every `SYNC_EVERY` operations each bucket written since the last sync is fdatasync'ed
//!   (the store's durability point; a crash loses at most those operations);
//! - a bucket whose log holds more than twice its live bytes (and at least `COMPACT_MIN_BYTES`)
//!   is compacted: its live records are copied to a new file, which is fsynced and renamed
//!   over the old one (Bitcask's merge), so the store deletes whole files as log-structured
//!   stores do.
//!
//! The file system sees small appends to 64 files (a partial last block rewritten at each
//! sync), whole files written sequentially, and whole files deleted. The application bytes are
//! every byte the store writes with write(2): records, tombstones and the compaction's copies
//! (as the engine's rows count its log and page writes).
//!
//! Sizes: the live data is `live_bytes` (`fs waf` gives it half of `--fill` of the free space,
//! because the logs grow to twice the live data before compaction), then `ops` operations.

use std::collections::HashMap;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context};
use rand::{Rng, SeedableRng};

const BUCKETS: usize = 64;
const HEADER_BYTES: u64 = 16;
const VALUE_BYTES: std::ops::RangeInclusive<u32> = 100..=4000;
const SYNC_EVERY: u32 = 1000;
const COMPACT_MIN_BYTES: u64 = 1 << 20;
const FLAG_VALUE: u32 = 1;
const FLAG_TOMBSTONE: u32 = 2;

/// Where a live key's record is.
#[derive(Clone, Copy)]
struct Entry {
    /// Position in `Store::live` (for O(1) removal).
    slot: usize,
    offset: u64,
    value_bytes: u32,
}

struct Bucket {
    path: PathBuf,
    file: std::fs::File,
    /// Bytes of the log (its file size).
    log_bytes: u64,
    /// Bytes of the records the index still names.
    live_bytes: u64,
    dirty: bool,
}

struct Store {
    buckets: Vec<Bucket>,
    index: HashMap<u64, Entry>,
    live: Vec<u64>,
    written_bytes: u64,
    compactions: u64,
    payload: Vec<u8>,
}

impl Store {
    fn open(dir: &Path) -> anyhow::Result<Store> {
        std::fs::create_dir(dir).with_context(|| format!("mkdir {}", dir.display()))?;
        let mut buckets = Vec::with_capacity(BUCKETS);
        for b in 0..BUCKETS {
            let path = dir.join(format!("bucket-{b:02}.log"));
            let file = std::fs::OpenOptions::new()
                .create_new(true)
                .read(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("create {}", path.display()))?;
            buckets.push(Bucket {
                path,
                file,
                log_bytes: 0,
                live_bytes: 0,
                dirty: false,
            });
        }
        Ok(Store {
            buckets,
            index: HashMap::new(),
            live: Vec::new(),
            written_bytes: 0,
            compactions: 0,
            payload: Vec::new(),
        })
    }

    fn bucket_of(key: u64) -> usize {
        (key % BUCKETS as u64) as usize
    }

    /// Appends a record; returns its offset in the bucket's log.
    fn append(&mut self, key: u64, flags: u32, value: &[u8]) -> anyhow::Result<u64> {
        let b = &mut self.buckets[Self::bucket_of(key)];
        let mut rec = Vec::with_capacity(HEADER_BYTES as usize + value.len());
        rec.extend_from_slice(&key.to_le_bytes());
        rec.extend_from_slice(&(value.len() as u32).to_le_bytes());
        rec.extend_from_slice(&flags.to_le_bytes());
        rec.extend_from_slice(value);
        b.file.write_all(&rec)?;
        let offset = b.log_bytes;
        b.log_bytes += rec.len() as u64;
        b.dirty = true;
        self.written_bytes += rec.len() as u64;
        Ok(offset)
    }

    fn put(&mut self, key: u64, value_bytes: u32, payload_at: usize) -> anyhow::Result<()> {
        let value = self.payload[payload_at..payload_at + value_bytes as usize].to_vec();
        let offset = self.append(key, FLAG_VALUE, &value)?;
        let b = Self::bucket_of(key);
        let rec = HEADER_BYTES + u64::from(value_bytes);
        let slot = match self.index.get(&key) {
            Some(old) => {
                self.buckets[b].live_bytes -= HEADER_BYTES + u64::from(old.value_bytes);
                old.slot
            }
            None => {
                self.live.push(key);
                self.live.len() - 1
            }
        };
        self.buckets[b].live_bytes += rec;
        self.index.insert(
            key,
            Entry {
                slot,
                offset,
                value_bytes,
            },
        );
        self.maybe_compact(b)
    }

    fn delete(&mut self, key: u64) -> anyhow::Result<()> {
        let e = self
            .index
            .remove(&key)
            .context("delete of a key not live")?;
        self.append(key, FLAG_TOMBSTONE, &[])?;
        let b = Self::bucket_of(key);
        self.buckets[b].live_bytes -= HEADER_BYTES + u64::from(e.value_bytes);
        let last = self.live.pop().context("live keys")?;
        if last != key {
            self.live[e.slot] = last;
            self.index.get_mut(&last).context("index")?.slot = e.slot;
        }
        self.maybe_compact(b)
    }

    /// Bitcask's merge: the bucket's live records copied to a new file, fsynced, renamed over
    /// the old log.
    fn maybe_compact(&mut self, b: usize) -> anyhow::Result<()> {
        let bucket = &self.buckets[b];
        if bucket.log_bytes < COMPACT_MIN_BYTES || bucket.log_bytes <= 2 * bucket.live_bytes {
            return Ok(());
        }
        let mut keys: Vec<(u64, Entry)> = self
            .index
            .iter()
            .filter(|(k, _)| Self::bucket_of(**k) == b)
            .map(|(k, e)| (*k, *e))
            .collect();
        // In log order: the copy reads the old log sequentially.
        keys.sort_by_key(|(_, e)| e.offset);
        let tmp = bucket.path.with_extension("compact");
        let mut out = BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?,
        );
        let mut old = &self.buckets[b].file;
        let mut offset = 0u64;
        let mut rec = Vec::new();
        for (key, e) in &mut keys {
            let len = (HEADER_BYTES + u64::from(e.value_bytes)) as usize;
            rec.resize(len, 0);
            old.seek(SeekFrom::Start(e.offset))?;
            old.read_exact(&mut rec)?;
            ensure!(
                rec[..8] == key.to_le_bytes(),
                "bucket {b}: the record at {} is not key {key}",
                e.offset
            );
            out.write_all(&rec)?;
            e.offset = offset;
            offset += len as u64;
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        self.written_bytes += offset;
        self.compactions += 1;
        let bucket = &mut self.buckets[b];
        std::fs::rename(&tmp, &bucket.path)?;
        bucket.file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(&bucket.path)?;
        bucket.log_bytes = offset;
        ensure!(
            bucket.live_bytes == offset,
            "bucket {b}: {offset} bytes copied, {} live",
            bucket.live_bytes
        );
        bucket.dirty = false;
        for (key, e) in keys {
            self.index.insert(key, e);
        }
        Ok(())
    }

    fn sync(&mut self) -> anyhow::Result<()> {
        for b in &mut self.buckets {
            if b.dirty {
                b.file.sync_data()?;
                b.dirty = false;
            }
        }
        Ok(())
    }
}

/// What a run did.
pub(super) struct KvRun {
    pub written_bytes: u64,
    pub keys: u64,
    pub compactions: u64,
}

/// How many operations of the mix run after the load.
pub(super) enum Ops<'a> {
    /// This many, then the run ends.
    Whole(u32),
    /// Rounds of this many (`rounds`): the load is marked as round 0, every round after its
    /// last sync, until the marker says stop.
    Rounds(u32, &'a mut dyn crate::experiments::rounds::Marker),
}

/// Loads `live_bytes` of records into a new store in `dir`, then runs the operations of the
/// mix; returns the bytes the store wrote.
pub(super) fn run(dir: &Path, live_bytes: u64, ops: Ops<'_>, seed: u64) -> anyhow::Result<KvRun> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut s = Store::open(dir)?;
    s.payload = vec![0u8; 2 * *VALUE_BYTES.end() as usize];
    rng.fill(&mut s.payload[..]);
    let mean_record = HEADER_BYTES + u64::from(VALUE_BYTES.start() + VALUE_BYTES.end()) / 2;
    let keys = (live_bytes / mean_record).max(1);
    for _ in 0..keys {
        let key = rng.random();
        let (n, at) = (rng.random_range(VALUE_BYTES), payload_at(&mut rng));
        s.put(key, n, at)?;
    }
    s.sync()?;
    match ops {
        Ops::Whole(n) => mix(&mut s, &mut rng, n)?,
        Ops::Rounds(n, marker) => {
            crate::experiments::rounds::in_rounds(marker, s.written_bytes, |_| {
                let before = s.written_bytes;
                mix(&mut s, &mut rng, n)?;
                Ok(s.written_bytes - before)
            })?;
        }
    }
    Ok(KvRun {
        written_bytes: s.written_bytes,
        keys,
        compactions: s.compactions,
    })
}

fn payload_at(rng: &mut rand_xoshiro::Xoshiro256PlusPlus) -> usize {
    rng.random_range(0..=*VALUE_BYTES.end() as usize)
}

/// `ops` operations of the mix, synced every `SYNC_EVERY` and at the end.
fn mix(s: &mut Store, rng: &mut rand_xoshiro::Xoshiro256PlusPlus, ops: u32) -> anyhow::Result<()> {
    for op in 1..=ops {
        let roll = rng.random_range(0..4u32);
        if roll < 2 && !s.live.is_empty() {
            let key = s.live[rng.random_range(0..s.live.len())];
            let (n, at) = (rng.random_range(VALUE_BYTES), payload_at(rng));
            s.put(key, n, at)?;
        } else if roll == 2 || s.live.is_empty() {
            let key = rng.random();
            let (n, at) = (rng.random_range(VALUE_BYTES), payload_at(rng));
            s.put(key, n, at)?;
        } else {
            let key = s.live[rng.random_range(0..s.live.len())];
            s.delete(key)?;
        }
        if op % SYNC_EVERY == 0 {
            s.sync()?;
        }
    }
    s.sync()
}
