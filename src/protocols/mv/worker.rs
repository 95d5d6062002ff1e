//! The worker and protocol of the snapshot-based multi-version protocols (`si`, `ermia-ssn`,
//! `ermia-ssi`), generic over a *certifier*: what a protocol adds to snapshot isolation to make it serializable.
//!
//! Every such protocol reads the snapshot of its begin and installs pending versions at write
//! time, first updater wins (`protocols::mv`). A [`Certifier`] sees every version the
//! transaction reads and every version it overwrites, and decides at pre-commit, once the
//! commit timestamp is drawn, whether the transaction may commit; after the commit or abort it
//! publishes or withdraws what other transactions' certification reads. SI's certifier does
//! nothing and costs nothing (every hook inlines to no code).
//!
//! ## The commit contract
//!
//! How the protocols here keep the points of [`crate::engine::Protocol`]'s commit contract: a
//! write installs a pending version at once (first updater wins), so the write set is held
//! from then on; `Locked` is passed as the commit draws its timestamp, `Validated` once
//! phantom tracking and the certifier let it commit. The log record is then written from the
//! pending versions (`Logged`), *before* any version is stamped: a reader of a stamped version
//! logs after this transaction began its record (the log epochs' dependency rule), and claims
//! its place in a central log after it (ERMIA's LSN order). The versions are then stamped
//! (`Installed`), and only in `WorkerCtx::commit_returning` does the log epoch leave flight
//! (`Acknowledging`): a checkpoint whose start epoch covers the transaction waits until its
//! versions are stamped, and `read_committed` (the newest stamped version) then sees them.
//! Before this rule, a transaction logged and preempted before its stamps was in neither the
//! checkpoint nor the replay after it.
//!
//! ## Read-only transactions
//!
//! A transaction declared read-only ([`Worker::begin_read_only`]) refuses writes
//! (`read-only-write`). Under a certifier with [`Certifier::SAFE_SNAPSHOTS`] (SSN, SSI) it
//! reads at the GC watermark `w` instead of the newest snapshot, with nothing tracked and
//! nothing certified, and commits at `w`, when `w` is *safe*: no transaction that committed
//! above `w` did so after one of its anti-dependency successors.
//!
//! Why that suffices (our derivation; the papers leave read-only transactions to SSI's
//! "safe snapshot" idea of Ports and Grittner without a rule for these certifiers): a cycle
//! through the read-only `R` enters it from a transaction that committed at or below `w`
//! (`R` read its versions) and leaves it to one that committed above `w` (it overwrote or
//! inserted what `R` saw), so somewhere the cycle goes from a transaction committed above `w`
//! to one committed at or below it. Under SI, write and read dependencies point from earlier
//! to later commits, so that edge is an anti-dependency `A -rw-> B` whose successor `B`
//! committed first; `A` read the version `B` replaced, so `A`'s snapshot is below `c(B) <= w`.
//! Every snapshot in use is at or above the watermark, so `A` had finished when `R` began: a
//! transaction that committed above `w` after its successor `B`, which the rule excludes.
//! Phantoms add no such edge: an observer of an absence that an earlier commit ended aborts
//! (`phantom-validation`).
//!
//! Certifiers record such commits in [`MvShared::note_back_edge`] (SSN: `pi < c`; SSI: `s1`
//! set); a read-only transaction that finds one above the watermark runs as any other
//! (tracked, certified, at the newest snapshot). It reads the watermark only once the
//! watermark cannot pass it ([`MvCtx::begin_read_only`]). Its data is as old as the oldest
//! running snapshot (Silo's read-only snapshots are similarly behind, by epochs), but never
//! older than the worker's own last commit: a watermark below it is not used (a worker reads
//! its own writes, and a procedure that declares its reads from the latest data, as TPC-C's
//! reconnaissance does, would otherwise retry until another worker's begin moved the
//! watermark). The worker refreshes the watermark, when it is due, before it publishes
//! anything, so its own published snapshot never holds the refresh back.
//!
//! ## Phantoms
//!
//! Version stamps cover the records a transaction read; a certifier that asks for phantom
//! tracking ([`Certifier::PHANTOMS`]) also learns about keys that were absent. The storage's
//! phantom buckets carry two clocks here (`storage::phantom`): `wts`, the largest commit
//! timestamp of a transaction that made a key of the bucket present (an insert of a new row;
//! the revival of a deleted row overwrites its tombstone version, which the certifier sees)
//! or whose deletion the GC unlinked, and `rts`, the largest commit timestamp of a transaction that observed absence in it (a scan
//! covered it, or a point read found its key absent). At pre-commit, with commit timestamp `c`:
//!
//! 1. every bucket observed: raise `rts` to `c`, then load `wts`; a `wts` above the snapshot
//!    means a key appeared there after it, and the transaction aborts (`phantom-validation`:
//!    the inserter's own certification stamps are not kept with the bucket, so the conservative
//!    answer is the only one). A `wts` at or below the snapshot bounds the commit timestamp of
//!    whoever made the absence the transaction read, when no version tells: the GC hands a
//!    deleted row's tombstone timestamp to its bucket's `wts` before it marks the row unlinked,
//!    so a reader that then finds the key absent still learns its deleter
//!    ([`Absences::makers`]; SSN counts the deleter among the predecessors);
//! 2. every bucket inserted into: raise `wts` to `c`, then load `rts`; an observer of the
//!    absence precedes this transaction, so its commit timestamp joins the transaction's
//!    predecessors ([`Absences::observers`]; for SSN, `eta`).
//!
//! Each side stores before it loads (SeqCst), so of an observer and an inserter that certify
//! concurrently, at least one sees the other. An observer that certified earlier left its
//! timestamp in `rts`; an inserter that certified earlier left its `wts` above the observer's
//! snapshot (it committed after it, or the observer would have seen the key). When one
//! transaction both observed and inserted into a bucket, its own timestamp in `rts` may hide an
//! earlier observer's: then `c - 1`, above every timestamp it could hide, stands for it.

