//! The `2pl-ordered` worker: every declared lock taken at begin in one global order, then the
//! transaction runs through a locked direct worker; locks released after commit or abort.

use super::record::OrderedRecord;
use super::{TwoPlOrdered, Undeclared};
use crate::engine::procedure::AccessSet;
use crate::engine::{AccessMode, Worker};
use crate::error::{Abort, AbortReason};
use crate::protocols::common::table;
use crate::protocols::inplace::direct::DirectWorker;
use crate::storage::phantom::RangeBuckets;
use crate::storage::projection::Columns;
use crate::storage::reclaim::Unlink;
use crate::storage::{Storage, TableId};
use crate::util::SpinWait;
use rustc_hash::FxBuildHasher;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

/// Shared (key read, range scan) mode bit.
const SHARED: u8 = 1;
/// Exclusive (key write) or insert (range word) mode bit.
const EXCL: u8 = 2;

/// Bit of a range word's lock id (key-lock words are below it).
const RANGE: u64 = 1 << 63;
/// Bit of a coarse range word's lock id.
const COARSE: u64 = 1 << 62;

/// A fine range word's lock id (the table's phantom bucket word `slot`): above every key-lock
/// word, so that the global order takes key locks first, then fine range words by (table,
/// word), then coarse ones.
#[inline]
fn bucket_id(t: TableId, slot: usize) -> u64 {
    RANGE | u64::from(t.0) << 32 | slot as u64
}

/// A coarse range word's lock id.
#[inline]
fn coarse_id(t: TableId, slot: usize) -> u64 {
    RANGE | COARSE | u64::from(t.0) << 32 | slot as u64
}

/// A declared range over more fine buckets than this takes coarse range words instead.
const FINE_RANGE_MAX: u64 = 64;

/// Whether a range over `[lo, hi]` covers more fine buckets (of `2^shift` keys) than a
/// declared range takes one by one.
#[inline]
fn wide(shift: u32, lo: u64, hi: u64) -> bool {
    (hi >> shift) - (lo >> shift) >= FINE_RANGE_MAX
}

/// One lock: its id (a key-lock word, or a bucket word by [`bucket_id`]) and mode bits.
#[derive(Clone, Copy, Debug)]
struct Hold {
    id: u64,
    mode: u8,
}

/// A `2pl-ordered` worker.
pub struct OrderedWorker<'db> {
    inner: DirectWorker<'db>,
    storage: &'db Storage<OrderedRecord>,
    protocol: &'db TwoPlOrdered,
    /// The locks taken at begin, sorted by id (binary-searched per operation).
    declared: Vec<Hold>,
    /// Locks taken during the transaction, without waiting, for accesses no lock taken at
    /// begin covers (a key inside a declared range, or any access under `undeclared=no-wait`).
    extra: HashMap<u64, u8, FxBuildHasher>,
    /// The attempt's declared ranges (none for an undeclared attempt): a scan inside one needs
    /// no further lock, and a write inside one takes its key lock without waiting. A declared
    /// key holds its locks from begin, so an access that needs a lock not held is covered by
    /// a declared range or not declared at all ([`OrderedWorker::admit`]).
    ranges: AccessSet,
    /// Whether the attempt was begun with a declared set.
    declared_attempt: bool,
    slots: Vec<usize>,
}

/// An access that needs a lock the attempt does not hold: what [`OrderedWorker::admit`]
/// checks against the declared set.
#[derive(Clone, Copy)]
struct Access {
    table: TableId,
    lo: u64,
    hi: u64,
    mode: AccessMode,
}

impl Access {
    fn key(table: TableId, key: u64, mode: AccessMode) -> Self {
        Access { table, lo: key, hi: key, mode }
    }
}

impl<'db> OrderedWorker<'db> {
    pub(super) fn new(inner: DirectWorker<'db>, protocol: &'db TwoPlOrdered) -> Self {
        OrderedWorker {
            storage: inner.storage(),
            inner,
            protocol,
            declared: Vec::new(),
            extra: HashMap::default(),
            ranges: AccessSet::default(),
            declared_attempt: false,
            slots: Vec::new(),
        }
    }

