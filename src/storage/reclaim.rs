//! Epoch-based reclamation of deleted records (shared by all protocols).
//!
//! A delete leaves the record in the index, marked absent by the protocol, so that concurrent
//! readers keep finding the same slot and validating against it. After commit the deleting worker
//! *retires* `(table, key, row)` with the current epoch. Reclamation then takes two grace periods:
//!
//! 1. once no transaction that ran when the record was retired is still running, the protocol is
//!    asked to *unlink* it (it checks, under the record's own lock, that the record is still
//!    absent and was not revived by a later insert, and marks it unlinked); the index entry is
//!    removed;
//! 2. once no transaction that could still have found the row id in the index is running, the slot
//!    returns to the worker's free list for reuse.
//!
//! Work is done in small steps from the worker's own `begin`, never on a separate thread, so the
//! hot path pays only a length check.

use super::epoch::Epochs;
use super::index::IndexGuard;
use super::row_store::{RecordHeader, SlotCache};
use super::snapshot::{Chains, Kept, SnapEpoch, SnapVersion};
use super::version::{Ptr, VersionPool};
use super::{RowId, Storage, Table, TableId};
use std::collections::VecDeque;
use std::ptr::NonNull;

/// What the protocol did when asked to unlink a retired record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unlink {
    /// This call changed the record from absent to unlinked: the caller owns the removal of the
    /// index entry and the slot.
    Unlinked,
    /// The record was revived by a later insert: forget it.
    Revived,
    /// The record was already unlinked (by another retire entry for the same row): forget it.
    /// Treating this as `Unlinked` would free the slot twice.
    Gone,
    /// The record is locked right now, or its deletion is too recent (see
    /// [`Reclaimer::collect`]): try again later.
    Busy,
}

#[derive(Clone, Copy, Debug)]
struct Retired {
    table: TableId,
    key: u64,
    rid: RowId,
    epoch: u64,
}

/// A worker's reclamation queues.
#[derive(Default)]
pub struct Reclaimer {
    to_unlink: VecDeque<Retired>,
    to_free: VecDeque<Retired>,
    /// Slots freed so far (for statistics and tests).
    pub freed: u64,
    /// Snapshot copies trimmed off their chains, with the epoch they were cut in (see
    /// `storage::snapshot`): freed after its grace period.
    versions: VecDeque<(TableId, Ptr<SnapEpoch>, u64)>,
    /// Per table, the worker's snapshot copies to reuse (empty while snapshots are off).
    pools: Vec<VersionPool<SnapEpoch>>,
}

impl Reclaimer {
    /// Queues a deleted record retired at `epoch`.
    #[inline]
    pub fn retire(&mut self, table: TableId, key: u64, rid: RowId, epoch: u64) {
        self.to_unlink.push_back(Retired { table, key, rid, epoch });
    }

    /// Queues a record whose index entry the caller has already removed, at `epoch` (a
    /// protocol that unlinks its deleted rows itself, where it has the right to: BOHM's
    /// record owners). Only the second grace period is left: its slot is reused once no
    /// transaction that could have found the row id before the removal is running.
    #[inline]
    pub fn unlinked(&mut self, table: TableId, key: u64, rid: RowId, epoch: u64) {
        self.to_free.push_back(Retired { table, key, rid, epoch });
    }

    /// Moves every queued record of `other` into `self` (a worker adopting a departed worker's
    /// queues; order within each stage is kept per source, which is all `collect` relies on
    /// for progress, not for safety: every entry is checked against the epochs on its own).
    pub fn adopt(&mut self, other: &mut Reclaimer) {
        self.to_unlink.append(&mut other.to_unlink);
        self.to_free.append(&mut other.to_free);
        self.versions.append(&mut other.versions);
    }

    /// Number of records and snapshot copies waiting.
    pub fn pending(&self) -> usize {
        self.to_unlink.len() + self.to_free.len() + self.versions.len()
    }

    /// Snapshot copies waiting for their grace period.
    pub fn pending_versions(&self) -> usize {
        self.versions.len()
    }