use crate::engine::context::WorkerCtx;
use crate::engine::options::{number, switch, OptionSpec, ProtocolOptions};
use crate::engine::procedure::ALL_COLUMNS;
use crate::engine::report::VersionReport;
use crate::engine::{Capabilities, Database, Protocol, Setup, Worker};
use crate::error::{Abort, AbortReason, Error};
use crate::protocols::common::scan::ScanSteps;
use crate::protocols::common::{apply_update, check_len, table, Scratch};
use crate::protocols::mv::{is_pending, Gc, Install, MvCtx, MvRecord, MvShared, TooOld, TOMBSTONE};
use crate::storage::inject::CommitPhase;
use crate::storage::phantom::Batch;
use crate::storage::projection::Columns;
use crate::storage::version::{Version, VersionAlloc, VersionExt};
use crate::storage::{RowId, RowRef, Storage, Table, TableId};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// What phantom tracking tells a certifier at pre-commit (see the module docs); 0 for none.
#[derive(Clone, Copy, Debug, Default)]
pub struct Absences {
    /// The largest commit timestamp of a transaction that observed the absence of a key this
    /// transaction made present (it must precede this one).
    pub observers: u64,
    /// The largest commit timestamp, at most the snapshot, of a transaction that changed a key's
    /// presence in a bucket this transaction observed absent: an upper bound on the deleter whose
    /// absence it read when the deleted row was unlinked and no tombstone named the deleter (it
    /// must precede this one).
    pub makers: u64,
}

