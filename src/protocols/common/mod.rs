//! Mechanisms more than one protocol uses: table lookup with the standard aborts, an undo log,
//! and a value arena.

pub mod btree;
pub mod clock;
pub mod direct;
pub mod mql;
pub mod mv;
pub mod mvcc;
pub mod occ;
pub mod quiescence;
pub mod scan;
pub mod state;
pub mod tid;
pub mod tracking;

use crate::engine::context::WorkerCtx;
use crate::engine::procedure::ALL_COLUMNS;
use crate::error::{Abort, AbortReason};
use crate::storage::inject::CommitPhase;
use crate::storage::projection::{Columns, Projection};
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowId, Storage, Table, TableId};
use state::{HasState, ABSENT, PRESENT};

/// Looks up table `t`, or aborts with `Unsupported` (a procedure naming a table that does not
/// exist is a bug the driver reports).
#[inline]
pub fn table<R: RecordHeader>(storage: &Storage<R>, t: TableId) -> Result<&Table<R>, Abort> {
    storage.try_table(t).ok_or(Abort::new(AbortReason::Unsupported))
}

/// Aborts with `Unsupported` unless `value` is exactly one row of `table`.
#[inline]
pub fn check_len<R: RecordHeader>(table: &Table<R>, value: &[u8]) -> Result<(), Abort> {
    if value.len() == table.spec.row_size {
        Ok(())
    } else {
        Err(Abort::new(AbortReason::Unsupported))
    }
}

/// What the queue lock ([`mql`]) takes from its surroundings: std's atomics and [`SpinWait`]
/// here; `tests/loom_mql.rs` compiles `mql.rs` against loom's instead, to model-check it.
pub mod shim {
    pub use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

    /// Queue nodes per chunk.
    pub const CHUNK: usize = 256;
    /// Chunks per worker slot.
    pub const CHUNKS: usize = 256;

    /// A fresh spin-wait for a queue waiter: it spins on its own cache line, so it spins
    /// longer before yielding than `SpinWait::default` (512 rounds, not 64; measured on
    /// MOCC with every record hot: 2.8x the throughput at 2 threads, and 23x at 8 threads on 2
    /// cores, where a FIFO hand-over to a descheduled waiter stalls the queue).
    #[inline(always)]
    pub fn spin_wait() -> crate::util::SpinWait {
        crate::util::SpinWait::spinning(512)
    }
}

/// A byte arena for buffered values and before-images. Cleared per transaction; keeps capacity.
#[derive(Default)]
pub struct Arena {
    /// Only grows: bytes past `len` hold what earlier transactions left, and are reused.
    bytes: Vec<u8>,
    len: usize,
}

impl Arena {
    /// Makes room for `n` more bytes; returns their offset.
    #[inline]
    fn grow(&mut self, n: usize) -> usize {
        let off = self.len;
        self.len += n;
        if self.len > self.bytes.len() {
            self.bytes.resize(self.len, 0);
        }
        off
    }
    /// Appends `value`; returns its offset.
    #[inline]
    pub fn push(&mut self, value: &[u8]) -> u32 {
        let off = self.grow(value.len());
        self.bytes[off..off + value.len()].copy_from_slice(value);
        off as u32
    }
    /// Appends `len` bytes holding whatever an earlier transaction left there (zeroes the first
    /// time); returns the offset. For buffers the caller fills before it reads them, such as a
    /// projected copy whose undeclared columns nothing reads: no zeroing on the hot path.
    #[inline]
    pub fn push_reused(&mut self, len: usize) -> u32 {
        self.grow(len) as u32
    }
    /// The bytes at `off..off+len`.
    #[inline]
    pub fn get(&self, off: u32, len: usize) -> &[u8] {
        debug_assert!(off as usize + len <= self.len);
        &self.bytes[off as usize..off as usize + len]
    }
    /// The bytes at `off..off+len`, mutable.
    #[inline]
    pub fn get_mut(&mut self, off: u32, len: usize) -> &mut [u8] {
        debug_assert!(off as usize + len <= self.len);
        &mut self.bytes[off as usize..off as usize + len]
    }
    /// Empties the arena (keeping its memory).
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

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

/// A thread-local row-sized scratch buffer.
#[derive(Default)]
pub struct Scratch {
    buf: Vec<u8>,
}

impl Scratch {
    /// A buffer of `len` bytes (reusing capacity; contents are whatever was left in it).
    #[inline]
    pub fn get(&mut self, len: usize) -> &mut [u8] {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        &mut self.buf[..len]
    }
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

/// Runs an update's closure `f` on `buf`, a row buffer holding the columns it sees, of which
/// the caller writes back only `writes`. When the table checks projections (tests, `txlab
/// check`, `run --check-templates`), `f` runs on a checked copy: a byte changed outside `writes`
/// would be silently lost, so the attempt aborts with `TemplateViolation` (a procedure bug).
#[inline(always)]
pub fn apply_update<T>(
    p: &Projection,
    writes: Columns,
    buf: &mut [u8],
    f: impl FnOnce(&mut [u8]) -> T,
) -> Result<T, Abort> {
    if !p.checks_writes() {
        return Ok(f(buf));
    }
    // Test mode only: the copy allocates.
    let before = buf.to_vec();
    let out = f(buf);
    if p.changed_outside(&before, buf, writes) {
        return Err(Abort::new(AbortReason::TemplateViolation));
    }
    Ok(out)
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
    // A second projected read of just those words from the row costs more instructions
    // (callgrind, nocc TPC-C NP: +2 %) than this memcpy of the whole buffer.
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

/// The commit stamp Silo's rule gives a transaction that saw stamps up to `max` (its writes'
/// previous stamps and its worker's last stamp) in storage epoch `epoch`: above all of them, and
/// at least `epoch << 32` (the epoch in the high bits, as in a TID), so that stamps grow across
/// the incarnations of a key (see `crate::durability`).
#[inline]
pub fn stamp_after(max: u64, epoch: u64) -> u64 {
    (max + 1).max(epoch << 32)
}

/// The storage epoch in an in-place protocol's commit stamp ([`stamp_after`]).
#[inline]
pub fn stamp_epoch(stamp: u64) -> u64 {
    stamp >> 32
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
