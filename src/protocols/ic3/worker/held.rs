//! The typed transaction's commit with its last piece held (§4.4 and Algorithm 2): whether the
//! held piece names nobody, tracking the transitional graph, the untracked writers, the deferred
//! accumulations applied at the commit point, and the commit's log record and epoch.

use super::*;

/// Whether the locked items of a held last piece name no transaction still running that their
/// entries would make the attempt depend on (the rows of deferred accumulations aside: no
/// analysed template writes them, see [`apply_deferred`]).
pub(super) fn names_nobody(w: &Ic3Worker<'_>, me: TxnRef) -> bool {
    let shared = w.local.shared();
    let items = w.local.items.iter();
    let touched = items.filter(|it| it.word & LISTED != 0 && (it.read || it.write.is_some()));
    touched.filter(|it| it.hold != Hold::Skipped).all(|it| {
        let rec = match it.target() {
            Target::Row(t, rid) => row_rec(w, t, rid),
            Target::Bucket(t, slot) => bucket_rec(shared, t, slot),
        };
        // SAFETY: the commit holds the lock (`lock` took it and kept it, or our insert's).
        let g = unsafe { Locked::resume(rec, it.word) };
        let mut none = true;
        g.dependencies(me, it.write.is_some(), |d| none &= d.over());
        g.keep();
        none
    })
}

/// Closes the attempt's untracked reads just before its commit point (see the module docs):
/// `true` when it made none, or when no direct writer of untracked columns overlapped them,
/// and then a writer that begins now waits for [`reopen`] after the commit point.
pub(super) fn close_untracked(l: &Ic3Local) -> bool {
    if !l.untracked_reads {
        return true;
    }
    l.ctx().close();
    if l.shared().direct_writers.none_since(l.writers_finished) {
        return true;
    }
    l.ctx().reopen();
    false
}

/// Ends [`close_untracked`] after the commit point.
pub(super) fn reopen(l: &Ic3Local) {
    if l.untracked_reads {
        l.ctx().reopen();
    }
}

/// Whether the direct attempt writes a column that typed attempts read untracked.
pub(super) fn writes_untracked(w: &Ic3Worker<'_>) -> bool {
    let shared = w.local.shared();
    w.writes.iter().any(|x| x.written() & shared.untracked(x.table) != 0)
}

/// Whether the typed attempt committing wrote: a piece's write left a writer's entry, or
/// the commit has writes (a held piece's, trailing ones) or accumulations to apply. Only a
/// commit that wrote passes the commit phases between `Validated` and `Acknowledging`.
pub(super) fn typed_wrote(w: &Ic3Worker<'_>) -> bool {
    !w.writes.is_empty()
        || !w.local.deferred.is_empty()
        // SAFETY: the entries stay in the pool until the attempt ends.
        || w.local.entries.iter().any(|&(_, e, _)| unsafe { e.as_ref() }.writer())
}

/// Commits the transaction with its held last piece, whose items are locked and validated and
/// name nobody to depend on (see [`commit_piece`]): installs the writes (leaving no entry),
/// applies the deferred accumulations, logs, passes the commit point and unlocks. The entries
/// of its earlier pieces leave as the attempt ends.
pub(super) fn commit_held(w: &mut Ic3Worker<'_>) {
    // Locked and validated by `commit_piece`.
    let wrote = typed_wrote(w);
    if wrote {
        w.ctx.phase(CommitPhase::Locked);
    }
    w.ctx.phase(CommitPhase::Validated);
    w.local.ctx().committing();
    take_epoch(w);
    install_locked(w);
    if !w.local.deferred.is_empty() {
        apply_deferred(w);
    }
    log_commit(w);
    if wrote {
        w.ctx.phase(CommitPhase::Logged);
    }
    if let Some(h) = &mut w.ctx.history {
        h.serial_point_at(epoch_ts(w.local.epoch, now_ns()));
        h.committed();
    }
    // The commit point, under the locks: no reader sees the writes before it.
    w.local.ctx().commit();
    stamp_and_release(w);
    if wrote {
        w.ctx.phase(CommitPhase::Installed);
    }
    w.clear_sets();
    let l = &mut w.local;
    l.sub_from = (0, 0, 0);
    l.held = None;
    l.open = None;
}

