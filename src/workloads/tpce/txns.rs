//! The ten transactions (clause 3.3) as procedures: each frame is a piece of the type's
//! template, the customer emulator's inputs (clause 4) are drawn by [`fill_customer`] and
//! [`fill_trade_order`], and the market exchange emulator's by [`fill_trade_result`] and
//! [`fill_market_feed`].
//!
//! Where a frame selects rows in `T_DTS` order, the trade indexes' id order stands for it (see
//! the [module documentation](super)). Trade-Lookup's and Trade-Update's first frames take the
//! trades of one account, the first `max_trades` in the index, for the specification's list of
//! trade ids drawn by the driver.

use super::load;
use super::market::{self, Lot, LotChange, Ready};
use super::schema::{self, key, status, trade_types as tt};
use super::tables::*;
use super::TpceConfig;
use crate::engine::{
    declare_by_dry_run, AccessSet, Columns, Piece, Procedure, Recon, TableAccess, Tx, TxnType,
    Worker, ALL_COLUMNS,
};
use crate::error::{Abort, AbortReason};
use crate::storage::TableId;
use crate::workloads::invariant::{must_hit, Must};
use crate::workloads::layout::{acc, r, w};
use crate::workloads::tpcc::random::TpccRand as Rand;
use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;

use schema::{
    address as ad, broker as br, cash_transaction as ct, company as co, customer as cu,
    customer_account as ca, daily_market as dm, exchange as ex, holding as ho,
    holding_history as hh, holding_summary as hs, industry as ind, last_trade as lt,
    news_item as ni, security as se, settlement as sm, status_type as sty, taxrate as txr,
    trade as tr, trade_request as rq, trade_type as tty,
};

/// The transaction types, in [`Procedure::txn_type`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Clause 3.3.1.
    BrokerVolume,
    /// Clause 3.3.2.
    CustomerPosition,
    /// Clause 3.3.3.
    MarketFeed,
    /// Clause 3.3.4.
    MarketWatch,
    /// Clause 3.3.5.
    SecurityDetail,
    /// Clause 3.3.6.
    TradeLookup,
    /// Clause 3.3.7.
    TradeOrder,
    /// Clause 3.3.8.
    TradeResult,
    /// Clause 3.3.9.
    TradeStatus,
    /// Clause 3.3.10.
    TradeUpdate,
    /// Clause 3.3.11: once a minute, on the first worker.
    DataMaintenance,
    /// Clause 3.3.12: once, first, on the first worker.
    TradeCleanup,
    /// Not in TPC-E: ERMIA's read-mostly analytic transaction (`--tpce-analytic`).
    Analytic,
}

impl Kind {
    /// Every kind, in mix order.
    pub const ALL: [Kind; 10] = [
        Kind::BrokerVolume,
        Kind::CustomerPosition,
        Kind::MarketFeed,
        Kind::MarketWatch,
        Kind::SecurityDetail,
        Kind::TradeLookup,
        Kind::TradeOrder,
        Kind::TradeResult,
        Kind::TradeStatus,
        Kind::TradeUpdate,
    ];
}

/// One TPC-E transaction: the generator overwrites the fields its kind uses. Buffers live here
/// so that running allocates nothing once they have grown.
#[derive(Debug)]
pub struct TpceTxn {
    /// Which transaction.
    pub kind: Kind,
    /// The customer (Customer-Position, Market-Watch by watch list, Trade-Order's owner).
    pub c: u64,
    /// Customer-Position: select the customer by tax id.
    pub by_tax_id: bool,
    /// The account.
    pub ca: u64,
    /// The security.
    pub s: u32,
    /// Broker-Volume's brokers, Market-Watch's industry companies' first id.
    pub brokers: Vec<u32>,
    /// Broker-Volume's sector, Market-Watch's industry.
    pub group: u32,
    /// Which frame or selection (Trade-Lookup and Trade-Update: 1 to 4; Market-Watch: 0 by
    /// account, 1 by watch list, 2 by industry; Customer-Position: 1 with history).
    pub frame: u32,
    /// A day of the daily market.
    pub day: u32,
    /// Rows to return (Security-Detail, Trade-Lookup, Trade-Update).
    pub max_rows: u32,
    /// Security-Detail reads the news' large objects.
    pub lob: bool,
    /// A time range (seconds).
    pub from: i64,
    /// Its end.
    pub to: i64,
    /// Trade-Order's and Trade-Result's trade.
    pub t: u64,
    /// Trade-Order: the trade type.
    pub trade_type: u32,
    /// Trade-Order: shares.
    pub qty: i32,
    /// Trade-Order: the limit price (market orders take the last trade's).
    pub price: i64,
    /// Trade-Order: LIFO.
    pub lifo: bool,
    /// Trade-Order: on margin.
    pub margin: bool,
    /// Trade-Order: rolls back on purpose (1 %).
    pub roll_back: bool,
    /// Trade-Order: the executor is the n-th permission of the account (0: the owner).
    pub executor: u32,
    /// Trade-Order: the security is given by its company's name and its issue (40 %), not
    /// by its symbol.
    pub by_name: bool,
    /// A company: Trade-Order's by name (with the issue, `s` is that security), Market-Watch's
    /// first of the companies it looks through for its industry, Data-Maintenance's.
    pub co: u32,
    /// Trade-Order by name: the issue's number ([`schema::ISSUES`]).
    pub issue: u32,
    /// The time of the transaction (seconds).
    pub now: i64,
    /// Market-Watch: companies and securities in the database (for the industry selection).
    pub companies: u32,
    /// Its securities.
    pub securities: u32,
    /// Market-Feed's tickers: security and shares.
    pub tickers: Vec<(u32, i32)>,
    /// Trade-Order's market order, submitted to the market when it commits.
    pub(super) submitted: Cell<Option<Ready>>,
    /// Market-Feed's triggered limit orders.
    pub(super) triggered: RefCell<Vec<Ready>>,
    /// A fold of every output value.
    output: Cell<u64>,
    keys: RefCell<Vec<(u64, u64)>>,
    lots: RefCell<Vec<Lot>>,
    changes: RefCell<Vec<LotChange>>,
}

impl Default for TpceTxn {
    fn default() -> Self {
        Self::new()
    }
}

impl TpceTxn {
    /// An empty transaction.
    pub fn new() -> Self {
        TpceTxn {
            kind: Kind::TradeStatus,
            c: 0,
            by_tax_id: false,
            ca: 0,
            s: 0,
            brokers: Vec::with_capacity(40),
            group: 0,
            frame: 1,
            day: 0,
            max_rows: 20,
            lob: false,
            from: 0,
            to: 0,
            t: 0,
            trade_type: 0,
            qty: 100,
            price: 0,
            lifo: false,
            margin: false,
            roll_back: false,
            executor: 0,
            by_name: false,
            co: 0,
            issue: 0,
            now: 0,
            companies: 1,
            securities: 1,
            tickers: Vec::with_capacity(market::FEED_BATCH),
            submitted: Cell::new(None),
            triggered: RefCell::new(Vec::with_capacity(64)),
            output: Cell::new(0),
            keys: RefCell::new(Vec::with_capacity(256)),
            lots: RefCell::new(Vec::with_capacity(64)),
            changes: RefCell::new(Vec::with_capacity(64)),
        }
    }

    fn emit(&self, v: u64) {
        self.output.set(self.output.get().rotate_left(5) ^ v);
    }

    /// What the last committed run of a Trade-Order submitted to the market: its market
    /// order, or `None` for a limit order (or a rollback).
    pub fn submitted(&self) -> Option<Ready> {
        self.submitted.get()
    }

    /// The limit orders the last run of a Market-Feed triggered.
    pub fn triggered(&self) -> Vec<Ready> {
        self.triggered.borrow().clone()
    }

    /// The fold of the outputs of the last run (for tests).
    pub fn output(&self) -> u64 {
        self.output.get()
    }
}

// ---- Inputs --------------------------------------------------------------------------------

/// What a generator lends the input functions.
pub struct Input<'a> {
    /// Its random stream.
    pub rng: &'a mut Rand,
    /// The configuration.
    pub cfg: &'a TpceConfig,
    /// The time now.
    pub now: i64,
    /// When the initial trade history ended.
    pub load_time: i64,
}

impl Input<'_> {
    fn customer(&mut self) -> u64 {
        u64::from(self.rng.uniform(0, self.cfg.customers - 1))
    }
    fn account(&mut self, c: u64) -> u64 {
        let (_, n) = load::accounts_of(self.cfg.seed, c);
        c * u64::from(schema::MAX_ACCOUNTS) + u64::from(self.rng.uniform(0, n - 1))
    }
    fn security(&mut self) -> u32 {
        self.rng.uniform(0, self.cfg.security_choices() - 1)
    }
    /// A time range inside the initial trade history and the run so far.
    fn range(&mut self, t: &mut TpceTxn) {
        let start = self.load_time - (i64::from(self.cfg.trade_days) * load::DAY_SECONDS as i64);
        let span = (self.now - start).max(1);
        t.from = start + self.rng.uniform64(0, span - 1);
        t.to = t.from + self.rng.uniform64(1, span);
    }
}

/// Fills `t` with the customer emulator's inputs for `kind` (not Trade-Order, Trade-Result or
/// Market-Feed).
pub fn fill_customer(t: &mut TpceTxn, i: &mut Input<'_>, kind: Kind) {
    t.kind = kind;
    t.now = i.now;
    match kind {
        Kind::BrokerVolume => {
            let n = i.cfg.brokers();
            let want = i.rng.uniform(20, 40).min(n) as usize;
            t.brokers.clear();
            while t.brokers.len() < want {
                let b = i.rng.uniform(0, n - 1);
                if !t.brokers.contains(&b) {
                    t.brokers.push(b);
                }
            }
            t.group = i.rng.uniform(0, schema::SECTORS - 1);
        }
        Kind::CustomerPosition => {
            t.c = i.customer();
            t.by_tax_id = i.rng.uniform(1, 100) <= 50;
            t.frame = u32::from(i.rng.uniform(1, 100) <= 50);
            t.ca = i.account(t.c);
        }
        Kind::MarketWatch => {
            t.frame = match i.rng.uniform(1, 100) {
                1..=35 => 0,
                36..=95 => 1,
                _ => 2,
            };
            t.c = i.customer();
            t.ca = i.account(t.c);
            t.group = i.rng.uniform(0, schema::INDUSTRIES - 1);
            t.co = i.rng.uniform(0, i.cfg.companies() - 1);
            t.day = i.rng.uniform(0, schema::DAILY_MARKET_DAYS - 1);
            t.companies = i.cfg.companies();
            t.securities = i.cfg.securities();
        }
        Kind::SecurityDetail => {
            t.s = i.security();
            t.max_rows = i.rng.uniform(5, 20);
            t.day = i.rng.uniform(0, schema::DAILY_MARKET_DAYS - t.max_rows);
            t.lob = i.rng.uniform(1, 100) == 1;
        }
        Kind::TradeLookup | Kind::TradeUpdate => {
            t.frame = if kind == Kind::TradeLookup {
                match i.rng.uniform(1, 100) {
                    1..=30 => 1,
                    31..=60 => 2,
                    61..=90 => 3,
                    _ => 4,
                }
            } else {
                match i.rng.uniform(1, 100) {
                    1..=33 => 1,
                    34..=66 => 2,
                    _ => 3,
                }
            };
            let c = i.customer();
            t.ca = i.account(c);
            t.s = i.security();
            t.max_rows = 20;
            i.range(t);
        }
        Kind::TradeStatus => {
            let c = i.customer();
            t.ca = i.account(c);
        }
        Kind::TradeOrder
        | Kind::TradeResult
        | Kind::MarketFeed
        | Kind::DataMaintenance
        | Kind::TradeCleanup
        | Kind::Analytic => unreachable!("filled by their own functions"),
    }
}

