//! What protocols of every family use: table lookup with the standard aborts, a value arena, a
//! row-sized scratch buffer, the projected update step, commit stamps made of an epoch and a
//! sequence, and the one range-scan loop ([`scan`]).
//!
//! The families' own substrates sit beside this module: [`super::occ`] (single-version
//! optimistic: Silo, TicToc, MOCC, IC3), [`super::inplace`] (single-version, writes in place
//! with an undo log: nocc, 2PL) and [`super::mv`] (multi-version: SI, ERMIA's SSN and SSI,
//! Hekaton). Cicada and BOHM keep their own version layouts (see their module docs).

pub mod scan;

use crate::error::{Abort, AbortReason};
use crate::storage::projection::{Columns, Projection};
use crate::storage::row_store::RecordHeader;
use crate::storage::{Storage, Table, TableId};

/// Looks up table `t`, or aborts with `Unsupported` (a procedure naming a table that does not
/// exist is a bug the driver reports).
#[inline]
pub fn table<R: RecordHeader>(storage: &Storage<R>, t: TableId) -> Result<&Table<R>, Abort> {
    storage.try_table(t).ok_or(Abort::new(AbortReason::Unsupported))
}

/// Aborts with `Unsupported` unless `value` is exactly one row of `table`.
#[inline]
pub fn check_len<R: RecordHeader>(table: &Table<R>, value: &[u8]) -> Result<(), Abort> {
    if value.len() == table.spec.row_size {
        Ok(())
    } else {
        Err(Abort::new(AbortReason::Unsupported))
    }
}

/// A byte arena for buffered values and before-images. Cleared per transaction; keeps capacity.
#[derive(Default)]
pub struct Arena {
    /// Only grows: bytes past `len` hold what earlier transactions left, and are reused.
    bytes: Vec<u8>,
    len: usize,
}