/// Whether the transaction's last merged piece, just ended, can be held to commit with the
/// transaction ([`commit_piece`]): its dependencies are all over, none of the records or
/// buckets it touched has an entry or is locked now, and every record it read still has the
/// version read. Where nobody else is about, entries would only be appended to be removed
/// again at the commit; a held piece that fails its validation at the commit costs the
/// transaction a retry rather than the piece one, so a piece that meets anyone now (or read
/// what changed while it waited after its execution, §4.1) commits as usual.
pub(super) fn held_uncontended(w: &Ic3Worker<'_>) -> bool {
    let storage = w.ctx.storage;
    let shared = w.local.shared();
    let quiet = |rec: &Ic3Record| rec.load() & (LISTED | LOCK) == 0;
    let bucket = |t: TableId, key: u64| {
        quiet(bucket_rec(shared, t, storage.table(t).buckets.slot_of(key) as u32))
    };
    w.local.deps.iter().all(TxnRef::over)
        && w.reads.iter().all(|r| {
            let now = row_rec(w, r.table, r.rid).load();
            now & (LISTED | LOCK) == 0 && same_version(now, r.word)
        })
        && w.writes.iter().all(|x| match x.kind {
            WriteKind::Insert | WriteKind::InsertDeleted => bucket(x.table, x.key),
            WriteKind::Update => quiet(row_rec(w, x.table, x.rid)),
            WriteKind::Delete | WriteKind::Revive => {
                quiet(row_rec(w, x.table, x.rid)) && bucket(x.table, x.key)
            }
        })
        && w.phantoms.iter().all(|p| quiet(bucket_rec(shared, p.table, p.slot)))
}

/// Learns the transactions the open merged piece's operations of the sub-piece that just ended
/// make it depend on (what its commit would append after: see `record::Locked::dependencies`),
/// so that its next sub-piece waits for them (§4.5: the transitional graph tracks dependencies
/// at each sub-piece's end). Nothing is appended: the merged piece's operations stay invisible
/// to others until it commits, which [`covered`] then checks. A record being inserted by
/// another transaction is passed over (its lock is held until that insert's piece commits):
/// a dependency found there at the commit is one no wait covered.
pub(super) fn track(w: &mut Ic3Worker<'_>) {
    let me = w.local.txn.expect("a typed attempt is running");
    let storage = w.ctx.storage;
    let shared = w.local.shared();
    let (r0, w0, p0) = w.local.sub_from;
    let deps = &mut w.local.deps;
    let row = |t: TableId, rid: RowId| storage.table(t).rows.get(rid).header;
    for r in &w.reads[r0..] {
        if let Some(g) = row(r.table, r.rid).lock_unless_inserting() {
            g.dependencies(me, false, |d| deps.push(d));
        }
    }
    for x in &w.writes[w0..] {
        let own = matches!(x.kind, WriteKind::Insert | WriteKind::InsertDeleted);
        if !own {
            if let Some(g) = row(x.table, x.rid).lock_unless_inserting() {
                g.dependencies(me, true, |d| deps.push(d));
            }
        }
        if x.kind != WriteKind::Update {
            let slot = storage.table(x.table).buckets.slot_of(x.key) as u32;
            bucket_rec(shared, x.table, slot).lock().dependencies(me, true, |d| deps.push(d));
        }
    }
    for p in &w.phantoms[p0..] {
        bucket_rec(shared, p.table, p.slot).lock().dependencies(me, false, |d| deps.push(d));
    }
    w.local.sub_from = (w.reads.len(), w.writes.len(), w.phantoms.len());
}

/// Whether every transaction the commit of a merged piece of several sub-pieces comes to depend
/// on through an operation of an earlier sub-piece than its last ([`Item::early`]) is one the
/// attempt knew of before its later sub-pieces waited ([`track`]), or one that is over. A
/// dependency that no wait covered would let a transaction on the finer graph overtake it in
/// a later sub-piece (the dependency cycle of §4.5's Fig. 9): the merged piece fails its
/// validation instead. The items are locked.
pub(super) fn covered(w: &Ic3Worker<'_>) -> bool {
    let me = w.local.txn.expect("a typed attempt is running");
    let shared = w.local.shared();
    let deps = &w.local.deps;
    w.local.items.iter().filter(|it| it.early && it.hold != Hold::Skipped).all(|it| {
        let rec = match it.target() {
            Target::Row(t, rid) => row_rec(w, t, rid),
            Target::Bucket(t, slot) => bucket_rec(shared, t, slot),
        };
        // SAFETY: the commit holds the lock (`lock` took it and kept it, or our insert's).
        let g = unsafe { Locked::resume(rec, it.word) };
        let mut ok = true;
        g.dependencies(me, it.write.is_some(), |d| ok &= deps.contains(&d) || d.over());
        g.keep();
        ok
    })
}

