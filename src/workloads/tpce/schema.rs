//! TPC-E's 33 tables (specification 1.14, clause 2.2) and the secondary indexes the frames
//! need, as fixed-width binary rows, with their keys packed into `u64`.
//!
//! Widths follow clause 2.2: `CHAR(n)` keeps its maximum length (zero-padded), identifiers
//! are 8-byte integers, money (`VALUE_T`, `S_PRICE_T`, balances) is a signed 8-byte count of
//! cents, quantities are signed 4-byte integers (negative for short positions), rates are
//! 4-byte counts of 1/10 000 (tax) or of 1/100 percent (commission), booleans one byte, dates
//! 8-byte seconds since the Unix epoch. A few rows carry a column the specification does not
//! have, each named `*_NEXT` or `*_HIST_N` and documented: the sequence numbers that give
//! holdings and their histories `u64` keys in time order.
//!
//! ## Identifiers
//!
//! Tables are keyed by dense numbers, which the identifier columns hold too: customer `c`,
//! account `ca` = c · 10 + j for the customer's j-th account, security `s` (its symbol spells `s` in base 26, so a
//! symbol is its own key: [`symbol`], [`symbol_index`]), company `co`, broker `b`, trade `t`
//! (loaded trades are numbered by time, [`loaded_trade_id`]; a run's count on from
//! [`RUN_TRADES`]).
//!
//! ## Keys
//!
//! | table | key (most significant first) | bits |
//! |---|---|---|
//! | account permission | ca, j | 26, 4 |
//! | customer taxrate | c, j | 24, 1 |
//! | daily market | s, day | 22, 12 |
//! | financial | co, quarter | 22, 5 |
//! | company competitor, news xref | co, j | 22, 2 |
//! | holding | ca, s, n | 26, 22, 16 |
//! | holding summary | ca, s | 26, 22 |
//! | holding history | trade, k | 40, 24 |
//! | holding history by holding | holding's trade, n | 40, 24 |
//! | trade history | trade, status | 40, 3 |
//! | trade request | s, trade | 22, 40 |
//! | trade request by broker | b, trade | 20, 40 |
//! | trade by account | ca, trade | 24, 40 |
//! | trade by security | s, trade | 22, 40 |
//! | watch item | c, s | 24, 22 |
//! | commission rate | tier, type, exchange, range | 2, 3, 2, 2 |
//! | charge | type, tier | 3, 2 |
//!
//! Hence at most [`MAX_CUSTOMERS`] customers and 2^40 trades.

/// Customers per load unit (clause 2.6.1.1).
pub const LOAD_UNIT: u32 = 1_000;
/// Most customers the key layout can address (accounts take 24 bits in the trade-by-account
/// key: ten per customer).
pub const MAX_CUSTOMERS: u32 = 1_000_000;
/// Securities per load unit.
pub const SECURITIES_PER_UNIT: u32 = 685;
/// Companies per load unit.
pub const COMPANIES_PER_UNIT: u32 = 500;
/// Customers per broker.
pub const CUSTOMERS_PER_BROKER: u32 = 100;
/// Most accounts a customer has.
pub const MAX_ACCOUNTS: u32 = 10;
/// Days of DAILY_MARKET history (five years of trading days).
pub const DAILY_MARKET_DAYS: u32 = 1_305;
/// Quarters of FINANCIAL history per company.
pub const QUARTERS: u32 = 20;
/// Watch items per watch list, on average (the loader draws 50 to 150).
pub const WATCH_ITEMS: u32 = 100;
/// Trades per customer per trade day: 8 hours of 3 600 s at one trade per second per 500
/// customers (clause 6.6.1: the scale factor 500).
pub const TRADES_PER_CUSTOMER_DAY: f64 = 8.0 * 3_600.0 / 500.0;
/// News items per company.
pub const NEWS_PER_COMPANY: u32 = 2;
/// Competitors per company.
pub const COMPETITORS: u32 = 3;
/// Zip codes (the specification's flat file has 14 741).
pub const ZIP_CODES: u32 = 14_741;
/// Exchanges, sectors, industries, status types, trade types, taxrates: the fixed tables.
pub const EXCHANGES: u32 = 4;
/// Sectors.
pub const SECTORS: u32 = 12;
/// Industries.
pub const INDUSTRIES: u32 = 102;
/// Tax rates (clause 2.2.7.10: 320 rows).
pub const TAXRATES: u32 = 320;
/// Customer tiers.
pub const TIERS: u32 = 3;

