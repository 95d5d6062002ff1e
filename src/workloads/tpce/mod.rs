//! TPC-E (specification revision 1.14): the brokerage firm's 33 tables, the population of
//! clause 2.6 scaled by customers, scale factor and initial trade days, the ten transactions
//! with the specification's mix, a market exchange emulator per worker, and consistency checks
//! after every run.
//!
//! * [`schema`]: row layouts (with column masks for templates), identifiers and keys.
//! * [`market`]: prices, the trading rules, the market exchange emulator.
//! * [`load`]: the population, in parallel, with an initial trade history consistent with its
//!   holdings, settlements, cash transactions and balances.
//! * [`txns`]: the procedures, frame by frame, with their piece templates.
//! * [`consistency`]: what the specification and the schema imply, checked after every run.
//!
//! **Departures from the specification**, each a choice the specification leaves to the
//! implementation or a simplification said here and in the run's notes:
//! * The flat input files (names, companies, news) are synthetic, drawn from the seed; the
//!   distributions the transactions depend on (accounts per tier, trade types, quantities,
//!   cash or margin, LIFO or FIFO) follow clause 2.6. Symbols spell the security's number
//!   (see [`schema`]), so a symbol is its own key.
//! * Trades are ordered by id where the specification orders by `T_DTS` (the most recent
//!   trades of an account or a security): ids grow with time per worker and across workers
//!   to within a block of [`schema::TRADE_BLOCK`] (see [`schema::RUN_TRADES`]).
//! * The market exchange emulator is one per worker (see [`market`]): a trade's result runs
//!   on the worker whose Trade-Order (or Market-Feed, for a triggered limit order) submitted
//!   it.
//! * Trade-Order selects the security by symbol (the specification selects 40 % by company
//!   name and issue); Data-Maintenance and Trade-Cleanup are not run (Trade-Cleanup's pending
//!   orders from the load stay pending until a Market-Feed triggers them).

pub mod consistency;
pub mod load;
pub mod market;
pub mod schema;
pub mod txns;

use crate::engine::{Database, Generator, Protocol, TxnType, Workload};
use crate::error::Error;
use crate::storage::index::IndexKind;
use crate::storage::TableSpec;
use crate::workloads::tpcc::random::TpccRand as Rand;
use market::Emulator;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use txns::{Kind, TpceTxn};

