//! The read phase (§3.2, §3.3): finding the version a transaction's timestamp sees, early
//! aborts, the transaction's own versions (inlined or pooled), promotions, and the range scans'
//! steps.

use super::*;

/// The version visible at `ts` in the chain starting at `from` (versions above `ts` skipped,
/// pending ones waited for or, with `wait` off, an abort; aborted ones skipped).
#[inline(always)]
pub(super) fn search<'a>(
    mut cur: Option<&'a CVersion>,
    ts: u64,
    wait: bool,
) -> Result<Found<'a>, Abort> {
    let mut found = Found::NOTHING;
    while let Some(v) = cur {
        if wts(v) >= ts {
            // Above the timestamp, or this transaction's own pending version (equal stamp).
            if wts(v) > ts {
                found.later = Some(v);
                found.newer |= matches!(status(v), PENDING | COMMITTED | DELETED);
            }
            cur = next(v);
            continue;
        }
        let mut spin = SpinWait::default();
        loop {
            match status(v) {
                PENDING if wait => spin.spin(),
                PENDING => return Err(Abort::new(AbortReason::WriteConflict)),
                s @ (COMMITTED | DELETED) => {
                    found.seen = Some(v);
                    found.wts = wts(v);
                    found.present = s == COMMITTED;
                    return Ok(found);
                }
                // ABORTED; UNUSED cannot be on a chain a walker reaches inside its epoch.
                _ => break,
            }
        }
        cur = next(v);
    }
    Ok(found)
}

/// Whether the version `w` goes in above (`below`) is what the write expects: the row present
/// for an update or deletion, absent (nothing, or a deletion) for an insert.
#[inline(always)]
pub(super) fn expect(w: &Write, below: Option<&CVersion>) -> Result<(), Abort> {
    let present = below.is_some_and(|v| status(v) == COMMITTED);
    match (w.over_present, present) {
        (false, true) => Err(Abort::new(AbortReason::InsertConflict)),
        (true, false) => Err(Abort::new(AbortReason::WriteConflict)),
        _ => Ok(()),
    }
}