layout!(
    /// ACCOUNT_PERMISSION.
    account_permission { AP_CA_ID: 8, AP_ACL: 4, AP_TAX_ID: 20, AP_L_NAME: 25, AP_F_NAME: 20 }
);
layout!(
    /// ADDRESS.
    address { AD_ID: 8, AD_LINE1: 80, AD_LINE2: 80, AD_ZC_CODE: 12, AD_CTRY: 80 }
);
layout!(
    /// BROKER. The byte order is ours: the two counters Trade-Result adds to come first, each
    /// in a word of its own, so that IC3 can accumulate into them (installs copy words).
    broker { B_NUM_TRADES: 8, B_COMM_TOTAL: 8, B_ID: 8, B_ST_ID: 4, B_NAME: 49 }
);
layout!(
    /// CASH_TRANSACTION.
    cash_transaction { CT_T_ID: 8, CT_DTS: 8, CT_AMT: 8, CT_NAME: 100 }
);
layout!(
    /// CHARGE.
    charge { CH_TT_ID: 3, CH_C_TIER: 4, CH_CHRG: 8 }
);
layout!(
    /// COMMISSION_RATE (`CR_RATE` in 1/100 percent).
    commission_rate {
        CR_C_TIER: 4, CR_TT_ID: 3, CR_EX_ID: 6, CR_FROM_QTY: 4, CR_TO_QTY: 4, CR_RATE: 4,
    }
);
layout!(
    /// COMPANY.
    company {
        CO_ID: 8, CO_ST_ID: 4, CO_NAME: 60, CO_IN_ID: 2, CO_SP_RATE: 4, CO_CEO: 46, CO_AD_ID: 8,
        CO_DESC: 150, CO_OPEN_DATE: 8,
    }
);
layout!(
    /// COMPANY_COMPETITOR.
    company_competitor { CP_CO_ID: 8, CP_COMP_CO_ID: 8, CP_IN_ID: 2 }
);
layout!(
    /// CUSTOMER. `C_TIER` is 1 to 3.
    customer {
        C_ID: 8, C_TAX_ID: 20, C_ST_ID: 4, C_L_NAME: 25, C_F_NAME: 20, C_M_NAME: 1, C_GNDR: 1,
        C_TIER: 4, C_DOB: 8, C_AD_ID: 8, C_CTRY_1: 3, C_AREA_1: 3, C_LOCAL_1: 10, C_EXT_1: 5,
        C_CTRY_2: 3, C_AREA_2: 3, C_LOCAL_2: 10, C_EXT_2: 5, C_CTRY_3: 3, C_AREA_3: 3,
        C_LOCAL_3: 10, C_EXT_3: 5, C_EMAIL_1: 50, C_EMAIL_2: 50,
    }
);
layout!(
    /// CUSTOMER_ACCOUNT. The byte order is ours: the balance, which Trade-Result changes,
    /// first. `CA_TAX_ST` is 0 (not taxable), 1 or 2.
    customer_account { CA_BAL: 8, CA_ID: 8, CA_B_ID: 8, CA_C_ID: 8, CA_NAME: 50, CA_TAX_ST: 4 }
);
layout!(
    /// CUSTOMER_TAXRATE.
    customer_taxrate { CX_TX_ID: 4, CX_C_ID: 8 }
);
layout!(
    /// DAILY_MARKET.
    daily_market {
        DM_DATE: 8, DM_S_SYMB: 15, DM_CLOSE: 8, DM_HIGH: 8, DM_LOW: 8, DM_VOL: 8,
    }
);
layout!(
    /// EXCHANGE.
    exchange {
        EX_ID: 6, EX_NAME: 100, EX_NUM_SYMB: 4, EX_OPEN: 4, EX_CLOSE: 4, EX_DESC: 150,
        EX_AD_ID: 8,
    }
);
layout!(
    /// FINANCIAL.
    financial {
        FI_CO_ID: 8, FI_YEAR: 4, FI_QTR: 4, FI_QTR_START_DATE: 8, FI_REVENUE: 8,
        FI_NET_EARN: 8, FI_BASIC_EPS: 8, FI_DILUT_EPS: 8, FI_MARGIN: 8, FI_INVENTORY: 8,
        FI_ASSETS: 8, FI_LIABILITY: 8, FI_OUT_BASIC: 8, FI_OUT_DILUT: 8,
    }
);
layout!(
    /// HOLDING. `H_HIST_N` (not in the specification): how many HOLDING_HISTORY rows name
    /// this holding, which numbers the next one's key in the by-holding index.
    holding { H_T_ID: 8, H_CA_ID: 8, H_S_SYMB: 15, H_DTS: 8, H_PRICE: 8, H_QTY: 4, H_HIST_N: 4 }
);
layout!(
    /// HOLDING_HISTORY.
    holding_history { HH_H_T_ID: 8, HH_T_ID: 8, HH_BEFORE_QTY: 4, HH_AFTER_QTY: 4 }
);
layout!(
    /// HOLDING_SUMMARY. `HS_NEXT` (not in the specification): the sequence number the next
    /// holding of this account and security gets, so that the holdings' keys follow their
    /// creation order (FIFO ascending, LIFO descending).
    holding_summary { HS_CA_ID: 8, HS_S_SYMB: 15, HS_QTY: 4, HS_NEXT: 4 }
);
layout!(
    /// INDUSTRY.
    industry { IN_ID: 2, IN_NAME: 50, IN_SC_ID: 2 }
);
layout!(
    /// LAST_TRADE.
    last_trade { LT_S_SYMB: 15, LT_DTS: 8, LT_PRICE: 8, LT_OPEN_PRICE: 8, LT_VOL: 8 }
);
layout!(
    /// NEWS_ITEM. `NI_ITEM` is the specification's 100 000-byte large object.
    news_item {
        NI_ID: 8, NI_HEADLINE: 80, NI_SUMMARY: 255, NI_ITEM: 100_000, NI_DTS: 8, NI_SOURCE: 30,
        NI_AUTHOR: 30,
    }
);
layout!(
    /// NEWS_XREF.
    news_xref { NX_NI_ID: 8, NX_CO_ID: 8 }
);
layout!(
    /// SECTOR.
    sector { SC_ID: 2, SC_NAME: 30 }
);
layout!(
    /// SECURITY.
    security {
        S_SYMB: 15, S_ISSUE: 6, S_ST_ID: 4, S_NAME: 70, S_EX_ID: 6, S_CO_ID: 8, S_NUM_OUT: 8,
        S_START_DATE: 8, S_EXCH_DATE: 8, S_PE: 8, S_52WK_HIGH: 8, S_52WK_HIGH_DATE: 8,
        S_52WK_LOW: 8, S_52WK_LOW_DATE: 8, S_DIVIDEND: 8, S_YIELD: 8,
    }
);
layout!(
    /// SETTLEMENT.
    settlement { SE_T_ID: 8, SE_CASH_TYPE: 40, SE_CASH_DUE_DATE: 8, SE_AMT: 8 }
);
layout!(
    /// STATUS_TYPE.
    status_type { ST_ID: 4, ST_NAME: 10 }
);
layout!(
    /// TAXRATE (`TX_RATE` in 1/10 000).
    taxrate { TX_ID: 4, TX_NAME: 50, TX_RATE: 4 }
);
layout!(
    /// TRADE. `T_IS_CASH` and `T_LIFO` are 0 or 1.
    trade {
        T_ID: 8, T_DTS: 8, T_ST_ID: 4, T_TT_ID: 3, T_IS_CASH: 1, T_S_SYMB: 15, T_QTY: 4,
        T_BID_PRICE: 8, T_CA_ID: 8, T_EXEC_NAME: 49, T_TRADE_PRICE: 8, T_CHRG: 8, T_COMM: 8,
        T_TAX: 8, T_LIFO: 1,
    }
);
layout!(
    /// TRADE_HISTORY.
    trade_history { TH_T_ID: 8, TH_DTS: 8, TH_ST_ID: 4 }
);
layout!(
    /// TRADE_REQUEST.
    trade_request { TR_T_ID: 8, TR_TT_ID: 3, TR_S_SYMB: 15, TR_QTY: 4, TR_BID_PRICE: 8, TR_B_ID: 8 }
);
layout!(
    /// TRADE_TYPE.
    trade_type { TT_ID: 3, TT_NAME: 12, TT_IS_SELL: 1, TT_IS_MRKT: 1 }
);
layout!(
    /// WATCH_ITEM.
    watch_item { WI_WL_ID: 8, WI_S_SYMB: 15 }
);
layout!(
    /// WATCH_LIST (one per customer: `WL_ID` is the customer's number).
    watch_list { WL_ID: 8, WL_C_ID: 8 }
);
layout!(
    /// ZIP_CODE.
    zip_code { ZC_CODE: 12, ZC_TOWN: 80, ZC_DIV: 80 }
);
layout!(
    /// Secondary index TRADE(T_CA_ID, T_DTS) and TRADE(T_S_SYMB, T_DTS): when the trade was
    /// ordered, so that a scan by time range filters without reading the trades.
    trade_by { TB_DTS: 8 }
);
layout!(
    /// Secondary index HOLDING_HISTORY(HH_H_T_ID): the history row's trade and number, its
    /// primary key.
    holding_history_by { HB_T_ID: 8, HB_K: 4 }
);
layout!(
    /// Secondary index TRADE_REQUEST(TR_B_ID): what Broker-Volume sums, and the security that
    /// leads to the sector.
    trade_request_by { RB_S: 4, RB_QTY: 4, RB_BID_PRICE: 8 }
);
layout!(
    /// Secondary index CUSTOMER(C_TAX_ID).
    customer_by_tax { CB_C: 8 }
);
layout!(
    /// ANALYTIC_HISTORY: not in TPC-E. One row per committed analytic transaction of ERMIA's
    /// hybrid mix: the customer group it valued (the first customer and how many), what it
    /// found there (accounts, holding summaries, their cash and their holdings at the last
    /// trades' prices), and when.
    analytic_history {
        AH_FIRST_C: 8, AH_CUSTOMERS: 4, AH_ACCOUNTS: 4, AH_HOLDINGS: 4, AH_BALANCE: 8,
        AH_ASSETS: 8, AH_DTS: 8,
    }
);