/// Table ids, in [`Tpce::tables`] order: the specification's 33 in alphabetical order, then
/// the secondary indexes, then the analytic history.
pub mod tables {
    use crate::storage::TableId;
    /// ACCOUNT_PERMISSION.
    pub const ACCOUNT_PERMISSION: TableId = TableId(0);
    /// ADDRESS.
    pub const ADDRESS: TableId = TableId(1);
    /// BROKER.
    pub const BROKER: TableId = TableId(2);
    /// CASH_TRANSACTION.
    pub const CASH_TRANSACTION: TableId = TableId(3);
    /// CHARGE.
    pub const CHARGE: TableId = TableId(4);
    /// COMMISSION_RATE.
    pub const COMMISSION_RATE: TableId = TableId(5);
    /// COMPANY.
    pub const COMPANY: TableId = TableId(6);
    /// COMPANY_COMPETITOR.
    pub const COMPANY_COMPETITOR: TableId = TableId(7);
    /// CUSTOMER.
    pub const CUSTOMER: TableId = TableId(8);
    /// CUSTOMER_ACCOUNT.
    pub const CUSTOMER_ACCOUNT: TableId = TableId(9);
    /// CUSTOMER_TAXRATE.
    pub const CUSTOMER_TAXRATE: TableId = TableId(10);
    /// DAILY_MARKET.
    pub const DAILY_MARKET: TableId = TableId(11);
    /// EXCHANGE.
    pub const EXCHANGE: TableId = TableId(12);
    /// FINANCIAL.
    pub const FINANCIAL: TableId = TableId(13);
    /// HOLDING.
    pub const HOLDING: TableId = TableId(14);
    /// HOLDING_HISTORY.
    pub const HOLDING_HISTORY: TableId = TableId(15);
    /// HOLDING_SUMMARY.
    pub const HOLDING_SUMMARY: TableId = TableId(16);
    /// INDUSTRY.
    pub const INDUSTRY: TableId = TableId(17);
    /// LAST_TRADE.
    pub const LAST_TRADE: TableId = TableId(18);
    /// NEWS_ITEM.
    pub const NEWS_ITEM: TableId = TableId(19);
    /// NEWS_XREF.
    pub const NEWS_XREF: TableId = TableId(20);
    /// SECTOR.
    pub const SECTOR: TableId = TableId(21);
    /// SECURITY.
    pub const SECURITY: TableId = TableId(22);
    /// SETTLEMENT.
    pub const SETTLEMENT: TableId = TableId(23);
    /// STATUS_TYPE.
    pub const STATUS_TYPE: TableId = TableId(24);
    /// TAXRATE.
    pub const TAXRATE: TableId = TableId(25);
    /// TRADE.
    pub const TRADE: TableId = TableId(26);
    /// TRADE_HISTORY.
    pub const TRADE_HISTORY: TableId = TableId(27);
    /// TRADE_REQUEST, keyed by security and trade.
    pub const TRADE_REQUEST: TableId = TableId(28);
    /// TRADE_TYPE.
    pub const TRADE_TYPE: TableId = TableId(29);
    /// WATCH_ITEM.
    pub const WATCH_ITEM: TableId = TableId(30);
    /// WATCH_LIST.
    pub const WATCH_LIST: TableId = TableId(31);
    /// ZIP_CODE.
    pub const ZIP_CODE: TableId = TableId(32);
    /// Secondary index: trades by account.
    pub const TRADE_BY_ACCOUNT: TableId = TableId(33);
    /// Secondary index: trades by security.
    pub const TRADE_BY_SECURITY: TableId = TableId(34);
    /// Secondary index: holding history by holding.
    pub const HOLDING_HISTORY_BY: TableId = TableId(35);
    /// Secondary index: trade requests by broker.
    pub const TRADE_REQUEST_BY: TableId = TableId(36);
    /// Secondary index: customers by tax id.
    pub const CUSTOMER_BY_TAX: TableId = TableId(37);
    /// Secondary index: companies by name (a hash of it).
    pub const COMPANY_BY_NAME: TableId = TableId(38);
    /// Secondary index: securities by company and issue.
    pub const SECURITY_BY_COMPANY: TableId = TableId(39);
    /// ANALYTIC_HISTORY (not in TPC-E): exists only with the analytic transaction.
    pub const ANALYTIC_HISTORY: TableId = TableId(40);
}

/// The specification's mix (clause 6.2.2.1), in tenths of a percent, in [`Kind::ALL`] order:
/// Broker-Volume 4.9, Customer-Position 13, Market-Feed 1, Market-Watch 18, Security-Detail 14,
/// Trade-Lookup 8, Trade-Order 10.1, Trade-Result 10, Trade-Status 19, Trade-Update 2.
pub const DEFAULT_MIX: [u32; 10] = [49, 130, 10, 180, 140, 80, 101, 100, 190, 20];
/// ERMIA's TPCE-hybrid mix around its 20 % of analytic transactions (ERMIA §4.2): Broker-Volume
/// 4.9, Customer-Position 8, Market-Feed 1, Market-Watch 13, Security-Detail 14, Trade-Lookup 8,
/// Trade-Order 10.1, Trade-Result 10, Trade-Status 9, Trade-Update 2 (80 % in all).
pub const ERMIA_MIX: [u32; 10] = [49, 80, 10, 130, 140, 80, 101, 100, 90, 20];
/// The read-write types only, in the specification's proportions (IC3 §6.8: "4 out of 10
/// transactions are read-write"): Market-Feed, Trade-Order, Trade-Result, Trade-Update.
pub const READ_WRITE_MIX: [u32; 10] = [0, 0, 10, 0, 0, 0, 101, 100, 0, 20];

