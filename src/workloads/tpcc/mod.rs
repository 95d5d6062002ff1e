//! TPC-C (specification revision 5.11): nine tables, the clause 4.3 population, the five
//! transactions with the 45/43/4/4/4 mix, and the consistency conditions of clause 3.3.2.
//!
//! * [`schema`]: row layouts (with column masks for templates) and composite keys.
//! * [`random`]: NURand and its run-time constants, strings, last names.
//! * [`load`]: the population, warehouse by warehouse, in parallel.
//! * [`txns`]: the procedures, their declared access sets and piece templates.
//! * [`consistency`]: conditions 1-10 and 12, checked after every run.
//!
//! Beside the specification, an optional sixth transaction (`--analytic`): the read-mostly
//! analytic transaction ERMIA's evaluation adds to TPC-E (ERMIA §4.2, Fig. 5), transposed to
//! TPC-C. It scans a fraction of one warehouse's stock (`--analytic-scan`, 1 % to 60 % in the
//! paper's sweep), joins the range with the items of one district's last 20 orders (their
//! prices from ITEM), aggregates, and inserts one row into a table of its own,
//! `analytic_history`. Its stock reads are the columns NewOrder writes, so its conflicts grow
//! with the scan, as the paper's grow with the customer group it values.
//!
//! Inserts (orders, order lines, new orders, history) and deletes (delivered new orders) are
//! real, and range scans (customer by last name, a customer's latest order, Delivery's oldest
//! new order, Stock-Level's last 20 orders) go through the protocols' phantom protection. Two
//! secondary indexes are tables of their own: CUSTOMER by (W, D, C_LAST, C_ID) carrying C_FIRST,
//! and ORDER by (W, D, C_ID, O_ID).

pub mod consistency;
pub mod load;
pub mod random;
pub mod schema;
pub mod txns;

use crate::engine::loader::parallel_load;
use crate::engine::{Database, Generator, Protocol, TxnType, Workload};
use crate::error::Error;
use crate::storage::index::IndexKind;
use crate::storage::TableSpec;
use random::{NuConstants, TpccRand};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use txns::{Kind, TpccTxn};

/// Table ids, in [`Tpcc::tables`] order.
pub mod tables {
    use crate::storage::TableId;
    /// WAREHOUSE.
    pub const WAREHOUSE: TableId = TableId(0);
    /// DISTRICT.
    pub const DISTRICT: TableId = TableId(1);
    /// CUSTOMER.
    pub const CUSTOMER: TableId = TableId(2);
    /// HISTORY.
    pub const HISTORY: TableId = TableId(3);
    /// NEW-ORDER.
    pub const NEW_ORDER: TableId = TableId(4);
    /// ORDER.
    pub const ORDER: TableId = TableId(5);
    /// ORDER-LINE.
    pub const ORDER_LINE: TableId = TableId(6);
    /// ITEM.
    pub const ITEM: TableId = TableId(7);
    /// STOCK.
    pub const STOCK: TableId = TableId(8);
    /// Secondary index: customers by last name.
    pub const CUSTOMER_NAME: TableId = TableId(9);
    /// Secondary index: orders by customer.
    pub const ORDER_CUSTOMER: TableId = TableId(10);
    /// ANALYTIC_HISTORY (not in TPC-C): exists only with the analytic transaction.
    pub const ANALYTIC_HISTORY: TableId = TableId(11);
}

/// The default mix, in percent: NewOrder, Payment, Order-Status, Delivery, Stock-Level.
pub const DEFAULT_MIX: [u32; 5] = [45, 43, 4, 4, 4];
/// NewOrder and Payment only, half each: the mix of DBx1000's and Cicada's "TPC-C-NP". Their
/// published runs also turn the inserts off, which is [`Simplification::NoInserts`] here; by
/// default the transactions insert what the specification says.
pub const NP_MIX: [u32; 5] = [50, 50, 0, 0, 0];

