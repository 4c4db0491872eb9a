//! The emulated NAND device: the rules, wear, bit errors, power loss, timing and accounting.
//!
//! Invariants:
//! 1. An operation refused by a rule (range, buffer size, order, NOP, bits, mode, bad block,
//!    powered off) changes nothing: no state, no time, no counter. Rules are checked before
//!    anything is scheduled or written.
//! 2. An operation that reaches the chips (passes the rules) takes device time, even when the
//!    media then fails it (uncorrectable read, worn-out erase, injected status fail).
//! 3. Pages of a block are programmed in increasing order; MLC and TLC blocks strictly
//!    consecutively (datasheets forbid skipping the LSB pages of a word line). A page is
//!    programmed again only by a partial program, only in SLC and pSLC blocks, at most NOP times
//!    in all, and a partial program only clears bits: `stored AND new == new` in its range.
//! 4. A read returns the programmed bytes, or 0xFF for an erased page, or an error. Never wrong
//!    data: bit errors beyond the ECC limit of any codeword fail the read. The one exception is
//!    the byte range of an interrupted append (invariant 6), which reads back half-programmed:
//!    its own check (the host's checksum per append) must find it.
//! 5. A block delivers its rated P/E cycles (per mode, wear accumulates across modes); the erase
//!    beyond them fails and the block is bad. Bad blocks refuse programs and erases; their pages
//!    stay readable so that data can be moved off them.
//! 6. A power loss interrupts exactly one operation (at most one per multi-plane group): an
//!    interrupted program leaves its page torn (unreadable) and, on MLC/TLC, also the pages that
//!    share its word line; an interrupted partial program of an already programmed page (an
//!    In-Place Append) damages only its own byte range (some of its bits programmed, the others
//!    still erased) and leaves the page readable; an interrupted erase leaves its block needing
//!    an erase. Every operation
//!    completed before it persists. Afterwards every operation is refused until `power_on`.
//!    With power-loss protection (`DeviceConfig::plp`) a power loss interrupts nothing: the
//!    operation completes and the device raises `power_warning`; operations go on (on the
//!    capacitors' energy) until the holder calls `power_cut`.
//! 7. The same config, seed and sequence of calls give the same results, times and counters.

use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::config::{CellMode, DeviceConfig, PageType, StoreKind};
use crate::error::{ConfigError, NandError};
use crate::geometry::{DieId, Geometry, Pbn, Ppn};
use crate::stats::{
    BadBlockReport, EccReport, EnergyReport, EraseCountReport, LatencyReport, LatencySummary,
    OpKind, Purpose, PurposeCounts, Stats, StatsReport, TraceEntry,
};
use crate::store::{
    BlockMeta, BlockState, ImageStore, RamStore, Store, PAGE_PROGRAMS_MASK, PAGE_TORN,
};
use crate::timing::{Nanos, Phases, Slot, Timeline};

/// When a request started and completed, in virtual nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    pub start_ns: Nanos,
    pub done_ns: Nanos,
}

/// Faults to inject. Each fires once; a power loss clears the whole plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Cut power during the N-th operation (counting from 1) that reaches the chips.
    pub cut_at_op: Option<u64>,
    /// Cut power at this virtual time: the operation in flight then is interrupted, and any that
    /// would start later finds the device off.
    pub cut_at_ns: Option<Nanos>,
    /// The N-th operation that reaches the chips fails on the media (program or erase status
    /// fail, uncorrectable read) without a power loss.
    pub fail_op: Option<u64>,
    /// The first full-page program of an upper or middle page (MLC, TLC: a page with pages
    /// below it on its word line) among the operations from the N-th on fails on the media, as
    /// `fail_op` does: it tears that page and the pages below it on its word line (invariant 6's
    /// paired-page corruption, here without a power loss) and retires the block. The media
    /// failure an MLC/TLC controller must survive without losing acknowledged data.
    pub fail_paired_program_from: Option<u64>,
}

/// A block's state as reported to callers.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct BlockInfo {
    pub erase_count: u32,
    pub mode: CellMode,
    pub state: BlockState,
    pub next_page: u32,
    pub usable_pages: u32,
    /// Wear as a fraction of rated life (1.0: the next erase fails).
    pub wear: f64,
}

const WEAR_LIFE: u64 = 1_000_000_000_000;
const NS_PER_YEAR: f64 = 365.25 * 24.0 * 3600.0 * 1e9;

/// Per-operation times in nanoseconds, computed once from the config.
#[derive(Debug, Clone)]
struct Times {
    cmd_ns: Nanos,
    read_ns: [Nanos; 4],
    program_ns: [Nanos; 4],
    pslc_read_ns: Nanos,
    pslc_program_ns: Nanos,
    erase_ns: Nanos,
    pslc_erase_ns: Nanos,
    oob_read_ns: Option<Nanos>,
    oob_program_ns: Option<Nanos>,
    /// Bus nanoseconds per byte times 2^16 (fixed point keeps the hot path integer-only).
    bus_ns_per_byte_q16: u64,
    transfer_in_array: bool,
}

fn us_to_ns(us: f64) -> Nanos {
    (us * 1000.0).round() as Nanos
}

impl Times {
    fn new(cfg: &DeviceConfig) -> Self {
        let t = &cfg.timing;
        let read = us_to_ns(t.read_us);
        let program = us_to_ns(t.program_us);
        let read_upper = t.read_upper_us.map_or(read, us_to_ns);
        let program_upper = t.program_upper_us.map_or(program, us_to_ns);
        Times {
            cmd_ns: t.cmd_addr_ns,
            // Indexed by PageType: Slc, Lower, Middle, Upper.
            read_ns: [
                read,
                read,
                t.read_middle_us.map_or(read_upper, us_to_ns),
                read_upper,
            ],
            program_ns: [
                program,
                program,
                t.program_middle_us.map_or(program_upper, us_to_ns),
                program_upper,
            ],
            pslc_read_ns: t.pslc_read_us.map_or(read, us_to_ns),
            pslc_program_ns: t.pslc_program_us.map_or(program, us_to_ns),
            erase_ns: us_to_ns(t.erase_us),
            pslc_erase_ns: t.pslc_erase_us.map_or(us_to_ns(t.erase_us), us_to_ns),
            oob_read_ns: t.oob_read_us.map(us_to_ns),
            oob_program_ns: t.oob_program_us.map(us_to_ns),
            bus_ns_per_byte_q16: ((1000.0 / t.bus_mt_per_s) * 65536.0).round() as u64,
            transfer_in_array: t.transfer_in_array_time,
        }
    }

    #[inline]
    fn bus_ns(&self, bytes: usize) -> Nanos {
        if self.transfer_in_array {
            0
        } else {
            (bytes as u64 * self.bus_ns_per_byte_q16 + 0x8000) >> 16
        }
    }

    #[inline]
    fn read(&self, mode: CellMode, ty: PageType) -> Nanos {
        if mode == CellMode::Pslc {
            self.pslc_read_ns
        } else {
            self.read_ns[ty as usize]
        }
    }

    #[inline]
    fn program(&self, mode: CellMode, ty: PageType) -> Nanos {
        if mode == CellMode::Pslc {
            self.pslc_program_ns
        } else {
            self.program_ns[ty as usize]
        }
    }

    fn erase(&self, mode: CellMode) -> Nanos {
        if mode == CellMode::Pslc {
            self.pslc_erase_ns
        } else {
            self.erase_ns
        }
    }
}

/// How an operation that reached the chips ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Completes,
    Interrupted,
    MediaFail,
}