/// Fills `t` with a Trade-Order of trade `id` (clause 4: 60 % market orders, 40 % limit
/// orders; 8 % on margin; 1 % rolled back).
pub fn fill_trade_order(t: &mut TpceTxn, i: &mut Input<'_>, id: u64) {
    t.kind = Kind::TradeOrder;
    t.now = i.now;
    t.c = i.customer();
    t.ca = i.account(t.c);
    t.s = i.security();
    t.t = id;
    t.trade_type = match i.rng.uniform(1, 100) {
        1..=30 => tt::MARKET_BUY,
        31..=60 => tt::MARKET_SELL,
        61..=80 => tt::LIMIT_BUY,
        81..=90 => tt::LIMIT_SELL,
        _ => tt::STOP_LOSS,
    };
    t.qty = [100, 200, 400, 800][i.rng.below(4)];
    // A limit within 20 % of the price the market will show.
    t.price = market::price(t.s, i.now) * i64::from(i.rng.uniform(80, 120)) / 100;
    t.lifo = i.rng.uniform(1, 100) <= load::LIFO_PERCENT;
    t.margin = i.rng.uniform(1, 100) > load::CASH_PERCENT;
    t.roll_back = i.rng.uniform(1, 100) == 1;
    t.executor = if i.rng.uniform(1, 100) <= 90 { 0 } else { i.rng.uniform(1, 2) };
    t.by_name = i.rng.uniform(1, 100) <= 40;
    t.co = t.s % i.cfg.companies();
    t.issue = t.s / i.cfg.companies();
}

/// Fills `t` with the Trade-Cleanup that starts a run: it cancels every pending order and
/// every submitted trade of earlier runs.
pub fn fill_trade_cleanup(t: &mut TpceTxn, now: i64) {
    t.kind = Kind::TradeCleanup;
    t.now = now;
    t.t = schema::RUN_TRADES;
}

/// The tables Data-Maintenance takes in turn (clause 3.3.11).
pub const MAINTAINED_TABLES: u32 = 12;

/// Fills `t` with a Data-Maintenance of table `round` (of [`MAINTAINED_TABLES`]).
pub fn fill_data_maintenance(t: &mut TpceTxn, i: &mut Input<'_>, round: u32) {
    t.kind = Kind::DataMaintenance;
    t.now = i.now;
    t.frame = round;
    t.c = i.customer();
    t.ca = i.account(t.c);
    t.s = i.security();
    t.co = i.rng.uniform(0, i.cfg.companies() - 1);
    t.day = i.rng.uniform(1, 31);
    t.group = i.rng.uniform(0, schema::TAXRATES - 1);
    t.qty = i.rng.uniform(1, 100) as i32;
    t.companies = i.cfg.companies();
    t.securities = i.cfg.securities();
}

/// Fills `t` with an analytic transaction keyed `key`, valuing the accounts of a random
/// group of customers.
pub fn fill_analytic(t: &mut TpceTxn, i: &mut Input<'_>, key: u64) {
    let a = i.cfg.analytic.expect("analytic transactions are configured");
    let n = a.customers(i.cfg.customers);
    t.kind = Kind::Analytic;
    t.now = i.now;
    t.c = u64::from(i.rng.uniform(0, i.cfg.customers - n));
    t.group = n;
    t.t = key;
    t.securities = i.cfg.securities();
}

/// Fills `t` with the Trade-Result of the trade the market executes.
pub fn fill_trade_result(t: &mut TpceTxn, r: Ready, now: i64) {
    t.kind = Kind::TradeResult;
    t.now = now;
    t.t = r.trade;
    t.s = r.security;
    t.qty = r.qty;
}

/// Fills `t` (whose tickers the market set) with a Market-Feed.
pub fn fill_market_feed(t: &mut TpceTxn, now: i64) {
    t.kind = Kind::MarketFeed;
    t.now = now;
}

// ---- Templates -----------------------------------------------------------------------------
//
// Column-level, as TPC-C's: each operation reads (`read_cols`) and writes (`update_cols`) the
// columns named here and its piece declares the same masks, so that IC3's analysis sees a
// conflict only where a write meets a read or a write of the same column, and the run-time
// template check holds the bodies to them. Scans, inserts and deletes touch whole rows; the
// secondary indexes' rows (a key and one or two columns) are read whole.

/// Reads of the account's owner, broker and tax status (never written by a transaction).
const CA_OWNER: Columns = ca::mask(&[ca::CA_B_ID, ca::CA_C_ID, ca::CA_TAX_ST]);
/// The account's balance: Trade-Result's frame 6 changes it.
const CA_BAL: Columns = ca::mask(&[ca::CA_BAL]);
const BR_NAME: Columns = br::mask(&[br::B_NAME]);
const BR_TOTALS: Columns = br::mask(&[br::B_NUM_TRADES, br::B_COMM_TOTAL]);
const CU_TIER: Columns = cu::mask(&[cu::C_TIER]);
const CU_NAME: Columns = cu::mask(&[cu::C_L_NAME]);
const SE_CO: Columns = se::mask(&[se::S_CO_ID]);
const SE_EX: Columns = se::mask(&[se::S_EX_ID]);
const SE_EX_CO: Columns = se::mask(&[se::S_EX_ID, se::S_CO_ID]);
const SE_OUT: Columns = se::mask(&[se::S_NUM_OUT]);
const SE_DETAIL: Columns = se::mask(&[se::S_CO_ID, se::S_EX_ID, se::S_NAME]);
const CO_NAME: Columns = co::mask(&[co::CO_NAME]);
const CO_IN: Columns = co::mask(&[co::CO_IN_ID]);
const CO_AD: Columns = co::mask(&[co::CO_AD_ID]);
const IN_SC: Columns = ind::mask(&[ind::IN_SC_ID]);
const IN_NAME: Columns = ind::mask(&[ind::IN_NAME]);
const LT_PRICE: Columns = lt::mask(&[lt::LT_PRICE]);
/// Market-Feed's ticker: it adds to the volume and sets the price and time.
const MF_LT_W: Columns = lt::mask(&[lt::LT_PRICE, lt::LT_VOL, lt::LT_DTS]);
const DM_CLOSE: Columns = dm::mask(&[dm::DM_CLOSE]);
const TT_KIND: Columns = tty::mask(&[tty::TT_IS_MRKT, tty::TT_IS_SELL]);
const TT_NAME: Columns = tty::mask(&[tty::TT_NAME]);
const ST_NAME: Columns = sty::mask(&[sty::ST_NAME]);
const EX_AD: Columns = ex::mask(&[ex::EX_AD_ID]);
const EX_NAME: Columns = ex::mask(&[ex::EX_NAME]);
const AD_ZIP: Columns = ad::mask(&[ad::AD_ZC_CODE]);
const ZC_TOWN: Columns = schema::zip_code::mask(&[schema::zip_code::ZC_TOWN]);
const TX_RATE: Columns = txr::mask(&[txr::TX_RATE]);
const CR_RATE: Columns = schema::commission_rate::mask(&[schema::commission_rate::CR_RATE]);
const CH_CHRG: Columns = schema::charge::mask(&[schema::charge::CH_CHRG]);
const HS_QTY: Columns = hs::mask(&[hs::HS_QTY]);
const HS_QTY_NEXT: Columns = hs::mask(&[hs::HS_QTY, hs::HS_NEXT]);
/// Trade-Lookup's frame 4 (which also scans the table).
const HH_AFTER: Columns = hh::mask(&[hh::HH_AFTER_QTY]);
/// Trade-Result's lot update: the quantity and the count of history rows.
const HO_LOT_W: Columns = ho::mask(&[ho::H_QTY, ho::H_HIST_N]);
/// What Customer-Position's frame 2 shows of a trade.
const TR_SHOWN: Columns = tr::mask(&[tr::T_S_SYMB, tr::T_QTY]);
/// What Trade-Status shows of a trade.
const TR_STATUS: Columns =
    tr::mask(&[tr::T_ST_ID, tr::T_TT_ID, tr::T_S_SYMB, tr::T_EXEC_NAME, tr::T_CHRG]);
/// What the trade-detail frames (Trade-Lookup, Trade-Update) read of a trade.
const TR_DETAIL: Columns = tr::mask(&[tr::T_IS_CASH, tr::T_TRADE_PRICE, tr::T_BID_PRICE]);
/// Trade-Update's frame 1 edit.
const TR_EXEC: Columns = tr::mask(&[tr::T_EXEC_NAME]);
/// What Trade-Result's frame 1 reads of the trade it executes.
const TR_ORDER: Columns = tr::mask(&[
    tr::T_CA_ID,
    tr::T_TT_ID,
    tr::T_S_SYMB,
    tr::T_QTY,
    tr::T_CHRG,
    tr::T_LIFO,
    tr::T_IS_CASH,
    tr::T_ST_ID,
]);
/// Trade-Result's frame 5: the trade completed.
const TR_RESULT: Columns =
    tr::mask(&[tr::T_COMM, tr::T_DTS, tr::T_ST_ID, tr::T_TRADE_PRICE, tr::T_TAX]);
/// A status change (Market-Feed's submission, Trade-Cleanup's cancellation).
const TR_STATE: Columns = tr::mask(&[tr::T_ST_ID, tr::T_DTS]);
const SE_AMT: Columns = sm::mask(&[sm::SE_AMT]);
const SE_CASH_TYPE: Columns = sm::mask(&[sm::SE_CASH_TYPE]);
const CT_AMT: Columns = ct::mask(&[ct::CT_AMT]);
const CT_NAME: Columns = ct::mask(&[ct::CT_NAME]);
/// Security-Detail's news: the summary (99 %) or the large object (1 %), with the metadata.
const NI_SUMMARY: Columns =
    ni::mask(&[ni::NI_HEADLINE, ni::NI_SUMMARY, ni::NI_DTS, ni::NI_SOURCE, ni::NI_AUTHOR]);
const NI_LOB: Columns = ni::mask(&[ni::NI_ITEM, ni::NI_DTS, ni::NI_SOURCE, ni::NI_AUTHOR]);
// Data-Maintenance's edits, one column per table.
const DM_AP: Columns = schema::account_permission::mask(&[schema::account_permission::AP_ACL]);
const DM_AD: Columns = ad::mask(&[ad::AD_LINE2]);
const DM_CO: Columns = co::mask(&[co::CO_SP_RATE]);
const DM_CU: Columns = cu::mask(&[cu::C_EMAIL_2]);
const DM_CX: Columns = schema::customer_taxrate::mask(&[schema::customer_taxrate::CX_TX_ID]);
const DM_DM: Columns = dm::mask(&[dm::DM_VOL]);
const DM_EX: Columns = ex::mask(&[ex::EX_DESC]);
const DM_FI: Columns = schema::financial::mask(&[schema::financial::FI_QTR_START_DATE]);
const DM_NI: Columns = ni::mask(&[ni::NI_DTS]);
const DM_SE: Columns = se::mask(&[se::S_EXCH_DATE]);
const DM_TX: Columns = txr::mask(&[txr::TX_NAME]);

/// A whole-row read: a scan, or a row read whole.
const fn ra(table: TableId) -> TableAccess {
    r(table, ALL_COLUMNS)
}
/// A whole-row write: an insert or a delete.
const fn wa(table: TableId) -> TableAccess {
    w(table, ALL_COLUMNS)
}

