//! Declaring an access set by running the procedure against reconnaissance: a dry run.
//!
//! [`declare_by_dry_run`] runs a procedure's body on [`DryRun`], a [`Worker`] whose reads are
//! [`Recon`] reads of the committed (or in-flight: best effort) rows and whose writes change
//! nothing, and declares every key and range the body touches with the mode it touches it
//! with. A workload whose keys depend on data deep into the transaction (TPC-E's trades, a
//! position's holdings) thus declares with its bodies as written, instead of a second,
//! hand-written copy of their key logic that would drift from them.
//!
//! The declaration is as good as the reconnaissance: a row that changes between the dry run
//! and the run can send the run elsewhere, outside the set, and the run aborts with
//! `AccessSetMismatch` and is declared again (OLLP), as for any declaration. Reads inside the
//! dry run do not see its own writes (they are not applied); a body that reads what it wrote
//! declares the key all the same, through the write.

use super::procedure::{AccessMode, AccessSet, Checks, Columns, Procedure, Recon, Tx, TxnType};
use super::protocol::Worker;
use crate::error::Abort;
use crate::storage::TableId;
use std::ops::ControlFlow;

/// The worker of a dry run (see the module docs).
pub struct DryRun<'a, R: Recon> {
    recon: &'a R,
    set: &'a mut AccessSet,
    /// The copy an update's closure changes (and the dry run drops).
    scratch: Vec<u8>,
}

impl<'a, R: Recon> DryRun<'a, R> {
    /// A dry run reading through `recon` and declaring into `set`.
    pub fn new(recon: &'a R, set: &'a mut AccessSet) -> Self {
        DryRun { recon, set, scratch: Vec::new() }
    }
}

/// Declares `procedure`'s access set (of type `ty`) into `set` by a dry run through `recon`.
/// Always `true`: what the run reached is declared, even when it ended in an abort (a user
/// abort declares what came before it; a row the reconnaissance missed is caught at run time).
pub fn declare_by_dry_run<P: Procedure, R: Recon>(
    procedure: &P,
    ty: &TxnType,
    recon: &R,
    set: &mut AccessSet,
) -> bool {
    let mut dry = DryRun::new(recon, set);
    let mut tx = Tx::new(&mut dry, ty, Checks::default());
    let _ = procedure.run(&mut tx);
    true
}

impl<R: Recon> Worker for DryRun<'_, R> {
    fn begin(&mut self) {}

    fn read_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        _cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.set.read(table, key);
        Ok(self.recon.peek(table, key, f))
    }

    fn read_for_update<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.set.write(table, key);
        Ok(self.recon.peek(table, key, f))
    }

    fn write(&mut self, table: TableId, key: u64, _value: &[u8]) -> Result<bool, Abort> {
        self.set.write(table, key);
        Ok(true)
    }

    fn update_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        _reads: Columns,
        _writes: Columns,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.set.write(table, key);
        let scratch = &mut self.scratch;
        let found = self.recon.peek(table, key, |row| {
            scratch.clear();
            scratch.extend_from_slice(row);
        });
        Ok(found.map(|()| f(scratch)))
    }

    fn insert(&mut self, table: TableId, key: u64, _value: &[u8]) -> Result<bool, Abort> {
        self.set.write(table, key);
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool, Abort> {
        self.set.write(table, key);
        Ok(true)
    }

    fn scan(
        &mut self,
        table: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        self.set.range(table, lo, hi, AccessMode::Read);
        Ok(self.recon.scan(table, lo, hi, limit, f))
    }

    fn commit(&mut self) -> Result<(), Abort> {
        Ok(())
    }

    fn abort(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Piece;
    use crate::error::AbortReason;
    use std::collections::BTreeMap;

    /// Reconnaissance over an in-memory table 0: key -> 8-byte value.
    struct Rows(BTreeMap<u64, u64>);

    impl Recon for Rows {
        fn peek<T>(&self, _: TableId, key: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
            self.0.get(&key).map(|v| f(&v.to_le_bytes()))
        }
        fn scan(
            &self,
            _: TableId,
            lo: u64,
            hi: u64,
            limit: usize,
            mut f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
        ) -> usize {
            let mut n = 0;
            for (&k, v) in self.0.range(lo..=hi).take(limit) {
                n += 1;
                if f(k, &v.to_le_bytes()).is_break() {
                    break;
                }
            }
            n
        }
    }

    /// Reads key 1, whose value names the key it then updates; scans 10..=20 and inserts at
    /// the first key found there plus 100; then rolls back on purpose.
    struct Chase;

    static TY: TxnType = TxnType { name: "chase", pieces: &[] as &[Piece] };

    impl Procedure for Chase {
        fn txn_type(&self) -> usize {
            0
        }
        fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
            let t = TableId(0);
            let next = tx.read(t, 1, |r| u64::from_le_bytes(r.try_into().unwrap()))?;
            let next = next.ok_or(Abort::new(AbortReason::MissingRow))?;
            let _ = tx.update(t, next, |r| r[0] = 9)?;
            let mut first = None;
            tx.scan(t, 10, 20, 5, |k, _| {
                first = Some(k);
                ControlFlow::Break(())
            })?;
            let _ = tx.insert(t, first.unwrap_or(0) + 100, &[0; 8])?;
            tx.user_abort()
        }
    }

    #[test]
    fn a_dry_run_declares_the_keys_the_data_leads_to() {
        let rows = Rows(BTreeMap::from([(1, 7), (7, 0), (12, 0), (15, 0)]));
        let mut set = AccessSet::default();
        assert!(declare_by_dry_run(&Chase, &TY, &rows, &mut set));
        set.seal();
        let t = TableId(0);
        assert!(set.covers(t, 1, AccessMode::Read) && !set.covers(t, 1, AccessMode::Write));
        assert!(set.covers(t, 7, AccessMode::Write), "the key the read named");
        assert!(set.covers_range(t, 10, 20, AccessMode::Read));
        assert!(set.covers(t, 112, AccessMode::Write), "the insert the scan led to");
        assert!(!set.covers(t, 115, AccessMode::Write));
        // The update changed a scratch copy only.
        assert_eq!(rows.0[&7], 0);
    }
}