impl<'db> ScanSteps<'db, CicadaRecord> for CicadaWorker<'db> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, CicadaRecord> {
        &mut self.ctx
    }

    /// Observes the batch's buckets (their versions, checked at validation, and their `rts`
    /// raised to our timestamp) before its entries are read from the index.
    #[inline]
    fn cover(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        t: TableId,
        batch: &Batch,
    ) -> Result<(), Abort> {
        if !self.untracked {
            for slot in tbl.buckets.batch_slots(batch) {
                let version = tbl.buckets.version(slot);
                self.observed.push(Observed { table: t, slot: slot as u32, version });
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        let (v, stamp) = if let Some(i) = self.find_write(t, rid) {
            let w = self.writes[i];
            if w.tombstone {
                return Ok(None);
            }
            (as_ref(w.version), None)
        } else {
            let rec = tbl.rows.get(rid).header;
            let found = match self.read_version(tbl, key, rec)? {
                Ok(found) => found,
                // Unlinked: its deletion is below `min_rts`, so below our timestamp.
                Err(Unlinked) => return Ok(None),
            };
            match found.row() {
                Some(v) => (v, Some(found.wts)),
                _ => return Ok(None),
            }
        };
        let len = tbl.spec.row_size;
        self.row(t, v).read_into(self.scratch.get(len));
        if let Some(stamp) = stamp {
            self.unchanged(v, stamp)?;
        }
        Ok(Some(self.scratch.get(len)))
    }

    #[inline(always)]
    fn next_unindexed(&mut self, t: TableId, from: u64, hi: u64) -> Option<u64> {
        if self.unindexed & (1 << (t.0 % 64)) == 0 {
            return None;
        }
        self.writes
            .iter()
            .filter(|w| w.unindexed && w.table == t && (from..=hi).contains(&w.key))
            .map(|w| w.key)
            .min()
    }

    fn unindexed_entry(&mut self, t: TableId, key: u64) -> Option<&[u8]> {
        let w = self.writes[self.find_unindexed(t, key)?];
        if w.tombstone {
            return None;
        }
        let row = self.row(t, as_ref(w.version));
        let data = self.scratch.get(self.p.row_sizes[t.index()]);
        row.read_into(data);
        Some(data)
    }
}

impl<'db> CicadaWorker<'db> {
    #[inline(always)]
    pub(super) fn find_write(&self, t: TableId, rid: RowId) -> Option<usize> {
        if self.written & (1 << (t.0 % 64)) == 0 {
            return None;
        }
        self.writes.iter().rposition(|w| w.rid == rid && w.table == t)
    }

    /// This transaction's insert of `key` into table `t` that is not in the index yet.
    #[inline(always)]
    pub(super) fn find_unindexed(&self, t: TableId, key: u64) -> Option<usize> {
        if self.unindexed & (1 << (t.0 % 64)) == 0 {
            return None;
        }
        self.writes.iter().rposition(|w| w.unindexed && w.key == key && w.table == t)
    }

    /// The row of `key`, if the index maps it to a linked record; on a miss the phantom bucket
    /// is observed (its version read before a second lookup, so that an insert racing with the
    /// first one is not missed).
    #[inline]
    pub(super) fn lookup(&mut self, tbl: &'db Table<CicadaRecord>, key: u64) -> Option<RowId> {
        if let Some(rid) = self.ctx.lookup(tbl, key) {
            if !tbl.rows.get(rid).header.is_unlinked() {
                return Some(rid);
            }
            self.ctx.forget(tbl.id, key);
        }
        let slot = tbl.buckets.slot_of(key);
        let version = tbl.buckets.version(slot);
        match tbl.index.get(key, &self.ctx.guard) {
            Some(rid) if !tbl.rows.get(rid).header.is_unlinked() => Some(rid),
            _ => {
                self.observe(tbl, key, slot, version);
                None
            }
        }
    }

    /// Notes that `key` was found absent: its bucket's version (phantom validation) and the
    /// history's range read.
    #[inline(always)]
    pub(super) fn observe(
        &mut self,
        tbl: &Table<CicadaRecord>,
        key: u64,
        slot: usize,
        version: u64,
    ) {
        if !self.untracked {
            self.observed.push(Observed { table: tbl.id, slot: slot as u32, version });
        }
        if let Some(h) = &mut self.ctx.history {
            h.range(tbl.id.0, key, key);
        }
    }

    /// The version of `rec` visible to this transaction, recorded as read (with the history);
    /// `None` when nothing is visible (the bucket is then observed too).
    #[inline(always)]
    pub(super) fn read_version(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
        rec: &'db CicadaRecord,
    ) -> Result<Result<Found<'db>, Unlinked>, Abort> {
        let wait = self.p.options.wait;
        let sv = self.p.options.single_version;
        let find = |head| {
            if sv {
                sv_search(rec, head, self.ts, wait)
            } else {
                search(head, self.ts, wait)
            }
        };
        let head = match rec.newest() {
            Ok(h) => h,
            Err(u) => return Ok(Err(u)),
        };
        let mut found = find(head)?;
        // The key is absent at our timestamp (nothing visible, or a deletion): its bucket's
        // version is needed, read before a search (an insert racing with it must bump it
        // later), so the chain is searched again after reading it. The common case, a present
        // row, reads no bucket.
        let mut bucket = None;
        if found.absent() && !self.p.mv_index() {
            let slot = tbl.buckets.slot_of(key);
            bucket = Some((slot, tbl.buckets.version(slot)));
            let head = match rec.newest() {
                Ok(h) => h,
                Err(u) => return Ok(Err(u)),
            };
            found = find(head)?;
        }
        if !self.untracked {
            self.reads.push(Read {
                rec: NonNull::from(rec),
                seen: found.seen.map(ptr),
                later: found.later.map(ptr),
                wts: found.wts,
            });
        }
        match (found.seen, bucket) {
            // (A search that saw nothing read the bucket, with the shared index; with the
            // multi-version index the caller tracks the leaf instead: `locate_in_tree`.)
            (None, bucket) => match bucket {
                Some((slot, version)) => self.observe(tbl, key, slot, version),
                None => {
                    if let Some(h) = &mut self.ctx.history {
                        h.range(tbl.id.0, key, key);
                    }
                }
            },
            (Some(_), bucket) => {
                if let Some((slot, version)) = bucket.filter(|_| !found.present) {
                    // The row may be unlinked and the key inserted again as a new record,
                    // whose versions go in above no version of this one: the bucket stands for
                    // the absence too.
                    if !self.untracked {
                        self.observed.push(Observed { table: tbl.id, slot: slot as u32, version });
                    }
                }
                if let Some(h) = &mut self.ctx.history {
                    h.read(tbl.id.0, key, stamp_at(found.wts));
                }
            }
        }
        Ok(Ok(found))
    }

    /// Finds what this transaction sees of `key`: its own write, a record's visible version
    /// (read, recorded), or nothing.
    #[inline(always)]
    pub(super) fn locate(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
    ) -> Result<Located<'db>, Abort> {
        if self.p.mv_index() {
            return self.locate_in_tree(tbl, key);
        }
        if let Some(i) = self.find_unindexed(tbl.id, key) {
            return Ok(Located::Own(i));
        }
        loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(Located::Absent) };
            if let Some(i) = self.find_write(tbl.id, rid) {
                return Ok(Located::Own(i));
            }
            let rec = tbl.rows.get(rid).header;
            match self.read_version(tbl, key, rec)? {
                Ok(found) => return Ok(Located::Row { rid, rec, found }),
                // Unlinked meanwhile: the key may live in another row now.
                Err(Unlinked) => self.ctx.forget(tbl.id, key),
            }
        }
    }

    /// Puts a new version of `key`'s row into the write set: `value` in every column (a blind
    /// write), or a deletion (`None`); `Ok(false)` if the row is absent.
    pub(super) fn overwrite(
        &mut self,
        t: TableId,
        key: u64,
        value: Option<&[u8]>,
    ) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        if let Some(value) = value {
            check_len(tbl, value)?;
        }
        match self.locate(tbl, key)? {
            Located::Absent => Ok(false),
            Located::Own(i) => {
                let w = self.writes[i];
                if w.tombstone {
                    return Ok(false);
                }
                match value {
                    Some(value) => {
                        self.row(t, as_ref(w.version)).write_from(value);
                        self.writes[i].cols = ALL_COLUMNS;
                    }
                    // A row this transaction inserted or updated: its version becomes a
                    // deletion (over nothing, for an insert: the key stays absent).
                    None => self.writes[i].tombstone = true,
                }
                self.writes[i].promotion = false;
                Ok(true)
            }
            Located::Row { rid, rec, found } => {
                if found.absent() {
                    return Ok(false);
                }
                self.put_version(t, key, rid, rec, &found, value)?;
                Ok(true)
            }
        }
    }

    /// Prefetches the lines of `key`'s newest version (its header and the columns `cols`)
    /// when it is not the record's inlined one, whose lines the record's prefetch covered: a
    /// row updated since it was loaded lives in a pooled version, one pointer away from its
    /// record, and a read would otherwise miss on each in turn. Reads the record's head word
    /// (its line was prefetched first); a hint, so a key without a row hint is skipped.
    #[inline]
    pub(super) fn prefetch_version(&self, t: TableId, key: u64, cols: Columns) {
        let Some(tbl) = self.ctx.storage.try_table(t) else { return };
        let Some(rid) = self.ctx.hinted(tbl, key) else { return };
        let rec = tbl.rows.get(rid).header;
        if let Ok(Some(v)) = rec.newest() {
            if !std::ptr::eq(v, rec.inline()) {
                self.row(t, v).prefetch(&tbl.projection, cols);
            }
        }
    }

    /// Whether the version `v` read at stamp `stamp` still has it after its payload was
    /// copied (Cicada-SV overwrites versions in place: a copy that overlapped an overwrite
    /// may be torn, and the version it should see is gone). Multi-version chains never
    /// change a version's payload while it can be read.
    #[inline(always)]
    pub(super) fn unchanged(&self, v: &CVersion, stamp: u64) -> Result<(), Abort> {
        if self.p.options.single_version && !still(v, stamp) {
            return Err(Abort::new(AbortReason::SnapshotTooOld));
        }
        Ok(())
    }

    /// Refuses a write in a transaction declared read-only.
    #[inline(always)]
    pub(super) fn writable(&self) -> Result<(), Abort> {
        if self.read_only {
            return Err(Abort::new(AbortReason::ReadOnlyWrite));
        }
        Ok(())
    }

    /// Early abort (§3.2): a write over `v` whose read timestamp is above ours would fail
    /// validation; so would a read-modify-write with a newer version committed or pending
    /// (write-latest-version-only).
    #[inline(always)]
    pub(super) fn early_abort(&self, found: &Found<'_>, rmw: bool) -> Result<(), Abort> {
        let o = &self.p.options;
        if let Some(v) = found.seen {
            // Relaxed: an early abort is a heuristic (§3.3); validation reads `rts` again after its
            // SeqCst fence.
            if o.early_abort && v.ext.rts.load(Ordering::Relaxed) > self.ts {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
        }
        if rmw && o.write_latest_only && found.newer {
            return Err(Abort::new(AbortReason::WriteConflict));
        }
        Ok(())
    }

    /// A new version of `rec` for this transaction: the record's inlined one if it is free and
    /// the table inlines (§3.3), else one from the worker's pool.
    #[inline]
    pub(super) fn new_version(&mut self, t: TableId, rec: &CicadaRecord) -> NonNull<CVersion> {
        if self.p.inline[t.index()] {
            if let Some(v) = rec.claim_inline() {
                init_version(as_ref(v), self.ts, true);
                return v;
            }
        }
        let v = self.pools[t.index()].alloc(&self.p.stores[t.index()]);
        init_version(as_ref(v), self.ts, false);
        v
    }

    /// The row of a version of table `t`.
    #[inline(always)]
    pub(super) fn row(
        &self,
        t: TableId,
        v: &'db CVersion,
    ) -> crate::storage::RowRef<'db, CVersion> {
        // SAFETY: `v` is a version of table `t`: pooled from its store, or the inlined version
        // of one of its records, which is used only when the table's slots hold a payload.
        unsafe { row_of(v, self.p.row_sizes[t.index()]) }
    }

    /// Puts a new version of `key`'s row over what `found` saw (a row present at our
    /// timestamp, or its absence for an insert) into the write set: `value` in every column,
    /// or a deletion (`None`, which must write over the latest version, as an update does).
    #[inline]
    pub(super) fn put_version(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &CicadaRecord,
        found: &Found<'_>,
        value: Option<&[u8]>,
    ) -> Result<(), Abort> {
        self.early_abort(found, value.is_none())?;
        let nv = self.new_version(t, rec);
        if let Some(value) = value {
            self.row(t, as_ref(nv)).write_from(value);
        }
        self.push_write(t, key, rid, rec, nv, found.later, !found.absent(), ALL_COLUMNS);
        self.writes.last_mut().expect("just pushed").tombstone = value.is_none();
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn push_write(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &CicadaRecord,
        version: NonNull<CVersion>,
        later: Option<&CVersion>,
        over_present: bool,
        cols: Columns,
    ) {
        self.written |= 1 << (t.0 % 64);
        self.writes.push(Write {
            table: t,
            key,
            rid,
            rec: NonNull::from(rec),
            version,
            later: later.map(ptr),
            over_present,
            tombstone: false,
            created: false,
            unindexed: false,
            cols,
            installed: false,
            locked: false,
            prev: UNBORN,
            heat: 0,
            promotion: false,
            dropped: false,
        });
    }

    /// Starts the insert of `key` as the new record at `rid` (initialised, with no version):
    /// a version holding `value`, which validation installs.
    pub(super) fn push_new(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
        rid: RowId,
        value: &[u8],
    ) {
        let t = tbl.id;
        let rec = tbl.rows.get(rid).header;
        let nv = self.new_version(t, rec);
        self.row(t, as_ref(nv)).write_from(value);
        self.push_write(t, key, rid, rec, nv, None, false, ALL_COLUMNS);
        self.writes.last_mut().expect("just pushed").created = true;
        if let Some(h) = &mut self.ctx.history {
            h.range(t.0, key, key);
        }
    }

    /// An insert of a key this transaction wrote already (write `i`): it fails, unless the
    /// transaction deleted the row, whose version then becomes the row again.
    pub(super) fn insert_again(&mut self, i: usize, value: &[u8]) -> bool {
        let w = self.writes[i];
        if !w.tombstone {
            return false;
        }
        self.row(w.table, as_ref(w.version)).write_from(value);
        let e = &mut self.writes[i];
        (e.tombstone, e.cols) = (false, ALL_COLUMNS);
        true
    }

    /// Promotes `v`, the visible version of `rec` that this transaction read, into the
    /// record's inlined version when the paper's conditions hold (§3.3): `v` is not inlined,
    /// is below `min_rts` (so a concurrent write is unlikely), nothing newer is committed or
    /// pending, and the inlined version is free. The read becomes a read-modify-write writing
    /// the same data; if the promotion fails at validation it is dropped, not the transaction.
    #[inline(always)]
    pub(super) fn maybe_promote(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &'db CicadaRecord,
        found: &Found<'db>,
    ) {
        let Some(v) = found.seen else { return };
        if is_inline(v) || self.read_only || !self.p.promote[t.index()] || found.newer {
            return;
        }
        // Relaxed: a hint; the claim below is the CAS that decides.
        if rec.inline().flags.load(Ordering::Relaxed) != UNUSED
            || wts(v) >= self.p.clocks.min_rts()
            || v.ext.rts.load(Ordering::Relaxed) > self.ts
        {
            return;
        }
        let Some(nv) = rec.claim_inline() else { return };
        // A read that writes: the claim now, the installation at commit (the record's line).
        crate::util::shared_writes::note_n(crate::util::shared_writes::Site::ReadMark, 2);
        init_version(as_ref(nv), self.ts, true);
        self.row(t, as_ref(nv)).copy_from(&self.row(t, v));
        self.push_write(t, key, rid, rec, nv, found.later, true, ALL_COLUMNS);
        self.writes.last_mut().expect("just pushed").promotion = true;
    }

    /// Gives up promotion `i` at validation: its version is rolled back (marked ABORTED if
    /// installed, which readers skip; else freed) and it is neither logged nor committed.
    pub(super) fn drop_promotion(&mut self, i: usize) {
        let w = self.writes[i];
        if w.installed {
            set_status(as_ref(w.version), ABORTED);
        } else {
            self.unused(w.table, w.version);
        }
        self.writes[i].dropped = true;
        self.promotions.1 += 1;
    }

    /// Gives back a version this transaction never installed.
    #[inline]
    pub(super) fn unused(&mut self, t: TableId, v: NonNull<CVersion>) {
        let r = as_ref(v);
        if is_inline(r) {
            // Release: pairs with the next claimer's Acquire.
            r.flags.store(UNUSED, Ordering::Release);
        } else {
            self.pools[t.index()].free(&self.p.stores[t.index()], v);
        }
    }
}
