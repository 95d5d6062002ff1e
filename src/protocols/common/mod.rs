//! Mechanisms more than one protocol uses: table lookup with the standard aborts, a spin-wait
//! that yields under oversubscription, an undo log, and a value arena.

pub mod scan;
pub mod state;

use crate::error::{Abort, AbortReason};
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowId, Storage, Table, TableId};

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

/// Spins politely: `spin_loop` hints first, then yields the core so that a lock holder that was
/// descheduled (more threads than cores) can run.
#[derive(Default)]
pub struct SpinWait {
    n: u32,
}

impl SpinWait {
    /// Waits a little longer each call.
    #[inline]
    pub fn spin(&mut self) {
        self.n += 1;
        if self.n <= 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A byte arena for buffered values and before-images. Cleared per transaction; keeps capacity.
#[derive(Default)]
pub struct Arena {
    bytes: Vec<u8>,
}

impl Arena {
    /// Appends `value`; returns its offset.
    #[inline]
    pub fn push(&mut self, value: &[u8]) -> u32 {
        let off = self.bytes.len();
        self.bytes.extend_from_slice(value);
        off as u32
    }
    /// Appends `len` zero bytes; returns the offset.
    #[inline]
    pub fn push_zeroed(&mut self, len: usize) -> u32 {
        let off = self.bytes.len();
        self.bytes.resize(off + len, 0);
        off as u32
    }
    /// The bytes at `off..off+len`.
    #[inline]
    pub fn get(&self, off: u32, len: usize) -> &[u8] {
        &self.bytes[off as usize..off as usize + len]
    }
    /// The bytes at `off..off+len`, mutable.
    #[inline]
    pub fn get_mut(&mut self, off: u32, len: usize) -> &mut [u8] {
        &mut self.bytes[off as usize..off as usize + len]
    }
    /// Empties the arena.
    #[inline]
    pub fn clear(&mut self) {
        self.bytes.clear();
    }
}

/// What an undo entry restores on abort (in-place protocols: nocc, 2PL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UndoKind {
    /// Restore the before-image at `off`.
    Update {
        /// Arena offset of the before-image.
        off: u32,
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
}

/// A thread-local row-sized scratch buffer.
#[derive(Default)]
pub struct Scratch {
    buf: Vec<u8>,
}

impl Scratch {
    /// A zeroed buffer of `len` bytes (reusing capacity).
    #[inline]
    pub fn get(&mut self, len: usize) -> &mut [u8] {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        &mut self.buf[..len]
    }
}
