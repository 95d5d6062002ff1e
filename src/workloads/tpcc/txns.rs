//! The five transactions (clauses 2.4 to 2.8), and the optional analytic one, as procedures:
//! bodies written once against [`Tx`], declared access sets with reconnaissance reads, and
//! piece templates at column granularity.

use super::schema::{self, key};
use super::tables::*;
use crate::engine::{
    AccessMode, AccessSet, Columns, Piece, Procedure, Recon, Tx, TxnType, Worker, ALL_COLUMNS,
};
use crate::error::{Abort, AbortReason};
use crate::workloads::invariant::{must_hit, Must};
use crate::workloads::layout::{acc, r, w};
use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;

use schema::analytic_history as ah;
use schema::{customer as cu, district as di, history as hi, item as it, new_order as no};
use schema::{order as or, order_line as ol, stock as st, warehouse as wh};

/// The transaction types, in [`Procedure::txn_type`] order: the specification's five, then
/// the analytic transaction (see the [module documentation](super)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Clause 2.4.
    NewOrder,
    /// Clause 2.5.
    Payment,
    /// Clause 2.6.
    OrderStatus,
    /// Clause 2.7.
    Delivery,
    /// Clause 2.8.
    StockLevel,
    /// Not in TPC-C: a read-mostly stock scan joined with recent orders.
    Analytic,
}

impl Kind {
    /// The specification's five kinds, in mix order.
    pub const ALL: [Kind; 5] =
        [Kind::NewOrder, Kind::Payment, Kind::OrderStatus, Kind::Delivery, Kind::StockLevel];
}

/// One order line of a NewOrder.
#[derive(Clone, Copy, Debug, Default)]
pub struct Line {
    /// OL_I_ID (an unused id, above [`schema::ITEMS`], for the rolled-back 1 %).
    pub item: u32,
    /// OL_SUPPLY_W_ID.
    pub supply_w: u32,
    /// OL_QUANTITY.
    pub quantity: u32,
}

/// One TPC-C transaction: the generator overwrites the fields of the kind it picks. Scratch
/// buffers live here so that running allocates nothing once they have grown.
#[derive(Debug)]
pub struct TpccTxn {
    /// Which transaction.
    pub kind: Kind,
    /// Home warehouse W_ID.
    pub w: u32,
    /// District D_ID (Delivery: unused).
    pub d: u32,
    /// Customer's warehouse (Payment; equal to `w` elsewhere).
    pub c_w: u32,
    /// Customer's district (Payment; equal to `d` elsewhere).
    pub c_d: u32,
    /// Customer id, when selected by id.
    pub c: u32,
    /// Customer last-name number (0 to 999) when selected by last name.
    pub by_name: Option<u32>,
    /// NewOrder lines (the first `ol_cnt`).
    pub lines: [Line; 15],
    /// NewOrder line count (5 to 15).
    pub ol_cnt: u32,
    /// Payment H_AMOUNT in cents.
    pub amount: i64,
    /// Payment's history row key.
    pub history_key: u64,
    /// Delivery O_CARRIER_ID.
    pub carrier: u32,
    /// Stock-Level's and the analytic transaction's low-stock threshold.
    pub threshold: u32,
    /// Analytic: the first item of the scanned stock range.
    pub scan_first: u32,
    /// Analytic: the stock rows scanned, items `scan_first..scan_first + scan_items`.
    pub scan_items: u32,
    /// Analytic: its analytic-history row's key.
    pub analytic_key: u64,
    /// Entry / payment / delivery date, seconds.
    pub now: i64,
    /// Delivery: per district, no new order below this id exists (see [`super::TpccGen`]).
    pub hints: [u32; 10],
    /// NewOrder and Payment insert their rows (false: `--simplify no-inserts`, DBx1000's and
    /// Cicada's TPC-C-NP).
    pub inserts: bool,
    /// Delivery: the order delivered per district by this attempt (0 = none).
    pub(super) delivered: [Cell<u32>; 10],
    /// A fold of every output value the specification asks the terminal to display.
    output: Cell<u64>,
    names: RefCell<Vec<([u8; 16], u32)>>,
    items: RefCell<Vec<u32>>,
    /// Analytic: the recent orders' (item, quantity) pairs.
    demand: RefCell<Vec<(u32, u32)>>,
}

impl TpccTxn {
    /// An empty transaction of kind `kind`.
    pub fn new(kind: Kind) -> Self {
        TpccTxn {
            kind,
            w: 1,
            d: 1,
            c_w: 1,
            c_d: 1,
            c: 1,
            by_name: None,
            lines: [Line::default(); 15],
            ol_cnt: 0,
            amount: 0,
            history_key: 0,
            carrier: 1,
            threshold: 10,
            scan_first: 1,
            scan_items: 1,
            analytic_key: 0,
            now: 0,
            hints: [0; 10],
            inserts: true,
            delivered: Default::default(),
            output: Cell::new(0),
            names: RefCell::new(Vec::with_capacity(64)),
            items: RefCell::new(Vec::with_capacity(300)),
            demand: RefCell::new(Vec::with_capacity(300)),
        }
    }

    fn emit(&self, v: u64) {
        self.output.set(self.output.get().rotate_left(5) ^ v);
    }

    /// Emits what a piece folded (as if each of its values had been emitted in turn).
    fn emit_fold(&self, f: Fold) {
        self.output.set(self.output.get().rotate_left(5 * (f.n % 64)) ^ f.v);
    }
}

/// Output values folded inside a piece, which may run again (IC3) and so returns them instead
/// of emitting them ([`TpccTxn::emit_fold`] after the piece).
#[derive(Clone, Copy, Debug, Default)]
struct Fold {
    v: u64,
    n: u32,
}

impl Fold {
    fn emit(&mut self, v: u64) {
        self.v = self.v.rotate_left(5) ^ v;
        self.n += 1;
    }
}

// ---- Column masks and templates ------------------------------------------------------------
//
// Each update names the columns it reads and, apart, the ones it writes (`_R` / `_W`): only the
// written ones are installed or logged, and the templates tell IC3 which columns conflict (a
// Payment's W_YTD and a NewOrder's W_TAX share a row, not a column).