/// ERMIA's analytic transaction (not in the specification; see [`txns`]).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AnalyticConfig {
    /// Percent of all transactions that are analytic (1 to 100); the mix shares the rest.
    pub share: u32,
    /// Percent of the customers whose accounts each analytic transaction values (more than 0,
    /// at most 100): ERMIA's "contention degree", 1 % to 60 % in its Fig. 5.
    pub group: f64,
}

impl AnalyticConfig {
    /// `--analytic-group`'s default, the group of ERMIA's Fig. 6.
    pub const DEFAULT_GROUP: f64 = 20.0;
    /// ERMIA's share of analytic transactions.
    pub const DEFAULT_SHARE: u32 = 20;

    /// The customers one analytic transaction values, of `customers`.
    pub fn customers(&self, customers: u32) -> u32 {
        (f64::from(customers) * self.group / 100.0).round() as u32
    }
}

/// TPC-E's parameters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TpceConfig {
    /// Customers: a multiple of [`schema::LOAD_UNIT`], at most [`schema::MAX_CUSTOMERS`].
    pub customers: u32,
    /// Customers per trade per second of the initial trade history (the specification's 500).
    pub scale_factor: u32,
    /// Days of initial trading (8 hours each; the specification's 300, ERMIA's 10).
    pub trade_days: u32,
    /// The weight of each type, in [`Kind::ALL`] order: tenths of a percent for
    /// [`DEFAULT_MIX`] and a user's `--mix` (which sum to 1 000), relative weights for the
    /// variants' ([`ERMIA_MIX`], [`READ_WRITE_MIX`]).
    pub mix: [u32; 10],
    /// Seed of the population.
    pub seed: u64,
    /// ERMIA's analytic transaction, when in the mix (off by default).
    pub analytic: Option<AnalyticConfig>,
    /// Transactions choose securities among the first this many (IC3 Fig. 21's "access range
    /// in the security table"); all of them by default.
    pub security_range: Option<u32>,
    /// Trade-Cleanup runs first and Data-Maintenance once a minute, on the first worker, as
    /// the specification has them (on by default).
    pub maintenance: bool,
}

impl TpceConfig {
    /// Defaults for `customers`: scale factor 500, one trade day (loads in seconds).
    pub fn new(customers: u32) -> Self {
        TpceConfig {
            customers,
            scale_factor: 500,
            trade_days: 1,
            mix: DEFAULT_MIX,
            seed: 1,
            analytic: None,
            security_range: None,
            maintenance: true,
        }
    }

