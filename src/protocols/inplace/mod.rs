//! The in-place family's substrate (`nocc`, `2pl-nowait`, `2pl-waitdie`, `2pl-ordered`): one
//! version per record, written in place while the writer excludes every conflicting access (or,
//! for `nocc`, excludes nothing), with an undo log of before-images that an abort rolls back.
//!
//! **What a protocol of the family implements**: its record (a state word, [`state`], plus
//! whatever its locks need) and how it excludes conflicts before an operation reaches the row:
//! 2PL takes record locks in its own worker; `2pl-ordered` takes every lock at begin and runs
//! its operations through [`direct::DirectWorker::locked`]; `nocc` runs them through
//! [`direct::DirectWorker`] unlocked.
//!
//! **What it gets**: the state word with its history stamps ([`state`]); inserts over an
//! existing key ([`insert_existing`]), updates with their before-images ([`update_in_place`]),
//! roll-back ([`roll_back`]), the commit stamp and the log records written under the locks
//! ([`commit_in_place`], [`log_in_place`]); and, for protocols without their own worker, the
//! whole direct worker ([`direct`]).

pub mod direct;
pub mod state;

use crate::engine::context::WorkerCtx;
use crate::engine::procedure::ALL_COLUMNS;
use crate::error::{Abort, AbortReason};
use crate::protocols::common::{apply_update, stamp_after, Arena, Scratch};
use crate::storage::inject::CommitPhase;
use crate::storage::projection::Columns;
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowId, Table, TableId};
use state::{HasState, ABSENT, PRESENT};

/// What an undo entry restores on abort (in-place protocols: nocc, 2PL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UndoKind {
    /// Restore the before-image at `off` (the words of the columns `cols`).
    Update {
        /// Arena offset of the before-image (a whole row's bytes, of which `cols` are valid).
        off: u32,
        /// The columns changed.
        cols: Columns,
    },
    /// A fresh record was inserted: mark it absent and retire it.
    Insert,
    /// A deleted record was revived: mark it absent again.
    Revive,
    /// A record was deleted: mark it present again.
    Delete,
}

/// One undo entry.
#[derive(Clone, Copy, Debug)]
pub struct Undo {
    /// Table.
    pub table: TableId,
    /// Row.
    pub rid: RowId,
    /// Key (for retiring).
    pub key: u64,
    /// What to restore.
    pub kind: UndoKind,
    /// The version stamp before the change (history recording; 0 otherwise).
    pub prev: u64,
}

/// An insert of `key` that found the index already mapping it to `rid` (nocc, 2PL; the caller
/// holds whatever lock its protocol needs): a present row fails the insert (`Ok(false)`, a read of
/// it); an unlinked one is being removed by the GC (`InsertConflict`); an absent one is revived in
/// place with `value` (`Ok(true)`, see [`revive_in_place`]).
#[allow(clippy::too_many_arguments)]
pub fn insert_existing<R: RecordHeader + HasState>(
    ctx: &mut WorkerCtx<'_, R>,
    tbl: &Table<R>,
    rid: RowId,
    key: u64,
    value: &[u8],
    scratch: &mut Scratch,
    arena: &mut Arena,
    undo: &mut Vec<Undo>,
) -> Result<bool, Abort> {
    let state = tbl.rows.get(rid).header.state();
    match state.get() {
        state::PRESENT => {
            state.note_read(&mut ctx.history, tbl.id.0, key);
            Ok(false)
        }
        state::UNLINKED => Err(Abort::new(AbortReason::InsertConflict)),
        _ => {
            revive_in_place(ctx, tbl, rid, key, value, scratch, arena, undo);
            Ok(true)
        }
    }
}