/// Whether every table the open merged piece touched is one its template pieces declare,
/// every table it wrote one they declare written, and every record it read (tracked) of a
/// table they declare with C-edges: the table-level analysis covers nothing else. Its writes
/// change only columns some analysed template declares written: the others are read
/// untracked. Neither its reads nor its writes touch the columns accumulations are deferred
/// into, which go in under uncommitted writers ([`apply_deferred`]). (The engine checks
/// templates per column too, `Capabilities::templates`; this check holds whatever the
/// caller's checks.) Trailing operations (after a held last piece) must be on tables no
/// analysed template touches, as for a transaction whose last piece committed.
pub(super) fn declared(w: &Ic3Worker<'_>) -> bool {
    let (Mode::Typed(t), Some(m)) = (w.local.mode, w.local.open) else { return true };
    if w.local.deferred_reads {
        return false;
    }
    let tables = &w.local.plan(t).pieces[m].tables;
    let shared = w.local.shared();
    let analysed = &shared.analysed_tables;
    w.local.items.iter().all(|it| {
        let (Target::Row(table, _) | Target::Bucket(table, _)) = it.target();
        if it.trailing {
            return !analysed.get(table.index()).copied().unwrap_or(false);
        }
        let Some(d) = tables.iter().find(|d| d.table == table) else { return false };
        match it.write {
            // A bucket's: an insert or delete, whose row's item is checked.
            Some(_) if it.is_bucket() => d.write,
            Some(j) => {
                let x = &w.writes[j as usize];
                d.write
                    && x.written() & shared.untracked(table) == 0
                    && (x.written() | x.buffered()) & shared.deferred(table) == 0
            }
            // A phantom read: no analysed template inserts or deletes where none writes.
            None if it.is_bucket() => true,
            None => d.tracked,
        }
    })
}

/// Appends the committed attempt's writes to the log (the database logs and the attempt
/// wrote), each key once with its last image, under a commit stamp by Silo's rule: above the
/// worker's last stamp and the stamps of the records it wrote, at least its commit epoch's
/// (`common::stamp_after`). Without a log record the commit stamp is the epoch's first.
///
/// Why this is the durability contract's order: a transaction that read or overwrote this
/// one's writes commits after this one ended (it depends on it, or, running directly, it
/// reads and overwrites committed data only), so it logs after this one read the log epoch,
/// in the same or a later one. The records' stamps are the latest committed writers' (each
/// sets its stamp as it leaves the lists, and a writer commits after the writers before it
/// ended), so a key's stamps grow in its commit order.
pub(super) fn log_commit(w: &mut Ic3Worker<'_>) {
    if w.ctx.log.is_none() || w.local.redo.is_empty() {
        w.local.stamp = stamp_after(0, w.local.epoch);
        return;
    }
    let storage = w.ctx.storage;
    let l = &mut w.local;
    // (Accumulations under uncommitted writers keep their stamps in the writers' entries.)
    let mut max = w.ctx.last_stamp.max(l.stamp_floor);
    for r in &l.redo {
        max = max.max(storage.table(r.table).rows.get(r.rid).header.stamp());
    }
    // Each key once: its last write (a later piece may write it again), with the columns all
    // its writes changed. The sort is stable.
    l.redo.sort_by_key(|r| (r.table.0, r.key));
    let mut kept = 0;
    let mut cols = 0;
    for i in 0..l.redo.len() {
        let mut r = l.redo[i];
        cols |= r.cols;
        if l.redo.get(i + 1).is_none_or(|n| (n.table, n.key) != (r.table, r.key)) {
            r.cols = cols;
            cols = 0;
            l.redo[kept] = r;
            kept += 1;
        }
    }
    l.redo.truncate(kept);
    let stamp = stamp_after(max, l.epoch);
    let log = w.ctx.log.as_mut().expect("checked above");
    log.begin(stamp, kept as u32);
    let shared = l.shared();
    for r in &l.redo {
        match r.image {
            // A table with deferred accumulations: the image may hold another transaction's
            // pending write of another column (an accumulation's image is the row as it
            // stands), or a stale accumulated column (a writer's image, taken at its piece
            // commit, predates the accumulations that went in under it). Only the columns
            // written reach the log (`shares_words` keeps them in words of their own).
            Some((off, len)) if shared.deferred(r.table) != 0 => {
                let image = &l.redo_images[off as usize..(off + len) as usize];
                let p = &storage.table(r.table).projection;
                log.put_image_only_cols(r.table.0, stamp, r.key, image, p, r.cols);
            }
            Some((off, len)) => {
                let image = &l.redo_images[off as usize..(off + len) as usize];
                let p = &storage.table(r.table).projection;
                log.put_image_cols(r.table.0, stamp, r.key, image, p, r.cols);
            }
            None => log.delete(r.table.0, stamp, r.key),
        }
    }
    w.ctx.log_epoch = log.end();
    w.ctx.last_stamp = stamp;
    l.stamp = stamp;
}

