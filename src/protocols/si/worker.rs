//! The `si` worker: the multi-version worker (`protocols::mv::worker`) with a certifier that
//! certifies nothing: snapshot reads, pending versions installed at write time, stamped at
//! commit.

use crate::engine::Capabilities;
use crate::error::Abort;
use crate::protocols::mv::worker::{Absences, Certifier, MvOptions, MvWorker};
use crate::protocols::mv::{MvCtx, STAMPED_WORKERS};
use crate::storage::version::Version;

/// Snapshot isolation's certifier: every transaction that got its versions installed commits.
pub struct SiCert;

impl Certifier for SiCert {
    type Ext = ();
    type Options = MvOptions;
    const PHANTOMS: bool = false;
    // SI certifies nothing: a read-only transaction reads the latest snapshot as any other.
    const SAFE_SNAPSHOTS: bool = false;
    const NAME: &'static str = super::NAME;
    const DESCRIPTION: &'static str = super::DESCRIPTION;
    const CAPS: Capabilities = super::CAPS;
    const MAX_WORKERS: (usize, &'static str) = STAMPED_WORKERS;

    #[inline(always)]
    fn new(_: usize, _: &MvOptions) -> Self {
        SiCert
    }

    #[inline(always)]
    fn read(&mut self, _: &MvCtx<'_, ()>, _: &Version<()>) -> Result<(), Abort> {
        Ok(())
    }

    #[inline(always)]
    fn overwrote(&mut self, _: &MvCtx<'_, ()>, _: &Version<()>) -> Result<(), Abort> {
        Ok(())
    }

    #[inline(always)]
    fn must_certify(&self) -> bool {
        false
    }

    #[inline(always)]
    fn certify(&mut self, _: &MvCtx<'_, ()>, _: u64, _: Absences) -> Result<(), Abort> {
        Ok(())
    }

    #[inline(always)]
    fn committed(&mut self, _: &MvCtx<'_, ()>, _: u64) {}

    #[inline(always)]
    fn aborted(&mut self, _: &MvCtx<'_, ()>) {}
}

/// An `si` worker.
pub type SiWorker<'db> = MvWorker<'db, SiCert>;
