//! The `hekaton` worker: the multi-version worker (`protocols::mv::worker`) with Hekaton's
//! validation as its certifier, speculative reads and repeated scans (see the protocol's module
//! docs).

use super::record::HekatonExt;
use crate::engine::Capabilities;
use crate::error::{Abort, AbortReason};
use crate::protocols::mv::tracking::{committed_overwriter, Overwrites};
use crate::protocols::mv::worker::{Absences, Certifier, MvOptions, MvWorker};
use crate::protocols::mv::{is_committed, is_pending, MvCtx, STAMPED_WORKERS};
use crate::storage::version::Version;
use crate::util::SpinWait;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

type V = Version<HekatonExt>;

/// The Hekaton state of one worker: what the running transaction read, which of those reads
/// were speculative, and what it replaced.
pub struct Hekaton {
    /// Every version read (another transaction's), to check at pre-commit that none was
    /// replaced below the commit timestamp.
    reads: Vec<NonNull<V>>,
    /// Versions read while their writer was committing (commit dependencies).
    depends: Vec<NonNull<V>>,
    /// Versions replaced: their End holds this transaction's pending stamp.
    replaced: Overwrites<HekatonExt>,
}

// SAFETY: the pointers name versions of the database the worker belongs to, used only on the
// worker's thread under the epoch rules of `protocols::mv` (a transaction's versions
// stay allocated until it ends).
unsafe impl Send for Hekaton {}

#[inline(always)]
fn version<'a>(p: NonNull<V>) -> &'a V {
    // SAFETY: see the `Send` impl: the running transaction read this version.
    unsafe { p.as_ref() }
}

impl Hekaton {
    /// Waits until every transaction read from speculatively has finished; aborts if one
    /// aborted. Each is committing at a timestamp below ours (or below our snapshot) and
    /// waits only for smaller ones, so the wait ends.
    fn wait_for_dependencies(&self) -> Result<(), Abort> {
        for &p in &self.depends {
            let v = version(p);
            let mut spin = SpinWait::default();
            loop {
                // Acquire: pairs with the writer's Release stamp.
                let st = v.stamp.load(Ordering::Acquire);
                if is_committed(st) {
                    break;
                }
                if !is_pending(st) {
                    return Err(Abort::new(AbortReason::CascadingAbort));
                }
                spin.spin();
            }
        }
        Ok(())
    }

    fn forget(&mut self) {
        self.reads.clear();
        self.depends.clear();
    }
}

impl Certifier for Hekaton {
    type Ext = HekatonExt;
    type Options = MvOptions;
    const PHANTOMS: bool = false;
    // Every transaction that wrote nothing commits at its snapshot without validation.
    const SAFE_SNAPSHOTS: bool = false;
    const SPECULATIVE: bool = true;
    const RESCANS: bool = true;
    const NAME: &'static str = super::NAME;
    const DESCRIPTION: &'static str = super::DESCRIPTION;
    const CAPS: Capabilities = super::CAPS;
    const MAX_WORKERS: (usize, &'static str) = STAMPED_WORKERS;

    fn new(_: usize, _: &MvOptions) -> Self {
        Hekaton { reads: Vec::new(), depends: Vec::new(), replaced: Overwrites::default() }
    }

    /// A version read speculatively (its writer was committing when the reader found it) is
    /// a commit dependency while it is pending, and aborts the reader at once if its writer
    /// has aborted meanwhile; committed versions stay committed.
    #[inline]
    fn read(&mut self, _: &MvCtx<'_, HekatonExt>, v: &V) -> Result<(), Abort> {
        // Acquire: pairs with the writer's Release stamp.
        let st = v.stamp.load(Ordering::Acquire);
        if !is_committed(st) {
            if !is_pending(st) {
                return Err(Abort::new(AbortReason::CascadingAbort));
            }
            self.depends.push(NonNull::from(v));
        }
        self.reads.push(NonNull::from(v));
        Ok(())
    }

    #[inline]
    fn overwrote(&mut self, mv: &MvCtx<'_, HekatonExt>, prev: &V) -> Result<(), Abort> {
        self.replaced.overwrote(prev, mv.own());
        Ok(())
    }

    #[inline(always)]
    fn must_certify(&self) -> bool {
        false
    }

    fn settle(&mut self, _: &MvCtx<'_, HekatonExt>) -> Result<(), Abort> {
        self.wait_for_dependencies()
    }

    /// Read stability at `c`: every version read must still be visible at `c`, so its End
    /// must not name a transaction that committed, or is committing, below `c` (one that is
    /// committing is waited for: if it aborts, the read stands). The repeated scans ran
    /// before (`Certifier::RESCANS`). Then the commit dependencies are waited for.
    fn certify(&mut self, mv: &MvCtx<'_, HekatonExt>, c: u64, _: Absences) -> Result<(), Abort> {
        let own = mv.own();
        for &p in &self.reads {
            let end = &version(p).ext.end;
            if committed_overwriter(&mv.shared.txns, end, own, c).is_some_and(|e| e < c) {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
        }
        self.wait_for_dependencies()
    }

    fn committed(&mut self, _: &MvCtx<'_, HekatonExt>, c: u64) {
        // SeqCst: pairs with the validators' loads of End (`committed_overwriter`).
        self.replaced.committed(|v| v.ext.end.store(c, Ordering::SeqCst));
        self.forget();
    }

    fn aborted(&mut self, mv: &MvCtx<'_, HekatonExt>) {
        self.replaced.aborted(mv.own());
        self.forget();
    }
}

/// A `hekaton` worker.
pub type HekatonWorker<'db> = MvWorker<'db, Hekaton>;
