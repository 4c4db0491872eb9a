//! A TATP terminal: runs its input stream, one transaction per scheduler step.
//!
//! Why one step per transaction: every TATP transaction is a few point lookups and at most two
//! writes. A step that must wait for a lock returns `Blocked` and is run again whole, in the
//! same transaction: the engine takes every lock before it changes anything (a waiting
//! operation left no trace), the updates set values (running them twice is harmless) and the
//! one insert or delete is the transaction's last operation.

use hdrhistogram::Histogram;
use storage::sched::{Step, Terminal};

use crate::settle::{settle, Settled};
use storage::tuple::Value;
use storage::{Engine, Error, Result, Rid};

use super::input::{Input, InputGen, TxnType};
use super::{Handles, TatpConfig};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Run,
    Committing,
}

/// Per transaction type: attempts and successes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcome {
    pub attempted: u64,
    pub succeeded: u64,
}

#[derive(Debug)]
pub struct TatpTerminal {
    pub id: u32,
    h: Handles,
    gen: InputGen,
    remaining: Option<u64>,
    input: Option<Input>,
    stage: Stage,
    txn: u64,
    started_ns: u64,
    /// Indexed like `TXN_TYPES`.
    pub outcomes: [Outcome; 7],
    /// Transactions finished (committed or rolled back for want of a row).
    pub finished: u64,
    /// Deadlock victims (retried with the same input).
    pub deadlocks: u64,
    pub latency_ns: Histogram<u64>,
    /// Given a `Vec`: one `TxnEvent` per finished transaction (result files); kind: the index
    /// in `TXN_TYPES`; rolled back for want of a row: not committed.
    pub events: Option<Vec<storage::sched::TxnEvent>>,
}

fn int(v: i64) -> Value {
    Value::Int(v)
}

impl TatpTerminal {
    /// `txns`: how many transactions to finish (None: until the scheduler stops).
    pub fn new(id: u32, h: Handles, cfg: TatpConfig, seed: u64, txns: Option<u64>) -> Self {
        TatpTerminal {
            id,
            h,
            gen: InputGen::new(cfg, seed, id),
            remaining: txns,
            input: None,
            stage: Stage::Start,
            txn: 0,
            started_ns: 0,
            outcomes: [Outcome::default(); 7],
            finished: 0,
            deadlocks: 0,
            latency_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            events: None,
        }
    }

    pub fn succeeded(&self) -> u64 {
        self.outcomes.iter().map(|o| o.succeeded).sum()
    }

    fn one(
        &self,
        e: &mut Engine,
        index: storage::ObjectId,
        key: &[Value],
        for_update: bool,
    ) -> Result<Option<Rid>> {
        Ok(e.lookup(self.txn, index, key, for_update)?.first().copied())
    }

    /// The subscriber id of a subscriber number.
    fn s_id_of(&self, e: &mut Engine, nbr: &str) -> Result<Option<i64>> {
        let Some(rid) = self.one(
            e,
            self.h.subscriber_nbr,
            &[Value::Str(nbr.to_string())],
            false,
        )?
        else {
            return Ok(None);
        };
        Ok(e.get(self.txn, self.h.subscriber, rid)?
            .and_then(|r| r[0].as_i64()))
    }