/// What a protocol adds to snapshot isolation (see the module docs). Every hook runs on the
/// worker's thread, inside its storage epoch: the versions it is handed stay allocated until
/// the transaction ends.
pub trait Certifier: Sized + Send + 'static {
    /// The protocol's per-version fields.
    type Ext: VersionExt;
    /// Whether absent keys observed and new keys inserted are tracked in phantom buckets.
    const PHANTOMS: bool;
    /// Whether a transaction declared read-only runs at a safe snapshot without being seen
    /// by the certifier (see the module docs); without it, it runs as any transaction. A
    /// certifier that allows it reports every commit after an anti-dependency successor
    /// ([`MvShared::note_back_edge`]).
    const SAFE_SNAPSHOTS: bool;
    /// The protocol's name, description and capabilities ([`Protocol`]'s).
    const NAME: &'static str;
    /// See [`Certifier::NAME`].
    const DESCRIPTION: &'static str;
    /// See [`Certifier::NAME`].
    const CAPS: Capabilities;
    /// The most workers the protocol takes, and why (its configuration error says both).
    const MAX_WORKERS: (usize, &'static str);
    /// Whether a pending version whose owner is committing at or below the snapshot is read
    /// at once rather than waited for (Hekaton's speculative reads: [`Certifier::read`] is
    /// handed the pending version and takes a commit dependency on it).
    const SPECULATIVE: bool = false;
    /// Whether every range scanned and every key found absent is scanned again at pre-commit,
    /// at the commit timestamp, before [`Certifier::certify`] (Hekaton's phantom check: a row
    /// that changed between the snapshot and the commit timestamp aborts with
    /// `phantom-validation`).
    const RESCANS: bool = false;

    /// The protocol's options: the substrate's ([`MvOptions`]) and any of the certifier's own.
    type Options: ProtocolOptions + AsRef<MvOptions>;

    /// The certifier of the worker in slot `slot`, under `options`.
    fn new(slot: usize, options: &Self::Options) -> Self;

    /// The transaction read `v`, another transaction's committed version (a tombstone for a
    /// deleted row). May abort early.
    fn read(&mut self, mv: &MvCtx<'_, Self::Ext>, v: &Version<Self::Ext>) -> Result<(), Abort>;

    /// The transaction installed a pending version over `prev`, a committed version. May abort
    /// early.
    fn overwrote(
        &mut self,
        mv: &MvCtx<'_, Self::Ext>,
        prev: &Version<Self::Ext>,
    ) -> Result<(), Abort>;

    /// A transaction begins; `read_mostly` if it was declared so
    /// ([`Worker::begin_read_mostly`]; it is told twice then, `false` first).
    #[inline(always)]
    fn begin(&mut self, read_mostly: bool) {
        let _ = read_mostly;
    }

    /// Whether a transaction that wrote nothing must still certify, with a commit timestamp.
    fn must_certify(&self) -> bool;

    /// A transaction that wrote nothing and need not certify commits at its snapshot: waits
    /// for what it depends on (Hekaton's commit dependencies), or aborts.
    fn settle(&mut self, _mv: &MvCtx<'_, Self::Ext>) -> Result<(), Abort> {
        Ok(())
    }

    /// Pre-commit, with commit timestamp `c` drawn and announced: whether the transaction may
    /// commit. `absences` is what phantom tracking learnt (all zero without it).
    fn certify(
        &mut self,
        mv: &MvCtx<'_, Self::Ext>,
        c: u64,
        absences: Absences,
    ) -> Result<(), Abort>;

    /// Post-commit at `c` (the new versions are stamped): publishes what other transactions'
    /// certification reads, and forgets the transaction.
    fn committed(&mut self, mv: &MvCtx<'_, Self::Ext>, c: u64);

    /// The transaction aborts (its pending versions are still on their chains): withdraws what
    /// it published, and forgets it.
    fn aborted(&mut self, mv: &MvCtx<'_, Self::Ext>);
}

/// Index entries read per step of a repeated scan.
const RESCAN_CHUNK: usize = 256;

/// One write of the running transaction: its pending version, at the head of the row's chain.
struct Write<V> {
    table: TableId,
    key: u64,
    rid: RowId,
    version: NonNull<Version<V>>,
    /// The stamp of the version it was installed over (0: none; the history's `UNBORN`).
    prev: u64,
    /// The columns written (what an update logs); every column for a row this transaction
    /// created or revived.
    cols: Columns,
    /// It made the key present where it was not: retired again if the transaction aborts.
    created: bool,
}

impl<V> Clone for Write<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Write<V> {}

/// A worker of a snapshot-based multi-version protocol with certifier `C`.
pub struct MvWorker<'db, C: Certifier> {
    ctx: WorkerCtx<'db, MvRecord<C::Ext>>,
    mv: MvCtx<'db, C::Ext>,
    cert: C,
    writes: Vec<Write<C::Ext>>,
    /// Phantom buckets observed absent and inserted into: (table, bucket word).
    observed: Vec<(TableId, u32)>,
    inserted: Vec<(TableId, u32)>,
    /// Key ranges scanned and keys found absent, to scan again ([`Certifier::RESCANS`]).
    ranges: Vec<(TableId, u64, u64)>,
    /// Called with the commit timestamp once it is drawn (scripted tests).
    prepared: Option<Box<dyn FnMut(u64) + Send + 'db>>,
    scratch: Scratch,
    active: bool,
    /// The running transaction was declared read-only.
    read_only: bool,
    /// It runs at a safe snapshot: nothing it reads is tracked or certified.
    untracked: bool,
    /// The transaction aborted with `snapshot-too-old` and has not committed since: its
    /// retries are protected from the aggressive GC (`MvCtx::protect`).
    too_old: bool,
}

#[inline(always)]
fn is_tombstone<V>(v: &Version<V>) -> bool {
    // Relaxed: `flags` is written before the version is published (the head CAS, Release) or, while
    // pending, by its own writer; callers reached `v` through an Acquire load of the head or of a
    // stamp.
    v.flags.load(Ordering::Relaxed) & TOMBSTONE != 0
}

impl<'db, C: Certifier> MvWorker<'db, C> {
    /// A worker on `ctx` sharing `shared`.
    pub fn new(
        ctx: WorkerCtx<'db, MvRecord<C::Ext>>,
        shared: &'db MvShared<C::Ext>,
        options: &C::Options,
    ) -> Self {
        let mv = MvCtx::new(shared, ctx.slot);
        MvWorker {
            cert: C::new(ctx.slot, options),
            ctx,
            mv,
            writes: Vec::new(),
            observed: Vec::new(),
            inserted: Vec::new(),
            ranges: Vec::new(),
            prepared: None,
            scratch: Scratch::default(),
            active: false,
            read_only: false,
            untracked: false,
            too_old: false,
        }
    }

    /// The row of `key`, if the index has a linked one. A row the GC unlinked is absent for
    /// this transaction: its tombstone is at or below the watermark, so at or below the
    /// snapshot, and no new row for the key can enter the index before the old entry leaves.
    #[inline]
    fn lookup(&mut self, tbl: &Table<MvRecord<C::Ext>>, key: u64) -> Option<RowId> {
        let rid = self.ctx.lookup(tbl, key)?;
        if !tbl.rows.get(rid).header.is_unlinked() {
            return Some(rid);
        }
        self.ctx.forget(tbl.id, key);
        let rid = tbl.index.get(key, &self.ctx.guard)?;
        (!tbl.rows.get(rid).header.is_unlinked()).then_some(rid)
    }

    /// Runs `f` with the commit timestamp whenever a transaction of this worker has drawn
    /// it, before it certifies: a test stops the worker there to script an interleaving
    /// (another worker then sees the transaction committing).
    #[doc(hidden)]
    pub fn on_prepared(&mut self, f: impl FnMut(u64) + Send + 'db) {
        self.prepared = Some(Box::new(f));
    }

    /// Notes that `key` of `tbl` was observed absent (phantom tracking, rescans).
    #[inline(always)]
    fn observed_absent(&mut self, tbl: &Table<MvRecord<C::Ext>>, key: u64) {
        if C::PHANTOMS && !self.untracked {
            self.observed.push((tbl.id, tbl.buckets.slot_of(key) as u32));
        }
        if C::RESCANS && !self.untracked {
            self.ranges.push((tbl.id, key, key));
        }
    }

    /// The version the snapshot sees of `rec` (see [`Certifier::SPECULATIVE`]); a
    /// `snapshot-too-old` abort if the aggressive GC collected it.
    #[inline(always)]
    fn visible(
        &mut self,
        rec: &'db MvRecord<C::Ext>,
    ) -> Result<Option<&'db Version<C::Ext>>, Abort> {
        self.mv.shared.visible_as(rec, self.mv.snapshot, self.mv.own(), C::SPECULATIVE).map_err(
            |TooOld| {
                self.too_old = true;
                Abort::new(AbortReason::SnapshotTooOld)
            },
        )
    }

    /// Hekaton's repeated scans at commit timestamp `c` (see [`Certifier::RESCANS`]).
    fn rescan(&mut self, c: u64) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        let (s, own) = (self.mv.snapshot, self.mv.own());
        let changed = |tbl: &Table<MvRecord<C::Ext>>, rid: RowId| {
            let rec = tbl.rows.get(rid).header;
            !rec.is_unlinked() && self.mv.shared.changed_between(rec, s, c, own)
        };
        let phantom = || Err(Abort::new(AbortReason::PhantomValidation));
        let mut buf = std::mem::take(&mut self.ctx.scan_buf);
        let mut result = Ok(());
        'ranges: for &(t, lo, hi) in &self.ranges {
            let tbl = storage.table(t);
            if lo == hi {
                if tbl.index.get(lo, &self.ctx.guard).is_some_and(|rid| changed(tbl, rid)) {
                    result = phantom();
                    break;
                }
                continue;
            }
            let mut from = lo;
            loop {
                // The range was scanned before, so the index can scan it.
                tbl.index.scan(from, hi, RESCAN_CHUNK, &mut buf, &self.ctx.guard);
                if buf.entries().any(|(_, rid)| changed(tbl, rid)) {
                    result = phantom();
                    break 'ranges;
                }
                match buf.entries().last() {
                    Some((last, _)) if buf.len() == RESCAN_CHUNK && last < hi => from = last + 1,
                    _ => break,
                }
            }
        }
        self.ctx.scan_buf = buf;
        result
    }

    /// Hands a version read to the certifier and the history (not for own versions).
    #[inline(always)]
    fn saw(&mut self, t: TableId, key: u64, v: &Version<C::Ext>) -> Result<(), Abort> {
        let st = v.stamp.load(Ordering::Relaxed);
        if st == self.mv.own() {
            return Ok(());
        }
        if let Some(h) = &mut self.ctx.history {
            // A speculative read names the version by the timestamp it will commit at (if its
            // writer aborts, so does this transaction, and its history is dropped).
            let st = if C::SPECULATIVE && is_pending(st) {
                self.mv.shared.commit_stamp(v).unwrap_or(st)
            } else {
                st
            };
            h.read(t.0, key, u128::from(st));
        }
        if self.untracked {
            return Ok(());
        }
        self.cert.read(&self.mv, v)
    }

    /// The version of `key` this transaction sees, with its row; reports a read of a committed
    /// version (tombstones too) or of the key's absence to the certifier and the history.
    #[inline]
    #[allow(clippy::type_complexity)]
    fn see(
        &mut self,
        tbl: &'db Table<MvRecord<C::Ext>>,
        key: u64,
    ) -> Result<Option<(RowId, &'db Version<C::Ext>)>, Abort> {
        let found = match self.lookup(tbl, key) {
            Some(rid) => self.visible(tbl.rows.get(rid).header)?.map(|v| (rid, v)),
            None => None,
        };
        match found {
            None => {
                if let Some(h) = &mut self.ctx.history {
                    h.range(tbl.id.0, key, key);
                }
                self.observed_absent(tbl, key);
            }
            Some((_, v)) => {
                if is_tombstone(v) {
                    // Its row may be unlinked and the key inserted again as a new row, which
                    // overwrites no version of this one: the bucket stands for the absence.
                    self.observed_absent(tbl, key);
                }
                self.saw(tbl.id, key, v)?
            }
        }
        Ok(found)
    }

    /// The write-set entry of this transaction's pending version `v`.
    fn entry_of(&mut self, v: &Version<C::Ext>) -> &mut Write<C::Ext> {
        let p = v as *const Version<C::Ext>;
        self.writes
            .iter_mut()
            .find(|w| std::ptr::eq(w.version.as_ptr(), p))
            .expect("an own pending version has a write-set entry")
    }

    /// Installs the new version `v` of `key` at `rid`, or gives it back and aborts.
    #[inline]
    fn install(
        &mut self,
        tbl: &Table<MvRecord<C::Ext>>,
        key: u64,
        rid: RowId,
        v: NonNull<Version<C::Ext>>,
        cols: Columns,
        created: bool,
    ) -> Result<(), Abort> {
        match self.mv.install(tbl.rows.get(rid).header, v) {
            Install::Installed(prev) => {
                let table = tbl.id;
                self.writes.push(Write { table, key, rid, version: v, prev, cols, created });
                // SAFETY: our own pending version; its `next` is the version it overwrote,
                // alive while we are in our epoch.
                let old = unsafe { v.as_ref().next.load(Ordering::Relaxed).as_ref() };
                match old {
                    Some(old) => self.cert.overwrote(&self.mv, old),
                    // A row whose every version was taken off (its inserter aborted): this
                    // makes its key present, as an insert of a new row does.
                    None => {
                        if C::PHANTOMS {
                            self.inserted.push((table, tbl.buckets.slot_of(key) as u32));
                        }
                        Ok(())
                    }
                }
            }
            // Our own version would have been seen, and a row we saw present or deleted at or
            // below our snapshot is not unlinkable: both are conflicts if they ever happen.
            Install::Conflict | Install::Own(_) | Install::Unlinked => {
                self.mv.unused(tbl.id, v);
                Err(Abort::new(AbortReason::WriteConflict))
            }
        }
    }

    /// The phantom steps of pre-commit at `c` (see the module docs), or an abort.
    fn certify_phantoms(&self, c: u64) -> Result<Absences, Abort> {
        let storage = self.ctx.storage;
        let mut found = Absences::default();
        for &(t, slot) in &self.observed {
            storage.table(t).buckets.extend_rts(slot as usize, c);
        }
        for &(t, slot) in &self.observed {
            let (wts, _) = storage.table(t).buckets.clock(slot as usize);
            if wts > self.mv.snapshot {
                return Err(Abort::new(AbortReason::PhantomValidation));
            }
            found.makers = found.makers.max(wts);
        }
        for &(t, slot) in &self.inserted {
            storage.table(t).buckets.extend_wts(slot as usize, c);
        }
        for &(t, slot) in &self.inserted {
            let (_, rts) = storage.table(t).buckets.clock(slot as usize);
            found.observers = found.observers.max(if rts == c { c - 1 } else { rts });
        }
        Ok(found)
    }

    /// Starts a transaction (see [`Worker::begin_read_only`] for `read_only`).
    #[inline]
    fn start(&mut self, read_only: bool) {
        let epochs = self.ctx.storage.epochs();
        let mv = &mut self.mv;
        self.ctx.enter(|tbl, key, rec, _| {
            mv.unlink(tbl.id, rec, epochs, |deleted| {
                if C::PHANTOMS {
                    tbl.buckets.raise(key, deleted, 0);
                }
            })
        });
        self.mv.protect(self.too_old);
        self.cert.begin(false);
        self.untracked = if read_only && C::SAFE_SNAPSHOTS {
            self.mv.begin_read_only(self.ctx.storage)
        } else {
            self.mv.begin(self.ctx.storage);
            false
        };
        self.read_only = read_only;
        if let Some(h) = &mut self.ctx.history {
            h.read_point_at(self.mv.snapshot);
        }
        self.active = true;
    }

    /// Refuses a write in a transaction declared read-only.
    #[inline(always)]
    fn writable(&self) -> Result<(), Abort> {
        if self.read_only {
            return Err(Abort::new(AbortReason::ReadOnlyWrite));
        }
        Ok(())
    }

    fn finish(&mut self) {
        self.writes.clear();
        self.observed.clear();
        self.inserted.clear();
        self.ranges.clear();
        self.active = false;
        self.read_only = false;
        self.untracked = false;
        self.mv.finish();
        self.ctx.exit();
    }

    /// Takes the transaction's versions off their chains and ends it.
    fn rollback(&mut self) {
        let storage = self.ctx.storage;
        self.cert.aborted(&self.mv);
        for i in (0..self.writes.len()).rev() {
            let w = self.writes[i];
            let rec = storage.table(w.table).rows.get(w.rid).header;
            self.mv.retract(w.table, rec, w.version, storage.epochs());
            if w.created {
                // The key is absent again: the GC unlinks the row once nobody can see it.
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
        self.finish();
    }
}

/// A worker dropped with a transaction open (a panic in a procedure, or a caller that neither
/// commits nor aborts) rolls it back: what it holds would otherwise block others for good.
impl<C: Certifier> Drop for MvWorker<'_, C> {
    fn drop(&mut self) {
        self.abort();
    }
}

