//! A merged piece's commit (Algorithm 1's commit step, §4.1): gather its items, lock them in
//! the global order, validate, append to the accessor lists, install under fresh versions,
//! unlock.

use super::*;

/// Gathers the items the open piece's commit locks, in lock order, marking those of
/// operations before the current sub-piece `early`, and those after a held last piece
/// `trailing`.
pub(super) fn gather(w: &mut Ic3Worker<'_>) {
    let storage = w.ctx.storage;
    let (r0, w0, p0) = w.local.sub_from;
    let (r1, w1, p1) = w.local.held.unwrap_or((usize::MAX, usize::MAX, usize::MAX));
    let items = &mut w.local.items;
    items.clear();
    for (i, r) in w.reads.iter().enumerate() {
        let (seen, early, trailing) = (r.word, i < r0, i >= r1);
        items.push(Item { early, trailing, seen, ..Item::row(r.table, r.rid, true, None) });
    }
    for (i, x) in w.writes.iter().enumerate() {
        let (early, trailing) = (i < w0, i >= w1);
        items.push(Item { early, trailing, ..Item::row(x.table, x.rid, false, Some(i as u32)) });
        if x.kind != WriteKind::Update {
            // An insert or delete changes which keys exist: its bucket's writer.
            let slot = storage.table(x.table).buckets.slot_of(x.key) as u32;
            items.push(Item { early, trailing, ..Item::bucket(x.table, slot, true) });
        }
    }
    for (i, p) in w.phantoms.iter().enumerate() {
        let (early, trailing) = (i < p0, i >= p1);
        items.push(Item { early, trailing, ..Item::bucket(p.table, p.slot, false) });
    }
    sort_items(items);
}

/// Sorts the items into lock order and merges the duplicates.
pub(super) fn sort_items(items: &mut Vec<Item>) {
    items.sort_unstable_by_key(|x| x.key);
    items.dedup_by(|later, kept| {
        let same = later.key == kept.key;
        if same {
            merge_item(kept, *later);
        }
        same
    });
}

/// Merges `later`, an item of the same record or bucket as `kept`, into it.
pub(super) fn merge_item(kept: &mut Item, later: Item) {
    if later.read && !later.is_bucket() {
        if kept.read {
            kept.mixed |= later.mixed || !same_version(kept.seen, later.seen);
        } else {
            kept.seen = later.seen;
            kept.mixed = later.mixed;
        }
    }
    kept.read |= later.read;
    kept.write = kept.write.or(later.write);
    kept.adds |= later.adds;
    kept.early |= later.early;
    kept.trailing |= later.trailing;
    if kept.hold == Hold::No {
        kept.hold = later.hold;
        kept.word = later.word;
    }
}

/// Unlocks what a commit locked (rows first, then buckets: see the module docs), and our
/// inserts' records too when `own` (their pieces committed).
pub(super) fn release(w: &mut Ic3Worker<'_>, own: bool) {
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        if it.hold == Hold::Locked || (own && it.hold == Hold::Own) {
            let rec = match it.target() {
                Target::Row(t, rid) => row_rec(w, t, rid),
                Target::Bucket(t, slot) => bucket_rec(w.local.shared(), t, slot),
            };
            // SAFETY: this commit holds the lock (taken and kept, or our insert's).
            drop(unsafe { Locked::resume(rec, it.word) });
            w.local.items[i].hold = Hold::No;
        }
    }
}

/// Locks the gathered items; `false` (nothing held) when a record this piece writes is being
/// inserted by another transaction, or a record read as absent is locked and not known to be
/// an insert in progress (a revive committing: the piece runs again).
pub(super) fn lock(w: &mut Ic3Worker<'_>) -> bool {
    let storage = w.ctx.storage;
    let rows = w.local.items.iter().take_while(|x| !x.is_bucket()).count();
    let mut late = false;
    for i in 0..rows {
        let it = w.local.items[i];
        let Target::Row(t, rid) = it.target() else { unreachable!("rows come first") };
        let rec = row_rec(w, t, rid);
        let own = it.write.is_some_and(|j| {
            matches!(w.writes[j as usize].kind, WriteKind::Insert | WriteKind::InsertDeleted)
        });
        let (hold, word) = if own {
            (Hold::Own, rec.load() & !LOCK)
        } else if let Some(l) = rec.lock_unless_inserting() {
            (Hold::Locked, l.keep())
        } else {
            let known = w.local.inserting.iter().find(|&&(a, b, _)| a == t && b == rid);
            match known {
                Some(&(_, _, key)) if it.write.is_none() => {
                    let slot = storage.table(t).buckets.slot_of(key) as u32;
                    w.local.items.push(Item::bucket(t, slot, false));
                    late = true;
                    (Hold::Skipped, 0)
                }
                _ => {
                    release(w, false);
                    return false;
                }
            }
        };
        w.local.items[i].hold = hold;
        w.local.items[i].word = word;
    }
    if late {
        sort_items(&mut w.local.items);
    }
    let shared = w.local.shared();
    for it in w.local.items.iter_mut().filter(|x| x.is_bucket()) {
        let Target::Bucket(t, slot) = it.target() else { unreachable!() };
        it.word = bucket_rec(shared, t, slot).lock().keep();
        it.hold = Hold::Locked;
    }
    true
}