/// A departure from the specification, off unless asked for; each one in use is printed with
/// the results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Simplification {
    /// Every access is to the home warehouse: no remote supply warehouses (1 % of order lines)
    /// and no remote Payment customers (15 %).
    NoRemote,
    /// No NewOrder is rolled back (the specification rolls back 1 % with an invalid item).
    NoRollback,
    /// Payment and Order-Status always select the customer by id (the specification selects
    /// 60 % by last name through the name index).
    CustomerById,
    /// NewOrder inserts no ORDER, NEW-ORDER, ORDER-LINE or order-by-customer row (it still
    /// takes its order number from D_NEXT_O_ID and updates the stock) and Payment no HISTORY
    /// row: the TPC-C-NP of DBx1000's and Cicada's published runs (DBx1000's
    /// `TPCC_INSERT_ROWS` off). Only with NewOrder and Payment in the mix, whose other types
    /// read the rows NewOrder inserts; the consistency conditions that need those rows (8, 9
    /// and 10, and condition 2's equality) are not checked.
    NoInserts,
}

impl Simplification {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Simplification::NoRemote => "no-remote",
            Simplification::NoRollback => "no-rollback",
            Simplification::CustomerById => "customer-by-id",
            Simplification::NoInserts => "no-inserts",
        }
    }
}

/// How workers choose the warehouse of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum WarehouseChoice {
    /// Worker i is bound to warehouse (i mod W) + 1, like a TPC-C terminal to its warehouse.
    Home,
    /// Every transaction picks its warehouse uniformly at random.
    Random,
}

/// The analytic transaction (not in the specification; see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AnalyticConfig {
    /// Percent of all transactions that are analytic (1 to 100); the five-way mix shares the
    /// rest in its proportions, as ERMIA's TPC-E mix does around its 20 % of analytics.
    pub share: u32,
    /// Percent of the warehouse's stock each analytic transaction scans (more than 0, at most
    /// 100; ERMIA's Fig. 5 varies its scan from 1 % to 60 %).
    pub scan: f64,
}

impl AnalyticConfig {
    /// `--analytic-scan`'s default, the scan of ERMIA's Fig. 6.
    pub const DEFAULT_SCAN: f64 = 20.0;

    /// The stock rows one analytic transaction reads: `scan` percent of a warehouse's items.
    pub fn items(&self) -> u32 {
        (f64::from(schema::ITEMS) * self.scan / 100.0).round() as u32
    }
}

/// TPC-C's parameters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TpccConfig {
    /// Warehouses (1 to [`schema::MAX_WAREHOUSES`]).
    pub warehouses: u32,
    /// Percent of NewOrder, Payment, Order-Status, Delivery, Stock-Level (sums to 100).
    pub mix: [u32; 5],
    /// Home-warehouse binding.
    pub warehouse_choice: WarehouseChoice,
    /// Departures from the specification in use (none by default).
    pub simplifications: Vec<Simplification>,
    /// Seed of the population and of the NURand constants.
    pub seed: u64,
    /// The analytic transaction, when in the mix (off by default).
    pub analytic: Option<AnalyticConfig>,
}

impl TpccConfig {
    /// The specification's defaults for `warehouses`.
    pub fn new(warehouses: u32) -> Self {
        TpccConfig {
            warehouses,
            mix: DEFAULT_MIX,
            warehouse_choice: WarehouseChoice::Home,
            simplifications: Vec::new(),
            seed: 1,
            analytic: None,
        }
    }

