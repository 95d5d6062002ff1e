//! The conformance suite: the operation interface's single-transaction guarantees, written once
//! and instantiated for every protocol by one line in `protocol_suite!`.

use crate::common;

use std::ops::ControlFlow;
use std::time::Duration;
use txlab::engine::{
    AccessMode, AccessSet, Checks, Isolation, Piece, TableAccess, TxnType, ALL_COLUMNS,
};
use txlab::prelude::*;

const T: TableId = TableId(0);
const H: TableId = TableId(1);

fn db<P: Protocol>() -> Database<P> {
    let opts = DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let tables = [
        TableSpec::new("t", 16, 20_000).with_columns(&[("a", 0, 8), ("b", 8, 8)]),
        TableSpec::new("h", 16, 1000).with_index(IndexKind::Hash),
    ];
    common::database::<P>(&tables, opts)
}

/// How long a test waits for reclamation to make progress before it reports a deadlock: minutes,
/// far beyond what a loaded machine needs (the epochs advance every millisecond).
const LIVENESS: Duration = Duration::from_secs(300);

fn row(v: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&v.to_le_bytes());
    r[8..].copy_from_slice(&(!v).to_le_bytes());
    r
}

fn val(r: &[u8]) -> u64 {
    u64::from_le_bytes(r[..8].try_into().unwrap())
}

/// Runs `f` in one transaction and commits it.
fn txn<W: Worker, T>(w: &mut W, f: impl FnOnce(&mut W) -> Result<T, Abort>) -> T {
    w.begin();
    let out = f(w).expect("operation");
    w.commit().expect("commit");
    out
}

fn get<W: Worker>(w: &mut W, t: TableId, k: u64) -> Option<u64> {
    txn(w, |w| w.read(t, k, val))
}

pub fn read_your_writes<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    w.begin();
    assert!(w.insert(T, 1, &row(10)).unwrap());
    assert_eq!(w.read(T, 1, val).unwrap(), Some(10));
    assert!(w.write(T, 1, &row(11)).unwrap());
    assert_eq!(w.read(T, 1, val).unwrap(), Some(11));
    assert_eq!(
        w.update(T, 1, |r| {
            r[0] += 1;
            val(r)
        })
        .unwrap(),
        Some(12)
    );
    assert_eq!(w.read_for_update(T, 1, val).unwrap(), Some(12));
    assert!(w.delete(T, 1).unwrap());
    assert_eq!(w.read(T, 1, val).unwrap(), None);
    assert!(w.insert(T, 1, &row(13)).unwrap(), "re-insert after own delete");
    assert_eq!(w.read(T, 1, val).unwrap(), Some(13));
    w.commit().unwrap();
    assert_eq!(get(&mut w, T, 1), Some(13));
    // Across transactions, on a committed row.
    w.begin();
    assert!(w.write(T, 1, &row(20)).unwrap());
    assert_eq!(w.read(T, 1, val).unwrap(), Some(20));
    w.commit().unwrap();
    let mut other = db.worker().unwrap();
    assert_eq!(get(&mut other, T, 1), Some(20), "another worker sees the commit");
}

pub fn abort_rolls_back_everything<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| {
        for k in 0..4 {
            assert!(w.insert(T, k, &row(k * 100))?);
        }
        Ok(())
    });
    w.begin();
    assert!(w.write(T, 0, &row(1)).unwrap());
    assert_eq!(w.update(T, 1, |r| r[0] = 7).unwrap(), Some(()));
    assert!(w.insert(T, 9, &row(9)).unwrap());
    assert!(w.delete(T, 2).unwrap());
    assert!(w.delete(T, 3).unwrap());
    assert!(w.insert(T, 3, &row(33)).unwrap());
    w.abort();
    w.abort(); // a second abort is a no-op
    let mut r = db.worker().unwrap();
    assert_eq!(get(&mut r, T, 0), Some(0));
    assert_eq!(get(&mut r, T, 1), Some(100));
    assert_eq!(get(&mut r, T, 2), Some(200));
    assert_eq!(get(&mut r, T, 3), Some(300));
    assert_eq!(get(&mut r, T, 9), None);
    // The rolled-back insert does not block a later insert of the same key.
    txn(&mut w, |w| w.insert(T, 9, &row(99)).map(|ok| assert!(ok)));
    assert_eq!(get(&mut r, T, 9), Some(99));
}

pub fn insert_and_delete_visibility<P: Protocol>() {
    let db = db::<P>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    for t in [T, H] {
        txn(&mut a, |w| w.insert(t, 5, &row(5)).map(|ok| assert!(ok)));
        assert_eq!(get(&mut b, t, 5), Some(5));
        txn(&mut b, |w| {
            assert!(!w.insert(t, 5, &row(6))?, "duplicate insert fails");
            assert!(!w.delete(t, 6)?, "delete of a missing key");
            assert!(!w.write(t, 6, &row(6))?, "blind write of a missing key");
            assert_eq!(w.update(t, 6, |_| ())?, None);
            assert_eq!(w.read(t, 6, val)?, None);
            Ok(())
        });
        txn(&mut a, |w| w.delete(t, 5).map(|ok| assert!(ok)));
        assert_eq!(get(&mut b, t, 5), None);
        txn(&mut b, |w| {
            assert!(!w.delete(t, 5)?);
            assert!(!w.write(t, 5, &row(1))?);
            Ok(())
        });
        txn(&mut b, |w| w.insert(t, 5, &row(55)).map(|ok| assert!(ok)));
        assert_eq!(get(&mut a, t, 5), Some(55));
    }
}

/// One transaction deletes a row and inserts its key again, among writes of other rows, in
/// several orders: every row ends with what the transaction last wrote to it.
pub fn reinsert_after_delete_in_one_transaction<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| (1..=4).try_for_each(|k| w.insert(T, k, &row(k)).map(|ok| assert!(ok))));
    txn(&mut w, |w| {
        // An update buffered first, then a delete and a re-insert of another row.
        w.update(T, 1, |r| r[..8].copy_from_slice(&11u64.to_le_bytes()))?;
        assert!(w.delete(T, 2)?);
        assert!(w.insert(T, 2, &row(22))?);
        // A re-insert whose key was deleted after an update of it.
        w.update(T, 3, |r| r[..8].copy_from_slice(&30u64.to_le_bytes()))?;
        assert!(w.delete(T, 3)?);
        assert!(w.insert(T, 3, &row(33))?);
        // A fresh insert deleted and inserted again.
        assert!(w.insert(T, 5, &row(50))?);
        assert!(w.delete(T, 5)?);
        assert!(w.insert(T, 5, &row(55))?);
        w.update(T, 4, |r| r[..8].copy_from_slice(&44u64.to_le_bytes()))?;
        assert_eq!(w.read(T, 2, val)?, Some(22));
        assert_eq!(w.read(T, 1, val)?, Some(11));
        Ok(())
    });
    for (k, v) in [(1, 11), (2, 22), (3, 33), (4, 44), (5, 55)] {
        assert_eq!(get(&mut w, T, k), Some(v), "key {k}");
    }
    let whole = txn(&mut w, |w| w.read(T, 2, |r| r.to_vec()));
    assert_eq!(whole.as_deref(), Some(&row(22)[..]));
}

/// A table of three 8-byte columns `a`, `b`, `c`, with poisoning on: what a projected copy
/// leaves out reads as `POISON`.
fn columns_db<P: Protocol>() -> Database<P> {
    columns_db_checked(true)
}

/// [`columns_db`], with projection checks (poison, written-column checks) on or off.
fn columns_db_checked<P: Protocol>(checked: bool) -> Database<P> {
    let opts = DbOptions { max_workers: 4, poison_unprojected: checked, ..Default::default() };
    let spec = TableSpec::new("c", 24, 10).with_columns(&[("a", 0, 8), ("b", 8, 8), ("c", 16, 8)]);
    common::database::<P>(&[spec], opts)
}

const A: u64 = 1;
const B: u64 = 2;
const C: u64 = 4;

fn col(r: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(r[i * 8..i * 8 + 8].try_into().unwrap())
}

