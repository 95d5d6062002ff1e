//! The initial population (clause 2.6): the fixed tables, the market (companies and their
//! financials, news and competitors; securities with their daily market and last trade), then
//! the customers, each with its accounts, permissions, tax rates and watch list, and its
//! accounts' initial trade history, played through the trading rules ([`super::market`]) so
//! that the trades, their histories, settlements and cash transactions, the holdings, their
//! histories and summaries, the balances and the brokers' totals agree, as if the run had made
//! them. Each customer, company and security draws from its own random stream, so the
//! population is the same whatever the thread count.

use super::market::{self, Lot, LotChange};
use super::schema::{self, key, status, trade_types as tt};
use super::tables::*;
use super::TpceConfig;
use crate::engine::loader::parallel_load;
use crate::engine::{Database, Loader, Protocol};
use crate::error::Error;
use crate::workloads::tpcc::random::TpccRand as Rand;
use std::sync::atomic::{AtomicI64, Ordering};

/// Seconds of trading per trade day.
pub const DAY_SECONDS: u64 = 8 * 3_600;
/// Percent of a Trade-Order's trades that are cash, not margin (clause 4: 8 % margin).
pub const CASH_PERCENT: u32 = 92;
/// Percent of trades that sell LIFO (the rest FIFO).
pub const LIFO_PERCENT: u32 = 35;

/// A random stream of its own for entity `n` of kind `kind`.
fn stream(seed: u64, kind: u64, n: u64) -> Rand {
    Rand::new(
        seed ^ kind.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03),
    )
}