/// Status types, by number: the row `ST_ID` strings are [`STATUS_IDS`].
pub mod status {
    /// Completed.
    pub const COMPLETED: u32 = 0;
    /// Active (brokers, companies, securities, customers).
    pub const ACTIVE: u32 = 1;
    /// Submitted to the market.
    pub const SUBMITTED: u32 = 2;
    /// A limit order waiting for its price.
    pub const PENDING: u32 = 3;
    /// Canceled.
    pub const CANCELED: u32 = 4;
}
/// `ST_ID` of each status number.
pub const STATUS_IDS: [&[u8; 4]; 5] = [b"CMPT", b"ACTV", b"SBMT", b"PNDG", b"CNCL"];
/// `ST_NAME` of each status number.
pub const STATUS_NAMES: [&str; 5] = ["Completed", "Active", "Submitted", "Pending", "Canceled"];

/// Trade types, by number.
pub mod trade_types {
    /// Market buy.
    pub const MARKET_BUY: u32 = 0;
    /// Market sell.
    pub const MARKET_SELL: u32 = 1;
    /// Stop loss (a sell triggered when the price falls to the bid).
    pub const STOP_LOSS: u32 = 2;
    /// Limit sell (triggered when the price rises to the bid).
    pub const LIMIT_SELL: u32 = 3;
    /// Limit buy (triggered when the price falls to the bid).
    pub const LIMIT_BUY: u32 = 4;
    /// Whether type `tt` sells.
    pub const fn is_sell(tt: u32) -> bool {
        matches!(tt, MARKET_SELL | STOP_LOSS | LIMIT_SELL)
    }
    /// Whether type `tt` is a market order.
    pub const fn is_market(tt: u32) -> bool {
        tt <= MARKET_SELL
    }
}
/// `TT_ID` of each trade type.
pub const TRADE_TYPE_IDS: [&[u8; 3]; 5] = [b"TMB", b"TMS", b"TSL", b"TLS", b"TLB"];
/// `TT_NAME` of each trade type.
pub const TRADE_TYPE_NAMES: [&str; 5] =
    ["Market-Buy", "Market-Sell", "Stop-Loss", "Limit-Sell", "Limit-Buy"];
