//! The range-scan state machine every protocol shares: phantom-bucket batches, each *covered*
//! first (versions recorded or holds taken by the protocol) and then read from the index in chunks
//! of at most 256 entries, in key order, until the caller has what it wants or the range ends.
//!
//! The protocol drives a [`RangeCursor`] in a loop and acts on each [`Step`] inline, so its
//! per-entry work can use the worker's state freely.

use crate::error::{Abort, AbortReason};
use crate::storage::index::{IndexGuard, ScanBuf};
use crate::storage::phantom::Batch;
use crate::storage::row_store::RecordHeader;
use crate::storage::Table;

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
