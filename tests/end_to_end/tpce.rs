//! TPC-E: the loader's cardinalities and a consistent initial trade history, Trade-Order,
//! Trade-Result and Market-Feed with exact effects, the consistency checks after a contended run
//! (1000 customers, 8 threads on 2 cores, templates and declared access sets checked at run
//! time) under every serializable protocol, the checks' power to detect broken databases, the
//! generator's mix, and configurations out of range.

use crate::common;

use std::ops::ControlFlow;
use std::time::Duration;
use txlab::engine::{Checks, Generator, WorkerStats, Workload};
use txlab::prelude::*;
use txlab::workloads::tpce::load;
use txlab::workloads::tpce::market::{self, Lot, Ready};
use txlab::workloads::tpce::schema::{self, key, status, trade_types as tt};
use txlab::workloads::tpce::tables::*;
use txlab::workloads::tpce::txns::{self, Kind, TpceTxn, TYPES};
use txlab::workloads::tpce::{Tpce, TpceConfig, DEFAULT_MIX};

use schema::{
    broker as br, customer_account as ca, holding as ho, holding_summary as hs, trade as tr,
};

fn loaded<P: Protocol>(cfg: TpceConfig) -> (Tpce, Database<P>) {
    let tpce = Tpce::new(cfg);
    let opts = DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(2),
        // A procedure using a column it did not declare would compute with marker bytes.
        poison_unprojected: true,
        ..Default::default()
    };
    let db = common::database_for::<P, _>(&tpce, opts);
    tpce.load(&db, 2).unwrap();
    (tpce, db)
}

fn count<P: Protocol>(db: &Database<P>, t: TableId) -> u64 {
    db.count_present(t, 0, u64::MAX).expect("an ordered table")
}

fn get<P: Protocol, T>(db: &Database<P>, t: TableId, k: u64, f: impl FnOnce(&[u8]) -> T) -> T {
    db.peek(t, k, f).unwrap_or_else(|| panic!("row {k:#x} of table {}", t.0))
}

#[test]
fn loader_produces_the_specified_cardinalities_and_a_consistent_history() {
    let cfg = TpceConfig::new(1_000);
    let (tpce, db) = loaded::<txlab::protocols::nocc::Nocc>(cfg.clone());
    // Clause 2.6's fixed tables, and the tables that scale by load unit.
    let fixed = |t, n| {
        assert_eq!(db.count_present(t, 0, 100_000).unwrap(), n, "table {}", t.0);
    };
    fixed(STATUS_TYPE, 5);
    fixed(TRADE_TYPE, 5);
    fixed(EXCHANGE, 4);
    fixed(SECTOR, 12);
    fixed(INDUSTRY, 102);
    fixed(TAXRATE, 320);
    fixed(CHARGE, 15);
    fixed(COMMISSION_RATE, 240);
    fixed(ZIP_CODE, 14_741);
    fixed(CUSTOMER, 1_000);
    fixed(COMPANY, 500);
    fixed(SECURITY, 685);
    fixed(LAST_TRADE, 685);
    fixed(NEWS_ITEM, 1_000);
    fixed(BROKER, 10);
    fixed(WATCH_LIST, 1_000);
    fixed(ADDRESS, 1_504);
    assert_eq!(count(&db, COMPANY_COMPETITOR), 1_500);
    assert_eq!(count(&db, FINANCIAL), 10_000);
    assert_eq!(count(&db, NEWS_XREF), 1_000);
    assert_eq!(count(&db, DAILY_MARKET), 685 * 1_305);
    assert_eq!(count(&db, CUSTOMER_TAXRATE), 2_000);
    // Accounts: 1 to 10 per customer by tier, about 5 on average.
    let accounts = count(&db, CUSTOMER_ACCOUNT);
    assert!((4_500..5_500).contains(&accounts), "{accounts} accounts");
    let permissions = count(&db, ACCOUNT_PERMISSION);
    assert!(permissions >= accounts && permissions <= 3 * accounts);
    let watch = count(&db, WATCH_ITEM);
    assert!((90_000..110_000).contains(&watch), "{watch} watch items");
    // About 57.6 trades per customer per day, most of them completed.
    let trades = count(&db, TRADE);
    assert!((50_000..65_000).contains(&trades), "{trades} trades");
    assert_eq!(count(&db, TRADE_BY_ACCOUNT), trades);
    assert_eq!(count(&db, TRADE_BY_SECURITY), trades);
    let settled = count(&db, SETTLEMENT);
    let pending = count(&db, TRADE_REQUEST);
    assert_eq!(settled + pending, trades, "every trade completed or pending");
    assert!(pending > 100 && pending < trades / 20, "{pending} pending");
    let cash = count(&db, CASH_TRANSACTION);
    let share = cash as f64 / settled as f64;
    assert!((0.9..0.94).contains(&share), "{share} of trades are cash (92 %)");
    assert!(count(&db, HOLDING) > 0 && count(&db, HOLDING_SUMMARY) > 0);
    assert_eq!(count(&db, HOLDING_HISTORY), count(&db, HOLDING_HISTORY_BY));
    assert_eq!(count(&db, TRADE_REQUEST_BY), pending);
    assert_eq!(tpce.check(&db), Ok(()), "a fresh population is consistent");
    // The same seed loads the same database whatever the thread count.
    let again = Tpce::new(cfg);
    let db1 = common::database_for::<txlab::protocols::nocc::Nocc, _>(&again, DbOptions::default());
    again.load(&db1, 1).unwrap();
    assert_eq!(count(&db1, TRADE), trades);
    assert_eq!(count(&db1, HOLDING), count(&db, HOLDING));
}

