//! The `ermia-ssn` worker: the multi-version worker (`protocols::common::mvcc`) with the
//! serial safety net as its certifier (see the protocol's module docs for the rules).

use super::record::SsnExt;
use crate::engine::Capabilities;
use crate::error::{Abort, AbortReason};
use crate::protocols::common::mv::{is_pending, MvCtx, Owner};
use crate::protocols::common::mvcc::{committed_overwriter, Certifier, MvWorker, ReaderBit};
use crate::storage::version::Version;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

type V = Version<SsnExt>;

/// The serial safety net of one worker: the running transaction's stamps and what it read
/// and overwrote.
pub struct Ssn {
    /// The worker's reader bit.
    bit: ReaderBit,
    /// `eta`: the largest commit timestamp of a transaction that must precede this one.
    pstamp: u64,
    /// `pi`: the smallest successor stamp of a transaction that must follow this one (through
    /// an anti-dependency), `u64::MAX` while there is none.
    sstamp: u64,
    /// Versions read that had no committed overwriter then (their reader bit is set).
    reads: Vec<NonNull<V>>,
    /// Committed versions this transaction overwrote (their `sstamp` holds its pending stamp).
    overwrites: Vec<NonNull<V>>,
}

// SAFETY: the pointers name versions of the database the worker belongs to, used only on the
// worker's thread under the epoch rules of `protocols::common::mv`.
unsafe impl Send for Ssn {}

impl Ssn {
    /// The exclusion-window test: a transaction whose successors' stamp is at or below its
    /// predecessors' could close a cycle.
    #[inline(always)]
    fn check(&self) -> Result<(), Abort> {
        if self.sstamp <= self.pstamp {
            Err(Abort::new(AbortReason::ExclusionWindow))
        } else {
            Ok(())
        }
    }

    fn forget(&mut self) {
        self.reads.clear();
        self.overwrites.clear();
        self.pstamp = 0;
        self.sstamp = u64::MAX;
    }
}

#[inline(always)]
fn version<'a>(p: NonNull<V>) -> &'a V {
    // SAFETY: a version this transaction read or overwrote; versions are freed only after the
    // epochs of every transaction that could reach them ended, and ours has not.
    unsafe { p.as_ref() }
}

impl Certifier for Ssn {
    type Ext = SsnExt;
    const PHANTOMS: bool = true;
    const NAME: &'static str = super::NAME;
    const DESCRIPTION: &'static str = super::DESCRIPTION;
    const CAPS: Capabilities = super::CAPS;
    const MAX_WORKERS: (usize, &'static str) = super::MOST_WORKERS;

    fn new(slot: usize) -> Self {
        Ssn {
            bit: ReaderBit::new(slot),
            pstamp: 0,
            sstamp: u64::MAX,
            reads: Vec::new(),
            overwrites: Vec::new(),
        }
    }

    /// `eta` takes the version's commit timestamp; a version whose overwriter committed gives
    /// `pi` its successor stamp at once, any other is tracked: the reader bit is set, and
    /// pre-commit looks at its overwriter again.
    #[inline]
    fn read(&mut self, _: &MvCtx<'_, SsnExt>, v: &V) -> Result<(), Abort> {
        self.pstamp = self.pstamp.max(v.stamp.load(Ordering::Relaxed));
        // SeqCst: pairs with the overwriter's store of its successor stamp.
        let ss = v.ext.sstamp.load(Ordering::SeqCst);
        if ss != 0 && !is_pending(ss) {
            self.sstamp = self.sstamp.min(ss);
        } else if v.ext.readers.mark(self.bit) {
            // (A bit already set is ours: the version is tracked already.)
            self.reads.push(NonNull::from(v));
        }
        self.check()
    }

    /// Marks `prev` as overwritten by this transaction; `eta` takes its creator's and its
    /// committed readers' timestamps.
    #[inline]
    fn overwrote(&mut self, mv: &MvCtx<'_, SsnExt>, prev: &V) -> Result<(), Abort> {
        // SeqCst: pairs with the readers' load in `read` and `certify`.
        prev.ext.sstamp.store(mv.own(), Ordering::SeqCst);
        self.overwrites.push(NonNull::from(prev));
        self.pstamp = self
            .pstamp
            .max(prev.stamp.load(Ordering::Relaxed))
            .max(prev.ext.pstamp.load(Ordering::SeqCst));
        self.check()
    }

    #[inline(always)]
    fn must_certify(&self) -> bool {
        !self.reads.is_empty()
    }

    /// The latch-free SSN pre-commit: of two transactions on either side of an edge, the one
    /// with the larger commit timestamp accounts for it, waiting for the other only when it
    /// needs the other's final successor stamp.
    fn certify(&mut self, mv: &MvCtx<'_, SsnExt>, c: u64, eta: u64) -> Result<(), Abort> {
        let own = mv.own();
        let txns = &mv.shared.txns;
        self.sstamp = self.sstamp.min(c);
        self.pstamp = self.pstamp.max(eta);
        // Reads whose overwriter committed (or certifies) before us: `pi` takes its `pi`.
        for &p in &self.reads {
            if let Some(pi) = committed_overwriter(txns, &version(p).ext.sstamp, own, c) {
                self.sstamp = self.sstamp.min(pi);
            }
        }
        // Overwritten versions: their committed readers, and readers certifying before us.
        for &p in &self.overwrites {
            let v = version(p);
            for slot in v.ext.readers.others(self.bit) {
                // A reader committing before us counts even if it then aborts (not waiting
                // keeps pre-commit free of waits on readers); a running one commits after us
                // and sees our pending version on the one it read.
                if let Owner::Committing(cr) = txns.current(slot) {
                    if cr < c {
                        self.pstamp = self.pstamp.max(cr);
                    }
                }
            }
            // After the bits: a reader publishes its `pstamp` before it clears its bit.
            self.pstamp = self.pstamp.max(v.ext.pstamp.load(Ordering::SeqCst));
        }
        self.check()
    }

    fn committed(&mut self, _: &MvCtx<'_, SsnExt>, c: u64) {
        for &p in &self.reads {
            let v = version(p);
            if v.ext.pstamp.load(Ordering::Relaxed) < c {
                // SeqCst: before the bit is cleared (see `certify`).
                v.ext.pstamp.fetch_max(c, Ordering::SeqCst);
            }
            v.ext.readers.clear(self.bit);
        }
        for &p in &self.overwrites {
            // SeqCst: before the transaction is seen done (readers waiting on it re-read).
            version(p).ext.sstamp.store(self.sstamp, Ordering::SeqCst);
        }
        self.forget();
    }

    fn aborted(&mut self, mv: &MvCtx<'_, SsnExt>) {
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

/// An `ermia-ssn` worker.
pub type SsnWorker<'db> = MvWorker<'db, Ssn>;
