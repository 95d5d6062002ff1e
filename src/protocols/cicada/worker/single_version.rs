//! Cicada's single-version mode (`--opt cicada:single-version=on`): one version per record,
//! updated in place under its write lock, found and validated without walking a chain.

use super::*;

/// Cicada-SV's visibility: `rec`'s one version (its inlined one, `head`) is visible at `ts` if
/// its stamp is below `ts`; if above, the version `ts` should see was overwritten and the
/// transaction aborts (`snapshot-too-old`). A write lock held by a transaction with a smaller
/// timestamp is about to overwrite the version below us: waited out (like a pending version),
/// or with `wait` off an abort. An aborted version (a first insert that failed) is absence.
#[inline(always)]
pub(super) fn sv_search<'a>(
    rec: &CicadaRecord,
    head: Option<&'a CVersion>,
    ts: u64,
    wait: bool,
) -> Result<Found<'a>, Abort> {
    let mut found = Found::NOTHING;
    let Some(v) = head else { return Ok(found) };
    let mut spin = SpinWait::default();
    loop {
        let below = rec.locked_below(ts);
        let stamp = stable_wts(v);
        // The status and the stamp as one seqlock read: the status load (Acquire) sees an
        // overwrite's status store only if `still` then sees its `WRITING` or its new stamp.
        let s = status(v);
        if below || stamp == WRITING || (s == PENDING && stamp < ts) {
            if !wait {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            spin.spin();
            continue;
        }
        if !still(v, stamp) {
            // Overwritten between the two reads: read again.
            continue;
        }
        match s {
            // A first version's insert, aborted, or pending above our timestamp.
            ABORTED | PENDING => return Ok(found),
            _ if stamp > ts => return Err(Abort::new(AbortReason::SnapshotTooOld)),
            _ => {
                found.seen = Some(v);
                found.wts = stamp;
                found.present = s == COMMITTED;
                return Ok(found);
            }
        }
    }
}

impl<'db> CicadaWorker<'db> {
    /// Cicada-SV's consistency check of the reads: a version read still has the stamp it was
    /// read at (stamps are unique, so it was not overwritten), and no transaction with a
    /// smaller timestamp holds its record's write lock (it would overwrite it below us; one
    /// with a larger timestamp loads our `rts` after taking the lock and aborts, or writes
    /// above us). A read that found nothing searches again (an insert below our timestamp
    /// also bumps the bucket observed).
    pub(super) fn reads_consistent_sv(&self) -> Result<(), Abort> {
        for r in &self.reads {
            let rec = as_ref(r.rec);
            let Some(v) = r.seen else {
                if self.visible_now(rec, None)?.is_some() {
                    return Err(Abort::new(AbortReason::ReadValidation));
                }
                continue;
            };
            if rec.locked_below(self.ts) || rec.is_unlinked() || stable_wts(as_ref(v)) != r.wts {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
        }
        Ok(())
    }
}
