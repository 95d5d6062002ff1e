//! Declared write ranges: units of keys versioned as one record.
//!
//! BOHM places a version for every declared write before the transaction runs, so it needs the
//! written keys in advance. Some keys depend on data that changes between the declaration and
//! the execution: TPC-C's New-Order inserts order `D_NEXT_O_ID`, which every New-Order of the
//! district moves on, and Delivery delivers the district's oldest new order. With a pipeline of
//! batches in flight, a reconnaissance read of such a key is stale for all but the first of
//! them, and re-submission (OLLP) would repeat for ever. The paper runs no such transaction.
//!
//! A transaction may instead declare a write *range* (`AccessSet::range` with
//! `AccessMode::Write`). The first write range the sequencer meets on a table puts the table in
//! *unit mode* from that transaction on: its keys are grouped into units of `2^shift`
//! consecutive keys (`key >> shift`), the shift being the smallest that makes that first range
//! one unit. From then on:
//!
//! * a declared write of a key of the table, or a write range over it, is a write of its units
//!   (at most [`MAX_RANGE_UNITS`] per range): the CC thread that owns a unit pushes a
//!   placeholder on the unit's record, which carries no data, as it would on a row;
//! * a transaction runs only after the previous writer of each of its units has completed
//!   (evaluated like any dependency), and at completion pushes its writes of the table's rows
//!   directly, produced, stamped with its timestamp, then produces its unit placeholders: the
//!   rows of a unit are written by one transaction at a time, in timestamp order;
//! * a read of the table, point or scan, declared or not, first makes sure the newest version
//!   below its timestamp of each unit it touches is produced, which means every earlier writer
//!   of those rows has completed; it then reads the rows at its timestamp as usual. For a
//!   declared read the unit's CC thread names that version when it plans the transaction (as
//!   read-set annotation does for rows), so that the read does not walk the unit's chain
//!   past the placeholders of the batches planned ahead.
//!
//! Rows keep the versions placed before the switch (all older than any unit writer's); a unit
//! writer pushes above them. The garbage below a row's pushed versions is cut by the next
//! writer of the row (all writers of a unit are serialised, so one thread at a time), after the
//! execution threads' low watermark: the newest version older than the first timestamp of the
//! watermark's batch is the oldest any running transaction reads.

use super::record::BohmRecord;
use crate::storage::index::{Index, IndexGuard, IndexKind, ScanBuf};
use crate::storage::{RowId, TableId};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// Most units one declared write range may cover.
pub const MAX_RANGE_UNITS: u64 = 1024;

/// A table's shift before it is in unit mode.
const NONE: u8 = u8::MAX;

/// The units of every table (see the module docs).
pub struct Units {
    /// Per table: the unit shift, or [`NONE`].
    shift: Box<[AtomicU8]>,
    /// Per table: unit number -> the unit record's address.
    index: Box<[Index]>,
    /// The unit records, owned here (their addresses are in `index`); only the sequencer adds
    /// to it.
    #[allow(clippy::vec_box, reason = "boxed so that a record keeps its address as the Vec grows")]
    records: Mutex<Vec<Box<BohmRecord>>>,
}

impl Units {
    /// No unit yet, for `tables` tables.
    pub fn new(tables: usize) -> Self {
        Units {
            shift: (0..tables).map(|_| AtomicU8::new(NONE)).collect(),
            index: (0..tables).map(|_| Index::new(IndexKind::Ordered, 0)).collect(),
            records: Mutex::new(Vec::new()),
        }
    }

    /// Whether table `t` exists.
    #[inline]
    pub fn has(&self, t: TableId) -> bool {
        t.index() < self.shift.len()
    }

    /// Table `t`'s unit shift, if it is in unit mode.
    #[inline]
    pub fn shift(&self, t: TableId) -> Option<u32> {
        // Acquire: pairs with the Release in `switch`; a reader that sees the shift sees the
        // units created after it only through the index, which is concurrent.
        let s = self.shift.get(t.index())?.load(Ordering::Acquire);
        (s != NONE).then_some(u32::from(s))
    }

    /// The record of unit `unit` of table `t`, if it exists.
    #[inline]
    pub fn get(&self, t: TableId, unit: u64, g: &IndexGuard) -> Option<&BohmRecord> {
        let RowId(addr) = self.index.get(t.index())?.get(unit, g)?;
        // SAFETY: the index holds addresses of records in `records`, which live as long as
        // `self`.
        Some(unsafe { &*(addr as *const BohmRecord) })
    }