impl<C: Certifier> Worker for MvWorker<'_, C> {
    crate::protocols::common::forward!(ctx: scan prefetch log_epoch);

    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.ctx.pinned(f)
    }

    fn begin(&mut self) {
        self.start(false);
    }

    /// As [`Worker::begin`], telling the certifier ([`Certifier::begin`]).
    fn begin_read_mostly(&mut self) {
        self.start(false);
        self.cert.begin(true);
    }

    /// At a safe snapshot without certification when the certifier allows it (see the module
    /// docs); writes fail with `read-only-write` either way.
    fn begin_read_only(&mut self) {
        self.start(true);
    }

    #[inline]
    fn read_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let Some((_, v)) = self.see(tbl, key)? else { return Ok(None) };
        if is_tombstone(v) {
            return Ok(None);
        }
        let buf = self.scratch.get(tbl.spec.row_size);
        self.mv.row(t, v).read_cols_into(buf, &tbl.projection, cols);
        Ok(Some(f(buf)))
    }

    /// A blind write: the new version is `value`, copied once (no copy of the old one).
    #[inline]
    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        let Some((rid, v)) = self.see(tbl, key)? else { return Ok(false) };
        if is_tombstone(v) {
            return Ok(false);
        }
        // Relaxed: only this worker stores its own pending stamp, so the comparison needs no
        // ordering.
        if v.stamp.load(Ordering::Relaxed) == self.mv.own() {
            self.mv.row(t, v).write_from(value);
            self.entry_of(v).cols = ALL_COLUMNS;
            return Ok(true);
        }
        let nv = self.mv.alloc(t, 0);
        // SAFETY: our own version, not yet published.
        self.mv.row(t, unsafe { nv.as_ref() }).write_from(value);
        self.install(tbl, key, rid, nv, ALL_COLUMNS, false)?;
        Ok(true)
    }

    #[inline]
    fn update_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        reads: Columns,
        writes: Columns,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        let Some((rid, v)) = self.see(tbl, key)? else { return Ok(None) };
        if is_tombstone(v) {
            return Ok(None);
        }
        let (p, len) = (&tbl.projection, tbl.spec.row_size);
        let old = self.mv.row(t, v);
        let buf = self.scratch.get(len);
        old.read_cols_into(buf, p, reads | writes);
        // Relaxed: only this worker stores its own pending stamp.
        if v.stamp.load(Ordering::Relaxed) == self.mv.own() {
            // Our own pending version: nobody else reads it, so it is written in place.
            let out = apply_update(p, writes, buf, f)?;
            old.write_cols_from(buf, p, writes);
            self.entry_of(v).cols |= writes;
            return Ok(Some(out));
        }
        let out = apply_update(p, writes, buf, f)?;
        let nv = self.mv.alloc(t, 0);
        // SAFETY: our own version, not yet published.
        let new = self.mv.row(t, unsafe { nv.as_ref() });
        new.copy_from(&old);
        new.write_cols_from(buf, p, writes);
        self.install(tbl, key, rid, nv, writes, false)?;
        Ok(Some(out))
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        let nv = self.mv.alloc(t, 0);
        // SAFETY: our own version, not yet published.
        self.mv.row(t, unsafe { nv.as_ref() }).write_from(value);
        let mut spin = crate::util::SpinWait::default();
        loop {
            // Insert first (one index traversal when the key is new, the common case).
            let fresh = match self.ctx.alloc(t) {
                Ok(r) => r,
                Err(a) => {
                    self.mv.unused(t, nv);
                    return Err(a);
                }
            };
            let frec = tbl.rows.get(fresh).header;
            frec.init(nv);
            let rid = match tbl.index.insert_if_absent(key, fresh, &self.ctx.guard) {
                Ok(()) => {
                    let w = Write {
                        table: t,
                        key,
                        rid: fresh,
                        version: nv,
                        prev: 0,
                        cols: ALL_COLUMNS,
                        created: true,
                    };
                    self.writes.push(w);
                    if C::PHANTOMS {
                        self.inserted.push((t, tbl.buckets.slot_of(key) as u32));
                    }
                    return Ok(true);
                }
                Err(existing) => {
                    frec.clear();
                    self.ctx.caches[t.index()].release(fresh);
                    existing
                }
            };
            let rec = tbl.rows.get(rid).header;
            if rec.is_unlinked() {
                // The GC is removing the old row's index entry.
                spin.spin();
                continue;
            }
            let seen = match self.visible(rec) {
                Ok(seen) => seen,
                Err(a) => {
                    self.mv.unused(t, nv);
                    return Err(a);
                }
            };
            // Relaxed: only this worker stores its own pending stamp.
            let own = seen.is_some_and(|v| v.stamp.load(Ordering::Relaxed) == self.mv.own());
            match seen {
                None => self.observed_absent(tbl, key),
                Some(v) => {
                    if let Err(a) = self.saw(t, key, v) {
                        self.mv.unused(t, nv);
                        return Err(a);
                    }
                }
            }
            match seen {
                Some(v) if !is_tombstone(v) => {
                    self.mv.unused(t, nv);
                    return Ok(false);
                }
                Some(v) if own => {
                    // We deleted it in this transaction: our version becomes the row again.
                    self.mv.row(t, v).write_from(value);
                    v.flags.store(0, Ordering::Relaxed);
                    let e = self.entry_of(v);
                    (e.cols, e.created) = (ALL_COLUMNS, true);
                    self.mv.unused(t, nv);
                    return Ok(true);
                }
                _ => {
                    self.install(tbl, key, rid, nv, ALL_COLUMNS, true)?;
                    return Ok(true);
                }
            }
        }
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        let Some((rid, v)) = self.see(tbl, key)? else { return Ok(false) };
        if is_tombstone(v) {
            return Ok(false);
        }
        // Relaxed: only this worker stores its own pending stamp; the TOMBSTONE flag below is
        // published with the stamp at commit (Release).
        if v.stamp.load(Ordering::Relaxed) == self.mv.own() {
            v.flags.store(TOMBSTONE, Ordering::Relaxed);
            return Ok(true);
        }
        let nv = self.mv.alloc(t, TOMBSTONE);
        self.install(tbl, key, rid, nv, ALL_COLUMNS, false)?;
        Ok(true)
    }

    /// The index entries and slots first, then (once the slots are on their way) the newest
    /// version each slot points to: three stages, each overlapping its misses.
    #[inline]
    fn prefetch_many(&mut self, keys: &[(TableId, u64, Columns)]) {
        self.ctx.prefetch_many(keys);
        for &(t, key, cols) in keys {
            let Some(tbl) = self.ctx.storage.try_table(t) else { continue };
            if let Some(rid) = self.ctx.lookup(tbl, key) {
                let rec = tbl.rows.get(rid).header;
                self.mv.shared.prefetch_newest(t, rec, &tbl.projection, cols);
            }
        }
    }

    fn commit(&mut self) -> Result<(), Abort> {
        if self.writes.is_empty()
            && self.inserted.is_empty()
            && self.observed.is_empty()
            && !self.cert.must_certify()
        {
            // A read-only transaction with nothing to certify is serialized at its snapshot.
            if let Err(a) = self.cert.settle(&self.mv) {
                self.rollback();
                return Err(a);
            }
            if let Some(h) = &mut self.ctx.history {
                h.serial_point_at(self.mv.snapshot);
                h.committed();
            }
            self.cert.committed(&self.mv, self.mv.snapshot);
            self.too_old = false;
            self.ctx.phase(CommitPhase::Validated);
            self.finish();
            return self.ctx.commit_returning();
        }
        let c = self.mv.committing();
        let wrote = !self.writes.is_empty();
        if wrote {
            // The pending versions, installed at write time, hold the write set.
            self.ctx.phase(CommitPhase::Locked);
        }
        if let Some(f) = &mut self.prepared {
            f(c);
        }
        // The two phantom mechanisms are independent switches: a certifier may use both.
        let rescanned = if C::RESCANS { self.rescan(c) } else { Ok(()) };
        let certified = rescanned
            .and_then(
                |()| if C::PHANTOMS { self.certify_phantoms(c) } else { Ok(Absences::default()) },
            )
            .and_then(|abs| self.cert.certify(&self.mv, c, abs));
        if let Err(a) = certified {
            self.rollback();
            return Err(a);
        }
        self.ctx.phase(CommitPhase::Validated);
        let storage = self.ctx.storage;
        if let Some(log) = self.ctx.log.as_mut().filter(|_| wrote) {
            // Logged before the versions are stamped: whoever reads them reads after they are
            // in the log (the log epochs' dependency rule, see `durability::log`), and claims
            // its place in a central log after this one (ERMIA's LSN order). The log epoch
            // stays in flight until `commit_returning`, after the stamps: a checkpoint that
            // waits for the epoch reads the stamped versions.
            log.begin(c, self.writes.len() as u32);
            for w in &self.writes {
                let tbl = storage.table(w.table);
                // SAFETY: our pending version, alive until we stamp or retract it.
                let v = unsafe { w.version.as_ref() };
                if is_tombstone(v) {
                    log.delete(w.table.0, c, w.key);
                } else {
                    let cols = if w.created { ALL_COLUMNS } else { w.cols };
                    log.put_row(
                        w.table.0,
                        c,
                        w.key,
                        self.mv.row(w.table, v),
                        &tbl.projection,
                        cols,
                    );
                }
            }
            self.ctx.log_epoch = log.end();
        }
        if wrote {
            self.ctx.phase(CommitPhase::Logged);
        }
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            // SAFETY: as above.
            let v = unsafe { w.version.as_ref() };
            let present = !is_tombstone(v);
            // Release: the version's payload before its stamp (pairs with `visible`'s Acquire).
            v.stamp.store(c, Ordering::Release);
            if let Some(h) = &mut self.ctx.history {
                h.write(w.table.0, w.key, u128::from(c), u128::from(w.prev), present);
            }
            self.mv.written(w.table, w.rid, c);
            if !present {
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
        if wrote {
            self.ctx.phase(CommitPhase::Installed);
        }
        self.cert.committed(&self.mv, c);
        if let Some(h) = &mut self.ctx.history {
            h.serial_point_at(c);
            h.committed();
        }
        self.too_old = false;
        self.finish();
        self.ctx.commit_returning()
    }

    fn abort(&mut self) {
        if self.active {
            self.rollback();
        }
    }
}

