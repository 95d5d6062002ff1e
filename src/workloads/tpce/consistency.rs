//! What TPC-E's schema and rules imply, checked over a quiescent database (after a run, with
//! no transaction in flight):
//!
//! 1. every holding summary equals the sum of its holdings, is not zero, and every holding has
//!    one; no holding is empty and a position's holdings all have its sign;
//! 2. every completed trade has its settlement, its cash transaction exactly when it is a cash
//!    trade (with the settlement's amount), and its history; a trade without completion has
//!    none of them;
//! 3. every account's balance is its initial balance plus its cash transactions;
//! 4. every trade's history follows the legal transitions (pending, then submitted, then
//!    completed; market orders start submitted) and ends in the trade's status; a pending
//!    trade has its trade request and every request a pending trade;
//! 5. every broker's trade count and commission total are those of its accounts' completed
//!    trades;
//! 6. the secondary indexes (trades by account and by security, requests by broker, holding
//!    history by holding) hold exactly the rows they index;
//! 7. with the analytic transaction, each generator's analytic-history rows are numbered
//!    1, 2, 3 ... without a gap (one row per committed analytic transaction: none lost, none
//!    twice), and each counts the accounts its customer group has.

use super::load::initial_balance;
use super::schema::{self, key, status, trade_types as tt};
use super::tables::*;
use super::TpceConfig;
use crate::engine::{Database, Protocol, Recon};
use crate::storage::TableId;
use std::collections::HashMap;
use std::ops::ControlFlow;

use schema::{
    broker as br, cash_transaction as ct, customer_account as ca, holding as ho,
    holding_summary as hs, settlement as sm, trade as tr, trade_request as rq,
};

/// Most violations listed individually per check.
const SHOWN: usize = 3;

#[derive(Default)]
struct Findings {
    shown: Vec<String>,
    per_check: [usize; 8],
}

impl Findings {
    fn add(&mut self, check: usize, f: impl FnOnce() -> String) {
        self.per_check[check] += 1;
        if self.per_check[check] <= SHOWN {
            self.shown.push(format!("({check}) {}", f()));
        }
    }

    fn into_list(mut self) -> Vec<String> {
        for (check, &n) in self.per_check.iter().enumerate() {
            if n > SHOWN {
                self.shown.push(format!("({check}) and {} more", n - SHOWN));
            }
        }
        self.shown
    }
}

/// Visits every row of `table` (keys up to `hi`: a hash-indexed table is probed key by key).
fn visit_to<P: Protocol>(db: &Database<P>, table: TableId, hi: u64, mut f: impl FnMut(u64, &[u8])) {
    db.visit_present(table, 0, hi, usize::MAX, |k, r| {
        f(k, r);
        ControlFlow::Continue(())
    });
}

/// Visits every row of an ordered table.
fn visit<P: Protocol>(db: &Database<P>, table: TableId, f: impl FnMut(u64, &[u8])) {
    visit_to(db, table, u64::MAX, f)
}

/// What the check learns of one trade.
#[derive(Clone, Copy)]
struct TradeFacts {
    account: u64,
    security: u32,
    status: u32,
    kind: u32,
    cash: bool,
    commission: i64,
}