/// The exchange security `s` trades on.
pub fn exchange_of(s: u32) -> u32 {
    s % schema::EXCHANGES
}
/// The company that issued security `s`, of `companies`.
pub fn company_of(s: u32, companies: u32) -> u32 {
    s % companies
}
/// Company `co`'s industry.
pub fn industry_of(co: u32) -> u32 {
    co.wrapping_mul(7) % schema::INDUSTRIES
}
/// Industry `i`'s sector.
pub fn sector_of(i: u32) -> u32 {
    i % schema::SECTORS
}
/// `CH_CHRG` of trade type `t` for `tier`, in cents: market orders cheaper, higher tiers less.
pub fn charge_of(t: u32, tier: u32) -> i64 {
    let base = if tt::is_market(t) { 500 } else { 1_000 };
    base + i64::from(3 - tier) * 250
}
/// `CR_RATE` (1/100 percent) of `tier`, trade type `t`, exchange `ex` and quantity range `r`:
/// 0.05 % to 0.50 %, lower for higher tiers and larger trades.
pub fn commission_rate_of(tier: u32, t: u32, ex: u32, r: u32) -> u32 {
    50 - (tier - 1) * 10 - r * 5 - (t % 2) * 2 - ex
}
/// `TX_RATE` (1/10 000) of tax rate `tx`.
pub fn tax_rate_of(tx: u32) -> u32 {
    100 + (tx * 37) % 1_900
}
/// The two tax rates of customer `c` (a country's, 0 to 9, and a division's, 10 to 319).
pub fn tax_ids_of(c: u64) -> [u32; 2] {
    [(c % 10) as u32, 10 + (c.wrapping_mul(2_654_435_761) % 310) as u32]
}
/// A customer's tax id: its number scrambled into 12 digits, and back.
pub fn tax_id_of(c: u64) -> u64 {
    (c.wrapping_mul(0x5851_F42D) ^ 0x2545_F491) % 1_000_000_000_000
}
/// Account `ca`'s balance before its initial trades, in cents ($10 000 to $50 000): a hash of
/// the seed and the account, so that the consistency check recomputes it.
pub fn initial_balance(seed: u64, ca: u64) -> i64 {
    let h = (seed ^ ca.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    1_000_000 + (h >> 11) as i64 % 4_000_001
}
/// Customer `c`'s tier and number of accounts, as the loader drew them (the first draws of
/// its stream), for the generators' inputs.
pub fn accounts_of(seed: u64, c: u64) -> (u32, u32) {
    tier_and_accounts(&mut stream(seed, 4, c))
}

/// A customer's tier (1 to 3, 20/60/20 %) and number of accounts (tier 1: 1 to 4, 2: 2 to 8,
/// 3: 3 to 10).
fn tier_and_accounts(r: &mut Rand) -> (u32, u32) {
    let tier = match r.uniform(1, 100) {
        1..=20 => 1,
        21..=80 => 2,
        _ => 3,
    };
    let accounts = match tier {
        1 => r.uniform(1, 4),
        2 => r.uniform(2, 8),
        _ => r.uniform(3, 10),
    };
    (tier, accounts)
}

/// Loads the whole population with up to `threads` threads; the initial trade history ends at
/// `load_time` (seconds).
pub fn load<P: Protocol>(
    db: &Database<P>,
    cfg: &TpceConfig,
    load_time: i64,
    threads: usize,
) -> Result<(), Error> {
    let seed = cfg.seed;
    parallel_load(db, 1, 1, 1, "fixed tables", |l, _| fixed(l, seed))?;
    let (companies, securities) = (cfg.companies(), cfg.securities());
    parallel_load(db, u64::from(companies), 256, threads, "companies", |l, ids| {
        ids.into_iter().try_for_each(|co| company(l, cfg, co as u32))
    })?;
    parallel_load(db, u64::from(securities), 16, threads, "securities", |l, ids| {
        ids.into_iter().try_for_each(|s| security(l, cfg, s as u32, load_time))
    })?;
    let brokers = cfg.brokers() as usize;
    let totals: Vec<(AtomicI64, AtomicI64)> =
        (0..brokers).map(|_| (AtomicI64::new(0), AtomicI64::new(0))).collect();
    parallel_load(db, u64::from(cfg.customers), 50, threads, "customers and trades", |l, ids| {
        let mut gen = Customers::new(cfg, load_time, &totals);
        ids.into_iter().try_for_each(|c| gen.customer(l, c))
    })?;
    parallel_load(db, brokers as u64, 1024, threads, "brokers", |l, ids| {
        use schema::broker::*;
        let mut row = [0u8; SIZE];
        for b in ids {
            // Relaxed: the customers' load joined before this one began.
            let (n, comm) = &totals[b as usize];
            set_i64(&mut row, B_ID, b as i64);
            set_str(&mut row, B_ST_ID, schema::STATUS_IDS[status::ACTIVE as usize]);
            set_str(&mut row, B_NAME, format!("Broker {b}").as_bytes());
            set_i64(&mut row, B_NUM_TRADES, n.load(Ordering::Relaxed));
            set_i64(&mut row, B_COMM_TOTAL, comm.load(Ordering::Relaxed));
            l.insert(BROKER, b, &row)?;
        }
        Ok(())
    })
}

/// The tables of constants: status and trade types, exchanges, sectors, industries, tax
/// rates, charges, commission rates and zip codes.
fn fixed<P: Protocol>(l: &mut Loader<'_, P>, seed: u64) -> Result<(), Error> {
    let mut r = stream(seed, 1, 0);
    for (i, id) in schema::STATUS_IDS.iter().enumerate() {
        use schema::status_type::*;
        let mut row = [0u8; SIZE];
        set_str(&mut row, ST_ID, &id[..]);
        set_str(&mut row, ST_NAME, schema::STATUS_NAMES[i].as_bytes());
        l.insert(STATUS_TYPE, i as u64, &row)?;
    }
    for (i, id) in schema::TRADE_TYPE_IDS.iter().enumerate() {
        use schema::trade_type::*;
        let mut row = [0u8; SIZE];
        set_str(&mut row, TT_ID, &id[..]);
        set_str(&mut row, TT_NAME, schema::TRADE_TYPE_NAMES[i].as_bytes());
        set_u8(&mut row, TT_IS_SELL, u8::from(tt::is_sell(i as u32)));
        set_u8(&mut row, TT_IS_MRKT, u8::from(tt::is_market(i as u32)));
        l.insert(TRADE_TYPE, i as u64, &row)?;
    }
    for (i, id) in schema::EXCHANGE_IDS.iter().enumerate() {
        use schema::exchange::*;
        let mut row = [0u8; SIZE];
        set_str(&mut row, EX_ID, id.as_bytes());
        set_str(&mut row, EX_NAME, format!("{id} Stock Exchange").as_bytes());
        set_u32(&mut row, EX_OPEN, 930);
        set_u32(&mut row, EX_CLOSE, 1_600);
        r.astring(get_mut(&mut row, EX_DESC), 50, 150);
        set_i64(&mut row, EX_AD_ID, i as i64);
        l.insert(EXCHANGE, i as u64, &row)?;
        address(l, &mut r, i as u64)?;
    }
    for sc in 0..schema::SECTORS {
        use schema::sector::*;
        let mut row = [0u8; SIZE];
        set_str(&mut row, SC_ID, format!("{sc:02}").as_bytes());
        set_str(&mut row, SC_NAME, format!("Sector {sc}").as_bytes());
        l.insert(SECTOR, u64::from(sc), &row)?;
    }
    for i in 0..schema::INDUSTRIES {
        use schema::industry::*;
        let mut row = [0u8; SIZE];
        set_str(&mut row, IN_ID, format!("{i:02}").as_bytes());
        set_str(&mut row, IN_NAME, format!("Industry {i}").as_bytes());
        set_str(&mut row, IN_SC_ID, format!("{:02}", sector_of(i)).as_bytes());
        l.insert(INDUSTRY, u64::from(i), &row)?;
    }
    for tx in 0..schema::TAXRATES {
        use schema::taxrate::*;
        let mut row = [0u8; SIZE];
        set_u32(&mut row, TX_ID, tx);
        set_str(&mut row, TX_NAME, format!("Tax rate {tx}").as_bytes());
        set_u32(&mut row, TX_RATE, tax_rate_of(tx));
        l.insert(TAXRATE, u64::from(tx), &row)?;
    }
    for t in 0..5 {
        for tier in 1..=schema::TIERS {
            use schema::charge::*;
            let mut row = [0u8; SIZE];
            set_str(&mut row, CH_TT_ID, &schema::TRADE_TYPE_IDS[t as usize][..]);
            set_u32(&mut row, CH_C_TIER, tier);
            set_i64(&mut row, CH_CHRG, charge_of(t, tier));
            l.insert(CHARGE, key::charge(t, tier), &row)?;
            for ex in 0..schema::EXCHANGES {
                for range in 0..4 {
                    use schema::commission_rate::*;
                    let mut row = [0u8; SIZE];
                    set_u32(&mut row, CR_C_TIER, tier);
                    set_str(&mut row, CR_TT_ID, &schema::TRADE_TYPE_IDS[t as usize][..]);
                    set_str(&mut row, CR_EX_ID, schema::EXCHANGE_IDS[ex as usize].as_bytes());
                    let from = [1, 200, 400, 800][range as usize];
                    set_u32(&mut row, CR_FROM_QTY, from);
                    set_u32(&mut row, CR_TO_QTY, [199, 399, 799, 1_000_000][range as usize]);
                    set_u32(&mut row, CR_RATE, commission_rate_of(tier, t, ex, range));
                    l.insert(COMMISSION_RATE, key::commission_rate(tier, t, ex, range), &row)?;
                }
            }
        }
    }
    for z in 0..schema::ZIP_CODES {
        use schema::zip_code::*;
        let mut row = [0u8; SIZE];
        set_str(&mut row, ZC_CODE, format!("{:05}", 10_000 + z * 6).as_bytes());
        r.astring(get_mut(&mut row, ZC_TOWN), 8, 30);
        r.astring(get_mut(&mut row, ZC_DIV), 2, 2);
        l.insert(ZIP_CODE, u64::from(z), &row)?;
    }
    Ok(())
}

/// Inserts address `ad`.
fn address<P: Protocol>(l: &mut Loader<'_, P>, r: &mut Rand, ad: u64) -> Result<(), Error> {
    use schema::address::*;
    let mut row = [0u8; SIZE];
    set_i64(&mut row, AD_ID, ad as i64);
    r.astring(get_mut(&mut row, AD_LINE1), 10, 40);
    r.astring(get_mut(&mut row, AD_LINE2), 0, 20);
    let zc = r.uniform(0, schema::ZIP_CODES - 1);
    set_str(&mut row, AD_ZC_CODE, format!("{:05}", 10_000 + zc * 6).as_bytes());
    set_str(&mut row, AD_CTRY, b"USA");
    l.insert(ADDRESS, ad, &row)?;
    Ok(())
}

/// Company `co` with its address, competitors, financials and news.
fn company<P: Protocol>(l: &mut Loader<'_, P>, cfg: &TpceConfig, co: u32) -> Result<(), Error> {
    let mut r = stream(cfg.seed, 2, u64::from(co));
    let companies = cfg.companies();
    let ad = u64::from(schema::EXCHANGES + co);
    {
        use schema::company::*;
        let mut row = [0u8; SIZE];
        set_i64(&mut row, CO_ID, i64::from(co));
        set_str(&mut row, CO_ST_ID, schema::STATUS_IDS[status::ACTIVE as usize]);
        let mut name = [0u8; 60];
        let n = schema::company_name(co, &mut name);
        set_str(&mut row, CO_NAME, &name[..n]);
        l.insert(COMPANY_BY_NAME, schema::name_key(&name[..n]), &i64::from(co).to_le_bytes())?;
        set_str(&mut row, CO_IN_ID, format!("{:02}", industry_of(co)).as_bytes());
        set_str(&mut row, CO_SP_RATE, [b"AAA", b"AA+", b"BBB", b"BB-"][co as usize % 4]);
        r.astring(get_mut(&mut row, CO_CEO), 10, 46);
        set_i64(&mut row, CO_AD_ID, ad as i64);
        r.astring(get_mut(&mut row, CO_DESC), 50, 150);
        set_i64(&mut row, CO_OPEN_DATE, 315_532_800 + i64::from(r.uniform(0, 900_000_000)));
        l.insert(COMPANY, u64::from(co), &row)?;
    }
    address(l, &mut r, ad)?;
    for j in 0..schema::COMPETITORS {
        use schema::company_competitor::*;
        let comp = (co + 1 + j * 7) % companies;
        let mut row = [0u8; SIZE];
        set_i64(&mut row, CP_CO_ID, i64::from(co));
        set_i64(&mut row, CP_COMP_CO_ID, i64::from(comp));
        set_str(&mut row, CP_IN_ID, format!("{:02}", industry_of(comp)).as_bytes());
        l.insert(COMPANY_COMPETITOR, key::company_j(u64::from(co), j), &row)?;
    }
    for q in 0..schema::QUARTERS {
        use schema::financial::*;
        let mut row = [0u8; SIZE];
        set_i64(&mut row, FI_CO_ID, i64::from(co));
        set_u32(&mut row, FI_YEAR, 2021 + q / 4);
        set_u32(&mut row, FI_QTR, q % 4 + 1);
        set_i64(&mut row, FI_QTR_START_DATE, 1_609_459_200 + i64::from(q) * 7_889_400);
        for c in [FI_REVENUE, FI_NET_EARN, FI_INVENTORY, FI_ASSETS, FI_LIABILITY] {
            set_i64(&mut row, c, r.uniform64(100_000, 1_000_000_000_000));
        }
        for c in [FI_BASIC_EPS, FI_DILUT_EPS, FI_MARGIN] {
            set_i64(&mut row, c, r.uniform64(-10_000, 10_000));
        }
        set_i64(&mut row, FI_OUT_BASIC, r.uniform64(4_000_000, 9_500_000_000));
        set_i64(&mut row, FI_OUT_DILUT, r.uniform64(4_000_000, 9_500_000_000));
        l.insert(FINANCIAL, key::financial(u64::from(co), q), &row)?;
    }
    for j in 0..schema::NEWS_PER_COMPANY {
        let ni = u64::from(co * schema::NEWS_PER_COMPANY + j);
        {
            use schema::news_item::*;
            let mut row = vec![0u8; SIZE];
            set_i64(&mut row, NI_ID, ni as i64);
            r.astring(get_mut(&mut row, NI_HEADLINE), 20, 80);
            r.astring(get_mut(&mut row, NI_SUMMARY), 100, 255);
            // The large object: a synthetic text, a drawn line repeated.
            let item = get_mut(&mut row, NI_ITEM);
            let n = r.astring(&mut item[..100], 100, 100);
            for i in n..item.len() {
                item[i] = item[i % n];
            }
            set_i64(&mut row, NI_DTS, 1_609_459_200 + i64::from(r.uniform(0, 150_000_000)));
            r.astring(get_mut(&mut row, NI_SOURCE), 10, 30);
            r.astring(get_mut(&mut row, NI_AUTHOR), 10, 30);
            l.insert(NEWS_ITEM, ni, &row)?;
        }
        use schema::news_xref::*;
        let mut row = [0u8; SIZE];
        set_i64(&mut row, NX_NI_ID, ni as i64);
        set_i64(&mut row, NX_CO_ID, i64::from(co));
        l.insert(NEWS_XREF, key::company_j(u64::from(co), j), &row)?;
    }
    Ok(())
}

/// The day `day` (0 the oldest) of the daily market, before `load_time`.
pub fn market_day(load_time: i64, day: u32) -> i64 {
    load_time - i64::from(schema::DAILY_MARKET_DAYS - day) * 86_400
}

/// Security `s` with its daily market and last trade.
fn security<P: Protocol>(
    l: &mut Loader<'_, P>,
    cfg: &TpceConfig,
    s: u32,
    load_time: i64,
) -> Result<(), Error> {
    let mut r = stream(cfg.seed, 3, u64::from(s));
    let co = company_of(s, cfg.companies());
    let sym = schema::symbol(s);
    {
        use schema::security::*;
        let mut row = [0u8; SIZE];
        set_str(&mut row, S_SYMB, &sym);
        let k = s / cfg.companies();
        set_str(&mut row, S_ISSUE, schema::ISSUES[k as usize]);
        let by = key::security_by_company(u64::from(co), k);
        l.insert(SECURITY_BY_COMPANY, by, &i64::from(s).to_le_bytes())?;
        set_str(&mut row, S_ST_ID, schema::STATUS_IDS[status::ACTIVE as usize]);
        set_str(&mut row, S_NAME, format!("Company {co} Inc. {}", s / cfg.companies()).as_bytes());
        set_str(&mut row, S_EX_ID, schema::EXCHANGE_IDS[exchange_of(s) as usize].as_bytes());
        set_i64(&mut row, S_CO_ID, i64::from(co));
        set_i64(&mut row, S_NUM_OUT, r.uniform64(4_000_000, 9_500_000_000));
        set_i64(&mut row, S_START_DATE, 315_532_800 + i64::from(r.uniform(0, 900_000_000)));
        set_i64(&mut row, S_EXCH_DATE, 315_532_800 + i64::from(r.uniform(0, 900_000_000)));
        set_i64(&mut row, S_PE, r.uniform64(100, 12_000));
        set_i64(&mut row, S_52WK_HIGH, market::PRICE_HIGH);
        set_i64(&mut row, S_52WK_HIGH_DATE, load_time - 86_400 * i64::from(r.uniform(1, 365)));
        set_i64(&mut row, S_52WK_LOW, market::PRICE_LOW);
        set_i64(&mut row, S_52WK_LOW_DATE, load_time - 86_400 * i64::from(r.uniform(1, 365)));
        set_i64(&mut row, S_DIVIDEND, r.uniform64(0, 2_000));
        set_i64(&mut row, S_YIELD, r.uniform64(0, 12_000));
        l.insert(SECURITY, u64::from(s), &row)?;
    }
    for day in 0..schema::DAILY_MARKET_DAYS {
        use schema::daily_market::*;
        let date = market_day(load_time, day);
        let close = market::price(s, date);
        let mut row = [0u8; SIZE];
        set_i64(&mut row, DM_DATE, date);
        set_str(&mut row, DM_S_SYMB, &sym);
        set_i64(&mut row, DM_CLOSE, close);
        set_i64(&mut row, DM_HIGH, (close + r.uniform64(0, 200)).min(market::PRICE_HIGH));
        set_i64(&mut row, DM_LOW, (close - r.uniform64(0, 200)).max(market::PRICE_LOW));
        set_i64(&mut row, DM_VOL, r.uniform64(1_000, 1_000_000));
        l.insert(DAILY_MARKET, key::daily_market(s, day), &row)?;
    }
    use schema::last_trade::*;
    let mut row = [0u8; SIZE];
    set_str(&mut row, LT_S_SYMB, &sym);
    set_i64(&mut row, LT_DTS, load_time);
    set_i64(&mut row, LT_PRICE, market::price(s, load_time));
    set_i64(&mut row, LT_OPEN_PRICE, market::price(s, load_time - DAY_SECONDS as i64));
    set_i64(&mut row, LT_VOL, 0);
    l.insert(LAST_TRADE, u64::from(s), &row)?;
    Ok(())
}

/// One loading thread's customer generator, with its reusable buffers.
struct Customers<'a> {
    cfg: &'a TpceConfig,
    load_time: i64,
    totals: &'a [(AtomicI64, AtomicI64)],
    seconds: Vec<u64>,
    /// Per security of the account's pool: its lots (oldest first) and next sequence number.
    positions: Vec<(u32, Vec<Lot>, u32)>,
    changes: Vec<LotChange>,
}