const NO_W: Columns = wh::mask(&[wh::W_TAX]);
const NO_D_R: Columns = di::mask(&[di::D_TAX]);
const NO_D_W: Columns = di::mask(&[di::D_NEXT_O_ID]);
const NO_C: Columns = cu::mask(&[cu::C_DISCOUNT, cu::C_LAST, cu::C_CREDIT]);
const NO_I: Columns = it::mask(&[it::I_PRICE, it::I_NAME, it::I_DATA]);
/// NewOrder's stock writes.
const NO_S_W: Columns = st::mask(&[st::S_QUANTITY, st::S_YTD, st::S_ORDER_CNT, st::S_REMOTE_CNT]);
/// NewOrder's stock reads, for any district (see [`stock_reads`]).
const NO_S_R: Columns = st::mask(&[
    st::S_DIST_01,
    st::S_DIST_02,
    st::S_DIST_03,
    st::S_DIST_04,
    st::S_DIST_05,
    st::S_DIST_06,
    st::S_DIST_07,
    st::S_DIST_08,
    st::S_DIST_09,
    st::S_DIST_10,
    st::S_DATA,
]);
/// NewOrder's stock reads for district `d`: of the ten S_DIST columns only `d`'s, so the rest
/// of a 318-byte stock row is neither fetched nor copied.
fn stock_reads(d: u32) -> Columns {
    st::mask(&[st::C::dist(d), st::S_DATA])
}

const PAY_W_R: Columns =
    wh::mask(&[wh::W_NAME, wh::W_STREET_1, wh::W_STREET_2, wh::W_CITY, wh::W_STATE, wh::W_ZIP]);
const PAY_W_W: Columns = wh::mask(&[wh::W_YTD]);
const PAY_D_R: Columns =
    di::mask(&[di::D_NAME, di::D_STREET_1, di::D_STREET_2, di::D_CITY, di::D_STATE, di::D_ZIP]);
const PAY_D_W: Columns = di::mask(&[di::D_YTD]);
/// Payment's customer reads: what the terminal displays, and C_CREDIT.
const PAY_C_R: Columns = cu::mask(&[
    cu::C_FIRST,
    cu::C_MIDDLE,
    cu::C_LAST,
    cu::C_STREET_1,
    cu::C_STREET_2,
    cu::C_CITY,
    cu::C_STATE,
    cu::C_ZIP,
    cu::C_PHONE,
    cu::C_SINCE,
    cu::C_CREDIT,
    cu::C_CREDIT_LIM,
    cu::C_DISCOUNT,
]);
/// Payment's customer writes (read and changed): the balance, the counters, and C_DATA for a
/// bad-credit customer.
const PAY_C_W: Columns =
    cu::mask(&[cu::C_BALANCE, cu::C_YTD_PAYMENT, cu::C_PAYMENT_CNT, cu::C_DATA]);
const PAY_C_DATA: Columns = cu::mask(&[cu::C_DATA]);
const OS_C: Columns = cu::mask(&[cu::C_BALANCE, cu::C_FIRST, cu::C_MIDDLE, cu::C_LAST]);
const OS_O: Columns = or::mask(&[or::O_ID, or::O_ENTRY_D, or::O_CARRIER_ID, or::O_OL_CNT]);
const DL_O_R: Columns = or::mask(&[or::O_C_ID, or::O_OL_CNT]);
const DL_O_W: Columns = or::mask(&[or::O_CARRIER_ID]);
const DL_OL_R: Columns = ol::mask(&[ol::OL_AMOUNT]);
const DL_OL_W: Columns = ol::mask(&[ol::OL_DELIVERY_D]);
const DL_C_W: Columns = cu::mask(&[cu::C_BALANCE, cu::C_DELIVERY_CNT]);
const SL_D: Columns = di::mask(&[di::D_NEXT_O_ID]);
const SL_S: Columns = st::mask(&[st::S_QUANTITY]);
/// The analytic transaction's stock reads: two of the columns NewOrder writes.
const AN_S: Columns = st::mask(&[st::S_QUANTITY, st::S_YTD]);
const AN_I: Columns = it::mask(&[it::I_PRICE]);

static NEW_ORDER_PIECES: [Piece; 5] = [
    Piece { name: "warehouse", accesses: &[r(WAREHOUSE, NO_W)] },
    Piece { name: "district", accesses: &[r(DISTRICT, NO_D_R), w(DISTRICT, NO_D_W)] },
    Piece { name: "customer", accesses: &[r(CUSTOMER, NO_C)] },
    Piece {
        name: "order",
        accesses: &[
            w(ORDER, ALL_COLUMNS),
            w(NEW_ORDER, ALL_COLUMNS),
            w(ORDER_CUSTOMER, ALL_COLUMNS),
        ],
    },
    Piece {
        name: "lines",
        accesses: &[r(ITEM, NO_I), r(STOCK, NO_S_R), w(STOCK, NO_S_W), w(ORDER_LINE, ALL_COLUMNS)],
    },
];
static PAYMENT_PIECES: [Piece; 4] = [
    Piece { name: "warehouse", accesses: &[r(WAREHOUSE, PAY_W_R), acc(WAREHOUSE, PAY_W_W)] },
    Piece { name: "district", accesses: &[r(DISTRICT, PAY_D_R), acc(DISTRICT, PAY_D_W)] },
    Piece {
        name: "customer",
        accesses: &[r(CUSTOMER_NAME, ALL_COLUMNS), r(CUSTOMER, PAY_C_R), w(CUSTOMER, PAY_C_W)],
    },
    Piece { name: "history", accesses: &[w(HISTORY, ALL_COLUMNS)] },
];
static ORDER_STATUS_PIECES: [Piece; 3] = [
    Piece { name: "customer", accesses: &[r(CUSTOMER_NAME, ALL_COLUMNS), r(CUSTOMER, OS_C)] },
    Piece { name: "order", accesses: &[r(ORDER_CUSTOMER, ALL_COLUMNS), r(ORDER, OS_O)] },
    Piece { name: "lines", accesses: &[r(ORDER_LINE, ALL_COLUMNS)] },
];
static DELIVERY_PIECES: [Piece; 1] = [Piece {
    name: "district",
    accesses: &[
        w(NEW_ORDER, ALL_COLUMNS),
        r(ORDER, DL_O_R),
        w(ORDER, DL_O_W),
        r(ORDER_LINE, DL_OL_R),
        w(ORDER_LINE, DL_OL_W),
        w(CUSTOMER, DL_C_W),
    ],
}];
static STOCK_LEVEL_PIECES: [Piece; 2] = [
    Piece { name: "district", accesses: &[r(DISTRICT, SL_D)] },
    Piece { name: "stock", accesses: &[r(ORDER_LINE, ALL_COLUMNS), r(STOCK, SL_S)] },
];

