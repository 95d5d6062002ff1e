//! The consistency conditions of clause 3.3.2, checked over a quiescent database (after a run,
//! with no transaction in flight): 1 to 10 and 12, plus the order-by-customer index against the
//! orders. Condition 11 only holds for an unmodified population and is not checked.
//!
//! Without inserts (`--simplify no-inserts`) there are no HISTORY rows to sum and no orders
//! above the loaded ones: conditions 8, 9 and 10 are not checked, and condition 2 becomes
//! "no order at or above D_NEXT_O_ID" (the loaded orders end below it). The others hold as
//! written: Payment moves W_YTD and D_YTD together (1), C_BALANCE and C_YTD_PAYMENT by
//! opposite amounts (12), and no order, new order or line changes (3 to 7).

use super::schema::{self, key};
use super::tables::*;
use crate::engine::{Database, Protocol, Recon};
use std::ops::ControlFlow;

use schema::{customer as cu, district as di, history as hi, order as or, order_line as ol};

/// Most violations listed individually per condition.
const SHOWN: usize = 3;

/// Collected violations: the first [`SHOWN`] of each condition in full (condition 0: rows
/// missing or out of place), the rest counted.
#[derive(Default)]
struct Findings {
    shown: Vec<String>,
    per_condition: [usize; 13],
    total: usize,
}

impl Findings {
    fn add(&mut self, condition: usize, f: impl FnOnce() -> String) {
        self.total += 1;
        self.per_condition[condition] += 1;
        if self.per_condition[condition] <= SHOWN {
            self.shown.push(f());
        }
    }
}

/// Per-order facts gathered from ORDER.
#[derive(Clone, Copy, Default)]
struct OrderFacts {
    exists: bool,
    customer: u32,
    carrier: u32,
    ol_cnt: u32,
    lines: u32,
    new_order: bool,
}

/// Checks every condition over warehouses `1..=warehouses`, those of a run without inserts
/// when `inserts` is false (see the module docs). Returns the violations found (the first few
/// in full, then a count); empty when the database is consistent.
pub fn check<P: Protocol>(db: &Database<P>, warehouses: u32, inserts: bool) -> Vec<String> {
    let mut f = Findings::default();
    let w_count = warehouses as usize;
    let per_w = (schema::DISTRICTS * schema::CUSTOMERS) as usize;
    // Sums of H_AMOUNT per warehouse, district and customer.
    let mut h_w = vec![0i64; w_count + 1];
    let mut h_d = vec![0i64; (w_count + 1) * 11];
    let mut h_c = vec![0i64; w_count * per_w];
    db.visit_present(HISTORY, 0, u64::MAX, usize::MAX, |_, r| {
        let (w, d) = (hi::u32(r, hi::H_W_ID) as usize, hi::u32(r, hi::H_D_ID) as usize);
        let amount = hi::i64(r, hi::H_AMOUNT);
        if (1..=w_count).contains(&w) && (1..=10).contains(&d) {
            h_w[w] += amount;
            h_d[w * 11 + d] += amount;
        }
        let (cw, cd, c) = (
            hi::u32(r, hi::H_C_W_ID) as usize,
            hi::u32(r, hi::H_C_D_ID) as usize,
            hi::u32(r, hi::H_C_ID) as usize,
        );
        if (1..=w_count).contains(&cw) && (1..=10).contains(&cd) && (1..=3000).contains(&c) {
            h_c[(cw - 1) * per_w + (cd - 1) * 3000 + (c - 1)] += amount;
        }
        ControlFlow::Continue(())
    });
    for w in 1..=warehouses {
        let Some(w_ytd) = db
            .peek(WAREHOUSE, u64::from(w), |r| schema::warehouse::i64(r, schema::warehouse::W_YTD))
        else {
            f.add(0, || format!("warehouse {w} is missing"));
            continue;
        };
        let mut d_ytd_sum = 0i64;
        for d in 1..=schema::DISTRICTS {
            let Some((d_ytd, next)) = db.peek(DISTRICT, key::district(w, d), |r| {
                (di::i64(r, di::D_YTD), di::u32(r, di::D_NEXT_O_ID))
            }) else {
                f.add(0, || format!("district ({w}, {d}) is missing"));
                continue;
            };
            d_ytd_sum += d_ytd;
            let h = h_d[w as usize * 11 + d as usize];
            if inserts && d_ytd != h {
                f.add(9, || {
                    format!("condition 9: district ({w}, {d}) D_YTD {d_ytd} != sum(H_AMOUNT) {h}")
                });
            }
            district(db, &mut f, &h_c, w, d, next, inserts);
        }
        if w_ytd != d_ytd_sum {
            f.add(1, || {
                format!("condition 1: warehouse {w} W_YTD {w_ytd} != sum(D_YTD) {d_ytd_sum}")
            });
        }
        if inserts && w_ytd != h_w[w as usize] {
            f.add(8, || {
                format!(
                    "condition 8: warehouse {w} W_YTD {w_ytd} != sum(H_AMOUNT) {}",
                    h_w[w as usize]
                )
            });
        }
    }
    let mut out = f.shown;
    if f.total > out.len() {
        out.push(format!("... {} violations in all", f.total));
    }
    out
}