/// Where the item of row `rid` of table `t` is.
pub(super) fn item_index(items: &[Item], t: TableId, rid: RowId) -> usize {
    let key = Item::row_key(t, rid);
    items.binary_search_by_key(&key, |x| x.key).expect("every row was gathered")
}

/// What a commit's validation found.
#[derive(Clone, Copy, Debug)]
pub(super) enum Verdict {
    Valid,
    /// Something read changed (or a lock could not be taken).
    Stale,
    /// A value read or overwritten is a doomed transaction's (marked by a rolled-back writer):
    /// depending on it would only cascade; the piece runs again once that transaction is over.
    Doomed(TxnRef),
    /// The piece touched a table its template does not declare (or wrote one it declares
    /// read-only): the analysis' promise does not cover it, so it must not commit.
    Undeclared,
    /// A held last piece committed, and the transaction with it ([`commit_held`]).
    Committed,
}

/// Validates the locked items: every read still sees the version it read, every write finds
/// the record present or absent as its kind needs, every phantom bucket its version. A piece
/// does not build on a doomed transaction's writes. A direct commit read committed values, and
/// each must still be its record's committed value; it writes only where no entry is (see the
/// module docs of `ic3`).
pub(super) fn validate(w: &Ic3Worker<'_>, direct: bool) -> Verdict {
    let items = &w.local.items;
    for it in items.iter().filter(|x| x.read && !x.is_bucket()) {
        let Target::Row(t, rid) = it.target() else { unreachable!() };
        let now = match it.hold {
            // Being inserted (absent; a direct read of one with a pending writer fails here:
            // its committed value cannot be read without its lock).
            Hold::Skipped => row_rec(w, t, rid).load(),
            Hold::Locked if direct && it.word & PENDING != 0 => {
                // A direct read saw the committed value: is it still the committed one?
                // SAFETY: this commit holds the lock (`lock` kept it).
                let g = unsafe { Locked::resume(row_rec(w, t, rid), it.word) };
                let committed = g.committed_word();
                g.keep();
                committed
            }
            _ => it.word,
        };
        if it.mixed || !same_version(now, it.seen) {
            return Verdict::Stale;
        }
    }
    for it in items.iter().filter(|x| x.hold == Hold::Locked) {
        if !direct && !it.is_bucket() && it.word & PENDING != 0 {
            let Target::Row(t, rid) = it.target() else { unreachable!() };
            // SAFETY: this commit holds the lock (`lock` kept it).
            let g = unsafe { Locked::resume(row_rec(w, t, rid), it.word) };
            let doomed = g.doomed_writer(w.local.txn.expect("a typed attempt is running"));
            g.keep();
            if let Some(d) = doomed {
                return Verdict::Doomed(d);
            }
        }
        if it.adds && it.word & ABSENT != 0 {
            return Verdict::Stale; // deleted since its accumulation was deferred
        }
        let Some(j) = it.write else { continue };
        if direct && it.word & LISTED != 0 {
            return Verdict::Stale;
        }
        if it.is_bucket() {
            continue;
        }
        let absent = it.word & ABSENT != 0;
        let ok = match w.writes[j as usize].kind {
            WriteKind::Update | WriteKind::Delete => !absent,
            WriteKind::Revive => absent && it.word & UNLINKED == 0,
            WriteKind::Insert | WriteKind::InsertDeleted => true,
        };
        if !ok {
            return Verdict::Stale;
        }
    }
    if phantoms_unchanged(w) {
        Verdict::Valid
    } else {
        Verdict::Stale
    }
}

/// Whether every phantom bucket the attempt covered still has the version it saw.
pub(super) fn phantoms_unchanged(w: &Ic3Worker<'_>) -> bool {
    let storage = w.ctx.storage;
    w.phantoms.iter().all(|p| storage.table(p.table).buckets.version(p.slot as usize) == p.version)
}

/// Writes write-set entry `j`'s image into its locked record `g` under a fresh version, and
/// reports the write to the history (and keeps it for the redo record when the database logs).
pub(super) fn install(w: &mut Ic3Worker<'_>, j: usize, g: &mut Locked<'_>) {
    let x = w.writes[j];
    let tbl = w.ctx.storage.table(x.table);
    let row = tbl.rows.get(x.rid);
    let mut cols = ALL_COLUMNS;
    if let Some((image, dirty)) = w.write_image(j) {
        row.write_cols_from(image, &tbl.projection, dirty);
        if x.kind == WriteKind::Update {
            cols = dirty;
        }
    }
    if w.ctx.log.is_some() {
        let l = &mut w.local;
        let image = x.kind.present().then(|| {
            let off = l.redo_images.len();
            l.redo_images.resize(off + row.len(), 0);
            row.read_into(&mut l.redo_images[off..]);
            (off as u32, row.len() as u32)
        });
        l.redo.push(Redo { table: x.table, key: x.key, rid: x.rid, image, cols });
    }
    let prev = version(g.word());
    let v = w.local.ctx().next_version();
    g.set_version(v);
    g.set(ABSENT, !x.kind.present());
    if let Some(h) = &mut w.ctx.history {
        // Only the columns written: pieces that read others (untracked) do not depend on it.
        let (v, prev) = (u128::from(v), u128::from(prev));
        h.write_cols(x.table.0, x.key, v, prev, x.kind.present(), x.written());
    }
}