static ANALYTIC_PIECES: [Piece; 3] = [
    Piece { name: "district", accesses: &[r(DISTRICT, SL_D)] },
    Piece { name: "scan", accesses: &[r(ORDER_LINE, ALL_COLUMNS), r(STOCK, AN_S), r(ITEM, AN_I)] },
    Piece { name: "history", accesses: &[w(ANALYTIC_HISTORY, ALL_COLUMNS)] },
];

/// The transaction types, in [`Kind`] order. Delivery runs its one piece once per district.
/// A workload without the analytic transaction declares the first five.
pub static TYPES: [TxnType; 6] = [
    TxnType { name: "new-order", pieces: &NEW_ORDER_PIECES },
    TxnType { name: "payment", pieces: &PAYMENT_PIECES },
    TxnType { name: "order-status", pieces: &ORDER_STATUS_PIECES },
    TxnType { name: "delivery", pieces: &DELIVERY_PIECES },
    TxnType { name: "stock-level", pieces: &STOCK_LEVEL_PIECES },
    TxnType { name: "analytic", pieces: &ANALYTIC_PIECES },
];

// ---- Bodies ---------------------------------------------------------------------------------

impl Procedure for TpccTxn {
    fn txn_type(&self) -> usize {
        self.kind as usize
    }

    /// Order-Status and Stock-Level write nothing. The analytic transaction is read-mostly,
    /// not read-only: its one insert keeps it off the read-only path, as in ERMIA's experiment.
    #[inline]
    fn read_only(&self) -> bool {
        matches!(self.kind, Kind::OrderStatus | Kind::StockLevel)
    }

    /// The analytic transaction, as ERMIA's read-mostly transaction.
    #[inline]
    fn read_mostly(&self) -> bool {
        self.kind == Kind::Analytic
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        match self.kind {
            Kind::NewOrder => self.new_order(tx),
            Kind::Payment => self.payment(tx),
            Kind::OrderStatus => self.order_status(tx),
            Kind::Delivery => self.delivery(tx),
            Kind::StockLevel => self.stock_level(tx),
            Kind::Analytic => self.analytic(tx),
        }
    }

    fn declare<R: Recon>(&self, recon: &R, set: &mut AccessSet) -> bool {
        match self.kind {
            Kind::NewOrder => self.declare_new_order(recon, set),
            Kind::Payment => self.declare_payment(recon, set),
            Kind::OrderStatus => self.declare_order_status(recon, set),
            Kind::Delivery => self.declare_delivery(recon, set),
            Kind::StockLevel => self.declare_stock_level(recon, set),
            Kind::Analytic => self.declare_analytic(recon, set),
        }
        true
    }
}