fn set_col(r: &mut [u8], i: usize, v: u64) {
    r[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
}

fn cols3<W: Worker>(w: &mut W) -> Option<[u64; 3]> {
    txn(w, |w| w.read(T, 1, |r| [col(r, 0), col(r, 1), col(r, 2)]))
}

pub fn column_projection_copies_and_writes_back_only_declared_columns<P: Protocol>() {
    let db = columns_db::<P>();
    let mut w = db.worker().unwrap();
    let poison = u64::from_ne_bytes([txlab::storage::projection::POISON; 8]);
    let mut init = [0u8; 24];
    (0..3).for_each(|i| set_col(&mut init, i, i as u64 + 1));
    txn(&mut w, |w| w.insert(T, 1, &init).map(|ok| assert!(ok)));
    // A projected read sees its columns; the others hold the marker.
    let seen = txn(&mut w, |w| w.read_cols(T, 1, B, |r| [col(r, 0), col(r, 1), col(r, 2)]));
    assert_eq!(seen, Some([poison, 2, poison]));
    // Updates of different columns of one row in one transaction, then reads of more columns
    // than were updated: every column keeps its latest value.
    txn(&mut w, |w| {
        w.update_cols(T, 1, A, A, |r| {
            assert_eq!((col(r, 0), col(r, 1)), (1, poison));
            set_col(r, 0, 10);
        })?;
        w.update_cols(T, 1, B, B, |r| set_col(r, 1, col(r, 1) * 10))?;
        assert_eq!(w.read_cols(T, 1, A | C, |r| (col(r, 0), col(r, 2)))?, Some((10, 3)));
        assert_eq!(w.read(T, 1, |r| [col(r, 0), col(r, 1), col(r, 2)])?, Some([10, 20, 3]));
        Ok(())
    });
    assert_eq!(cols3(&mut w), Some([10, 20, 3]));
    txn(&mut w, |w| w.update_cols(T, 1, C, C, |r| set_col(r, 2, 30)));
    assert_eq!(cols3(&mut w), Some([10, 20, 30]));
    // An aborted projected update restores its columns and leaves the others alone.
    w.begin();
    w.update_cols(T, 1, B, B, |r| set_col(r, 1, 99)).unwrap();
    w.update_cols(T, 1, A | B, A | B, |r| set_col(r, 0, col(r, 1) + 1)).unwrap();
    w.abort();
    assert_eq!(cols3(&mut w), Some([10, 20, 30]));
    // A whole-row write after a projected update replaces every column.
    txn(&mut w, |w| {
        w.update_cols(T, 1, A, A, |r| set_col(r, 0, 11))?;
        assert!(w.write(T, 1, &init)?);
        Ok(())
    });
    assert_eq!(cols3(&mut w), Some([1, 2, 3]));
}

/// An update that reads some columns and writes others: it sees both, only the written ones
/// are installed (or restored on abort), and in a database that checks projections a change to
/// any other byte aborts the attempt instead of being silently dropped.
pub fn split_update_writes_only_its_written_columns<P: Protocol>() {
    let db = columns_db::<P>();
    let mut w = db.worker().unwrap();
    let poison = u64::from_ne_bytes([txlab::storage::projection::POISON; 8]);
    let mut init = [0u8; 24];
    (0..3).for_each(|i| set_col(&mut init, i, i as u64 + 1));
    txn(&mut w, |w| w.insert(T, 1, &init).map(|ok| assert!(ok)));
    // Reads a, writes b: f sees both (c is not copied).
    let seen = txn(&mut w, |w| {
        w.update_cols(T, 1, A, B, |r| {
            let seen = [col(r, 0), col(r, 1), col(r, 2)];
            set_col(r, 1, col(r, 0) + col(r, 1));
            seen
        })
    });
    assert_eq!(seen, Some([1, 2, poison]));
    assert_eq!(cols3(&mut w), Some([1, 3, 3]));
    // Two split updates of one row in one transaction, each writing another column, then a
    // read of the row inside the transaction: both changes are there and both are installed.
    let inside = txn(&mut w, |w| {
        w.update_cols(T, 1, A, B, |r| set_col(r, 1, col(r, 0) * 10))?;
        w.update_cols(T, 1, B, C, |r| set_col(r, 2, col(r, 1) + 5))?;
        w.read(T, 1, |r| [col(r, 0), col(r, 1), col(r, 2)])
    });
    assert_eq!(inside, Some([1, 10, 15]));
    assert_eq!(cols3(&mut w), Some([1, 10, 15]));
    // A write-only update (reads nothing) of a column, aborted: the row is as before.
    w.begin();
    w.update_cols(T, 1, 0, A, |r| set_col(r, 0, 77)).unwrap();
    w.update_cols(T, 1, A, C, |r| set_col(r, 2, col(r, 0))).unwrap();
    assert_eq!(w.read(T, 1, |r| [col(r, 0), col(r, 2)]).unwrap(), Some([77, 77]));
    w.abort();
    assert_eq!(cols3(&mut w), Some([1, 10, 15]));
    // Changing a column the update only reads, or one it does not see at all, is caught.
    for (reads, writes, changed) in [(A | B, B, 0), (A, B, 2), (0, C, 1)] {
        w.begin();
        let e = w.update_cols(T, 1, reads, writes, |r| set_col(r, changed, 99)).unwrap_err();
        assert_eq!(e.reason, AbortReason::TemplateViolation, "changed column {changed}");
        w.abort();
    }
    assert_eq!(cols3(&mut w), Some([1, 10, 15]));
    // Unchecked, such a change is not installed: only the written columns are.
    let db = columns_db_checked::<P>(false);
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| w.insert(T, 1, &init).map(|ok| assert!(ok)));
    txn(&mut w, |w| {
        w.update_cols(T, 1, A | B, B, |r| {
            set_col(r, 0, 99);
            set_col(r, 1, 20);
            set_col(r, 2, 99);
        })
    });
    assert_eq!(cols3(&mut w), Some([1, 20, 3]));
}

/// A projected update followed by a read of a column another transaction changed in between:
/// both cannot commit (Silo aborts the widening read, 2PL never lets the other write). A
/// protocol that reads a snapshot sees the column as of its own begin.
pub fn widening_a_projected_update_sees_no_lost_update<P: Protocol>() {
    let db = columns_db::<P>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    txn(&mut a, |w| w.insert(T, 1, &[0u8; 24]).map(|ok| assert!(ok)));
    a.begin();
    a.update_cols(T, 1, A, A, |r| set_col(r, 0, 1)).unwrap();
    b.begin();
    let b_committed = b.update_cols(T, 1, C, C, |r| set_col(r, 2, 7)).is_ok_and(|r| r.is_some())
        && b.commit().is_ok();
    if !b_committed {
        b.abort();
    }
    let a_committed = match a.read_cols(T, 1, C, |r| col(r, 2)) {
        Ok(Some(c)) => {
            assert_eq!(c, if b_committed && !P::CAPS.snapshot_reads { 7 } else { 0 });
            a.commit().is_ok()
        }
        _ => {
            a.abort();
            false
        }
    };
    assert!(!(a_committed && b_committed), "both committed: one's write is lost");
    let last = cols3(&mut a).unwrap();
    assert_eq!(last, [u64::from(a_committed), 0, if b_committed { 7 } else { 0 }]);
}