    /// Parses a mix written as ten comma-separated percentages (tenths allowed).
    pub fn parse_mix(text: &str) -> Result<[u32; 10], String> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        if parts.len() != 10 {
            return Err(format!(
                "--mix '{text}' needs ten comma-separated percentages ({}), e.g. \
                 4.9,13,1,18,14,8,10.1,10,19,2",
                txns::TYPES.iter().take(10).map(|t| t.name).collect::<Vec<_>>().join(", ")
            ));
        }
        let mut mix = [0u32; 10];
        for (slot, p) in mix.iter_mut().zip(&parts) {
            let v: f64 =
                p.parse().ok().filter(|v: &f64| (0.0..=100.0).contains(v)).ok_or_else(|| {
                    format!("--mix '{text}': '{p}' is not a percentage (0 to 100)")
                })?;
            let tenths = (v * 10.0).round();
            if (tenths - v * 10.0).abs() > 1e-6 {
                return Err(format!("--mix '{text}': '{p}' has more than one decimal"));
            }
            *slot = tenths as u32;
        }
        let sum: u32 = mix.iter().sum();
        if sum != 1_000 {
            return Err(format!("--mix '{text}' sums to {}, not 100", f64::from(sum) / 10.0));
        }
        Ok(mix)
    }

    /// Checks the ranges; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        let unit = schema::LOAD_UNIT;
        if self.customers == 0
            || self.customers % unit != 0
            || self.customers > schema::MAX_CUSTOMERS
        {
            return Err(format!(
                "--customers {} is not a multiple of {unit} from {unit} to {} (TPC-E loads \
                 customers in units of {unit})",
                self.customers,
                schema::MAX_CUSTOMERS
            ));
        }
        if !(1..=10_000).contains(&self.scale_factor) {
            return Err(format!(
                "--scale-factor {} is out of range (1 to 10000 customers per trade per second)",
                self.scale_factor
            ));
        }
        if !(1..=300).contains(&self.trade_days) {
            return Err(format!("--trade-days {} is out of range (1 to 300)", self.trade_days));
        }
        if self.initial_trades() >= schema::RUN_TRADES {
            return Err(format!(
                "--customers {} with --trade-days {} and --scale-factor {} make {} initial \
                 trades, more than the {} the trade ids allow",
                self.customers,
                self.trade_days,
                self.scale_factor,
                self.initial_trades(),
                schema::RUN_TRADES - 1
            ));
        }
        if self.mix.iter().all(|&w| w == 0) {
            return Err("--mix gives no type a share".into());
        }
        if self.mix[Kind::TradeOrder as usize] == 0
            && (self.mix[Kind::TradeResult as usize] > 0 || self.mix[Kind::MarketFeed as usize] > 0)
        {
            return Err(format!(
                "--mix {}: Trade-Result and Market-Feed execute what Trade-Order submits, so \
                 they need Trade-Order in the mix",
                self.mix_text()
            ));
        }
        if let Some(a) = &self.analytic {
            if !(1..=100).contains(&a.share) {
                return Err(format!(
                    "--tpce-analytic {} is out of range (1 to 100 percent of the transactions)",
                    a.share
                ));
            }
            if !(a.group > 0.0 && a.group <= 100.0) {
                return Err(format!(
                    "--analytic-group {} is out of range (more than 0, at most 100 percent of \
                     the customers)",
                    a.group
                ));
            }
            if a.customers(self.customers) == 0 {
                return Err(format!(
                    "--analytic-group {} values no customer (one customer is {} percent)",
                    a.group,
                    100.0 / f64::from(self.customers)
                ));
            }
        }
        if let Some(r) = self.security_range {
            if r == 0 || r > self.securities() {
                return Err(format!(
                    "--security-range {r} is out of range (1 to the {} securities of {} \
                     customers)",
                    self.securities(),
                    self.customers
                ));
            }
        }
        Ok(())
    }

    /// The securities the transactions choose among.
    pub fn security_choices(&self) -> u32 {
        self.security_range.unwrap_or_else(|| self.securities())
    }

    /// The mix as percentages of the types it draws (the analytic share apart).
    fn mix_text(&self) -> String {
        let sum: u32 = self.mix.iter().sum::<u32>().max(1);
        let m: Vec<String> = self
            .mix
            .iter()
            .map(|&t| format!("{}", (f64::from(t) * 1_000.0 / f64::from(sum)).round() / 10.0))
            .collect();
        m.join(",")
    }

    /// Securities.
    pub fn securities(&self) -> u32 {
        self.customers / schema::LOAD_UNIT * schema::SECURITIES_PER_UNIT
    }
    /// Companies.
    pub fn companies(&self) -> u32 {
        self.customers / schema::LOAD_UNIT * schema::COMPANIES_PER_UNIT
    }
    /// Brokers.
    pub fn brokers(&self) -> u32 {
        self.customers / schema::CUSTOMERS_PER_BROKER
    }
    /// Initial trades per customer.
    pub fn trades_per_customer(&self) -> u32 {
        (f64::from(self.trade_days) * 8.0 * 3_600.0 / f64::from(self.scale_factor)).round() as u32
    }
    /// Initial trades in all (an upper bound: accounts draw theirs around the mean).
    pub fn initial_trades(&self) -> u64 {
        u64::from(self.customers) * u64::from(self.trades_per_customer()) * 3 / 2 + 1
    }

    /// One line describing the configuration.
    pub fn summary(&self) -> String {
        let mix = match self.mix {
            DEFAULT_MIX => "the specification's mix".to_string(),
            ERMIA_MIX => "ERMIA's TPCE-hybrid mix".to_string(),
            READ_WRITE_MIX => "the read-write types only (IC3's)".to_string(),
            _ => format!("mix {}", self.mix_text()),
        };
        let analytic = match &self.analytic {
            Some(a) => format!(
                ", {} % analytic transactions valuing {} % of the customers' accounts",
                a.share, a.group
            ),
            None => String::new(),
        };
        let range = match self.security_range {
            Some(r) => format!(", securities among the first {r}"),
            None => String::new(),
        };
        format!(
            "TPC-E: {} customers, scale factor {}, {} initial trade day(s), {mix}{analytic}{range}",
            self.customers, self.scale_factor, self.trade_days
        )
    }
}