impl TpccTxn {
    fn new_order<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let (w, d, c) = (self.w, self.d, self.c);
        let lines = &self.lines[..self.ol_cnt as usize];
        // Overlap the cache misses of the customer, item and stock rows and of their index
        // buckets, first of all, so that they land while the warehouse and district are read
        // (row ids are remembered for the operations below).
        let stock_reads = stock_reads(d);
        let stock_cols = stock_reads | NO_S_W;
        let mut keys = [(CUSTOMER, key::customer(w, d, c), NO_C); 31];
        for (pair, l) in keys[1..].chunks_exact_mut(2).zip(lines) {
            pair[0] = (ITEM, u64::from(l.item), NO_I);
            pair[1] = (STOCK, key::stock(l.supply_w, l.item), stock_cols);
        }
        tx.prefetch_many(&keys[..1 + 2 * lines.len()]);
        let w_tax = tx
            .piece(0, |tx| tx.read_cols(WAREHOUSE, u64::from(w), NO_W, |r| wh::u32(r, wh::W_TAX)))?
            .must()?;
        let (o, d_tax) = tx
            .piece(1, |tx| {
                tx.update_cols(DISTRICT, key::district(w, d), NO_D_R, NO_D_W, |r| {
                    let o = di::u32(r, di::D_NEXT_O_ID);
                    di::set_u32(r, di::D_NEXT_O_ID, o + 1);
                    (o, di::u32(r, di::D_TAX))
                })
            })?
            .must()?;
        let discount = tx
            .piece(2, |tx| {
                tx.read_cols(CUSTOMER, key::customer(w, d, c), NO_C, |r| {
                    let bad = cu::get(r, cu::C_CREDIT) == b"BC";
                    (cu::u32(r, cu::C_DISCOUNT), bad)
                })
            })?
            .must()?;
        let all_local = lines.iter().all(|l| l.supply_w == w);
        tx.piece(3, |tx| {
            if !self.inserts {
                return Ok(());
            }
            let mut row = [0u8; or::SIZE];
            or::set_u32(&mut row, or::O_ID, o);
            or::set_u32(&mut row, or::O_D_ID, d);
            or::set_u32(&mut row, or::O_W_ID, w);
            or::set_u32(&mut row, or::O_C_ID, c);
            or::set_i64(&mut row, or::O_ENTRY_D, self.now);
            or::set_u32(&mut row, or::O_CARRIER_ID, 0);
            or::set_u32(&mut row, or::O_OL_CNT, self.ol_cnt);
            or::set_u32(&mut row, or::O_ALL_LOCAL, u32::from(all_local));
            must_hit(tx.insert(ORDER, key::order(w, d, o), &row)?)?;
            let mut row = [0u8; no::SIZE];
            no::set_u32(&mut row, no::NO_O_ID, o);
            no::set_u32(&mut row, no::NO_D_ID, d);
            no::set_u32(&mut row, no::NO_W_ID, w);
            must_hit(tx.insert(NEW_ORDER, key::order(w, d, o), &row)?)?;
            must_hit(tx.insert(
                ORDER_CUSTOMER,
                key::order_customer(w, d, c, o),
                &o.to_le_bytes(),
            )?)
        })?;
        let dist_col = st::C::dist(d);
        // The piece may run again (IC3): it returns the order's total and, per line, whether
        // the brand is generic, instead of accumulating them outside.
        let (total, brands) = tx.piece(4, |tx| {
            let (mut total, mut brands) = (0i64, 0u16);
            for (n, l) in lines.iter().enumerate() {
                let item = tx.read_cols(ITEM, u64::from(l.item), NO_I, |r| {
                    (it::i64(r, it::I_PRICE), super::random::has_original(it::get(r, it::I_DATA)))
                })?;
                let Some((price, i_original)) = item else {
                    // The 1 % rollback: an unused item id (clause 2.4.2.3).
                    if l.item > schema::ITEMS {
                        return tx.user_abort();
                    }
                    return Err(Abort::new(AbortReason::MissingRow));
                };
                let remote = l.supply_w != w;
                let (dist_info, s_original) = tx
                    .update_cols(STOCK, key::stock(l.supply_w, l.item), stock_reads, NO_S_W, |r| {
                        let q = st::u32(r, st::S_QUANTITY);
                        let q =
                            if q >= l.quantity + 10 { q - l.quantity } else { q + 91 - l.quantity };
                        st::set_u32(r, st::S_QUANTITY, q);
                        st::set_i64(r, st::S_YTD, st::i64(r, st::S_YTD) + i64::from(l.quantity));
                        st::set_u32(r, st::S_ORDER_CNT, st::u32(r, st::S_ORDER_CNT) + 1);
                        if remote {
                            st::set_u32(r, st::S_REMOTE_CNT, st::u32(r, st::S_REMOTE_CNT) + 1);
                        }
                        let mut info = [0u8; 24];
                        info.copy_from_slice(st::get(r, dist_col));
                        (info, super::random::has_original(st::get(r, st::S_DATA)))
                    })?
                    .must()?;
                let amount = i64::from(l.quantity) * price;
                total += amount;
                // Brand-generic: 'B' when both the item and the stock are ORIGINAL.
                brands |= u16::from(i_original && s_original) << n;
                if !self.inserts {
                    continue;
                }
                let mut row = [0u8; ol::SIZE];
                ol::set_u32(&mut row, ol::OL_O_ID, o);
                ol::set_u32(&mut row, ol::OL_D_ID, d);
                ol::set_u32(&mut row, ol::OL_W_ID, w);
                ol::set_u32(&mut row, ol::OL_NUMBER, n as u32 + 1);
                ol::set_u32(&mut row, ol::OL_I_ID, l.item);
                ol::set_u32(&mut row, ol::OL_SUPPLY_W_ID, l.supply_w);
                ol::set_i64(&mut row, ol::OL_DELIVERY_D, 0);
                ol::set_u32(&mut row, ol::OL_QUANTITY, l.quantity);
                ol::set_i64(&mut row, ol::OL_AMOUNT, amount);
                ol::get_mut(&mut row, ol::OL_DIST_INFO).copy_from_slice(&dist_info);
                must_hit(tx.insert(ORDER_LINE, key::order_line(w, d, o, n as u32 + 1), &row)?)?;
            }
            Ok((total, brands))
        })?;
        for n in 0..lines.len() {
            self.emit(u64::from(brands >> n & 1));
        }
        // total * (1 - C_DISCOUNT) * (1 + W_TAX + D_TAX), rates in 1/10 000.
        let (disc, bad_credit) = discount;
        let total =
            i128::from(total) * i128::from(10_000 - disc) * i128::from(10_000 + w_tax + d_tax)
                / 100_000_000;
        self.emit(total as u64 ^ u64::from(bad_credit) ^ u64::from(o));
        Ok(())
    }

    /// Payment's and Order-Status's customer: by id, or the middle (rounded up) of the
    /// customers with the last name, ordered by first name (clause 2.5.2.2).
    fn select_customer<W: Worker>(&self, tx: &mut Tx<'_, W>, w: u32, d: u32) -> Result<u32, Abort> {
        let Some(last) = self.by_name else { return Ok(self.c) };
        let mut names = self.names.borrow_mut();
        names.clear();
        let (lo, hi) = (key::customer_name(w, d, last, 0), key::customer_name(w, d, last, 4095));
        tx.scan(CUSTOMER_NAME, lo, hi, usize::MAX, |k, r| {
            let mut first = [0u8; 16];
            first.copy_from_slice(r);
            names.push((first, (k & 0xFFF) as u32));
            ControlFlow::Continue(())
        })?;
        middle_by_first_name(&mut names).must()
    }

    fn payment<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let (w, d, amount) = (self.w, self.d, self.amount);
        // W_YTD and D_YTD grow by commutative accumulations, which IC3 can defer (§4.3).
        let (w_name, w_zip) = tx.piece(0, |tx| {
            let out = tx
                .read_cols(WAREHOUSE, u64::from(w), PAY_W_R, |r| {
                    let mut name = [0u8; 10];
                    name.copy_from_slice(wh::get(r, wh::W_NAME));
                    (name, wh::get(r, wh::W_ZIP)[0])
                })?
                .must()?;
            tx.accumulate(WAREHOUSE, u64::from(w), wh::add(wh::W_YTD, amount))?
                .then_some(())
                .must()?;
            Ok(out)
        })?;
        self.emit(w_zip.into());
        let (d_name, d_zip) = tx.piece(1, |tx| {
            let key = key::district(w, d);
            let out = tx
                .read_cols(DISTRICT, key, PAY_D_R, |r| {
                    let mut name = [0u8; 10];
                    name.copy_from_slice(di::get(r, di::D_NAME));
                    (name, di::get(r, di::D_ZIP)[0])
                })?
                .must()?;
            tx.accumulate(DISTRICT, key, di::add(di::D_YTD, amount))?.then_some(()).must()?;
            Ok(out)
        })?;
        self.emit(d_zip.into());
        let (c_w, c_d) = (self.c_w, self.c_d);
        let (c, balance) = tx.piece(2, |tx| {
            let c = self.select_customer(tx, c_w, c_d)?;
            let key = key::customer(c_w, c_d, c);
            let (bad_credit, balance) = tx
                .update_cols(CUSTOMER, key, PAY_C_R, PAY_C_W & !PAY_C_DATA, |r| {
                    cu::set_i64(r, cu::C_BALANCE, cu::i64(r, cu::C_BALANCE) - amount);
                    cu::set_i64(r, cu::C_YTD_PAYMENT, cu::i64(r, cu::C_YTD_PAYMENT) + amount);
                    cu::set_u32(r, cu::C_PAYMENT_CNT, cu::u32(r, cu::C_PAYMENT_CNT) + 1);
                    (cu::get(r, cu::C_CREDIT) == b"BC", cu::i64(r, cu::C_BALANCE))
                })?
                .must()?;
            // The 500-byte C_DATA is read and rewritten for bad-credit customers only (10 %).
            if bad_credit {
                tx.update_cols(CUSTOMER, key, 0, PAY_C_DATA, |r| {
                    prepend_payment(cu::get_mut(r, cu::C_DATA), [c, c_d, c_w, d, w], amount);
                })?
                .must()?;
            }
            Ok((c, balance))
        })?;
        self.emit(balance as u64);
        tx.piece(3, |tx| {
            if !self.inserts {
                return Ok(());
            }
            let mut row = [0u8; hi::SIZE];
            hi::set_u32(&mut row, hi::H_C_ID, c);
            hi::set_u32(&mut row, hi::H_C_D_ID, c_d);
            hi::set_u32(&mut row, hi::H_C_W_ID, c_w);
            hi::set_u32(&mut row, hi::H_D_ID, d);
            hi::set_u32(&mut row, hi::H_W_ID, w);
            hi::set_i64(&mut row, hi::H_DATE, self.now);
            hi::set_i64(&mut row, hi::H_AMOUNT, amount);
            // H_DATA: W_NAME, four spaces, D_NAME.
            let data = hi::get_mut(&mut row, hi::H_DATA);
            let wl = w_name.iter().position(|&b| b == 0).unwrap_or(10);
            let dl = d_name.iter().position(|&b| b == 0).unwrap_or(10);
            data[..wl].copy_from_slice(&w_name[..wl]);
            data[wl..wl + 4].copy_from_slice(b"    ");
            data[wl + 4..wl + 4 + dl].copy_from_slice(&d_name[..dl]);
            must_hit(tx.insert(HISTORY, self.history_key, &row)?)
        })
    }

    fn order_status<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let (w, d) = (self.w, self.d);
        let (c, balance) = tx.piece(0, |tx| {
            let c = self.select_customer(tx, w, d)?;
            let balance = tx
                .read_cols(CUSTOMER, key::customer(w, d, c), OS_C, |r| cu::i64(r, cu::C_BALANCE))?
                .must()?;
            Ok((c, balance))
        })?;
        self.emit(balance as u64);
        let (o, carrier) = tx.piece(1, |tx| {
            let mut last = None;
            let (lo, hi) =
                (key::order_customer(w, d, c, 0), key::order_customer(w, d, c, u32::MAX));
            tx.scan(ORDER_CUSTOMER, lo, hi, usize::MAX, |k, _| {
                last = Some(key::order_id(k));
                ControlFlow::Continue(())
            })?;
            let o = last.must()?;
            let carrier = tx
                .read_cols(ORDER, key::order(w, d, o), OS_O, |r| or::u32(r, or::O_CARRIER_ID))?
                .must()?;
            Ok((o, carrier))
        })?;
        self.emit(u64::from(carrier));
        let lines = tx.piece(2, |tx| {
            let (lo, hi) = (key::order_line(w, d, o, 1), key::order_line(w, d, o, 15));
            let mut lines = Fold::default();
            tx.scan(ORDER_LINE, lo, hi, usize::MAX, |_, r| {
                lines.emit(ol::i64(r, ol::OL_AMOUNT) as u64 ^ u64::from(ol::u32(r, ol::OL_I_ID)));
                ControlFlow::Continue(())
            })?;
            Ok(lines)
        })?;
        self.emit_fold(lines);
        Ok(())
    }

    fn delivery<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let w = self.w;
        // The ten districts are one piece, as IC3's analyser makes a loop one piece (§5.1): a
        // protocol that commits pieces on their own commits the delivery as a unit (a piece
        // run again after it committed would break what its analysis assumed).
        tx.piece(0, |tx| {
            for d in 1..=schema::DISTRICTS {
                let slot = (d - 1) as usize;
                // Set afresh on every run of the piece (it may run again under IC3).
                self.delivered[slot].set(0);
                // The oldest undelivered order: new-order rows below the hint cannot exist.
                let (lo, hi) = (key::order(w, d, self.hints[slot]), key::order(w, d, u32::MAX));
                let mut oldest = None;
                tx.scan(NEW_ORDER, lo, hi, 1, |k, _| {
                    oldest = Some(key::order_id(k));
                    ControlFlow::Break(())
                })?;
                // No undelivered order in this district: skipped (clause 2.7.4.2).
                let Some(o) = oldest else { continue };
                if !tx.delete(NEW_ORDER, key::order(w, d, o))? {
                    return Err(Abort::new(AbortReason::MissingRow));
                }
                let (c, lines) = tx
                    .update_cols(ORDER, key::order(w, d, o), DL_O_R, DL_O_W, |r| {
                        or::set_u32(r, or::O_CARRIER_ID, self.carrier);
                        (or::u32(r, or::O_C_ID), or::u32(r, or::O_OL_CNT))
                    })?
                    .must()?;
                let mut sum = 0i64;
                for n in 1..=lines {
                    sum += tx
                        .update_cols(
                            ORDER_LINE,
                            key::order_line(w, d, o, n),
                            DL_OL_R,
                            DL_OL_W,
                            |r| {
                                ol::set_i64(r, ol::OL_DELIVERY_D, self.now);
                                ol::i64(r, ol::OL_AMOUNT)
                            },
                        )?
                        .must()?;
                }
                tx.update_cols(CUSTOMER, key::customer(w, d, c), 0, DL_C_W, |r| {
                    cu::set_i64(r, cu::C_BALANCE, cu::i64(r, cu::C_BALANCE) + sum);
                    cu::set_u32(r, cu::C_DELIVERY_CNT, cu::u32(r, cu::C_DELIVERY_CNT) + 1);
                })?
                .must()?;
                self.delivered[slot].set(o);
            }
            Ok(())
        })
    }

    fn stock_level<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let (w, d) = (self.w, self.d);
        let next = next_order_id(tx, w, d)?;
        let low = tx.piece(1, |tx| {
            let mut items = self.items.borrow_mut();
            items.clear();
            let (lo, hi) = stock_level_lines(w, d, next);
            tx.scan(ORDER_LINE, lo, hi, usize::MAX, |_, r| {
                items.push(ol::u32(r, ol::OL_I_ID));
                ControlFlow::Continue(())
            })?;
            items.sort_unstable();
            items.dedup();
            let mut low = 0u64;
            read_stock_rows(tx, w, items.iter().copied(), SL_S, |r| {
                low += u64::from(st::u32(r, st::S_QUANTITY) < self.threshold);
            })?;
            Ok(low)
        })?;
        self.emit(low);
        Ok(())
    }

    /// The analytic transaction: the district's recent orders' demand per item, then the scan
    /// of the stock range (its quantities and year-to-date sales, the low-stock count), joined
    /// with the demand for the items in the range and their prices, then one
    /// analytic-history row with the aggregates.
    fn analytic<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let (w, d) = (self.w, self.d);
        let next = next_order_id(tx, w, d)?;
        let (first, items) = (self.scan_first, self.scan_items);
        let agg = tx.piece(1, |tx| {
            let mut demand = self.demand.borrow_mut();
            demand.clear();
            let (lo, hi) = stock_level_lines(w, d, next);
            tx.scan(ORDER_LINE, lo, hi, usize::MAX, |_, r| {
                demand.push(order_line_demand(r));
                ControlFlow::Continue(())
            })?;
            merge_demand(&mut demand);
            let mut agg = Aggregates::default();
            let end = first + items;
            read_stock_rows(tx, w, first..end, AN_S, |r| {
                agg.stock(st::u32(r, st::S_QUANTITY), st::i64(r, st::S_YTD), self.threshold);
            })?;
            for &(i, q) in in_range(&demand, first, end) {
                let price =
                    tx.read_cols(ITEM, u64::from(i), AN_I, |r| it::i64(r, it::I_PRICE))?.must()?;
                agg.demand(q, price);
            }
            Ok(agg)
        })?;
        self.emit(agg.quantity ^ agg.recent_value as u64);
        tx.piece(2, |tx| {
            let mut row = [0u8; ah::SIZE];
            ah::set_u32(&mut row, ah::AH_W_ID, w);
            ah::set_u32(&mut row, ah::AH_D_ID, d);
            ah::set_u32(&mut row, ah::AH_FIRST_I_ID, first);
            ah::set_u32(&mut row, ah::AH_ITEMS, items);
            ah::set_i64(&mut row, ah::AH_QUANTITY, agg.quantity as i64);
            ah::set_i64(&mut row, ah::AH_YTD, agg.ytd);
            ah::set_u32(&mut row, ah::AH_LOW_STOCK, agg.low);
            ah::set_i64(&mut row, ah::AH_RECENT_QUANTITY, agg.recent_quantity as i64);
            ah::set_i64(&mut row, ah::AH_RECENT_VALUE, agg.recent_value);
            ah::set_i64(&mut row, ah::AH_DATE, self.now);
            must_hit(tx.insert(ANALYTIC_HISTORY, self.analytic_key, &row)?)
        })
    }

    // ---- Declared access sets (reconnaissance reads where a key depends on data) ----------

    fn recon_customer<R: Recon>(&self, recon: &R, set: &mut AccessSet, w: u32, d: u32) -> u32 {
        let Some(last) = self.by_name else { return self.c };
        let (lo, hi) = (key::customer_name(w, d, last, 0), key::customer_name(w, d, last, 4095));
        set.range(CUSTOMER_NAME, lo, hi, AccessMode::Read);
        let mut names = self.names.borrow_mut();
        names.clear();
        recon.scan(CUSTOMER_NAME, lo, hi, usize::MAX, |k, r| {
            let mut first = [0u8; 16];
            first.copy_from_slice(r);
            names.push((first, (k & 0xFFF) as u32));
            ControlFlow::Continue(())
        });
        middle_by_first_name(&mut names).unwrap_or(0)
    }

    fn declare_new_order<R: Recon>(&self, recon: &R, set: &mut AccessSet) {
        let (w, d, c) = (self.w, self.d, self.c);
        set.read(WAREHOUSE, u64::from(w));
        set.write(DISTRICT, key::district(w, d));
        set.read(CUSTOMER, key::customer(w, d, c));
        if !self.inserts {
            for l in &self.lines[..self.ol_cnt as usize] {
                set.read(ITEM, u64::from(l.item));
                set.write(STOCK, key::stock(l.supply_w, l.item));
            }
            return;
        }
        // The order's number is D_NEXT_O_ID as the transaction finds it, which every
        // New-Order of the district moves on: a guess, within the district's orders.
        let o = recon.peek(DISTRICT, key::district(w, d), |r| di::u32(r, di::D_NEXT_O_ID));
        let (lo, hi) = (key::order(w, d, 0), key::order(w, d, u32::MAX));
        set.write_within(ORDER, o.map(|o| key::order(w, d, o)), lo, hi);
        set.write_within(NEW_ORDER, o.map(|o| key::order(w, d, o)), lo, hi);
        set.write_within(
            ORDER_CUSTOMER,
            o.map(|o| key::order_customer(w, d, c, o)),
            key::order_customer(w, d, c, 0),
            key::order_customer(w, d, c, u32::MAX),
        );
        let (lo, hi) = district_lines(w, d);
        for (n, l) in self.lines[..self.ol_cnt as usize].iter().enumerate() {
            set.read(ITEM, u64::from(l.item));
            set.write(STOCK, key::stock(l.supply_w, l.item));
            set.write_within(ORDER_LINE, o.map(|o| key::order_line(w, d, o, n as u32 + 1)), lo, hi);
        }
    }

    fn declare_payment<R: Recon>(&self, recon: &R, set: &mut AccessSet) {
        let (w, d) = (self.w, self.d);
        set.write(WAREHOUSE, u64::from(w));
        set.write(DISTRICT, key::district(w, d));
        let c = self.recon_customer(recon, set, self.c_w, self.c_d);
        set.write(CUSTOMER, key::customer(self.c_w, self.c_d, c));
        if self.inserts {
            set.write(HISTORY, self.history_key);
        }
    }

    fn declare_order_status<R: Recon>(&self, recon: &R, set: &mut AccessSet) {
        let (w, d) = (self.w, self.d);
        let c = self.recon_customer(recon, set, w, d);
        set.read(CUSTOMER, key::customer(w, d, c));
        let (lo, hi) = (key::order_customer(w, d, c, 0), key::order_customer(w, d, c, u32::MAX));
        set.range(ORDER_CUSTOMER, lo, hi, AccessMode::Read);
        let mut o = 0;
        recon.scan(ORDER_CUSTOMER, lo, hi, usize::MAX, |k, _| {
            o = key::order_id(k);
            ControlFlow::Continue(())
        });
        set.read(ORDER, key::order(w, d, o));
        set.range(
            ORDER_LINE,
            key::order_line(w, d, o, 1),
            key::order_line(w, d, o, 15),
            AccessMode::Read,
        );
    }

    fn declare_delivery<R: Recon>(&self, recon: &R, set: &mut AccessSet) {
        let w = self.w;
        for d in 1..=schema::DISTRICTS {
            let (lo, hi) =
                (key::order(w, d, self.hints[(d - 1) as usize]), key::order(w, d, u32::MAX));
            set.range(NEW_ORDER, lo, hi, AccessMode::Read);
            // The district's oldest new order, its lines and its customer are guesses (other
            // Deliveries and New-Orders of the district move them), each within the
            // district's rows; with none found, the district's ranges (a New-Order may add
            // one before this runs).
            let mut oldest = None;
            recon.scan(NEW_ORDER, lo, hi, 1, |k, _| {
                oldest = Some(key::order_id(k));
                ControlFlow::Break(())
            });
            let (orders_lo, orders_hi) = (key::order(w, d, 0), key::order(w, d, u32::MAX));
            let order = oldest.map(|o| key::order(w, d, o));
            set.write_within(NEW_ORDER, order, orders_lo, orders_hi);
            set.write_within(ORDER, order, orders_lo, orders_hi);
            let found = order.and_then(|k| {
                recon.peek(ORDER, k, |r| (or::u32(r, or::O_C_ID), or::u32(r, or::O_OL_CNT)))
            });
            let (lines_lo, lines_hi) = district_lines(w, d);
            let (customers_lo, customers_hi) =
                (key::customer(w, d, 0), key::customer(w, d, schema::CUSTOMERS));
            match (oldest, found) {
                (Some(o), Some((c, lines))) => {
                    for n in 1..=lines {
                        let line = Some(key::order_line(w, d, o, n));
                        set.write_within(ORDER_LINE, line, lines_lo, lines_hi);
                    }
                    let customer = Some(key::customer(w, d, c));
                    set.write_within(CUSTOMER, customer, customers_lo, customers_hi);
                }
                _ => {
                    set.write_within(ORDER_LINE, None, lines_lo, lines_hi);
                    set.write_within(CUSTOMER, None, customers_lo, customers_hi);
                }
            }
        }
    }

    /// Stock-Level's and the analytic transaction's first two reads: the district's
    /// D_NEXT_O_ID and the order lines of its last 20 orders, as the key range `(lo, hi)`.
    fn declare_recent_lines<R: Recon>(&self, recon: &R, set: &mut AccessSet) -> (u64, u64) {
        let (w, d) = (self.w, self.d);
        set.read(DISTRICT, key::district(w, d));
        let next =
            recon.peek(DISTRICT, key::district(w, d), |r| di::u32(r, di::D_NEXT_O_ID)).unwrap_or(0);
        let (lo, hi) = stock_level_lines(w, d, next);
        set.range(ORDER_LINE, lo, hi, AccessMode::Read);
        (lo, hi)
    }

    fn declare_stock_level<R: Recon>(&self, recon: &R, set: &mut AccessSet) {
        let w = self.w;
        let (lo, hi) = self.declare_recent_lines(recon, set);
        recon.scan(ORDER_LINE, lo, hi, usize::MAX, |_, r| {
            set.read(STOCK, key::stock(w, ol::u32(r, ol::OL_I_ID)));
            ControlFlow::Continue(())
        });
    }

    fn declare_analytic<R: Recon>(&self, recon: &R, set: &mut AccessSet) {
        let w = self.w;
        let (lo, hi) = self.declare_recent_lines(recon, set);
        let (first, end) = (self.scan_first, self.scan_first + self.scan_items);
        for i in first..end {
            set.read(STOCK, key::stock(w, i));
        }
        let mut demand = self.demand.borrow_mut();
        demand.clear();
        recon.scan(ORDER_LINE, lo, hi, usize::MAX, |_, r| {
            demand.push(order_line_demand(r));
            ControlFlow::Continue(())
        });
        merge_demand(&mut demand);
        for &(i, _) in in_range(&demand, first, end) {
            set.read(ITEM, u64::from(i));
        }
        set.write(ANALYTIC_HISTORY, self.analytic_key);
    }
}