/// Revives the absent row `rid` of `key` in place with `value` (nocc, 2PL; the caller holds
/// whatever lock its protocol needs): logs the dead payload and version for the undo log, writes
/// the row and installs a new version, reporting the tombstone read and the write to the history.
#[allow(clippy::too_many_arguments)]
pub fn revive_in_place<R: RecordHeader + HasState>(
    ctx: &mut WorkerCtx<'_, R>,
    tbl: &Table<R>,
    rid: RowId,
    key: u64,
    value: &[u8],
    scratch: &mut Scratch,
    arena: &mut Arena,
    undo: &mut Vec<Undo>,
) {
    let row = tbl.rows.get(rid);
    let state = row.header.state();
    state.note_read(&mut ctx.history, tbl.id.0, key);
    // The dead payload is restored too if this transaction deleted the row itself and aborts.
    let before = scratch.get(tbl.spec.row_size);
    row.read_into(before);
    let off = arena.push(before);
    row.write_from(value);
    let prev = state.install(&mut ctx.history, tbl.id.0, key, PRESENT, false);
    let table = tbl.id;
    undo.push(Undo { table, rid, key, kind: UndoKind::Update { off, cols: ALL_COLUMNS }, prev });
    undo.push(Undo { table, rid, key, kind: UndoKind::Revive, prev });
}

/// Reads the columns `cols` of the present row `rid` (nocc, 2PL: the caller holds whatever
/// lock its protocol needs to read it) into `scratch`, reports the read to the history and
/// runs `f` on the row's bytes.
#[inline]
pub fn read_in_place<R: RecordHeader + HasState, T>(
    ctx: &mut WorkerCtx<'_, R>,
    tbl: &Table<R>,
    rid: RowId,
    key: u64,
    cols: Columns,
    scratch: &mut Scratch,
    f: impl FnOnce(&[u8]) -> T,
) -> T {
    let row = tbl.rows.get(rid);
    row.header.state().note_read(&mut ctx.history, tbl.id.0, key);
    let buf = scratch.get(tbl.spec.row_size);
    row.read_cols_into(buf, &tbl.projection, cols);
    f(buf)
}

/// Runs `f` on the present row `rid` in place (nocc, 2PL: the caller holds whatever lock its
/// protocol needs to write it): copies the words of the columns `reads | writes` out, logs the
/// words of `writes` as the before-image for [`roll_back`], writes those back changed and
/// reports the read and the write to the history.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn update_in_place<R: RecordHeader + HasState, T>(
    ctx: &mut WorkerCtx<'_, R>,
    tbl: &Table<R>,
    rid: RowId,
    key: u64,
    reads: Columns,
    writes: Columns,
    scratch: &mut Scratch,
    arena: &mut Arena,
    undo: &mut Vec<Undo>,
    f: impl FnOnce(&mut [u8]) -> T,
) -> Result<T, Abort> {
    let row = tbl.rows.get(rid);
    let (p, len) = (&tbl.projection, tbl.spec.row_size);
    let state = row.header.state();
    state.note_read(&mut ctx.history, tbl.id.0, key);
    let buf = scratch.get(len);
    row.read_cols_into(buf, p, reads | writes);
    // The before-image: a plain copy of the buffer (only its `writes` words are ever restored).
    // A second projected read of just those words from the row costs more instructions than
    // this memcpy of the whole buffer (`scripts/instructions.sh BIN -- -p nocc -w tpcc --np`).
    let off = arena.push(buf);
    let out = apply_update(p, writes, buf, f)?;
    row.write_cols_from(buf, p, writes);
    let prev = state.install(&mut ctx.history, tbl.id.0, key, PRESENT, false);
    let kind = UndoKind::Update { off, cols: writes };
    undo.push(Undo { table: tbl.id, rid, key, kind, prev });
    Ok(out)
}

/// Rolls an in-place writer's undo log back, newest first: payloads, states and version stamps
/// (so that recorded histories show the aborted versions gone); rows the transaction inserted
/// are retired.
pub fn roll_back<R: RecordHeader + HasState>(
    ctx: &mut WorkerCtx<'_, R>,
    undo: &[Undo],
    arena: &Arena,
) {
    let storage = ctx.storage;
    for u in undo.iter().rev() {
        let tbl = storage.table(u.table);
        let row = tbl.rows.get(u.rid);
        let state = row.header.state();
        match u.kind {
            UndoKind::Update { off, cols } => {
                row.write_cols_from(arena.get(off, tbl.spec.row_size), &tbl.projection, cols);
                state.restore_stamp(u.prev);
            }
            UndoKind::Insert => {
                state.set_versioned(ABSENT, u.prev);
                ctx.retire(u.table, u.key, u.rid);
            }
            UndoKind::Revive => {
                state.set_versioned(ABSENT, u.prev);
            }
            UndoKind::Delete => {
                state.set_versioned(PRESENT, u.prev);
            }
        }
    }
}