pub fn wrong_payload_length_and_unknown_table_abort<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    w.begin();
    assert_eq!(w.insert(T, 1, &[0u8; 3]).unwrap_err().reason, AbortReason::Unsupported);
    w.abort();
    // A table id of another database (this one has two tables): every entry point refuses it
    // with an error, none panics.
    let other = TableId(7);
    let unsupported =
        |r: Result<(), Abort>| assert_eq!(r.unwrap_err().reason, AbortReason::Unsupported);
    type Op<'a, W> = &'a dyn Fn(&mut W) -> Result<(), Abort>;
    let ops: [Op<'_, P::Worker<'_>>; 7] = [
        &|w| w.read(other, 1, val).map(drop),
        &|w| w.read_for_update(other, 1, val).map(drop),
        &|w| w.write(other, 1, &row(1)).map(drop),
        &|w| w.update(other, 1, |_| ()).map(drop),
        &|w| w.insert(other, 1, &row(1)).map(drop),
        &|w| w.delete(other, 1).map(drop),
        &|w| w.scan(other, 0, 9, 10, |_, _| ControlFlow::Continue(())).map(drop),
    ];
    for op in ops {
        w.begin();
        w.prefetch(other, 1);
        w.prefetch_many(&[(other, 1, ALL_COLUMNS)]);
        unsupported(op(&mut w));
        w.abort();
    }
    assert_eq!(db.count_present(other, 0, 9), None);
    assert_eq!(db.visit_present(other, 0, 9, 10, |_, _| ControlFlow::Continue(())), None);
    assert_eq!(Recon::peek(&db, other, 1, |_| ()), None);
    let mut l = db.loader();
    assert_eq!(l.insert(other, 1, &row(1)).unwrap_err().to_string(), "no table with id 7");
    assert!(db.storage().try_table(other).is_none());
}

fn keys_of<W: Worker>(
    w: &mut W,
    t: TableId,
    lo: u64,
    hi: u64,
    limit: usize,
) -> Result<Vec<u64>, Abort> {
    let mut seen = Vec::new();
    w.scan(t, lo, hi, limit, |k, r| {
        assert_eq!(val(r), k, "scan passes each key's own row");
        seen.push(k);
        ControlFlow::Continue(())
    })?;
    Ok(seen)
}

pub fn scan_limits_order_and_own_writes<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| {
        for k in (0..300).step_by(3) {
            w.insert(T, k, &row(k))?;
        }
        Ok(())
    });
    txn(&mut w, |w| {
        assert_eq!(keys_of(w, T, 10, 50, 5)?, vec![12, 15, 18, 21, 24]);
        assert_eq!(keys_of(w, T, 10, 20, 100)?, vec![12, 15, 18]);
        assert_eq!(keys_of(w, T, 297, u64::MAX, 10)?, vec![297]);
        assert_eq!(keys_of(w, T, 20, 10, 10)?, Vec::<u64>::new(), "empty range");
        assert_eq!(keys_of(w, T, 0, 299, 1000)?.len(), 100, "crosses many buckets");
        let mut first = Vec::new();
        let n = w.scan(T, 0, 100, 50, |k, _| {
            first.push(k);
            if k >= 6 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        assert_eq!((n, first), (3, vec![0, 3, 6]), "break stops the scan");
        // Own inserts appear, own deletes disappear, own updates show the new value.
        w.insert(T, 13, &row(13))?;
        w.delete(T, 15)?;
        w.update(T, 18, |r| r[8] = 1)?;
        assert_eq!(keys_of(w, T, 10, 20, 100)?, vec![12, 13, 18]);
        Ok(())
    });
    // A dense range: batches of up to 64 buckets hold more than one 256-entry index chunk.
    txn(&mut w, |w| {
        for k in 10_000..16_000u64 {
            w.insert(T, k, &row(k))?;
        }
        Ok(())
    });
    let dense = txn(&mut w, |w| keys_of(w, T, 10_000, u64::MAX, 100_000));
    assert_eq!(dense, (10_000..16_000).collect::<Vec<_>>());
    let some = txn(&mut w, |w| keys_of(w, T, 10_100, 15_000, 700));
    assert_eq!(some, (10_100..10_800).collect::<Vec<_>>());
    // A scan of a hash table is refused, not wrong.
    w.begin();
    assert_eq!(keys_of(&mut w, H, 0, 10, 10).unwrap_err().reason, AbortReason::Unsupported);
    w.abort();
}

static TYPES: [TxnType; 1] = [TxnType {
    name: "transfer",
    pieces: &[
        Piece {
            name: "debit",
            accesses: &[TableAccess { table: T, mode: AccessMode::Write, columns: 0b01 }],
        },
        Piece {
            name: "audit",
            accesses: &[TableAccess { table: T, mode: AccessMode::Read, columns: ALL_COLUMNS }],
        },
        Piece {
            name: "split",
            accesses: &[
                TableAccess { table: T, mode: AccessMode::Read, columns: 0b10 },
                TableAccess { table: T, mode: AccessMode::Write, columns: 0b01 },
            ],
        },
    ],
}];

struct Debit {
    key: u64,
    amount: u64,
}

impl Procedure for Debit {
    fn txn_type(&self) -> usize {
        0
    }
    fn declare<R: Recon>(&self, _recon: &R, set: &mut AccessSet) -> bool {
        set.write(T, self.key);
        true
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let ok = tx.piece(0, |tx| {
            let bal = tx.read_cols(T, self.key, 0b01, val)?.unwrap_or(0);
            if bal < self.amount {
                return Ok(false);
            }
            tx.update_cols(T, self.key, 0b01, 0b01, |r| {
                r[..8].copy_from_slice(&(bal - self.amount).to_le_bytes())
            })?;
            Ok(true)
        })?;
        if !ok {
            return tx.user_abort();
        }
        tx.piece(1, |tx| tx.read(T, self.key, val).map(drop))
    }
}

fn run_proc<W: Worker>(
    w: &mut W,
    p: &impl Procedure,
    checks: bool,
    set: Option<&AccessSet>,
) -> Result<(), Abort> {
    w.begin();
    let mut tx = Tx::new(
        w,
        &TYPES[p.txn_type()],
        Checks { templates: checks, access_set: set, ..Checks::default() },
    );
    let r = p.run(&mut tx).and_then(|()| w.commit());
    if r.is_err() {
        w.abort();
    }
    r
}

pub fn user_abort_rolls_back_and_is_reported<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| w.insert(T, 1, &row(50)).map(drop));
    run_proc(&mut w, &Debit { key: 1, amount: 20 }, true, None).unwrap();
    assert_eq!(get(&mut w, T, 1), Some(30));
    let e = run_proc(&mut w, &Debit { key: 1, amount: 40 }, true, None).unwrap_err();
    assert_eq!(e.reason, AbortReason::User);
    assert_eq!(get(&mut w, T, 1), Some(30), "nothing of the aborted transaction remains");
}

struct Rogue(u8);

impl Procedure for Rogue {
    fn txn_type(&self) -> usize {
        0
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        match self.0 {
            // Writes in the read-only piece.
            0 => tx.piece(1, |tx| tx.write(T, 1, &row(1)).map(drop)),
            // Touches column b in a piece that declared only column a.
            1 => tx.piece(0, |tx| tx.update_cols(T, 1, 0b10, 0b10, |_| ()).map(drop)),
            // Touches a table no piece declares.
            2 => tx.piece(0, |tx| tx.read(H, 1, val).map(drop)),
            // Operates outside any piece of a pieced type.
            3 => tx.read(T, 1, val).map(drop),
            // Writes column b, which its piece declares as read only.
            4 => tx.piece(2, |tx| tx.update_cols(T, 1, 0b01, 0b10, |_| ()).map(drop)),
            // Reads and writes as its piece declares (the one rogue that is not).
            5 => tx.piece(2, |tx| tx.update_cols(T, 1, 0b10, 0b01, |_| ()).map(drop)),
            // A piece the template does not have.
            _ => tx.piece(5, |_| Ok(())),
        }
    }
}

pub fn templates_reject_undeclared_access<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| w.insert(T, 1, &row(1)).map(drop));
    for i in [0, 1, 2, 3, 4, 6] {
        let e = run_proc(&mut w, &Rogue(i), true, None).unwrap_err();
        assert_eq!(e.reason, AbortReason::TemplateViolation, "rogue {i}");
    }
    run_proc(&mut w, &Rogue(5), true, None).unwrap();
    // Without checks the same procedure runs.
    run_proc(&mut w, &Rogue(2), false, None).unwrap();
}

/// Reads the pointer stored at key 0 by reconnaissance, then follows it at run time.
struct Chase;