    /// Calls `f` with every existing unit of table `t` in `[lo, hi]` (unit numbers), in order;
    /// stops at the first error.
    pub fn each_in<E>(
        &self,
        t: TableId,
        lo: u64,
        hi: u64,
        buf: &mut ScanBuf,
        g: &IndexGuard,
        mut f: impl FnMut(&BohmRecord) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(index) = self.index.get(t.index()) else { return Ok(()) };
        let mut from = lo;
        loop {
            const CHUNK: usize = 64;
            let scanned = index.scan(from, hi, CHUNK, buf, g);
            debug_assert!(scanned, "the unit index is ordered");
            let mut last = None;
            for (unit, RowId(addr)) in buf.entries() {
                // SAFETY: as in `get`.
                f(unsafe { &*(addr as *const BohmRecord) })?;
                last = Some(unit);
            }
            match last {
                Some(u) if buf.len() == CHUNK && u < hi => from = u + 1,
                _ => return Ok(()),
            }
        }
    }

    /// Puts table `t` in unit mode for the write range `[lo, hi]`, if it is not (the
    /// sequencer), and returns its shift: the smallest that makes the range one unit.
    pub fn switch(&self, t: TableId, lo: u64, hi: u64) -> u32 {
        if let Some(s) = self.shift(t) {
            return s;
        }
        let s = 64 - (lo ^ hi).leading_zeros();
        // Release: pairs with the Acquire in `shift`. Only the sequencer stores it.
        self.shift[t.index()].store(s as u8, Ordering::Release);
        s
    }

    /// The record of unit `unit` of table `t`, created if new (the sequencer, the only thread
    /// that creates units).
    pub fn get_or_create(&self, t: TableId, unit: u64, g: &IndexGuard) -> &BohmRecord {
        if let Some(r) = self.get(t, unit, g) {
            return r;
        }
        let rec = Box::new(BohmRecord::empty());
        let addr = &*rec as *const BohmRecord;
        self.records.lock().unwrap_or_else(|p| p.into_inner()).push(rec);
        let inserted = self.index[t.index()].insert_if_absent(unit, RowId(addr as u64), g);
        debug_assert!(inserted.is_ok(), "only the sequencer creates units");
        // SAFETY: just moved into `records` (a box: the address is stable), which lives as long
        // as `self`.
        unsafe { &*addr }
    }

    /// The units of table `t` (shift `shift`) a write range `[lo, hi]` covers: `None` if more
    /// than [`MAX_RANGE_UNITS`].
    pub fn covering(shift: u32, lo: u64, hi: u64) -> Option<std::ops::RangeInclusive<u64>> {
        let (a, b) = (unit_of(lo, shift), unit_of(hi, shift));
        (b - a < MAX_RANGE_UNITS).then_some(a..=b)
    }
}

/// The unit of `key` at `shift`.
#[inline]
pub fn unit_of(key: u64, shift: u32) -> u64 {
    key.checked_shr(shift).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_write_range_fixes_the_shift() {
        let u = Units::new(2);
        let t = TableId(1);
        assert_eq!(u.shift(t), None);
        // TPC-C's orders of one district: (district << 32) | order.
        let (lo, hi) = (7u64 << 32, (7u64 << 32) | u64::from(u32::MAX));
        assert_eq!(u.switch(t, lo, hi), 32);
        assert_eq!(u.shift(t), Some(32));
        assert_eq!(u.switch(t, 0, 5), 32, "fixed once set");
        assert_eq!(u.shift(TableId(0)), None, "per table");
        assert_eq!(unit_of(lo + 99, 32), 7);
        assert_eq!(Units::covering(32, lo, hi), Some(7..=7));
        assert_eq!(Units::covering(32, 0, 3 << 32), Some(0..=3));
        assert_eq!(Units::covering(0, 0, MAX_RANGE_UNITS), None, "too wide");
        assert_eq!(u.switch(TableId(0), 9, 9), 0, "a range of one key: units of one key");
        assert_eq!(unit_of(u64::MAX, 64), 0, "a range over every key: one unit");
    }

    #[test]
    fn units_are_created_once_and_found_in_order() {
        let u = Units::new(1);
        let t = TableId(0);
        let g = crate::storage::index::pin();
        assert!(u.get(t, 3, &g).is_none());
        let a = u.get_or_create(t, 3, &g) as *const BohmRecord;
        assert_eq!(u.get_or_create(t, 3, &g) as *const BohmRecord, a);
        assert_eq!(u.get(t, 3, &g).map(|r| r as *const BohmRecord), Some(a));
        for n in (0..200).rev() {
            u.get_or_create(t, 10 + 2 * n, &g);
        }
        let mut buf = ScanBuf::default();
        let mut seen = 0;
        u.each_in(t, 0, 1000, &mut buf, &g, |_| -> Result<(), ()> {
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 201, "more than one chunk of units");
        seen = 0;
        u.each_in(t, 4, 14, &mut buf, &g, |_| -> Result<(), ()> {
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 3, "units 10, 12 and 14");
    }
}
