//! The `ermia-ssi` worker: the multi-version worker (`protocols::common::mvcc`) with ERMIA's
//! serializable snapshot isolation as its certifier (see the protocol's module docs).

use super::record::SsiExt;
use crate::engine::Capabilities;
use crate::error::{Abort, AbortReason};
use crate::protocols::common::mv::{is_pending, MvCtx, Owner};
use crate::protocols::common::mvcc::{Absences, Certifier, MvWorker};
use crate::protocols::common::tracking::{committed_overwriter, Tracking, TRACKED_WORKERS};
use crate::storage::version::Version;
use std::sync::atomic::Ordering;

type V = Version<SsiExt>;

/// The SSI state of one worker: the running transaction's successor stamp and what it read
/// and overwrote.
pub struct Ssi {
    /// `s1`: the smallest commit timestamp of a transaction that overwrote a version this one
    /// read and committed before it (`u64::MAX`: none).
    s1: u64,
    /// Versions read while they had no committed overwriter, and versions overwritten.
    track: Tracking<SsiExt>,
}

#[inline(always)]
fn dangerous() -> Abort {
    Abort::new(AbortReason::DangerousStructure)
}

/// The transaction read a version whose overwriter committed at `s0` before it, with the
/// overwriter's own successor stamp `s2`: `s1` takes `s0`; a set `s2` means a transaction
/// overwrote what the overwriter read and committed first, and this one, committing after both,
/// closes the dangerous structure as its reader.
#[inline(always)]
fn overwritten_read(s1: &mut u64, s0: u64, s2: u64) -> Result<(), Abort> {
    *s1 = (*s1).min(s0);
    if s2 != 0 {
        return Err(dangerous());
    }
    Ok(())
}

impl Certifier for Ssi {
    type Ext = SsiExt;
    const PHANTOMS: bool = true;
    const SAFE_SNAPSHOTS: bool = true;
    const NAME: &'static str = super::NAME;
    const DESCRIPTION: &'static str = super::DESCRIPTION;
    const CAPS: Capabilities = super::CAPS;
    const MAX_WORKERS: (usize, &'static str) = TRACKED_WORKERS;

    fn new(slot: usize) -> Self {
        Ssi { s1: u64::MAX, track: Tracking::new(slot) }
    }

    #[inline]
    fn read(&mut self, _: &MvCtx<'_, SsiExt>, v: &V) -> Result<(), Abort> {
        // SeqCst: pairs with the overwriter's post-commit stores (`s2` before `sstamp`).
        let s0 = v.ext.sstamp.load(Ordering::SeqCst);
        if s0 != 0 && !is_pending(s0) {
            return overwritten_read(&mut self.s1, s0, v.ext.s2.load(Ordering::SeqCst));
        }
        self.track.read(v);
        Ok(())
    }

    #[inline]
    fn overwrote(&mut self, mv: &MvCtx<'_, SsiExt>, prev: &V) -> Result<(), Abort> {
        self.track.overwrote(prev, mv.own());
        Ok(())
    }

    #[inline(always)]
    fn must_certify(&self) -> bool {
        self.track.has_reads()
    }

    /// ERMIA's pre-commit (Algorithm 1), latch-free as SSN's: the reads' overwriters that
    /// committed before us give `s1` (and abort us as the reader of a structure whose pivot
    /// committed); with `s1` set, this transaction is a pivot whose successor committed first,
    /// and it aborts if a reader of what it overwrote is still running or committed after that
    /// successor.
    fn certify(&mut self, mv: &MvCtx<'_, SsiExt>, c: u64, abs: Absences) -> Result<(), Abort> {
        // Dangerous structures are made of anti-dependencies: of what phantom tracking learnt,
        // only the observers of absences this transaction ended matter (`makers` precede it
        // through a read, which SI's snapshot already orders).
        let rts = abs.observers;
        let own = mv.own();
        let txns = &mv.shared.txns;
        for v in self.track.reads() {
            if let Some(s0) = committed_overwriter(txns, &v.ext.sstamp, own, c) {
                overwritten_read(&mut self.s1, s0, v.ext.s2.load(Ordering::SeqCst))?;
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
        for v in self.track.overwrites() {
            for slot in self.track.other_readers(v) {
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

    fn committed(&mut self, mv: &MvCtx<'_, SsiExt>, c: u64) {
        let s2 = if self.s1 == u64::MAX { 0 } else { self.s1 };
        if s2 != 0 && c > s2 {
            // A successor committed before us (a read-only commit at its snapshot has `c`
            // below it).
            mv.shared.note_back_edge(c);
        }
        self.track.committed(c, |v| {
            // SeqCst, `s2` first: a reader that sees the commit timestamp sees `s2` too.
            v.ext.s2.store(s2, Ordering::SeqCst);
            v.ext.sstamp.store(c, Ordering::SeqCst);
        });
        self.s1 = u64::MAX;
    }

    fn aborted(&mut self, mv: &MvCtx<'_, SsiExt>) {
        self.track.aborted(mv.own());
        self.s1 = u64::MAX;
    }
}

/// An `ermia-ssi` worker.
pub type SsiWorker<'db> = MvWorker<'db, Ssi>;