/// Stock-Level's and the analytic transaction's first piece: the district's D_NEXT_O_ID.
fn next_order_id<W: Worker>(tx: &mut Tx<'_, W>, w: u32, d: u32) -> Result<u32, Abort> {
    tx.piece(0, |tx| {
        tx.read_cols(DISTRICT, key::district(w, d), SL_D, |r| di::u32(r, di::D_NEXT_O_ID))
    })?
    .must()
}

/// Reads columns `cols` of warehouse `w`'s stock rows of `items` (each must exist), handing
/// each to `f`, in batches of 16 whose index and record misses overlap (`prefetch_many`).
fn read_stock_rows<W: Worker>(
    tx: &mut Tx<'_, W>,
    w: u32,
    mut items: impl Iterator<Item = u32>,
    cols: Columns,
    mut f: impl FnMut(&[u8]),
) -> Result<(), Abort> {
    let mut keys = [(STOCK, 0u64, cols); 16];
    loop {
        let mut n = 0;
        // `zip` takes a key slot before an item, so no item is lost when the batch is full.
        for (k, i) in keys.iter_mut().zip(&mut items) {
            k.1 = key::stock(w, i);
            n += 1;
        }
        if n == 0 {
            return Ok(());
        }
        tx.prefetch_many(&keys[..n]);
        for &(_, k, _) in &keys[..n] {
            tx.read_cols(STOCK, k, cols, &mut f)?.must()?;
        }
    }
}