/// What every trade-detail frame reads for a trade (Trade-Lookup, Trade-Update).
const TRADE_DETAILS: [TableAccess; 5] = [
    ra(TRADE_BY_ACCOUNT),
    r(TRADE, TR_DETAIL),
    r(SETTLEMENT, SE_AMT),
    r(CASH_TRANSACTION, CT_AMT),
    ra(TRADE_HISTORY),
];

static BROKER_VOLUME: [Piece; 1] = [Piece {
    name: "frame1",
    accesses: &[
        r(BROKER, BR_NAME),
        ra(TRADE_REQUEST_BY),
        r(SECURITY, SE_CO),
        r(COMPANY, CO_IN),
        r(INDUSTRY, IN_SC),
    ],
}];
static CUSTOMER_POSITION: [Piece; 2] = [
    Piece {
        name: "frame1",
        accesses: &[
            ra(CUSTOMER_BY_TAX),
            r(CUSTOMER, CU_TIER),
            ra(CUSTOMER_ACCOUNT),
            ra(HOLDING_SUMMARY),
            r(LAST_TRADE, LT_PRICE),
        ],
    },
    Piece {
        name: "frame2",
        accesses: &[
            ra(TRADE_BY_ACCOUNT),
            r(TRADE, TR_SHOWN),
            ra(TRADE_HISTORY),
            r(STATUS_TYPE, ST_NAME),
        ],
    },
];
static MARKET_FEED: [Piece; 1] = [Piece {
    name: "frame1",
    accesses: &[
        w(LAST_TRADE, MF_LT_W),
        wa(TRADE_REQUEST),
        wa(TRADE_REQUEST_BY),
        w(TRADE, TR_STATE),
        wa(TRADE_HISTORY),
    ],
}];
static MARKET_WATCH: [Piece; 1] = [Piece {
    name: "frame1",
    accesses: &[
        ra(WATCH_ITEM),
        ra(HOLDING_SUMMARY),
        r(COMPANY, CO_IN),
        r(LAST_TRADE, LT_PRICE),
        r(SECURITY, SE_OUT),
        r(DAILY_MARKET, DM_CLOSE),
    ],
}];
static SECURITY_DETAIL: [Piece; 1] = [Piece {
    name: "frame1",
    accesses: &[
        r(SECURITY, SE_DETAIL),
        r(COMPANY, CO_AD | CO_IN),
        r(ADDRESS, AD_ZIP),
        r(ZIP_CODE, ZC_TOWN),
        r(EXCHANGE, EX_AD),
        ra(COMPANY_COMPETITOR),
        r(INDUSTRY, IN_NAME),
        ra(FINANCIAL),
        ra(DAILY_MARKET),
        r(LAST_TRADE, LT_PRICE),
        ra(NEWS_XREF),
        r(NEWS_ITEM, NI_SUMMARY | NI_LOB),
    ],
}];
static TRADE_LOOKUP: [Piece; 4] = [
    Piece { name: "frame1", accesses: &TRADE_DETAILS },
    Piece { name: "frame2", accesses: &TRADE_DETAILS },
    Piece {
        name: "frame3",
        accesses: &[
            ra(TRADE_BY_SECURITY),
            r(TRADE, TR_DETAIL),
            r(SETTLEMENT, SE_AMT),
            r(CASH_TRANSACTION, CT_AMT),
            ra(TRADE_HISTORY),
        ],
    },
    Piece {
        name: "frame4",
        accesses: &[ra(TRADE_BY_ACCOUNT), ra(HOLDING_HISTORY), ra(HOLDING_HISTORY_BY)],
    },
];
static TRADE_ORDER: [Piece; 4] = [
    Piece {
        name: "frame1",
        accesses: &[r(CUSTOMER_ACCOUNT, CA_OWNER), r(CUSTOMER, CU_NAME), r(BROKER, BR_NAME)],
    },
    Piece { name: "frame2", accesses: &[ra(ACCOUNT_PERMISSION)] },
    Piece {
        name: "frame3",
        accesses: &[
            ra(COMPANY_BY_NAME),
            ra(SECURITY_BY_COMPANY),
            r(SECURITY, SE_EX_CO),
            r(COMPANY, CO_NAME),
            r(LAST_TRADE, LT_PRICE),
            r(TRADE_TYPE, TT_KIND),
            r(HOLDING_SUMMARY, HS_QTY),
            ra(HOLDING),
            r(CUSTOMER, CU_TIER),
            r(CUSTOMER_ACCOUNT, CA_BAL),
            ra(CUSTOMER_TAXRATE),
            r(TAXRATE, TX_RATE),
            r(COMMISSION_RATE, CR_RATE),
            r(CHARGE, CH_CHRG),
        ],
    },
    Piece {
        name: "frame4",
        accesses: &[
            wa(TRADE),
            wa(TRADE_BY_ACCOUNT),
            wa(TRADE_BY_SECURITY),
            wa(TRADE_REQUEST),
            wa(TRADE_REQUEST_BY),
            wa(TRADE_HISTORY),
        ],
    },
];
static TRADE_RESULT: [Piece; 6] = [
    Piece {
        name: "frame1",
        accesses: &[r(TRADE, TR_ORDER), r(TRADE_TYPE, TT_NAME), r(HOLDING_SUMMARY, HS_QTY_NEXT)],
    },
    Piece {
        name: "frame2",
        accesses: &[
            r(CUSTOMER_ACCOUNT, CA_OWNER),
            wa(HOLDING),
            wa(HOLDING_HISTORY),
            wa(HOLDING_HISTORY_BY),
            wa(HOLDING_SUMMARY),
        ],
    },
    Piece { name: "frame3", accesses: &[ra(CUSTOMER_TAXRATE), r(TAXRATE, TX_RATE)] },
    Piece {
        name: "frame4",
        accesses: &[r(SECURITY, SE_EX), r(CUSTOMER, CU_TIER), r(COMMISSION_RATE, CR_RATE)],
    },
    Piece {
        name: "frame5",
        accesses: &[w(TRADE, TR_RESULT), wa(TRADE_HISTORY), acc(BROKER, BR_TOTALS)],
    },
    Piece {
        name: "frame6",
        accesses: &[wa(SETTLEMENT), w(CUSTOMER_ACCOUNT, CA_BAL), wa(CASH_TRANSACTION)],
    },
];
static TRADE_STATUS: [Piece; 1] = [Piece {
    name: "frame1",
    accesses: &[
        ra(TRADE_BY_ACCOUNT),
        r(TRADE, TR_STATUS),
        r(STATUS_TYPE, ST_NAME),
        r(TRADE_TYPE, TT_NAME),
        r(SECURITY, SE_EX),
        r(EXCHANGE, EX_NAME),
        r(CUSTOMER_ACCOUNT, CA_OWNER),
        r(CUSTOMER, CU_NAME),
        r(BROKER, BR_NAME),
    ],
}];
static TRADE_UPDATE: [Piece; 3] = [
    Piece {
        name: "frame1",
        accesses: &[
            ra(TRADE_BY_ACCOUNT),
            r(TRADE, TR_DETAIL),
            w(TRADE, TR_EXEC),
            r(SETTLEMENT, SE_AMT),
            r(CASH_TRANSACTION, CT_AMT),
            ra(TRADE_HISTORY),
        ],
    },
    Piece {
        name: "frame2",
        accesses: &[
            ra(TRADE_BY_ACCOUNT),
            r(TRADE, TR_DETAIL),
            r(SETTLEMENT, SE_AMT),
            w(SETTLEMENT, SE_CASH_TYPE),
            r(CASH_TRANSACTION, CT_AMT),
            ra(TRADE_HISTORY),
        ],
    },
    Piece {
        name: "frame3",
        accesses: &[
            ra(TRADE_BY_SECURITY),
            r(TRADE, TR_DETAIL),
            r(SETTLEMENT, SE_AMT),
            r(CASH_TRANSACTION, CT_AMT),
            w(CASH_TRANSACTION, CT_NAME),
            ra(TRADE_HISTORY),
        ],
    },
];

static DATA_MAINTENANCE: [Piece; 1] = [Piece {
    name: "frame1",
    accesses: &[
        w(ACCOUNT_PERMISSION, DM_AP),
        w(ADDRESS, DM_AD),
        w(COMPANY, DM_CO),
        w(CUSTOMER, DM_CU),
        w(CUSTOMER_TAXRATE, DM_CX),
        w(DAILY_MARKET, DM_DM),
        w(EXCHANGE, DM_EX),
        w(FINANCIAL, DM_FI),
        ra(NEWS_XREF),
        w(NEWS_ITEM, DM_NI),
        w(SECURITY, DM_SE),
        w(TAXRATE, DM_TX),
        wa(WATCH_ITEM),
    ],
}];
static TRADE_CLEANUP: [Piece; 1] = [Piece {
    name: "frame1",
    accesses: &[
        wa(TRADE_REQUEST),
        wa(TRADE_REQUEST_BY),
        ra(TRADE),
        w(TRADE, TR_STATE),
        wa(TRADE_HISTORY),
    ],
}];
static ANALYTIC: [Piece; 3] = [
    Piece { name: "accounts", accesses: &[ra(CUSTOMER_ACCOUNT)] },
    Piece { name: "holdings", accesses: &[ra(HOLDING_SUMMARY), r(LAST_TRADE, LT_PRICE)] },
    Piece { name: "history", accesses: &[wa(ANALYTIC_HISTORY)] },
];

/// The transaction types, in [`Kind`] order. A workload without the analytic transaction
/// declares the first twelve.
pub static TYPES: [TxnType; 13] = [
    TxnType { name: "broker-volume", pieces: &BROKER_VOLUME },
    TxnType { name: "customer-position", pieces: &CUSTOMER_POSITION },
    TxnType { name: "market-feed", pieces: &MARKET_FEED },
    TxnType { name: "market-watch", pieces: &MARKET_WATCH },
    TxnType { name: "security-detail", pieces: &SECURITY_DETAIL },
    TxnType { name: "trade-lookup", pieces: &TRADE_LOOKUP },
    TxnType { name: "trade-order", pieces: &TRADE_ORDER },
    TxnType { name: "trade-result", pieces: &TRADE_RESULT },
    TxnType { name: "trade-status", pieces: &TRADE_STATUS },
    TxnType { name: "trade-update", pieces: &TRADE_UPDATE },
    TxnType { name: "data-maintenance", pieces: &DATA_MAINTENANCE },
    TxnType { name: "trade-cleanup", pieces: &TRADE_CLEANUP },
    TxnType { name: "analytic", pieces: &ANALYTIC },
];

// ---- Helpers -------------------------------------------------------------------------------

/// The first `n` bytes of a string column, as a number (for the output fold).
fn fold_str(b: &[u8]) -> u64 {
    b.iter().take(8).fold(0u64, |a, &x| a << 8 | u64::from(x))
}

/// The id a by-name or by-company index entry holds.
fn read_id(r: &[u8]) -> u64 {
    u64::from_le_bytes(r[..8].try_into().expect("8-byte id"))
}

/// The number a two-digit id column spells (industries, sectors).
fn two_digits(b: &[u8]) -> u32 {
    u32::from(b[0].wrapping_sub(b'0')) * 10 + u32::from(b[1].wrapping_sub(b'0'))
}

/// The exchange number of an `EX_ID` column.
fn exchange_index(b: &[u8]) -> u32 {
    schema::EXCHANGE_IDS
        .iter()
        .position(|e| b.starts_with(e.as_bytes()) && b.get(e.len()).is_none_or(|&c| c == 0))
        .unwrap_or(0) as u32
}