impl<'db, C: Certifier> ScanSteps<'db, MvRecord<C::Ext>> for MvWorker<'db, C> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, MvRecord<C::Ext>> {
        &mut self.ctx
    }

    /// A snapshot needs no protection; a certifier with phantom tracking notes the buckets.
    #[inline(always)]
    fn cover(
        &mut self,
        tbl: &'db Table<MvRecord<C::Ext>>,
        t: TableId,
        batch: &Batch,
    ) -> Result<(), Abort> {
        if C::PHANTOMS && !self.untracked {
            self.observed.extend(tbl.buckets.batch_slots(batch).map(|s| (t, s as u32)));
        }
        Ok(())
    }

    #[inline(always)]
    fn covered(&mut self, t: TableId, lo: u64, hi: u64) {
        if C::RESCANS && !self.untracked {
            self.ranges.push((t, lo, hi));
        }
    }

    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<MvRecord<C::Ext>>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        let rec = tbl.rows.get(rid).header;
        if rec.is_unlinked() {
            return Ok(None);
        }
        let Some(v) = self.visible(rec)? else { return Ok(None) };
        self.saw(t, key, v)?;
        if is_tombstone(v) {
            return Ok(None);
        }
        let data = self.scratch.get(tbl.spec.row_size);
        self.mv.row(t, v).read_into(data);
        Ok(Some(data))
    }
}

