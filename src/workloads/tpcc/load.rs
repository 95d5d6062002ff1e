//! Initial population (clause 4.3.3.1): the item catalogue, then every warehouse with its stock,
//! districts, customers (and their name-index entries and history rows), orders (and their
//! by-customer entries), order lines and new orders. Each warehouse is generated from its own
//! random stream, so a load is the same whatever the thread count.

use super::random::{last_name, NuConstants, TpccRand};
use super::schema::{self, key, ITEMS};
use super::tables::*;
use crate::engine::{Loader, Protocol};
use crate::error::Error;

/// Dollars to cents.
pub const fn dollars(d: i64) -> i64 {
    d * 100
}

/// Loads items `ids` (1-based item ids).
pub fn items<P: Protocol>(
    loader: &mut Loader<'_, P>,
    ids: std::ops::Range<u64>,
    seed: u64,
) -> Result<(), Error> {
    use schema::item::*;
    let mut r = TpccRand::new(seed ^ ids.start.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut row = [0u8; SIZE];
    for i in ids {
        let i = i as u32;
        set_u32(&mut row, I_ID, i);
        set_u32(&mut row, I_IM_ID, r.uniform(1, 10_000));
        r.astring(get_mut(&mut row, I_NAME), 14, 24);
        set_i64(&mut row, I_PRICE, r.uniform64(100, 10_000));
        r.data_with_original(get_mut(&mut row, I_DATA));
        loader.insert(ITEM, u64::from(i), &row)?;
    }
    Ok(())
}

/// Parts of a warehouse loaded as separate units (so that one warehouse loads on every core and
/// its progress shows): the warehouse row with its stock, then each district with its customers,
/// history, orders, order lines and new orders.
pub const PARTS_PER_WAREHOUSE: u32 = 1 + schema::DISTRICTS;

/// Loads part `part` (0 to [`PARTS_PER_WAREHOUSE`] - 1) of warehouse `w`: 0 is the warehouse
/// row and its stock, `d` is district `d`. Each part draws from its own random stream, so the
/// population does not depend on which thread loads which part. `now` is the load time
/// (seconds).
pub fn warehouse_part<P: Protocol>(
    loader: &mut Loader<'_, P>,
    w: u32,
    part: u32,
    nu: &NuConstants,
    seed: u64,
    now: i64,
) -> Result<(), Error> {
    let mut r = TpccRand::new(
        seed ^ u64::from(w).wrapping_mul(0xD1B5_4A32_D192_ED03)
            ^ u64::from(part).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    if part > 0 {
        return district(loader, &mut r, w, part, nu, now);
    }
    {
        use schema::warehouse::*;
        let mut row = [0u8; SIZE];
        set_u32(&mut row, W_ID, w);
        r.astring(get_mut(&mut row, W_NAME), 6, 10);
        r.astring(get_mut(&mut row, W_STREET_1), 10, 20);
        r.astring(get_mut(&mut row, W_STREET_2), 10, 20);
        r.astring(get_mut(&mut row, W_CITY), 10, 20);
        r.astring(get_mut(&mut row, W_STATE), 2, 2);
        r.zip(get_mut(&mut row, W_ZIP));
        set_u32(&mut row, W_TAX, r.uniform(0, 2_000));
        set_i64(&mut row, W_YTD, dollars(300_000));
        loader.insert(WAREHOUSE, u64::from(w), &row)?;
    }
    {
        use schema::stock::*;
        let mut row = [0u8; SIZE];
        for i in 1..=ITEMS {
            set_u32(&mut row, S_I_ID, i);
            set_u32(&mut row, S_W_ID, w);
            set_u32(&mut row, S_QUANTITY, r.uniform(10, 100));
            for d in 1..=10 {
                r.astring(get_mut(&mut row, C::dist(d)), 24, 24);
            }
            set_i64(&mut row, S_YTD, 0);
            set_u32(&mut row, S_ORDER_CNT, 0);
            set_u32(&mut row, S_REMOTE_CNT, 0);
            r.data_with_original(get_mut(&mut row, S_DATA));
            loader.insert(STOCK, key::stock(w, i), &row)?;
        }
    }
    Ok(())
}

fn district<P: Protocol>(
    loader: &mut Loader<'_, P>,
    r: &mut TpccRand,
    w: u32,
    d: u32,
    nu: &NuConstants,
    now: i64,
) -> Result<(), Error> {
    {
        use schema::district::*;
        let mut row = [0u8; SIZE];
        set_u32(&mut row, D_ID, d);
        set_u32(&mut row, D_W_ID, w);
        r.astring(get_mut(&mut row, D_NAME), 6, 10);
        r.astring(get_mut(&mut row, D_STREET_1), 10, 20);
        r.astring(get_mut(&mut row, D_STREET_2), 10, 20);
        r.astring(get_mut(&mut row, D_CITY), 10, 20);
        r.astring(get_mut(&mut row, D_STATE), 2, 2);
        r.zip(get_mut(&mut row, D_ZIP));
        set_u32(&mut row, D_TAX, r.uniform(0, 2_000));
        set_i64(&mut row, D_YTD, dollars(30_000));
        set_u32(&mut row, D_NEXT_O_ID, schema::ORDERS + 1);
        loader.insert(DISTRICT, key::district(w, d), &row)?;
    }
    for c in 1..=schema::CUSTOMERS {
        customer(loader, r, w, d, c, nu, now)?;
    }
    // O_C_ID
    // O_C_ID is a random permutation of the customer ids.
    let mut owners: Vec<u32> = (1..=schema::CUSTOMERS).collect();
    for i in (1..owners.len()).rev() {
        owners.swap(i, r.below(i + 1));
    }
    for o in 1..=schema::ORDERS {
        let delivered = o < schema::FIRST_UNDELIVERED;
        let c = owners[(o - 1) as usize];
        let ol_cnt = r.uniform(5, 15);
        {
            use schema::order::*;
            let mut row = [0u8; SIZE];
            set_u32(&mut row, O_ID, o);
            set_u32(&mut row, O_D_ID, d);
            set_u32(&mut row, O_W_ID, w);
            set_u32(&mut row, O_C_ID, c);
            set_i64(&mut row, O_ENTRY_D, now);
            set_u32(&mut row, O_CARRIER_ID, if delivered { r.uniform(1, 10) } else { 0 });
            set_u32(&mut row, O_OL_CNT, ol_cnt);
            set_u32(&mut row, O_ALL_LOCAL, 1);
            loader.insert(ORDER, key::order(w, d, o), &row)?;
            loader.insert(ORDER_CUSTOMER, key::order_customer(w, d, c, o), &o.to_le_bytes())?;
        }
        for ol in 1..=ol_cnt {
            use schema::order_line::*;
            let mut row = [0u8; SIZE];
            set_u32(&mut row, OL_O_ID, o);
            set_u32(&mut row, OL_D_ID, d);
            set_u32(&mut row, OL_W_ID, w);
            set_u32(&mut row, OL_NUMBER, ol);
            set_u32(&mut row, OL_I_ID, r.uniform(1, ITEMS));
            set_u32(&mut row, OL_SUPPLY_W_ID, w);
            set_i64(&mut row, OL_DELIVERY_D, if delivered { now } else { 0 });
            set_u32(&mut row, OL_QUANTITY, 5);
            set_i64(&mut row, OL_AMOUNT, if delivered { 0 } else { r.uniform64(1, 999_999) });
            r.astring(get_mut(&mut row, OL_DIST_INFO), 24, 24);
            loader.insert(ORDER_LINE, key::order_line(w, d, o, ol), &row)?;
        }
        if !delivered {
            use schema::new_order::*;
            let mut row = [0u8; SIZE];
            set_u32(&mut row, NO_O_ID, o);
            set_u32(&mut row, NO_D_ID, d);
            set_u32(&mut row, NO_W_ID, w);
            loader.insert(NEW_ORDER, key::order(w, d, o), &row)?;
        }
    }
    Ok(())
}

/// One customer with its name-index entry and its history row.
fn customer<P: Protocol>(
    loader: &mut Loader<'_, P>,
    r: &mut TpccRand,
    w: u32,
    d: u32,
    c: u32,
    nu: &NuConstants,
    now: i64,
) -> Result<(), Error> {
    use schema::customer::*;
    use schema::history as hs;
    let mut row = [0u8; SIZE];
    set_u32(&mut row, C_ID, c);
    set_u32(&mut row, C_D_ID, d);
    set_u32(&mut row, C_W_ID, w);
    let last = if c <= 1000 { c - 1 } else { r.nurand(255, 0, 999, nu.c_last_load) };
    let mut name = [0u8; 16];
    last_name(last, &mut name);
    set_str(&mut row, C_LAST, &name);
    set_str(&mut row, C_MIDDLE, b"OE");
    r.astring(get_mut(&mut row, C_FIRST), 8, 16);
    r.astring(get_mut(&mut row, C_STREET_1), 10, 20);
    r.astring(get_mut(&mut row, C_STREET_2), 10, 20);
    r.astring(get_mut(&mut row, C_CITY), 10, 20);
    r.astring(get_mut(&mut row, C_STATE), 2, 2);
    r.zip(get_mut(&mut row, C_ZIP));
    r.nstring(get_mut(&mut row, C_PHONE), 16);
    set_i64(&mut row, C_SINCE, now);
    set_str(&mut row, C_CREDIT, if r.uniform(1, 10) == 1 { b"BC" } else { b"GC" });
    set_i64(&mut row, C_CREDIT_LIM, dollars(50_000));
    set_u32(&mut row, C_DISCOUNT, r.uniform(0, 5_000));
    set_i64(&mut row, C_BALANCE, -dollars(10));
    set_i64(&mut row, C_YTD_PAYMENT, dollars(10));
    set_u32(&mut row, C_PAYMENT_CNT, 1);
    set_u32(&mut row, C_DELIVERY_CNT, 0);
    r.astring(get_mut(&mut row, C_DATA), 300, 500);
    loader.insert(CUSTOMER, key::customer(w, d, c), &row)?;
    let mut first = [0u8; 16];
    first.copy_from_slice(get(&row, C_FIRST));
    loader.insert(CUSTOMER_NAME, key::customer_name(w, d, last, c), &first)?;

    let mut h = [0u8; schema::history::SIZE];
    hs::set_u32(&mut h, hs::H_C_ID, c);
    hs::set_u32(&mut h, hs::H_C_D_ID, d);
    hs::set_u32(&mut h, hs::H_C_W_ID, w);
    hs::set_u32(&mut h, hs::H_D_ID, d);
    hs::set_u32(&mut h, hs::H_W_ID, w);
    hs::set_i64(&mut h, hs::H_DATE, now);
    hs::set_i64(&mut h, hs::H_AMOUNT, dollars(10));
    r.astring(hs::get_mut(&mut h, hs::H_DATA), 12, 24);
    // Loaded history rows use source 0 and a sequence unique per (w, d, c).
    loader.insert(HISTORY, key::history(0, key::customer(w, d, c)), &h)?;
    Ok(())
}