/// Runs `txn` (of its kind's type, templates checked) on one worker and commits it.
fn run_one<P: Protocol>(db: &Database<P>, txn: &TpceTxn) -> Result<(), Abort> {
    let mut worker = db.worker().unwrap();
    worker.begin();
    let checks = Checks { templates: true, ..Checks::default() };
    let out = txn.run(&mut Tx::new(&mut worker, &TYPES[txn.kind as usize], checks));
    match out {
        Ok(()) => worker.commit(),
        Err(a) => {
            worker.abort();
            Err(a)
        }
    }
}

/// A cash account of a customer with no tax to pay, holding a long position of at least 200
/// shares: `(c, ca, s, qty)`.
fn long_position<P: Protocol>(db: &Database<P>) -> (u64, u64, u32, i32) {
    let mut found = None;
    db.visit_present(HOLDING_SUMMARY, 0, u64::MAX, usize::MAX, |k, r| {
        let (account, s) = (k >> 22, (k & ((1 << 22) - 1)) as u32);
        let qty = hs::i32(r, hs::HS_QTY);
        let untaxed = db.peek(CUSTOMER_ACCOUNT, account, |r| ca::u32(r, ca::CA_TAX_ST)) == Some(0);
        if qty >= 200 && untaxed {
            found = Some((account / 10, account, s, qty));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found.expect("a loaded long position")
}

fn lots<P: Protocol>(db: &Database<P>, account: u64, s: u32) -> Vec<Lot> {
    let mut out = Vec::new();
    db.visit_present(
        HOLDING,
        key::holding(account, s, 0),
        key::holding(account, s, 0xFFFF),
        usize::MAX,
        |k, r| {
            out.push(Lot {
                trade: ho::i64(r, ho::H_T_ID) as u64,
                n: (k & 0xFFFF) as u32,
                price: ho::i64(r, ho::H_PRICE),
                qty: ho::i32(r, ho::H_QTY),
                dts: ho::i64(r, ho::H_DTS),
                hist: ho::u32(r, ho::H_HIST_N),
            });
            ControlFlow::Continue(())
        },
    );
    out
}

fn order(c: u64, account: u64, s: u32, t: u64, kind: u32, qty: i32, price: i64) -> TpceTxn {
    let mut txn = TpceTxn::new();
    txn.kind = Kind::TradeOrder;
    (txn.c, txn.ca, txn.s, txn.t, txn.trade_type, txn.qty, txn.price) =
        (c, account, s, t, kind, qty, price);
    (txn.lifo, txn.margin, txn.roll_back, txn.executor) = (false, false, false, 0);
    txn.now = 1_900_000_000;
    txn
}

#[test]
fn a_market_sell_and_its_result_move_holdings_cash_and_the_broker_exactly() {
    let (tpce, db) = loaded::<txlab::protocols::silo::Silo>(TpceConfig::new(1_000));
    let (c, account, s, held) = long_position(&db);
    let before = lots(&db, account, s);
    let (balance, b) = get(&db, CUSTOMER_ACCOUNT, account, |r| {
        (ca::i64(r, ca::CA_BAL), ca::i64(r, ca::CA_B_ID) as u64)
    });
    let broker = |db: &Database<_>| {
        get(db, BROKER, b, |r| (br::i64(r, br::B_NUM_TRADES), br::i64(r, br::B_COMM_TOTAL)))
    };
    let (trades0, comm0) = broker(&db);
    let tier = get(&db, CUSTOMER, c, |r| schema::customer::u32(r, schema::customer::C_TIER));
    let market_price = get(&db, LAST_TRADE, u64::from(s), |r| {
        schema::last_trade::i64(r, schema::last_trade::LT_PRICE)
    });

    // Trade-Order: a market sell of 100 shares, submitted at the last trade's price.
    let t = schema::RUN_TRADES + 7;
    let to = order(c, account, s, t, tt::MARKET_SELL, 100, 0);
    run_one(&db, &to).unwrap();
    assert_eq!(to.submitted(), Some(Ready { trade: t, security: s, qty: 100 }));
    get(&db, TRADE, t, |r| {
        assert_eq!(schema::status_of(tr::get(r, tr::T_ST_ID)), Some(status::SUBMITTED));
        assert_eq!(tr::i64(r, tr::T_BID_PRICE), market_price);
        assert_eq!(tr::i64(r, tr::T_CHRG), load::charge_of(tt::MARKET_SELL, tier));
    });
    assert!(db.peek(TRADE_HISTORY, key::trade_history(t, status::SUBMITTED), |_| ()).is_some());
    assert_eq!(tpce.check(&db), Ok(()), "a submitted trade is consistent");

    // Trade-Result: executes at the market's price then, FIFO.
    let mut result = TpceTxn::new();
    txns::fill_trade_result(&mut result, to.submitted().unwrap(), 1_900_000_100);
    run_one(&db, &result).unwrap();
    let price = market::price(s, 1_900_000_100);
    let mut changes = Vec::new();
    let (left, buy, sold) = market::trade_lots(&before, true, false, 100, price, &mut changes);
    assert_eq!(left, 0, "the long position covers the sale");
    let rate = load::commission_rate_of(tier, tt::MARKET_SELL, load::exchange_of(s), 0);
    let terms = market::Terms {
        kind: tt::MARKET_SELL,
        qty: 100,
        price,
        charge: load::charge_of(tt::MARKET_SELL, tier),
        commission_rate: rate,
    };
    let x = market::execute(terms, sold - buy, 0, 0);
    assert_eq!(x.tax, 0);
    get(&db, TRADE, t, |r| {
        assert_eq!(schema::status_of(tr::get(r, tr::T_ST_ID)), Some(status::COMPLETED));
        assert_eq!(tr::i64(r, tr::T_TRADE_PRICE), price);
        assert_eq!(tr::i64(r, tr::T_COMM), x.commission);
    });
    assert_eq!(
        get(&db, SETTLEMENT, t, |r| schema::settlement::i64(r, schema::settlement::SE_AMT)),
        x.settlement
    );
    assert_eq!(
        get(&db, CASH_TRANSACTION, t, |r| schema::cash_transaction::i64(
            r,
            schema::cash_transaction::CT_AMT
        )),
        x.settlement
    );
    assert_eq!(
        get(&db, CUSTOMER_ACCOUNT, account, |r| ca::i64(r, ca::CA_BAL)),
        balance + x.settlement
    );
    assert_eq!(broker(&db), (trades0 + 1, comm0 + x.commission));
    assert_eq!(
        get(&db, HOLDING_SUMMARY, key::holding_summary(account, s), |r| hs::i32(r, hs::HS_QTY)),
        held - 100
    );
    // The lots the sale consumed, oldest first, each with its history row.
    let after = lots(&db, account, s);
    for (k, ch) in changes.iter().enumerate() {
        let hh = get(&db, HOLDING_HISTORY, key::holding_history(t, k as u32), |r| {
            use schema::holding_history::*;
            (i64(r, HH_H_T_ID) as u64, i32(r, HH_BEFORE_QTY), i32(r, HH_AFTER_QTY))
        });
        assert_eq!(hh, (ch.lot.trade, ch.lot.qty, ch.after));
        let now = after.iter().find(|l| l.trade == ch.lot.trade).map(|l| l.qty);
        assert_eq!(now, (ch.after != 0).then_some(ch.after));
    }
    assert_eq!(tpce.check(&db), Ok(()));
}

#[test]
fn a_market_feed_triggers_the_limit_orders_its_prices_reach() {
    let (tpce, db) = loaded::<txlab::protocols::silo::Silo>(TpceConfig::new(1_000));
    let (c, account, s, _) = long_position(&db);
    // A limit buy above any price triggers at the next feed; a limit sell above every price
    // waits.
    let (buy, sell) = (schema::RUN_TRADES + 1, schema::RUN_TRADES + 2);
    let o = order(c, account, s, buy, tt::LIMIT_BUY, 200, market::PRICE_HIGH + 1);
    run_one(&db, &o).unwrap();
    assert_eq!(o.submitted(), None, "a limit order waits for its price");
    let o = order(c, account, s, sell, tt::LIMIT_SELL, 100, market::PRICE_HIGH + 1);
    run_one(&db, &o).unwrap();
    for t in [buy, sell] {
        assert!(db.peek(TRADE_REQUEST, key::trade_request(s, t), |_| ()).is_some());
        get(&db, TRADE, t, |r| {
            assert_eq!(schema::status_of(tr::get(r, tr::T_ST_ID)), Some(status::PENDING))
        });
    }
    assert_eq!(tpce.check(&db), Ok(()));
    let vol = |db: &Database<_>| {
        get(db, LAST_TRADE, u64::from(s), |r| {
            schema::last_trade::i64(r, schema::last_trade::LT_VOL)
        })
    };
    let vol0 = vol(&db);
    let mut feed = TpceTxn::new();
    feed.tickers = vec![(s, 300)];
    txns::fill_market_feed(&mut feed, 1_900_000_000);
    run_one(&db, &feed).unwrap();
    let triggered = feed.triggered();
    assert!(triggered.contains(&Ready { trade: buy, security: s, qty: 200 }));
    assert!(triggered.iter().all(|r| r.trade != sell && r.security == s));
    assert_eq!(vol(&db), vol0 + 300);
    assert_eq!(
        get(&db, LAST_TRADE, u64::from(s), |r| schema::last_trade::i64(
            r,
            schema::last_trade::LT_PRICE
        )),
        market::price(s, 1_900_000_000)
    );
    for r in &triggered {
        assert!(db.peek(TRADE_REQUEST, key::trade_request(s, r.trade), |_| ()).is_none());
        get(&db, TRADE, r.trade, |r| {
            assert_eq!(schema::status_of(tr::get(r, tr::T_ST_ID)), Some(status::SUBMITTED))
        });
    }
    assert!(db.peek(TRADE_REQUEST, key::trade_request(s, sell), |_| ()).is_some());
    assert_eq!(tpce.check(&db), Ok(()));
    // Each triggered order executes.
    for r in triggered {
        let mut result = TpceTxn::new();
        txns::fill_trade_result(&mut result, r, 1_900_000_010);
        run_one(&db, &result).unwrap();
    }
    assert_eq!(tpce.check(&db), Ok(()));
}

#[test]
fn a_trade_order_rolls_back_on_purpose_and_leaves_nothing() {
    let (tpce, db) = loaded::<txlab::protocols::two_pl::TwoPlWaitDie>(TpceConfig::new(1_000));
    let (c, account, s, _) = long_position(&db);
    let t = schema::RUN_TRADES + 3;
    let mut o = order(c, account, s, t, tt::MARKET_BUY, 100, 0);
    o.roll_back = true;
    let err = run_one(&db, &o).unwrap_err();
    assert!(err.reason.is_final(), "{err:?}");
    assert!(db.peek(TRADE, t, |_| ()).is_none());
    assert!(db.peek(TRADE_BY_ACCOUNT, key::trade_account(account, t), |_| ()).is_none());
    assert_eq!(tpce.check(&db), Ok(()));
}

/// Runs `per_worker` transactions on each of `threads` workers; returns the workers'
/// statistics merged, and how many workers reported.
fn drive<P: Protocol>(
    db: &Database<P>,
    tpce: &Tpce,
    threads: usize,
    per_worker: u64,
    seed: u64,
) -> (WorkerStats, usize) {
    let stats = P::drive(db, tpce, &common::contended_run(threads, per_worker, seed)).unwrap();
    let mut total = WorkerStats::new(tpce.txn_types().len());
    for s in &stats {
        total.merge(s);
    }
    (total, stats.len())
}

fn contended<P: Protocol>(seed: u64) {
    const THREADS: usize = 8;
    const PER_WORKER: u64 = 400;
    let (tpce, db) = loaded::<P>(TpceConfig::new(1_000));
    let (total, _) = drive(&db, &tpce, THREADS, PER_WORKER, seed);
    // Every transaction ended: committed, or rolled back by Trade-Order's 1 %.
    let ended = total.total_commits() + total.user_aborts.iter().sum::<u64>();
    assert_eq!(ended, THREADS as u64 * PER_WORKER, "{:?}", total.commits);
    // The market runs behind the orders: a pipeline (BOHM) reports commits batches later,
    // so its short runs may execute none.
    for kind in Kind::ALL {
        let market = matches!(kind, Kind::TradeResult | Kind::MarketFeed);
        if !market || P::CAPS.interactive {
            assert!(total.commits[kind as usize] > 0, "{kind:?} committed: {:?}", total.commits);
        }
    }
    let user: u64 = total.user_aborts.iter().sum();
    assert_eq!(user, total.user_aborts[Kind::TradeOrder as usize], "only Trade-Order rolls back");
    assert_eq!(total.aborts[AbortReason::MissingRow as usize], 0);
    assert_eq!(tpce.check(&db), Ok(()), "seed {seed}");
}

#[test]
fn two_pl_nowait_keeps_tpce_consistent() {
    contended::<txlab::protocols::two_pl::TwoPlNoWait>(1);
}

#[test]
fn two_pl_waitdie_keeps_tpce_consistent() {
    contended::<txlab::protocols::two_pl::TwoPlWaitDie>(2);
}

#[test]
fn two_pl_ordered_keeps_tpce_consistent() {
    // Declared by dry runs of the bodies; stale ones are declared again.
    contended::<txlab::protocols::two_pl_ordered::TwoPlOrdered>(3);
}

#[test]
fn bohm_keeps_tpce_consistent() {
    contended::<txlab::protocols::bohm::Bohm>(4);
}

#[test]
fn silo_keeps_tpce_consistent() {
    contended::<txlab::protocols::silo::Silo>(5);
}

#[test]
fn tictoc_keeps_tpce_consistent() {
    contended::<txlab::protocols::tictoc::TicToc>(6);
}

#[test]
fn mocc_keeps_tpce_consistent() {
    contended::<txlab::protocols::mocc::Mocc>(7);
}

#[test]
fn ic3_keeps_tpce_consistent() {
    contended::<txlab::protocols::ic3::Ic3>(8);
}

#[test]
fn ermia_ssn_keeps_tpce_consistent() {
    contended::<txlab::protocols::ermia_ssn::ErmiaSsn>(9);
}

#[test]
fn ermia_ssi_keeps_tpce_consistent() {
    contended::<txlab::protocols::ermia_ssi::ErmiaSsi>(10);
}

#[test]
fn hekaton_keeps_tpce_consistent() {
    contended::<txlab::protocols::hekaton::Hekaton>(11);
}

#[test]
fn cicada_keeps_tpce_consistent() {
    contended::<txlab::protocols::cicada::Cicada>(12);
}

#[test]
fn si_keeps_tpce_consistent() {
    // TPC-E's writes are read-modify-writes of the rows they read: first-committer-wins keeps
    // the checks, though SI is not serializable.
    contended::<txlab::protocols::si::Si>(13);
}

/// Changes `k` of `t` with `f`, or deletes it (`f` None), in a transaction of its own.
fn corrupt<P: Protocol>(db: &Database<P>, t: TableId, k: u64, f: Option<fn(&mut [u8])>) {
    let mut w = db.worker().unwrap();
    w.begin();
    match f {
        Some(f) => assert!(w.update(t, k, f).unwrap().is_some()),
        None => assert!(w.delete(t, k).unwrap()),
    }
    w.commit().unwrap();
}

#[test]
fn the_checks_detect_broken_databases() {
    let (tpce, db) = loaded::<txlab::protocols::nocc::Nocc>(TpceConfig::new(1_000));
    assert_eq!(tpce.check(&db), Ok(()));
    let expect = |db: &Database<_>, check: &str| {
        let err = tpce.check(db).unwrap_err();
        assert!(err.contains(check), "{check} not in: {err}");
    };
    // A completed cash trade.
    let mut done = None;
    db.visit_present(CASH_TRANSACTION, 0, u64::MAX, 1, |t, _| {
        done = Some(t);
        ControlFlow::Break(())
    });
    let t = done.unwrap();
    let (account, s) = get(&db, TRADE, t, |r| {
        (tr::i64(r, tr::T_CA_ID) as u64, schema::symbol_index(tr::get(r, tr::T_S_SYMB)).unwrap())
    });
    // (1) A holding changed under its summary.
    let (_, held_account, held_s, _) = long_position(&db);
    let h = lots(&db, held_account, held_s)[0];
    corrupt(
        &db,
        HOLDING,
        key::holding(held_account, held_s, h.n),
        Some(|r| ho::set_i32(r, ho::H_QTY, ho::i32(r, ho::H_QTY) + 1)),
    );
    expect(&db, "(1) holding summary");
    // (3) A balance changed without a cash transaction.
    corrupt(
        &db,
        CUSTOMER_ACCOUNT,
        account,
        Some(|r| ca::set_i64(r, ca::CA_BAL, ca::i64(r, ca::CA_BAL) + 1)),
    );
    expect(&db, &format!("(3) account {account} holds"));
    // (2) A settlement dropped.
    corrupt(&db, SETTLEMENT, t, None);
    expect(&db, &format!("(2) trade {t} (Completed, cash) has no settlement"));
    // (4) A history row dropped.
    corrupt(&db, TRADE_HISTORY, key::trade_history(t, status::COMPLETED), None);
    expect(&db, &format!("(4) trade {t} (Completed) has the history"));
    // (5) A broker's count changed.
    corrupt(
        &db,
        BROKER,
        0,
        Some(|r| br::set_i64(r, br::B_NUM_TRADES, br::i64(r, br::B_NUM_TRADES) + 1)),
    );
    expect(&db, "(5) broker 0 counts");
    // (6) An index entry dropped.
    corrupt(&db, TRADE_BY_SECURITY, key::trade_security(s, t), None);
    expect(&db, "(6)");
}

#[test]
fn the_generator_follows_the_mix_and_runs_the_market_only_on_orders() {
    let tpce = Tpce::new(TpceConfig::new(1_000));
    // The first worker's generator starts with Trade-Cleanup; the second's with the mix.
    let mut first = tpce.generator(0, 2, 41);
    let mut txn = first.blank();
    first.fill(&mut txn);
    assert_eq!(txn.kind, Kind::TradeCleanup);
    first.fill(&mut txn);
    assert_ne!(txn.kind, Kind::TradeCleanup, "once");
    let mut gen = tpce.generator(1, 2, 42);
    let mut seen = [0u64; 13];
    const N: u64 = 20_000;
    for _ in 0..N {
        gen.fill(&mut txn);
        seen[txn.kind as usize] += 1;
    }
    // Nothing was submitted (no commit was reported): no result, no feed.
    assert_eq!((seen[Kind::TradeResult as usize], seen[Kind::MarketFeed as usize]), (0, 0));
    // The others keep their proportions among themselves.
    let others: u32 = DEFAULT_MIX.iter().sum::<u32>()
        - DEFAULT_MIX[Kind::TradeResult as usize]
        - DEFAULT_MIX[Kind::MarketFeed as usize];
    for k in Kind::ALL {
        if matches!(k, Kind::TradeResult | Kind::MarketFeed) {
            continue;
        }
        let want = f64::from(DEFAULT_MIX[k as usize]) / f64::from(others);
        let got = seen[k as usize] as f64 / N as f64;
        assert!((got - want).abs() < 0.01, "{k:?}: {got} of the draws, want {want}");
    }
}

#[test]
fn configurations_out_of_range_are_refused_with_the_flag_named() {
    let bad = |cfg: TpceConfig, msg: &str| assert_eq!(cfg.validate().unwrap_err(), msg);
    bad(
        TpceConfig::new(1_500),
        "--customers 1500 is not a multiple of 1000 from 1000 to 1000000 (TPC-E loads \
         customers in units of 1000)",
    );
    bad(
        TpceConfig { trade_days: 0, ..TpceConfig::new(1_000) },
        "--trade-days 0 is out of range (1 to 300)",
    );
    bad(
        TpceConfig { scale_factor: 0, ..TpceConfig::new(1_000) },
        "--scale-factor 0 is out of range (1 to 10000 customers per trade per second)",
    );
    assert_eq!(
        TpceConfig::parse_mix("5,13,1,18,14,8,10.1,10,19,2").unwrap_err(),
        "--mix '5,13,1,18,14,8,10.1,10,19,2' sums to 100.1, not 100"
    );
    use txlab::workloads::tpce::AnalyticConfig;
    let analytic = |share, group| TpceConfig {
        analytic: Some(AnalyticConfig { share, group }),
        ..TpceConfig::new(1_000)
    };
    bad(
        analytic(0, 20.0),
        "--tpce-analytic 0 is out of range (1 to 100 percent of the transactions)",
    );
    bad(
        analytic(20, 0.0),
        "--analytic-group 0 is out of range (more than 0, at most 100 percent of the customers)",
    );
    bad(
        analytic(20, 0.01),
        "--analytic-group 0.01 values no customer (one customer is 0.1 percent)",
    );
    bad(
        TpceConfig { security_range: Some(686), ..TpceConfig::new(1_000) },
        "--security-range 686 is out of range (1 to the 685 securities of 1000 customers)",
    );
    let mut mix = DEFAULT_MIX;
    mix[Kind::BrokerVolume as usize] += mix[Kind::TradeOrder as usize];
    mix[Kind::TradeOrder as usize] = 0;
    bad(
        TpceConfig { mix, ..TpceConfig::new(1_000) },
        "--mix 15,13,1,18,14,8,0,10,19,2: Trade-Result and Market-Feed execute what \
         Trade-Order submits, so they need Trade-Order in the mix",
    );
    assert_eq!(TpceConfig::parse_mix("4.9,13,1,18,14,8,10.1,10,19,2").unwrap(), DEFAULT_MIX);
    assert!(TpceConfig::parse_mix("1,2,3").unwrap_err().starts_with("--mix '1,2,3' needs ten"));
    assert_eq!(
        TpceConfig::parse_mix("4.95,13,1,18,14,8,10.1,10,19,2").unwrap_err(),
        "--mix '4.95,13,1,18,14,8,10.1,10,19,2': '4.95' has more than one decimal"
    );
}

fn with_analytics(group: f64) -> TpceConfig {
    use txlab::workloads::tpce::{AnalyticConfig, ERMIA_MIX};
    TpceConfig {
        mix: ERMIA_MIX,
        analytic: Some(AnalyticConfig { share: 20, group }),
        ..TpceConfig::new(1_000)
    }
}

/// ERMIA's TPCE-hybrid: the analytic transaction at 20 % of the mix beside the rest.
fn contended_with_analytics<P: Protocol>(seed: u64) {
    const THREADS: usize = 8;
    const PER_WORKER: u64 = 150;
    let (tpce, db) = loaded::<P>(with_analytics(5.0));
    let (total, _) = drive(&db, &tpce, THREADS, PER_WORKER, seed);
    let ended = total.total_commits() + total.user_aborts.iter().sum::<u64>();
    assert_eq!(ended, THREADS as u64 * PER_WORKER);
    let analytics = total.commits[Kind::Analytic as usize];
    assert!(analytics > 0, "{:?}", total.commits);
    assert_eq!(count(&db, ANALYTIC_HISTORY), analytics, "a row per committed analytic transaction");
    assert_eq!(tpce.check(&db), Ok(()), "seed {seed}");
}

#[test]
fn silo_keeps_tpce_consistent_with_analytics() {
    contended_with_analytics::<txlab::protocols::silo::Silo>(21);
}

#[test]
fn ermia_ssi_keeps_tpce_consistent_with_analytics() {
    contended_with_analytics::<txlab::protocols::ermia_ssi::ErmiaSsi>(22);
}

#[test]
fn si_keeps_tpce_consistent_with_analytics() {
    contended_with_analytics::<txlab::protocols::si::Si>(23);
}

#[test]
fn two_pl_ordered_keeps_tpce_consistent_with_analytics() {
    contended_with_analytics::<txlab::protocols::two_pl_ordered::TwoPlOrdered>(24);
}

#[test]
fn the_analytic_transaction_values_its_group_exactly() {
    let (tpce, db) = loaded::<txlab::protocols::hekaton::Hekaton>(with_analytics(1.0));
    let (first, n) = (100u64, 10u32);
    // What the group holds: balances, and shares at the last trades' prices.
    let (lo, hi) = (first * 10, (first + u64::from(n)) * 10 - 1);
    let (mut accounts, mut balance) = (0, 0);
    db.visit_present(CUSTOMER_ACCOUNT, lo, hi, usize::MAX, |_, r| {
        accounts += 1;
        balance += ca::i64(r, ca::CA_BAL);
        ControlFlow::Continue(())
    });
    let (mut holdings, mut assets) = (0, 0i64);
    db.visit_present(
        HOLDING_SUMMARY,
        key::holding_summary(lo, 0),
        key::holding_summary(hi, (1 << 22) - 1),
        usize::MAX,
        |k, r| {
            holdings += 1;
            let s = k & ((1 << 22) - 1);
            let price = db
                .peek(LAST_TRADE, s, |r| schema::last_trade::i64(r, schema::last_trade::LT_PRICE))
                .unwrap();
            assets += i64::from(hs::i32(r, hs::HS_QTY)) * price;
            ControlFlow::Continue(())
        },
    );
    assert!(holdings > 0);
    let mut txn = TpceTxn::new();
    (txn.kind, txn.c, txn.group, txn.t, txn.now) = (Kind::Analytic, first, n, (7 << 40) | 1, 1_234);
    run_one(&db, &txn).unwrap();
    get(&db, ANALYTIC_HISTORY, txn.t, |r| {
        use schema::analytic_history::*;
        assert_eq!(i64(r, AH_FIRST_C), first as i64);
        assert_eq!(u32(r, AH_CUSTOMERS), n);
        assert_eq!(u32(r, AH_ACCOUNTS), accounts);
        assert_eq!(u32(r, AH_HOLDINGS), holdings);
        assert_eq!(i64(r, AH_BALANCE), balance);
        assert_eq!(i64(r, AH_ASSETS), assets);
        assert_eq!(i64(r, AH_DTS), 1_234);
    });
    assert_eq!(tpce.check(&db), Ok(()));
    // A lost or repeated row shows.
    let mut again = TpceTxn::new();
    (again.kind, again.c, again.group, again.t) = (Kind::Analytic, first, n, (7 << 40) | 3);
    run_one(&db, &again).unwrap();
    let err = tpce.check(&db).unwrap_err();
    assert!(err.contains("(7) generator 7's analytic history jumps from row 1 to 3"), "{err}");
}

#[test]
fn the_read_write_variant_runs_its_four_types_on_the_securities_asked_for() {
    use txlab::workloads::tpce::READ_WRITE_MIX;
    let cfg = TpceConfig { mix: READ_WRITE_MIX, security_range: Some(5), ..TpceConfig::new(1_000) };
    let (tpce, db) = loaded::<txlab::protocols::ic3::Ic3>(cfg);
    let before = count(&db, TRADE);
    let (total, _) = drive(&db, &tpce, 8, 200, 31);
    for k in Kind::ALL {
        let rw = matches!(
            k,
            Kind::MarketFeed | Kind::TradeOrder | Kind::TradeResult | Kind::TradeUpdate
        );
        assert_eq!(total.commits[k as usize] > 0, rw, "{k:?}: {:?}", total.commits);
    }
    // Every trade of the run is in one of the first five securities.
    let mut run_trades = 0;
    db.visit_present(TRADE, schema::RUN_TRADES, schema::MAX_TRADE, usize::MAX, |_, r| {
        run_trades += 1;
        assert!(schema::symbol_index(tr::get(r, tr::T_S_SYMB)).unwrap() < 5);
        ControlFlow::Continue(())
    });
    assert_eq!(count(&db, TRADE), before + run_trades);
    assert!(run_trades > 0);
    assert_eq!(tpce.check(&db), Ok(()));
}

#[test]
fn trade_cleanup_cancels_what_is_pending_and_data_maintenance_changes_each_table() {
    let (tpce, db) = loaded::<txlab::protocols::two_pl::TwoPlWaitDie>(TpceConfig::new(1_000));
    let pending: Vec<u64> = {
        let mut v = Vec::new();
        db.visit_present(TRADE_REQUEST, 0, u64::MAX, usize::MAX, |k, _| {
            v.push(key::trade_of(k));
            ControlFlow::Continue(())
        });
        v
    };
    assert!(!pending.is_empty());
    // A submitted trade of an earlier run, whose result never ran.
    let (c, account, s, _) = long_position(&db);
    let t = schema::RUN_TRADES + 11;
    run_one(&db, &order(c, account, s, t, tt::MARKET_BUY, 100, 0)).unwrap();
    let mut cleanup = TpceTxn::new();
    txns::fill_trade_cleanup(&mut cleanup, 1_900_000_000);
    run_one(&db, &cleanup).unwrap();
    assert_eq!(count(&db, TRADE_REQUEST), 0);
    assert_eq!(count(&db, TRADE_REQUEST_BY), 0);
    for &p in pending.iter().chain([&t]) {
        get(&db, TRADE, p, |r| {
            assert_eq!(schema::status_of(tr::get(r, tr::T_ST_ID)), Some(status::CANCELED))
        });
    }
    assert_eq!(tpce.check(&db), Ok(()));
    // Data-Maintenance, a round over its twelve tables: each changes what it says.
    let peek_sec = |db: &Database<_>| {
        get(db, SECURITY, u64::from(s), |r| schema::security::i64(r, schema::security::S_EXCH_DATE))
    };
    let exch0 = peek_sec(&db);
    let wl0: Vec<u64> = {
        let mut v = Vec::new();
        db.visit_present(
            WATCH_ITEM,
            key::watch_item(c, 0),
            key::watch_item(c, (1 << 22) - 1),
            usize::MAX,
            |k, _| {
                v.push(k);
                ControlFlow::Continue(())
            },
        );
        v
    };
    for round in 0..txns::MAINTAINED_TABLES {
        let mut dm = TpceTxn::new();
        dm.kind = Kind::DataMaintenance;
        (dm.frame, dm.c, dm.ca, dm.s, dm.co, dm.day, dm.group, dm.qty) =
            (round, c, account, s, 3, 5, 17, 10);
        (dm.companies, dm.securities) = (500, 685);
        run_one(&db, &dm).unwrap();
    }
    assert_eq!(peek_sec(&db), exch0 + 86_400);
    let mut wl1 = Vec::new();
    db.visit_present(
        WATCH_ITEM,
        key::watch_item(c, 0),
        key::watch_item(c, (1 << 22) - 1),
        usize::MAX,
        |k, _| {
            wl1.push(k);
            ControlFlow::Continue(())
        },
    );
    assert_eq!(wl1.len(), wl0.len(), "one watch item replaced by another");
    assert!(!wl1.contains(&wl0[0]));
    assert_eq!(
        get(&db, COMPANY, 3, |r| schema::company::get(r, schema::company::CO_SP_RATE).to_vec()),
        b"ABA\0"
    );
    assert_eq!(
        get(&db, TAXRATE, 17, |r| schema::taxrate::get(r, schema::taxrate::TX_NAME)[..8].to_vec()),
        b"tax rate"
    );
    assert_eq!(tpce.check(&db), Ok(()));
}