impl Procedure for Chase {
    fn txn_type(&self) -> usize {
        0
    }
    fn declare<R: Recon>(&self, recon: &R, set: &mut AccessSet) -> bool {
        set.read(T, 0);
        if let Some(target) = recon.peek(T, 0, val) {
            set.write(T, target);
        }
        true
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let target = tx.read(T, 0, val)?.expect("pointer row");
        tx.update(T, target, |r| r[8] = r[8].wrapping_add(1)).map(drop)
    }
}

pub fn access_sets_are_checked_at_run_time<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| {
        w.insert(T, 0, &row(5))?;
        w.insert(T, 5, &row(5))?;
        w.insert(T, 6, &row(6))
    });
    let mut set = AccessSet::default();
    set.clear();
    assert!(Chase.declare(&db, &mut set));
    set.seal();
    run_proc(&mut w, &Chase, false, Some(&set)).unwrap();
    // The pointer moves after the reconnaissance: the stale set is caught (OLLP).
    txn(&mut w, |w| w.write(T, 0, &row(6)).map(drop));
    let e = run_proc(&mut w, &Chase, false, Some(&set)).unwrap_err();
    assert_eq!(e.reason, AbortReason::AccessSetMismatch);
    // Declaring again fixes it.
    set.clear();
    assert!(Chase.declare(&db, &mut set));
    set.seal();
    run_proc(&mut w, &Chase, false, Some(&set)).unwrap();
    assert_eq!(txn(&mut w, |w| w.read(T, 6, |r| r[8])), Some(!6u64 as u8 + 1));
}