fn district<P: Protocol>(
    db: &Database<P>,
    f: &mut Findings,
    h_c: &[i64],
    w: u32,
    d: u32,
    next: u32,
    inserts: bool,
) {
    let mut orders = vec![OrderFacts::default(); next.max(1) as usize];
    let (mut max_o, mut ol_cnt_sum, mut beyond) = (0u32, 0u64, 0u32);
    db.visit_present(ORDER, key::order(w, d, 0), key::order(w, d, u32::MAX), usize::MAX, |k, r| {
        let o = key::order_id(k);
        max_o = max_o.max(o);
        ol_cnt_sum += u64::from(or::u32(r, or::O_OL_CNT));
        match orders.get_mut(o as usize) {
            Some(facts) => {
                *facts = OrderFacts {
                    exists: true,
                    customer: or::u32(r, or::O_C_ID),
                    carrier: or::u32(r, or::O_CARRIER_ID),
                    ol_cnt: or::u32(r, or::O_OL_CNT),
                    ..Default::default()
                }
            }
            None => beyond += 1,
        }
        ControlFlow::Continue(())
    });
    if beyond > 0 {
        f.add(2, || format!("condition 2: district ({w}, {d}) has {beyond} orders at or above D_NEXT_O_ID {next}"));
    }
    if inserts && max_o != next - 1 {
        f.add(2, || {
            format!(
                "condition 2: district ({w}, {d}) D_NEXT_O_ID - 1 = {} but max(O_ID) = {max_o}",
                next - 1
            )
        });
    }
    let (mut no_count, mut no_min, mut no_max) = (0u64, u32::MAX, 0u32);
    db.visit_present(
        NEW_ORDER,
        key::order(w, d, 0),
        key::order(w, d, u32::MAX),
        usize::MAX,
        |k, _| {
            let o = key::order_id(k);
            no_count += 1;
            no_min = no_min.min(o);
            no_max = no_max.max(o);
            if let Some(facts) = orders.get_mut(o as usize) {
                facts.new_order = true;
            }
            ControlFlow::Continue(())
        },
    );
    if no_count > 0 {
        if inserts && no_max != next - 1 {
            f.add(2, || format!("condition 2: district ({w}, {d}) D_NEXT_O_ID - 1 = {} but max(NO_O_ID) = {no_max}", next - 1));
        }
        if u64::from(no_max - no_min) + 1 != no_count {
            f.add(3, || format!("condition 3: district ({w}, {d}) new orders {no_min}..={no_max} but {no_count} rows"));
        }
    }
    let mut delivered = vec![0i64; schema::CUSTOMERS as usize + 1];
    let mut lines = 0u64;
    let (lo, hi) = (key::order_line(w, d, 0, 0), key::order_line(w, d, u32::MAX, 15));
    db.visit_present(ORDER_LINE, lo, hi, usize::MAX, |k, r| {
        lines += 1;
        let o = key::order_id(k >> 4);
        match orders.get_mut(o as usize).filter(|facts| facts.exists) {
            None => f.add(0, || format!("order line {} of order ({w}, {d}, {o}) has no order", k & 15)),
            Some(facts) => {
                facts.lines += 1;
                let date = ol::i64(r, ol::OL_DELIVERY_D);
                if (date == 0) != (facts.carrier == 0) {
                    f.add(7, || format!("condition 7: order ({w}, {d}, {o}) carrier {} but line {} delivery date {date}", facts.carrier, k & 15));
                }
                if date != 0 {
                    if let Some(sum) = delivered.get_mut(facts.customer as usize) {
                        *sum += ol::i64(r, ol::OL_AMOUNT);
                    }
                }
            }
        }
        ControlFlow::Continue(())
    });
    if lines != ol_cnt_sum {
        f.add(4, || format!("condition 4: district ({w}, {d}) sum(O_OL_CNT) = {ol_cnt_sum} but {lines} order lines"));
    }
    // Without inserts the orders end with the loaded ones.
    let last = if inserts { next - 1 } else { max_o };
    for (o, facts) in orders.iter().enumerate().skip(1).take(last as usize) {
        if !facts.exists {
            f.add(0, || format!("district ({w}, {d}) has no order {o} below D_NEXT_O_ID {next}"));
            continue;
        }
        if (facts.carrier == 0) != facts.new_order {
            f.add(5, || {
                format!(
                    "condition 5: order ({w}, {d}, {o}) carrier {} with new-order row {}",
                    facts.carrier, facts.new_order
                )
            });
        }
        if facts.lines != facts.ol_cnt {
            f.add(6, || {
                format!(
                    "condition 6: order ({w}, {d}, {o}) O_OL_CNT {} but {} lines",
                    facts.ol_cnt, facts.lines
                )
            });
        }
    }
    // The order-by-customer index lists every order exactly once under its customer.
    let mut indexed = 0u64;
    let (lo, hi) = (key::order_customer(w, d, 0, 0), key::order_customer(w, d, 4095, u32::MAX));
    db.visit_present(ORDER_CUSTOMER, lo, hi, usize::MAX, |k, _| {
        indexed += 1;
        let (c, o) = (((k >> 32) & 0xFFF) as u32, key::order_id(k));
        match orders.get(o as usize).filter(|facts| facts.exists) {
            Some(facts) if facts.customer == c => {}
            _ => f.add(0, || {
                format!(
                    "order-by-customer entry ({w}, {d}, {c}, {o}) matches no order of customer {c}"
                )
            }),
        }
        ControlFlow::Continue(())
    });
    let order_rows = orders.iter().filter(|o| o.exists).count() as u64;
    if indexed != order_rows {
        f.add(0, || format!("district ({w}, {d}) has {order_rows} orders but {indexed} order-by-customer entries"));
    }
    let base = (w as usize - 1) * (schema::DISTRICTS * schema::CUSTOMERS) as usize
        + (d as usize - 1) * 3000;
    for c in 1..=schema::CUSTOMERS {
        let Some((balance, ytd)) = db.peek(CUSTOMER, key::customer(w, d, c), |r| {
            (cu::i64(r, cu::C_BALANCE), cu::i64(r, cu::C_YTD_PAYMENT))
        }) else {
            f.add(0, || format!("customer ({w}, {d}, {c}) is missing"));
            continue;
        };
        let (paid, got) = (h_c[base + c as usize - 1], delivered[c as usize]);
        if inserts && balance != got - paid {
            f.add(10, || format!("condition 10: customer ({w}, {d}, {c}) C_BALANCE {balance} != delivered {got} - paid {paid}"));
        }
        if balance + ytd != got {
            f.add(12, || format!("condition 12: customer ({w}, {d}, {c}) C_BALANCE + C_YTD_PAYMENT = {} != delivered {got}", balance + ytd));
        }
    }
}
