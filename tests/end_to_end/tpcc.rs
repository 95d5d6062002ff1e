//! TPC-C: the loader's cardinalities (clause 4.3.3.1), the consistency conditions after a
//! contended run (1 warehouse, 8 threads on 2 cores, templates and declared access sets checked
//! at run time) under every serializable protocol, with and without the analytic transaction,
//! the analytic transaction's exact aggregates, and the conditions' own power to detect broken
//! databases.

use crate::common;

use std::ops::ControlFlow;
use std::time::Duration;
use txlab::engine::{RunConfig, WorkerStats, Workload};
use txlab::prelude::*;
use txlab::workloads::tpcc::consistency;
use txlab::workloads::tpcc::schema::{self, key};
use txlab::workloads::tpcc::tables::*;
use txlab::workloads::tpcc::txns::{Kind, TpccTxn, TYPES};
use txlab::workloads::tpcc::{AnalyticConfig, Tpcc, TpccConfig};

fn loaded<P: Protocol>(cfg: TpccConfig) -> (Tpcc, Database<P>) {
    let tpcc = Tpcc::new(cfg);
    let opts = DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(2),
        // A procedure using a column it did not declare would compute with marker bytes.
        poison_unprojected: true,
        ..Default::default()
    };
    let db = common::database_for::<P, _>(&tpcc, opts);
    tpcc.load(&db, 2).unwrap();
    (tpcc, db)
}

fn count<P: Protocol>(db: &Database<P>, t: TableId, lo: u64, hi: u64) -> u64 {
    db.count_present(t, lo, hi).expect("countable range")
}

#[test]
fn loader_produces_the_specified_cardinalities() {
    let (tpcc, db) = loaded::<txlab::protocols::nocc::Nocc>(TpccConfig::new(2));
    for w in 1..=2u32 {
        assert_eq!(count(&db, WAREHOUSE, w.into(), w.into()), 1);
        assert_eq!(count(&db, DISTRICT, key::district(w, 0), key::district(w, 15)), 10);
        assert_eq!(count(&db, STOCK, key::stock(w, 0), key::stock(w, (1 << 17) - 1)), 100_000);
        for d in 1..=10 {
            let customers = count(&db, CUSTOMER, key::customer(w, d, 0), key::customer(w, d, 4095));
            assert_eq!(customers, 3000);
            let names = count(
                &db,
                CUSTOMER_NAME,
                key::customer_name(w, d, 0, 0),
                key::customer_name(w, d, 1023, 4095),
            );
            assert_eq!(names, 3000);
            let (lo, hi) = (key::order(w, d, 0), key::order(w, d, u32::MAX));
            assert_eq!(count(&db, ORDER, lo, hi), 3000);
            assert_eq!(count(&db, NEW_ORDER, lo, hi), 900);
            assert_eq!(count(&db, NEW_ORDER, lo, key::order(w, d, 2100)), 0, "2101..=3000 only");
            let (lo, hi) =
                (key::order_customer(w, d, 0, 0), key::order_customer(w, d, 4095, u32::MAX));
            assert_eq!(count(&db, ORDER_CUSTOMER, lo, hi), 3000);
            // Order lines: O_OL_CNT of each order, 5 to 15.
            let mut want = 0u64;
            db.visit_present(
                ORDER,
                key::order(w, d, 0),
                key::order(w, d, u32::MAX),
                usize::MAX,
                |_, r| {
                    let n = schema::order::u32(r, schema::order::O_OL_CNT);
                    assert!((5..=15).contains(&n));
                    want += u64::from(n);
                    ControlFlow::Continue(())
                },
            );
            let lines = count(
                &db,
                ORDER_LINE,
                key::order_line(w, d, 0, 0),
                key::order_line(w, d, u32::MAX, 15),
            );
            assert_eq!(lines, want);
            // The first 1000 customers carry the 1000 last names, one each.
            let mut seen = [false; 1000];
            for last in 0..1000 {
                let mut firsts = 0;
                db.visit_present(
                    CUSTOMER_NAME,
                    key::customer_name(w, d, last, 1),
                    key::customer_name(w, d, last, 1000),
                    usize::MAX,
                    |_, _| {
                        firsts += 1;
                        ControlFlow::Continue(())
                    },
                );
                seen[last as usize] = firsts == 1;
            }
            assert!(seen.iter().all(|&s| s), "customers 1..=1000 take last names 0..=999");
        }
    }
    assert_eq!(count(&db, ITEM, 0, 200_000), 100_000);
    assert_eq!(count(&db, HISTORY, 0, u64::MAX), 60_000);
    // About 10 % ORIGINAL items and bad-credit customers.
    let mut original = 0;
    db.visit_present(ITEM, 1, 100_000, usize::MAX, |_, r| {
        let data = schema::item::get(r, schema::item::I_DATA);
        original += usize::from(data.windows(8).any(|w| w == b"ORIGINAL"));
        ControlFlow::Continue(())
    });
    assert!((9_000..11_000).contains(&original), "{original} ORIGINAL items");
    let mut bad = 0;
    db.visit_present(
        CUSTOMER,
        key::customer(1, 1, 0),
        key::customer(1, 1, 4095),
        usize::MAX,
        |_, r| {
            bad += usize::from(schema::customer::get(r, schema::customer::C_CREDIT) == b"BC");
            ControlFlow::Continue(())
        },
    );
    assert!((200..400).contains(&bad), "{bad} of 3000 customers with bad credit");
    assert_eq!(tpcc.check(&db), Ok(()), "a fresh population is consistent");
}