/// A database with one table of at most 300 rows and 1 ms epochs (reclamation tests).
fn small_db<P: Protocol>() -> Database<P> {
    let opts = DbOptions {
        max_workers: 4,
        epoch_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let tables = [TableSpec::new("small", 8, 0).with_capacity(300)];
    common::database::<P>(&tables, opts)
}

pub fn deleted_rows_are_reclaimed_and_slots_reused<P: Protocol>() {
    let db = small_db::<P>();
    let t = TableId(0);
    let mut w = db.worker().unwrap();
    let start = std::time::Instant::now();
    for i in 0..3000u64 {
        let key = i % 50;
        loop {
            w.begin();
            let r = w.insert(t, key, &i.to_le_bytes()).and_then(|_| w.commit());
            match r {
                Ok(()) => break,
                Err(a) => {
                    w.abort();
                    assert_ne!(
                        a.reason,
                        AbortReason::TableFull,
                        "slots were not reclaimed after {i} inserts"
                    );
                    // A deadlock detector, not a speed limit: the epochs advance every
                    // millisecond, so a full table is reclaimed long before this.
                    assert!(
                        start.elapsed() < LIVENESS,
                        "insert {i}: deleted rows were never reclaimed (deadlock detector)"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        txn(&mut w, |w| w.delete(t, key).map(|ok| assert!(ok)));
        if i % 100 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert_eq!(db.count_present(t, 0, u64::MAX), Some(0));
}

/// A row retired twice (an aborted insert, then a revival and a delete) is freed once: after
/// many such cycles, fresh rows still each have a record of their own.
pub fn a_row_retired_twice_is_freed_once<P: Protocol>() {
    let opts = DbOptions {
        max_workers: 4,
        epoch_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let db = common::database::<P>(&[TableSpec::new("t", 16, 0).with_capacity(10_000)], opts);
    let mut w = db.worker().unwrap();
    for i in 0..200u64 {
        w.begin();
        assert!(w.insert(T, i, &row(i)).unwrap());
        w.abort();
        txn(&mut w, |w| w.insert(T, i, &row(i)).map(|ok| assert!(ok)));
        txn(&mut w, |w| w.delete(T, i).map(|ok| assert!(ok)));
        std::thread::sleep(Duration::from_micros(200));
    }
    for i in 1000..1400u64 {
        txn(&mut w, |w| w.insert(T, i, &row(i)).map(|ok| assert!(ok)));
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for i in 1000..1400u64 {
        assert_eq!(get(&mut w, T, i), Some(i), "key {i} shares its record with another key");
    }
}

/// A key prefetched by a running transaction, then deleted, unlinked by the GC and inserted again
/// under a new row before the transaction reads it, reads as present: the prefetched row id is
/// dead and must not answer for the key. Run on both index kinds.
pub fn prefetched_key_reinserted_after_unlink_reads_present<P: Protocol>() {
    let db = db::<P>();
    for t in [T, H] {
        let index = &db.storage().try_table(t).unwrap().index;
        let g = txlab::storage::index::pin();
        let mut w0 = db.worker().unwrap();
        let mut w1 = db.worker().unwrap();
        txn(&mut w1, |w| w.insert(t, 5, &row(1)));
        let old = index.get(5, &g).expect("inserted");
        txn(&mut w1, |w| w.delete(t, 5));
        // Let the epoch pass the delete's, so that w0's transaction does not hold the unlink back.
        std::thread::sleep(Duration::from_millis(20));
        w0.begin();
        w0.prefetch(t, 5);
        // w1's reclaimer unlinks the row during one of its next begins.
        let start = std::time::Instant::now();
        while index.get(5, &g).is_some() {
            assert!(
                start.elapsed() < LIVENESS,
                "the GC never unlinked the deleted row (deadlock detector)"
            );
            txn(&mut w1, |_| Ok(()));
            std::thread::sleep(Duration::from_micros(200));
        }
        txn(&mut w1, |w| w.insert(t, 5, &row(2)));
        assert_ne!(index.get(5, &g), Some(old), "the re-insert made a new row");
        let seen = match w0.read(t, 5, val) {
            Err(a) if a.reason == AbortReason::SnapshotTooOld => {
                // A timestamp-ordered protocol that keeps one version per record (cicada's
                // single-version=on) has none for w0's timestamp, below the re-insert's: it
                // aborts, and its next transaction reads the new row.
                w0.abort();
                w0.begin();
                w0.prefetch(t, 5);
                let seen = w0.read(t, 5, val).expect("read");
                assert_eq!(seen, Some(2), "table {t:?}: the retry misses the re-insert");
                w0.commit().expect("commit");
                continue;
            }
            r => r.expect("read"),
        };
        if P::CAPS.snapshot_reads {
            // w0 reads the snapshot of its begin, before the re-insert: absent.
            assert_eq!(seen, None, "table {t:?}: a snapshot saw a later insert");
            match (w0.commit(), P::CAPS.isolation) {
                // Nothing else was read: committing serializes w0 before the re-insert
                // (Hekaton commits a transaction that wrote nothing at its snapshot).
                (Ok(()), Isolation::Snapshot | Isolation::Serializable) => {}
                // A serializable snapshot reader that observed the key absent after its
                // inserter committed may abort (SSN keeps no inserter stamps per bucket).
                (Err(a), Isolation::Serializable) => {
                    assert_eq!(a.reason, AbortReason::PhantomValidation, "table {t:?}");
                    w0.abort();
                }
                (r, i) => panic!("table {t:?}: commit {r:?} under {i:?}"),
            }
            w0.begin();
            w0.prefetch(t, 5);
            let seen = w0.read(t, 5, val).expect("read");
            assert_eq!(seen, Some(2), "table {t:?}: a new snapshot misses the re-insert");
        } else {
            assert_eq!(seen, Some(2), "table {t:?}: the dead prefetched row answered for the key");
        }
        w0.commit().expect("commit");
    }
}

/// A worker dropped with its transaction open rolls it back: its writes vanish and nothing it
/// held (locks, pending versions) blocks the next transaction on the same keys.
pub fn a_dropped_worker_rolls_back<P: Protocol>() {
    let db = db::<P>();
    let mut w = db.worker().unwrap();
    txn(&mut w, |w| {
        assert!(w.insert(T, 1, &row(1))?);
        w.insert(T, 2, &row(2))
    });
    let mut a = db.worker().unwrap();
    a.begin();
    assert_eq!(a.read_for_update(T, 1, val).unwrap(), Some(1));
    assert!(a.write(T, 1, &row(100)).unwrap());
    assert!(a.delete(T, 2).unwrap());
    assert!(a.insert(T, 3, &row(3)).unwrap());
    drop(a);
    txn(&mut w, |w| {
        assert_eq!(w.read(T, 1, val)?, Some(1));
        assert_eq!(w.read(T, 2, val)?, Some(2));
        assert_eq!(w.read(T, 3, val)?, None);
        assert!(w.write(T, 1, &row(10))?);
        assert!(w.delete(T, 2)?);
        w.insert(T, 3, &row(30))
    });
    assert_eq!(get(&mut w, T, 1), Some(10));
    assert_eq!(get(&mut w, T, 2), None);
    assert_eq!(get(&mut w, T, 3), Some(30));
}

/// Workers that delete rows and go away leave their queued rows and free slots to the workers
/// that stay: 30 short-lived workers each insert and delete 40 rows of a 300-row table, so the
/// table fills up unless departed workers' rows are reclaimed and their slots reused.
pub fn departed_workers_rows_are_reclaimed<P: Protocol>() {
    let db = small_db::<P>();
    let t = TableId(0);
    let start = std::time::Instant::now();
    for round in 0..30u64 {
        let mut w = db.worker().unwrap();
        for k in 0..40u64 {
            let key = round * 1000 + k;
            loop {
                w.begin();
                match w.insert(t, key, &key.to_le_bytes()).and_then(|_| w.commit()) {
                    Ok(()) => break,
                    Err(a) => {
                        w.abort();
                        assert_eq!(a.reason, AbortReason::TableFull, "round {round}");
                        assert!(
                            start.elapsed() < LIVENESS,
                            "round {round}: rows of departed workers were never reclaimed \
                             (deadlock detector)"
                        );
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
        for k in 0..40u64 {
            txn(&mut w, |w| w.delete(t, round * 1000 + k).map(|ok| assert!(ok)));
        }
    }
}

macro_rules! protocol_suite {
    ($($name:ident => $P:ty $([$($opt:expr),*])?),* $(,)?) => {$(
        mod $name {
            const OPTS: &[(&str, &str)] = &[$($($opt),*)?];
            type P = $P;
            #[test] fn read_your_writes() { crate::common::with_options(OPTS, || super::read_your_writes::<P>()) }
            #[test] fn abort_rolls_back_everything() { crate::common::with_options(OPTS, || super::abort_rolls_back_everything::<P>()) }
            #[test] fn insert_and_delete_visibility() { crate::common::with_options(OPTS, || super::insert_and_delete_visibility::<P>()) }
            #[test] fn reinsert_after_delete_in_one_transaction() { crate::common::with_options(OPTS, || super::reinsert_after_delete_in_one_transaction::<P>()) }
            #[test] fn column_projection_copies_and_writes_back_only_declared_columns() { crate::common::with_options(OPTS, || super::column_projection_copies_and_writes_back_only_declared_columns::<P>()) }
            #[test] fn split_update_writes_only_its_written_columns() { crate::common::with_options(OPTS, || super::split_update_writes_only_its_written_columns::<P>()) }
            #[test] fn wrong_payload_length_and_unknown_table_abort() { crate::common::with_options(OPTS, || super::wrong_payload_length_and_unknown_table_abort::<P>()) }
            #[test] fn scan_limits_order_and_own_writes() { crate::common::with_options(OPTS, || super::scan_limits_order_and_own_writes::<P>()) }
            #[test] fn user_abort_rolls_back_and_is_reported() { crate::common::with_options(OPTS, || super::user_abort_rolls_back_and_is_reported::<P>()) }
            #[test] fn templates_reject_undeclared_access() { crate::common::with_options(OPTS, || super::templates_reject_undeclared_access::<P>()) }
            #[test] fn access_sets_are_checked_at_run_time() { crate::common::with_options(OPTS, || super::access_sets_are_checked_at_run_time::<P>()) }
            #[test] fn deleted_rows_are_reclaimed_and_slots_reused() { crate::common::with_options(OPTS, || super::deleted_rows_are_reclaimed_and_slots_reused::<P>()) }
            #[test] fn a_row_retired_twice_is_freed_once() { crate::common::with_options(OPTS, || super::a_row_retired_twice_is_freed_once::<P>()) }
            #[test] fn prefetched_key_reinserted_after_unlink_reads_present() { crate::common::with_options(OPTS, || super::prefetched_key_reinserted_after_unlink_reads_present::<P>()) }
            #[test] fn a_dropped_worker_rolls_back() { crate::common::with_options(OPTS, || super::a_dropped_worker_rolls_back::<P>()) }
            #[test] fn departed_workers_rows_are_reclaimed() { crate::common::with_options(OPTS, || super::departed_workers_rows_are_reclaimed::<P>()) }
        }
    )*};
}

/// Guarantees only serializable protocols give.
macro_rules! serializable_suite {
    ($($name:ident => $P:ty $([$($opt:expr),*])?),* $(,)?) => {$(
        mod $name {
            const OPTS: &[(&str, &str)] = &[$($($opt),*)?];
            type P = $P;
            #[test] fn widening_a_projected_update_sees_no_lost_update() { crate::common::with_options(OPTS, || super::widening_a_projected_update_sees_no_lost_update::<P>()) }
            #[test] fn two_scanners_inserting_into_the_scanned_range_cannot_both_commit() { crate::common::with_options(OPTS, || super::two_scanners_inserting_into_the_scanned_range_cannot_both_commit::<P>()) }
            #[test] fn retry_runs_until_commit_and_stops_on_what_retrying_cannot_cure() { crate::common::with_options(OPTS, || super::retry_runs_until_commit_and_stops_on_what_retrying_cannot_cure::<P>()) }
        }
    )*};
}

protocol_suite! {
    nocc => txlab::protocols::nocc::Nocc,
    si => txlab::protocols::si::Si,
    si_slow_gc => txlab::protocols::si::Si [("gc-interval-us", "100000")],
    ermia_ssn => txlab::protocols::ermia_ssn::ErmiaSsn,
    ermia_ssi => txlab::protocols::ermia_ssi::ErmiaSsi,
    ermia_ssn_slow_gc => txlab::protocols::ermia_ssn::ErmiaSsn [("gc-interval-us", "100000")],
    hekaton => txlab::protocols::hekaton::Hekaton,
    cicada => txlab::protocols::cicada::Cicada,
    cicada_plain => txlab::protocols::cicada::Cicada [("sort", "off"), ("precheck", "off"), ("adaptive", "off"), ("early-abort", "off"), ("write-latest-only", "off"), ("inlining", "off"), ("deferred-index", "off")],
    cicada_nowait => txlab::protocols::cicada::Cicada [("wait", "off"), ("gc-interval-us", "100000"), ("timestamps", "counter")],
    cicada_sv => txlab::protocols::cicada::Cicada [("single-version", "on")],
    cicada_sv_nowait => txlab::protocols::cicada::Cicada [("single-version", "on"), ("wait", "off"), ("deferred-index", "off"), ("timestamps", "counter")],
    cicada_mv => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "4")],
    cicada_mv_nowait => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "3"), ("wait", "off"), ("timestamps", "counter")],
    two_pl_nowait => txlab::protocols::two_pl::TwoPlNoWait,
    two_pl_waitdie => txlab::protocols::two_pl::TwoPlWaitDie,
    two_pl_ordered => txlab::protocols::two_pl_ordered::TwoPlOrdered [("undeclared", "no-wait")],
    silo => txlab::protocols::silo::Silo,
    silo_nowait => txlab::protocols::silo::Silo [("validation-lock", "nowait")],
    silo_snapshots => txlab::protocols::silo::Silo [("snapshot-epochs", "1")],
    tictoc => txlab::protocols::tictoc::TicToc,
    tictoc_wait_plain => txlab::protocols::tictoc::TicToc [("validation-lock", "wait"), ("preemptive-abort", "off"), ("timestamp-history", "off"), ("read-phase-extension", "2000")],
    tictoc_nowaittt => txlab::protocols::tictoc::TicToc [("validation-lock", "nowaittt")],
    mocc => txlab::protocols::mocc::Mocc,
    mocc_hot => txlab::protocols::mocc::Mocc [("temperature-threshold", "1")],
    mocc_hot_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("validation-lock", "nowait"), ("read-phase-extension", "2000")],
    mocc_hot_mql => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql")],
    mocc_hot_mql_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql"), ("validation-lock", "nowait")],
    mocc_hot_snapshots => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("snapshot-epochs", "1")],
    ic3 => txlab::protocols::ic3::Ic3,
    ic3_pessimistic_yield => txlab::protocols::ic3::Ic3 [("optimistic", "off"), ("rendezvous", "off"), ("wait", "yield")],
    ic3_snapshots => txlab::protocols::ic3::Ic3 [("snapshot-epochs", "1")],
}

mod serializable {
    use super::*;
    serializable_suite! {
        ermia_ssi => txlab::protocols::ermia_ssi::ErmiaSsi,
        ermia_ssn => txlab::protocols::ermia_ssn::ErmiaSsn,
        hekaton => txlab::protocols::hekaton::Hekaton,
        cicada => txlab::protocols::cicada::Cicada,
        cicada_plain => txlab::protocols::cicada::Cicada [("sort", "off"), ("precheck", "off"), ("adaptive", "off"), ("early-abort", "off"), ("write-latest-only", "off"), ("inlining", "off"), ("deferred-index", "off")],
        cicada_nowait => txlab::protocols::cicada::Cicada [("wait", "off"), ("gc-interval-us", "100000"), ("timestamps", "counter")],
        cicada_sv => txlab::protocols::cicada::Cicada [("single-version", "on")],
        cicada_sv_nowait => txlab::protocols::cicada::Cicada [("single-version", "on"), ("wait", "off"), ("deferred-index", "off"), ("timestamps", "counter")],
        cicada_mv => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "4")],
        cicada_mv_nowait => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "3"), ("wait", "off"), ("timestamps", "counter")],
        two_pl_nowait => txlab::protocols::two_pl::TwoPlNoWait,
        two_pl_waitdie => txlab::protocols::two_pl::TwoPlWaitDie,
        two_pl_ordered => txlab::protocols::two_pl_ordered::TwoPlOrdered [("undeclared", "no-wait")],
        silo => txlab::protocols::silo::Silo,
        silo_nowait => txlab::protocols::silo::Silo [("validation-lock", "nowait")],
        silo_snapshots => txlab::protocols::silo::Silo [("snapshot-epochs", "1")],
        tictoc => txlab::protocols::tictoc::TicToc,
        tictoc_wait_plain => txlab::protocols::tictoc::TicToc [("validation-lock", "wait"), ("preemptive-abort", "off"), ("timestamp-history", "off"), ("read-phase-extension", "2000")],
        tictoc_nowaittt => txlab::protocols::tictoc::TicToc [("validation-lock", "nowaittt")],
        mocc => txlab::protocols::mocc::Mocc,
        mocc_hot => txlab::protocols::mocc::Mocc [("temperature-threshold", "1")],
        mocc_hot_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("validation-lock", "nowait"), ("read-phase-extension", "2000")],
        mocc_hot_mql => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql")],
        mocc_hot_mql_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql"), ("validation-lock", "nowait")],
        mocc_hot_snapshots => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("snapshot-epochs", "1")],
        ic3 => txlab::protocols::ic3::Ic3,
        ic3_pessimistic_yield => txlab::protocols::ic3::Ic3 [("optimistic", "off"), ("rendezvous", "off"), ("wait", "yield")],
        ic3_suspend => txlab::protocols::ic3::Ic3 [("wait", "suspend")],
        ic3_snapshots => txlab::protocols::ic3::Ic3 [("snapshot-epochs", "1")],
    }
}