/// `EX_ID` of each exchange.
pub const EXCHANGE_IDS: [&str; 4] = ["NYSE", "NASDAQ", "AMEX", "PCX"];

/// The number of a 3-byte `TT_ID`.
pub fn trade_type_of(id: &[u8]) -> Option<u32> {
    TRADE_TYPE_IDS.iter().position(|t| t[..] == id[..3]).map(|i| i as u32)
}
/// The number of a 4-byte `ST_ID`.
pub fn status_of(id: &[u8]) -> Option<u32> {
    STATUS_IDS.iter().position(|t| t[..] == id[..4]).map(|i| i as u32)
}

/// Security `s`'s symbol: `s` in base 26, most significant letter first, at least three
/// letters ("AAA" is 0), zero-padded to 15 bytes.
pub fn symbol(s: u32) -> [u8; 15] {
    let mut digits = [0u8; 15];
    let (mut v, mut n) = (s, 0);
    while v > 0 || n < 3 {
        digits[n] = b'A' + (v % 26) as u8;
        v /= 26;
        n += 1;
    }
    let mut out = [0u8; 15];
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    out
}

/// The security number a symbol spells ([`symbol`]'s inverse); `None` for a malformed one.
pub fn symbol_index(sym: &[u8]) -> Option<u32> {
    let mut v: u32 = 0;
    let mut n = 0;
    for &b in sym.iter().take_while(|&&b| b != 0) {
        if !b.is_ascii_uppercase() {
            return None;
        }
        v = v.checked_mul(26)?.checked_add(u32::from(b - b'A'))?;
        n += 1;
    }
    (n >= 3).then_some(v)
}