    /// The range words a range lock id names.
    #[inline]
    fn range_words(&self, id: u64) -> &'db RangeBuckets {
        let t = ((id >> 32) as u32 & 0x3FFF_FFFF) as usize;
        if id & COARSE != 0 {
            &self.protocol.coarse[t].words
        } else {
            &self.storage.table(TableId(t as u32)).buckets
        }
    }

    /// Tries to take `h`, or waits for it (at begin, in the global order: see the module
    /// docs of `two_pl_ordered`).
    fn take(&self, h: Hold, wait: bool) -> bool {
        let mut spin = SpinWait::default();
        loop {
            let ok = if h.id & RANGE == 0 {
                let w = h.id as u32;
                if h.mode & EXCL != 0 {
                    self.protocol.keys.try_write(w)
                } else {
                    self.protocol.keys.try_read(w)
                }
            } else {
                let b = self.range_words(h.id);
                let slot = h.id as u32 as usize;
                match h.mode {
                    SHARED => b.try_lock_scan(slot, 0),
                    EXCL => b.try_lock_insert(slot, 0),
                    _ => b.try_lock_both(slot),
                }
            };
            if ok || !wait {
                return ok;
            }
            spin.spin();
        }
    }

    /// Releases `h` (all its mode bits).
    fn drop_hold(&self, h: Hold) {
        if h.id & RANGE == 0 {
            if h.mode & EXCL != 0 {
                self.protocol.keys.unlock_write(h.id as u32);
            } else {
                self.protocol.keys.unlock_read(h.id as u32);
            }
        } else {
            let b = self.range_words(h.id);
            let slot = h.id as u32 as usize;
            if h.mode & SHARED != 0 {
                b.unlock_scan(slot);
            }
            if h.mode & EXCL != 0 {
                b.unlock_insert(slot);
            }
        }
    }

    /// The mode held on lock `id` (0 if none).
    #[inline]
    fn held(&self, id: u64) -> u8 {
        match self.declared.binary_search_by_key(&id, |h| h.id) {
            Ok(i) => self.declared[i].mode,
            Err(_) => self.extra.get(&id).copied().unwrap_or(0),
        }
    }

    /// Makes sure lock `id` is held with mode bit `need` for `access`; when it is not, takes
    /// or strengthens it without waiting if [`OrderedWorker::admit`] admits the access.
    #[inline]
    fn ensure(&mut self, id: u64, need: u8, access: Access) -> Result<(), Abort> {
        let have = self.held(id);
        let key_lock = id & RANGE == 0;
        // A key's write lock covers reading it.
        if have & need != 0 || (key_lock && have & EXCL != 0) {
            return Ok(());
        }
        self.strengthen(id, have, need, access)
    }

    /// Whether an access that needs a lock not taken at begin may take it (without waiting):
    /// under `undeclared=refuse`, only one inside a declared range (whose keys' locks are not
    /// taken at begin). A declared key's locks are all held from begin, so an access to it
    /// never gets here.
    fn admit(&self, a: Access) -> Result<(), Abort> {
        if self.protocol.options.undeclared == Undeclared::NoWait {
            return Ok(());
        }
        if !self.declared_attempt {
            return Err(Abort::new(AbortReason::Undeclared));
        }
        let covered = self.ranges.covers_range(a.table, a.lo, a.hi, a.mode);
        if covered {
            Ok(())
        } else {
            Err(Abort::new(AbortReason::AccessSetMismatch))
        }
    }

    #[cold]
    fn strengthen(&mut self, id: u64, have: u8, need: u8, access: Access) -> Result<(), Abort> {
        self.admit(access)?;
        let ok = if have == 0 {
            self.take(Hold { id, mode: need }, false)
        } else if id & RANGE == 0 {
            // Held shared, needed exclusive.
            self.protocol.keys.try_upgrade(id as u32)
        } else {
            let b = self.range_words(id);
            let slot = id as u32 as usize;
            if need == EXCL {
                b.try_lock_insert(slot, 1)
            } else {
                b.try_lock_scan(slot, 1)
            }
        };
        if !ok {
            return Err(Abort::new(AbortReason::LockConflict));
        }
        let mode = if id & RANGE == 0 { need } else { have | need };
        match self.declared.binary_search_by_key(&id, |h| h.id) {
            Ok(i) => self.declared[i].mode = mode,
            Err(_) => {
                self.extra.insert(id, mode);
            }
        }
        Ok(())
    }

    /// Locks for reading `key`: its key lock shared, unless a range hold (fine or coarse) on
    /// its bucket already covers it.
    #[inline]
    fn for_read(&mut self, t: TableId, key: u64) -> Result<(), Abort> {
        let w = u64::from(self.protocol.keys.word_of(t, key));
        if self.held(w) != 0 {
            return Ok(());
        }
        let slot = table(self.storage, t)?.buckets.slot_of(key);
        if self.held(bucket_id(t, slot)) & SHARED != 0 {
            return Ok(());
        }
        let coarse = &self.protocol.coarse[t.index()].words;
        if self.held(coarse_id(t, coarse.slot_of(key))) & SHARED != 0 {
            return Ok(());
        }
        self.ensure(w, SHARED, Access::key(t, key, AccessMode::Read))
    }

    /// Locks for writing `key`: its key lock exclusive and its range words in insert mode
    /// (the coarse one too once the table has coarse ranges).
    #[inline]
    fn for_write(&mut self, t: TableId, key: u64) -> Result<(), Abort> {
        let slot = table(self.storage, t)?.buckets.slot_of(key);
        let access = Access::key(t, key, AccessMode::Write);
        self.ensure(u64::from(self.protocol.keys.word_of(t, key)), EXCL, access)?;
        self.ensure(bucket_id(t, slot), EXCL, access)?;
        let coarse = &self.protocol.coarse[t.index()];
        if coarse.on.load(Ordering::SeqCst) {
            // SeqCst: see `Coarse`; a table turned coarse after this transaction began waits
            // for it to end, so reading `false` here is safe too.
            self.ensure(coarse_id(t, coarse.words.slot_of(key)), EXCL, access)?;
        }
        Ok(())
    }

    /// Begins the direct worker, whose GC unlinks a deleted row only under its key's lock: a
    /// transaction holding the key may be reviving the row in place (the insert of a deleted
    /// key), and an unlink then would take the revived row out of the index.
    fn enter(&mut self) {
        let keys = &self.protocol.keys;
        self.inner.begin_with(|t, key, r, safe| {
            let w = keys.word_of(t, key);
            if !keys.try_write(w) {
                return Unlink::Busy;
            }
            let done = r.unlink(safe);
            keys.unlock_write(w);
            done
        });
    }

    fn release(&mut self) {
        for i in 0..self.declared.len() {
            self.drop_hold(self.declared[i]);
        }
        for (&id, &mode) in &self.extra {
            self.drop_hold(Hold { id, mode });
        }
        self.declared.clear();
        self.extra.clear();
        self.ranges.clear();
    }
}