/// Whether a pending order of type `kind` with bid `bid` triggers at `price` (clause
/// 3.3.3's frame 1).
pub fn triggers(kind: u32, bid: i64, price: i64) -> bool {
    match kind {
        tt::STOP_LOSS => bid >= price,
        tt::LIMIT_SELL => bid <= price,
        tt::LIMIT_BUY => bid >= price,
        _ => false,
    }
}

// ---- Bodies --------------------------------------------------------------------------------

impl Procedure for TpceTxn {
    fn txn_type(&self) -> usize {
        self.kind as usize
    }

    #[inline]
    fn read_only(&self) -> bool {
        !matches!(
            self.kind,
            Kind::MarketFeed
                | Kind::TradeOrder
                | Kind::TradeResult
                | Kind::TradeUpdate
                | Kind::DataMaintenance
                | Kind::TradeCleanup
                | Kind::Analytic
        )
    }

    /// The analytic transaction, as ERMIA's read-mostly transaction: its one insert keeps it
    /// off the read-only path.
    #[inline]
    fn read_mostly(&self) -> bool {
        self.kind == Kind::Analytic
    }

    /// Every type declares by a dry run of its body (see `engine::dry_run`): TPC-E's keys
    /// depend on data all through its frames (an account's trades, a position's holdings, the
    /// requests a price triggers).
    fn declare<R: Recon>(&self, recon: &R, set: &mut AccessSet) -> bool {
        declare_by_dry_run(self, &TYPES[self.kind as usize], recon, set)
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        self.output.set(0);
        match self.kind {
            Kind::BrokerVolume => self.broker_volume(tx),
            Kind::CustomerPosition => self.customer_position(tx),
            Kind::MarketFeed => self.market_feed(tx),
            Kind::MarketWatch => self.market_watch(tx),
            Kind::SecurityDetail => self.security_detail(tx),
            Kind::TradeLookup => self.trade_lookup(tx),
            Kind::TradeOrder => self.trade_order(tx),
            Kind::TradeResult => self.trade_result(tx),
            Kind::TradeStatus => self.trade_status(tx),
            Kind::TradeUpdate => self.trade_update(tx),
            Kind::DataMaintenance => self.data_maintenance(tx),
            Kind::TradeCleanup => self.trade_cleanup(tx),
            Kind::Analytic => self.analytic(tx),
        }
    }
}

