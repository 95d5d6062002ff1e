//! The `ermia-ssi` worker: the multi-version worker (`protocols::mv::worker`) with ERMIA's
//! serializable snapshot isolation as its certifier (see the protocol's module docs).

use super::record::SsiExt;
use super::SsiOptions;
use crate::engine::Capabilities;
use crate::error::{Abort, AbortReason};
use crate::protocols::mv::tracking::{committed_overwriter, Tracking, TRACKED_WORKERS};
use crate::protocols::mv::worker::{Absences, Certifier, MvWorker};
use crate::protocols::mv::{is_pending, MvCtx, Owner};
use crate::storage::version::Version;
use std::sync::atomic::Ordering;

type V = Version<SsiExt>;

/// The SSI state of one worker: the running transaction's successor stamp and what it read
/// and overwrote.
pub struct Ssi {
    /// `s1`: the smallest commit timestamp of a transaction that overwrote a version this one
    /// read and committed before it (`u64::MAX`: none).
    s1: u64,
    /// Versions read while they had no committed overwriter (marked, or unmarked when old), and
    /// versions overwritten.
    track: Tracking<SsiExt>,
    /// `old-version-age` (`u64::MAX`: off).
    age: u64,
    /// The age from which the running transaction reads unmarked: `age` if it was declared
    /// read-mostly, else `u64::MAX`.
    old: u64,
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
    type Options = SsiOptions;

    fn new(slot: usize, options: &SsiOptions) -> Self {
        Ssi {
            s1: u64::MAX,
            track: Tracking::new(slot),
            age: options.old_version_age.unwrap_or(u64::MAX),
            old: u64::MAX,
        }
    }

    #[inline(always)]
    fn begin(&mut self, read_mostly: bool) {
        self.old = if read_mostly { self.age } else { u64::MAX };
    }

    #[inline]
    fn read(&mut self, mv: &MvCtx<'_, SsiExt>, v: &V) -> Result<(), Abort> {
        // SeqCst: pairs with the overwriter's post-commit stores (`s2` before `sstamp`).
        let mut s0 = v.ext.sstamp.load(Ordering::SeqCst);
        // Relaxed stamp: the version is committed and was found visible through its stamp.
        if s0 == 0 && mv.snapshot.saturating_sub(v.stamp.load(Ordering::Relaxed)) >= self.old {
            // An old version: publish the read in `bstamp`, then look for an overwriter again.
            // Both SeqCst, as the overwriter's mark and its pre-commit load of `bstamp`: of
            // the two, at least one sees the other (see the module docs).
            // A `bstamp` within `BSTAMP_SLACK` below our snapshot is left as it is: pivots take
            // `bstamp + BSTAMP_SLACK` as the readers' bound, and a scan that many readers
            // repeat writes each version's line once per `BSTAMP_SLACK` commits, not per read.
            // Skipping is sound as the store: the value we load was stored by an earlier
            // SeqCst `fetch_max`, so an overwriter that missed it stored its mark before it,
            // and our load of the overwriter word below sees the mark.
            let b = &v.ext.bstamp;
            let seen = b.load(Ordering::SeqCst);
            if seen == 0 || seen.saturating_add(BSTAMP_SLACK) < mv.snapshot {
                b.fetch_max(mv.snapshot, Ordering::SeqCst);
                crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
            }
            s0 = v.ext.sstamp.load(Ordering::SeqCst);
            if s0 == 0 {
                self.track.read_unmarked(v);
                return Ok(());
            }
        }
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
        for v in self.track.all_reads() {
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
        // see `mv::worker`). At `s1` too: the reader may be the successor itself (a cycle of two).
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
            // SeqCst: after our mark on `v` (pairs with the unmarked readers' `bstamp`).
            let b = v.ext.bstamp.load(Ordering::SeqCst);
            if b != 0 {
                self.unmarked_readers(mv, b.saturating_add(BSTAMP_SLACK))?;
            }
        }
        Ok(())
    }

    fn committed(&mut self, mv: &MvCtx<'_, SsiExt>, c: u64) {
        if self.track.has_unmarked() {
            // Before `finish`: whoever sees this transaction ended sees the pair.
            mv.untracked_committed(c);
        }
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

/// How far below an unmarked reader's snapshot a version's `bstamp` may stay (in commits):
/// every unmarked reader of a version began at or below `bstamp + BSTAMP_SLACK`.
const BSTAMP_SLACK: u64 = 64;

impl Ssi {
    /// The pivot check for the readers of a version we overwrote that read it unmarked, whose
    /// largest snapshot is `b` (see the module docs): with `s1` set, a transaction that may be
    /// one of them and may commit at or above `s1` aborts us. Every such reader began at or
    /// below `b`; per worker slot, the one running now is judged by its published snapshot and
    /// state, the ones that committed by the slot's last unmarked-reading commit.
    #[cold]
    fn unmarked_readers(&self, mv: &MvCtx<'_, SsiExt>, b: u64) -> Result<(), Abort> {
        let txns = &mv.shared.txns;
        for slot in (0..txns.slots_used()).filter(|&s| s != mv.slot()) {
            let (owner, snapshot) = txns.current_snapshot(slot);
            if snapshot <= b {
                match owner {
                    Owner::Active => return Err(dangerous()),
                    Owner::Committing(cr) if cr >= self.s1 => return Err(dangerous()),
                    Owner::Committing(_) | Owner::Done => {}
                }
            }
            // After the state: a transaction that ended meanwhile published its pair first.
            let (last_commit, last_snapshot) = txns.untracked(slot);
            if last_commit == 0 {
                continue;
            }
            // A reader of ours from this slot began at or below `b`. If the slot's last
            // unmarked-reading transaction began above `b`, ours committed before it began.
            let bound = if last_snapshot <= b { last_commit } else { last_snapshot };
            if bound >= self.s1 {
                return Err(dangerous());
            }
        }
        Ok(())
    }
}

/// An `ermia-ssi` worker.
pub type SsiWorker<'db> = MvWorker<'db, Ssi>;