fn run_config(threads: usize, per_worker: u64, seed: u64) -> RunConfig {
    common::contended_run(threads, per_worker, seed)
}

/// Runs `per_worker` transactions on each of `threads` workers; returns the workers'
/// statistics merged, and how many workers reported.
fn drive<P: Protocol>(
    db: &Database<P>,
    tpcc: &Tpcc,
    threads: usize,
    per_worker: u64,
    seed: u64,
) -> (WorkerStats, usize) {
    let stats = P::drive(db, tpcc, &run_config(threads, per_worker, seed)).unwrap();
    let mut total = WorkerStats::new(tpcc.txn_types().len());
    for s in &stats {
        total.merge(s);
    }
    (total, stats.len())
}

fn contended<P: Protocol>(seed: u64) {
    const THREADS: usize = 8;
    const PER_WORKER: u64 = 400;
    let (tpcc, db) = loaded::<P>(TpccConfig::new(1));
    let (total, workers) = drive(&db, &tpcc, THREADS, PER_WORKER, seed);
    // Every transaction ended: committed, or rolled back by NewOrder's 1 % invalid item.
    let ended = total.total_commits() + total.user_aborts.iter().sum::<u64>();
    assert_eq!(ended, THREADS as u64 * PER_WORKER, "{:?}", total.commits);
    // Interactive protocols run a worker per thread; BOHM's execution threads count.
    let counted = if P::CAPS.interactive { THREADS } else { workers };
    assert_eq!(total.windows, counted as u64, "every worker timed its transactions");
    assert!(total.commits.iter().all(|&c| c > 0), "every type committed: {:?}", total.commits);
    assert!(total.user_aborts[0] > 0, "the 1 % NewOrder rollback happened");
    assert_eq!(total.user_aborts[1..], [0; 4], "only NewOrder rolls back");
    assert_eq!(total.aborts[txlab::error::AbortReason::MissingRow as usize], 0);
    assert_eq!(tpcc.check(&db), Ok(()), "seed {seed}");
}

#[test]
fn two_pl_nowait_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::two_pl::TwoPlNoWait>(1);
}

#[test]
fn two_pl_waitdie_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::two_pl::TwoPlWaitDie>(2);
}

#[test]
fn two_pl_ordered_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::two_pl_ordered::TwoPlOrdered>(2);
}

#[test]
fn bohm_keeps_the_consistency_conditions() {
    // Stale reconnaissance (NewOrder's order ids, Delivery's oldest order) is rolled back and
    // submitted again until its declaration holds.
    contended::<txlab::protocols::bohm::Bohm>(6);
}

#[test]
fn silo_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::silo::Silo>(3);
}

#[test]
fn ic3_keeps_the_consistency_conditions() {
    // New-Order's user rollbacks (1 %) roll back its committed district piece: the New-Orders
    // and Payments that depend on it cascade.
    contended::<txlab::protocols::ic3::Ic3>(4);
}