/// A protocol made of the multi-version worker and certifier `C` (`si`, `ermia-ssn`,
/// `ermia-ssi`): the substrate's shared state and the options they all take.
pub struct MvProtocol<C: Certifier> {
    options: C::Options,
    mv: MvShared<C::Ext>,
    _c: PhantomData<fn() -> C>,
}

/// The options of the protocols on [`MvProtocol`] (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct MvOptions {
    /// Microseconds between refreshes of the GC watermark.
    pub gc_interval_us: u64,
    /// AggressiveGC's age bound in microseconds, 0 for off (see `protocols::mv`).
    pub aggressive_gc_us: u64,
    /// Where versions come from (`storage::version`).
    pub version_alloc: VersionAlloc,
    /// Freed versions are overwritten (a debugging aid).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub version_poison: bool,
}

impl Default for MvOptions {
    fn default() -> Self {
        MvOptions {
            gc_interval_us: 10,
            aggressive_gc_us: 0,
            version_alloc: VersionAlloc::Pool,
            version_poison: false,
        }
    }
}

impl MvOptions {
    /// The substrate's options, for a certifier's options type to list before its own.
    pub const COMMON_SPECS: [OptionSpec; 4] = [
        OptionSpec {
            name: "gc-interval-us",
            values: "1 to 1000000",
            default: "10",
            help: "microseconds between refreshes of the GC watermark (CCBench's RapidGC interval)",
        },
        OptionSpec {
            name: "aggressive-gc-us",
            values: "0 to 100000000",
            default: "0",
            help: "AggressiveGC (CCBench §7.3): versions older than this many microseconds are \
                   collected even if a running transaction may need them, which then aborts \
                   with snapshot-too-old and is retried protected; 0 is off",
        },
        OptionSpec {
            name: "version-alloc",
            values: "pool | malloc",
            default: "pool",
            help: "where versions come from: per-worker pools that reuse reclaimed versions \
                   (CCBench's AssertiveVersionReuse) or the global allocator, a call per version \
                   allocated and freed",
        },
        OptionSpec {
            name: "version-poison",
            values: "on | off",
            default: "off",
            help: "debugging: overwrite every freed version (stamp 0, payload bytes 0xA5), so \
                   that a read of a version after it was freed shows as a row no writer wrote",
        },
    ];
}