/// The first trade id of a run; the loader's trades are below it (see [`loaded_trade_id`]). A run's
/// generators take [`TRADE_BLOCK`] ids at a time from one counter, so that ids grow with time
/// across workers (the by-account and by-security indexes order trades by id, standing for
/// T_DTS) at the cost of one shared increment per block.
pub const RUN_TRADES: u64 = 1 << 38;
/// Trade ids a generator takes at a time.
pub const TRADE_BLOCK: u64 = 64;
/// Trade ids stay below this (the keys give them 40 bits).
pub const MAX_TRADE: u64 = 1 << 40;

/// The id of the trade account `ca` made at second `second` of the initial trade history, of
/// `accounts` account numbers in all: ids follow time, then accounts, with room for one trade
/// per account per second.
pub fn loaded_trade_id(second: u64, accounts: u64, ca: u64) -> u64 {
    1 + second * accounts + ca
}

/// Company `co`'s name (`CO_NAME`) into `out`; returns its length.
pub fn company_name(co: u32, out: &mut [u8; 60]) -> usize {
    use std::io::Write;
    let mut w = &mut out[..];
    let _ = write!(w, "Company {co} Inc.");
    60 - w.len()
}

/// The key of a name in a by-name index: its FNV-1a hash.
pub fn name_key(name: &[u8]) -> u64 {
    name.iter()
        .take_while(|&&b| b != 0)
        .fold(0xCBF2_9CE4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3))
}

/// The issues a company's securities have, in the order of their numbers: a company's `k`-th
/// security (security `co + k · companies`) is issue `k`.
pub const ISSUES: [&[u8]; 5] = [b"COMMON", b"PREF_A", b"PREF_B", b"PREF_C", b"PREF_D"];