impl<'a> Customers<'a> {
    fn new(cfg: &'a TpceConfig, load_time: i64, totals: &'a [(AtomicI64, AtomicI64)]) -> Self {
        Customers {
            cfg,
            load_time,
            totals,
            seconds: Vec::new(),
            positions: Vec::new(),
            changes: Vec::new(),
        }
    }

    fn customer<P: Protocol>(&mut self, l: &mut Loader<'_, P>, c: u64) -> Result<(), Error> {
        let cfg = self.cfg;
        let mut r = stream(cfg.seed, 4, c);
        let (tier, accounts) = tier_and_accounts(&mut r);
        let ad = u64::from(schema::EXCHANGES + cfg.companies()) + c;
        let tax_id = format!("{:012}", tax_id_of(c));
        let mut first = [0u8; 20];
        let mut last = [0u8; 25];
        let nf = r.astring(&mut first, 3, 20);
        let nl = r.astring(&mut last, 3, 25);
        {
            use schema::customer::*;
            let mut row = [0u8; SIZE];
            set_i64(&mut row, C_ID, c as i64);
            set_str(&mut row, C_TAX_ID, tax_id.as_bytes());
            set_str(&mut row, C_ST_ID, schema::STATUS_IDS[status::ACTIVE as usize]);
            set_str(&mut row, C_L_NAME, &last[..nl]);
            set_str(&mut row, C_F_NAME, &first[..nf]);
            set_str(&mut row, C_M_NAME, &[b'A' + r.uniform(0, 25) as u8]);
            set_str(&mut row, C_GNDR, if r.uniform(0, 1) == 0 { b"M" } else { b"F" });
            set_u32(&mut row, C_TIER, tier);
            set_i64(&mut row, C_DOB, -631_152_000 + i64::from(r.uniform(0, 1_500_000_000)));
            set_i64(&mut row, C_AD_ID, ad as i64);
            for (ctry, area, local, ext) in [
                (C_CTRY_1, C_AREA_1, C_LOCAL_1, C_EXT_1),
                (C_CTRY_2, C_AREA_2, C_LOCAL_2, C_EXT_2),
                (C_CTRY_3, C_AREA_3, C_LOCAL_3, C_EXT_3),
            ] {
                set_str(&mut row, ctry, b"1");
                r.nstring(get_mut(&mut row, area), 3);
                r.nstring(get_mut(&mut row, local), 10);
                r.nstring(get_mut(&mut row, ext), 5);
            }
            set_str(&mut row, C_EMAIL_1, format!("c{c}@example.com").as_bytes());
            set_str(&mut row, C_EMAIL_2, format!("c{c}@example.net").as_bytes());
            l.insert(CUSTOMER, c, &row)?;
        }
        address(l, &mut r, ad)?;
        l.insert(CUSTOMER_BY_TAX, tax_id_of(c), &(c as i64).to_le_bytes())?;
        let taxes = tax_ids_of(c);
        for (j, tx) in taxes.iter().enumerate() {
            use schema::customer_taxrate::*;
            let mut row = [0u8; SIZE];
            set_u32(&mut row, CX_TX_ID, *tx);
            set_i64(&mut row, CX_C_ID, c as i64);
            l.insert(CUSTOMER_TAXRATE, key::customer_taxrate(c, j as u32), &row)?;
        }
        let tax_rate = taxes.iter().map(|&t| tax_rate_of(t)).sum::<u32>();
        {
            use schema::watch_list::*;
            let mut row = [0u8; SIZE];
            set_i64(&mut row, WL_ID, c as i64);
            set_i64(&mut row, WL_C_ID, c as i64);
            l.insert(WATCH_LIST, c, &row)?;
            let items = r.uniform(schema::WATCH_ITEMS / 2, schema::WATCH_ITEMS * 3 / 2);
            let mut row = [0u8; schema::watch_item::SIZE];
            let mut chosen = Vec::with_capacity(items as usize);
            while chosen.len() < items.min(cfg.securities()) as usize {
                use schema::watch_item::*;
                // Distinct securities: a repeat is drawn again.
                let s = r.uniform(0, cfg.securities() - 1);
                if chosen.contains(&s) {
                    continue;
                }
                chosen.push(s);
                set_i64(&mut row, WI_WL_ID, c as i64);
                set_str(&mut row, WI_S_SYMB, &schema::symbol(s));
                l.insert(WATCH_ITEM, key::watch_item(c, s), &row)?;
            }
        }
        // The owner's name, as trades record their executor.
        let mut name = Vec::with_capacity(49);
        name.extend_from_slice(&first[..nf]);
        name.push(b' ');
        name.extend_from_slice(&last[..nl]);
        name.truncate(49);
        for j in 0..accounts {
            let ca = c * u64::from(schema::MAX_ACCOUNTS) + u64::from(j);
            let b = r.uniform(0, cfg.brokers() - 1);
            let tax_status = r.uniform(0, 2);
            let perms = r.uniform(1, 3);
            for p in 0..perms {
                use schema::account_permission::*;
                let mut row = [0u8; SIZE];
                set_i64(&mut row, AP_CA_ID, ca as i64);
                set_str(&mut row, AP_ACL, if p == 0 { b"0000" } else { b"0011" });
                if p == 0 {
                    // The owner.
                    set_str(&mut row, AP_TAX_ID, tax_id.as_bytes());
                    set_str(&mut row, AP_L_NAME, &last[..nl]);
                    set_str(&mut row, AP_F_NAME, &first[..nf]);
                } else {
                    r.nstring(get_mut(&mut row, AP_TAX_ID), 12);
                    r.astring(get_mut(&mut row, AP_L_NAME), 3, 25);
                    r.astring(get_mut(&mut row, AP_F_NAME), 3, 20);
                }
                l.insert(ACCOUNT_PERMISSION, key::account_permission(ca, p), &row)?;
            }
            let share = f64::from(cfg.trades_per_customer()) / f64::from(accounts);
            let account = Account { ca, b, tier, tax_status, tax_rate, share, name: &name };
            let balance = self.trades(l, &mut r, &account)?;
            use schema::customer_account::*;
            let mut row = [0u8; SIZE];
            set_i64(&mut row, CA_ID, ca as i64);
            set_i64(&mut row, CA_B_ID, i64::from(b));
            set_i64(&mut row, CA_C_ID, c as i64);
            set_str(&mut row, CA_NAME, format!("Account {j} of customer {c}").as_bytes());
            set_u32(&mut row, CA_TAX_ST, tax_status);
            set_i64(&mut row, CA_BAL, balance);
            l.insert(CUSTOMER_ACCOUNT, ca, &row)?;
        }
        Ok(())
    }