/// A worker dropped with a transaction open rolls it back and releases its locks.
impl Drop for OrderedWorker<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}

impl Worker for OrderedWorker<'_> {
    crate::protocols::common::forward!(inner: prefetch prefetch_many log_epoch);

    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.inner.pinned(f)
    }

    /// An undeclared attempt: its first operation fails with `undeclared`, unless
    /// `undeclared=no-wait` takes every lock when an operation needs it, without waiting (a
    /// conflict aborts it, as `2pl-nowait` would).
    fn begin(&mut self) {
        self.declared_attempt = false;
        self.enter();
    }

    /// Takes every lock of `set` (sealed or not) in the global order, waiting for each.
    fn begin_declared(&mut self, set: &AccessSet) {
        // Before this worker enters its epoch: a wide range may have to turn its table coarse,
        // which waits for every running transaction to end.
        for (t, lo, hi, _) in set.ranges() {
            if let Ok(tbl) = table(self.storage, t) {
                if lo <= hi && wide(tbl.buckets.shift(), lo, hi) {
                    self.protocol.coarse[t.index()].turn_on(self.storage.epochs());
                }
            }
        }
        self.enter();
        let mut wanted = std::mem::take(&mut self.declared);
        wanted.clear();
        for (t, key, mode) in set.keys() {
            let w = u64::from(self.protocol.keys.word_of(t, key));
            match mode {
                AccessMode::Read => wanted.push(Hold { id: w, mode: SHARED }),
                AccessMode::Write | AccessMode::Accumulate => {
                    wanted.push(Hold { id: w, mode: EXCL });
                    // An unknown table is refused by the operation itself.
                    if let Ok(tbl) = table(self.storage, t) {
                        let slot = tbl.buckets.slot_of(key);
                        wanted.push(Hold { id: bucket_id(t, slot), mode: EXCL });
                        let coarse = &self.protocol.coarse[t.index()];
                        // SeqCst, after entering the epoch: pairs with `Coarse::turn_on`.
                        if coarse.on.load(Ordering::SeqCst) {
                            let slot = coarse.words.slot_of(key);
                            wanted.push(Hold { id: coarse_id(t, slot), mode: EXCL });
                        }
                    }
                }
            }
        }
        for (t, lo, hi, mode) in set.ranges() {
            let Ok(tbl) = table(self.storage, t) else { continue };
            if lo > hi {
                continue;
            }
            let mode_bits = match mode {
                AccessMode::Read => SHARED,
                AccessMode::Write | AccessMode::Accumulate => SHARED | EXCL,
            };
            if wide(tbl.buckets.shift(), lo, hi) {
                let coarse = &self.protocol.coarse[t.index()].words;
                coarse.range_slots(lo, hi, &mut self.slots);
                wanted.extend(
                    self.slots.iter().map(|&s| Hold { id: coarse_id(t, s), mode: mode_bits }),
                );
            } else {
                tbl.buckets.range_slots(lo, hi, &mut self.slots);
                wanted.extend(
                    self.slots.iter().map(|&s| Hold { id: bucket_id(t, s), mode: mode_bits }),
                );
            }
            self.ranges.range(t, lo, hi, mode);
        }
        wanted.sort_unstable_by_key(|h| h.id);
        // One hold per lock, with every mode asked of it.
        wanted.dedup_by(|next, kept| {
            let same = next.id == kept.id;
            if same {
                kept.mode |= next.mode;
            }
            same
        });
        for h in &mut wanted {
            // A key lock wanted shared and exclusive is taken exclusive.
            if h.id & RANGE == 0 && h.mode & EXCL != 0 {
                h.mode = EXCL;
            }
            self.take(*h, true);
        }
        self.declared = wanted;
        self.declared_attempt = true;
    }

    #[inline]
    fn read_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.for_read(t, key)?;
        self.inner.read_cols(t, key, cols, f)
    }

    #[inline]
    fn read_for_update<T>(
        &mut self,
        t: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.for_write(t, key)?;
        self.inner.read_for_update(t, key, f)
    }

    #[inline]
    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.for_write(t, key)?;
        self.inner.write(t, key, value)
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
        self.for_write(t, key)?;
        self.inner.update_cols(t, key, reads, writes, f)
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.for_write(t, key)?;
        self.inner.insert(t, key, value)
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        self.for_write(t, key)?;
        self.inner.delete(t, key)
    }

    /// Inside a declared range nothing more is locked; otherwise the range's bucket words are
    /// taken in scan mode (without waiting) before the rows are read.
    fn scan(
        &mut self,
        t: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        if lo <= hi && !self.ranges.covers_range(t, lo, hi, AccessMode::Read) {
            let tbl = table(self.storage, t)?;
            let mut slots = std::mem::take(&mut self.slots);
            tbl.buckets.range_slots(lo, hi, &mut slots);
            let access = Access { table: t, lo, hi, mode: AccessMode::Read };
            let taken =
                slots.iter().try_for_each(|&s| self.ensure(bucket_id(t, s), SHARED, access));
            self.slots = slots;
            taken?;
        }
        self.inner.scan(t, lo, hi, limit, f)
    }

    /// Every lock is still held at the serialization point; they are released before a
    /// `--sync commit` wait.
    fn commit(&mut self) -> Result<(), Abort> {
        self.inner.commit_held();
        self.release();
        self.inner.returning()
    }

    fn abort(&mut self) {
        self.inner.abort();
        self.release();
    }
}
