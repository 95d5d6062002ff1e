//! Commutative accumulations (`Tx::accumulate`) under every protocol: applied at once by most,
//! deferred to commit by IC3 where its analysis allows (§4.3). A hot account row is read (its
//! name column) and accumulated into (its total column) by 8 threads on 2 cores, each payment
//! also logging its amount; read-only audits check that the total is the sum of the log. The
//! totals must be exact, the audits consistent and the recorded histories serializable: the
//! checker sees that a read of the name does not depend on an accumulation of the total.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common;
use txlab::checker;
use txlab::engine::{
    AccessMode, Accumulation, Checks, Piece, Procedure, Retry, TableAccess, Tx, TxnType,
    ALL_COLUMNS,
};
use txlab::prelude::*;

const ACCOUNT: TableId = TableId(0);
const LOG: TableId = TableId(1);
/// The account row's columns: `total` (8 bytes), `name` (8 bytes).
const TOTAL: u64 = 0b01;
const NAME: u64 = 0b10;
const HOT: u64 = 0;

const fn access(table: TableId, mode: AccessMode, columns: u64) -> TableAccess {
    TableAccess { table, mode, columns }
}

static PAY: [Piece; 2] = [
    Piece {
        name: "account",
        accesses: &[
            access(ACCOUNT, AccessMode::Read, NAME),
            access(ACCOUNT, AccessMode::Accumulate, TOTAL),
        ],
    },
    Piece { name: "log", accesses: &[access(LOG, AccessMode::Write, ALL_COLUMNS)] },
];
static AUDIT: [Piece; 1] = [Piece {
    name: "all",
    accesses: &[
        access(ACCOUNT, AccessMode::Read, ALL_COLUMNS),
        access(LOG, AccessMode::Read, ALL_COLUMNS),
    ],
}];
static TYPES: [TxnType; 2] =
    [TxnType { name: "pay", pieces: &PAY }, TxnType { name: "audit", pieces: &AUDIT }];

fn total(amount: i64) -> Accumulation {
    Accumulation::add_i64(0, 0, amount)
}

fn i64_at(r: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(r[at..at + 8].try_into().unwrap())
}

/// Reads the name, accumulates `amount` into the total, logs the payment under `id`.
struct Pay {
    id: u64,
    amount: i64,
}

impl Procedure for Pay {
    fn txn_type(&self) -> usize {
        0
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let name = tx.read_cols(ACCOUNT, HOT, NAME, |r| i64_at(r, 8))?.expect("loaded");
            assert_eq!(name, 7, "the name column never changes");
            assert!(tx.accumulate(ACCOUNT, HOT, total(self.amount))?);
            Ok(())
        })?;
        tx.piece(1, |tx| {
            assert!(tx.insert(LOG, self.id, &self.amount.to_le_bytes())?);
            Ok(())
        })
    }
}

/// Reads the total and sums the log; `torn` says whether the last run saw them disagree (an
/// optimistic attempt may, before its validation fails: only a committed one counts).
struct Audit {
    torn: Cell<bool>,
}

impl Procedure for Audit {
    fn txn_type(&self) -> usize {
        1
    }
    fn read_only(&self) -> bool {
        true
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let t = tx.read(ACCOUNT, HOT, |r| i64_at(r, 0))?.expect("loaded");
            let mut sum = 0;
            tx.scan(LOG, 0, u64::MAX, usize::MAX, |_, r| {
                sum += i64_at(r, 0);
                std::ops::ControlFlow::Continue(())
            })?;
            self.torn.set(sum != t);
            Ok(())
        })
    }
}

fn db<P: Protocol>(pairs: &[(&str, &str)]) -> Database<P> {
    let opts = DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(2),
        record_history: true,
        ..Default::default()
    };
    let tables = [
        TableSpec::new("account", 16, 16).with_columns(&[("total", 0, 8), ("name", 8, 8)]),
        TableSpec::new("log", 8, 20_000),
    ];
    let db = common::with_options(pairs, || {
        Database::<P>::builder(&tables)
            .options(opts)
            .protocol_options(common::options::<P>())
            .txn_types(&TYPES)
            .build()
            .unwrap()
    });
    {
        let mut w = db.worker().unwrap();
        let mut row = [0u8; 16];
        row[8..].copy_from_slice(&7i64.to_le_bytes());
        w.begin();
        assert!(w.insert(ACCOUNT, HOT, &row).unwrap());
        w.commit().unwrap();
    }
    db
}