impl AsRef<MvOptions> for MvOptions {
    fn as_ref(&self) -> &MvOptions {
        self
    }
}

impl ProtocolOptions for MvOptions {
    const SPECS: &'static [OptionSpec] = &MvOptions::COMMON_SPECS;

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "gc-interval-us" => self.gc_interval_us = number(name, value, 1, 1_000_000)?,
            "aggressive-gc-us" => self.aggressive_gc_us = number(name, value, 0, 100_000_000)?,
            "version-alloc" => {
                self.version_alloc = match value {
                    "pool" => VersionAlloc::Pool,
                    "malloc" => VersionAlloc::Malloc,
                    _ => return Err(format!("--opt {name}={value}: expected pool or malloc")),
                }
            }
            "version-poison" => self.version_poison = switch(name, value)?,
            _ => return Err(format!("--opt {name}: not an option of this protocol")),
        }
        Ok(())
    }
}

impl<C: Certifier> MvProtocol<C> {
    /// The multi-version substrate (version statistics, the watermark).
    pub fn substrate(&self) -> &MvShared<C::Ext> {
        &self.mv
    }
}

impl<C: Certifier> Protocol for MvProtocol<C> {
    const NAME: &'static str = C::NAME;
    const DESCRIPTION: &'static str = C::DESCRIPTION;
    const CAPS: Capabilities = C::CAPS;
    const BUCKET_CLOCKS: bool = C::PHANTOMS;
    type Record = MvRecord<C::Ext>;
    type Worker<'db> = MvWorker<'db, C>;
    type Options = C::Options;