/// One emulated NAND device.
#[derive(Debug)]
pub struct Nand {
    cfg: DeviceConfig,
    geo: Geometry,
    blocks: Vec<BlockMeta>,
    pages: Vec<u8>,
    store: Box<dyn Store>,
    timeline: Timeline,
    times: Times,
    stats: Stats,
    plan: FaultPlan,
    powered: bool,
    /// The power failed on a device with power-loss protection (invariant 6): it runs on its
    /// capacitors until `power_cut`.
    power_warning: bool,
    op_seq: u64,
    rng: Xoshiro256PlusPlus,
    trace: Vec<TraceEntry>,
    /// The last `trace_recent` operations: a ring whose oldest entry is at `recent_next` once
    /// it is full.
    recent: Vec<TraceEntry>,
    recent_next: usize,
    codeword_counts: Vec<u32>,
    /// Cached per-mode usable pages and wear step, indexed by CellMode.
    usable_pages: [u32; 4],
    wear_step: [u64; 4],
    nop_limit: [u8; 4],
}

fn mode_index(m: CellMode) -> usize {
    m as usize
}

impl Nand {
    /// A fresh device in memory (or metadata-only, per `cfg.store`).
    pub fn new(cfg: DeviceConfig) -> Result<Nand, ConfigError> {
        cfg.validate()?;
        let store: Box<dyn Store> =
            Box::new(RamStore::new(&cfg.geometry, cfg.store == StoreKind::Ram));
        let blocks = Self::factory_blocks(&cfg);
        let pages = vec![0u8; cfg.geometry.pages() as usize];
        Ok(Self::assemble(cfg, blocks, pages, store, 0))
    }

    /// A fresh device kept in an image file at `path` (created or truncated).
    pub fn create_image(cfg: DeviceConfig, path: &std::path::Path) -> Result<Nand, NandError> {
        cfg.validate()
            .map_err(|e| NandError::Image(e.to_string()))?;
        let blocks = Self::factory_blocks(&cfg);
        let store = ImageStore::create(path, &cfg, &blocks)?;
        let pages = vec![0u8; cfg.geometry.pages() as usize];
        Ok(Self::assemble(cfg, blocks, pages, Box::new(store), 0))
    }

    /// The device kept in the image file at `path`, as it was left: data, OOB, wear, bad blocks,
    /// modes and the virtual clock.
    pub fn open_image(path: &std::path::Path) -> Result<Nand, NandError> {
        Self::open_image_as(path, false)
    }

    /// The device kept in the image file at `path`, mapped copy-on-write: it reads the file and
    /// works as `open_image` does, but nothing it programs, erases or flushes reaches the file,
    /// which is opened read-only. For checks (`fsck`) and for probes that must leave an image
    /// unchanged when they refuse it.
    pub fn open_image_private(path: &std::path::Path) -> Result<Nand, NandError> {
        Self::open_image_as(path, true)
    }

    fn open_image_as(path: &std::path::Path, private: bool) -> Result<Nand, NandError> {
        let (store, state) = ImageStore::open(path, private)?;
        let mut nand = Self::assemble(
            state.config,
            state.blocks,
            state.page_states,
            Box::new(store),
            state.clock_ns,
        );
        nand.store.save_clock(state.clock_ns, false);
        Ok(nand)
    }