    /// Account `a.ca`'s initial trade history, played through the trading rules; returns its
    /// balance after it.
    fn trades<P: Protocol>(
        &mut self,
        l: &mut Loader<'_, P>,
        r: &mut Rand,
        a: &Account<'_>,
    ) -> Result<i64, Error> {
        let Account { ca, b, tier, tax_status, tax_rate, name, .. } = *a;
        let cfg = self.cfg;
        let span = u64::from(cfg.trade_days) * DAY_SECONDS;
        let start = self.load_time - span as i64;
        let accounts = u64::from(cfg.customers) * u64::from(schema::MAX_ACCOUNTS);
        let mut balance = initial_balance(cfg.seed, ca);
        // The account trades a pool of 5 to 15 securities, its share of the customer's trades
        // give or take a half.
        let n = (a.share * f64::from(r.uniform(50, 150)) / 100.0).round() as u32;
        self.positions.clear();
        for _ in 0..r.uniform(5, 15) {
            let s = r.uniform(0, cfg.securities() - 1);
            if self.positions.iter().all(|p| p.0 != s) {
                self.positions.push((s, Vec::new(), 0));
            }
        }
        self.seconds.clear();
        self.seconds.extend((0..n).map(|_| r.uniform64(0, span as i64 - 1) as u64));
        self.seconds.sort_unstable();
        self.seconds.dedup();
        for i in 0..self.seconds.len() {
            let second = self.seconds[i];
            let t = schema::loaded_trade_id(second, accounts, ca);
            let dts = start + second as i64;
            let p = r.below(self.positions.len());
            let s = self.positions[p].0;
            let kind = match r.uniform(1, 100) {
                1..=30 => tt::MARKET_BUY,
                31..=60 => tt::MARKET_SELL,
                61..=80 => tt::LIMIT_BUY,
                81..=90 => tt::LIMIT_SELL,
                _ => tt::STOP_LOSS,
            };
            let qty = [100, 200, 400, 800][r.below(4)];
            let cash = r.uniform(1, 100) <= CASH_PERCENT;
            let lifo = r.uniform(1, 100) <= LIFO_PERCENT;
            let price = market::price(s, dts);
            let bid = if tt::is_market(kind) { price } else { price + r.uniform64(-200, 200) };
            // Limit orders of the last hour wait, half of them, for their price.
            let pending = !tt::is_market(kind) && span - second <= 3_600 && r.uniform(0, 1) == 0;
            let mut trade = Trade {
                t,
                dts,
                kind,
                s,
                qty,
                bid,
                cash,
                lifo,
                ca,
                ordered: dts,
                charge: charge_of(kind, tier),
                ..Trade::default()
            };
            let first = if tt::is_market(kind) { status::SUBMITTED } else { status::PENDING };
            l.insert(TRADE_HISTORY, key::trade_history(t, first), &history_row(t, dts, first))?;
            if pending {
                trade.status = status::PENDING;
                request(l, &trade, b)?;
            } else {
                if !tt::is_market(kind) {
                    l.insert(
                        TRADE_HISTORY,
                        key::trade_history(t, status::SUBMITTED),
                        &history_row(t, dts, status::SUBMITTED),
                    )?;
                }
                trade.status = status::COMPLETED;
                trade.price = price;
                let done = dts + 1;
                let (_, ref mut lots, ref mut next) = self.positions[p];
                let (gain, holdings_rows) = apply_lots(lots, next, &mut self.changes, &trade, done);
                for row in holdings_rows.iter() {
                    l.insert(HOLDING_HISTORY, row.0, &row.1)?;
                    l.insert(HOLDING_HISTORY_BY, row.2, &row.3)?;
                }
                let rate =
                    commission_rate_of(tier, kind, exchange_of(s), schema::quantity_range(qty));
                let terms =
                    market::Terms { kind, qty, price, charge: trade.charge, commission_rate: rate };
                let x = market::execute(terms, gain, tax_status, tax_rate);
                trade.commission = x.commission;
                trade.tax = x.tax;
                trade.dts = done;
                settle(l, &trade, x.settlement, done)?;
                if cash {
                    balance += x.settlement;
                }
                let totals = &self.totals[b as usize];
                // Relaxed: sums read after the load's threads are joined.
                totals.0.fetch_add(1, Ordering::Relaxed);
                totals.1.fetch_add(x.commission, Ordering::Relaxed);
            }
            trade.exec_name = name;
            insert_trade(l, &trade)?;
        }
        for (s, lots, next) in &self.positions {
            if lots.is_empty() {
                continue;
            }
            let mut total = 0;
            for lot in lots {
                use schema::holding::*;
                let mut row = [0u8; SIZE];
                set_i64(&mut row, H_T_ID, lot.trade as i64);
                set_i64(&mut row, H_CA_ID, ca as i64);
                set_str(&mut row, H_S_SYMB, &schema::symbol(*s));
                set_i64(&mut row, H_DTS, lot.dts);
                set_i64(&mut row, H_PRICE, lot.price);
                set_i32(&mut row, H_QTY, lot.qty);
                set_u32(&mut row, H_HIST_N, lot.hist);
                l.insert(HOLDING, key::holding(ca, *s, lot.n), &row)?;
                total += lot.qty;
            }
            use schema::holding_summary::*;
            let mut row = [0u8; SIZE];
            set_i64(&mut row, HS_CA_ID, ca as i64);
            set_str(&mut row, HS_S_SYMB, &schema::symbol(*s));
            set_i32(&mut row, HS_QTY, total);
            set_u32(&mut row, HS_NEXT, *next);
            l.insert(HOLDING_SUMMARY, key::holding_summary(ca, *s), &row)?;
        }
        Ok(balance)
    }
}