/// What an analytic transaction finds in its stock range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aggregates {
    /// Sum of S_QUANTITY.
    pub quantity: u64,
    /// Sum of S_YTD.
    pub ytd: i64,
    /// Rows with S_QUANTITY below the threshold.
    pub low: u32,
    /// The recent orders' quantities of the range's items.
    pub recent_quantity: u64,
    /// Their value at the items' prices, in cents.
    pub recent_value: i64,
}

impl Aggregates {
    fn stock(&mut self, quantity: u32, ytd: i64, threshold: u32) {
        self.quantity += u64::from(quantity);
        self.ytd += ytd;
        self.low += u32::from(quantity < threshold);
    }

    fn demand(&mut self, quantity: u32, price: i64) {
        self.recent_quantity += u64::from(quantity);
        self.recent_value += i64::from(quantity) * price;
    }
}

/// An order line's (item, quantity).
fn order_line_demand(r: &[u8]) -> (u32, u32) {
    (ol::u32(r, ol::OL_I_ID), ol::u32(r, ol::OL_QUANTITY))
}

/// Sorts (item, quantity) pairs by item and sums the quantities of each item into one pair.
fn merge_demand(demand: &mut Vec<(u32, u32)>) {
    demand.sort_unstable();
    // `dedup_by` passes the later pair first and keeps the earlier one.
    demand.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
}