/// Deterministic interleaving on one thread: two transactions scan the same empty range, then
/// each inserts a different key into it. At most one may commit.
pub fn two_scanners_inserting_into_the_scanned_range_cannot_both_commit<P: Protocol>() {
    let db = db::<P>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    b.begin();
    let step = |w: &mut P::Worker<'_>, key: u64| -> Result<(), Abort> {
        assert_eq!(keys_of(w, T, 2000, 2999, 8)?, Vec::<u64>::new());
        w.insert(T, key, &row(key)).map(drop)
    };
    let ra = step(&mut a, 2336);
    let rb = step(&mut b, 2786);
    let ca = ra.and_then(|()| a.commit());
    if ca.is_err() {
        a.abort();
    }
    let cb = rb.and_then(|()| b.commit());
    if cb.is_err() {
        b.abort();
    }
    assert!(ca.is_err() || cb.is_err(), "both committed: a phantom");
    let mut r = db.worker().unwrap();
    let n = txn(&mut r, |w| keys_of(w, T, 2000, 2999, 8)).len();
    assert!(n <= 1);
}

/// `Retry` retries a conflict until its attempt bound, then returns the conflict; once the
/// conflict is gone it commits in one attempt; a user abort (with its code) and a procedure bug
/// end it after one attempt. The conflict: another worker's uncommitted insert of the same key
/// (that worker began first, so it is the older one under wait-die and the retrier dies). A
/// protocol that defers index updates to validation (cicada) does not show an insert in
/// flight, and of two inserts of a key the second to validate aborts: there each attempt's
/// conflict is a third worker inserting the attempt's key and committing first. Those keys lie
/// a thousand rows away from the first worker's, so that an index that detects conflicts by
/// node (cicada's multi-version index) does not make its insert conflict with them too.
pub fn retry_runs_until_commit_and_stops_on_what_retrying_cannot_cure<P: Protocol>() {
    use txlab::engine::Retry;
    let db = db::<P>();
    // `b` joins first: 2PL's wait-die stamps are clock ticks with the worker's slot below them,
    // so `b`'s earlier begin is older than `a`'s even when both fall in one tick.
    let (mut b, mut a, mut c) = (db.worker().unwrap(), db.worker().unwrap(), db.worker().unwrap());
    txn(&mut c, |w| {
        for k in 1000..2000 {
            assert!(w.insert(T, k, &row(k))?);
        }
        Ok(())
    });
    b.begin();
    assert!(b.insert(T, 1, &row(1)).unwrap());
    a.begin();
    let hidden = match a.insert(T, 1, &row(2)) {
        Ok(inserted) => {
            assert!(inserted, "the other insert is uncommitted: the key is absent");
            true
        }
        Err(e) => {
            assert!(e.reason.is_retryable(), "{e}");
            false
        }
    };
    a.abort();
    let mut retry = Retry::new().max_attempts(5);
    let mut calls = 0;
    let e = retry
        .run(&mut a, |w| {
            calls += 1;
            if !hidden {
                return w.insert(T, 1, &row(2));
            }
            let key = 10_000 + calls;
            assert!(w.insert(T, key, &row(2))?);
            assert!(txn(&mut c, |c| c.insert(T, key, &row(3))), "the first to validate inserts");
            Ok(true)
        })
        .unwrap_err();
    assert!(e.reason.is_retryable(), "{e}");
    assert_eq!(calls, 5, "five attempts, then the last conflict is returned");
    b.commit().unwrap();
    calls = 0;
    let inserted = retry
        .run(&mut a, |w| {
            calls += 1;
            w.insert(T, 2, &row(2))
        })
        .unwrap();
    assert!(inserted);
    assert_eq!(calls, 1);
    let mut calls = 0;
    let e = retry
        .run(&mut a, |w| -> Result<(), Abort> {
            calls += 1;
            w.write(T, 1, &row(9))?;
            Err(Abort::with_code(42))
        })
        .unwrap_err();
    assert_eq!((e.reason, e.user_code(), calls), (AbortReason::User, Some(42), 1));
    assert_eq!(e.to_string(), "transaction aborted: user (code 42)");
    let e = retry.run(&mut a, |w| w.read(TableId(9), 1, val)).unwrap_err();
    assert_eq!(e.reason, AbortReason::Unsupported);
    assert_eq!(get(&mut a, T, 1), Some(1), "the user abort rolled its write back");
    // The program's own retryable abort: rolled back and run again, with the protocol's
    // backoff, until it commits or the attempts run out.
    let mut retry = db.retry();
    let mut calls = 0;
    let done = retry
        .run(&mut a, |w| {
            calls += 1;
            assert!(w.write(T, 1, &row(100 + calls))?);
            if calls < 3 {
                return Err(Abort::retry());
            }
            Ok(calls)
        })
        .unwrap();
    assert_eq!(done, 3);
    assert_eq!(get(&mut a, T, 1), Some(103), "the third attempt's write, alone");
    let e =
        db.retry().max_attempts(2).run(&mut a, |_| -> Result<(), Abort> { Err(Abort::retry()) });
    let e = e.unwrap_err();
    assert_eq!(e.reason, AbortReason::UserRetry);
    assert_eq!(e.to_string(), "transaction aborted: user-retry");
    // `?` turns an abort into an `Error` in code that returns one.
    let mut as_error = || -> Result<(), Error> {
        a.begin();
        let r = a.read(TableId(9), 1, val);
        a.abort();
        r?;
        Ok(())
    };
    assert_eq!(as_error().unwrap_err().to_string(), "transaction aborted: unsupported");
}