/// An account as its trade history needs it.
struct Account<'n> {
    ca: u64,
    b: u32,
    tier: u32,
    tax_status: u32,
    /// The customer's tax rate (1/10 000).
    tax_rate: u32,
    /// The trades it makes on average: its share of its customer's.
    share: f64,
    /// The owner's name, the trades' executor.
    name: &'n [u8],
}

/// A trade as the loader builds it.
#[derive(Default)]
struct Trade<'n> {
    t: u64,
    dts: i64,
    status: u32,
    kind: u32,
    s: u32,
    qty: i32,
    bid: i64,
    cash: bool,
    lifo: bool,
    ca: u64,
    exec_name: &'n [u8],
    /// When it was ordered (the trade indexes' `TB_DTS`).
    ordered: i64,
    price: i64,
    charge: i64,
    commission: i64,
    tax: i64,
}

/// A holding history row and its by-holding index entry: keys and rows.
type HistoryRows =
    (u64, [u8; schema::holding_history::SIZE], u64, [u8; schema::holding_history_by::SIZE]);

/// Applies `trade` (completing at `done`) to a position's `lots`, as Trade-Result does;
/// returns the gain of the shares it closed and the holding history rows it writes.
fn apply_lots(
    lots: &mut Vec<Lot>,
    next: &mut u32,
    changes: &mut Vec<LotChange>,
    trade: &Trade<'_>,
    done: i64,
) -> (i64, Vec<HistoryRows>) {
    let sell = tt::is_sell(trade.kind);
    let (left, buy_value, sell_value) =
        market::trade_lots(lots, sell, trade.lifo, trade.qty, trade.price, changes);
    let mut rows = Vec::with_capacity(changes.len() + 1);
    let mut k = 0;
    for ch in changes.iter() {
        let lot = lots.iter_mut().find(|l| l.trade == ch.lot.trade).expect("a changed lot");
        rows.push(history_rows(trade.t, k, lot, ch.lot.qty, ch.after));
        lot.qty = ch.after;
        k += 1;
    }
    lots.retain(|l| l.qty != 0);
    if left > 0 {
        let qty = if sell { -left } else { left };
        let mut lot = Lot { trade: trade.t, n: *next, price: trade.price, qty, dts: done, hist: 0 };
        *next = (*next + 1) & 0xFFFF;
        rows.push(history_rows(trade.t, k, &mut lot, 0, qty));
        lots.push(lot);
    }
    (sell_value - buy_value, rows)
}