    /// Parses a mix written as five comma-separated percentages.
    pub fn parse_mix(text: &str) -> Result<[u32; 5], String> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        if parts.len() != 5 {
            return Err(format!(
                "--mix '{text}' needs five comma-separated percentages (new-order, payment, \
                 order-status, delivery, stock-level), e.g. 45,43,4,4,4"
            ));
        }
        let mut mix = [0u32; 5];
        for (slot, p) in mix.iter_mut().zip(&parts) {
            *slot = p.parse().map_err(|_| {
                format!("--mix '{text}': '{p}' is not a whole percentage (0 to 100)")
            })?;
        }
        Ok(mix)
    }

    /// Checks the ranges; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.warehouses == 0 || u64::from(self.warehouses) > schema::MAX_WAREHOUSES {
            return Err(format!(
                "--warehouses {} is out of range (1 to {})",
                self.warehouses,
                schema::MAX_WAREHOUSES
            ));
        }
        let sum: u64 = self.mix.iter().map(|&p| u64::from(p)).sum();
        if sum != 100 {
            let m: Vec<String> = self.mix.iter().map(u32::to_string).collect();
            return Err(format!("--mix {} sums to {sum}, not 100", m.join(",")));
        }
        if self.has(Simplification::NoInserts)
            && (self.mix[2..].iter().any(|&p| p > 0) || self.analytic.is_some())
        {
            return Err("--simplify no-inserts needs a mix of NewOrder and Payment only (--np): \
                        Order-Status, Delivery, Stock-Level and the analytic transaction read the \
                        rows NewOrder inserts"
                .into());
        }
        if let Some(a) = &self.analytic {
            if !(1..=100).contains(&a.share) {
                return Err(format!(
                    "--analytic {} is out of range (1 to 100 percent of the transactions)",
                    a.share
                ));
            }
            if !(a.scan > 0.0 && a.scan <= 100.0) {
                return Err(format!(
                    "--analytic-scan {} is out of range (more than 0, at most 100 percent of a \
                     warehouse's stock)",
                    a.scan
                ));
            }
            if a.items() == 0 {
                return Err(format!(
                    "--analytic-scan {} scans no stock row (one row is {} percent)",
                    a.scan,
                    100.0 / f64::from(schema::ITEMS)
                ));
            }
        }
        Ok(())
    }

    /// Whether NewOrder and Payment insert their rows (see [`Simplification::NoInserts`]).
    pub fn inserts(&self) -> bool {
        !self.has(Simplification::NoInserts)
    }

    fn has(&self, s: Simplification) -> bool {
        self.simplifications.contains(&s)
    }

    /// One line describing the configuration, with every simplification in use.
    pub fn summary(&self) -> String {
        let mix = if self.mix == NP_MIX {
            "NewOrder+Payment only (TPC-C-NP, 50/50)".to_string()
        } else {
            let m: Vec<String> = self.mix.iter().map(u32::to_string).collect();
            format!("mix {} (new-order/payment/order-status/delivery/stock-level)", m.join("/"))
        };
        let simplified = if self.simplifications.is_empty() {
            "no simplifications".to_string()
        } else {
            let s: Vec<&str> = self.simplifications.iter().map(|s| s.name()).collect();
            format!("SIMPLIFIED: {}", s.join(", "))
        };
        let analytic = match &self.analytic {
            Some(a) => format!(
                ", {} % analytic transactions scanning {} % of a warehouse's stock ({} rows), \
                 the mix sharing the rest",
                a.share,
                a.scan,
                a.items()
            ),
            None => String::new(),
        };
        format!(
            "TPC-C: {} warehouse(s), {mix}{analytic}, {} warehouses, {simplified}",
            self.warehouses,
            match self.warehouse_choice {
                WarehouseChoice::Home => "home",
                WarehouseChoice::Random => "random",
            }
        )
    }
}

/// The TPC-C workload.
pub struct Tpcc {
    cfg: TpccConfig,
    nu: NuConstants,
    /// Numbers generators (each one's history rows get their own key range); 0 is the loader.
    generators: Arc<AtomicU64>,
    /// Rows each growing table may reach, fixed at creation from the memory available.
    growth: Growth,
}

/// Bytes one committed NewOrder adds at most (order, new order, order-by-customer, 15 lines,
/// index entries), with room for a protocol header.
const BYTES_PER_NEW_ORDER: u64 = 3 * 128 + 15 * 128 + 19 * 48;
/// Bytes one committed Payment adds (its history row and index entry).
const BYTES_PER_PAYMENT: u64 = 128 + 48;
/// Bytes one committed analytic transaction adds (its analytic-history row and index entry).
const BYTES_PER_ANALYTIC: u64 = 128 + 48;