    fn factory_blocks(cfg: &DeviceConfig) -> Vec<BlockMeta> {
        let g = &cfg.geometry;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0xBAD_B10C);
        let ratio = cfg.reliability.factory_bad_block_ratio;
        (0..g.blocks())
            .map(|b| {
                // Block 0 of every die is guaranteed good, as datasheets promise for boot code.
                let draw = unit_f64(rng.next_u64());
                let bad = b % g.blocks_per_die() != 0 && draw < ratio;
                BlockMeta {
                    erase_count: 0,
                    wear_ppt: 0,
                    mode: cfg.cell.native,
                    state: if bad {
                        BlockState::FactoryBad
                    } else {
                        BlockState::Good
                    },
                    next_page: 0,
                    programmed_at_ns: 0,
                }
            })
            .collect()
    }

    fn assemble(
        cfg: DeviceConfig,
        blocks: Vec<BlockMeta>,
        pages: Vec<u8>,
        store: Box<dyn Store>,
        clock_ns: Nanos,
    ) -> Nand {
        let geo = cfg.geometry.clone();
        let mut timeline = Timeline::new(geo.channels, geo.dies());
        timeline.set_horizon_ns(clock_ns);
        timeline.reset_queues();
        let codewords = (geo.page_size_bytes / cfg.reliability.ecc_codeword_bytes) as usize;
        let modes = [CellMode::Slc, CellMode::Mlc, CellMode::Tlc, CellMode::Pslc];
        let usable_pages = modes.map(|m| cfg.pages_in_mode(m));
        let wear_step = modes.map(|m| WEAR_LIFE.div_ceil(u64::from(cfg.endurance_cycles(m))));
        let nop_limit = modes.map(|m| cfg.nop_limit(m));
        Nand {
            times: Times::new(&cfg),
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x0EC0_B175),
            trace: Vec::new(),
            recent: Vec::new(),
            recent_next: 0,
            codeword_counts: vec![0; codewords.max(1)],
            cfg,
            geo,
            blocks,
            pages,
            store,
            timeline,
            stats: Stats::default(),
            plan: FaultPlan::default(),
            powered: true,
            power_warning: false,
            op_seq: 0,
            usable_pages,
            wear_step,
            nop_limit,
        }
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.cfg
    }
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Clears counters, histograms and the trace (for measuring one phase of a run).
    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
        self.trace.clear();
        self.recent.clear();
        self.recent_next = 0;
    }
    pub fn trace(&self) -> &[TraceEntry] {
        &self.trace
    }
    /// The last `trace_recent` operations (config), oldest first.
    pub fn recent_trace(&self) -> impl Iterator<Item = &TraceEntry> {
        let (newer, older) = self.recent.split_at(self.recent_next);
        older.iter().chain(newer)
    }
    pub fn store_kind(&self) -> &'static str {
        self.store.kind()
    }
    /// The latest completion time of any operation: the device's virtual "now".
    pub fn now_ns(&self) -> Nanos {
        self.timeline.horizon_ns()
    }
    /// Time each die has been busy (an operation holds its die from start to completion),
    /// indexed by die number, since the device was created.
    pub fn die_busy_ns(&self) -> &[Nanos] {
        self.timeline.die_busy_ns()
    }
    /// Bus time each channel has carried data (program data in, read data out), indexed by
    /// channel, since the device was created.
    pub fn channel_busy_ns(&self) -> &[Nanos] {
        self.timeline.channel_busy_ns()
    }
    pub fn is_powered(&self) -> bool {
        self.powered
    }
    /// The host power failed and the device runs on its power-loss-protection capacitors
    /// (invariant 6): its holder should write back what it buffers, then call `power_cut`.
    pub fn power_warning(&self) -> bool {
        self.power_warning
    }
    /// Operations that reached the chips so far (what `FaultPlan::cut_at_op` counts).
    pub fn ops_issued(&self) -> u64 {
        self.op_seq
    }
    pub fn set_fault_plan(&mut self, plan: FaultPlan) {
        self.plan = plan;
    }

    /// Cuts power now, between operations: nothing is interrupted.
    pub fn power_cut(&mut self) {
        if self.powered {
            self.lose_power();
        }
    }

    /// Powers the device on after a cut. Queues are empty; virtual time goes on.
    pub fn power_on(&mut self) {
        self.powered = true;
        self.power_warning = false;
        self.timeline.reset_queues();
    }

    /// Maps and faults in all of an in-memory device's memory now, so that no program later
    /// waits for the kernel to zero a page; returns the bytes the store has mapped (0 for an image file,
    /// whose pages are the file's). Changes no device state: timing, data and statistics are
    /// as before. Refused, with nothing mapped, when the device does not fit the host's memory.
    pub fn prefault(&mut self) -> Result<u64, NandError> {
        self.store.prefault()
    }

    /// Writes the image's clock and syncs it to its file (no-op for memory stores).
    pub fn flush(&mut self) -> Result<(), NandError> {
        self.store.save_clock(self.timeline.horizon_ns(), true);
        self.store.flush()
    }

    pub fn block_info(&self, pbn: Pbn) -> Result<BlockInfo, NandError> {
        let m = self
            .blocks
            .get(pbn.0 as usize)
            .ok_or(NandError::BlockOutOfRange(pbn, self.geo.blocks()))?;
        Ok(BlockInfo {
            erase_count: m.erase_count,
            mode: m.mode,
            state: m.state,
            next_page: u32::from(m.next_page),
            usable_pages: self.usable_pages[mode_index(m.mode)],
            wear: m.wear_ppt as f64 / WEAR_LIFE as f64,
        })
    }

    /// True if the block refuses programs and erases (factory or grown bad).
    pub fn is_bad(&self, pbn: Pbn) -> bool {
        self.blocks
            .get(pbn.0 as usize)
            .is_some_and(|m| matches!(m.state, BlockState::FactoryBad | BlockState::GrownBad))
    }

    /// How many times a page was programmed since its block's erase (0: erased).
    pub fn page_programs(&self, ppn: Ppn) -> u8 {
        self.pages
            .get(ppn.0 as usize)
            .map_or(0, |s| s & PAGE_PROGRAMS_MASK)
    }

    // ----- rules -----------------------------------------------------------------------------

    #[inline]
    fn locate(&self, ppn: Ppn) -> Result<(Pbn, u32), NandError> {
        if ppn.0 >= self.geo.pages() {
            return Err(NandError::PageOutOfRange(ppn, self.geo.pages()));
        }
        Ok((self.geo.block_of(ppn), self.geo.page_in_block(ppn)))
    }

    #[inline]
    fn check_powered(&self) -> Result<(), NandError> {
        if self.powered {
            Ok(())
        } else {
            Err(NandError::PoweredOff)
        }
    }

    #[inline]
    fn check_in_mode(&self, pbn: Pbn, page: u32) -> Result<&BlockMeta, NandError> {
        let m = &self.blocks[pbn.0 as usize];
        let usable = self.usable_pages[mode_index(m.mode)];
        if page >= usable {
            return Err(NandError::PageBeyondMode {
                pbn,
                page,
                usable,
                mode: m.mode,
            });
        }
        Ok(m)
    }

    fn check_writable(&self, pbn: Pbn) -> Result<(), NandError> {
        match self.blocks[pbn.0 as usize].state {
            BlockState::Good => Ok(()),
            BlockState::FactoryBad | BlockState::GrownBad => Err(NandError::BadBlock(pbn)),
            BlockState::NeedsErase => Err(NandError::NeedsErase(pbn)),
        }
    }

    #[inline]
    fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), NandError> {
        if got == expected {
            Ok(())
        } else {
            Err(NandError::BufferSize {
                what,
                expected,
                got,
            })
        }
    }

    /// Checks a (partial) program against invariant 3. Returns whether the page is erased.
    fn check_program(
        &self,
        ppn: Ppn,
        pbn: Pbn,
        page: u32,
        partial: Option<(usize, &[u8], usize, &[u8])>,
    ) -> Result<bool, NandError> {
        self.check_writable(pbn)?;
        let m = self.check_in_mode(pbn, page)?;
        let state = self.pages[ppn.0 as usize];
        let programs = state & PAGE_PROGRAMS_MASK;
        let next = u32::from(m.next_page);
        let strict = matches!(m.mode, CellMode::Mlc | CellMode::Tlc);
        if programs == 0 {
            if page < next || (strict && page != next) {
                return Err(NandError::ProgramOutOfOrder { ppn, pbn, next });
            }
            return Ok(true);
        }
        let Some((data_off, data, oob_off, oob)) = partial else {
            return Err(NandError::AlreadyProgrammed { ppn });
        };
        let limit = self.nop_limit[mode_index(m.mode)];
        if limit <= 1 {
            return Err(NandError::PartialProgramNotAllowed { ppn, mode: m.mode });
        }
        if programs >= limit {
            return Err(NandError::NopExceeded { ppn, limit });
        }
        if state & PAGE_TORN != 0 {
            return Err(NandError::Torn(ppn));
        }
        let view = self.store.page(ppn);
        if let Some(old) = view.data {
            if let Some(i) = first_set_over_cleared(&old[data_off..data_off + data.len()], data) {
                return Err(NandError::WouldSetBits {
                    ppn,
                    area: "data",
                    offset: data_off + i,
                });
            }
        }
        if let Some(i) = first_set_over_cleared(&view.oob[oob_off..oob_off + oob.len()], oob) {
            return Err(NandError::WouldSetBits {
                ppn,
                area: "oob",
                offset: oob_off + i,
            });
        }
        Ok(false)
    }

    // ----- scheduling and faults -------------------------------------------------------------

    /// Schedules an operation that passed the rules and decides its fate (invariants 2 and 6).
    fn begin(&mut self, at_ns: Nanos, die: DieId, p: Phases) -> Result<(Slot, Fate), NandError> {
        self.begin_op(at_ns, die, p, false)
    }

    /// `begin` for an operation that may be a paired program: `paired` is a full-page program
    /// of an upper or middle page (`FaultPlan::fail_paired_program_from` aims at those).
    fn begin_op(
        &mut self,
        at_ns: Nanos,
        die: DieId,
        p: Phases,
        paired: bool,
    ) -> Result<(Slot, Fate), NandError> {
        let channel = self.geo.channel_of_die(die);
        let slot = self.timeline.plan(channel, die.0, at_ns, p);
        if let Some(cut) = self.plan.cut_at_ns {
            if slot.start_ns >= cut && self.cfg.plp {
                // The capacitors take over (invariant 6): this operation runs on them.
                self.plan.cut_at_ns = None;
                self.power_warning = true;
                self.stats.power_losses += 1;
            } else if slot.start_ns >= cut {
                // The device went dark before this operation could start.
                self.timeline.set_horizon_ns(cut);
                self.lose_power();
                return Err(NandError::PoweredOff);
            }
        }
        self.op_seq += 1;
        self.timeline.commit(channel, die.0, at_ns, p, slot);
        let mut interrupted = self.plan.cut_at_op == Some(self.op_seq)
            || self.plan.cut_at_ns.is_some_and(|cut| slot.done_ns > cut);
        if interrupted && self.cfg.plp {
            // Power-loss protection: the operation completes on the capacitors (invariant 6).
            interrupted = false;
            self.plan.cut_at_op = None;
            self.plan.cut_at_ns = None;
            self.power_warning = true;
            self.stats.power_losses += 1;
        }
        let fate = if interrupted {
            Fate::Interrupted
        } else if self.plan.fail_op == Some(self.op_seq) {
            Fate::MediaFail
        } else if paired
            && self
                .plan
                .fail_paired_program_from
                .is_some_and(|n| self.op_seq >= n)
        {
            self.plan.fail_paired_program_from = None;
            Fate::MediaFail
        } else {
            Fate::Completes
        };
        Ok((slot, fate))
    }

    fn lose_power(&mut self) {
        self.powered = false;
        self.plan = FaultPlan::default();
        if !std::mem::take(&mut self.power_warning) {
            // With a warning, the loss was counted when the capacitors took over.
            self.stats.power_losses += 1;
        }
        self.store.save_clock(self.timeline.horizon_ns(), false);
    }

    /// Charges the energy of an operation's phases and counts it.
    #[allow(clippy::too_many_arguments)]
    fn account(
        &mut self,
        op: OpKind,
        purpose: Purpose,
        address: u64,
        die: DieId,
        at_ns: Nanos,
        p: Phases,
        slot: Slot,
        status: &Result<(), NandError>,
    ) {
        let e = &self.cfg.energy;
        let array_ma = match op {
            OpKind::Read | OpKind::OobRead => e.read_ma,
            OpKind::Program | OpKind::PartialProgram | OpKind::OobWrite => e.program_ma,
            OpKind::Erase => e.erase_ma,
        };
        let bus_ns = (p.cmd_ns + p.bus_in_ns + p.bus_out_ns) as f64;
        self.stats.active_joules +=
            e.vcc_volts * (array_ma * p.array_ns as f64 + e.bus_ma * bus_ns) * 1e-12;
        self.stats.count(op, purpose, slot.done_ns - at_ns);
        if matches!(op, OpKind::Read | OpKind::Program) {
            // The address of a read or program is its page; its array time is the phase the
            // operation was timed with (not looked up again on this hot path).
            let ppn = Ppn(address);
            let (pbn, page) = (self.geo.block_of(ppn), self.geo.page_in_block(ppn));
            let t = self.cfg.page_type(self.blocks[pbn.0 as usize].mode, page);
            self.stats
                .count_page_type(t, op == OpKind::Program, p.array_ns);
        }
        let status_name = match status {
            Ok(()) => "ok",
            Err(e) => error_name(e),
        };
        let entry = |status: String| TraceEntry {
            seq: self.op_seq,
            op,
            purpose,
            address,
            die: die.0,
            submit_ns: at_ns,
            start_ns: slot.start_ns,
            done_ns: slot.done_ns,
            status,
        };
        if self.cfg.trace_entries > self.trace.len() {
            let e = entry(status_name.to_string());
            self.trace.push(e);
        }
        let ring = self.cfg.trace_recent;
        if ring > 0 {
            if self.recent.len() < ring {
                let e = entry(status_name.to_string());
                self.recent.push(e);
            } else {
                // Full: overwrite the oldest in place, its status string's buffer reused.
                let i = self.recent_next;
                let mut status = std::mem::take(&mut self.recent[i].status);
                status.clear();
                status.push_str(status_name);
                self.recent[i] = entry(status);
                self.recent_next = (i + 1) % ring;
            }
            debug_assert!(self.recent.len() <= ring && self.recent_next < ring.max(1));
        }
    }

    fn save_block(&mut self, pbn: Pbn) {
        let m = self.blocks[pbn.0 as usize];
        self.store.save_block(pbn, &m);
    }

    fn set_page_state(&mut self, ppn: Ppn, state: u8) {
        self.pages[ppn.0 as usize] = state;
        self.store.save_page_state(ppn, state);
    }

    /// Effects of a program interrupted by power loss (invariant 6).
    fn tear(&mut self, ppn: Ppn, pbn: Pbn, page: u32, at_ns: Nanos) {
        let m = self.blocks[pbn.0 as usize];
        let programs = (self.pages[ppn.0 as usize] & PAGE_PROGRAMS_MASK)
            .saturating_add(1)
            .min(PAGE_PROGRAMS_MASK);
        self.set_page_state(ppn, programs | PAGE_TORN);
        // Pages below on the same word line lose their charge state too (paired-page corruption).
        let siblings = match self.cfg.page_type(m.mode, page) {
            PageType::Upper if m.mode == CellMode::Mlc => 1,
            PageType::Middle => 1,
            PageType::Upper => 2,
            _ => 0,
        };
        for k in 1..=siblings {
            let sib = Ppn(ppn.0 - k);
            let s = self.pages[sib.0 as usize];
            self.set_page_state(sib, s | PAGE_TORN);
        }
        self.note_programmed(pbn, page, at_ns);
    }

    /// Effects of an interrupted partial program of an already programmed page (an append,
    /// invariant 6): the ISPP pulses stopped part-way, so some of the bits it was to program are
    /// programmed and the others still erased, in its byte range only. The rest of the page
    /// keeps its charge: an append is programmed into erased cells whose own ECC parity is
    /// written with them (a codeword's parity is written once), so the page's earlier data and
    /// its codewords are untouched, and the host's check of the appended bytes (In-Place
    /// Appends carry a checksum per append) finds the damage. The page counts one more program.
    fn tear_append(
        &mut self,
        ppn: Ppn,
        (data_off, data, oob_off, oob): (usize, &[u8], usize, &[u8]),
    ) {
        let mut rng = |b: &u8| {
            // A bit stays erased (1) where the random mask is 1: half the bits made it.
            b | (self.rng.next_u64() as u8)
        };
        let torn_data: Vec<u8> = data.iter().map(&mut rng).collect();
        let torn_oob: Vec<u8> = oob.iter().map(&mut rng).collect();
        self.store
            .program(ppn, false, data_off, &torn_data, oob_off, &torn_oob);
        let programs =
            ((self.pages[ppn.0 as usize] & PAGE_PROGRAMS_MASK) + 1).min(PAGE_PROGRAMS_MASK);
        let torn = self.pages[ppn.0 as usize] & PAGE_TORN;
        self.set_page_state(ppn, programs | torn);
        self.stats.torn_appends += 1;
    }

    fn note_programmed(&mut self, pbn: Pbn, page: u32, at_ns: Nanos) {
        let m = &mut self.blocks[pbn.0 as usize];
        // Retention is measured from the block's first program after its erase.
        if m.programmed_at_ns == 0 {
            m.programmed_at_ns = at_ns.max(1);
        }
        if page + 1 > u32::from(m.next_page) {
            m.next_page = (page + 1) as u16;
        }
        self.save_block(pbn);
    }

    // ----- bit errors ------------------------------------------------------------------------

    fn rber(&self, m: &BlockMeta, at_ns: Nanos) -> f64 {
        let r = &self.cfg.reliability;
        let wear = m.wear_ppt as f64 / WEAR_LIFE as f64;
        let years = at_ns.saturating_sub(m.programmed_at_ns) as f64 / NS_PER_YEAR;
        // powf is the costliest step of a read; fresh blocks and the common square skip it.
        let wear_term = if wear == 0.0 {
            0.0
        } else if r.rber_wear_exponent == 2.0 {
            wear * wear
        } else {
            wear.powf(r.rber_wear_exponent)
        };
        let rate = r.rber_fresh
            + (r.rber_at_endurance - r.rber_fresh) * wear_term
            + r.rber_retention_per_year * years * (1.0 + wear);
        rate.clamp(0.0, 0.5)
    }

    /// Samples raw bit errors over `bytes` and returns (total, worst codeword).
    fn sample_bit_errors(&mut self, rber: f64, bytes: usize) -> (u32, u32) {
        let cw_bytes = self.cfg.reliability.ecc_codeword_bytes as usize;
        let codewords = bytes.div_ceil(cw_bytes).max(1);
        let lambda = rber * (bytes * 8) as f64;
        if lambda < 30.0 {
            let total = poisson_small(&mut self.rng, lambda);
            if total == 0 {
                return (0, 0);
            }
            let used = codewords.min(self.codeword_counts.len());
            let counts = &mut self.codeword_counts[..used];
            counts.fill(0);
            let n = counts.len() as u64;
            for _ in 0..total {
                counts[(self.rng.next_u64() % n) as usize] += 1;
            }
            return (total, counts.iter().copied().max().unwrap_or(0));
        }
        // Many errors per page: sample each codeword with a normal approximation of its Poisson.
        let per_cw = lambda / codewords as f64;
        let (mut total, mut worst) = (0u32, 0u32);
        for _ in 0..codewords {
            let z = standard_normal(&mut self.rng);
            let k = (per_cw + per_cw.sqrt() * z).round().max(0.0) as u32;
            total += k;
            worst = worst.max(k);
        }
        (total, worst)
    }

    // ----- operations ------------------------------------------------------------------------

    /// Reads a page: `data` (empty, or the page size) and `oob` (empty, or the OOB size).
    /// With an empty `data` this is an OOB-only read.
    pub fn read(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        data: &mut [u8],
        oob: &mut [u8],
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        if !data.is_empty() {
            Self::check_len("data", data.len(), self.geo.page_size_bytes as usize)?;
        }
        if !oob.is_empty() {
            Self::check_len("oob", oob.len(), self.geo.oob_size_bytes as usize)?;
        }
        self.read_range(at_ns, ppn, (0, data), (0, oob), purpose)
    }

    /// Reads part of a page: `data.len()` bytes from byte `data_offset` of the page and
    /// `oob.len()` bytes from byte `oob_offset` of its OOB (either may be empty), as a controller
    /// does with a column change after the array read: the array time is a whole page's (tR),
    /// the bus carries only the bytes asked for, and bit errors are sampled over those bytes'
    /// codewords. An empty `data` makes this an OOB-only read.
    pub fn read_range(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        (data_offset, data): (usize, &mut [u8]),
        (oob_offset, oob): (usize, &mut [u8]),
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        self.check_powered()?;
        let (pbn, page) = self.locate(ppn)?;
        let page_bytes = self.geo.page_size_bytes as usize;
        let oob_bytes = self.geo.oob_size_bytes as usize;
        if data_offset + data.len() > page_bytes {
            return Err(NandError::BufferSize {
                what: "data range",
                expected: page_bytes,
                got: data_offset + data.len(),
            });
        }
        if oob_offset + oob.len() > oob_bytes {
            return Err(NandError::BufferSize {
                what: "oob range",
                expected: oob_bytes,
                got: oob_offset + oob.len(),
            });
        }
        if !data.is_empty() {
            // The copy's source misses the caches (a scattered page of a large store): start
            // fetching it now so that the misses overlap the rules, timing and bit-error
            // sampling below instead of following them.
            self.store.prefetch(ppn, data_offset, data.len());
        }
        // The page's state byte is read only after the scheduling (`deliver`), and misses too.
        crate::store::prefetch_bytes(&self.pages[ppn.0 as usize..=ppn.0 as usize]);
        let m = *self.check_in_mode(pbn, page)?;
        let oob_only = data.is_empty();
        let (op, array_ns) = if oob_only {
            (
                OpKind::OobRead,
                self.times
                    .oob_read_ns
                    .unwrap_or_else(|| self.times.read(m.mode, self.cfg.page_type(m.mode, page))),
            )
        } else {
            (
                OpKind::Read,
                self.times.read(m.mode, self.cfg.page_type(m.mode, page)),
            )
        };
        let p = Phases {
            cmd_ns: self.times.cmd_ns,
            bus_in_ns: 0,
            array_ns,
            bus_out_ns: self.times.bus_ns(data.len() + oob.len()),
        };
        let die = self.geo.die_of_block(pbn);
        let (slot, fate) = self.begin(at_ns, die, p)?;
        let result = match fate {
            Fate::Interrupted => {
                self.lose_power();
                return Err(NandError::PowerLost);
            }
            Fate::MediaFail => {
                self.stats.uncorrectable_reads += 1;
                Err(NandError::Uncorrectable {
                    ppn,
                    bit_errors: self.cfg.reliability.ecc_correctable_bits + 1,
                    correctable: self.cfg.reliability.ecc_correctable_bits,
                })
            }
            Fate::Completes => self.deliver(
                at_ns,
                ppn,
                (pbn, page, &m),
                (data_offset, data),
                (oob_offset, oob),
            ),
        };
        self.account(op, purpose, ppn.0, die, at_ns, p, slot, &result);
        result.map(|()| Done {
            start_ns: slot.start_ns,
            done_ns: slot.done_ns,
        })
    }

    /// Reads only the OOB bytes of a page.
    pub fn read_oob(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        oob: &mut [u8],
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        Self::check_len("oob", oob.len(), self.geo.oob_size_bytes as usize)?;
        self.read(at_ns, ppn, &mut [], oob, purpose)
    }

    /// The media outcome of a read that reached the chips: bytes, or an error (invariant 4).
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        (pbn, page, m): (Pbn, u32, &BlockMeta),
        (data_offset, data): (usize, &mut [u8]),
        (oob_offset, oob): (usize, &mut [u8]),
    ) -> Result<(), NandError> {
        if m.state == BlockState::NeedsErase {
            return Err(NandError::NeedsErase(pbn));
        }
        let state = self.pages[ppn.0 as usize];
        if state & PAGE_TORN != 0 {
            self.stats.uncorrectable_reads += 1;
            return Err(NandError::Torn(ppn));
        }
        if state & PAGE_PROGRAMS_MASK == 0 {
            data.fill(0xFF);
            oob.fill(0xFF);
            if m.state == BlockState::FactoryBad && page == 0 && !oob.is_empty() && oob_offset == 0
            {
                oob[0] = 0x00; // the factory's bad-block marker
            }
            self.stats.bytes_read += (data.len() + oob.len()) as u64;
            return Ok(());
        }
        let rber = self.rber(m, at_ns);
        let (bits, worst) = self.sample_bit_errors(rber, data.len().max(oob.len()));
        let correctable = self.cfg.reliability.ecc_correctable_bits;
        if worst > correctable {
            self.stats.uncorrectable_reads += 1;
            return Err(NandError::Uncorrectable {
                ppn,
                bit_errors: worst,
                correctable,
            });
        }
        if bits > 0 {
            self.stats.corrected_bits += u64::from(bits);
            self.stats.corrected_reads += 1;
        }
        let view = self.store.page(ppn);
        match view.data {
            Some(d) => data.copy_from_slice(&d[data_offset..data_offset + data.len()]),
            None => fill_pattern(data, ppn),
        }
        oob.copy_from_slice(&view.oob[oob_offset..oob_offset + oob.len()]);
        self.stats.bytes_read += (data.len() + oob.len()) as u64;
        Ok(())
    }

    /// Programs an erased page with a full page of data and, optionally, its OOB bytes (an empty
    /// `oob` leaves them erased).
    pub fn program(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        data: &[u8],
        oob: &[u8],
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        self.check_powered()?;
        let (pbn, page) = self.locate(ppn)?;
        Self::check_len("data", data.len(), self.geo.page_size_bytes as usize)?;
        if !oob.is_empty() {
            Self::check_len("oob", oob.len(), self.geo.oob_size_bytes as usize)?;
        }
        self.check_program(ppn, pbn, page, None)?;
        self.program_checked(
            at_ns,
            ppn,
            pbn,
            page,
            true,
            (0, data, 0, oob),
            OpKind::Program,
            purpose,
        )
    }

    /// Programs a byte range of a page's data and/or OOB. On an erased page this is its first
    /// program; on a programmed SLC/pSLC page it adds bits (In-Place Appends build on this).
    #[allow(clippy::too_many_arguments)]
    pub fn partial_program(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        data_off: usize,
        data: &[u8],
        oob_off: usize,
        oob: &[u8],
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        self.check_powered()?;
        let (pbn, page) = self.locate(ppn)?;
        if data.is_empty() && oob.is_empty() {
            return Err(NandError::EmptyProgram);
        }
        check_range(
            "data",
            data_off,
            data.len(),
            self.geo.page_size_bytes as usize,
        )?;
        check_range("oob", oob_off, oob.len(), self.geo.oob_size_bytes as usize)?;
        let fresh = self.check_program(ppn, pbn, page, Some((data_off, data, oob_off, oob)))?;
        let op = if data.is_empty() {
            OpKind::OobWrite
        } else {
            OpKind::PartialProgram
        };
        self.program_checked(
            at_ns,
            ppn,
            pbn,
            page,
            fresh,
            (data_off, data, oob_off, oob),
            op,
            purpose,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn program_checked(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        pbn: Pbn,
        page: u32,
        fresh: bool,
        bytes: (usize, &[u8], usize, &[u8]),
        op: OpKind,
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        let (data_off, data, oob_off, oob) = bytes;
        // Before `begin` changes the device's state (store.rs, `Store::reserve`).
        self.store.reserve(ppn)?;
        let mode = self.blocks[pbn.0 as usize].mode;
        let array_ns = match (op, self.times.oob_program_ns) {
            (OpKind::OobWrite, Some(t)) => t,
            _ => self.times.program(mode, self.cfg.page_type(mode, page)),
        };
        let p = Phases {
            cmd_ns: self.times.cmd_ns,
            bus_in_ns: self.times.bus_ns(data.len() + oob.len()),
            array_ns,
            bus_out_ns: 0,
        };
        let die = self.geo.die_of_block(pbn);
        let paired = op == OpKind::Program
            && matches!(
                self.cfg.page_type(mode, page),
                PageType::Upper | PageType::Middle
            );
        let (slot, fate) = self.begin_op(at_ns, die, p, paired)?;
        let result = match fate {
            Fate::Interrupted => {
                if fresh {
                    self.tear(ppn, pbn, page, slot.start_ns);
                } else {
                    self.tear_append(ppn, (data_off, data, oob_off, oob));
                }
                self.lose_power();
                return Err(NandError::PowerLost);
            }
            Fate::MediaFail => {
                if fresh {
                    self.tear(ppn, pbn, page, slot.start_ns);
                } else {
                    self.tear_append(ppn, (data_off, data, oob_off, oob));
                }
                self.blocks[pbn.0 as usize].state = BlockState::GrownBad;
                self.save_block(pbn);
                self.stats.failed_programs += 1;
                Err(NandError::ProgramFailed(ppn))
            }
            Fate::Completes => {
                self.store.program(ppn, fresh, data_off, data, oob_off, oob);
                let programs = (self.pages[ppn.0 as usize] & PAGE_PROGRAMS_MASK) + 1;
                self.set_page_state(ppn, programs);
                self.note_programmed(pbn, page, slot.done_ns);
                self.stats.bytes_programmed += (data.len() + oob.len()) as u64;
                Ok(())
            }
        };
        self.account(op, purpose, ppn.0, die, at_ns, p, slot, &result);
        result.map(|()| Done {
            start_ns: slot.start_ns,
            done_ns: slot.done_ns,
        })
    }

    /// Erases a block into `mode` (the chip's native mode, or pSLC on MLC/TLC chips).
    pub fn erase(
        &mut self,
        at_ns: Nanos,
        pbn: Pbn,
        mode: CellMode,
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        self.check_powered()?;
        self.check_erase(pbn, mode)?;
        let p = Phases {
            cmd_ns: self.times.cmd_ns,
            bus_in_ns: 0,
            array_ns: self.times.erase(mode),
            bus_out_ns: 0,
        };
        let die = self.geo.die_of_block(pbn);
        let (slot, fate) = self.begin(at_ns, die, p)?;
        let result = self.erase_outcome(pbn, mode, fate);
        if fate == Fate::Interrupted {
            return Err(NandError::PowerLost);
        }
        self.account(
            OpKind::Erase,
            purpose,
            u64::from(pbn.0),
            die,
            at_ns,
            p,
            slot,
            &result,
        );
        result.map(|()| Done {
            start_ns: slot.start_ns,
            done_ns: slot.done_ns,
        })
    }

    fn check_erase(&self, pbn: Pbn, mode: CellMode) -> Result<(), NandError> {
        if pbn.0 >= self.geo.blocks() {
            return Err(NandError::BlockOutOfRange(pbn, self.geo.blocks()));
        }
        if !self.cfg.allows_mode(mode) {
            return Err(NandError::ModeUnsupported {
                pbn,
                mode,
                native: self.cfg.cell.native,
            });
        }
        match self.blocks[pbn.0 as usize].state {
            BlockState::FactoryBad | BlockState::GrownBad => Err(NandError::BadBlock(pbn)),
            BlockState::Good | BlockState::NeedsErase => Ok(()),
        }
    }

    fn erase_outcome(&mut self, pbn: Pbn, mode: CellMode, fate: Fate) -> Result<(), NandError> {
        let step = self.wear_step[mode_index(mode)];
        let m = self.blocks[pbn.0 as usize];
        if fate == Fate::Completes && m.wear_ppt >= WEAR_LIFE {
            // Invariant 5: the rated cycles are used up; this erase fails.
            self.blocks[pbn.0 as usize].state = BlockState::GrownBad;
            self.save_block(pbn);
            self.stats.failed_erases += 1;
            return Err(NandError::WornOut {
                pbn,
                erase_count: m.erase_count,
                endurance: self.cfg.endurance_cycles(mode),
            });
        }
        let first = self.geo.first_page(pbn).0 as usize;
        let n = self.geo.pages_per_block as usize;
        for i in first..first + n {
            if self.pages[i] != 0 {
                self.set_page_state(Ppn(i as u64), 0);
            }
        }
        let b = &mut self.blocks[pbn.0 as usize];
        b.erase_count += 1;
        b.wear_ppt = b.wear_ppt.saturating_add(step);
        b.mode = mode;
        b.next_page = 0;
        b.programmed_at_ns = 0;
        b.state = match fate {
            Fate::Completes => BlockState::Good,
            Fate::Interrupted => BlockState::NeedsErase,
            Fate::MediaFail => BlockState::GrownBad,
        };
        self.save_block(pbn);
        match fate {
            Fate::Completes => Ok(()),
            Fate::Interrupted => {
                self.lose_power();
                Err(NandError::PowerLost)
            }
            Fate::MediaFail => {
                self.stats.failed_erases += 1;
                Err(NandError::EraseFailed(pbn))
            }
        }
    }

    // ----- multi-plane operations ------------------------------------------------------------

    /// Checks a multi-plane group: 1..=planes blocks of one die on distinct planes.
    fn check_planes(&self, pbns: impl Iterator<Item = Pbn> + Clone) -> Result<DieId, NandError> {
        let count = pbns.clone().count();
        if count == 0 || count > self.geo.planes_per_die as usize {
            return Err(NandError::MultiPlane(format!(
                "{count} pages for a die of {} planes",
                self.geo.planes_per_die
            )));
        }
        let mut planes_seen = 0u64;
        let mut die = None;
        for pbn in pbns {
            if pbn.0 >= self.geo.blocks() {
                return Err(NandError::BlockOutOfRange(pbn, self.geo.blocks()));
            }
            let d = self.geo.die_of_block(pbn);
            if *die.get_or_insert(d) != d {
                return Err(NandError::MultiPlane("all pages must be on one die".into()));
            }
            let plane = self.geo.plane_of_block(pbn);
            if planes_seen & (1 << plane) != 0 {
                return Err(NandError::MultiPlane(format!("plane {plane} named twice")));
            }
            planes_seen |= 1 << plane;
        }
        die.ok_or_else(|| NandError::MultiPlane("no pages".into()))
    }

    /// Programs one full page on each of several planes of one die at once: one array time.
    pub fn program_multi_plane(
        &mut self,
        at_ns: Nanos,
        pages: &[(Ppn, &[u8], &[u8])],
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        self.check_powered()?;
        for &(ppn, _, _) in pages {
            self.locate(ppn)?;
        }
        let die = self.check_planes(pages.iter().map(|&(p, _, _)| self.geo.block_of(p)))?;
        let page_index = self.geo.page_in_block(pages[0].0);
        let mut array_ns = 0;
        let mut bus_ns = 0;
        let mut cmd_ns = 0;
        let mut paired = false;
        for &(ppn, data, oob) in pages {
            let (pbn, page) = self.locate(ppn)?;
            if page != page_index {
                return Err(NandError::MultiPlane(
                    "all pages must have the same page index".into(),
                ));
            }
            Self::check_len("data", data.len(), self.geo.page_size_bytes as usize)?;
            if !oob.is_empty() {
                Self::check_len("oob", oob.len(), self.geo.oob_size_bytes as usize)?;
            }
            self.check_program(ppn, pbn, page, None)?;
            // Before `begin` changes the device's state (store.rs, `Store::reserve`).
            self.store.reserve(ppn)?;
            let mode = self.blocks[pbn.0 as usize].mode;
            let ty = self.cfg.page_type(mode, page);
            paired |= matches!(ty, PageType::Upper | PageType::Middle);
            array_ns = array_ns.max(self.times.program(mode, ty));
            cmd_ns += self.times.cmd_ns;
            bus_ns += self.times.bus_ns(data.len() + oob.len());
        }
        let p = Phases {
            cmd_ns,
            bus_in_ns: bus_ns,
            array_ns,
            bus_out_ns: 0,
        };
        let (slot, fate) = self.begin_op(at_ns, die, p, paired)?;
        if fate == Fate::Interrupted {
            for &(ppn, _, _) in pages {
                let (pbn, page) = self.locate(ppn)?;
                self.tear(ppn, pbn, page, slot.start_ns);
            }
            self.lose_power();
            return Err(NandError::PowerLost);
        }
        let mut result = Ok(());
        for (i, &(ppn, data, oob)) in pages.iter().enumerate() {
            let (pbn, page) = self.locate(ppn)?;
            if fate == Fate::MediaFail && i == 0 {
                self.tear(ppn, pbn, page, slot.start_ns);
                self.blocks[pbn.0 as usize].state = BlockState::GrownBad;
                self.save_block(pbn);
                self.stats.failed_programs += 1;
                result = Err(NandError::ProgramFailed(ppn));
                continue;
            }
            self.store.program(ppn, true, 0, data, 0, oob);
            self.set_page_state(ppn, 1);
            self.note_programmed(pbn, page, slot.done_ns);
            self.stats.bytes_programmed += (data.len() + oob.len()) as u64;
        }
        for &(ppn, _, _) in pages {
            self.account(
                OpKind::Program,
                purpose,
                ppn.0,
                die,
                at_ns,
                p,
                slot,
                &result,
            );
        }
        result.map(|()| Done {
            start_ns: slot.start_ns,
            done_ns: slot.done_ns,
        })
    }

    /// Reads one page on each of several planes of one die at once: one array time, then the
    /// transfers one after the other. Buffers as for `read`; every page must deliver for `Ok`.
    pub fn read_multi_plane(
        &mut self,
        at_ns: Nanos,
        pages: &mut [(Ppn, &mut [u8], &mut [u8])],
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        self.check_powered()?;
        for (ppn, _, _) in pages.iter() {
            self.locate(*ppn)?;
        }
        let die = self.check_planes(pages.iter().map(|(p, _, _)| self.geo.block_of(*p)))?;
        let (mut array_ns, mut bus_out, mut bus_in) = (0, 0, 0);
        for (ppn, data, oob) in pages.iter() {
            let (pbn, page) = self.locate(*ppn)?;
            Self::check_len("data", data.len(), self.geo.page_size_bytes as usize)?;
            if !oob.is_empty() {
                Self::check_len("oob", oob.len(), self.geo.oob_size_bytes as usize)?;
            }
            self.store.prefetch(*ppn, 0, data.len()); // as in `read_range`
            let m = *self.check_in_mode(pbn, page)?;
            array_ns = array_ns.max(self.times.read(m.mode, self.cfg.page_type(m.mode, page)));
            bus_in += self.times.cmd_ns;
            bus_out += self.times.bus_ns(data.len() + oob.len());
        }
        let p = Phases {
            cmd_ns: bus_in,
            bus_in_ns: 0,
            array_ns,
            bus_out_ns: bus_out,
        };
        let (slot, fate) = self.begin(at_ns, die, p)?;
        if fate == Fate::Interrupted {
            self.lose_power();
            return Err(NandError::PowerLost);
        }
        let mut result = Ok(());
        for (i, (ppn, data, oob)) in pages.iter_mut().enumerate() {
            let (pbn, page) = self.locate(*ppn)?;
            let m = self.blocks[pbn.0 as usize];
            let r = if fate == Fate::MediaFail && i == 0 {
                self.stats.uncorrectable_reads += 1;
                Err(NandError::Uncorrectable {
                    ppn: *ppn,
                    bit_errors: self.cfg.reliability.ecc_correctable_bits + 1,
                    correctable: self.cfg.reliability.ecc_correctable_bits,
                })
            } else {
                self.deliver(at_ns, *ppn, (pbn, page, &m), (0, data), (0, oob))
            };
            self.account(OpKind::Read, purpose, ppn.0, die, at_ns, p, slot, &r);
            if result.is_ok() {
                result = r;
            }
        }
        result.map(|()| Done {
            start_ns: slot.start_ns,
            done_ns: slot.done_ns,
        })
    }

    /// Erases one block on each of several planes of one die at once.
    pub fn erase_multi_plane(
        &mut self,
        at_ns: Nanos,
        pbns: &[Pbn],
        mode: CellMode,
        purpose: Purpose,
    ) -> Result<Done, NandError> {
        self.check_powered()?;
        let die = self.check_planes(pbns.iter().copied())?;
        for &pbn in pbns {
            self.check_erase(pbn, mode)?;
        }
        let p = Phases {
            cmd_ns: self.times.cmd_ns * pbns.len() as u64,
            bus_in_ns: 0,
            array_ns: self.times.erase(mode),
            bus_out_ns: 0,
        };
        let (slot, fate) = self.begin(at_ns, die, p)?;
        let mut result = Ok(());
        for (i, &pbn) in pbns.iter().enumerate() {
            let f = if fate == Fate::MediaFail && i > 0 {
                Fate::Completes
            } else {
                fate
            };
            let r = self.erase_outcome_quiet(pbn, mode, f);
            if fate != Fate::Interrupted {
                self.account(
                    OpKind::Erase,
                    purpose,
                    u64::from(pbn.0),
                    die,
                    at_ns,
                    p,
                    slot,
                    &r,
                );
            }
            if result.is_ok() {
                result = r;
            }
        }
        if fate == Fate::Interrupted {
            self.lose_power();
            return Err(NandError::PowerLost);
        }
        result.map(|()| Done {
            start_ns: slot.start_ns,
            done_ns: slot.done_ns,
        })
    }

    /// `erase_outcome` without cutting power (the group cuts it once).
    fn erase_outcome_quiet(
        &mut self,
        pbn: Pbn,
        mode: CellMode,
        fate: Fate,
    ) -> Result<(), NandError> {
        if fate == Fate::Interrupted {
            let first = self.geo.first_page(pbn).0;
            for i in first..first + u64::from(self.geo.pages_per_block) {
                if self.pages[i as usize] != 0 {
                    self.set_page_state(Ppn(i), 0);
                }
            }
            let b = &mut self.blocks[pbn.0 as usize];
            b.erase_count += 1;
            b.wear_ppt = b.wear_ppt.saturating_add(self.wear_step[mode_index(mode)]);
            b.mode = mode;
            b.next_page = 0;
            b.state = BlockState::NeedsErase;
            self.save_block(pbn);
            return Err(NandError::PowerLost);
        }
        self.erase_outcome(pbn, mode, fate)
    }

    // ----- reporting -------------------------------------------------------------------------

    /// Every statistic of the run so far.
    pub fn report(&self) -> StatsReport {
        let horizon = self.timeline.horizon_ns();
        let busy: u64 = self.timeline.die_busy_ns().iter().sum();
        let dies = u64::from(self.geo.dies());
        let idle_ns = (dies * horizon).saturating_sub(busy) as f64;
        let e = &self.cfg.energy;
        let idle_joules = e.vcc_volts * e.standby_ua * 1e-6 * idle_ns * 1e-9;
        let (mut factory, mut grown) = (0, 0);
        let (mut min, mut max, mut sum) = (u32::MAX, 0u32, 0u64);
        for b in &self.blocks {
            match b.state {
                BlockState::FactoryBad => factory += 1,
                BlockState::GrownBad => grown += 1,
                _ => {}
            }
            min = min.min(b.erase_count);
            max = max.max(b.erase_count);
            sum += u64::from(b.erase_count);
        }
        let buckets = 16u32;
        let width = ((max - min) / buckets + 1).max(1);
        let mut histogram = vec![0u64; buckets as usize];
        for b in &self.blocks {
            histogram[(((b.erase_count - min) / width) as usize).min(buckets as usize - 1)] += 1;
        }
        StatsReport {
            device: self.cfg.name.clone(),
            virtual_ns: horizon,
            flash: self.stats.flash_counts(),
            by_purpose: Purpose::ALL
                .iter()
                .map(|&p| PurposeCounts {
                    purpose: p,
                    counts: self.stats.flash_counts_for(p),
                })
                .filter(|p| p.counts != Default::default())
                .collect(),
            by_page_type: self.stats.page_type_counts(),
            bytes_read: self.stats.bytes_read,
            bytes_programmed: self.stats.bytes_programmed,
            ecc: EccReport {
                corrected_bits: self.stats.corrected_bits,
                corrected_reads: self.stats.corrected_reads,
                uncorrectable_reads: self.stats.uncorrectable_reads,
            },
            failed_programs: self.stats.failed_programs,
            torn_appends: self.stats.torn_appends,
            failed_erases: self.stats.failed_erases,
            power_losses: self.stats.power_losses,
            bad_blocks: BadBlockReport { factory, grown },
            erase_count: EraseCountReport {
                min,
                max,
                mean: sum as f64 / self.blocks.len() as f64,
                bucket_width: width,
                histogram,
            },
            latency_us: LatencyReport {
                read: LatencySummary::from_ns_histogram(self.stats.latency(OpKind::Read)),
                program: LatencySummary::from_ns_histogram(self.stats.latency(OpKind::Program)),
                partial_program: LatencySummary::from_ns_histogram(
                    self.stats.latency(OpKind::PartialProgram),
                ),
                erase: LatencySummary::from_ns_histogram(self.stats.latency(OpKind::Erase)),
            },
            energy: EnergyReport {
                active_joules: self.stats.active_joules,
                idle_joules,
                total_joules: self.stats.active_joules + idle_joules,
            },
            die_utilization: if horizon == 0 {
                0.0
            } else {
                busy as f64 / (dies * horizon) as f64
            },
        }
    }
}

impl Drop for Nand {
    fn drop(&mut self) {
        // Best effort: an image keeps its clock across a restart. Errors have nowhere to go here.
        if self.store.kind() == "image" {
            let _ = self.flush();
        }
    }
}

fn check_range(
    area: &'static str,
    offset: usize,
    len: usize,
    size: usize,
) -> Result<(), NandError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(NandError::RangeOutOfArea {
            area,
            offset,
            end: offset.saturating_add(len),
            size,
        }),
    }
}