/// The holding history row trade `t` writes as its `k`-th for `lot` (whose history count it
/// advances), and the row's by-holding entry.
fn history_rows(t: u64, k: u32, lot: &mut Lot, before: i32, after: i32) -> HistoryRows {
    let mut hh = [0u8; schema::holding_history::SIZE];
    {
        use schema::holding_history::*;
        set_i64(&mut hh, HH_H_T_ID, lot.trade as i64);
        set_i64(&mut hh, HH_T_ID, t as i64);
        set_i32(&mut hh, HH_BEFORE_QTY, before);
        set_i32(&mut hh, HH_AFTER_QTY, after);
    }
    let mut by = [0u8; schema::holding_history_by::SIZE];
    {
        use schema::holding_history_by::*;
        set_i64(&mut by, HB_T_ID, t as i64);
        set_u32(&mut by, HB_K, k);
    }
    let n = lot.hist;
    lot.hist += 1;
    (key::holding_history(t, k), hh, key::holding_history_by(lot.trade, n), by)
}

/// A TRADE_HISTORY row.
pub fn history_row(t: u64, dts: i64, st: u32) -> [u8; schema::trade_history::SIZE] {
    use schema::trade_history::*;
    let mut row = [0u8; SIZE];
    set_i64(&mut row, TH_T_ID, t as i64);
    set_i64(&mut row, TH_DTS, dts);
    set_str(&mut row, TH_ST_ID, &schema::STATUS_IDS[st as usize][..]);
    row
}