/// Rows the growing tables get room for, beyond the loaded ones.
#[derive(Clone, Copy, Debug)]
struct Growth {
    /// New orders (an order, a new order and an order-by-customer row each; up to 15 lines).
    orders: u64,
    /// Payments (a history row each).
    payments: u64,
    /// Analytic transactions (an analytic-history row each); 0 without them.
    analytics: u64,
}

impl Growth {
    /// No room beyond the loaded rows (for memory estimates before creating the workload).
    const NONE: Growth = Growth { orders: 0, payments: 0, analytics: 0 };

    /// Splits `budget` bytes between NewOrder's and Payment's rows in the ratio of `mix`, so a
    /// Payment-heavy mix gets a longer history table rather than order tables it never fills.
    ///
    /// The history table gets at least an eighth of the budget whenever Payment is in the mix.
    /// Its rows are an eighteenth of a NewOrder's bytes, so this costs the order tables little,
    /// and commits need not follow the mix: nocc, which hands one order id to two concurrent
    /// NewOrders and drops the second, commits four Payments per NewOrder at one warehouse and
    /// two threads, and filled a mix-sized history table within a few seconds.
    fn for_mix(budget: u64, mix: &[u32; 5]) -> Self {
        let (no, pay) = (u64::from(mix[0]), u64::from(mix[1]));
        let per_hundred = (no * BYTES_PER_NEW_ORDER + pay * BYTES_PER_PAYMENT).max(1);
        let hundreds = budget / per_hundred;
        let (mut orders, mut payments) = (hundreds * no, hundreds * pay);
        let floor = budget / 8 / BYTES_PER_PAYMENT;
        if pay > 0 && payments < floor {
            payments = floor;
            orders =
                if no > 0 { (budget - floor * BYTES_PER_PAYMENT) / BYTES_PER_NEW_ORDER } else { 0 };
        }
        Growth { orders: orders.max(Self::MIN), payments: payments.max(Self::MIN), analytics: 0 }
    }

    /// Rows a growing table gets at least.
    const MIN: u64 = 1 << 16;

    /// [`Growth::for_mix`] for `cfg`'s mix; with the analytic transaction, its table takes a
    /// sixteenth of `budget` first (an analytic transaction reads at least a hundred rows per
    /// row it inserts, so this is room for far longer runs than the order tables allow).
    fn for_config(budget: u64, cfg: &TpccConfig) -> Self {
        match cfg.analytic {
            None => Self::for_mix(budget, &cfg.mix),
            Some(_) => {
                let analytic = budget / 16;
                let rows = (analytic / BYTES_PER_ANALYTIC).max(Self::MIN);
                Growth { analytics: rows, ..Self::for_mix(budget - analytic, &cfg.mix) }
            }
        }
    }
}

impl Tpcc {
    /// The workload for `cfg` (validated).
    pub fn new(cfg: TpccConfig) -> Self {
        let loaded: u64 = Self::tables_with(&cfg, Growth::NONE)
            .iter()
            .map(|s| s.estimated_bytes::<[u64; 2]>())
            .sum();
        // Growing tables may use half of the memory left after loading; a run that orders more
        // stops with a clear "table full" error instead of exhausting the machine.
        let avail = crate::storage::available_memory().unwrap_or(8 << 30);
        let growth = Growth::for_config(avail.saturating_sub(loaded) / 2, &cfg);
        Tpcc {
            nu: NuConstants::draw(cfg.seed),
            cfg,
            generators: Arc::new(AtomicU64::new(1)),
            growth,
        }
    }

    /// The configuration.
    pub fn config_ref(&self) -> &TpccConfig {
        &self.cfg
    }

    /// The tables for `cfg` (for memory checks before creating the workload).
    pub fn tables_for(cfg: &TpccConfig) -> Vec<TableSpec> {
        Self::tables_with(cfg, Growth::NONE)
    }