/// Bytes a committed Trade-Order and its Trade-Result add at most (trade, histories,
/// settlement, cash transaction, holdings and their histories, request, index entries).
const BYTES_PER_TRADE: u64 = 2_048;

/// The TPC-E workload.
pub struct Tpce {
    cfg: TpceConfig,
    /// The next free block of run trade ids (see [`schema::RUN_TRADES`]).
    next_trade: Arc<AtomicU64>,
    /// Trades the growing tables have room for beyond the loaded ones.
    growth: u64,
    /// When the initial trade history ends (seconds), fixed at creation.
    load_time: i64,
    /// Numbers generators (each one's analytic-history rows get their own key range).
    generators: Arc<AtomicU64>,
}

impl Tpce {
    /// The workload for `cfg` (validated).
    pub fn new(cfg: TpceConfig) -> Self {
        let loaded: u64 =
            Self::tables_with(&cfg, 0).iter().map(|s| s.estimated_bytes::<[u64; 2]>()).sum();
        let avail = crate::storage::available_memory().unwrap_or(8 << 30);
        let growth = (avail.saturating_sub(loaded) / 2 / BYTES_PER_TRADE).max(1 << 16);
        Tpce {
            cfg,
            next_trade: Arc::new(AtomicU64::new(schema::RUN_TRADES)),
            growth,
            load_time: crate::workloads::now_secs(),
            generators: Arc::new(AtomicU64::new(1)),
        }
    }

    /// The configuration.
    pub fn config_ref(&self) -> &TpceConfig {
        &self.cfg
    }

    /// The tables for `cfg` (for memory checks before creating the workload).
    pub fn tables_for(cfg: &TpceConfig) -> Vec<TableSpec> {
        Self::tables_with(cfg, 0)
    }