/// The first half of an in-place protocol's commit (nocc, 2PL), at its serialization point
/// with every lock still held (see the commit contract in [`crate::engine::Protocol`]): passes
/// [`CommitPhase::Locked`] (the writes were made under the locks, which are all held) and
/// [`CommitPhase::Validated`] (nothing to validate: the locks exclude every conflict, or
/// nothing does), logs the writes ([`log_in_place`]) and passes [`CommitPhase::Logged`], and
/// hands the rows it deleted to the GC. Returns whether the transaction wrote, for
/// [`returning_in_place`].
#[inline]
pub fn commit_in_place<R: RecordHeader + HasState>(
    ctx: &mut WorkerCtx<'_, R>,
    undo: &[Undo],
    deleted: &[(TableId, u64, RowId)],
    columns: bool,
) -> bool {
    let wrote = !undo.is_empty();
    if wrote {
        ctx.phase(CommitPhase::Locked);
    }
    ctx.phase(CommitPhase::Validated);
    log_in_place(ctx, undo, columns);
    if wrote {
        ctx.phase(CommitPhase::Logged);
    }
    for &(t, key, rid) in deleted {
        ctx.retire(t, key, rid);
    }
    wrote
}

/// The second half of an in-place commit ([`commit_in_place`]), once the locks are released
/// and the writes are visible to everyone: passes [`CommitPhase::Installed`] and returns
/// through [`WorkerCtx::commit_returning`].
#[inline]
pub fn returning_in_place<R: RecordHeader>(
    ctx: &mut WorkerCtx<'_, R>,
    wrote: bool,
) -> Result<(), Abort> {
    if wrote {
        ctx.phase(CommitPhase::Installed);
    }
    ctx.commit_returning()
}

/// The in-place protocols' side of the durability contract (nocc, 2PL), at commit with every
/// lock still held: chooses the commit stamp by Silo's rule from the written records' stamps
/// (each record's state word holds the stamp of its last committed writer; an abort puts it
/// back), appends every write of the undo log with the record's current image (an update's
/// changed columns of it), and gives each written record the new stamp. A record written twice
/// is logged twice, with the same stamp, from the same image. Does nothing when the database does not log.
///
/// `columns`: whether an update may log only the columns it changed. A protocol without
/// isolation (nocc) logs whole images: a concurrent deletion of the row may take the smaller
/// stamp, and recovery would then find changed columns with no image of the row under them.
#[inline]
pub fn log_in_place<R: RecordHeader + HasState>(
    ctx: &mut WorkerCtx<'_, R>,
    undo: &[Undo],
    columns: bool,
) {
    if ctx.log.is_none() || undo.is_empty() {
        return;
    }
    log_in_place_slow(ctx, undo, columns);
}

#[inline(never)]
fn log_in_place_slow<R: RecordHeader + HasState>(
    ctx: &mut WorkerCtx<'_, R>,
    undo: &[Undo],
    columns: bool,
) {
    let storage = ctx.storage;
    let mut max = ctx.last_stamp;
    for u in undo {
        max = max.max(storage.table(u.table).rows.get(u.rid).header.state().stamp());
    }
    let stamp = stamp_after(max, storage.epochs().global());
    ctx.last_stamp = stamp;
    let log = ctx.log.as_mut().expect("checked by log_in_place");
    log.begin(stamp, undo.len() as u32);
    for u in undo {
        let tbl = storage.table(u.table);
        let row = tbl.rows.get(u.rid);
        let state = row.header.state();
        if state.present() {
            // An update logs the columns it changed; anything else that leaves the row present
            // (an insert, a revival, a deletion undone later in the transaction), all of them.
            let cols = match u.kind {
                UndoKind::Update { cols, .. } if columns => cols,
                _ => crate::engine::procedure::ALL_COLUMNS,
            };
            log.put_row(u.table.0, stamp, u.key, row, &tbl.projection, cols);
        } else {
            log.delete(u.table.0, stamp, u.key);
        }
        state.restore_stamp(stamp);
    }
    ctx.log_epoch = log.end();
}