    fn tables_with(cfg: &TpccConfig, growth: Growth) -> Vec<TableSpec> {
        let w = u64::from(cfg.warehouses);
        let districts = w * u64::from(schema::DISTRICTS);
        let customers = districts * u64::from(schema::CUSTOMERS);
        let orders = districts * u64::from(schema::ORDERS);
        // Slots are handed to each loading or running thread in chunks, so even a table that
        // never grows needs room for the chunks threads keep partly used.
        const SLACK: u64 = 1 << 16;
        let fixed =
            |name: &str, size: usize, rows: u64, cols: Vec<(&'static str, usize, usize)>| {
                TableSpec::new(name, size, rows)
                    .with_index(IndexKind::Hash)
                    .with_capacity(rows + SLACK)
                    .with_columns(&cols)
            };
        let growing = |name: &str,
                       size: usize,
                       rows: u64,
                       more: u64,
                       cols: Vec<(&'static str, usize, usize)>| {
            // Keys of growing tables count up within a district (or a worker's history), so
            // they fill the dense index's leaves; an insert is then one CAS.
            TableSpec::new(name, size, rows)
                .with_index(IndexKind::Dense)
                .with_capacity(rows.saturating_add(more).saturating_add(SLACK))
                .with_columns(&cols)
        };
        let mut tables = vec![
            fixed("warehouse", schema::warehouse::SIZE, w, schema::warehouse::columns()),
            fixed("district", schema::district::SIZE, districts, schema::district::columns()),
            fixed("customer", schema::customer::SIZE, customers, schema::customer::columns()),
            growing(
                "history",
                schema::history::SIZE,
                customers,
                growth.payments,
                schema::history::columns(),
            ),
            growing(
                "new_order",
                schema::new_order::SIZE,
                districts * u64::from(schema::ORDERS - schema::FIRST_UNDELIVERED + 1),
                growth.orders,
                schema::new_order::columns(),
            ),
            growing("order", schema::order::SIZE, orders, growth.orders, schema::order::columns()),
            // One phantom bucket per order: Stock-Level's scan of 20 orders never conflicts
            // with the next order's inserts.
            growing(
                "order_line",
                schema::order_line::SIZE,
                orders * 10,
                growth.orders * 15,
                schema::order_line::columns(),
            )
            .with_phantom_shift(4),
            fixed("item", schema::item::SIZE, u64::from(schema::ITEMS), schema::item::columns()),
            fixed(
                "stock",
                schema::stock::SIZE,
                w * u64::from(schema::ITEMS),
                schema::stock::columns(),
            ),
            // One phantom bucket per (warehouse, district, last name).
            TableSpec::new("customer_name", schema::customer_name::SIZE, customers)
                .with_capacity(customers + SLACK)
                .with_phantom_shift(12)
                .with_columns(&schema::customer_name::columns()),
            // One phantom bucket per customer: a customer's new order conflicts with a scan of
            // that customer's orders only.
            growing(
                "order_customer",
                schema::order_customer::SIZE,
                orders,
                growth.orders,
                schema::order_customer::columns(),
            )
            // Sparse keys (a customer's order ids are scattered): the radix tree.
            .with_index(IndexKind::Ordered)
            .with_phantom_shift(32),
        ];
        if cfg.analytic.is_some() {
            tables.push(growing(
                "analytic_history",
                schema::analytic_history::SIZE,
                0,
                growth.analytics,
                schema::analytic_history::columns(),
            ));
        }
        tables
    }
}

impl Workload for Tpcc {
    type Proc = TpccTxn;
    type Gen = TpccGen;

    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn tables(&self) -> Vec<TableSpec> {
        Self::tables_with(&self.cfg, self.growth)
    }

    fn txn_types(&self) -> &[TxnType] {
        let n = if self.cfg.analytic.is_some() { 6 } else { 5 };
        &txns::TYPES[..n]
    }