    fn tables_with(cfg: &TpceConfig, growth: u64) -> Vec<TableSpec> {
        use schema::*;
        let c = u64::from(cfg.customers);
        let accounts = c * 5;
        let (s, co) = (u64::from(cfg.securities()), u64::from(cfg.companies()));
        let trades = c * u64::from(cfg.trades_per_customer());
        const SLACK: u64 = 1 << 16;
        // A table whose rows are only looked up by key.
        let point =
            |name: &str, size: usize, rows: u64, cols: Vec<(&'static str, usize, usize)>| {
                TableSpec::new(name, size, rows)
                    .with_index(IndexKind::Hash)
                    .with_capacity(rows + SLACK)
                    .with_columns(&cols)
            };
        // A table scanned by key range, `per_trade` rows more for each trade of the run, with
        // phantom buckets of 2^`shift` keys: each one a key prefix the frames scan (an
        // account's trades, a position's holdings), so that a scan covers one or two buckets
        // and conflicts only with inserts under its own prefix.
        let ranged = |name: &str,
                      size: usize,
                      rows: u64,
                      per_trade: u64,
                      shift: u32,
                      cols: Vec<(&'static str, usize, usize)>| {
            TableSpec::new(name, size, rows)
                .with_capacity(rows + per_trade * growth + SLACK)
                .with_phantom_shift(shift)
                .with_columns(&cols)
        };
        let default_shift = crate::storage::phantom::DEFAULT_SHIFT;
        let mut tables = vec![
            ranged(
                "account_permission",
                account_permission::SIZE,
                accounts * 3 / 2,
                0,
                4,
                account_permission::columns(),
            ),
            point("address", address::SIZE, c + co + 4, address::columns()),
            point("broker", broker::SIZE, u64::from(cfg.brokers()), broker::columns()),
            // Trades and their settlements and cash transactions are looked up by id, but the
            // consistency check visits them all: ordered indexes.
            ranged(
                "cash_transaction",
                cash_transaction::SIZE,
                trades,
                1,
                default_shift,
                cash_transaction::columns(),
            ),
            point("charge", charge::SIZE, 15, charge::columns()),
            point("commission_rate", commission_rate::SIZE, 240, commission_rate::columns()),
            point("company", company::SIZE, co, company::columns()),
            ranged(
                "company_competitor",
                company_competitor::SIZE,
                co * 3,
                0,
                2,
                company_competitor::columns(),
            ),
            point("customer", customer::SIZE, c, customer::columns()),
            ranged(
                "customer_account",
                customer_account::SIZE,
                accounts,
                0,
                4,
                customer_account::columns(),
            ),
            ranged(
                "customer_taxrate",
                customer_taxrate::SIZE,
                c * 2,
                0,
                1,
                customer_taxrate::columns(),
            ),
            ranged(
                "daily_market",
                daily_market::SIZE,
                s * u64::from(DAILY_MARKET_DAYS),
                0,
                5,
                daily_market::columns(),
            ),
            point("exchange", exchange::SIZE, 4, exchange::columns()),
            ranged(
                "financial",
                financial::SIZE,
                co * u64::from(QUARTERS),
                0,
                5,
                financial::columns(),
            ),
            ranged("holding", holding::SIZE, trades / 4, 1, 16, holding::columns()),
            ranged(
                "holding_history",
                holding_history::SIZE,
                trades * 3 / 2,
                4,
                24,
                holding_history::columns(),
            ),
            ranged(
                "holding_summary",
                holding_summary::SIZE,
                accounts * 10,
                1,
                22,
                holding_summary::columns(),
            ),
            point("industry", industry::SIZE, u64::from(INDUSTRIES), industry::columns()),
            point("last_trade", last_trade::SIZE, s, last_trade::columns()),
            point("news_item", news_item::SIZE, co * 2, news_item::columns()),
            ranged("news_xref", news_xref::SIZE, co * 2, 0, 2, news_xref::columns()),
            point("sector", sector::SIZE, u64::from(SECTORS), sector::columns()),
            point("security", security::SIZE, s, security::columns()),
            ranged("settlement", settlement::SIZE, trades, 1, default_shift, settlement::columns()),
            point("status_type", status_type::SIZE, 5, status_type::columns()),
            point("taxrate", taxrate::SIZE, u64::from(TAXRATES), taxrate::columns()),
            ranged("trade", trade::SIZE, trades, 1, default_shift, trade::columns()),
            ranged(
                "trade_history",
                trade_history::SIZE,
                trades * 2,
                3,
                3,
                trade_history::columns(),
            ),
            ranged(
                "trade_request",
                trade_request::SIZE,
                trades / 100,
                1,
                40,
                trade_request::columns(),
            ),
            point("trade_type", trade_type::SIZE, 5, trade_type::columns()),
            ranged(
                "watch_item",
                watch_item::SIZE,
                c * u64::from(WATCH_ITEMS),
                0,
                22,
                watch_item::columns(),
            ),
            point("watch_list", watch_list::SIZE, c, watch_list::columns()),
            point("zip_code", zip_code::SIZE, u64::from(ZIP_CODES), zip_code::columns()),
            ranged("trade_by_account", trade_by::SIZE, trades, 1, 40, trade_by::columns()),
            ranged("trade_by_security", trade_by::SIZE, trades, 1, 40, trade_by::columns()),
            ranged(
                "holding_history_by",
                holding_history_by::SIZE,
                trades * 3 / 2,
                4,
                24,
                holding_history_by::columns(),
            ),
            ranged(
                "trade_request_by",
                trade_request_by::SIZE,
                trades / 100,
                1,
                40,
                trade_request_by::columns(),
            ),
            point("customer_by_tax", customer_by_tax::SIZE, c, customer_by_tax::columns()),
            point("company_by_name", customer_by_tax::SIZE, co, customer_by_tax::columns()),
            point("security_by_company", customer_by_tax::SIZE, s, customer_by_tax::columns()),
        ];
        if cfg.analytic.is_some() {
            // One row per analytic transaction: keys count up per generator.
            tables.push(
                TableSpec::new("analytic_history", analytic_history::SIZE, 0)
                    .with_index(IndexKind::Dense)
                    .with_capacity(growth + SLACK)
                    .with_columns(&analytic_history::columns()),
            );
        }
        tables
    }
}