/// Takes the running attempt's commit epoch: the storage epoch, read between two SeqCst
/// fences (see the module docs' commit epochs).
pub(super) fn take_epoch(w: &mut Ic3Worker<'_>) -> u64 {
    // SeqCst fences: the first orders the epoch's load after what the commit stored before
    // (its locks, a typed attempt's `COMMITTING`), the second before the loads of the
    // validation after it; paired with each other across commits (module docs).
    fence(Ordering::SeqCst);
    let epoch = w.ctx.storage.epochs().global_seqcst();
    fence(Ordering::SeqCst);
    w.local.epoch = epoch;
    epoch
}

/// Keeps, for snapshot readers, the committed value of row `rid` of table `t` (locked by the
/// commit, word `word`) before a commit of the attempt's epoch writes it in place: a direct
/// install or an accumulation (the committed value is the payload: no other writer is listed).
/// Where the attempt's own entry is listed, its payload is the attempt's earlier write, and
/// the entry keeps the committed value until it leaves ([`OccProtocol::end`]).
pub(super) fn keep_in_place(w: &mut Ic3Worker<'_>, t: TableId, rid: RowId, word: u64) {
    if w.ctx.snapshot_every == 0 || word & PENDING != 0 {
        return;
    }
    let row = w.ctx.storage.table(t).rows.get(rid);
    let epoch = stamp_epoch(row.header.stamp());
    let value = if word & ABSENT != 0 { Kept::Absent } else { Kept::Row(row) };
    w.ctx.keep_for_snapshots(t, rid, value, word & VALUE, epoch, w.local.epoch);
}

/// Validates the items [`lock`] took against committed data (a typed commit's trailing
/// operations and the rows of its deferred accumulations); `false`, nothing held, when the
/// validation fails.
pub(super) fn lock_held_valid(w: &mut Ic3Worker<'_>) -> bool {
    if matches!(validate(w, true), Verdict::Valid) {
        return true;
    }
    release(w, false);
    false
}

/// Installs every write into its locked item (keeping the locks) and retires the records the
/// writes leave absent: for a commit that can no longer fail, which leaves no entry and has
/// taken its epoch.
pub(super) fn install_locked(w: &mut Ic3Worker<'_>) {
    let storage = w.ctx.storage;
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        let (Target::Row(t, rid), Some(j)) = (it.target(), it.write) else { continue };
        let rec = storage.table(t).rows.get(rid).header;
        // SAFETY: `lock` took this lock (or it is our insert's) and kept it.
        let mut g = unsafe { Locked::resume(rec, it.word) };
        keep_in_place(w, t, rid, g.word());
        install(w, j as usize, &mut g);
        w.local.items[i].word = g.keep();
        let x = w.writes[j as usize];
        if !x.kind.present() {
            w.ctx.retire(t, x.key, rid);
        }
    }
}

/// Gives the rows a direct unit wrote the attempt's commit stamp, then unlocks everything the
/// unit locked. A row where the attempt's own entry is listed gets it as the entry leaves
/// (see [`keep_in_place`]).
pub(super) fn stamp_and_release(w: &mut Ic3Worker<'_>) {
    debug_assert_ne!(w.local.stamp, 0, "the commit took its stamp");
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        let Target::Row(t, rid) = it.target() else { continue };
        let pending = it.word & PENDING != 0;
        if !it.adds && (it.write.is_none() || pending) {
            continue;
        }
        // SAFETY: the unit still holds the lock (taken and kept by `lock`).
        let mut g = unsafe { Locked::resume(row_rec(w, t, rid), it.word) };
        if pending {
            // An accumulation under listed writers: kept in their entries until they leave.
            g.keep_accumulation_stamp(w.local.stamp);
        } else {
            g.set_stamp(w.local.stamp);
        }
        w.local.items[i].word = g.keep();
    }
    release(w, true);
    w.local.inserting.clear();
}