/// The pairs of `demand` (sorted by item) whose item is in `first..end`.
fn in_range(demand: &[(u32, u32)], first: u32, end: u32) -> &[(u32, u32)] {
    let lo = demand.partition_point(|&(i, _)| i < first);
    let hi = demand.partition_point(|&(i, _)| i < end);
    &demand[lo..hi]
}

/// The order lines of the district's last 20 orders (clause 2.8.2.2).
/// Every order line of district `(w, d)`, as the key range `(lo, hi)`.
fn district_lines(w: u32, d: u32) -> (u64, u64) {
    (key::order_line(w, d, 0, 0), key::order_line(w, d, u32::MAX, 15))
}

fn stock_level_lines(w: u32, d: u32, next: u32) -> (u64, u64) {
    let first = next.saturating_sub(20);
    (key::order_line(w, d, first, 0), key::order_line(w, d, next.saturating_sub(1), 15))
}

/// The customer at position ceil(n / 2) of `names` sorted by first name.
fn middle_by_first_name(names: &mut [([u8; 16], u32)]) -> Option<u32> {
    if names.is_empty() {
        return None;
    }
    names.sort_unstable();
    Some(names[(names.len() - 1) / 2].1)
}

/// C_DATA for a bad-credit payment: the payment's ids and amount, then the old data, cut to the
/// column's 500 characters (clause 2.5.2.2).
fn prepend_payment(data: &mut [u8], ids: [u32; 5], amount: i64) {
    use std::io::Write as _;
    let mut head = [0u8; 64];
    let n = {
        let mut cur = &mut head[..];
        let [c, cd, cw, d, w] = ids;
        // A 64-byte buffer holds five u32s, a money amount and the separators.
        let _ = write!(cur, "{c} {cd} {cw} {d} {w} {}.{:02} ", amount / 100, amount % 100);
        64 - cur.len()
    };
    let keep = data.len() - n;
    data.copy_within(..keep, n);
    data[..n].copy_from_slice(&head[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_middle_customer_by_first_name_is_rounded_up() {
        let name = |s: &str| {
            let mut b = [0u8; 16];
            b[..s.len()].copy_from_slice(s.as_bytes());
            b
        };
        let mut v = vec![(name("carol"), 3), (name("alice"), 1), (name("bob"), 2)];
        assert_eq!(middle_by_first_name(&mut v), Some(2));
        let mut v = vec![(name("d"), 4), (name("c"), 3), (name("b"), 2), (name("a"), 1)];
        assert_eq!(middle_by_first_name(&mut v), Some(2), "n = 4 takes the 2nd");
        assert_eq!(middle_by_first_name(&mut []), None);
    }

    #[test]
    fn demand_is_summed_per_item_and_cut_to_the_range() {
        let mut d = vec![(7, 2), (3, 1), (7, 5), (12, 4), (3, 3), (9, 1)];
        merge_demand(&mut d);
        assert_eq!(d, [(3, 4), (7, 7), (9, 1), (12, 4)]);
        assert_eq!(in_range(&d, 4, 12), [(7, 7), (9, 1)], "the end is exclusive");
        assert_eq!(in_range(&d, 3, 13), &d[..]);
        assert_eq!(in_range(&d, 10, 12), []);
    }

    #[test]
    fn bad_credit_payments_are_prepended_and_the_data_keeps_its_width() {
        let mut data = [b'x'; 500];
        prepend_payment(&mut data, [42, 3, 1, 7, 1], 123_456);
        assert!(data.starts_with(b"42 3 1 7 1 1234.56 x"));
        assert_eq!(data.iter().filter(|&&b| b == b'x').count(), 500 - 19);
    }
}