impl Workload for Tpce {
    type Proc = TpceTxn;
    type Gen = TpceGen;

    fn name(&self) -> &'static str {
        "tpce"
    }

    fn tables(&self) -> Vec<TableSpec> {
        Self::tables_with(&self.cfg, self.growth)
    }

    fn txn_types(&self) -> &[TxnType] {
        let n = if self.cfg.analytic.is_some() { 13 } else { 12 };
        &txns::TYPES[..n]
    }

    fn load<P: Protocol>(&self, db: &Database<P>, threads: usize) -> Result<(), Error> {
        load::load(db, &self.cfg, self.load_time, threads)
    }

    fn generator(&self, worker: usize, _threads: usize, seed: u64) -> TpceGen {
        let now = crate::workloads::now_secs();
        TpceGen {
            source: self.generators.fetch_add(1, Ordering::Relaxed),
            analytic_seq: 0,
            cleanup: worker == 0 && self.cfg.maintenance,
            maintenance: (worker == 0 && self.cfg.maintenance).then_some(now + MAINTENANCE_S),
            round: 0,
            cfg: self.cfg.clone(),
            thresholds: thresholds(&self.cfg.mix),
            rng: Rand::new(seed),
            next_trade: self.next_trade.clone(),
            block: 0..0,
            market: Emulator::default(),
            load_time: self.load_time,
        }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({ "tpce": &self.cfg })
    }

    /// Everything but the mix: the population depends on the customers, scale factor, trade
    /// days and seed.
    fn data_config(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "customers": self.cfg.customers,
            "scale_factor": self.cfg.scale_factor,
            "trade_days": self.cfg.trade_days,
            "seed": self.cfg.seed,
        });
        if self.cfg.analytic.is_some() {
            v["analytic_history"] = true.into();
        }
        v
    }

    fn continue_from(&mut self, previous: &Self) {
        self.next_trade = previous.next_trade.clone();
        self.generators = previous.generators.clone();
        self.growth = previous.growth;
        self.load_time = previous.load_time;
    }

    fn invariants(&self) -> Option<&'static str> {
        Some(
            "TPC-E's consistency: holding summaries against holdings, completed trades against \
             their settlements, cash transactions and histories, balances against cash, status \
             transitions, brokers' totals, and the secondary indexes",
        )
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let found = consistency::check(db, &self.cfg);
        if found.is_empty() {
            Ok(())
        } else {
            Err(format!("TPC-E consistency violated: {}", found.join("; ")))
        }
    }

    fn headline(&self) -> Option<usize> {
        // tpsE counts Trade-Results.
        (self.cfg.mix[Kind::TradeResult as usize] > 0).then_some(Kind::TradeResult as usize)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.cfg.mix != DEFAULT_MIX {
            notes.push(format!("mix {} (not the specification's)", self.cfg.mix_text()));
        }
        if let Some(a) = &self.cfg.analytic {
            notes.push(format!(
                "analytic transaction (not in the specification): {} % of the mix, valuing {} % \
                 of the customers' accounts",
                a.share, a.group
            ));
        }
        if let Some(r) = self.cfg.security_range {
            notes.push(format!("securities among the first {r} (not the specification's)"));
        }
        if !self.cfg.maintenance {
            notes.push("SIMPLIFIED: no Trade-Cleanup or Data-Maintenance".into());
        }
        notes
    }
}

/// The running sums of the mix: a draw below the first picks the first type, and so on.
fn thresholds(mix: &[u32; 10]) -> [u32; 10] {
    let mut out = [0; 10];
    let mut acc = 0;
    for (o, m) in out.iter_mut().zip(mix) {
        acc += m;
        *o = acc;
    }
    out
}

/// Seconds between Data-Maintenance transactions (clause 6.3.1: once a minute).
pub const MAINTENANCE_S: i64 = 60;