    fn new(options: C::Options, setup: &Setup<'_>) -> Result<Self, Error> {
        let (most, why) = C::MAX_WORKERS;
        if setup.max_workers > most {
            return Err(Error::Config(format!(
                "{} takes at most {most} workers ({why}); this database was asked for {}",
                C::NAME,
                setup.max_workers
            )));
        }
        let o = options.as_ref();
        let gc = Gc {
            interval_us: o.gc_interval_us,
            aggressive_us: o.aggressive_gc_us,
            alloc: o.version_alloc,
            poison: o.version_poison,
        };
        let mv = MvShared::new(setup.tables, setup.max_workers, gc);
        Ok(MvProtocol { options, mv, _c: PhantomData })
    }

    fn options(&self) -> &C::Options {
        &self.options
    }

    fn load(&self, table: TableId, row: RowRef<'_, MvRecord<C::Ext>>, payload: &[u8]) {
        self.mv.load(table, row, payload);
    }

    fn is_present(&self, rec: &MvRecord<C::Ext>) -> bool {
        self.mv.latest_committed(rec).is_some_and(|v| !is_tombstone(v))
    }

    fn read_latest(
        &self,
        table: TableId,
        row: RowRef<'_, MvRecord<C::Ext>>,
        buf: &mut [u8],
    ) -> bool {
        self.mv.read_committed(table, row.header, buf).is_some()
    }

    fn read_committed(
        &self,
        table: TableId,
        _: u64,
        row: RowRef<'_, MvRecord<C::Ext>>,
        buf: &mut [u8],
    ) -> Option<u64> {
        self.mv.read_committed(table, row.header, buf)
    }

    fn worker(db: &Database<Self>) -> Result<MvWorker<'_, C>, Error> {
        let p = db.protocol();
        Ok(MvWorker::new(db.worker_ctx()?, &p.mv, &p.options))
    }

    fn versions(&self, db: &Database<Self>) -> Option<VersionReport> {
        Some(self.mv.report(db.storage()))
    }

    fn teardown(&self, storage: &Storage<MvRecord<C::Ext>>) {
        self.mv.teardown(storage);
    }

    /// A version per row: a new row's first version comes from its table's store (updates
    /// recycle versions through the workers' pools once the GC keeps up).
    fn prefault(&self, table: TableId, rows: u64, budget: usize) -> usize {
        self.mv.stores[table.index()].prefault(rows, budget)
    }
}