    fn load<P: Protocol>(&self, db: &Database<P>, threads: usize) -> Result<(), Error> {
        let seed = self.cfg.seed;
        parallel_load(db, u64::from(schema::ITEMS), 1 << 14, threads, "items", |loader, ids| {
            load::items(loader, ids.start + 1..ids.end + 1, seed)
        })?;
        let now = now_secs();
        let parts = u64::from(load::PARTS_PER_WAREHOUSE);
        let units = u64::from(self.cfg.warehouses) * parts;
        parallel_load(db, units, 1, threads, "warehouses and districts", |loader, us| {
            for u in us {
                let (w, part) = ((u / parts) as u32 + 1, (u % parts) as u32);
                load::warehouse_part(loader, w, part, &self.nu, seed, now)?;
            }
            Ok(())
        })
    }

    fn generator(&self, worker: usize, _threads: usize, seed: u64) -> TpccGen {
        let source = self.generators.fetch_add(1, Ordering::Relaxed);
        let w = self.cfg.warehouses;
        TpccGen {
            mix: self.cfg.mix,
            thresholds: thresholds(&self.cfg.mix, &[0, 1, 2, 3, 4]),
            analytic: self.cfg.analytic.map_or((0, 0), |a| (a.share, a.items())),
            analytic_seq: 0,
            warehouses: w,
            home: match self.cfg.warehouse_choice {
                WarehouseChoice::Home => Some((worker as u64 % u64::from(w)) as u32 + 1),
                WarehouseChoice::Random => None,
            },
            nu: self.nu,
            remote: !self.cfg.has(Simplification::NoRemote) && w > 1,
            rollback: !self.cfg.has(Simplification::NoRollback),
            by_name: !self.cfg.has(Simplification::CustomerById),
            inserts: self.cfg.inserts(),
            rng: TpccRand::new(seed),
            source,
            seq: 0,
            hints: vec![0; w as usize * schema::DISTRICTS as usize],
        }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({ "tpcc": &self.cfg, "nurand_constants": &self.nu })
    }

    /// Warehouses, the seed (it draws the loaded NURand constants) and the mix (it splits the
    /// growing tables' room between orders and payments).
    /// With the analytic transaction, its table too (not its share or scan: the table's room
    /// does not depend on them).
    fn data_config(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "warehouses": self.cfg.warehouses,
            "seed": self.cfg.seed,
            "mix": self.cfg.mix,
        });
        if self.cfg.analytic.is_some() {
            v["analytic_history"] = true.into();
        }
        v
    }

    fn continue_from(&mut self, previous: &Self) {
        // History keys per generator, the NURand constants the load used, and the room the
        // tables were created with (computed then from the memory available).
        self.generators = previous.generators.clone();
        self.nu = previous.nu;
        self.growth = previous.growth;
    }

    /// The five types of the mix, any of them with a share (the analytic transaction keeps its
    /// own share whatever the mix: it cannot be chosen or left out here).
    fn check_mix(&self, types: &[usize]) -> Result<(), String> {
        if let Some(&t) = types.iter().find(|&&t| t >= Kind::ALL.len()) {
            return Err(format!(
                "'{}' is not one of the five types of the TPC-C mix",
                txns::TYPES.get(t).map_or("?", |x| x.name)
            ));
        }
        if types.iter().all(|&t| self.cfg.mix[t] == 0) {
            return Err("none of these types has a share in the mix (--mix)".into());
        }
        Ok(())
    }

    fn invariants(&self) -> Option<&'static str> {
        Some("TPC-C's consistency conditions (clause 3.3.2: 1 to 10 and 12)")
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let found = consistency::check(db, self.cfg.warehouses, self.cfg.inserts());
        if found.is_empty() {
            Ok(())
        } else {
            Err(format!("TPC-C consistency conditions violated: {}", found.join("; ")))
        }
    }

    fn headline(&self) -> Option<usize> {
        (self.cfg.mix[0] > 0).then_some(Kind::NewOrder as usize)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> =
            self.cfg.simplifications.iter().map(|s| format!("SIMPLIFIED: {}", s.name())).collect();
        if self.cfg.mix != DEFAULT_MIX {
            let m: Vec<String> = self.cfg.mix.iter().map(u32::to_string).collect();
            notes.push(format!("mix {} (not the specification's 45/43/4/4/4)", m.join("/")));
        }
        if let Some(a) = &self.cfg.analytic {
            notes.push(format!(
                "analytic transaction (not in the specification): {} % of the mix, scanning {} % \
                 of a warehouse's stock",
                a.share, a.scan
            ));
        }
        notes
    }
}

