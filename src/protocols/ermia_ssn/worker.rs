//! The `ermia-ssn` worker: the multi-version worker (`protocols::mv::worker`) with the
//! serial safety net as its certifier (see the protocol's module docs for the rules).

use super::record::SsnExt;
use crate::engine::Capabilities;
use crate::error::{Abort, AbortReason};
use crate::protocols::mv::tracking::{committed_overwriter, Tracking, TRACKED_WORKERS};
use crate::protocols::mv::worker::{Absences, Certifier, MvOptions, MvWorker};
use crate::protocols::mv::{is_pending, MvCtx, Owner};
use crate::storage::version::Version;
use std::sync::atomic::Ordering;

type V = Version<SsnExt>;

/// The serial safety net of one worker: the running transaction's stamps and what it read
/// and overwrote.
pub struct Ssn {
    /// `eta`: the largest commit timestamp of a transaction that must precede this one.
    pstamp: u64,
    /// `pi`: the smallest successor stamp of a transaction that must follow this one (through
    /// an anti-dependency), `u64::MAX` while there is none.
    sstamp: u64,
    /// Versions read while they had no committed overwriter, and versions overwritten.
    track: Tracking<SsnExt>,
}

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
        self.pstamp = 0;
        self.sstamp = u64::MAX;
    }
}

impl Certifier for Ssn {
    type Ext = SsnExt;
    type Options = MvOptions;
    const PHANTOMS: bool = true;
    const SAFE_SNAPSHOTS: bool = true;
    const NAME: &'static str = super::NAME;
    const DESCRIPTION: &'static str = super::DESCRIPTION;
    const CAPS: Capabilities = super::CAPS;
    const MAX_WORKERS: (usize, &'static str) = TRACKED_WORKERS;

    fn new(slot: usize, _: &MvOptions) -> Self {
        Ssn { pstamp: 0, sstamp: u64::MAX, track: Tracking::new(slot) }
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
        } else {
            self.track.read(v);
        }
        self.check()
    }

    /// Marks `prev` as overwritten by this transaction; `eta` takes its creator's and its
    /// committed readers' timestamps.
    #[inline]
    fn overwrote(&mut self, mv: &MvCtx<'_, SsnExt>, prev: &V) -> Result<(), Abort> {
        self.track.overwrote(prev, mv.own());
        self.pstamp = self
            .pstamp
            .max(prev.stamp.load(Ordering::Relaxed))
            .max(prev.ext.pstamp.load(Ordering::SeqCst));
        self.check()
    }

    #[inline(always)]
    fn must_certify(&self) -> bool {
        self.track.has_reads()
    }

    /// The latch-free SSN pre-commit: of two transactions on either side of an edge, the one
    /// with the larger commit timestamp accounts for it, waiting for the other only when it
    /// needs the other's final successor stamp.
    fn certify(&mut self, mv: &MvCtx<'_, SsnExt>, c: u64, abs: Absences) -> Result<(), Abort> {
        let own = mv.own();
        let txns = &mv.shared.txns;
        self.sstamp = self.sstamp.min(c);
        // Whoever made an absence we read, and whoever read an absence we ended, precede us.
        self.pstamp = self.pstamp.max(abs.makers).max(abs.observers);
        // Reads whose overwriter committed (or certifies) before us: `pi` takes its `pi`.
        for v in self.track.reads() {
            if let Some(pi) = committed_overwriter(txns, &v.ext.sstamp, own, c) {
                self.sstamp = self.sstamp.min(pi);
            }
        }
        // Overwritten versions: their committed readers, and readers certifying before us.
        for v in self.track.overwrites() {
            for slot in self.track.other_readers(v) {
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

    fn committed(&mut self, mv: &MvCtx<'_, SsnExt>, c: u64) {
        let pi = self.sstamp;
        if pi < c {
            // A successor committed before us. (A transaction that commits at its snapshot,
            // with nothing tracked, may note it too: harmless, read-only ones fall back sooner.)
            mv.shared.note_back_edge(c);
        }
        // SeqCst: before the transaction is seen done (readers waiting on it re-read).
        self.track.committed(c, |v| v.ext.sstamp.store(pi, Ordering::SeqCst));
        self.forget();
    }

    fn aborted(&mut self, mv: &MvCtx<'_, SsnExt>) {
        self.track.aborted(mv.own());
        self.forget();
    }
}

/// An `ermia-ssn` worker.
pub type SsnWorker<'db> = MvWorker<'db, Ssn>;