impl Arena {
    /// Makes room for `n` more bytes; returns their offset.
    #[inline]
    fn grow(&mut self, n: usize) -> usize {
        let off = self.len;
        self.len += n;
        if self.len > self.bytes.len() {
            self.bytes.resize(self.len, 0);
        }
        off
    }
    /// Appends `value`; returns its offset.
    #[inline]
    pub fn push(&mut self, value: &[u8]) -> u32 {
        let off = self.grow(value.len());
        self.bytes[off..off + value.len()].copy_from_slice(value);
        off as u32
    }
    /// Appends `len` bytes holding whatever an earlier transaction left there (zeroes the first
    /// time); returns the offset. For buffers the caller fills before it reads them, such as a
    /// projected copy whose undeclared columns nothing reads: no zeroing on the hot path.
    #[inline]
    pub fn push_reused(&mut self, len: usize) -> u32 {
        self.grow(len) as u32
    }
    /// The bytes at `off..off+len`.
    #[inline]
    pub fn get(&self, off: u32, len: usize) -> &[u8] {
        debug_assert!(off as usize + len <= self.len);
        &self.bytes[off as usize..off as usize + len]
    }
    /// The bytes at `off..off+len`, mutable.
    #[inline]
    pub fn get_mut(&mut self, off: u32, len: usize) -> &mut [u8] {
        debug_assert!(off as usize + len <= self.len);
        &mut self.bytes[off as usize..off as usize + len]
    }
    /// Empties the arena (keeping its memory).
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// A thread-local row-sized scratch buffer.
#[derive(Default)]
pub struct Scratch {
    buf: Vec<u8>,
}

impl Scratch {
    /// A buffer of `len` bytes (reusing capacity; contents are whatever was left in it).
    #[inline]
    pub fn get(&mut self, len: usize) -> &mut [u8] {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        &mut self.buf[..len]
    }
}

/// Runs an update's closure `f` on `buf`, a row buffer holding the columns it sees, of which
/// the caller writes back only `writes`. When the table checks projections (tests, `txlab
/// check`, `run --check-templates`), `f` runs on a checked copy: a byte changed outside `writes`
/// would be silently lost, so the attempt aborts with `TemplateViolation` (a procedure bug).
#[inline(always)]
pub fn apply_update<T>(
    p: &Projection,
    writes: Columns,
    buf: &mut [u8],
    f: impl FnOnce(&mut [u8]) -> T,
) -> Result<T, Abort> {
    if !p.checks_writes() {
        return Ok(f(buf));
    }
    // Test mode only: the copy allocates.
    let before = buf.to_vec();
    let out = f(buf);
    if p.changed_outside(&before, buf, writes) {
        return Err(Abort::new(AbortReason::TemplateViolation));
    }
    Ok(out)
}

/// The commit stamp Silo's rule gives a transaction that saw stamps up to `max` (its writes'
/// previous stamps and its worker's last stamp) in storage epoch `epoch`: above all of them, and
/// at least `epoch << 32` (the epoch in the high bits, as in a TID), so that stamps grow across
/// the incarnations of a key (see `crate::durability`).
#[inline]
pub fn stamp_after(max: u64, epoch: u64) -> u64 {
    (max + 1).max(epoch << 32)
}

/// The storage epoch in an in-place protocol's commit stamp ([`stamp_after`]).
#[inline]
pub fn stamp_epoch(stamp: u64) -> u64 {
    stamp >> 32
}

/// Writes the [`Worker`](crate::engine::Worker) methods that only forward, inside an
/// `impl Worker`, so that no worker spells them out again:
///
/// - `forward!(ctx: scan prefetch prefetch_many log_epoch)`: to the
///   [`WorkerCtx`](crate::engine::context::WorkerCtx) the worker embeds as `self.ctx` (`scan`
///   runs the one scan loop, [`scan::scan`], with the worker's own [`scan::ScanSteps`]);
/// - `forward!(inner: prefetch prefetch_many log_epoch)`: to the worker it wraps as
///   `self.inner`.
///
/// A worker whose method does more than forward (a second level of prefetching, a scan of
/// its own index) writes that method by hand and leaves it out of the list.
macro_rules! forward {
    (ctx: $($m:ident)*) => { $( $crate::protocols::common::forward!(@ctx $m); )* };
    (inner: $($m:ident)*) => { $( $crate::protocols::common::forward!(@inner $m); )* };
    (@ctx scan) => {
        fn scan(
            &mut self,
            t: $crate::storage::TableId,
            lo: u64,
            hi: u64,
            limit: usize,
            f: impl FnMut(u64, &[u8]) -> std::ops::ControlFlow<()>,
        ) -> Result<usize, $crate::error::Abort> {
            let storage = self.ctx.storage;
            $crate::protocols::common::scan::scan(self, storage, t, lo, hi, limit, f)
        }
    };
    (@ctx prefetch) => {
        #[inline]
        fn prefetch(&mut self, t: $crate::storage::TableId, key: u64) {
            self.ctx.prefetch(t, key);
        }
    };
    (@ctx prefetch_many) => {
        #[inline]
        fn prefetch_many(
            &mut self,
            keys: &[($crate::storage::TableId, u64, $crate::storage::projection::Columns)],
        ) {
            self.ctx.prefetch_many(keys);
        }
    };
    (@ctx log_epoch) => {
        #[inline]
        fn log_epoch(&self) -> u64 {
            self.ctx.log_epoch
        }
    };
    (@inner prefetch) => {
        #[inline]
        fn prefetch(&mut self, t: $crate::storage::TableId, key: u64) {
            self.inner.prefetch(t, key);
        }
    };
    (@inner prefetch_many) => {
        #[inline]
        fn prefetch_many(
            &mut self,
            keys: &[($crate::storage::TableId, u64, $crate::storage::projection::Columns)],
        ) {
            self.inner.prefetch_many(keys);
        }
    };
    (@inner log_epoch) => {
        #[inline]
        fn log_epoch(&self) -> u64 {
            self.inner.log_epoch()
        }
    };
}
pub(crate) use forward;