#[test]
fn ic3_suspending_keeps_the_consistency_conditions() {
    // Waits that sleep until the transaction waited for changes its state: a lost wake-up
    // would stall a worker until its timeout, a missed doom would hang it.
    common::with_options(&[("wait", "suspend")], || {
        contended::<txlab::protocols::ic3::Ic3>(9);
    });
}

#[test]
fn tictoc_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::tictoc::TicToc>(4);
}

#[test]
fn mocc_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::mocc::Mocc>(5);
}

#[test]
fn ermia_ssn_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::ermia_ssn::ErmiaSsn>(6);
}

#[test]
fn ermia_ssi_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::ermia_ssi::ErmiaSsi>(7);
}

#[test]
fn hekaton_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::hekaton::Hekaton>(8);
}

#[test]
fn cicada_keeps_the_consistency_conditions() {
    contended::<txlab::protocols::cicada::Cicada>(9);
}

#[test]
fn cicada_without_its_optimisations_keeps_the_consistency_conditions() {
    let off = [
        ("sort", "off"),
        ("precheck", "off"),
        ("adaptive", "off"),
        ("inlining", "off"),
        ("deferred-index", "off"),
    ];
    common::with_options(&off, || contended::<txlab::protocols::cicada::Cicada>(10));
}

#[test]
fn cicada_with_the_multi_version_index_keeps_the_consistency_conditions() {
    let mv = [("index", "multi-version"), ("index-fanout", "8")];
    common::with_options(&mv, || contended::<txlab::protocols::cicada::Cicada>(19));
}

fn np_without_inserts() -> TpccConfig {
    use txlab::workloads::tpcc::{Simplification, NP_MIX};
    TpccConfig {
        mix: NP_MIX,
        simplifications: vec![Simplification::NoInserts],
        ..TpccConfig::new(1)
    }
}

/// DBx1000's and Cicada's TPC-C-NP (`--np --simplify no-inserts`): every NewOrder takes its
/// order number and updates its stock but inserts nothing, no Payment inserts its history row,
/// and the conditions that still apply hold.
fn contended_without_inserts<P: Protocol>(seed: u64) {
    const THREADS: usize = 8;
    const PER_WORKER: u64 = 300;
    let (tpcc, db) = loaded::<P>(np_without_inserts());
    let rows = |t| count(&db, t, 0, u64::MAX);
    let before = [ORDER, NEW_ORDER, ORDER_LINE, HISTORY, ORDER_CUSTOMER].map(rows);
    let (total, _) = drive(&db, &tpcc, THREADS, PER_WORKER, seed);
    let ended = total.total_commits() + total.user_aborts.iter().sum::<u64>();
    assert_eq!(ended, THREADS as u64 * PER_WORKER, "{:?}", total.commits);
    assert!(total.commits[..2].iter().all(|&c| c > 0), "{:?}", total.commits);
    assert_eq!(total.commits[2..], [0; 3], "only NewOrder and Payment run");
    let after = [ORDER, NEW_ORDER, ORDER_LINE, HISTORY, ORDER_CUSTOMER].map(rows);
    assert_eq!(before, after, "no row inserted");
    // Each committed NewOrder took the next order number of its district.
    let mut taken = 0;
    for d in 1..=schema::DISTRICTS {
        let next = db
            .peek(DISTRICT, key::district(1, d), |r| {
                schema::district::u32(r, schema::district::D_NEXT_O_ID)
            })
            .unwrap();
        taken += u64::from(next - 3001);
    }
    assert_eq!(taken, total.commits[Kind::NewOrder as usize]);
    assert_eq!(tpcc.check(&db), Ok(()), "seed {seed}");
}

#[test]
fn silo_keeps_the_conditions_without_inserts() {
    contended_without_inserts::<txlab::protocols::silo::Silo>(11);
}

#[test]
fn cicada_keeps_the_conditions_without_inserts() {
    contended_without_inserts::<txlab::protocols::cicada::Cicada>(12);
}

#[test]
fn bohm_keeps_the_conditions_without_inserts() {
    // Its declared access sets name no inserted row.
    contended_without_inserts::<txlab::protocols::bohm::Bohm>(13);
}