/// 8 threads, 300 transactions each (one in five an audit), fixed seeds; then the exact total,
/// no torn audit, and a clean checker report.
fn hot_accumulations<P: Protocol>(pairs: &[(&str, &str)]) {
    let db = db::<P>(pairs);
    let torn = AtomicU64::new(0);
    let checks = Checks { templates: true, ..Checks::default() };
    let expected: i64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let (db, torn) = (&db, &torn);
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    let mut retry = Retry::new().seed(t).max_backoff(Duration::from_micros(20));
                    let mut paid = 0;
                    for i in 0..300u64 {
                        if i % 5 == 4 {
                            let audit = Audit { torn: Cell::new(false) };
                            retry.run_procedure(&mut w, &TYPES[1], &audit, checks).unwrap();
                            if audit.torn.get() {
                                torn.fetch_add(1, Ordering::Relaxed);
                            }
                        } else {
                            let pay = Pay { id: t << 32 | i, amount: (t * 1000 + i) as i64 };
                            retry.run_procedure(&mut w, &TYPES[0], &pay, checks).unwrap();
                            paid += pay.amount;
                        }
                    }
                    paid
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let mut w = db.worker().unwrap();
    w.begin();
    let got = w.read(ACCOUNT, HOT, |r| (i64_at(r, 0), i64_at(r, 8))).unwrap().unwrap();
    w.commit().unwrap();
    drop(w);
    assert_eq!(got, (expected, 7), "every committed accumulation counted once, the name kept");
    let torn = torn.load(Ordering::Relaxed);
    assert_eq!(torn, 0, "committed audits saw a total that is not the log's sum");
    let report = checker::check(&db.take_history());
    assert!(report.anomalies.is_empty(), "{report:#?}");
    assert!(report.committed >= 8 * 300, "{}", report.committed);
}

#[test]
fn ic3_defers_hot_accumulations_and_stays_serializable() {
    hot_accumulations::<txlab::protocols::ic3::Ic3>(&[]);
}

#[test]
fn ic3_runs_accumulations_as_writes_when_told() {
    hot_accumulations::<txlab::protocols::ic3::Ic3>(&[("commutative", "off"), ("wait", "yield")]);
}

#[test]
fn silo_accumulates_at_once() {
    hot_accumulations::<txlab::protocols::silo::Silo>(&[]);
}

#[test]
fn tictoc_accumulates_at_once() {
    hot_accumulations::<txlab::protocols::tictoc::TicToc>(&[]);
}

#[test]
fn ermia_ssi_accumulates_at_once() {
    hot_accumulations::<txlab::protocols::ermia_ssi::ErmiaSsi>(&[]);
}

#[test]
fn cicada_accumulates_at_once() {
    hot_accumulations::<txlab::protocols::cicada::Cicada>(&[]);
}

/// One thread, every protocol's operation contract: an accumulation into an absent key
/// reports it; one that does not fit the row is a procedure bug; a 4-byte column wraps; an
/// aborted accumulation leaves nothing.
fn contract<P: Protocol>(pairs: &[(&str, &str)]) {
    let db = db::<P>(pairs);
    let mut w = db.worker().unwrap();
    w.begin();
    assert!(!w.accumulate(ACCOUNT, 99, total(1)).unwrap(), "absent");
    let e = w.accumulate(ACCOUNT, HOT, Accumulation::add_i64(0, 12, 1)).unwrap_err();
    assert_eq!(e.reason, AbortReason::TemplateViolation, "bytes 12..20 of a 16-byte row");
    w.abort();
    w.begin();
    assert!(w.accumulate(ACCOUNT, HOT, Accumulation::add_u32(1, 8, -8)).unwrap());
    w.commit().unwrap();
    w.begin();
    assert!(w.accumulate(ACCOUNT, HOT, total(5)).unwrap());
    w.abort();
    w.begin();
    let got = w.read(ACCOUNT, HOT, |r| (i64_at(r, 0), r[8..12].to_vec())).unwrap().unwrap();
    w.commit().unwrap();
    assert_eq!(got, (0, (7u32.wrapping_sub(8)).to_le_bytes().to_vec()));
}

#[test]
fn the_contract_holds_under_every_protocol() {
    contract::<txlab::protocols::nocc::Nocc>(&[]);
    contract::<txlab::protocols::two_pl::TwoPlNoWait>(&[]);
    // Undeclared transactions, locked as they go without waiting.
    contract::<txlab::protocols::two_pl_ordered::TwoPlOrdered>(&[("undeclared", "no-wait")]);
    contract::<txlab::protocols::silo::Silo>(&[]);
    contract::<txlab::protocols::tictoc::TicToc>(&[]);
    contract::<txlab::protocols::mocc::Mocc>(&[]);
    contract::<txlab::protocols::si::Si>(&[]);
    contract::<txlab::protocols::ermia_ssn::ErmiaSsn>(&[]);
    contract::<txlab::protocols::hekaton::Hekaton>(&[]);
    contract::<txlab::protocols::cicada::Cicada>(&[]);
    contract::<txlab::protocols::ic3::Ic3>(&[]);
}