pub(crate) use super::now_secs;

/// A worker's TPC-C generator: a terminal's inputs per clause 2.4.1 to 2.8.1.
pub struct TpccGen {
    warehouses: u32,
    home: Option<u32>,
    /// The configured mix (percent per type, in [`Kind::ALL`] order).
    mix: [u32; 5],
    /// The running sums of the mix's shares of the types it runs (see [`thresholds`]); the
    /// last is the draw's range.
    thresholds: [u32; 5],
    nu: NuConstants,
    remote: bool,
    rollback: bool,
    by_name: bool,
    /// NewOrder and Payment insert their rows (off: `--simplify no-inserts`).
    inserts: bool,
    rng: TpccRand,
    /// This generator's number: its history rows are keyed `(source, seq)`, and its
    /// analytic-history rows `(source, analytic_seq)`.
    source: u64,
    seq: u64,
    analytic_seq: u64,
    /// The analytic transaction's percent of the mix (0: none) and its scan in stock rows.
    analytic: (u32, u32),
    /// Per (warehouse, district): no new-order row with a lower id exists, because this worker
    /// committed the delivery of the order just below it (new orders only get higher ids, so
    /// once the oldest is delivered no lower one can appear). Delivery's scan starts there
    /// instead of at 0, as Silo's TPC-C does.
    hints: Vec<u32>,
}

/// The running sums of `mix`'s shares of `types` (others count 0): a draw below the first picks
/// the first kind, and so on; the last sum is the range of the draw.
fn thresholds(mix: &[u32; 5], types: &[usize]) -> [u32; 5] {
    let mut out = [0u32; 5];
    let mut acc = 0;
    for (i, t) in out.iter_mut().enumerate() {
        if types.contains(&i) {
            acc += mix[i];
        }
        *t = acc;
    }
    out
}

impl TpccGen {
    fn other_warehouse(&mut self, w: u32) -> u32 {
        let o = self.rng.uniform(1, self.warehouses - 1);
        if o >= w {
            o + 1
        } else {
            o
        }
    }

    fn customer(&mut self, t: &mut TpccTxn) {
        if self.by_name && self.rng.uniform(1, 100) <= 60 {
            t.by_name = Some(self.rng.nurand(255, 0, 999, self.nu.c_last_run));
        } else {
            t.by_name = None;
            t.c = self.rng.nurand(1023, 1, schema::CUSTOMERS, self.nu.c_id);
        }
    }
}

impl Generator for TpccGen {
    type Proc = TpccTxn;

    fn restrict_mix(&mut self, types: &[usize]) {
        self.thresholds = thresholds(&self.mix, types);
        debug_assert!(self.thresholds[4] > 0, "accepted by Tpcc::check_mix");
    }

    fn blank(&self) -> TpccTxn {
        let mut t = TpccTxn::new(Kind::NewOrder);
        t.inserts = self.inserts;
        t
    }

