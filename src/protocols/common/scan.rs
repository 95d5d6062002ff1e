//! The range-scan state machine every protocol shares: phantom-bucket batches, each *covered*
//! first (versions recorded or holds taken by the protocol) and then read from the index in chunks
//! of at most 256 entries, in key order, until the caller has what it wants or the range ends.
//!
//! [`scan`] is the one scan loop: it drives a [`RangeCursor`] and calls the protocol's
//! [`ScanSteps`] at each step: `cover` a batch's buckets (record their versions, take holds, or
//! nothing), then `entry` for each index entry (validate or lock the record and read it). It
//! counts what the caller was handed, stops at the limit or when the caller breaks, and records
//! the range that was covered in the history. Protocols implement only their two steps, and the
//! loop is monomorphised into each of them (no `dyn` call per entry).

use crate::engine::context::WorkerCtx;
use crate::error::{Abort, AbortReason};
use crate::storage::index::{IndexGuard, ScanBuf};
use crate::storage::phantom::Batch;
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowId, Storage, Table, TableId};
use std::ops::ControlFlow;

/// A protocol's part of a range scan (see [`scan`]).
pub trait ScanSteps<'db, R: RecordHeader> {
    /// The worker's context (its scan buffer, index guard and history recorder).
    fn ctx(&mut self) -> &mut WorkerCtx<'db, R>;

    /// Protects the buckets of `batch` before its entries are read from the index.
    fn cover(&mut self, tbl: &'db Table<R>, t: TableId, batch: &Batch) -> Result<(), Abort>;

    /// The scan read `[lo, hi]` of `t` to the end (the range the history records): a protocol
    /// that checks its scans again at commit keeps it.
    fn covered(&mut self, _t: TableId, _lo: u64, _hi: u64) {}

    /// Reads the entry `key` at `rid` as the transaction sees it: `Some(row)` when it is present
    /// for this transaction (the row is handed to the caller and counts toward the limit),
    /// `None` when it is absent for it.
    fn entry(
        &mut self,
        tbl: &'db Table<R>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort>;

    /// The smallest key of `t` in `[from, hi]` that this transaction inserted and has not put in
    /// the index yet (a protocol that defers index updates to validation); the scan merges
    /// these keys with the index's, in key order, and reads them through
    /// [`ScanSteps::unindexed_entry`]. Where the index holds the same key (another
    /// transaction's record), the transaction's own row is the one it sees.
    #[inline(always)]
    fn next_unindexed(&mut self, _t: TableId, _from: u64, _hi: u64) -> Option<u64> {
        None
    }

    /// The row of a key [`ScanSteps::next_unindexed`] returned, as `entry` reads a row: `None`
    /// when the transaction deleted it again.
    fn unindexed_entry(&mut self, _t: TableId, _key: u64) -> Option<&[u8]> {
        None
    }
}

/// Scans `[lo, hi]` of table `t` in key order, handing at most `limit` present rows to `f`
/// until it breaks; returns how many it was handed.
#[inline]
pub fn scan<'db, R: RecordHeader, S: ScanSteps<'db, R>>(
    steps: &mut S,
    storage: &'db Storage<R>,
    t: TableId,
    lo: u64,
    hi: u64,
    limit: usize,
    mut f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> Result<usize, Abort> {
    let tbl = super::table(storage, t)?;
    if limit == 0 {
        return Ok(0);
    }
    let mut buf = std::mem::take(&mut steps.ctx().scan_buf);
    let mut cursor = RangeCursor::new(tbl, lo, hi);
    let mut n = 0;
    // The last key the scan covered: `hi`, or where the limit or the caller stopped it.
    let mut stop = hi;
    // The transaction's next own key not in the index yet, handed out before the index's
    // entries above it (its batch is covered by then: entries come batch by batch, each
    // covered first) or once the index has no more.
    let mut own = if lo <= hi { steps.next_unindexed(t, lo, hi) } else { None };
    let result = 'outer: loop {
        let step = cursor.next(tbl, limit - n, &mut buf, &steps.ctx().guard);
        match step {
            Err(a) => break Err(a),
            Ok(None) => {
                if let ControlFlow::Break(d) =
                    hand_own(steps, t, hi, hi, &mut own, &mut n, limit, &mut f)
                {
                    stop = d;
                }
                break Ok(n);
            }
            Ok(Some(Step::Cover(batch))) => {
                if let Err(a) = steps.cover(tbl, t, &batch) {
                    break Err(a);
                }
            }
            Ok(Some(Step::Entries)) => {
                for (k, rid) in buf.entries() {
                    match hand_own(steps, t, hi, k, &mut own, &mut n, limit, &mut f) {
                        ControlFlow::Break(d) => {
                            stop = d;
                            break 'outer Ok(n);
                        }
                        // The transaction's own row of `k` shadows the index's entry.
                        ControlFlow::Continue(true) => continue,
                        ControlFlow::Continue(false) => {}
                    }
                    match steps.entry(tbl, t, k, rid) {
                        Err(a) => break 'outer Err(a),
                        Ok(None) => {}
                        Ok(Some(row)) => {
                            n += 1;
                            if f(k, row).is_break() || n == limit {
                                stop = k;
                                break 'outer Ok(n);
                            }
                        }
                    }
                }
            }
        }
    };
    steps.ctx().end_scan(buf, result.is_ok(), t, lo, stop);
    if result.is_ok() {
        steps.covered(t, lo, stop);
    }
    result
}

/// Hands `f` the transaction's own unindexed keys from `own` up to `upto` in order (see
/// [`ScanSteps::next_unindexed`]), moving `own` on and counting what `f` got in `n`: `Break`
/// with the key the scan stops at (the caller broke, or the limit was reached), else
/// `Continue(true)` if `upto` itself was one of them.
#[allow(clippy::too_many_arguments)]
#[inline]
fn hand_own<'db, R: RecordHeader, S: ScanSteps<'db, R>>(
    steps: &mut S,
    t: TableId,
    hi: u64,
    upto: u64,
    own: &mut Option<u64>,
    n: &mut usize,
    limit: usize,
    f: &mut impl FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> ControlFlow<u64, bool> {
    let mut at_upto = false;
    while let Some(d) = own.filter(|&d| d <= upto) {
        at_upto |= d == upto;
        *own = d.checked_add(1).and_then(|next| steps.next_unindexed(t, next, hi));
        if let Some(row) = steps.unindexed_entry(t, d) {
            *n += 1;
            if f(d, row).is_break() || *n == limit {
                return ControlFlow::Break(d);
            }
        }
    }
    ControlFlow::Continue(at_upto)
}

/// What the caller does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Cover the bucket words of this batch (`RangeBuckets::batch_slots`) before its entries
    /// are read.
    Cover(Batch),
    /// Process the entries now in the scan buffer (key order, within the range).
    Entries,
}

/// Position of a range scan. See the module docs.
#[derive(Debug)]
pub struct RangeCursor {
    batch: Batch,
    hi: u64,
    from: u64,
    covered: bool,
    batch_done: bool,
    done: bool,
}

/// Largest number of index entries read per call.
const CHUNK: usize = 256;

impl RangeCursor {
    /// A scan of `[lo, hi]` over `tbl` (nothing to do when `lo > hi`).
    pub fn new<R: RecordHeader>(tbl: &Table<R>, lo: u64, hi: u64) -> Self {
        let empty = lo > hi;
        let batch = tbl.buckets.first_batch(lo, if empty { lo } else { hi });
        RangeCursor { batch, hi, from: lo, covered: false, batch_done: false, done: empty }
    }

    /// The next step, with `want` (> 0) entries still wanted; `None` when the range is exhausted.
    /// A hash-indexed table cannot scan: `Unsupported`.
    pub fn next<R: RecordHeader>(
        &mut self,
        tbl: &Table<R>,
        want: usize,
        buf: &mut ScanBuf,
        guard: &IndexGuard,
    ) -> Result<Option<Step>, Abort> {
        loop {
            if self.done {
                return Ok(None);
            }
            if !self.covered {
                self.covered = true;
                return Ok(Some(Step::Cover(self.batch)));
            }
            if !self.batch_done {
                let req = want.clamp(1, CHUNK);
                if !tbl.index.scan(self.from, self.batch.hi, req, buf, guard) {
                    return Err(Abort::new(AbortReason::Unsupported));
                }
                if let Some((last, _)) = buf.entries().last() {
                    if buf.len() < req || last >= self.batch.hi {
                        self.batch_done = true;
                    } else {
                        self.from = last + 1;
                    }
                    return Ok(Some(Step::Entries));
                }
                self.batch_done = true;
            }
            match tbl.buckets.next_batch(&self.batch, self.hi) {
                Some(b) => {
                    self.batch = b;
                    self.from = b.lo;
                    self.covered = false;
                    self.batch_done = false;
                }
                None => self.done = true,
            }
        }
    }
}
