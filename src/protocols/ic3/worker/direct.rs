//! The direct path: transactions outside the analysis run as one OCC unit that commits at once
//! and reads only committed data (see the parent module); a typed transaction's last step
//! ([`commit_last`]) waits out its doomed writers.

use super::*;

/// Whether every gathered item is on a table that no analysed template touches (the unit can
/// then commit directly without the analysis' constraints: no analysed piece conflicts with it).
pub(super) fn outside_analysis(w: &Ic3Worker<'_>) -> bool {
    let tables = &w.local.shared().analysed_tables;
    let analysed = |table: TableId| tables.get(table.index()).copied().unwrap_or(false);
    w.local.items.iter().all(|it| match it.target() {
        Target::Row(table, _) | Target::Bucket(table, _) => !analysed(table),
    })
}

/// Whether every value a read-only direct attempt read is still its record's committed value,
/// and every phantom bucket it covered unchanged, checked record by record without holding
/// the records together: each value was committed when read and is when checked, and a
/// record's committed version only moves forward, so each was committed all along in between,
/// and all of them at once just after the last read, where the history's serialization point
/// goes (the reasoning of Silo's read validation; a read-write attempt locks its items
/// instead, to install its writes at one instant). A record with pending writers or locked is
/// judged under its lock (a piece commit or a list leave holds it briefly); one locked while
/// being inserted by another transaction stays absent in committed data until that commits,
/// and its word changes when the insert's piece commits (a spurious failure, never a missed
/// change). A record locked and absent that the attempt did not find being inserted is a
/// revive committing: the attempt fails.
pub(super) fn reads_committed_now(w: &mut Ic3Worker<'_>) -> bool {
    if w.ctx.history.is_some() {
        // Its epoch serves the history's time line only (it writes nothing).
        let epoch = take_epoch(w);
        if let Some(h) = &mut w.ctx.history {
            h.serial_point_at(epoch_ts(epoch, now_ns()));
        }
    }
    let inserting = &w.local.inserting;
    let reads_ok = w.reads.iter().all(|r| {
        let rec = row_rec(w, r.table, r.rid);
        let mut now = rec.load();
        if now & (LOCK | PENDING) != 0 {
            now = match rec.lock_unless_inserting() {
                Some(g) => g.committed_word(),
                None if inserting.iter().any(|&(t, rid, _)| t == r.table && rid == r.rid) => {
                    rec.load()
                }
                None => return false,
            };
        }
        same_version(now, r.word)
    });
    reads_ok && phantoms_unchanged(w)
}

/// Commits an attempt that runs directly (see the module docs): at once, leaving no entry. A
/// read-only one validates without locking ([`reads_committed_now`]).
pub(super) fn commit_direct(w: &mut Ic3Worker<'_>) -> Result<(), Abort> {
    if w.writes.is_empty() {
        if !reads_committed_now(w) {
            w.rollback();
            return Err(Abort::new(AbortReason::ReadValidation));
        }
        if let Some(h) = &mut w.ctx.history {
            h.committed();
        }
        w.ctx.phase(CommitPhase::Validated);
        w.finish(true);
        return Ok(());
    }
    let shared = w.local.shared();
    if !writes_untracked(w) {
        return commit_direct_writes(w);
    }
    shared.direct_writers.enter(&shared.contexts);
    let done = commit_direct_writes(w);
    shared.direct_writers.leave();
    done
}

/// Locks, validates and installs a direct attempt's writes ([`commit_direct`]).
pub(super) fn commit_direct_writes(w: &mut Ic3Worker<'_>) -> Result<(), Abort> {
    gather(w);
    if !lock(w) {
        w.rollback();
        return Err(Abort::new(AbortReason::ReadValidation));
    }
    w.ctx.phase(CommitPhase::Locked);
    // The epoch before the validation (see the module docs' commit epochs).
    let epoch = take_epoch(w);
    if !matches!(validate(w, true), Verdict::Valid) {
        release(w, false);
        w.rollback();
        return Err(Abort::new(AbortReason::ReadValidation));
    }
    w.ctx.phase(CommitPhase::Validated);
    if let Some(h) = &mut w.ctx.history {
        h.serial_point_at(epoch_ts(epoch, now_ns()));
    }
    install_locked(w);
    if let Some(h) = &mut w.ctx.history {
        h.committed();
    }
    log_commit(w);
    w.ctx.phase(CommitPhase::Logged);
    stamp_and_release(w);
    w.ctx.phase(CommitPhase::Installed);
    w.finish(true);
    Ok(())
}

/// Commits open merged piece `m` of type `t` where no declared piece can run again (its last
/// declared piece was skipped, or the transaction commits): waits first if it waits after
/// execution, and fails the attempt when validation fails. `Ok(true)` when it was a held last
/// piece that committed the transaction with it.
pub(super) fn commit_last(w: &mut Ic3Worker<'_>, t: usize, m: usize) -> Result<bool, Abort> {
    if waits_after(&w.local, t, m) {
        wait_phase(&mut w.local, t, m, 0)?;
    }
    match commit_piece(w) {
        Verdict::Valid => {
            w.local.open = None;
            Ok(false)
        }
        Verdict::Committed => Ok(true),
        Verdict::Undeclared => Err(Abort::new(AbortReason::TemplateViolation)),
        Verdict::Doomed(d) => {
            // Run again only once the doomed writer has rolled back: until it has, every
            // attempt would find it again (a retry loop without backoff would spin on it,
            // keeping it off the core it needs to roll back).
            wait_out_doomed(w, d)?;
            Err(Abort::new(AbortReason::ReadValidation))
        }
        Verdict::Stale => Err(Abort::new(AbortReason::ReadValidation)),
    }
}

/// Waits, holding no lock, until the doomed transaction `d` (a [`Verdict::Doomed`]) is over;
/// a cascading abort if this attempt is doomed meanwhile.
pub(super) fn wait_out_doomed(w: &Ic3Worker<'_>, d: TxnRef) -> Result<(), Abort> {
    let me = w.local.txn.expect("a typed attempt is running");
    d.wait(w.local.shared().options.wait, || d.over() || me.doomed());
    if me.doomed() {
        return Err(cascade());
    }
    Ok(())
}
