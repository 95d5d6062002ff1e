//! The multi-version index (§3.6, `--opt cicada:mv-index=on`): scans, lookups and inserts through
//! the B-link tree whose nodes are Cicada records ([`NodeAccess`] is the tree's view of them).

use super::*;

/// A transaction's view of table `t`'s multi-version index nodes (§3.6): each node is a record
/// of the node table, read at the transaction's timestamp (its own copy first), written as a
/// new version in its write set (with the version it copied as a read), validated, committed,
/// logged not at all and collected like a row's.
pub(super) struct NodeAccess<'w, 'db> {
    pub(super) w: &'w mut CicadaWorker<'db>,
    /// The data table.
    pub(super) t: TableId,
}

/// A node read: `None` for the transaction's own copy (its write is validated instead).
#[derive(Clone, Copy)]
pub(super) struct NodeRead(Option<Read>);

impl<'db> NodeAccess<'_, 'db> {
    /// The node table and the tree's record of node `id`.
    #[inline(always)]
    pub(super) fn record(&self, id: NodeId) -> (TableId, &'db CicadaRecord) {
        let p: &'db Cicada = self.w.p;
        (p.node_table(self.t), p.trees[self.t.index()].rows.get(RowId(id)).header)
    }

    /// The version of node `id` visible at the timestamp, as found. A node reached from a
    /// version visible at the timestamp was created below it and is not unlinked while we run
    /// (a node taken out is freed only once `min_rts` passes its removal), so it has one; not
    /// finding it means the tree moved under a wait=off search or a stale read.
    #[inline]
    pub(super) fn visible(
        &self,
        rec: &'db CicadaRecord,
    ) -> Result<(Found<'db>, &'db CVersion), Abort> {
        let head = rec.newest().map_err(|_| Abort::new(AbortReason::WriteConflict))?;
        let found = search(head, self.w.ts, self.w.p.options.wait)?;
        let v = found.row().ok_or(Abort::new(AbortReason::WriteConflict))?;
        Ok((found, v))
    }

    #[inline(always)]
    pub(super) fn words(&self, v: &'db CVersion) -> &'db [AtomicU64] {
        node_words(v, self.w.p.trees[self.t.index()].tree.shape())
    }
}

impl<'db> Nodes for NodeAccess<'_, 'db> {
    type Read = NodeRead;

    #[inline]
    fn read(&mut self, id: NodeId) -> Result<(&[AtomicU64], NodeRead), Abort> {
        let (nt, rec) = self.record(id);
        if let Some(i) = self.w.find_write(nt, RowId(id)) {
            return Ok((self.words(as_ref(self.w.writes[i].version)), NodeRead(None)));
        }
        let (found, v) = self.visible(rec)?;
        let read = Read {
            rec: NonNull::from(rec),
            seen: Some(ptr(v)),
            later: found.later.map(ptr),
            wts: found.wts,
        };
        Ok((self.words(v), NodeRead(Some(read))))
    }

    #[inline]
    fn track(&mut self, read: NodeRead) -> Result<(), Abort> {
        if let (Some(r), false) = (read.0, self.w.untracked) {
            self.w.reads.push(r);
        }
        Ok(())
    }

    fn write(&mut self, id: NodeId) -> Result<&[AtomicU64], Abort> {
        let (nt, rec) = self.record(id);
        if let Some(i) = self.w.find_write(nt, RowId(id)) {
            return Ok(self.words(as_ref(self.w.writes[i].version)));
        }
        self.w.writable()?;
        let (found, v) = self.visible(rec)?;
        self.w.early_abort(&found, true)?;
        // The copy depends on the version copied: validated like a read.
        self.w.reads.push(Read {
            rec: NonNull::from(rec),
            seen: Some(ptr(v)),
            later: found.later.map(ptr),
            wts: found.wts,
        });
        let nv = self.w.new_version(nt, rec);
        let (from, to) = (self.words(v), self.words(as_ref(nv)));
        for (d, s) in to.iter().zip(from) {
            // Relaxed: copying a version the transaction read (validated at commit) into its
            // private copy, published at commit.
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.w.push_write(nt, id, RowId(id), rec, nv, found.later, true, ALL_COLUMNS);
        Ok(to)
    }

    fn create(&mut self) -> Result<NodeId, Abort> {
        self.w.writable()?;
        let p: &'db Cicada = self.w.p;
        let t = self.t.index();
        let rid = p.trees[t]
            .rows
            .alloc(&mut self.w.node_slots[t])
            .ok_or(Abort::new(AbortReason::TableFull))?;
        let (nt, rec) = self.record(rid.0);
        rec.init(None);
        let nv = self.w.new_version(nt, rec);
        for w in self.words(as_ref(nv)) {
            // Relaxed: a private new node, published at commit.
            w.store(0, Ordering::Relaxed);
        }
        self.w.push_write(nt, rid.0, rid, rec, nv, None, false, ALL_COLUMNS);
        self.w.writes.last_mut().expect("just pushed").created = true;
        Ok(rid.0)
    }

    fn retire(&mut self, id: NodeId) {
        self.w.retiring.push((self.t, id));
    }
}