/// A worker's TPC-E generator: the customer emulator's inputs (clause 4) and the worker's
/// market exchange emulator ([`market`]).
pub struct TpceGen {
    /// This generator's number: its analytic-history rows are keyed `(source, seq)`.
    source: u64,
    analytic_seq: u64,
    /// Trade-Cleanup is still to run (the first worker's first transaction).
    cleanup: bool,
    /// When the next Data-Maintenance runs (the first worker only).
    maintenance: Option<i64>,
    /// Data-Maintenance's next table (round robin).
    round: u32,
    cfg: TpceConfig,
    thresholds: [u32; 10],
    rng: Rand,
    next_trade: Arc<AtomicU64>,
    /// Trade ids this generator holds.
    block: std::ops::Range<u64>,
    market: Emulator,
    load_time: i64,
}

impl TpceGen {
    fn trade_id(&mut self) -> u64 {
        if self.block.is_empty() {
            // Relaxed: the counter only hands out disjoint blocks; the ids reach other workers
            // through the committed rows.
            let start = self.next_trade.fetch_add(schema::TRADE_BLOCK, Ordering::Relaxed);
            self.block = start..start + schema::TRADE_BLOCK;
        }
        let t = self.block.start;
        self.block.start += 1;
        t
    }

    fn kind(&mut self, now: i64) -> Kind {
        if self.cleanup {
            self.cleanup = false;
            return Kind::TradeCleanup;
        }
        if let Some(at) = self.maintenance.filter(|&at| now >= at) {
            self.maintenance = Some(at + MAINTENANCE_S);
            return Kind::DataMaintenance;
        }
        if let Some(a) = self.cfg.analytic {
            if self.rng.uniform(0, 99) < a.share {
                return Kind::Analytic;
            }
        }
        let range = self.thresholds[9];
        loop {
            let pick = self.rng.uniform(0, range - 1);
            let k = Kind::ALL[self.thresholds.iter().position(|&t| pick < t).unwrap_or(0)];
            match k {
                Kind::TradeResult if self.market.queued.is_empty() => continue,
                Kind::MarketFeed if self.market.tickers.len() < market::FEED_BATCH => continue,
                _ => return k,
            }
        }
    }
}

impl Generator for TpceGen {
    type Proc = TpceTxn;

    fn blank(&self) -> TpceTxn {
        TpceTxn::new()
    }

    fn fill(&mut self, t: &mut TpceTxn) {
        let now = crate::workloads::now_secs();
        let kind = self.kind(now);
        let id = if kind == Kind::TradeOrder { self.trade_id() } else { 0 };
        let mut input =
            txns::Input { rng: &mut self.rng, cfg: &self.cfg, now, load_time: self.load_time };
        match kind {
            Kind::TradeOrder => txns::fill_trade_order(t, &mut input, id),
            Kind::TradeResult => {
                let r = self.market.next_result().expect("kind() saw a queued trade");
                txns::fill_trade_result(t, r, now);
            }
            Kind::MarketFeed => {
                let mut tickers = std::mem::take(&mut t.tickers);
                let ok = self.market.next_feed(&mut tickers);
                debug_assert!(ok, "kind() saw a full batch");
                t.tickers = tickers;
                txns::fill_market_feed(t, now);
            }
            Kind::TradeCleanup => txns::fill_trade_cleanup(t, now),
            Kind::DataMaintenance => {
                txns::fill_data_maintenance(t, &mut input, self.round);
                self.round = (self.round + 1) % txns::MAINTAINED_TABLES;
            }
            Kind::Analytic => {
                self.analytic_seq += 1;
                let key = (self.source << 40) | self.analytic_seq;
                txns::fill_analytic(t, &mut input, key);
            }
            other => txns::fill_customer(t, &mut input, other),
        }
    }

    fn committed(&mut self, done: &TpceTxn) {
        match done.kind {
            Kind::TradeOrder => {
                if let Some(r) = done.submitted.get() {
                    self.market.submit(r);
                }
            }
            Kind::MarketFeed => {
                for r in done.triggered.borrow().iter() {
                    self.market.submit(*r);
                }
            }
            _ => {}
        }
    }
}