fn request<P: Protocol>(l: &mut Loader<'_, P>, trade: &Trade<'_>, b: u32) -> Result<(), Error> {
    {
        use schema::trade_request::*;
        let mut row = [0u8; SIZE];
        set_i64(&mut row, TR_T_ID, trade.t as i64);
        set_str(&mut row, TR_TT_ID, &schema::TRADE_TYPE_IDS[trade.kind as usize][..]);
        set_str(&mut row, TR_S_SYMB, &schema::symbol(trade.s));
        set_i32(&mut row, TR_QTY, trade.qty);
        set_i64(&mut row, TR_BID_PRICE, trade.bid);
        set_i64(&mut row, TR_B_ID, i64::from(b));
        l.insert(TRADE_REQUEST, key::trade_request(trade.s, trade.t), &row)?;
    }
    use schema::trade_request_by::*;
    let mut row = [0u8; SIZE];
    set_u32(&mut row, RB_S, trade.s);
    set_i32(&mut row, RB_QTY, trade.qty);
    set_i64(&mut row, RB_BID_PRICE, trade.bid);
    l.insert(TRADE_REQUEST_BY, key::trade_request_by(u64::from(b), trade.t), &row)?;
    Ok(())
}

/// The trade's settlement, cash transaction (for a cash trade) and completion history.
fn settle<P: Protocol>(
    l: &mut Loader<'_, P>,
    trade: &Trade<'_>,
    amount: i64,
    done: i64,
) -> Result<(), Error> {
    l.insert(
        TRADE_HISTORY,
        key::trade_history(trade.t, status::COMPLETED),
        &history_row(trade.t, done, status::COMPLETED),
    )?;
    l.insert(SETTLEMENT, trade.t, &settlement_row(trade.t, trade.cash, done, amount))?;
    if trade.cash {
        l.insert(
            CASH_TRANSACTION,
            trade.t,
            &cash_row(trade.t, done, amount, trade.kind, trade.qty, trade.s),
        )?;
    }
    Ok(())
}

