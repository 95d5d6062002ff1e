//! The `ermia-ssi` worker: the multi-version worker (`protocols::common::mvcc`) with ERMIA's
//! serializable snapshot isolation as its certifier (see the protocol's module docs).

use super::record::SsiExt;
use crate::engine::Capabilities;
use crate::error::{Abort, AbortReason};
use crate::protocols::common::mv::{is_pending, MvCtx, Owner};
use crate::protocols::common::mvcc::{committed_overwriter, Certifier, MvWorker, ReaderBit};
use crate::storage::version::Version;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

type V = Version<SsiExt>;

/// The SSI state of one worker: the running transaction's successor stamp and what it read
/// and overwrote.
pub struct Ssi {
    bit: ReaderBit,
    /// `s1`: the smallest commit timestamp of a transaction that overwrote a version this one
    /// read and committed before it (`u64::MAX`: none).
    s1: u64,
    /// Versions read that had no committed overwriter then (their reader bit is set).
    reads: Vec<NonNull<V>>,
    /// Committed versions this transaction overwrote (their `sstamp` holds its pending stamp).
    overwrites: Vec<NonNull<V>>,
}

// SAFETY: as SSN's: the pointers name versions of the worker's database, used only on the
// worker's thread under the epoch rules of `protocols::common::mv`.
unsafe impl Send for Ssi {}

#[inline(always)]
fn version<'a>(p: NonNull<V>) -> &'a V {
    // SAFETY: a version this transaction read or overwrote; versions are freed only after the
    // epochs of every transaction that could reach them ended, and ours has not.
    unsafe { p.as_ref() }
}

#[inline(always)]
fn dangerous() -> Abort {
    Abort::new(AbortReason::DangerousStructure)
}

impl Ssi {
    /// This transaction read `v`, whose overwriter committed at `s0` before it, with the
    /// overwriter's own successor stamp `s2`: `s1` takes `s0`; a set `s2` means a transaction
    /// overwrote what the overwriter read and committed first, and this one, committing after
    /// both, closes the dangerous structure as its reader.
    #[inline(always)]
    fn overwritten_read(&mut self, s0: u64, s2: u64) -> Result<(), Abort> {
        self.s1 = self.s1.min(s0);
        if s2 != 0 {
            return Err(dangerous());
        }
        Ok(())
    }

    fn forget(&mut self) {
        self.reads.clear();
        self.overwrites.clear();
        self.s1 = u64::MAX;
    }
}

impl Certifier for Ssi {
    type Ext = SsiExt;
    const PHANTOMS: bool = true;
    const NAME: &'static str = super::NAME;
    const DESCRIPTION: &'static str = super::DESCRIPTION;
    const CAPS: Capabilities = super::CAPS;
    const MAX_WORKERS: (usize, &'static str) = super::MOST_WORKERS;

    fn new(slot: usize) -> Self {
        Ssi { bit: ReaderBit::new(slot), s1: u64::MAX, reads: Vec::new(), overwrites: Vec::new() }
    }

    #[inline]
    fn read(&mut self, _: &MvCtx<'_, SsiExt>, v: &V) -> Result<(), Abort> {
        // SeqCst: pairs with the overwriter's post-commit stores (`s2` before `sstamp`).
        let s0 = v.ext.sstamp.load(Ordering::SeqCst);
        if s0 != 0 && !is_pending(s0) {
            return self.overwritten_read(s0, v.ext.s2.load(Ordering::SeqCst));
        }
        if v.ext.readers.mark(self.bit) {
            self.reads.push(NonNull::from(v));
        }
        Ok(())
    }

    #[inline]
    fn overwrote(&mut self, mv: &MvCtx<'_, SsiExt>, prev: &V) -> Result<(), Abort> {
        // SeqCst: pairs with the readers' loads in `read` and `certify`.
        prev.ext.sstamp.store(mv.own(), Ordering::SeqCst);
        self.overwrites.push(NonNull::from(prev));
        Ok(())
    }

    #[inline(always)]
    fn must_certify(&self) -> bool {
        !self.reads.is_empty()
    }

    /// ERMIA's pre-commit (Algorithm 1), latch-free as SSN's: the reads' overwriters that
    /// committed before us give `s1` (and abort us as the reader of a structure whose pivot
    /// committed); with `s1` set, this transaction is a pivot whose successor committed first,
    /// and it aborts if a reader of what it overwrote is still running or committed after that
    /// successor.
    fn certify(&mut self, mv: &MvCtx<'_, SsiExt>, c: u64, rts: u64) -> Result<(), Abort> {
        let own = mv.own();
        let txns = &mv.shared.txns;
        for i in 0..self.reads.len() {
            let v = version(self.reads[i]);
            if let Some(s0) = committed_overwriter(txns, &v.ext.sstamp, own, c) {
                self.overwritten_read(s0, v.ext.s2.load(Ordering::SeqCst))?;
            }
        }
        // Observers of absences this transaction ended: the bucket clocks' `rts` is their
        // largest commit timestamp. One certifying after us may have missed our insert (the
        // clocks guarantee only that one of the two sees the other), and unlike a reader of an
        // overwritten version it finds no mark of ours to learn its successor from: we abort.
        if rts > c {
            return Err(dangerous());
        }
        if self.s1 == u64::MAX {
            return Ok(());
        }
        // Otherwise `rts` stands for their `rstamp` (an observer still running aborts itself,
        // see `mvcc`). At `s1` too: the reader may be the successor itself (a cycle of two).
        if rts >= self.s1 {
            return Err(dangerous());
        }
        for &p in &self.overwrites {
            let v = version(p);
            for slot in v.ext.readers.others(self.bit) {
                match txns.current(slot) {
                    // It may commit after our successor: the paper aborts the pivot at once
                    // (the reader keeps its work: ERMIA's "safe restart" preference).
                    Owner::Active => return Err(dangerous()),
                    Owner::Committing(cr) if cr >= self.s1 => return Err(dangerous()),
                    Owner::Committing(_) | Owner::Done => {}
                }
            }
            // After the bits: a reader publishes its `rstamp` before it clears its bit.
            if v.ext.rstamp.load(Ordering::SeqCst) >= self.s1 {
                return Err(dangerous());
            }
        }
        Ok(())
    }

    fn committed(&mut self, _: &MvCtx<'_, SsiExt>, c: u64) {
        for i in 0..self.reads.len() {
            let v = version(self.reads[i]);
            if v.ext.rstamp.load(Ordering::Relaxed) < c {
                // SeqCst: before the bit is cleared (see `certify`).
                v.ext.rstamp.fetch_max(c, Ordering::SeqCst);
            }
            v.ext.readers.clear(self.bit);
        }
        let s2 = if self.s1 == u64::MAX { 0 } else { self.s1 };
        for &p in &self.overwrites {
            let v = version(p);
            // SeqCst, `s2` first: a reader that sees the commit timestamp sees `s2` too.
            v.ext.s2.store(s2, Ordering::SeqCst);
            v.ext.sstamp.store(c, Ordering::SeqCst);
        }
        self.forget();
    }

    fn aborted(&mut self, mv: &MvCtx<'_, SsiExt>) {
        let own = mv.own();
        for &p in &self.reads {
            version(p).ext.readers.clear(self.bit);
        }
        for &p in &self.overwrites {
            // The version is the newest committed one again; only we could have marked it.
            let _ =
                version(p).ext.sstamp.compare_exchange(own, 0, Ordering::SeqCst, Ordering::Relaxed);
        }
        self.forget();
    }
}

/// An `ermia-ssi` worker.
pub type SsiWorker<'db> = MvWorker<'db, Ssi>;