    fn fill(&mut self, t: &mut TpccTxn) {
        // The analytic share first, the five-way mix in the rest: without analytics the draws
        // are the specification's, one per transaction.
        let analytic = self.analytic.0 > 0 && self.rng.uniform(0, 99) < self.analytic.0;
        let kind = if analytic {
            Kind::Analytic
        } else {
            let pick = self.rng.uniform(0, self.thresholds[4] - 1);
            Kind::ALL[self.thresholds.iter().position(|&t| pick < t).unwrap_or(0)]
        };
        let w = self.home.unwrap_or_else(|| self.rng.uniform(1, self.warehouses));
        let d = self.rng.uniform(1, schema::DISTRICTS);
        t.kind = kind;
        t.w = w;
        t.d = d;
        t.c_w = w;
        t.c_d = d;
        t.now = now_secs();
        match kind {
            Kind::NewOrder => {
                t.by_name = None;
                t.c = self.rng.nurand(1023, 1, schema::CUSTOMERS, self.nu.c_id);
                let n = self.rng.uniform(5, 15);
                let rollback = self.rollback && self.rng.uniform(1, 100) == 1;
                for i in 0..n as usize {
                    let remote = self.remote && self.rng.uniform(1, 100) == 1;
                    let supply_w = if remote { self.other_warehouse(w) } else { w };
                    let item = self.rng.nurand(8191, 1, schema::ITEMS, self.nu.ol_i_id);
                    let quantity = self.rng.uniform(1, 10);
                    t.lines[i] = txns::Line { item, supply_w, quantity };
                }
                if rollback {
                    t.lines[n as usize - 1].item = schema::ITEMS + 1;
                }
                t.ol_cnt = n;
            }
            Kind::Payment => {
                if self.remote && self.rng.uniform(1, 100) > 85 {
                    t.c_w = self.other_warehouse(w);
                    t.c_d = self.rng.uniform(1, schema::DISTRICTS);
                }
                self.customer(t);
                t.amount = self.rng.uniform64(100, 500_000);
                self.seq += 1;
                t.history_key = schema::key::history(self.source, self.seq);
            }
            Kind::OrderStatus => self.customer(t),
            Kind::Delivery => {
                t.carrier = self.rng.uniform(1, 10);
                let base = (w as usize - 1) * schema::DISTRICTS as usize;
                t.hints.copy_from_slice(&self.hints[base..base + 10]);
            }
            Kind::StockLevel => t.threshold = self.rng.uniform(10, 20),
            Kind::Analytic => {
                t.threshold = self.rng.uniform(10, 20);
                let items = self.analytic.1;
                t.scan_items = items;
                t.scan_first = self.rng.uniform(1, schema::ITEMS - items + 1);
                self.analytic_seq += 1;
                t.analytic_key = schema::key::history(self.source, self.analytic_seq);
            }
        }
    }

    fn committed(&mut self, done: &TpccTxn) {
        if done.kind == Kind::Delivery {
            let base = (done.w as usize - 1) * schema::DISTRICTS as usize;
            for (hint, o) in self.hints[base..base + 10].iter_mut().zip(&done.delivered) {
                // Late calls (a pipeline's) may come out of order: a hint only rises.
                if o.get() != 0 {
                    *hint = (*hint).max(o.get() + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_follows_the_mix() {
        let budget = 10u64 << 30;
        // The standard mix: the history table gets its floor of an eighth of the budget (the
        // mix alone would give it a twentieth), the order tables the rest, all of it spent.
        let g = Growth::for_mix(budget, &DEFAULT_MIX);
        assert_eq!(g.payments, budget / 8 / BYTES_PER_PAYMENT);
        assert_eq!(g.orders, (budget - g.payments * BYTES_PER_PAYMENT) / BYTES_PER_NEW_ORDER);
        let used = g.orders * BYTES_PER_NEW_ORDER + g.payments * BYTES_PER_PAYMENT;
        assert!(used <= budget && used > budget / 100 * 99, "{used} of {budget}");
        // A Payment-light mix where the mix's share is above the floor keeps its ratio.
        let g = Growth::for_mix(budget, &[10, 90, 0, 0, 0]);
        assert_eq!(g.payments / g.orders, 9);
        assert!(g.payments > budget / 8 / BYTES_PER_PAYMENT);
        // Payment only: the history table gets (nearly) everything, the order tables the minimum.
        let g = Growth::for_mix(budget, &[0, 100, 0, 0, 0]);
        assert_eq!(g.orders, 1 << 16);
        assert_eq!(g.payments, budget / BYTES_PER_PAYMENT / 100 * 100);
        // No inserting transaction at all, or a tiny budget: the minimum for both.
        let g = Growth::for_mix(budget, &[0, 0, 50, 0, 50]);
        assert_eq!((g.orders, g.payments), (1 << 16, 1 << 16));
        let g = Growth::for_mix(1000, &DEFAULT_MIX);
        assert_eq!((g.orders, g.payments), (1 << 16, 1 << 16));
    }
}