/// A SETTLEMENT row: due two days after `done`.
pub fn settlement_row(
    t: u64,
    cash: bool,
    done: i64,
    amount: i64,
) -> [u8; schema::settlement::SIZE] {
    use schema::settlement::*;
    let mut row = [0u8; SIZE];
    set_i64(&mut row, SE_T_ID, t as i64);
    set_str(&mut row, SE_CASH_TYPE, if cash { b"Cash Account" } else { b"Margin" });
    set_i64(&mut row, SE_CASH_DUE_DATE, done + 2 * 86_400);
    set_i64(&mut row, SE_AMT, amount);
    row
}

/// A CASH_TRANSACTION row.
pub fn cash_row(
    t: u64,
    done: i64,
    amount: i64,
    kind: u32,
    qty: i32,
    s: u32,
) -> [u8; schema::cash_transaction::SIZE] {
    use schema::cash_transaction::*;
    let mut row = [0u8; SIZE];
    set_i64(&mut row, CT_T_ID, t as i64);
    set_i64(&mut row, CT_DTS, done);
    set_i64(&mut row, CT_AMT, amount);
    let sym = schema::symbol(s);
    let n = sym.iter().position(|&b| b == 0).unwrap_or(15);
    let name = format!(
        "{} {qty} shares of {}",
        schema::TRADE_TYPE_NAMES[kind as usize],
        std::str::from_utf8(&sym[..n]).unwrap_or("?")
    );
    set_str(&mut row, CT_NAME, name.as_bytes());
    row
}

fn insert_trade<P: Protocol>(l: &mut Loader<'_, P>, t: &Trade<'_>) -> Result<(), Error> {
    use schema::trade::*;
    let mut row = [0u8; SIZE];
    set_i64(&mut row, T_ID, t.t as i64);
    set_i64(&mut row, T_DTS, t.dts);
    set_str(&mut row, T_ST_ID, &schema::STATUS_IDS[t.status as usize][..]);
    set_str(&mut row, T_TT_ID, &schema::TRADE_TYPE_IDS[t.kind as usize][..]);
    set_u8(&mut row, T_IS_CASH, u8::from(t.cash));
    set_str(&mut row, T_S_SYMB, &schema::symbol(t.s));
    set_i32(&mut row, T_QTY, t.qty);
    set_i64(&mut row, T_BID_PRICE, t.bid);
    set_i64(&mut row, T_CA_ID, t.ca as i64);
    set_str(&mut row, T_EXEC_NAME, t.exec_name);
    set_i64(&mut row, T_TRADE_PRICE, t.price);
    set_i64(&mut row, T_CHRG, t.charge);
    set_i64(&mut row, T_COMM, t.commission);
    set_i64(&mut row, T_TAX, t.tax);
    set_u8(&mut row, T_LIFO, u8::from(t.lifo));
    l.insert(TRADE, t.t, &row)?;
    let by = t.ordered.to_le_bytes();
    l.insert(TRADE_BY_ACCOUNT, key::trade_account(t.ca, t.t), &by)?;
    l.insert(TRADE_BY_SECURITY, key::trade_security(t.s, t.t), &by)?;
    Ok(())
}