impl TpceTxn {
    fn broker_volume<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let mut fold = 0u64;
            for &b in &self.brokers {
                let name = tx.read_cols(BROKER, u64::from(b), BR_NAME, |r| {
                    fold_str(br::get(r, br::B_NAME))
                })?;
                let name = name.must()?;
                let mut keys = self.keys.borrow_mut();
                keys.clear();
                let (lo, hi) = (
                    key::trade_request_by(u64::from(b), 0),
                    key::trade_request_by(u64::from(b), (1 << 40) - 1),
                );
                tx.scan(TRADE_REQUEST_BY, lo, hi, usize::MAX, |_, r| {
                    use schema::trade_request_by::*;
                    let value = i64::from(i32(r, RB_QTY)) * i64(r, RB_BID_PRICE);
                    keys.push((u64::from(u32(r, RB_S)), value as u64));
                    ControlFlow::Continue(())
                })?;
                let mut volume = 0i64;
                for &(s, value) in keys.iter() {
                    let co =
                        tx.read_cols(SECURITY, s, SE_CO, |r| se::i64(r, se::S_CO_ID))?.must()?;
                    let industry = tx
                        .read_cols(COMPANY, co as u64, CO_IN, |r| {
                            two_digits(co::get(r, co::CO_IN_ID))
                        })?
                        .must()?;
                    let sector = tx
                        .read_cols(INDUSTRY, u64::from(industry), IN_SC, |r| {
                            two_digits(ind::get(r, ind::IN_SC_ID))
                        })?
                        .must()?;
                    if sector == self.group {
                        volume += value as i64;
                    }
                }
                fold = fold.rotate_left(7) ^ name ^ volume as u64;
            }
            self.emit(fold);
            Ok(())
        })
    }

    fn customer_position<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let c = tx.piece(0, |tx| {
            let c = if self.by_tax_id {
                tx.read(CUSTOMER_BY_TAX, load::tax_id_of(self.c), |r| {
                    u64::from_le_bytes(r[..8].try_into().expect("8 bytes"))
                })?
                .must()?
            } else {
                self.c
            };
            let tier = tx.read_cols(CUSTOMER, c, CU_TIER, |r| cu::u32(r, cu::C_TIER))?.must()?;
            let mut keys = self.keys.borrow_mut();
            keys.clear();
            let lo = c * u64::from(schema::MAX_ACCOUNTS);
            tx.scan(CUSTOMER_ACCOUNT, lo, lo + u64::from(schema::MAX_ACCOUNTS) - 1, 10, |k, r| {
                keys.push((k, ca::i64(r, ca::CA_BAL) as u64));
                ControlFlow::Continue(())
            })?;
            let mut fold = u64::from(tier);
            for &(account, bal) in keys.iter() {
                let mut holdings = [(0u32, 0i32); 64];
                let mut n = 0;
                let (lo, hi) = (
                    key::holding_summary(account, 0),
                    key::holding_summary(account, (1 << 22) - 1),
                );
                tx.scan(HOLDING_SUMMARY, lo, hi, usize::MAX, |k, r| {
                    if n < holdings.len() {
                        holdings[n] = ((k & ((1 << 22) - 1)) as u32, hs::i32(r, hs::HS_QTY));
                        n += 1;
                    }
                    ControlFlow::Continue(())
                })?;
                let mut assets = 0i64;
                for &(s, qty) in &holdings[..n] {
                    let price = tx
                        .read_cols(LAST_TRADE, u64::from(s), LT_PRICE, |r| {
                            lt::i64(r, lt::LT_PRICE)
                        })?
                        .must()?;
                    assets += i64::from(qty) * price;
                }
                fold = fold.rotate_left(5) ^ bal ^ assets as u64;
            }
            self.emit(fold);
            Ok(c)
        })?;
        if self.frame == 0 {
            return Ok(());
        }
        let _ = c;
        tx.piece(1, |tx| {
            let last = self.last_trades(tx, self.ca, 10)?;
            let mut fold = 0u64;
            for &(t, _) in last.iter() {
                let (sym, qty) = tx
                    .read_cols(TRADE, t, TR_SHOWN, |r| {
                        (fold_str(tr::get(r, tr::T_S_SYMB)), tr::i32(r, tr::T_QTY))
                    })?
                    .must()?;
                fold ^= sym ^ qty as u64;
                self.histories(tx, t, &mut fold, true)?;
            }
            self.emit(fold);
            Ok(())
        })
    }

    /// The last `n` trades of account `ca` in the by-account index (id and `TB_DTS`), oldest
    /// first, in `self.keys`.
    fn last_trades<'s, W: Worker>(
        &'s self,
        tx: &mut Tx<'_, W>,
        ca: u64,
        n: usize,
    ) -> Result<std::cell::Ref<'s, Vec<(u64, u64)>>, Abort> {
        {
            let mut keys = self.keys.borrow_mut();
            keys.clear();
            let (lo, hi) = (key::trade_account(ca, 0), key::trade_account(ca, (1 << 40) - 1));
            tx.scan(TRADE_BY_ACCOUNT, lo, hi, usize::MAX, |k, r| {
                keys.push((key::trade_of(k), u64::from_le_bytes(r[..8].try_into().expect("8"))));
                ControlFlow::Continue(())
            })?;
            let extra = keys.len().saturating_sub(n);
            keys.drain(..extra);
        }
        Ok(self.keys.borrow())
    }

    /// Folds trade `t`'s history rows (with their status names when `names`).
    fn histories<W: Worker>(
        &self,
        tx: &mut Tx<'_, W>,
        t: u64,
        fold: &mut u64,
        names: bool,
    ) -> Result<(), Abort> {
        let mut sts = [0u32; 8];
        let mut n = 0;
        tx.scan(TRADE_HISTORY, key::trade_history(t, 0), key::trade_history(t, 7), 8, |k, r| {
            sts[n] = (k & 7) as u32;
            n += 1;
            *fold ^= schema::trade_history::i64(r, schema::trade_history::TH_DTS) as u64;
            ControlFlow::Continue(())
        })?;
        if names {
            for &st in &sts[..n] {
                let name = tx.read_cols(STATUS_TYPE, u64::from(st), ST_NAME, |r| {
                    fold_str(sty::get(r, sty::ST_NAME))
                })?;
                *fold ^= name.must()?;
            }
        }
        Ok(())
    }

    fn market_feed<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let now = self.now;
        tx.piece(0, |tx| {
            let mut triggered = self.triggered.borrow_mut();
            triggered.clear();
            for &(s, qty) in &self.tickers {
                let price = market::price(s, now);
                tx.update_cols(LAST_TRADE, u64::from(s), 0, MF_LT_W, |r| {
                    lt::set_i64(r, lt::LT_PRICE, price);
                    lt::set_i64(r, lt::LT_VOL, lt::i64(r, lt::LT_VOL) + i64::from(qty));
                    lt::set_i64(r, lt::LT_DTS, now);
                })?
                .must()?;
                // The pending requests of the security whose price has come.
                let mut keys = self.keys.borrow_mut();
                keys.clear();
                let (lo, hi) = (key::trade_request(s, 0), key::trade_request(s, (1 << 40) - 1));
                tx.scan(TRADE_REQUEST, lo, hi, usize::MAX, |k, r| {
                    let kind = schema::trade_type_of(rq::get(r, rq::TR_TT_ID)).unwrap_or(0);
                    if triggers(kind, rq::i64(r, rq::TR_BID_PRICE), price) {
                        let qty = rq::i32(r, rq::TR_QTY) as u32;
                        keys.push((k, u64::from(qty) << 32 | rq::i64(r, rq::TR_B_ID) as u64));
                    }
                    ControlFlow::Continue(())
                })?;
                for &(k, packed) in keys.iter() {
                    let t = key::trade_of(k);
                    let (qty, b) = ((packed >> 32) as i32, packed & 0xFFFF_FFFF);
                    tx.update_cols(TRADE, t, 0, TR_STATE, |r| {
                        tr::set_i64(r, tr::T_DTS, now);
                        tr::set_str(
                            r,
                            tr::T_ST_ID,
                            &schema::STATUS_IDS[status::SUBMITTED as usize][..],
                        );
                    })?
                    .must()?;
                    must_hit(tx.delete(TRADE_REQUEST, k)?)?;
                    must_hit(tx.delete(TRADE_REQUEST_BY, key::trade_request_by(b, t))?)?;
                    must_hit(tx.insert(
                        TRADE_HISTORY,
                        key::trade_history(t, status::SUBMITTED),
                        &load::history_row(t, now, status::SUBMITTED),
                    )?)?;
                    triggered.push(Ready { trade: t, security: s, qty });
                }
            }
            self.emit(triggered.len() as u64);
            Ok(())
        })
    }

    fn market_watch<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let mut keys = self.keys.borrow_mut();
            keys.clear();
            match self.frame {
                0 => {
                    let (lo, hi) = (
                        key::holding_summary(self.ca, 0),
                        key::holding_summary(self.ca, (1 << 22) - 1),
                    );
                    tx.scan(HOLDING_SUMMARY, lo, hi, usize::MAX, |k, _| {
                        keys.push((k & ((1 << 22) - 1), 0));
                        ControlFlow::Continue(())
                    })?;
                }
                1 => {
                    let (lo, hi) =
                        (key::watch_item(self.c, 0), key::watch_item(self.c, (1 << 22) - 1));
                    tx.scan(WATCH_ITEM, lo, hi, usize::MAX, |k, _| {
                        keys.push((k & ((1 << 22) - 1), 0));
                        ControlFlow::Continue(())
                    })?;
                }
                _ => {
                    // The securities of the industry's companies among 100 from a first one.
                    let companies = u64::from(self.companies);
                    for co in u64::from(self.co)..(u64::from(self.co) + 100).min(companies) {
                        let industry = tx
                            .read_cols(COMPANY, co, CO_IN, |r| {
                                two_digits(co::get(r, co::CO_IN_ID))
                            })?
                            .must()?;
                        if industry == self.group {
                            let mut s = co;
                            while s < u64::from(self.securities) {
                                keys.push((s, 0));
                                s += companies;
                            }
                        }
                    }
                }
            }
            let (mut old, mut new) = (0i128, 0i128);
            for &(s, _) in keys.iter() {
                let price =
                    tx.read_cols(LAST_TRADE, s, LT_PRICE, |r| lt::i64(r, lt::LT_PRICE))?.must()?;
                let out =
                    tx.read_cols(SECURITY, s, SE_OUT, |r| se::i64(r, se::S_NUM_OUT))?.must()?;
                let close = tx
                    .read_cols(
                        DAILY_MARKET,
                        key::daily_market(s as u32, self.day),
                        DM_CLOSE,
                        |r| dm::i64(r, dm::DM_CLOSE),
                    )?
                    .must()?;
                old += i128::from(close) * i128::from(out);
                new += i128::from(price) * i128::from(out);
            }
            let pct = if old == 0 { 0 } else { (new - old) * 10_000 / old };
            self.emit(pct as u64);
            Ok(())
        })
    }

    fn security_detail<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let s = self.s;
        tx.piece(0, |tx| {
            let mut fold = 0u64;
            let (company, exchange, name) = tx
                .read_cols(SECURITY, u64::from(s), SE_DETAIL, |r| {
                    (
                        se::i64(r, se::S_CO_ID) as u64,
                        exchange_index(se::get(r, se::S_EX_ID)),
                        fold_str(se::get(r, se::S_NAME)),
                    )
                })?
                .must()?;
            fold ^= name;
            let ad = tx
                .read_cols(COMPANY, company, CO_AD, |r| co::i64(r, co::CO_AD_ID) as u64)?
                .must()?;
            let ex_ad = tx
                .read_cols(EXCHANGE, u64::from(exchange), EX_AD, |r| {
                    ex::i64(r, ex::EX_AD_ID) as u64
                })?
                .must()?;
            for a in [ad, ex_ad] {
                let zc = tx
                    .read_cols(ADDRESS, a, AD_ZIP, |r| {
                        let code = ad::get(r, ad::AD_ZC_CODE);
                        std::str::from_utf8(&code[..5]).ok().and_then(|t| t.parse::<u32>().ok())
                    })?
                    .must()?
                    .must()?;
                let zip = u64::from((zc - 10_000) / 6);
                fold ^= tx
                    .read_cols(ZIP_CODE, zip, ZC_TOWN, |r| {
                        fold_str(schema::zip_code::get(r, schema::zip_code::ZC_TOWN))
                    })?
                    .must()?;
            }
            let mut comps = [0u64; schema::COMPETITORS as usize];
            let mut n = 0;
            tx.scan(
                COMPANY_COMPETITOR,
                key::company_j(company, 0),
                key::company_j(company, 3),
                3,
                |_, r| {
                    comps[n] = schema::company_competitor::i64(
                        r,
                        schema::company_competitor::CP_COMP_CO_ID,
                    ) as u64;
                    n += 1;
                    ControlFlow::Continue(())
                },
            )?;
            for &cp in &comps[..n] {
                let industry = tx
                    .read_cols(COMPANY, cp, CO_IN, |r| two_digits(co::get(r, co::CO_IN_ID)))?
                    .must()?;
                fold ^= tx
                    .read_cols(INDUSTRY, u64::from(industry), IN_NAME, |r| {
                        fold_str(ind::get(r, ind::IN_NAME))
                    })?
                    .must()?;
            }
            tx.scan(
                FINANCIAL,
                key::financial(company, 0),
                key::financial(company, 31),
                20,
                |_, r| {
                    fold ^= schema::financial::i64(r, schema::financial::FI_REVENUE) as u64;
                    ControlFlow::Continue(())
                },
            )?;
            let (lo, hi) = (
                key::daily_market(s, self.day),
                key::daily_market(s, self.day + self.max_rows - 1),
            );
            tx.scan(DAILY_MARKET, lo, hi, self.max_rows as usize, |_, r| {
                fold ^= dm::i64(r, dm::DM_CLOSE) as u64;
                ControlFlow::Continue(())
            })?;
            fold ^= tx
                .read_cols(LAST_TRADE, u64::from(s), LT_PRICE, |r| lt::i64(r, lt::LT_PRICE) as u64)?
                .must()?;
            let mut news = [0u64; 2];
            let mut n = 0;
            tx.scan(
                NEWS_XREF,
                key::company_j(company, 0),
                key::company_j(company, 3),
                2,
                |_, r| {
                    news[n] = schema::news_xref::i64(r, schema::news_xref::NX_NI_ID) as u64;
                    n += 1;
                    ControlFlow::Continue(())
                },
            )?;
            // The large object only when asked for (1 %); otherwise its summary.
            let cols = if self.lob { NI_LOB } else { NI_SUMMARY };
            for &item in &news[..n] {
                let lob = self.lob;
                fold ^= tx
                    .read_cols(NEWS_ITEM, item, cols, |r| {
                        let body =
                            if lob { ni::get(r, ni::NI_ITEM) } else { ni::get(r, ni::NI_SUMMARY) };
                        fold_str(body) ^ ni::i64(r, ni::NI_DTS) as u64
                    })?
                    .must()?;
            }
            self.emit(fold);
            Ok(())
        })
    }

    /// The trades a Trade-Lookup or Trade-Update frame works on, into `self.keys` (id, 0):
    /// frame 1, the account's first `max_rows`; frame 2, the account's in the time range;
    /// frame 3, the security's in the time range.
    fn frame_trades<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let mut keys = self.keys.borrow_mut();
        keys.clear();
        let (table, lo, hi) = match self.frame {
            3 => (
                TRADE_BY_SECURITY,
                key::trade_security(self.s, 0),
                key::trade_security(self.s, (1 << 40) - 1),
            ),
            _ => (
                TRADE_BY_ACCOUNT,
                key::trade_account(self.ca, 0),
                key::trade_account(self.ca, (1 << 40) - 1),
            ),
        };
        let (from, to, max) = (self.from, self.to, self.max_rows as usize);
        let any_time = self.frame == 1;
        tx.scan(table, lo, hi, usize::MAX, |k, r| {
            let dts = i64::from_le_bytes(r[..8].try_into().expect("8 bytes"));
            if any_time || (from..=to).contains(&dts) {
                keys.push((key::trade_of(k), 0));
            }
            if keys.len() >= max {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        Ok(())
    }

    /// Folds what Trade-Lookup's and Trade-Update's frames 1 to 3 read of trade `t`: the
    /// trade, its settlement, its cash transaction (a cash trade) and its history.
    fn trade_details<W: Worker>(
        &self,
        tx: &mut Tx<'_, W>,
        t: u64,
        fold: &mut u64,
    ) -> Result<(), Abort> {
        let (cash, price, bid) = tx
            .read_cols(TRADE, t, TR_DETAIL, |r| {
                (
                    tr::u8(r, tr::T_IS_CASH) == 1,
                    tr::i64(r, tr::T_TRADE_PRICE),
                    tr::i64(r, tr::T_BID_PRICE),
                )
            })?
            .must()?;
        *fold ^= (price ^ bid) as u64;
        // A trade still pending or submitted has no settlement yet.
        if let Some(amt) = tx.read_cols(SETTLEMENT, t, SE_AMT, |r| sm::i64(r, sm::SE_AMT))? {
            *fold ^= amt as u64;
            if cash {
                *fold ^= tx
                    .read_cols(CASH_TRANSACTION, t, CT_AMT, |r| ct::i64(r, ct::CT_AMT) as u64)?
                    .must()?;
            }
        }
        self.histories(tx, t, fold, false)
    }

    fn trade_lookup<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let piece = self.frame as usize - 1;
        if self.frame == 4 {
            return tx.piece(piece, |tx| {
                // The account's first trade from the start time, and the history of every
                // holding that trade changed.
                let mut first = None;
                let from = self.from;
                let (lo, hi) =
                    (key::trade_account(self.ca, 0), key::trade_account(self.ca, (1 << 40) - 1));
                tx.scan(TRADE_BY_ACCOUNT, lo, hi, usize::MAX, |k, r| {
                    if i64::from_le_bytes(r[..8].try_into().expect("8 bytes")) >= from {
                        first = Some(key::trade_of(k));
                        return ControlFlow::Break(());
                    }
                    ControlFlow::Continue(())
                })?;
                let Some(t) = first else { return Ok(()) };
                let mut holdings = self.keys.borrow_mut();
                holdings.clear();
                tx.scan(
                    HOLDING_HISTORY,
                    key::holding_history(t, 0),
                    key::holding_history(t, (1 << 24) - 1),
                    20,
                    |_, r| {
                        holdings.push((
                            schema::holding_history::i64(r, schema::holding_history::HH_H_T_ID)
                                as u64,
                            0,
                        ));
                        ControlFlow::Continue(())
                    },
                )?;
                let mut fold = t;
                let mut shown = 0;
                for &(h, _) in holdings.iter() {
                    let mut rows = [0u64; 20];
                    let mut n = 0;
                    let lo = key::holding_history_by(h, 0);
                    tx.scan(HOLDING_HISTORY_BY, lo, lo + (1 << 24) - 1, 20 - shown, |_, r| {
                        use schema::holding_history_by::*;
                        rows[n] = key::holding_history(i64(r, HB_T_ID) as u64, u32(r, HB_K));
                        n += 1;
                        ControlFlow::Continue(())
                    })?;
                    for &k in &rows[..n] {
                        fold ^= tx
                            .read_cols(HOLDING_HISTORY, k, HH_AFTER, |r| {
                                hh::i32(r, hh::HH_AFTER_QTY) as u64
                            })?
                            .must()?;
                    }
                    shown += n;
                    if shown >= 20 {
                        break;
                    }
                }
                self.emit(fold);
                Ok(())
            });
        }
        tx.piece(piece, |tx| {
            self.frame_trades(tx)?;
            let keys = self.keys.borrow();
            let mut fold = 0;
            for &(t, _) in keys.iter() {
                self.trade_details(tx, t, &mut fold)?;
            }
            self.emit(fold);
            Ok(())
        })
    }

    fn trade_update<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(self.frame as usize - 1, |tx| {
            self.frame_trades(tx)?;
            let keys = self.keys.borrow();
            let mut fold = 0;
            for &(t, _) in keys.iter() {
                match self.frame {
                    1 => {
                        // Swap " X " and " " in the executor's name.
                        tx.update_cols(TRADE, t, 0, TR_EXEC, |r| {
                            let name = tr::get_mut(r, tr::T_EXEC_NAME);
                            swap_marker(name, b" X ", b" ");
                        })?
                        .must()?;
                    }
                    2 => {
                        tx.update_cols(SETTLEMENT, t, 0, SE_CASH_TYPE, |r| {
                            let kind = sm::get(r, sm::SE_CASH_TYPE);
                            let n = kind.iter().position(|&b| b == 0).unwrap_or(kind.len());
                            let next: &[u8] = match &kind[..n] {
                                b"Cash Account" => b"Cash",
                                b"Cash" => b"Cash Account",
                                b"Margin" => b"Margin Account",
                                _ => b"Margin",
                            };
                            sm::set_str(r, sm::SE_CASH_TYPE, next);
                        })?;
                    }
                    _ => {
                        tx.update_cols(CASH_TRANSACTION, t, 0, CT_NAME, |r| {
                            swap_marker(
                                ct::get_mut(r, ct::CT_NAME),
                                b" shares of ",
                                b" Shares of ",
                            );
                        })?;
                    }
                }
                self.trade_details(tx, t, &mut fold)?;
            }
            self.emit(fold);
            Ok(())
        })
    }

    fn trade_status<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let last = self.last_trades(tx, self.ca, 50)?;
            let mut fold = 0u64;
            for &(t, _) in last.iter() {
                let (st, kind, s, name) = tx
                    .read_cols(TRADE, t, TR_STATUS, |r| {
                        (
                            schema::status_of(tr::get(r, tr::T_ST_ID)).unwrap_or(0),
                            schema::trade_type_of(tr::get(r, tr::T_TT_ID)).unwrap_or(0),
                            schema::symbol_index(tr::get(r, tr::T_S_SYMB)).unwrap_or(0),
                            fold_str(tr::get(r, tr::T_EXEC_NAME)) ^ tr::i64(r, tr::T_CHRG) as u64,
                        )
                    })?
                    .must()?;
                fold ^= name;
                fold ^= tx
                    .read_cols(STATUS_TYPE, u64::from(st), ST_NAME, |r| {
                        fold_str(sty::get(r, sty::ST_NAME))
                    })?
                    .must()?;
                fold ^= Self::trade_type_name(tx, kind)?;
                let ex = tx
                    .read_cols(SECURITY, u64::from(s), SE_EX, |r| {
                        exchange_index(se::get(r, se::S_EX_ID))
                    })?
                    .must()?;
                fold ^= tx
                    .read_cols(EXCHANGE, u64::from(ex), EX_NAME, |r| {
                        fold_str(ex::get(r, ex::EX_NAME))
                    })?
                    .must()?;
            }
            drop(last);
            let (c, b, _) = Self::owner(tx, self.ca)?;
            fold ^= Self::names(tx, c, b)?;
            self.emit(fold);
            Ok(())
        })
    }

    fn trade_order<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        self.submitted.set(None);
        let (c, b, tax_status) = tx.piece(0, |tx| {
            let (c, b, tax_status) = Self::owner(tx, self.ca)?;
            self.emit(Self::names(tx, c, b)?);
            Ok((c, b, tax_status))
        })?;
        // Frame 2: an executor other than the owner must hold a permission on the account.
        let exec = tx.piece(1, |tx| {
            let mut names = [[0u8; 49]; 4];
            let mut n = 0;
            let lo = key::account_permission(self.ca, 0);
            tx.scan(ACCOUNT_PERMISSION, lo, lo + 15, 4, |_, r| {
                use schema::account_permission::*;
                let (f, l) = (get(r, AP_F_NAME), get(r, AP_L_NAME));
                let fl = f.iter().position(|&x| x == 0).unwrap_or(f.len());
                let ll = l.iter().position(|&x| x == 0).unwrap_or(l.len());
                names[n][..fl].copy_from_slice(&f[..fl]);
                names[n][fl] = b' ';
                names[n][fl + 1..fl + 1 + ll.min(48 - fl)].copy_from_slice(&l[..ll.min(48 - fl)]);
                n += 1;
                ControlFlow::Continue(())
            })?;
            if n == 0 {
                return Err(Abort::new(AbortReason::MissingRow));
            }
            Ok(names[self.executor as usize % n])
        })?;
        let s = self.s;
        let kind = self.trade_type;
        let (price, charge, comm) = tx.piece(2, |tx| {
            if self.by_name {
                // The security by its company's name and its issue.
                let mut name = [0u8; 60];
                let n = schema::company_name(self.co, &mut name);
                let co = tx.read(COMPANY_BY_NAME, schema::name_key(&name[..n]), read_id)?.must()?;
                let by = key::security_by_company(co, self.issue);
                let found = tx.read(SECURITY_BY_COMPANY, by, read_id)?.must()?;
                if found != u64::from(s) {
                    return Err(Abort::new(AbortReason::MissingRow));
                }
            }
            let (ex, co) = tx
                .read_cols(SECURITY, u64::from(s), SE_EX_CO, |r| {
                    (exchange_index(se::get(r, se::S_EX_ID)), se::i64(r, se::S_CO_ID) as u64)
                })?
                .must()?;
            let co_name = tx
                .read_cols(COMPANY, co, CO_NAME, |r| fold_str(co::get(r, co::CO_NAME)))?
                .must()?;
            let market_price = tx
                .read_cols(LAST_TRADE, u64::from(s), LT_PRICE, |r| lt::i64(r, lt::LT_PRICE))?
                .must()?;
            let (is_mrkt, is_sell) = tx
                .read_cols(TRADE_TYPE, u64::from(kind), TT_KIND, |r| {
                    (tty::u8(r, tty::TT_IS_MRKT) == 1, tty::u8(r, tty::TT_IS_SELL) == 1)
                })?
                .must()?;
            let price = if is_mrkt { market_price } else { self.price };
            let hs_qty = tx
                .read_cols(HOLDING_SUMMARY, key::holding_summary(self.ca, s), HS_QTY, |r| {
                    hs::i32(r, hs::HS_QTY)
                })?
                .unwrap_or(0);
            // Estimate the gain of the shares the trade would close (LIFO or FIFO).
            let mut gain = 0;
            if (is_sell && hs_qty > 0) || (!is_sell && hs_qty < 0) {
                let mut lots = self.lots.borrow_mut();
                Self::read_lots(tx, self.ca, s, &mut lots)?;
                let mut changes = self.changes.borrow_mut();
                let (_, buy, sold) =
                    market::trade_lots(&lots, is_sell, self.lifo, self.qty, price, &mut changes);
                gain = sold - buy;
            }
            let tier = tx.read_cols(CUSTOMER, c, CU_TIER, |r| cu::u32(r, cu::C_TIER))?.must()?;
            let mut rate = 0;
            if is_sell && tax_status != 0 && gain > 0 {
                rate = self.tax_rate(tx, c)?;
            }
            let comm_rate = Self::commission_rate(tx, tier, kind, ex, self.qty)?;
            let charge = tx
                .read_cols(CHARGE, key::charge(kind, tier), CH_CHRG, |r| {
                    schema::charge::i64(r, schema::charge::CH_CHRG)
                })?
                .must()?;
            let x = market::execute(
                market::Terms { kind, qty: self.qty, price, charge, commission_rate: comm_rate },
                gain,
                tax_status,
                rate,
            );
            if self.margin {
                // The account's assets: its balance and its holdings at market.
                let bal = Self::balance(tx, self.ca)?;
                self.emit(bal as u64);
            }
            self.emit(co_name ^ x.tax as u64);
            Ok((price, charge, x.commission))
        })?;
        let t = self.t;
        let now = self.now;
        let pending = !tt::is_market(kind);
        tx.piece(3, |tx| {
            use schema::trade::*;
            let mut row = [0u8; SIZE];
            let st = if pending { status::PENDING } else { status::SUBMITTED };
            set_i64(&mut row, T_ID, t as i64);
            set_i64(&mut row, T_DTS, now);
            set_str(&mut row, T_ST_ID, &schema::STATUS_IDS[st as usize][..]);
            set_str(&mut row, T_TT_ID, &schema::TRADE_TYPE_IDS[kind as usize][..]);
            set_u8(&mut row, T_IS_CASH, u8::from(!self.margin));
            set_str(&mut row, T_S_SYMB, &schema::symbol(s));
            set_i32(&mut row, T_QTY, self.qty);
            set_i64(&mut row, T_BID_PRICE, price);
            set_i64(&mut row, T_CA_ID, self.ca as i64);
            let n = exec.iter().position(|&x| x == 0).unwrap_or(exec.len());
            set_str(&mut row, T_EXEC_NAME, &exec[..n]);
            set_i64(&mut row, T_CHRG, charge);
            set_i64(&mut row, T_COMM, comm);
            set_u8(&mut row, T_LIFO, u8::from(self.lifo));
            must_hit(tx.insert(TRADE, t, &row)?)?;
            let by = now.to_le_bytes();
            must_hit(tx.insert(TRADE_BY_ACCOUNT, key::trade_account(self.ca, t), &by)?)?;
            must_hit(tx.insert(TRADE_BY_SECURITY, key::trade_security(s, t), &by)?)?;
            if pending {
                let mut row = [0u8; rq::SIZE];
                rq::set_i64(&mut row, rq::TR_T_ID, t as i64);
                rq::set_str(&mut row, rq::TR_TT_ID, &schema::TRADE_TYPE_IDS[kind as usize][..]);
                rq::set_str(&mut row, rq::TR_S_SYMB, &schema::symbol(s));
                rq::set_i32(&mut row, rq::TR_QTY, self.qty);
                rq::set_i64(&mut row, rq::TR_BID_PRICE, price);
                rq::set_i64(&mut row, rq::TR_B_ID, b as i64);
                must_hit(tx.insert(TRADE_REQUEST, key::trade_request(s, t), &row)?)?;
                use schema::trade_request_by as rb;
                let mut row = [0u8; rb::SIZE];
                rb::set_u32(&mut row, rb::RB_S, s);
                rb::set_i32(&mut row, rb::RB_QTY, self.qty);
                rb::set_i64(&mut row, rb::RB_BID_PRICE, price);
                must_hit(tx.insert(TRADE_REQUEST_BY, key::trade_request_by(b, t), &row)?)?;
            }
            must_hit(tx.insert(
                TRADE_HISTORY,
                key::trade_history(t, st),
                &load::history_row(t, now, st),
            )?)
        })?;
        // Frame 5: the 1 % the specification rolls back.
        if self.roll_back {
            return tx.user_abort();
        }
        if !pending {
            self.submitted.set(Some(Ready { trade: t, security: s, qty: self.qty }));
        }
        Ok(())
    }

    /// Account `ca`'s customer, broker and tax status.
    fn owner<W: Worker>(tx: &mut Tx<'_, W>, ca: u64) -> Result<(u64, u64, u32), Abort> {
        tx.read_cols(CUSTOMER_ACCOUNT, ca, CA_OWNER, |r| {
            (
                ca::i64(r, ca::CA_C_ID) as u64,
                ca::i64(r, ca::CA_B_ID) as u64,
                ca::u32(r, ca::CA_TAX_ST),
            )
        })?
        .must()
    }

    /// Account `ca`'s balance.
    fn balance<W: Worker>(tx: &mut Tx<'_, W>, ca: u64) -> Result<i64, Abort> {
        tx.read_cols(CUSTOMER_ACCOUNT, ca, CA_BAL, |r| ca::i64(r, ca::CA_BAL))?.must()
    }

    /// The customer's and the broker's names, folded.
    fn names<W: Worker>(tx: &mut Tx<'_, W>, c: u64, b: u64) -> Result<u64, Abort> {
        let name = tx.read_cols(CUSTOMER, c, CU_NAME, |r| fold_str(cu::get(r, cu::C_L_NAME)))?;
        let broker = tx.read_cols(BROKER, b, BR_NAME, |r| fold_str(br::get(r, br::B_NAME)))?;
        Ok(name.must()? ^ broker.must()?)
    }

    /// Trade type `kind`'s name, folded.
    fn trade_type_name<W: Worker>(tx: &mut Tx<'_, W>, kind: u32) -> Result<u64, Abort> {
        tx.read_cols(TRADE_TYPE, u64::from(kind), TT_NAME, |r| fold_str(tty::get(r, tty::TT_NAME)))?
            .must()
    }

    /// The commission rate of a trade (1/100 percent).
    fn commission_rate<W: Worker>(
        tx: &mut Tx<'_, W>,
        tier: u32,
        kind: u32,
        ex: u32,
        qty: i32,
    ) -> Result<u32, Abort> {
        let k = key::commission_rate(tier, kind, ex, schema::quantity_range(qty));
        tx.read_cols(COMMISSION_RATE, k, CR_RATE, |r| {
            schema::commission_rate::u32(r, schema::commission_rate::CR_RATE)
        })?
        .must()
    }

    /// Account `account`'s lots in security `s`, oldest first, into `lots`.
    fn read_lots<W: Worker>(
        tx: &mut Tx<'_, W>,
        account: u64,
        s: u32,
        lots: &mut Vec<Lot>,
    ) -> Result<(), Abort> {
        lots.clear();
        let (lo, hi) = (key::holding(account, s, 0), key::holding(account, s, 0xFFFF));
        tx.scan(HOLDING, lo, hi, usize::MAX, |k, r| {
            lots.push(Lot {
                trade: ho::i64(r, ho::H_T_ID) as u64,
                n: (k & 0xFFFF) as u32,
                price: ho::i64(r, ho::H_PRICE),
                qty: ho::i32(r, ho::H_QTY),
                dts: ho::i64(r, ho::H_DTS),
                hist: ho::u32(r, ho::H_HIST_N),
            });
            ControlFlow::Continue(())
        })?;
        Ok(())
    }

    /// Customer `c`'s tax rate: the sum of its tax rates' (1/10 000).
    fn tax_rate<W: Worker>(&self, tx: &mut Tx<'_, W>, c: u64) -> Result<u32, Abort> {
        let mut ids = [0u32; 2];
        let mut n = 0;
        tx.scan(
            CUSTOMER_TAXRATE,
            key::customer_taxrate(c, 0),
            key::customer_taxrate(c, 1),
            2,
            |_, r| {
                ids[n] = schema::customer_taxrate::u32(r, schema::customer_taxrate::CX_TX_ID);
                n += 1;
                ControlFlow::Continue(())
            },
        )?;
        let mut rate = 0;
        for &id in &ids[..n] {
            rate += tx
                .read_cols(TAXRATE, u64::from(id), TX_RATE, |r| txr::u32(r, txr::TX_RATE))?
                .must()?;
        }
        Ok(rate)
    }

    fn trade_result<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let t = self.t;
        let now = self.now;
        let trade = tx.piece(0, |tx| {
            let trade = tx
                .read_cols(TRADE, t, TR_ORDER, |r| {
                    (
                        tr::i64(r, tr::T_CA_ID) as u64,
                        schema::trade_type_of(tr::get(r, tr::T_TT_ID)).unwrap_or(0),
                        schema::symbol_index(tr::get(r, tr::T_S_SYMB)).unwrap_or(0),
                        tr::i32(r, tr::T_QTY),
                        tr::i64(r, tr::T_CHRG),
                        tr::u8(r, tr::T_LIFO) == 1,
                        tr::u8(r, tr::T_IS_CASH) == 1,
                        schema::status_of(tr::get(r, tr::T_ST_ID)),
                    )
                })?
                .must()?;
            // Only a submitted trade executes (another worker may have canceled it).
            if trade.7 != Some(status::SUBMITTED) {
                return Ok(None);
            }
            let kind = trade.1;
            Self::trade_type_name(tx, kind)?;
            let hs_key = key::holding_summary(trade.0, trade.2);
            let hs_qty = tx.read_cols(HOLDING_SUMMARY, hs_key, HS_QTY_NEXT, |r| {
                (hs::i32(r, hs::HS_QTY), hs::u32(r, hs::HS_NEXT))
            })?;
            Ok(Some((trade, hs_qty)))
        })?;
        let Some(((account, kind, s, qty, charge, lifo, cash, _), summary)) = trade else {
            return Ok(());
        };
        let sell = tt::is_sell(kind);
        let price = market::price(s, now);
        let (b, c, tax_status, gain) = tx.piece(1, |tx| {
            let (c, b, tax_status) = Self::owner(tx, account)?;
            let mut lots = self.lots.borrow_mut();
            let mut changes = self.changes.borrow_mut();
            lots.clear();
            if summary.is_some() {
                Self::read_lots(tx, account, s, &mut lots)?;
            }
            let (left, buy_value, sell_value) =
                market::trade_lots(&lots, sell, lifo, qty, price, &mut changes);
            let mut k = 0u32;
            for ch in changes.iter() {
                let hk = key::holding(account, s, ch.lot.n);
                self.holding_history(tx, t, k, ch.lot.trade, ch.lot.hist, ch.lot.qty, ch.after)?;
                k += 1;
                if ch.after == 0 {
                    must_hit(tx.delete(HOLDING, hk)?)?;
                } else {
                    tx.update_cols(HOLDING, hk, 0, HO_LOT_W, |r| {
                        ho::set_i32(r, ho::H_QTY, ch.after);
                        ho::set_u32(r, ho::H_HIST_N, ho::u32(r, ho::H_HIST_N) + 1);
                    })?
                    .must()?;
                }
            }
            let (old_qty, mut next) = summary.unwrap_or((0, 0));
            let new_qty = old_qty + if sell { -qty } else { qty };
            if left > 0 {
                let lot_qty = if sell { -left } else { left };
                let mut row = [0u8; ho::SIZE];
                ho::set_i64(&mut row, ho::H_T_ID, t as i64);
                ho::set_i64(&mut row, ho::H_CA_ID, account as i64);
                ho::set_str(&mut row, ho::H_S_SYMB, &schema::symbol(s));
                ho::set_i64(&mut row, ho::H_DTS, now);
                ho::set_i64(&mut row, ho::H_PRICE, price);
                ho::set_i32(&mut row, ho::H_QTY, lot_qty);
                ho::set_u32(&mut row, ho::H_HIST_N, 1);
                must_hit(tx.insert(HOLDING, key::holding(account, s, next), &row)?)?;
                self.holding_history(tx, t, k, t, 0, 0, lot_qty)?;
                next = (next + 1) & 0xFFFF;
            }
            let hk = key::holding_summary(account, s);
            match (summary.is_some(), new_qty) {
                (false, 0) => {}
                (false, q) => {
                    let mut row = [0u8; hs::SIZE];
                    hs::set_i64(&mut row, hs::HS_CA_ID, account as i64);
                    hs::set_str(&mut row, hs::HS_S_SYMB, &schema::symbol(s));
                    hs::set_i32(&mut row, hs::HS_QTY, q);
                    hs::set_u32(&mut row, hs::HS_NEXT, next);
                    must_hit(tx.insert(HOLDING_SUMMARY, hk, &row)?)?;
                }
                (true, 0) => must_hit(tx.delete(HOLDING_SUMMARY, hk)?)?,
                (true, q) => {
                    tx.update_cols(HOLDING_SUMMARY, hk, 0, HS_QTY_NEXT, |r| {
                        hs::set_i32(r, hs::HS_QTY, q);
                        hs::set_u32(r, hs::HS_NEXT, next);
                    })?
                    .must()?;
                }
            }
            Ok((b, c, tax_status, sell_value - buy_value))
        })?;
        let rate = tx.piece(2, |tx| {
            if sell && tax_status != 0 && gain > 0 {
                self.tax_rate(tx, c)
            } else {
                Ok(0)
            }
        })?;
        let comm_rate = tx.piece(3, |tx| {
            let ex = tx
                .read_cols(SECURITY, u64::from(s), SE_EX, |r| {
                    exchange_index(se::get(r, se::S_EX_ID))
                })?
                .must()?;
            let tier = tx.read_cols(CUSTOMER, c, CU_TIER, |r| cu::u32(r, cu::C_TIER))?.must()?;
            Self::commission_rate(tx, tier, kind, ex, qty)
        })?;
        let x = market::execute(
            market::Terms { kind, qty, price, charge, commission_rate: comm_rate },
            gain,
            tax_status,
            rate,
        );
        tx.piece(4, |tx| {
            tx.update_cols(TRADE, t, 0, TR_RESULT, |r| {
                tr::set_i64(r, tr::T_COMM, x.commission);
                tr::set_i64(r, tr::T_DTS, now);
                tr::set_str(r, tr::T_ST_ID, &schema::STATUS_IDS[status::COMPLETED as usize][..]);
                tr::set_i64(r, tr::T_TRADE_PRICE, price);
                tr::set_i64(r, tr::T_TAX, x.tax);
            })?
            .must()?;
            must_hit(tx.insert(
                TRADE_HISTORY,
                key::trade_history(t, status::COMPLETED),
                &load::history_row(t, now, status::COMPLETED),
            )?)?;
            tx.accumulate(BROKER, b, br::add(br::B_NUM_TRADES, 1))?.then_some(()).must()?;
            tx.accumulate(BROKER, b, br::add(br::B_COMM_TOTAL, x.commission))?.then_some(()).must()
        })?;
        tx.piece(5, |tx| {
            must_hit(tx.insert(
                SETTLEMENT,
                t,
                &load::settlement_row(t, cash, now, x.settlement),
            )?)?;
            let bal = if cash {
                let bal = tx
                    .update_cols(CUSTOMER_ACCOUNT, account, 0, CA_BAL, |r| {
                        let bal = ca::i64(r, ca::CA_BAL) + x.settlement;
                        ca::set_i64(r, ca::CA_BAL, bal);
                        bal
                    })?
                    .must()?;
                must_hit(tx.insert(
                    CASH_TRANSACTION,
                    t,
                    &load::cash_row(t, now, x.settlement, kind, qty, s),
                )?)?;
                bal
            } else {
                Self::balance(tx, account)?
            };
            self.emit(bal as u64);
            Ok(())
        })
    }

    fn trade_cleanup<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let now = self.now;
        tx.piece(0, |tx| {
            // Every pending order: submitted, then canceled, its request deleted.
            let mut keys = self.keys.borrow_mut();
            keys.clear();
            tx.scan(TRADE_REQUEST, 0, u64::MAX, usize::MAX, |k, r| {
                keys.push((k, rq::i64(r, rq::TR_B_ID) as u64));
                ControlFlow::Continue(())
            })?;
            let mut canceled = 0u64;
            for &(k, b) in keys.iter() {
                let t = key::trade_of(k);
                must_hit(tx.delete(TRADE_REQUEST, k)?)?;
                must_hit(tx.delete(TRADE_REQUEST_BY, key::trade_request_by(b, t))?)?;
                for st in [status::SUBMITTED, status::CANCELED] {
                    let row = load::history_row(t, now, st);
                    must_hit(tx.insert(TRADE_HISTORY, key::trade_history(t, st), &row)?)?;
                }
                self.cancel(tx, t)?;
                canceled += 1;
            }
            // Every trade of earlier runs still submitted (its result never ran).
            keys.clear();
            tx.scan(TRADE, self.t, schema::MAX_TRADE - 1, usize::MAX, |t, r| {
                if schema::status_of(tr::get(r, tr::T_ST_ID)) == Some(status::SUBMITTED) {
                    keys.push((t, 0));
                }
                ControlFlow::Continue(())
            })?;
            for &(t, _) in keys.iter() {
                let row = load::history_row(t, now, status::CANCELED);
                must_hit(tx.insert(
                    TRADE_HISTORY,
                    key::trade_history(t, status::CANCELED),
                    &row,
                )?)?;
                self.cancel(tx, t)?;
                canceled += 1;
            }
            self.emit(canceled);
            Ok(())
        })
    }

    /// Marks trade `t` canceled now.
    fn cancel<W: Worker>(&self, tx: &mut Tx<'_, W>, t: u64) -> Result<(), Abort> {
        let now = self.now;
        tx.update_cols(TRADE, t, 0, TR_STATE, |r| {
            tr::set_str(r, tr::T_ST_ID, &schema::STATUS_IDS[status::CANCELED as usize][..]);
            tr::set_i64(r, tr::T_DTS, now);
        })?
        .must()
    }

    fn data_maintenance<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        use schema::{
            account_permission as ap, address as ad, company as co, customer as cu,
            customer_taxrate as cx, exchange as ex, financial as fi, news_item as ni,
            security as se, taxrate as tx_, watch_item as wi,
        };
        let (c, co_id, s) = (self.c, u64::from(self.co), self.s);
        tx.piece(0, |tx| {
            match self.frame {
                0 => {
                    let k = key::account_permission(self.ca, 0);
                    tx.update_cols(ACCOUNT_PERMISSION, k, 0, DM_AP, |r| {
                        let next: &[u8] =
                            if ap::get(r, ap::AP_ACL) == b"1111" { b"0011" } else { b"1111" };
                        ap::set_str(r, ap::AP_ACL, next);
                    })?
                    .must()?;
                }
                1 => {
                    let a = u64::from(schema::EXCHANGES + self.companies) + c;
                    tx.update_cols(ADDRESS, a, 0, DM_AD, |r| {
                        let next: &[u8] = if ad::get(r, ad::AD_LINE2).starts_with(b"Apt. 10C\0") {
                            b"Apt. 22"
                        } else {
                            b"Apt. 10C"
                        };
                        ad::set_str(r, ad::AD_LINE2, next);
                    })?
                    .must()?;
                }
                2 => {
                    tx.update_cols(COMPANY, co_id, 0, DM_CO, |r| {
                        let next: &[u8] =
                            if co::get(r, co::CO_SP_RATE) == b"ABA\0" { b"AAA" } else { b"ABA" };
                        co::set_str(r, co::CO_SP_RATE, next);
                    })?
                    .must()?;
                }
                3 => {
                    tx.update_cols(CUSTOMER, c, 0, DM_CU, |r| {
                        swap_marker(
                            cu::get_mut(r, cu::C_EMAIL_2),
                            b"@example.net",
                            b"@example.org",
                        );
                    })?
                    .must()?;
                }
                4 => {
                    // The customer's division rate becomes the next division's.
                    tx.update_cols(CUSTOMER_TAXRATE, key::customer_taxrate(c, 1), 0, DM_CX, |r| {
                        let tx_id = cx::u32(r, cx::CX_TX_ID);
                        cx::set_u32(
                            r,
                            cx::CX_TX_ID,
                            10 + (tx_id - 10 + 1) % (schema::TAXRATES - 10),
                        );
                    })?
                    .must()?;
                }
                5 => {
                    // The volume of the security's days on that day of the month.
                    let (day, incr) = (self.day, i64::from(self.qty));
                    let mut d = day % 21;
                    while d < schema::DAILY_MARKET_DAYS {
                        tx.update_cols(DAILY_MARKET, key::daily_market(s, d), 0, DM_DM, |r| {
                            dm::set_i64(r, dm::DM_VOL, dm::i64(r, dm::DM_VOL) + incr);
                        })?
                        .must()?;
                        d += 21;
                    }
                }
                6 => {
                    tx.update_cols(EXCHANGE, u64::from(s % schema::EXCHANGES), 0, DM_EX, |r| {
                        let desc = ex::get_mut(r, ex::EX_DESC);
                        desc[0] ^= 0x20;
                    })?
                    .must()?;
                }
                7 => {
                    for q in 0..schema::QUARTERS {
                        tx.update_cols(FINANCIAL, key::financial(co_id, q), 0, DM_FI, |r| {
                            let d = fi::i64(r, fi::FI_QTR_START_DATE);
                            let step = if (d / 86_400) % 2 == 0 { 86_400 } else { -86_400 };
                            fi::set_i64(r, fi::FI_QTR_START_DATE, d + step);
                        })?
                        .must()?;
                    }
                }
                8 => {
                    let mut news = [0u64; 4];
                    let mut n = 0;
                    let (lo, hi) = (key::company_j(co_id, 0), key::company_j(co_id, 3));
                    tx.scan(NEWS_XREF, lo, hi, 4, |_, r| {
                        news[n] = schema::news_xref::i64(r, schema::news_xref::NX_NI_ID) as u64;
                        n += 1;
                        ControlFlow::Continue(())
                    })?;
                    for &item in &news[..n] {
                        tx.update_cols(NEWS_ITEM, item, 0, DM_NI, |r| {
                            ni::set_i64(r, ni::NI_DTS, ni::i64(r, ni::NI_DTS) + 86_400);
                        })?
                        .must()?;
                    }
                }
                9 => {
                    tx.update_cols(SECURITY, u64::from(s), 0, DM_SE, |r| {
                        se::set_i64(r, se::S_EXCH_DATE, se::i64(r, se::S_EXCH_DATE) + 86_400);
                    })?
                    .must()?;
                }
                10 => {
                    tx.update_cols(TAXRATE, u64::from(self.group), 0, DM_TX, |r| {
                        swap_marker(tx_::get_mut(r, tx_::TX_NAME), b"Tax rate", b"tax rate");
                    })?
                    .must()?;
                }
                _ => {
                    // One of the customer's watch items becomes a security it does not watch.
                    let mut first = None;
                    let (lo, hi) = (key::watch_item(c, 0), key::watch_item(c, (1 << 22) - 1));
                    tx.scan(WATCH_ITEM, lo, hi, 1, |k, _| {
                        first = Some((k & ((1 << 22) - 1)) as u32);
                        ControlFlow::Break(())
                    })?;
                    if let Some(old) = first {
                        let mut next = (old + 1) % self.securities;
                        while tx.read(WATCH_ITEM, key::watch_item(c, next), |_| ())?.is_some() {
                            next = (next + 1) % self.securities;
                        }
                        must_hit(tx.delete(WATCH_ITEM, key::watch_item(c, old))?)?;
                        let mut row = [0u8; wi::SIZE];
                        wi::set_i64(&mut row, wi::WI_WL_ID, c as i64);
                        wi::set_str(&mut row, wi::WI_S_SYMB, &schema::symbol(next));
                        must_hit(tx.insert(WATCH_ITEM, key::watch_item(c, next), &row)?)?;
                    }
                }
            }
            self.emit(u64::from(self.frame));
            Ok(())
        })
    }

    fn analytic<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let m = u64::from(schema::MAX_ACCOUNTS);
        let (first, n) = (self.c, u64::from(self.group));
        let (lo, hi) = (first * m, (first + n) * m - 1);
        let (accounts, balance) = tx.piece(0, |tx| {
            let (mut accounts, mut balance) = (0u32, 0i64);
            tx.scan(CUSTOMER_ACCOUNT, lo, hi, usize::MAX, |_, r| {
                accounts += 1;
                balance += ca::i64(r, ca::CA_BAL);
                ControlFlow::Continue(())
            })?;
            Ok((accounts, balance))
        })?;
        let (holdings, assets) = tx.piece(1, |tx| {
            // The group's shares per security, then each security at its last trade's price.
            let mut keys = self.keys.borrow_mut();
            keys.clear();
            let mut holdings = 0u32;
            let (from, to) = (key::holding_summary(lo, 0), key::holding_summary(hi, (1 << 22) - 1));
            tx.scan(HOLDING_SUMMARY, from, to, usize::MAX, |k, r| {
                holdings += 1;
                keys.push((k & ((1 << 22) - 1), hs::i32(r, hs::HS_QTY) as i64 as u64));
                ControlFlow::Continue(())
            })?;
            keys.sort_unstable_by_key(|&(s, _)| s);
            let mut assets = 0i64;
            let mut i = 0;
            while i < keys.len() {
                let s = keys[i].0;
                let mut qty = 0i64;
                while i < keys.len() && keys[i].0 == s {
                    qty += keys[i].1 as i64;
                    i += 1;
                }
                let price =
                    tx.read_cols(LAST_TRADE, s, LT_PRICE, |r| lt::i64(r, lt::LT_PRICE))?.must()?;
                assets += qty * price;
            }
            Ok((holdings, assets))
        })?;
        let now = self.now;
        tx.piece(2, |tx| {
            use schema::analytic_history as ah;
            let mut row = [0u8; ah::SIZE];
            ah::set_i64(&mut row, ah::AH_FIRST_C, first as i64);
            ah::set_u32(&mut row, ah::AH_CUSTOMERS, self.group);
            ah::set_u32(&mut row, ah::AH_ACCOUNTS, accounts);
            ah::set_u32(&mut row, ah::AH_HOLDINGS, holdings);
            ah::set_i64(&mut row, ah::AH_BALANCE, balance);
            ah::set_i64(&mut row, ah::AH_ASSETS, assets);
            ah::set_i64(&mut row, ah::AH_DTS, now);
            must_hit(tx.insert(ANALYTIC_HISTORY, self.t, &row)?)
        })?;
        self.emit((balance + assets) as u64);
        Ok(())
    }

    /// Trade `t`'s `k`-th holding history row, for the holding trade `h` created (its `n`-th),
    /// and its by-holding entry.
    #[allow(clippy::too_many_arguments)]
    fn holding_history<W: Worker>(
        &self,
        tx: &mut Tx<'_, W>,
        t: u64,
        k: u32,
        h: u64,
        n: u32,
        before: i32,
        after: i32,
    ) -> Result<(), Abort> {
        use schema::holding_history::*;
        let mut row = [0u8; SIZE];
        set_i64(&mut row, HH_H_T_ID, h as i64);
        set_i64(&mut row, HH_T_ID, t as i64);
        set_i32(&mut row, HH_BEFORE_QTY, before);
        set_i32(&mut row, HH_AFTER_QTY, after);
        must_hit(tx.insert(HOLDING_HISTORY, key::holding_history(t, k), &row)?)?;
        use schema::holding_history_by as hb;
        let mut row = [0u8; hb::SIZE];
        hb::set_i64(&mut row, hb::HB_T_ID, t as i64);
        hb::set_u32(&mut row, hb::HB_K, k);
        must_hit(tx.insert(HOLDING_HISTORY_BY, key::holding_history_by(h, n), &row)?)
    }
}

/// Replaces `from` by `to` in a zero-padded string column, or `to` by `from` when `from` is
/// absent (Trade-Update's reversible edits).
fn swap_marker(col: &mut [u8], from: &[u8], to: &[u8]) {
    let len = col.iter().position(|&b| b == 0).unwrap_or(col.len());
    let mut text = [0u8; 128];
    let len = len.min(text.len());
    text[..len].copy_from_slice(&col[..len]);
    let text = &text[..len];
    let (a, b) = if text.windows(from.len()).any(|w| w == from) { (from, to) } else { (to, from) };
    let Some(at) = text.windows(a.len()).position(|w| w == a) else { return };
    let mut n = 0;
    for part in [&text[..at], b, &text[at + a.len()..]] {
        let m = part.len().min(col.len() - n);
        col[n..n + m].copy_from_slice(&part[..m]);
        n += m;
    }
    col[n..].fill(0);
}