/// The batch interface (`Database::run_batch`): every protocol, interactive or not, runs owned
/// procedures to completion and hands them back in order with their outcomes.
mod batch {
    use super::{db, row, val, T};
    use std::cell::Cell;
    use txlab::engine::{AccessSet, BatchOutcome, Procedure, Recon, Tx, TxnType};
    use txlab::prelude::*;

    static TYPES: [TxnType; 1] = [TxnType { name: "op", pieces: &[] }];

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Kind {
        /// Adds `arg` to the key's value.
        Add,
        /// Inserts the key with value `arg`.
        Insert,
        /// Reads the key.
        Get,
        /// Deletes the key.
        Delete,
    }

    /// One transaction: what it does to `key`, whether it then rolls back, whether its first
    /// run asks to run again (`Abort::retry`), what it saw (the value read, and whether its
    /// insert or delete found what it expected), and how often it heard it committed.
    #[derive(Debug)]
    struct Op {
        kind: Kind,
        key: u64,
        arg: u64,
        abort: bool,
        retry_once: bool,
        tried: Cell<bool>,
        saw: Cell<Option<u64>>,
        ok: Cell<bool>,
        commits: Cell<u32>,
    }

    fn op(kind: Kind, key: u64, arg: u64) -> Op {
        Op {
            kind,
            key,
            arg,
            abort: false,
            retry_once: false,
            tried: Cell::new(false),
            saw: Cell::new(None),
            ok: Cell::new(false),
            commits: Cell::new(0),
        }
    }

    impl Procedure for Op {
        fn txn_type(&self) -> usize {
            0
        }

        fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
            match self.kind {
                Kind::Add => {
                    set.read(T, self.key);
                    set.write(T, self.key);
                }
                Kind::Get => set.read(T, self.key),
                Kind::Insert | Kind::Delete => set.write(T, self.key),
            }
            true
        }

        fn read_only(&self) -> bool {
            self.kind == Kind::Get
        }

        fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
            match self.kind {
                Kind::Add => {
                    let v = tx.read(T, self.key, val)?.expect("the key is loaded");
                    self.saw.set(Some(v));
                    self.ok.set(tx.write(T, self.key, &row(v + self.arg))?);
                }
                Kind::Insert => self.ok.set(tx.insert(T, self.key, &row(self.arg))?),
                Kind::Get => self.saw.set(tx.read(T, self.key, val)?),
                Kind::Delete => self.ok.set(tx.delete(T, self.key)?),
            }
            if self.retry_once && !self.tried.replace(true) {
                return Err(Abort::retry());
            }
            if self.abort {
                return tx.user_abort();
            }
            Ok(())
        }

        fn committed(&self) {
            self.commits.set(self.commits.get() + 1);
        }
    }

    fn run<P: Protocol>(db: &Database<P>, ops: Vec<Op>, threads: usize) -> Vec<(Op, BatchOutcome)> {
        let keys: Vec<(Kind, u64)> = ops.iter().map(|o| (o.kind, o.key)).collect();
        let done = db.run_batch(&TYPES, ops, threads).unwrap();
        let back: Vec<(Kind, u64)> = done.iter().map(|(o, _)| (o.kind, o.key)).collect();
        assert_eq!(back, keys, "the procedures come back in the order given");
        done
    }

    /// Inserts, reads, deletes and user aborts across batches, on more threads than cores.
    pub fn round_trip<P: Protocol>() {
        let db = db::<P>();
        let inserted = run(&db, (100..120).map(|k| op(Kind::Insert, k, k * 10)).collect(), 3);
        for (o, outcome) in &inserted {
            assert_eq!(*outcome, BatchOutcome::Committed, "insert {}", o.key);
            assert!(o.ok.get(), "insert {} found the key absent", o.key);
        }
        let mut ops: Vec<Op> = (100..110).map(|k| op(Kind::Get, k, 0)).collect();
        ops.extend((110..120).filter(|k| k % 2 == 0).map(|k| op(Kind::Delete, k, 0)));
        ops.push(op(Kind::Insert, 100, 1));
        let mut doomed = op(Kind::Insert, 200, 2);
        doomed.abort = true;
        ops.push(doomed);
        let mut doomed = op(Kind::Delete, 101, 0);
        doomed.abort = true;
        ops.push(doomed);
        let done = run(&db, ops, 4);
        for (o, outcome) in &done {
            match (o.kind, o.key) {
                (Kind::Get, k) => assert_eq!(o.saw.get(), Some(k * 10), "get {k}"),
                (Kind::Delete, 101) | (Kind::Insert, 200) => {
                    assert_eq!(*outcome, BatchOutcome::RolledBack, "{:?} {}", o.kind, o.key);
                    assert!(o.ok.get(), "{:?} {} did its work before rolling back", o.kind, o.key);
                }
                (Kind::Insert, 100) => assert!(!o.ok.get(), "insert 100 finds it present"),
                (_, k) => assert!(o.ok.get(), "{:?} {k}", o.kind),
            }
            if !o.abort {
                assert_eq!(*outcome, BatchOutcome::Committed, "{:?} {}", o.kind, o.key);
            }
        }
        let done = run(&db, (99..121).chain([200]).map(|k| op(Kind::Get, k, 0)).collect(), 5);
        for (o, _) in &done {
            let want = match o.key {
                100..=109 => Some(o.key * 10),
                110..=119 if o.key % 2 == 1 => Some(o.key * 10),
                _ => None,
            };
            assert_eq!(o.saw.get(), want, "key {} after the deletes and aborts", o.key);
        }
    }

    /// A batch of read-modify-writes of one key, some rolling back, some asking to run again
    /// once, on more threads than cores: the committed ones read the values of a serial order
    /// (each saw the one before plus its addition: what a procedure holds is what its
    /// committed run recorded), each heard of its commit once, and the key ends with their
    /// sum.
    pub fn chain_is_serial<P: Protocol>() {
        let db = db::<P>();
        db.loader().insert(T, 7, &row(0)).unwrap();
        let ops: Vec<Op> = (1..=48u64)
            .map(|i| Op { abort: i % 7 == 0, retry_once: i % 5 == 0, ..op(Kind::Add, 7, i) })
            .collect();
        let done = run(&db, ops, 5);
        let mut committed: Vec<(u64, u64)> = Vec::new();
        for (o, outcome) in &done {
            let want = if o.abort { BatchOutcome::RolledBack } else { BatchOutcome::Committed };
            assert_eq!(*outcome, want, "add {}", o.arg);
            assert_eq!(o.commits.get(), u32::from(!o.abort), "add {} heard of its commit", o.arg);
            assert_eq!(o.tried.get(), o.retry_once, "add {} ran again after Abort::retry", o.arg);
            if !o.abort {
                committed.push((o.saw.get().expect("an add reads"), o.arg));
            }
        }
        committed.sort_unstable();
        let mut value = 0;
        for &(saw, add) in &committed {
            assert_eq!(saw, value, "every committed add saw the one before it: {committed:?}");
            value += add;
        }
        let total: u64 = (1..=48u64).filter(|i| i % 7 != 0).sum();
        assert_eq!(value, total);
        assert_eq!(db.peek(T, 7, val), Some(total));
    }

    /// Bad calls get a one-line error; an empty batch runs nothing.
    pub fn refuses_bad_input<P: Protocol>() {
        let db = db::<P>();
        let err = db.run_batch(&TYPES, vec![op(Kind::Get, 1, 0)], 0).unwrap_err().to_string();
        assert!(err.contains("at least one thread"), "{err}");
        let err = db.run_batch(&[], vec![op(Kind::Get, 1, 0)], 2).unwrap_err().to_string();
        assert!(err.contains("transaction 0 of the batch is of type 0"), "{err}");
        assert!(db.run_batch(&TYPES, Vec::<Op>::new(), 2).unwrap().is_empty());
    }

    /// A protocol that runs no interactive transactions refuses a worker and names the batch
    /// interface instead.
    #[test]
    fn bohm_refuses_a_worker_and_names_the_batch_interface() {
        let db = db::<txlab::protocols::bohm::Bohm>();
        let Err(e) = db.worker();
        let e = e.to_string();
        assert!(e.contains("'bohm' does not run interactive transactions"), "{e}");
        assert!(e.contains("Database::run_batch"), "{e}");
    }

    macro_rules! batch_suite {
        ($($name:ident => $P:ty $([$($opt:expr),*])?),* $(,)?) => {$(
            mod $name {
                const OPTS: &[(&str, &str)] = &[$($($opt),*)?];
                type P = $P;
                #[test] fn round_trip() { crate::common::with_options(OPTS, || super::round_trip::<P>()) }
                #[test] fn refuses_bad_input() { crate::common::with_options(OPTS, || super::refuses_bad_input::<P>()) }
            }
        )*};
    }

    /// Protocols whose read-modify-writes of one key serialize (every one but nocc).
    macro_rules! chain_suite {
        ($($name:ident => $P:ty $([$($opt:expr),*])?),* $(,)?) => {$(
            mod $name {
                const OPTS: &[(&str, &str)] = &[$($($opt),*)?];
                #[test] fn chain_is_serial() { crate::common::with_options(OPTS, || super::super::chain_is_serial::<$P>()) }
            }
        )*};
    }

    batch_suite! {
        nocc => txlab::protocols::nocc::Nocc,
        two_pl_nowait => txlab::protocols::two_pl::TwoPlNoWait,
        two_pl_waitdie => txlab::protocols::two_pl::TwoPlWaitDie,
        two_pl_ordered => txlab::protocols::two_pl_ordered::TwoPlOrdered [("undeclared", "no-wait")],
        silo => txlab::protocols::silo::Silo,
        tictoc => txlab::protocols::tictoc::TicToc,
        mocc => txlab::protocols::mocc::Mocc,
        si => txlab::protocols::si::Si,
        ermia_ssn => txlab::protocols::ermia_ssn::ErmiaSsn,
        ermia_ssi => txlab::protocols::ermia_ssi::ErmiaSsi,
        hekaton => txlab::protocols::hekaton::Hekaton,
        cicada => txlab::protocols::cicada::Cicada,
        bohm => txlab::protocols::bohm::Bohm,
        bohm_small_batches => txlab::protocols::bohm::Bohm [("batch", "7"), ("cc-threads", "2")],
        bohm_adaptive => txlab::protocols::bohm::Bohm [("batch", "7"), ("cc-threads", "3"), ("split", "adaptive")],
        ic3 => txlab::protocols::ic3::Ic3,
    }

    mod chain {
        chain_suite! {
            two_pl_nowait => txlab::protocols::two_pl::TwoPlNoWait,
            two_pl_waitdie => txlab::protocols::two_pl::TwoPlWaitDie,
            two_pl_ordered => txlab::protocols::two_pl_ordered::TwoPlOrdered [("undeclared", "no-wait")],
            silo => txlab::protocols::silo::Silo,
            tictoc => txlab::protocols::tictoc::TicToc,
            mocc => txlab::protocols::mocc::Mocc,
            si => txlab::protocols::si::Si,
            ermia_ssn => txlab::protocols::ermia_ssn::ErmiaSsn,
            ermia_ssi => txlab::protocols::ermia_ssi::ErmiaSsi,
            hekaton => txlab::protocols::hekaton::Hekaton,
            cicada => txlab::protocols::cicada::Cicada,
            bohm => txlab::protocols::bohm::Bohm,
            bohm_small_batches => txlab::protocols::bohm::Bohm [("batch", "7"), ("cc-threads", "2")],
            bohm_adaptive => txlab::protocols::bohm::Bohm [("batch", "7"), ("cc-threads", "3"), ("split", "adaptive")],
            ic3 => txlab::protocols::ic3::Ic3,
        }
    }
}