/// Checks everything listed in the module docs; returns the violations found (the first few
/// of each check in full, then a count), empty when the database is consistent.
pub fn check<P: Protocol>(db: &Database<P>, cfg: &TpceConfig) -> Vec<String> {
    let mut f = Findings::default();
    // 1. Holdings against their summaries.
    let mut sums: HashMap<u64, (i32, bool, bool)> = HashMap::new();
    visit(db, HOLDING, |k, r| {
        let qty = ho::i32(r, ho::H_QTY);
        let e = sums.entry(k >> 16).or_insert((0, false, false));
        e.0 += qty;
        e.1 |= qty > 0;
        e.2 |= qty < 0;
        if qty == 0 {
            f.add(1, || format!("holding {k:#x} holds no share"));
        }
    });
    visit(db, HOLDING_SUMMARY, |k, r| {
        let qty = hs::i32(r, hs::HS_QTY);
        match sums.remove(&k) {
            None => f.add(1, || format!("holding summary {k:#x} ({qty} shares) has no holding")),
            Some((sum, long, short)) => {
                if sum != qty {
                    f.add(1, || {
                        format!("holding summary {k:#x} says {qty} shares, its holdings {sum}")
                    });
                }
                if long && short {
                    f.add(1, || format!("position {k:#x} holds long and short lots at once"));
                }
            }
        }
    });
    for (k, (sum, _, _)) in &sums {
        f.add(1, || format!("holdings of position {k:#x} ({sum} shares) have no summary"));
    }
    // 2, 4. Trades, their histories, settlements and cash transactions.
    let mut trades: HashMap<u64, TradeFacts> = HashMap::new();
    visit(db, TRADE, |t, r| {
        let facts = TradeFacts {
            account: tr::i64(r, tr::T_CA_ID) as u64,
            security: schema::symbol_index(tr::get(r, tr::T_S_SYMB)).unwrap_or(u32::MAX),
            status: schema::status_of(tr::get(r, tr::T_ST_ID)).unwrap_or(u32::MAX),
            kind: schema::trade_type_of(tr::get(r, tr::T_TT_ID)).unwrap_or(u32::MAX),
            cash: tr::u8(r, tr::T_IS_CASH) == 1,
            commission: tr::i64(r, tr::T_COMM),
        };
        trades.insert(t, facts);
    });
    let mut histories: HashMap<u64, u8> = HashMap::new();
    visit(db, TRADE_HISTORY, |k, _| {
        *histories.entry(k >> 3).or_default() |= 1 << (k & 7);
    });
    let mut settlements: HashMap<u64, i64> = HashMap::new();
    visit(db, SETTLEMENT, |t, r| {
        settlements.insert(t, sm::i64(r, sm::SE_AMT));
    });
    let mut cash: HashMap<u64, i64> = HashMap::new();
    visit(db, CASH_TRANSACTION, |t, r| {
        cash.insert(t, ct::i64(r, ct::CT_AMT));
    });
    let mut requests: HashMap<u64, (u32, u64)> = HashMap::new();
    visit(db, TRADE_REQUEST, |k, r| {
        requests.insert(key::trade_of(k), ((k >> 40) as u32, rq::i64(r, rq::TR_B_ID) as u64));
    });
    let bit = |st: u32| 1u8 << st;
    let (cmpt, sbmt, pndg, cncl) = (
        bit(status::COMPLETED),
        bit(status::SUBMITTED),
        bit(status::PENDING),
        bit(status::CANCELED),
    );
    let mut balances: HashMap<u64, i64> = HashMap::new();
    let mut brokers_due: HashMap<u64, (i64, i64)> = HashMap::new();
    let mut account_broker: HashMap<u64, u64> = HashMap::new();
    visit(db, CUSTOMER_ACCOUNT, |k, r| {
        account_broker.insert(k, ca::i64(r, ca::CA_B_ID) as u64);
    });
    for (&t, facts) in &trades {
        let h = histories.remove(&t).unwrap_or(0);
        let first = if facts.kind <= tt::MARKET_SELL { sbmt } else { pndg };
        // The legal histories of each status: the order's first status, then each step.
        let legal: &[u8] = match facts.status {
            status::COMPLETED => &[first | sbmt | cmpt],
            status::SUBMITTED => &[first | sbmt],
            status::PENDING => &[pndg],
            status::CANCELED => &[first | cncl, first | sbmt | cncl],
            _ => &[],
        };
        if !legal.contains(&h) {
            f.add(4, || {
                format!("trade {t} ({}) has the history {h:#07b}", status_name(facts.status))
            });
        }
        let done = facts.status == status::COMPLETED;
        let settled = settlements.get(&t).copied();
        let paid = cash.get(&t).copied();
        if done != settled.is_some() || (done && facts.cash) != paid.is_some() {
            f.add(2, || {
                format!(
                    "trade {t} ({}, {}) has {} settlement and {} cash transaction",
                    status_name(facts.status),
                    if facts.cash { "cash" } else { "margin" },
                    if settled.is_some() { "a" } else { "no" },
                    if paid.is_some() { "a" } else { "no" },
                )
            });
        }
        if let (Some(s), Some(c)) = (settled, paid) {
            if s != c {
                f.add(2, || format!("trade {t} settled {s} but its cash transaction says {c}"));
            }
            *balances.entry(facts.account).or_default() += c;
        }
        let pending = facts.status == status::PENDING;
        match requests.remove(&t) {
            Some((s, _)) if pending && s == facts.security => {}
            Some(_) => f.add(4, || {
                format!("trade {t} ({}) has a trade request", status_name(facts.status))
            }),
            None if pending => f.add(4, || format!("pending trade {t} has no trade request")),
            None => {}
        }
        if done {
            if let Some(&b) = account_broker.get(&facts.account) {
                let e = brokers_due.entry(b).or_default();
                e.0 += 1;
                e.1 += facts.commission;
            } else {
                f.add(2, || {
                    format!("trade {t} names account {}, which does not exist", facts.account)
                });
            }
        }
    }
    for (t, h) in &histories {
        f.add(4, || format!("trade history {h:#07b} of trade {t}, which does not exist"));
    }
    for t in requests.keys() {
        f.add(4, || format!("trade request of trade {t}, which does not exist"));
    }
    for t in settlements.keys().filter(|t| !trades.contains_key(t)) {
        f.add(2, || format!("settlement of trade {t}, which does not exist"));
    }
    // 3. Balances.
    visit(db, CUSTOMER_ACCOUNT, |k, r| {
        let bal = ca::i64(r, ca::CA_BAL);
        let due = initial_balance(cfg.seed, k) + balances.get(&k).copied().unwrap_or(0);
        if bal != due {
            f.add(3, || format!("account {k} holds {bal}, its cash transactions make {due}"));
        }
    });
    // 5. Brokers.
    visit_to(db, BROKER, u64::from(cfg.brokers()), |b, r| {
        let (n, comm) = (br::i64(r, br::B_NUM_TRADES), br::i64(r, br::B_COMM_TOTAL));
        let due = brokers_due.get(&b).copied().unwrap_or((0, 0));
        if (n, comm) != due {
            f.add(5, || {
                format!(
                    "broker {b} counts {n} trades and {comm} commission, its accounts' \
                         completed trades {} and {}",
                    due.0, due.1
                )
            });
        }
    });
    // 6. Secondary indexes.
    let mut by_account = 0;
    visit(db, TRADE_BY_ACCOUNT, |k, _| {
        by_account += 1;
        let t = key::trade_of(k);
        if trades.get(&t).is_none_or(|x| x.account != k >> 40) {
            f.add(6, || format!("trades-by-account entry {k:#x} names no trade of its account"));
        }
    });
    let mut by_security = 0;
    visit(db, TRADE_BY_SECURITY, |k, _| {
        by_security += 1;
        let t = key::trade_of(k);
        if trades.get(&t).is_none_or(|x| u64::from(x.security) != k >> 40) {
            f.add(6, || format!("trades-by-security entry {k:#x} names no trade of its security"));
        }
    });
    if by_account != trades.len() || by_security != trades.len() {
        f.add(6, || {
            format!(
                "{} trades but {by_account} by-account and {by_security} by-security entries",
                trades.len()
            )
        });
    }
    let mut by_broker = 0;
    visit(db, TRADE_REQUEST_BY, |k, _| {
        by_broker += 1;
        let t = key::trade_of(k);
        let ok = trades.get(&t).is_some_and(|x| {
            x.status == status::PENDING
                && db.peek(TRADE_REQUEST, key::trade_request(x.security, t), |r| {
                    rq::i64(r, rq::TR_B_ID) as u64 == k >> 40
                }) == Some(true)
        });
        if !ok {
            f.add(6, || format!("requests-by-broker entry {k:#x} names no request of its broker"));
        }
    });
    let requests_now = db.count_present(TRADE_REQUEST, 0, u64::MAX).unwrap_or(0);
    if by_broker != requests_now {
        f.add(6, || format!("{requests_now} trade requests but {by_broker} by-broker entries"));
    }
    visit(db, HOLDING_HISTORY_BY, |k, r| {
        use schema::holding_history_by::*;
        let hk = key::holding_history(i64(r, HB_T_ID) as u64, u32(r, HB_K));
        let named = db.peek(HOLDING_HISTORY, hk, |r| {
            schema::holding_history::i64(r, schema::holding_history::HH_H_T_ID) as u64
        });
        if named != Some(k >> 24) {
            f.add(6, || {
                format!(
                    "holding-history-by-holding entry {k:#x} names no history row of its holding"
                )
            });
        }
    });
    // 7. The analytic history.
    if cfg.analytic.is_some() {
        let mut last: HashMap<u64, u64> = HashMap::new();
        visit(db, ANALYTIC_HISTORY, |k, r| {
            use schema::analytic_history::*;
            let (source, seq) = (k >> 40, k & ((1 << 40) - 1));
            let prev = last.insert(source, seq).unwrap_or(0);
            if seq != prev + 1 {
                f.add(7, || {
                    format!("generator {source}'s analytic history jumps from row {prev} to {seq}")
                });
            }
            let first = i64(r, AH_FIRST_C) as u64 * u64::from(schema::MAX_ACCOUNTS);
            let n = u64::from(u32(r, AH_CUSTOMERS)) * u64::from(schema::MAX_ACCOUNTS);
            let have = db.count_present(CUSTOMER_ACCOUNT, first, first + n - 1).unwrap_or(0);
            if u64::from(u32(r, AH_ACCOUNTS)) != have {
                f.add(7, || {
                    format!(
                        "analytic history row {k:#x} counts {} accounts, its group has {have}",
                        u32(r, AH_ACCOUNTS)
                    )
                });
            }
        });
    }
    f.into_list()
}

fn status_name(st: u32) -> &'static str {
    schema::STATUS_NAMES.get(st as usize).copied().unwrap_or("unknown status")
}