/// Index of the first byte where `new` has a bit set that `old` has cleared.
fn first_set_over_cleared(old: &[u8], new: &[u8]) -> Option<usize> {
    old.iter().zip(new).position(|(&o, &n)| n & !o != 0)
}

/// The pattern a metadata-only store returns for programmed data: the page number, repeated.
fn fill_pattern(data: &mut [u8], ppn: Ppn) {
    let word = ppn.0.to_le_bytes();
    // Seed one cache line with plain stores, then double it with copy_within: libc's memmove is
    // vectorised for the machine it runs on, a per-word loop is not (this is the whole cost of a
    // metadata-only read).
    let seed = data.len().min(64);
    for (i, b) in data[..seed].iter_mut().enumerate() {
        *b = word[i % 8];
    }
    let mut filled = seed;
    while filled < data.len() {
        let n = filled.min(data.len() - filled);
        data.copy_within(0..n, filled);
        filled += n;
    }
}

fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Poisson sample by inversion; exact and cheap for the small means bit errors have.
fn poisson_small(rng: &mut Xoshiro256PlusPlus, lambda: f64) -> u32 {
    let u = unit_f64(rng.next_u64());
    // Healthy flash has tiny means, and exp() is the costliest step of a read. The series
    // 1 - l + l^2/2 - l^3/6, cut after a negative term, is a lower bound of e^-l, so `u` below it
    // is certainly below P(0) and the answer 0 is exact; otherwise the full inversion decides.
    // Results are identical to always inverting.
    if lambda < 1e-3 && u < 1.0 - lambda + lambda * lambda / 2.0 - lambda * lambda * lambda / 6.0 {
        return 0;
    }
    let mut p = (-lambda).exp();
    let mut cdf = p;
    let mut k = 0u32;
    while u > cdf && k < 10_000 {
        k += 1;
        p *= lambda / f64::from(k);
        cdf += p;
    }
    k
}

fn standard_normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
    let u1 = unit_f64(rng.next_u64()).max(f64::MIN_POSITIVE);
    let u2 = unit_f64(rng.next_u64());
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn error_name(e: &NandError) -> &'static str {
    match e {
        NandError::Uncorrectable { .. } => "uncorrectable",
        NandError::Torn(_) => "torn",
        NandError::NeedsErase(_) => "needs_erase",
        NandError::WornOut { .. } => "worn_out",
        NandError::ProgramFailed(_) => "program_failed",
        NandError::EraseFailed(_) => "erase_failed",
        NandError::PowerLost => "power_lost",
        _ => "error",
    }
}