/// `2pl-ordered` used without its declaration is an error, never silent no-wait locking: an
/// undeclared attempt fails its first operation with `undeclared`, and an access outside the
/// declared set (sealed or not) with `access-set-mismatch`; inside it (keys, and keys of a
/// declared range) everything runs. `undeclared=no-wait` runs both kinds, locking as it goes.
#[test]
fn two_pl_ordered_refuses_what_was_not_declared() {
    use txlab::engine::AccessSet;
    use txlab::protocols::two_pl_ordered::TwoPlOrdered;
    #[track_caller]
    fn refused<T>(r: Result<T, Abort>) -> AbortReason {
        match r {
            Ok(_) => panic!("not refused"),
            Err(a) => a.reason,
        }
    }
    let first = crate::common::with_options(&[], db::<TwoPlOrdered>);
    let mut w = first.worker().unwrap();
    let mut all = AccessSet::default();
    all.range(T, 0, 99, AccessMode::Write);
    w.begin_declared(&all);
    for k in 0..10 {
        assert!(w.insert(T, k, &row(k)).unwrap(), "a key of a declared range");
    }
    w.commit().unwrap();

    w.begin();
    assert_eq!(refused(w.read(T, 1, val)), AbortReason::Undeclared);
    w.abort();
    w.begin_read_only();
    assert_eq!(
        refused(w.scan(T, 0, 9, 10, |_, _| ControlFlow::Continue(()))),
        AbortReason::Undeclared
    );
    w.abort();

    // Declared unsealed, in no order, one key twice.
    let mut set = AccessSet::default();
    set.write(T, 2);
    set.read(T, 1);
    set.read(T, 2);
    set.range(T, 50, 59, AccessMode::Write);
    w.begin_declared(&set);
    assert_eq!(w.read(T, 1, val).unwrap(), Some(1));
    assert!(w.write(T, 2, &row(20)).unwrap());
    assert!(w.insert(T, 55, &row(55)).unwrap(), "inside the declared range");
    assert_eq!(w.scan(T, 50, 59, 10, |_, _| ControlFlow::Continue(())).unwrap(), 1);
    // (Key 3 shares the declared range's bucket word, which covers reading it: allowed.)
    assert_eq!(w.read(T, 3, val).unwrap(), Some(3), "under a range lock held anyway");
    assert_eq!(refused(w.read(T, 1000, val)), AbortReason::AccessSetMismatch, "undeclared");
    w.abort();
    w.begin_declared(&set);
    assert_eq!(refused(w.write(T, 1, &row(0))), AbortReason::AccessSetMismatch, "declared read");
    w.abort();
    w.begin_declared(&set);
    let outside = w.scan(T, 50, 200, 20, |_, _| ControlFlow::Continue(()));
    assert_eq!(refused(outside), AbortReason::AccessSetMismatch, "a scan beyond the range");
    w.abort();
    assert!(!AbortReason::Undeclared.is_retryable() && AbortReason::Undeclared.is_fatal());
    assert!(AbortReason::AccessSetMismatch.is_retryable());
    drop(w);
    drop(first);

    let db = crate::common::with_options(&[("undeclared", "no-wait")], db::<TwoPlOrdered>);
    let mut w = db.worker().unwrap();
    w.begin();
    assert!(w.insert(T, 3, &row(3)).unwrap());
    w.commit().unwrap();
    w.begin_declared(&set);
    assert_eq!(w.read(T, 3, val).unwrap(), Some(3), "undeclared, locked without waiting");
    w.commit().unwrap();
}
