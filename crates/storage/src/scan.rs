//! Sequential table scans through the buffer pool, with read-ahead.
//!
//! A scan follows the heap chain (heap.rs) and hands every live record to the caller's closure
//! in place (no copy, no allocation per row). Read-ahead keeps up to `read_ahead_pages` reads in
//! flight ahead of the scan, all submitted at the scan's current virtual time, so that the flash
//! below serves them on its dies and channels in parallel (the device's timing model overlaps
//! reads on different dies) while the scan's CPU works through the pages already in.
//!
//! Which pages to read ahead: the chain's next page is known only once a page is in, so the scan
//! reads ahead the pages that follow the current one in page-id order, and checks each guess
//! when it gets there: a bulk-loaded heap (bulk.rs) takes consecutive page ids, so the guesses
//! hit; a chain that jumps (pages allocated among other tables' pages) costs the wasted reads
//! of one window and restarts read-ahead at the jump. A guessed page that belongs to another
//! object stops read-ahead until the chain moves past it.
//!
//! Time: a page read ahead is ready at its read's completion time; the scan waits for it (moves
//! the engine's clock up to that time) only when it reaches the page. Each row costs
//! `cpu_ns_per_row` of virtual CPU time, plus what the caller's closure says its work on the row
//! (filter, hash, aggregate) cost; a page's CPU time is charged once its rows are done.
//!
//! Buffer counters: a read-ahead read is a miss and the scan's own fix of the page a hit, so a
//! scan that reads ahead every page shows about half hits.
//!
//! Invariants:
//! 1. The scan visits exactly the live records of the chain, in chain order, whatever the
//!    read-ahead depth (depth 0 reads each page when the scan reaches it).
//! 2. Read-ahead pins nothing across calls and keeps at most a quarter of the pool in flight,
//!    so it cannot starve the pool.
//! 3. The clock never goes back: the scan moves it to `max(now, ready)` of each page.

use std::collections::VecDeque;

use crate::access::PageAccess;
use crate::buffer::Fix;
use crate::error::{Error, Result};
use crate::page::{self, PageType};
use crate::slotted;
use crate::{Nanos, ObjectId, PageId};

/// Options of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanOptions {
    /// Pages read ahead of the scan (0: none).
    pub read_ahead_pages: usize,
    /// Virtual CPU time per row handed to the closure.
    pub cpu_ns_per_row: u64,
}

/// What a scan did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScanStats {
    pub pages: u64,
    pub rows: u64,
    /// Pages that were read ahead and then used by the scan.
    pub read_ahead_used: u64,
    /// Pages read ahead that the chain did not visit next (a wrong guess).
    pub read_ahead_wasted: u64,
    /// Virtual CPU time charged for the rows: `cpu_ns_per_row` each plus the caller's work.
    pub cpu_ns: u64,
}

/// Calls `f` on every live record of the heap chain from `head` of `table`, in chain order
/// (invariant 1); `f` returns the virtual CPU time its own work on the row took. The engine's
/// `scan_rows` (engine/scan.rs) finds the chain's head in the catalog and runs this.
pub(crate) fn rows<A: PageAccess + ?Sized>(
    a: &mut A,
    table: ObjectId,
    head: PageId,
    opts: ScanOptions,
    mut f: impl FnMut(&[u8]) -> u64,
) -> Result<ScanStats> {
    let depth = opts.read_ahead_pages.min(a.pool().capacity() / 4);
    let db_pages = a.db_pages();
    let mut st = ScanStats::default();
    // Pages read ahead, in page-id order, with their ready times.
    let mut window: VecDeque<(PageId, Nanos)> = VecDeque::with_capacity(depth);
    // The next page id to read ahead; 0: read-ahead stopped.
    let mut guess: PageId = 0;
    let mut pid = head;
    while pid != 0 {
        st.pages += 1;
        if st.pages > db_pages {
            return Err(Error::Corrupt {
                pid,
                why: "heap chain has a cycle".into(),
            });
        }
        // Drop wrong guesses before this page; wait for this page if it was read ahead.
        while window.front().is_some_and(|&(p, _)| p != pid) {
            window.pop_front();
            st.read_ahead_wasted += 1;
        }
        if let Some((_, ready)) = window.pop_front() {
            st.read_ahead_used += 1;
            let now = a.now().max(ready);
            a.set_now(now);
        } else if depth > 0 {
            // Not read ahead (start, or the chain jumped): restart read-ahead after it.
            guess = pid + 1;
        }
        // Read ahead from the current time, before working on this page.
        while depth > 0 && guess != 0 && window.len() < depth && u64::from(guess) < db_pages {
            let (fr, ready) = a.fix_ahead(guess)?;
            let p = a.pool().page(fr);
            let ours = page::page_type(p) == PageType::Heap && page::object(p) == table;
            a.pool_mut().unfix(fr);
            if !ours {
                guess = 0;
                break;
            }
            window.push_back((guess, ready));
            guess += 1;
        }
        let fr = a.fix(pid, Fix::Read)?;
        let p = a.pool().page(fr);
        if page::page_type(p) != PageType::Heap || page::object(p) != table {
            a.pool_mut().unfix(fr);
            return Err(Error::Corrupt {
                pid,
                why: format!("page on the heap chain of table {table} is not its heap page"),
            });
        }
        let (mut rows, mut work_ns) = (0u64, 0u64);
        for s in 0..slotted::nslots(p) {
            if let Some(r) = slotted::get(p, s) {
                work_ns += f(r);
                rows += 1;
            }
        }
        let next = page::next(p);
        a.pool_mut().unfix(fr);
        st.rows += rows;
        let cpu_ns = rows * opts.cpu_ns_per_row + work_ns;
        st.cpu_ns += cpu_ns;
        let now = a.now() + cpu_ns;
        a.set_now(now);
        pid = next;
    }
    st.read_ahead_wasted += window.len() as u64;
    Ok(st)
}