/// Composite keys. See the module docs.
pub mod key {
    /// Account permission `j` of account `ca`.
    pub fn account_permission(ca: u64, j: u32) -> u64 {
        (ca << 4) | u64::from(j)
    }
    /// Customer `c`'s j-th taxrate (0 or 1).
    pub fn customer_taxrate(c: u64, j: u32) -> u64 {
        (c << 1) | u64::from(j)
    }
    /// Security `s`'s market summary of day `day`.
    pub fn daily_market(s: u32, day: u32) -> u64 {
        (u64::from(s) << 12) | u64::from(day)
    }
    /// Company `co`'s quarter `q` (0 the oldest).
    pub fn financial(co: u64, q: u32) -> u64 {
        (co << 5) | u64::from(q)
    }
    /// Company `co`'s j-th competitor or news reference.
    pub fn company_j(co: u64, j: u32) -> u64 {
        (co << 2) | u64::from(j)
    }
    /// The holding of account `ca` in security `s` with sequence number `n`.
    pub fn holding(ca: u64, s: u32, n: u32) -> u64 {
        (holding_summary(ca, s) << 16) | u64::from(n & 0xFFFF)
    }
    /// The holding summary of account `ca` in security `s`.
    pub fn holding_summary(ca: u64, s: u32) -> u64 {
        (ca << 22) | u64::from(s)
    }
    /// The k-th holding history row trade `t` wrote.
    pub fn holding_history(t: u64, k: u32) -> u64 {
        (t << 24) | u64::from(k)
    }
    /// The n-th history row of the holding trade `h` created.
    pub fn holding_history_by(h: u64, n: u32) -> u64 {
        (h << 24) | u64::from(n)
    }
    /// Trade `t`'s history row of status `st`.
    pub fn trade_history(t: u64, st: u32) -> u64 {
        (t << 3) | u64::from(st)
    }
    /// Trade request of trade `t` in security `s`.
    pub fn trade_request(s: u32, t: u64) -> u64 {
        (u64::from(s) << 40) | t
    }
    /// Trade request of trade `t` through broker `b`.
    pub fn trade_request_by(b: u64, t: u64) -> u64 {
        (b << 40) | t
    }
    /// Trade `t` of account `ca` (below 2^24: [`super::MAX_CUSTOMERS`] customers of ten
    /// accounts) in the by-account index.
    pub fn trade_account(ca: u64, t: u64) -> u64 {
        (ca << 40) | t
    }
    /// Trade `t` in security `s` in the by-security index.
    pub fn trade_security(s: u32, t: u64) -> u64 {
        (u64::from(s) << 40) | t
    }
    /// Watch item `s` of customer `c`'s watch list.
    pub fn watch_item(c: u64, s: u32) -> u64 {
        (c << 22) | u64::from(s)
    }
    /// The commission rate of `tier` (1 to 3), trade type `tt`, exchange `ex` and quantity
    /// range `range` (0 to 3).
    pub fn commission_rate(tier: u32, tt: u32, ex: u32, range: u32) -> u64 {
        u64::from((((tier - 1) * 5 + tt) * 4 + ex) * 4 + range)
    }
    /// The charge of trade type `tt` for `tier` (1 to 3).
    pub fn charge(tt: u32, tier: u32) -> u64 {
        u64::from(tt * 3 + tier - 1)
    }
    /// Company `co`'s security of issue `k` in the by-company index.
    pub fn security_by_company(co: u64, k: u32) -> u64 {
        (co << 3) | u64::from(k)
    }
    /// The trade id in a trade-by-account, trade-by-security or trade-request key.
    pub fn trade_of(k: u64) -> u64 {
        k & ((1 << 40) - 1)
    }
}

/// The quantity range of the commission-rate table `qty` falls in: 0 to 3 for 1-199,
/// 200-399, 400-799, 800 and more.
pub fn quantity_range(qty: i32) -> u32 {
    match qty {
        ..=199 => 0,
        200..=399 => 1,
        400..=799 => 2,
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_spell_their_security_and_back() {
        assert_eq!(&symbol(0)[..4], b"AAA\0");
        assert_eq!(&symbol(27)[..4], b"ABB\0");
        assert_eq!(&symbol(26 * 26 * 26)[..5], b"BAAA\0");
        for s in [0, 1, 25, 26, 675, 17_575, 17_576, 684_999, MAX_CUSTOMERS] {
            assert_eq!(symbol_index(&symbol(s)), Some(s), "{s}");
        }
        assert_eq!(symbol_index(b"AB\0"), None);
        assert_eq!(symbol_index(b"A1C"), None);
    }

    #[test]
    fn keys_keep_their_fields_apart_and_ordered() {
        let max_ca = u64::from(MAX_CUSTOMERS) * 10;
        let max_s = MAX_CUSTOMERS / LOAD_UNIT * SECURITIES_PER_UNIT;
        assert!(max_ca < 1 << 24 && max_s < 1 << 22);
        assert!(key::holding(2, 0, 0) > key::holding(1, max_s, 0xFFFF));
        assert!(key::holding(1, 2, 0) > key::holding(1, 1, 0xFFFF));
        assert!(key::trade_account(2, 0) > key::trade_account(1, (1 << 40) - 1));
        assert_eq!(key::trade_of(key::trade_security(7, 12_345)), 12_345);
        assert_eq!(key::commission_rate(3, 4, 3, 3), 239);
        assert_eq!(key::charge(4, 3), 14);
    }

    #[test]
    fn row_widths_follow_the_specification() {
        assert_eq!(trade::SIZE, 8 + 8 + 4 + 3 + 1 + 15 + 4 + 8 + 8 + 49 + 8 * 4 + 1);
        assert_eq!(customer::NAMES.len(), 24);
        assert_eq!(news_item::SIZE, 100_411);
        assert_eq!(trade_type_of(b"TLB"), Some(trade_types::LIMIT_BUY));
        assert_eq!(status_of(b"PNDG"), Some(status::PENDING));
    }
}