    /// Runs the transaction's statements; returns whether it found what it needed.
    fn execute(&mut self, e: &mut Engine, inp: &Input) -> Result<bool> {
        let h = self.h;
        let sid = i64::from(inp.s_id);
        match inp.kind {
            TxnType::GetSubscriberData => {
                let Some(rid) = self.one(e, h.subscriber_pk, &[int(sid)], false)? else {
                    return Ok(false);
                };
                Ok(e.get(self.txn, h.subscriber, rid)?.is_some())
            }
            TxnType::GetNewDestination => {
                let Some(rid) =
                    self.one(e, h.special_facility_pk, &[int(sid), int(inp.typ)], false)?
                else {
                    return Ok(false);
                };
                let active = e
                    .get(self.txn, h.special_facility, rid)?
                    .is_some_and(|r| r[2].as_i64() == Some(1));
                if !active {
                    return Ok(false);
                }
                let mut found = false;
                for start in [0, 8, 16].into_iter().filter(|&s| s <= inp.start_time) {
                    if let Some(rid) = self.one(
                        e,
                        h.call_forwarding_pk,
                        &[int(sid), int(inp.typ), int(start)],
                        false,
                    )? {
                        found |= e
                            .get(self.txn, h.call_forwarding, rid)?
                            .is_some_and(|r| r[3].as_i64().is_some_and(|end| inp.end_time < end));
                    }
                }
                Ok(found)
            }
            TxnType::GetAccessData => {
                let Some(rid) = self.one(e, h.access_info_pk, &[int(sid), int(inp.typ)], false)?
                else {
                    return Ok(false);
                };
                Ok(e.get(self.txn, h.access_info, rid)?.is_some())
            }
            TxnType::UpdateSubscriberData => {
                let Some(rid) = self.one(e, h.subscriber_pk, &[int(sid)], true)? else {
                    return Ok(false);
                };
                let Some(mut row) = e.get(self.txn, h.subscriber, rid)? else {
                    return Ok(false);
                };
                row[2] = int(inp.bit_1);
                e.update(self.txn, h.subscriber, rid, &row)?;
                let Some(rid) =
                    self.one(e, h.special_facility_pk, &[int(sid), int(inp.typ)], true)?
                else {
                    return Ok(false);
                };
                let Some(mut row) = e.get(self.txn, h.special_facility, rid)? else {
                    return Ok(false);
                };
                row[4] = int(inp.data_a);
                e.update(self.txn, h.special_facility, rid, &row)?;
                Ok(true)
            }
            TxnType::UpdateLocation => {
                let Some(rid) = self.one(
                    e,
                    h.subscriber_nbr,
                    &[Value::Str(inp.sub_nbr.clone())],
                    true,
                )?
                else {
                    return Ok(false);
                };
                let Some(mut row) = e.get(self.txn, h.subscriber, rid)? else {
                    return Ok(false);
                };
                let last = row.len() - 1;
                row[last] = int(inp.vlr_location);
                e.update(self.txn, h.subscriber, rid, &row)?;
                Ok(true)
            }
            TxnType::InsertCallForwarding => {
                let Some(sid) = self.s_id_of(e, &inp.sub_nbr)? else {
                    return Ok(false);
                };
                // The facility must exist (the description reads the subscriber's sf_types).
                if self
                    .one(e, h.special_facility_pk, &[int(sid), int(inp.typ)], false)?
                    .is_none()
                {
                    return Ok(false);
                }
                let key = [int(sid), int(inp.typ), int(inp.start_time)];
                if self.one(e, h.call_forwarding_pk, &key, true)?.is_some() {
                    return Ok(false); // the primary key is taken: the insert fails
                }
                let row = [
                    int(sid),
                    int(inp.typ),
                    int(inp.start_time),
                    int(inp.end_time),
                    Value::Str(inp.numberx.clone()),
                ];
                match e.insert(self.txn, h.call_forwarding, &row) {
                    Ok(_) => Ok(true),
                    Err(Error::DuplicateKey { .. }) => Ok(false),
                    Err(err) => Err(err),
                }
            }
            TxnType::DeleteCallForwarding => {
                let Some(sid) = self.s_id_of(e, &inp.sub_nbr)? else {
                    return Ok(false);
                };
                let key = [int(sid), int(inp.typ), int(inp.start_time)];
                let Some(rid) = self.one(e, h.call_forwarding_pk, &key, true)? else {
                    return Ok(false);
                };
                e.delete(self.txn, h.call_forwarding, rid)?;
                Ok(true)
            }
        }
    }

    fn run_stage(&mut self, e: &mut Engine) -> Result<Step> {
        match self.stage {
            Stage::Start => {
                if self.remaining == Some(0) {
                    return Ok(Step::Finished);
                }
                self.input = Some(self.gen.next_input());
                self.started_ns = e.now();
                self.txn = e.begin()?;
                self.stage = Stage::Run;
                Ok(Step::Ran)
            }
            Stage::Run => {
                let inp = self.input.clone().ok_or_else(|| {
                    Error::Unsupported("a TATP terminal ran without input".into())
                })?;
                let ok = self.execute(e, &inp)?;
                let o = &mut self.outcomes[inp.kind.index()];
                o.attempted += 1;
                if ok {
                    o.succeeded += 1;
                    let lsn = e.commit_request(self.txn)?;
                    self.stage = Stage::Committing;
                    Ok(Step::WaitDurable(lsn))
                } else {
                    // Nothing found: the transaction rolls back (a failed TATP transaction).
                    e.abort(self.txn)?;
                    self.finish(e);
                    Ok(Step::Ran)
                }
            }
            Stage::Committing => Err(Error::Unsupported(
                "a committing terminal was stepped".into(),
            )),
        }
    }

    fn finish(&mut self, e: &Engine) {
        self.finished += 1;
        if let Some(r) = self.remaining.as_mut() {
            *r = r.saturating_sub(1);
        }
        let _ = self.latency_ns.record((e.now() - self.started_ns).max(1));
        if let (Some(ev), Some(inp)) = (self.events.as_mut(), self.input.as_ref()) {
            ev.push(storage::sched::TxnEvent {
                start_ns: self.started_ns,
                latency_ns: (e.now() - self.started_ns).max(1),
                kind: inp.kind.index() as u8,
                // The terminal's index, set when its events join the run's trace.
                worker: 0,
                committed: self.stage == Stage::Committing,
            });
        }
        self.stage = Stage::Start;
    }
}

impl Terminal for TatpTerminal {
    fn step(&mut self, e: &mut Engine) -> Result<Step> {
        let step = self.run_stage(e);
        match settle(e, &mut self.txn, step)? {
            Settled::Step(s) => Ok(s),
            Settled::Retry => {
                self.deadlocks += 1;
                self.stage = Stage::Run;
                Ok(Step::Ran)
            }
        }
    }

    fn durable(&mut self, e: &mut Engine) -> Result<()> {
        e.commit_finish(self.txn)?;
        self.finish(e);
        Ok(())
    }

    fn in_transaction(&self) -> bool {
        self.stage != Stage::Start
    }
}