#[test]
fn ic3_keeps_the_conditions_without_inserts() {
    // The insert pieces run empty.
    contended_without_inserts::<txlab::protocols::ic3::Ic3>(14);
}

#[test]
fn no_inserts_is_refused_beside_the_types_that_read_inserted_rows() {
    use txlab::workloads::tpcc::Simplification;
    let msg = "--simplify no-inserts needs a mix of NewOrder and Payment only (--np): \
               Order-Status, Delivery, Stock-Level and the analytic transaction read the rows \
               NewOrder inserts";
    let full =
        TpccConfig { simplifications: vec![Simplification::NoInserts], ..TpccConfig::new(1) };
    assert_eq!(full.validate().unwrap_err(), msg);
    let analytic = TpccConfig {
        analytic: Some(AnalyticConfig { share: 10, scan: 1.0 }),
        ..np_without_inserts()
    };
    assert_eq!(analytic.validate().unwrap_err(), msg);
    assert_eq!(np_without_inserts().validate(), Ok(()));
}

fn with_analytics(share: u32, scan: f64) -> TpccConfig {
    TpccConfig { analytic: Some(AnalyticConfig { share, scan }), ..TpccConfig::new(1) }
}

/// Analytic transactions (a third of the mix, 2 000 stock rows each) among the five: the
/// conditions hold, every analytic commit left exactly one analytic-history row, and each row's
/// aggregates are possible for the range it names.
fn contended_with_analytics<P: Protocol>(seed: u64) {
    use schema::analytic_history as ah;
    const THREADS: usize = 8;
    const PER_WORKER: u64 = 120;
    let (tpcc, db) = loaded::<P>(with_analytics(33, 2.0));
    let (total, _) = drive(&db, &tpcc, THREADS, PER_WORKER, seed);
    let ended = total.total_commits() + total.user_aborts.iter().sum::<u64>();
    assert_eq!(ended, THREADS as u64 * PER_WORKER, "{:?}", total.commits);
    let analytics = total.commits[Kind::Analytic as usize];
    assert!(analytics > 0, "analytic transactions committed: {:?}", total.commits);
    assert_eq!(total.aborts[txlab::error::AbortReason::MissingRow as usize], 0);
    assert_eq!(tpcc.check(&db), Ok(()), "seed {seed}");
    let mut rows = 0;
    db.visit_present(ANALYTIC_HISTORY, 0, u64::MAX, usize::MAX, |_, r| {
        rows += 1;
        let n = ah::u32(r, ah::AH_ITEMS);
        assert_eq!(n, 2000);
        let first = ah::u32(r, ah::AH_FIRST_I_ID);
        assert!(first >= 1 && first + n - 1 <= schema::ITEMS, "range {first}+{n}");
        // Every stock quantity stays within 10..=100 (clause 2.4.2.2), so a sum read from one
        // snapshot lies within these bounds.
        let q = ah::i64(r, ah::AH_QUANTITY);
        assert!((10 * i64::from(n)..=100 * i64::from(n)).contains(&q), "quantity {q}");
        assert!(ah::u32(r, ah::AH_LOW_STOCK) <= n);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(rows, analytics, "one analytic-history row per analytic commit");
}

#[test]
fn silo_keeps_the_conditions_with_analytics() {
    contended_with_analytics::<txlab::protocols::silo::Silo>(11);
}

#[test]
fn ic3_keeps_the_conditions_with_analytics() {
    // The analytic type reads 2 000 stock rows in one piece while New-Orders' pieces update
    // them; its sums must be those of one consistent state.
    contended_with_analytics::<txlab::protocols::ic3::Ic3>(13);
}

#[test]
fn two_pl_waitdie_keeps_the_conditions_with_analytics() {
    contended_with_analytics::<txlab::protocols::two_pl::TwoPlWaitDie>(12);
}

#[test]
fn si_keeps_the_conditions_with_analytics() {
    contended_with_analytics::<txlab::protocols::si::Si>(13);
}

#[test]
fn ermia_ssn_keeps_the_conditions_with_analytics() {
    contended_with_analytics::<txlab::protocols::ermia_ssn::ErmiaSsn>(14);
}

#[test]
fn ermia_ssi_keeps_the_conditions_with_analytics() {
    contended_with_analytics::<txlab::protocols::ermia_ssi::ErmiaSsi>(15);
}

/// By default the analytic transaction, read-mostly, reads its stock rows unmarked (ERMIA's read
/// optimisation at age 0) while NewOrders overwrite them; without the optimisation every read is
/// marked.
#[test]
fn ermia_ssi_keeps_the_conditions_with_marked_analytics() {
    common::with_options(&[("old-version-age", "off")], || {
        contended_with_analytics::<txlab::protocols::ermia_ssi::ErmiaSsi>(17)
    });
}

#[test]
fn hekaton_keeps_the_conditions_with_analytics() {
    contended_with_analytics::<txlab::protocols::hekaton::Hekaton>(16);
}

#[test]
fn cicada_keeps_the_conditions_with_analytics() {
    contended_with_analytics::<txlab::protocols::cicada::Cicada>(18);
}

#[test]
fn cicada_with_the_multi_version_index_keeps_the_conditions_with_analytics() {
    common::with_options(&[("index", "multi-version")], || {
        contended_with_analytics::<txlab::protocols::cicada::Cicada>(20)
    });
}

/// One analytic transaction after a short run (so that stock has sold and recent orders vary)
/// writes exactly the aggregates computed here from the rows themselves.
fn analytic_aggregates_are_exact<P: Protocol>() {
    use schema::stock as st;
    use schema::{analytic_history as ah, district as di, item as it, order_line as ol};
    use txlab::engine::{Checks, Procedure, Tx};
    let (tpcc, db) = loaded::<P>(with_analytics(10, 3.0));
    P::drive(&db, &tpcc, &run_config(2, 300, 21)).unwrap();
    let (w, d, items, threshold) = (1u32, 4u32, 3000u32, 40u32);
    let single = |t: TableId, k: u64, f: &mut dyn FnMut(&[u8])| {
        let n = db.visit_present(t, k, k, 1, |_, r| {
            f(r);
            ControlFlow::Continue(())
        });
        assert_eq!(n, Some(1), "row {k} of table {t:?}");
    };
    let mut next = 0;
    single(DISTRICT, key::district(w, d), &mut |r| next = di::u32(r, di::D_NEXT_O_ID));
    assert!(next > 3001, "the run placed orders in district {d}");
    // The last 20 orders' lines; the scan is centred on one of their items.
    let mut lines = Vec::new();
    db.visit_present(
        ORDER_LINE,
        key::order_line(w, d, next - 20, 0),
        key::order_line(w, d, next - 1, 15),
        usize::MAX,
        |_, r| {
            lines.push((ol::u32(r, ol::OL_I_ID), ol::u32(r, ol::OL_QUANTITY)));
            ControlFlow::Continue(())
        },
    );
    assert!(lines.len() >= 100, "20 orders of 5 to 15 lines: {}", lines.len());
    let centre = lines[lines.len() / 2].0;
    let first = centre.saturating_sub(items / 2).clamp(1, schema::ITEMS - items + 1);
    let end = first + items;
    let (mut quantity, mut ytd, mut low) = (0i64, 0i64, 0u32);
    for i in first..end {
        single(STOCK, key::stock(w, i), &mut |r| {
            let q = st::u32(r, st::S_QUANTITY);
            quantity += i64::from(q);
            ytd += st::i64(r, st::S_YTD);
            low += u32::from(q < threshold);
        });
    }
    assert!(ytd > 0, "the run sold items of the range");
    let (mut recent_quantity, mut recent_value) = (0i64, 0i64);
    for &(i, q) in lines.iter().filter(|(i, _)| (first..end).contains(i)) {
        recent_quantity += i64::from(q);
        single(ITEM, u64::from(i), &mut |r| recent_value += i64::from(q) * it::i64(r, it::I_PRICE));
    }
    assert!(recent_quantity > 0);

    let mut txn = TpccTxn::new(Kind::Analytic);
    (txn.w, txn.d, txn.threshold, txn.now) = (w, d, threshold, 1234);
    (txn.scan_first, txn.scan_items) = (first, items);
    txn.analytic_key = key::history(999, 1);
    let mut worker = db.worker().unwrap();
    worker.begin();
    let checks = Checks { templates: true, ..Checks::default() };
    txn.run(&mut Tx::new(&mut worker, &TYPES[Kind::Analytic as usize], checks)).unwrap();
    worker.commit().unwrap();
    drop(worker);
    single(ANALYTIC_HISTORY, txn.analytic_key, &mut |r| {
        assert_eq!(ah::u32(r, ah::AH_W_ID), w);
        assert_eq!(ah::u32(r, ah::AH_D_ID), d);
        assert_eq!(ah::u32(r, ah::AH_FIRST_I_ID), first);
        assert_eq!(ah::u32(r, ah::AH_ITEMS), items);
        assert_eq!(ah::i64(r, ah::AH_QUANTITY), quantity);
        assert_eq!(ah::i64(r, ah::AH_YTD), ytd);
        assert_eq!(ah::u32(r, ah::AH_LOW_STOCK), low);
        assert_eq!(ah::i64(r, ah::AH_RECENT_QUANTITY), recent_quantity);
        assert_eq!(ah::i64(r, ah::AH_RECENT_VALUE), recent_value);
        assert_eq!(ah::i64(r, ah::AH_DATE), 1234);
    });
}

#[test]
fn analytic_aggregates_are_exact_under_silo() {
    analytic_aggregates_are_exact::<txlab::protocols::silo::Silo>();
}

#[test]
fn analytic_aggregates_are_exact_under_si() {
    analytic_aggregates_are_exact::<txlab::protocols::si::Si>();
}

#[test]
fn analytic_aggregates_are_exact_under_hekaton() {
    analytic_aggregates_are_exact::<txlab::protocols::hekaton::Hekaton>();
}

#[test]
fn analytic_aggregates_are_exact_under_cicada() {
    analytic_aggregates_are_exact::<txlab::protocols::cicada::Cicada>();
}

/// Changes one row of a loaded database with `f`, in a committed transaction.
fn corrupt<P: Protocol>(db: &Database<P>, t: TableId, k: u64, f: impl FnOnce(&mut [u8])) {
    let mut w = db.worker().unwrap();
    w.begin();
    w.update(t, k, f).unwrap().expect("row exists");
    w.commit().unwrap();
}

#[test]
fn the_conditions_detect_broken_databases() {
    use schema::{customer as cu, district as di, order as or, warehouse as wh};
    type P = txlab::protocols::silo::Silo;
    let expect = |tpcc: &Tpcc, db: &Database<P>, conditions: &[&str]| {
        let found = consistency::check(db, tpcc.config_ref().warehouses, true);
        for c in conditions {
            assert!(found.iter().any(|f| f.starts_with(c)), "{c} not reported in {found:?}");
        }
    };
    // A district's year-to-date changed without a history row: conditions 1 and 9.
    let (tpcc, db) = loaded::<P>(TpccConfig::new(1));
    corrupt(&db, DISTRICT, key::district(1, 3), |r| {
        di::set_i64(r, di::D_YTD, di::i64(r, di::D_YTD) + 1)
    });
    expect(&tpcc, &db, &["condition 1:", "condition 9:"]);
    // The next order id skipped ahead: condition 2 (and a hole in the order ids).
    corrupt(&db, DISTRICT, key::district(1, 4), |r| di::set_u32(r, di::D_NEXT_O_ID, 3002));
    expect(&tpcc, &db, &["condition 2:"]);
    // A new-order row vanished from the middle: conditions 3 and 5.
    let mut w = db.worker().unwrap();
    w.begin();
    assert!(w.delete(NEW_ORDER, key::order(1, 5, 2500)).unwrap());
    w.commit().unwrap();
    drop(w);
    expect(&tpcc, &db, &["condition 3:", "condition 5:"]);
    // An order claims one line more than it has: conditions 4 and 6.
    corrupt(&db, ORDER, key::order(1, 6, 10), |r| {
        or::set_u32(r, or::O_OL_CNT, or::u32(r, or::O_OL_CNT) + 1)
    });
    expect(&tpcc, &db, &["condition 4:", "condition 6:"]);
    // An undelivered order got a carrier: conditions 5 and 7.
    corrupt(&db, ORDER, key::order(1, 7, 2999), |r| or::set_u32(r, or::O_CARRIER_ID, 3));
    expect(&tpcc, &db, &["condition 5:", "condition 7:"]);
    // A balance changed with nothing delivered or paid: conditions 10 and 12.
    corrupt(&db, CUSTOMER, key::customer(1, 8, 77), |r| cu::set_i64(r, cu::C_BALANCE, 5));
    expect(&tpcc, &db, &["condition 10:", "condition 12:"]);
    // A warehouse's year-to-date changed without a history row: conditions 1 and 8.
    corrupt(&db, WAREHOUSE, 1, |r| wh::set_i64(r, wh::W_YTD, wh::i64(r, wh::W_YTD) - 7));
    expect(&tpcc, &db, &["condition 1:", "condition 8:"]);
    let msg = tpcc.check(&db).unwrap_err();
    assert!(msg.starts_with("TPC-C consistency conditions violated: "), "{msg}");
    // Without inserts the history sums are not checked (no Payment leaves a row); the balance
    // that moved alone still shows through condition 12, and a skipped order id does not.
    let (tpcc, db) = loaded::<P>(np_without_inserts());
    corrupt(&db, DISTRICT, key::district(1, 4), |r| di::set_u32(r, di::D_NEXT_O_ID, 3002));
    assert_eq!(tpcc.check(&db), Ok(()));
    corrupt(&db, CUSTOMER, key::customer(1, 8, 77), |r| cu::set_i64(r, cu::C_BALANCE, 5));
    let found = consistency::check(&db, 1, false);
    assert!(found.iter().any(|f| f.starts_with("condition 12:")), "{found:?}");
    assert!(!found.iter().any(|f| f.starts_with("condition 10:")), "{found:?}");
}

#[test]
fn configurations_out_of_range_are_refused_with_the_flag_named() {
    let mut c = TpccConfig::new(0);
    assert_eq!(c.validate().unwrap_err(), "--warehouses 0 is out of range (1 to 65535)");
    c.warehouses = 1;
    c.mix = [45, 43, 4, 4, 5];
    assert_eq!(c.validate().unwrap_err(), "--mix 45,43,4,4,5 sums to 101, not 100");
    assert!(TpccConfig::parse_mix("50,50").unwrap_err().contains("needs five"));
    assert!(TpccConfig::parse_mix("50,50,x,0,0").unwrap_err().contains("'x' is not a whole"));
    assert_eq!(TpccConfig::parse_mix(" 10, 20,30,40 ,0").unwrap(), [10, 20, 30, 40, 0]);
    let err = |share, scan| with_analytics(share, scan).validate().unwrap_err();
    assert_eq!(err(0, 20.0), "--analytic 0 is out of range (1 to 100 percent of the transactions)");
    assert_eq!(
        err(20, 100.5),
        "--analytic-scan 100.5 is out of range (more than 0, at most 100 percent of a \
         warehouse's stock)"
    );
    assert_eq!(
        err(20, 0.0004),
        "--analytic-scan 0.0004 scans no stock row (one row is 0.001 percent)"
    );
    assert_eq!(with_analytics(100, 100.0).validate(), Ok(()));
    assert_eq!(AnalyticConfig { share: 1, scan: 0.0005 }.items(), 1, "half a row rounds up");
    assert_eq!(AnalyticConfig { share: 1, scan: 60.0 }.items(), 60_000);
}

/// Without the analytic transaction the workload has the specification's tables and types; with
/// it, one table and one type more.
#[test]
fn the_analytic_transaction_adds_its_table_and_type_only_when_asked() {
    let plain = Tpcc::new(TpccConfig::new(1));
    assert_eq!(plain.tables().len(), 11);
    assert_eq!(plain.txn_types().len(), 5);
    let hybrid = Tpcc::new(with_analytics(20, 10.0));
    let tables = hybrid.tables();
    assert_eq!(tables.len(), 12);
    assert_eq!(tables[ANALYTIC_HISTORY.0 as usize].name, "analytic_history");
    assert_eq!(hybrid.txn_types().len(), 6);
    assert_eq!(hybrid.txn_types()[Kind::Analytic as usize].name, "analytic");
    assert_ne!(plain.data_config(), hybrid.data_config(), "a loaded database is not shared");
}