/// Commits the open merged piece (see the module docs); when its validation fails, nothing is
/// held and the sets are as they were.
///
/// A held last piece (`w.local.held`, see [`held_uncontended`]) commits at the transaction's
/// commit, with it: when the attempt depends on nobody still running and the piece's records
/// name nobody else either, it installs its writes, applies the deferred accumulations and
/// passes the commit point under the piece's locks, leaving no entry ([`Verdict::Committed`]).
/// Otherwise it commits as any piece, with entries, and the transaction's commit goes on as
/// usual; but trailing operations (which commit with the transaction, directly) cannot be told
/// apart from the piece's then, so the attempt fails and its retry commits the piece when it
/// ends.
pub(super) fn commit_piece(w: &mut Ic3Worker<'_>) -> Verdict {
    gather(w);
    if !declared(w) {
        return Verdict::Undeclared;
    }
    let held = w.local.held.is_some();
    let me = w.local.txn.expect("a typed attempt is running");
    // The attempt's dependencies all over, and no rolled-back writer marked its entries.
    // SAFETY: the entries stay in the pool until the attempt ends.
    let alone = held
        && w.local.deps.iter().all(TxnRef::over)
        && !w.local.entries.iter().any(|&(_, e, _)| unsafe { e.as_ref() }.aborted());
    if alone && !w.local.deferred.is_empty() {
        let l = &mut w.local;
        for d in &l.deferred {
            l.items.push(Item { adds: true, ..Item::row(d.table, d.rid, false, None) });
        }
        sort_items(&mut l.items);
    }
    if !lock(w) {
        return Verdict::Stale;
    }
    match validate(w, false) {
        Verdict::Valid => {}
        v => {
            release(w, false);
            return v;
        }
    }
    if w.local.sub > 0 && !covered(w) {
        release(w, false);
        return Verdict::Stale;
    }
    if held {
        if alone && names_nobody(w, me) {
            if !close_untracked(&w.local) {
                release(w, false);
                return Verdict::Stale;
            }
            commit_held(w);
            reopen(&w.local);
            return Verdict::Committed;
        }
        if w.local.items.iter().any(|it| it.trailing) {
            release(w, false);
            w.local.hold_off_next = true;
            return Verdict::Stale;
        }
        // Commits as any piece, its accumulations left for the transaction's commit.
        w.local.held = None;
        if alone && !w.local.deferred.is_empty() {
            release(w, false); // the accumulations' rows are among the items: gather again
            return commit_piece(w);
        }
    }
    let txn = w.local.txn.expect("a typed attempt is running");
    let storage = w.ctx.storage;
    let shared = w.local.shared();
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        if it.hold == Hold::Skipped {
            continue;
        }
        let (rec, row) = match it.target() {
            Target::Row(t, rid) => {
                let row = storage.table(t).rows.get(rid);
                (row.header, Some(row))
            }
            Target::Bucket(t, slot) => (bucket_rec(shared, t, slot), None),
        };
        // SAFETY: `lock` took this lock (or it is our insert's) and kept it.
        let mut g = unsafe { Locked::resume(rec, it.word) };
        let l = &mut w.local;
        let e = match (it.target(), it.write) {
            (Target::Row(_, _), Some(_)) => {
                let len = row.as_ref().map_or(0, |r| r.len());
                let before = l.images.alloc(len);
                l.pool.entry(txn, true, Some(before))
            }
            (_, write) => l.pool.entry(txn, write.is_some(), None),
        };
        g.append(row.as_ref(), e, &mut l.deps);
        let key = it.write.map_or(0, |j| w.writes[j as usize].key);
        l.entries.push((it.target(), e, key));
        if let (Target::Row(t, rid), Some(j)) = (it.target(), it.write) {
            let j = j as usize;
            install(w, j, &mut g);
            let x = w.writes[j];
            let l = &mut w.local;
            match x.kind {
                WriteKind::Update => {}
                WriteKind::Insert | WriteKind::Revive => l.retire_on_rollback.push((t, x.key, rid)),
                WriteKind::Delete => l.retire_on_commit.push((t, x.key, rid)),
                WriteKind::InsertDeleted => {
                    l.retire_on_commit.push((t, x.key, rid));
                    l.retire_on_rollback.push((t, x.key, rid));
                }
            }
        }
        w.local.items[i].word = g.keep();
    }
    release(w, true);
    w.local.inserting.clear();
    w.clear_sets();
    w.local.sub_from = (0, 0, 0);
    Verdict::Valid
}