impl<'db> CicadaWorker<'db> {
    /// [`Worker::scan`] through the multi-version index: the tree's entries in `[lo, hi]` at
    /// our timestamp (our own node copies first), each leaf met tracked (phantom protection,
    /// §3.6), each entry read as [`ScanSteps::entry`] reads the shared index's.
    pub(super) fn scan_tree(
        &mut self,
        t: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        mut f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        if tbl.index.kind() == crate::storage::index::IndexKind::Hash {
            // The table asked for point lookups only: its scans are refused with either index.
            return Err(Abort::new(AbortReason::Unsupported));
        }
        if limit == 0 {
            return Ok(0);
        }
        let tree = self.p.trees[t.index()].tree;
        let (mut n, mut stop) = (0, hi);
        tree.scan(&mut NodeAccess { w: self, t }, lo, hi, |nodes, key, rid| {
            Ok(match nodes.w.entry(tbl, t, key, RowId(rid))? {
                Some(row) => {
                    n += 1;
                    if f(key, row).is_break() || n == limit {
                        stop = key;
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                }
                None => ControlFlow::Continue(()),
            })
        })?;
        if let Some(h) = &mut self.ctx.history {
            h.range(t.0, lo, stop);
        }
        Ok(n)
    }

    /// [`Worker::insert`] through the multi-version index: the key's record, if the tree maps
    /// one at our timestamp, gets a version over its absence; else the key goes into the tree
    /// (a leaf write, and splits) with a record: the one the shared catalog holds for the key
    /// if any (a deleted row not unlinked yet, or an insert that aborted after validation), so
    /// that the tree and the catalog never map a key to two records, or a new record that
    /// enters the catalog at validation.
    pub(super) fn insert_in_tree(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
        value: &[u8],
    ) -> Result<bool, Abort> {
        let t = tbl.id;
        let tree = self.p.trees[t.index()].tree;
        if let Some(rid) = tree.get(&mut NodeAccess { w: self, t }, key)?.value.map(RowId) {
            // The tree maps a key exactly when its row is present, at every timestamp and in
            // our own view (an insert or deletion changes both). A key mapped to a row we
            // deleted, or to a row absent at our timestamp, means that our reads straddle a
            // commit below our timestamp (internal nodes and a present key's leaf are read
            // untracked): writing the row as present while the tree we write lacks the key
            // would commit a row the index does not hold, so the attempt aborts.
            if let Some(i) = self.find_write(t, rid) {
                if self.writes[i].tombstone {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
                return Ok(false);
            }
            let rec = tbl.rows.get(rid).header;
            let Ok(found) = self.read_version(tbl, key, rec)? else {
                return Err(Abort::new(AbortReason::WriteConflict));
            };
            if found.absent() {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            return Ok(false);
        }
        let mut spin = SpinWait::default();
        let rid = loop {
            // Our own new record, deleted by us since (which took it out of our tree).
            if let Some(i) = self.find_unindexed(t, key) {
                if !self.insert_again(i, value) {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
                break self.writes[i].rid;
            }
            let Some(rid) = self.ctx.lookup(tbl, key) else {
                let fresh = self.ctx.alloc(t)?;
                tbl.rows.get(fresh).header.init(None);
                self.push_new(tbl, key, fresh, value);
                self.writes.last_mut().expect("just pushed").unindexed = true;
                self.unindexed |= 1 << (t.0 % 64);
                break fresh;
            };
            let rec = tbl.rows.get(rid).header;
            if rec.is_unlinked() {
                // The GC is removing the catalog entry of a deletion below `min_rts`.
                self.ctx.forget(t, key);
                spin.spin();
                continue;
            }
            if let Some(i) = self.find_write(t, rid) {
                // A row of ours that we deleted.
                if !self.insert_again(i, value) {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
                break rid;
            }
            if rec.in_flight() {
                // Another transaction's insert of the key is validating.
                return Err(Abort::new(AbortReason::InsertConflict));
            }
            let Ok(found) = self.read_version(tbl, key, rec)? else { continue };
            if !found.absent() {
                // Present at our timestamp, yet not in the tree we read: the tree moved
                // under a stale read.
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            self.put_version(t, key, rid, rec, &found, Some(value))?;
            break rid;
        };
        match tree.insert(&mut NodeAccess { w: self, t }, key, rid.0)? {
            None => Ok(true),
            // Committed into the leaf between our read and our write of it.
            Some(_) => Err(Abort::new(AbortReason::WriteConflict)),
        }
    }

    /// [`CicadaWorker::locate`] with the multi-version index. A row present at our timestamp is
    /// found through the catalog (the shared index, which names each key's record) without
    /// descending the tree: its read is validated, which is all the paper asks of a present key
    /// (footnote 1: the index nodes that led to it go unvalidated), and the tree holds the key
    /// at our timestamp exactly when the row is present. An absence is read from the tree (our
    /// own node copies first), and the leaf that would hold the key is tracked (phantom
    /// protection, §3.6): the record's absent version alone would not cover a new record of
    /// the key after this one is unlinked.
    pub(super) fn locate_in_tree(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
    ) -> Result<Located<'db>, Abort> {
        let t = tbl.id;
        if let Some(rid) = self.ctx.lookup(tbl, key) {
            if let Some(i) = self.find_write(t, rid) {
                return Ok(Located::Own(i));
            }
            let rec = tbl.rows.get(rid).header;
            match self.read_version(tbl, key, rec)? {
                Ok(found) if !found.absent() => return Ok(Located::Row { rid, rec, found }),
                // Absent: the tree decides (the read stays in the read set, harmless).
                Ok(_) => {}
                Err(Unlinked) => self.ctx.forget(t, key),
            }
        }
        let tree = self.p.trees[t.index()].tree;
        let mut nodes = NodeAccess { w: self, t };
        let found = tree.get(&mut nodes, key)?;
        let Some(rid) = found.value.map(RowId) else {
            nodes.track(found.leaf)?;
            if let Some(h) = &mut self.ctx.history {
                h.range(t.0, key, key);
            }
            return Ok(Located::Absent);
        };
        if let Some(i) = self.find_write(t, rid) {
            // Our own insert into a new record, which the catalog gets at validation.
            return Ok(Located::Own(i));
        }
        let rec = tbl.rows.get(rid).header;
        match self.read_version(tbl, key, rec)? {
            Ok(found) if !found.absent() => Ok(Located::Row { rid, rec, found }),
            // The tree maps the key to a row absent at our timestamp (or to an unlinked record,
            // whose deletion is below `min_rts` and so below our timestamp): a deletion
            // committed between our untracked read of the leaf and our read of the row. The
            // view is mixed; the leaf read is not validated, so abort now.
            _ => Err(Abort::new(AbortReason::WriteConflict)),
        }
    }

    /// Rolls back the write of an index node: a version over an existing node becomes ABORTED
    /// if installed (readers skip it), else goes back; a node this transaction created goes
    /// back with its slot at once, installed or not. Nothing reached it: its only links are
    /// in our versions, which readers that meet them pending wait out and then skip, and
    /// nothing collects a version that never committed.
    pub(super) fn roll_back_node(&mut self, w: Write) {
        if w.created {
            self.unused(w.table, w.version);
            let t = w.table.index() - self.p.tables;
            self.node_slots[t].release(w.rid);
        } else if w.installed {
            set_status(as_ref(w.version), ABORTED);
        } else {
            self.unused(w.table, w.version);
        }
    }
}