    /// [`Chains::save`] from this worker's pool of table `t`, queueing what the trim cuts for
    /// freeing after the grace period of the current epoch.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn save_old<R: RecordHeader>(
        &mut self,
        epochs: &Epochs,
        chains: &Chains,
        t: TableId,
        rid: RowId,
        value: Kept<'_, R>,
        word: u64,
        epoch: u64,
    ) {
        let oldest = epochs.snapshots.oldest();
        let versions = &mut self.versions;
        let mut stamp = None;
        let retire = |v: NonNull<SnapVersion>| {
            let e = *stamp.get_or_insert_with(|| epochs.retire_stamp());
            versions.push_back((t, Ptr(v), e));
        };
        let pool = pool_of(&mut self.pools, t);
        chains.save(pool, rid, value, word, epoch, oldest, retire);
    }

    /// Gives this worker's snapshot copies back to the tables' stores (its worker is leaving).
    pub fn release_pools<R: RecordHeader>(&mut self, storage: &Storage<R>) {
        for (i, pool) in self.pools.iter_mut().enumerate() {
            if let Some(c) = &storage.table(TableId(i as u32)).chains {
                pool.release(&c.store);
            }
        }
    }

    /// Advances both stages as far as the epochs allow; `unlink` is the protocol's step 1,
    /// called with the table, the key, the record and `safe`, the oldest epoch a running
    /// transaction began in.
    ///
    /// A retire entry may be older than the record's current absence: an aborted insert retires
    /// its row, which a later insert may revive and a later transaction delete again (retiring it
    /// once more). The protocol must then refuse (`Busy`) until that deletion is older than
    /// `safe`, where its commit stamp carries an epoch: a row unlinked sooner lets the key's next
    /// insert create a fresh record in the deletion's own epoch, whose stamp Silo's rule
    /// (larger than what the transaction saw, in the current epoch) does not place after the
    /// deletion's, and replaying the log by largest stamp per key would then resurrect the
    /// deletion.
    /// The calling worker must be inside a transaction epoch (see `WorkerCtx::enter`), so that
    /// no slot it looks at can be freed and reused under it.
    pub fn collect<R: RecordHeader>(
        &mut self,
        storage: &Storage<R>,
        caches: &mut [SlotCache],
        guard: &IndexGuard,
        mut unlink: impl FnMut(&Table<R>, u64, &R, u64) -> Unlink,
    ) {
        if self.pending() == 0 {
            return;
        }
        // A deleted record stays while a snapshot reader may still see it (see
        // `storage::snapshot`): its deletion's epoch must be below the oldest boundary in use.
        let safe = storage.epochs().min_active().min(storage.epochs().snapshots.oldest());
        let mut stamp = None;
        let mut busy = 0;
        while let Some(r) = self.to_unlink.front().copied() {
            if r.epoch >= safe {
                break;
            }
            self.to_unlink.pop_front();
            let table = storage.table(r.table);
            // A row can be retired more than once (an aborted insert, then a revival and a
            // delete); only an entry the index still maps is acted on, and the protocol's
            // absent -> unlinked transition decides which of two racing entries owns the row.
            if table.index.get(r.key, guard) != Some(r.rid) {
                continue;
            }
            match unlink(table, r.key, table.rows.get(r.rid).header, safe) {
                Unlink::Unlinked => {
                    let removed = table.index.remove_if(r.key, r.rid, guard);
                    debug_assert!(removed, "the unlinker owns the index entry");
                    let epoch = *stamp.get_or_insert_with(|| storage.epochs().retire_stamp());
                    self.to_free.push_back(Retired { epoch, ..r });
                }
                Unlink::Revived | Unlink::Gone => {}
                Unlink::Busy => {
                    self.to_unlink.push_back(r);
                    busy += 1;
                    if busy > 16 {
                        break;
                    }
                }
            }
        }
        // A fresh reading: a transaction that began after `safe` was read may have found a row id
        // just unlinked above, and it must hold that slot back.
        let safe = storage.epochs().min_active();
        while let Some(r) = self.to_free.front().copied() {
            if r.epoch >= safe {
                break;
            }
            self.to_free.pop_front();
            if let Some(c) = &storage.table(r.table).chains {
                // Nothing reaches the row any more, nor so its old values.
                let pool = pool_of(&mut self.pools, r.table);
                c.take(r.rid, |v| pool.free(&c.store, v));
            }
            caches[r.table.index()].release(r.rid);
            self.freed += 1;
        }
        while let Some(&(t, Ptr(v), e)) = self.versions.front() {
            if e >= safe {
                break;
            }
            self.versions.pop_front();
            let c = storage.table(t).chains.as_ref().expect("copies come from chains");
            pool_of(&mut self.pools, t).free(&c.store, v);
        }
    }
}

/// The pool of table `t`, made on first use.
#[inline]
fn pool_of(pools: &mut Vec<VersionPool<SnapEpoch>>, t: TableId) -> &mut VersionPool<SnapEpoch> {
    if pools.len() <= t.index() {
        pools.resize_with(t.index() + 1, VersionPool::default);
    }
    &mut pools[t.index()]
}