/// Applies the deferred accumulations to their rows, which the commit holds locked among its
/// items (and present: `validate` checked), each as a fresh committed version reported to the
/// history with its one column, and kept for the redo record.
///
/// Why it is serializable: the analysis defers accumulations only into columns that no
/// analysed template reads or writes otherwise (nor inserts or deletes in the table), so the
/// pending transactions neither saw nor miss anything of the accumulation, and it need not
/// wait for them. It goes in after the transaction's dependencies ended and stays locked until
/// its commit point: the accumulations into a row are applied in an order that every
/// dependency path between their transactions agrees with (a transaction that depends on
/// another commits after it), and a reader of committed data sees all of the transaction's
/// writes or none.
///
/// Under uncommitted writers of the row's other columns it goes into the payload and into
/// their before-images (`record::Locked::accumulate`): a rollback keeps it, and so does the
/// committed value, which it becomes the version of (the first uncommitted writer's history
/// write is rebased on it when that writer commits: see [`OccProtocol::end`]). Its commit
/// stamp stays in their entries until they leave, and the next writes of the row take stamps
/// above it ([`log_commit`]). That needs the accumulated columns in payload words of their own
/// (installs and log records copy whole words; `Ic3::new` checks) and no snapshots (a writer
/// past its commit point but still listed would have its kept value changed; with snapshots
/// accumulations are deferred by rows, where no template writes the row).
pub(super) fn apply_deferred(w: &mut Ic3Worker<'_>) {
    let storage = w.ctx.storage;
    for i in 0..w.local.deferred.len() {
        let d = w.local.deferred[i];
        let tbl = storage.table(d.table);
        let row = tbl.rows.get(d.rid);
        let at = item_index(&w.local.items, d.table, d.rid);
        // SAFETY: the commit took this lock and kept it (`lock`).
        let mut g = unsafe { Locked::resume(row.header, w.local.items[at].word) };
        debug_assert!(g.word() & ABSENT == 0, "present (validated)");
        debug_assert!(
            g.word() & PENDING == 0 || w.ctx.snapshot_every == 0,
            "with snapshots no analysed template writes the row"
        );
        // Snapshot readers keep the row's committed value once per commit: before the first
        // change this commit makes to it. A later accumulation into the same row (Trade-Result
        // adds to two columns of its broker), or one after an installed trailing write, would
        // otherwise keep this commit's own intermediate value for the older epoch.
        let first = w.local.items[at].write.is_none()
            && !w.local.deferred[..i].iter().any(|e| e.table == d.table && e.rid == d.rid);
        if first {
            keep_in_place(w, d.table, d.rid, g.word());
        }
        let l = &mut w.local;
        l.row_buf.resize(row.len(), 0);
        row.read_into(&mut l.row_buf);
        let fits = d.acc.apply(&mut l.row_buf);
        debug_assert!(fits, "checked when deferred");
        l.stamp_floor = l.stamp_floor.max(g.accumulation_stamp());
        let v = l.ctx().next_version();
        let (p, cols) = (&tbl.projection, d.acc.columns());
        let prev = match g.accumulate(&row, p, cols, &l.row_buf, &d.acc, v) {
            Some(prev) => prev,
            None => {
                row.write_cols_from(&l.row_buf, p, cols);
                let prev = version(g.word());
                g.set_version(v);
                prev
            }
        };
        if w.ctx.log.is_some() {
            let off = l.redo_images.len();
            l.redo_images.extend_from_slice(&l.row_buf);
            let image = Some((off as u32, row.len() as u32));
            let cols = d.acc.columns();
            l.redo.push(Redo { table: d.table, key: d.key, rid: d.rid, image, cols });
        }
        if let Some(h) = &mut w.ctx.history {
            let (v, prev) = (u128::from(v), u128::from(prev));
            h.write_cols(d.table.0, d.key, v, prev, true, d.acc.columns());
        }
        w.local.items[at].word = g.keep();
    }
}
