//! TPC-C's nine tables (specification 5.11, clause 1.3) and the two secondary indexes, as
//! fixed-width binary rows, and the composite keys packed into `u64`.
//!
//! Column widths follow clause 1.3: strings keep their maximum length (shorter values are
//! zero-padded), identifiers are 4-byte integers, money is a signed 8-byte count of cents and
//! rates (tax, discount) are 4-byte counts of 1/10 000, so every sum the consistency conditions
//! compare is exact. Dates are 8-byte seconds since the Unix epoch; 0 stands for null (a
//! carrier id of 0 and a delivery date of 0 are "not delivered").
//!
//! ## Keys
//!
//! | table | key (most significant first) | bits |
//! |---|---|---|
//! | warehouse | w | 16 |
//! | district | w, d | 16, 4 |
//! | customer | w, d, c | 16, 4, 12 |
//! | customer by name | w, d, last-name number, c | 16, 4, 10, 12 |
//! | order, new-order | w, d, o | 16, 4, 32 |
//! | order by customer | w, d, c, o | 16, 4, 12, 32 |
//! | order-line | w, d, o, ol | 16, 4, 32, 4 |
//! | item | i | 17 |
//! | stock | w, i | 16, 17 |
//! | history | loader or generator number, sequence | 24, 40 |
//! | analytic history | generator number, sequence | 24, 40 |
//!
//! Hence at most 65 535 warehouses ([`MAX_WAREHOUSES`]) and 2^32 - 1 orders per district.

/// Most warehouses the key layout can address.
pub const MAX_WAREHOUSES: u64 = (1 << 16) - 1;
/// Items in the catalogue (clause 4.3.3.1).
pub const ITEMS: u32 = 100_000;
/// Districts per warehouse.
pub const DISTRICTS: u32 = 10;
/// Customers per district.
pub const CUSTOMERS: u32 = 3_000;
/// Orders per district after loading.
pub const ORDERS: u32 = 3_000;
/// The first loaded order that is undelivered (has a new-order row).
pub const FIRST_UNDELIVERED: u32 = 2_101;

layout!(
    /// WAREHOUSE (clause 1.3.1).
    warehouse {
        W_ID: 4, W_NAME: 10, W_STREET_1: 20, W_STREET_2: 20, W_CITY: 20, W_STATE: 2, W_ZIP: 9,
        W_TAX: 4, W_YTD: 8,
    }
);

layout!(
    /// DISTRICT (clause 1.3.2). The byte order is ours: D_YTD has a payload word of its own,
    /// so that IC3 can apply Payment's accumulation under New-Order's uncommitted write of
    /// D_NEXT_O_ID (installs and log records copy whole words).
    district {
        D_ID: 4, D_W_ID: 4, D_YTD: 8, D_TAX: 4, D_NEXT_O_ID: 4, D_NAME: 10, D_STREET_1: 20,
        D_STREET_2: 20, D_CITY: 20, D_STATE: 2, D_ZIP: 9,
    }
);

layout!(
    /// CUSTOMER (clause 1.3.3). The byte order is ours, not the clause's: NewOrder's three
    /// columns (C_CREDIT, C_DISCOUNT, C_LAST) come first, in the record's first cache line.
    customer {
        C_ID: 4, C_D_ID: 4, C_W_ID: 4, C_CREDIT: 2, C_DISCOUNT: 4, C_LAST: 16, C_FIRST: 16,
        C_MIDDLE: 2, C_STREET_1: 20, C_STREET_2: 20, C_CITY: 20, C_STATE: 2, C_ZIP: 9,
        C_PHONE: 16, C_SINCE: 8, C_CREDIT_LIM: 8, C_BALANCE: 8, C_YTD_PAYMENT: 8,
        C_PAYMENT_CNT: 4, C_DELIVERY_CNT: 4, C_DATA: 500,
    }
);

layout!(
    /// HISTORY (clause 1.3.4; it has no primary key, txlab gives each row a unique one).
    history {
        H_C_ID: 4, H_C_D_ID: 4, H_C_W_ID: 4, H_D_ID: 4, H_W_ID: 4, H_DATE: 8, H_AMOUNT: 8,
        H_DATA: 24,
    }
);

layout!(
    /// NEW-ORDER (clause 1.3.5).
    new_order { NO_O_ID: 4, NO_D_ID: 4, NO_W_ID: 4 }
);

layout!(
    /// ORDER (clause 1.3.6). `O_CARRIER_ID` 0 is null.
    order {
        O_ID: 4, O_D_ID: 4, O_W_ID: 4, O_C_ID: 4, O_ENTRY_D: 8, O_CARRIER_ID: 4, O_OL_CNT: 4,
        O_ALL_LOCAL: 4,
    }
);

layout!(
    /// ORDER-LINE (clause 1.3.7). `OL_DELIVERY_D` 0 is null.
    order_line {
        OL_O_ID: 4, OL_D_ID: 4, OL_W_ID: 4, OL_NUMBER: 4, OL_I_ID: 4, OL_SUPPLY_W_ID: 4,
        OL_DELIVERY_D: 8, OL_QUANTITY: 4, OL_AMOUNT: 8, OL_DIST_INFO: 24,
    }
);

layout!(
    /// ITEM (clause 1.3.8).
    item { I_ID: 4, I_IM_ID: 4, I_NAME: 24, I_PRICE: 8, I_DATA: 50 }
);

layout!(
    /// STOCK (clause 1.3.9). The byte order is ours, not the clause's: the columns every
    /// NewOrder line reads or writes (quantity, counters, S_DATA) come first, together in the
    /// record's first two cache lines, and the ten S_DIST columns (one read per line) after.
    stock {
        S_I_ID: 4, S_W_ID: 4, S_QUANTITY: 4, S_YTD: 8, S_ORDER_CNT: 4, S_REMOTE_CNT: 4, S_DATA: 50,
        S_DIST_01: 24, S_DIST_02: 24, S_DIST_03: 24, S_DIST_04: 24, S_DIST_05: 24, S_DIST_06: 24,
        S_DIST_07: 24, S_DIST_08: 24, S_DIST_09: 24, S_DIST_10: 24,
    }
);

layout!(
    /// ANALYTIC_HISTORY: not in TPC-C. One row per committed analytic transaction (the
    /// read-mostly transaction ERMIA's evaluation adds to TPC-E, here over TPC-C's stock): the
    /// stock range it scanned, what it found there, and the demand of the district's recent
    /// orders for the items in that range.
    analytic_history {
        AH_W_ID: 4, AH_D_ID: 4, AH_FIRST_I_ID: 4, AH_ITEMS: 4, AH_QUANTITY: 8, AH_YTD: 8,
        AH_LOW_STOCK: 4, AH_RECENT_QUANTITY: 8, AH_RECENT_VALUE: 8, AH_DATE: 8,
    }
);

layout!(
    /// Secondary index CUSTOMER(C_W_ID, C_D_ID, C_LAST, C_ID) carrying C_FIRST, for Payment's and
    /// Order-Status's selection by last name (ordered by first name).
    customer_name { CN_FIRST: 16 }
);

layout!(
    /// Secondary index ORDER(O_W_ID, O_D_ID, O_C_ID, O_ID), for Order-Status's latest order of a
    /// customer.
    order_customer { OC_O_ID: 4 }
);

impl stock::C {
    /// `S_DIST_xx` for district `d` (1 to 10).
    pub fn dist(d: u32) -> stock::C {
        use stock::C::*;
        [
            S_DIST_01, S_DIST_02, S_DIST_03, S_DIST_04, S_DIST_05, S_DIST_06, S_DIST_07, S_DIST_08,
            S_DIST_09, S_DIST_10,
        ][(d - 1) as usize]
    }
}

/// Composite keys. See the module docs for the layout.
pub mod key {
    /// District `(w, d)`.
    #[inline]
    pub fn district(w: u32, d: u32) -> u64 {
        (u64::from(w) << 4) | u64::from(d)
    }
    /// Customer `(w, d, c)`.
    #[inline]
    pub fn customer(w: u32, d: u32, c: u32) -> u64 {
        (district(w, d) << 12) | u64::from(c)
    }
    /// Customer-by-name entry `(w, d, last, c)`.
    #[inline]
    pub fn customer_name(w: u32, d: u32, last: u32, c: u32) -> u64 {
        (((district(w, d) << 10) | u64::from(last)) << 12) | u64::from(c)
    }
    /// Order and new-order `(w, d, o)`.
    #[inline]
    pub fn order(w: u32, d: u32, o: u32) -> u64 {
        (district(w, d) << 32) | u64::from(o)
    }
    /// Order-by-customer entry `(w, d, c, o)`.
    #[inline]
    pub fn order_customer(w: u32, d: u32, c: u32, o: u32) -> u64 {
        (customer(w, d, c) << 32) | u64::from(o)
    }
    /// Order line `(w, d, o, ol)`.
    #[inline]
    pub fn order_line(w: u32, d: u32, o: u32, ol: u32) -> u64 {
        (order(w, d, o) << 4) | u64::from(ol)
    }
    /// Stock `(w, i)`.
    #[inline]
    pub fn stock(w: u32, i: u32) -> u64 {
        (u64::from(w) << 17) | u64::from(i)
    }
    /// History row `seq` of loader or generator `source`.
    #[inline]
    pub fn history(source: u64, seq: u64) -> u64 {
        (source << 40) | seq
    }
    /// The order id of an order or new-order key.
    #[inline]
    pub fn order_id(k: u64) -> u32 {
        k as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_sizes_follow_the_specification_widths() {
        assert_eq!(warehouse::SIZE, 97);
        assert_eq!(district::SIZE, 105);
        assert_eq!(customer::SIZE, 679);
        assert_eq!(history::SIZE, 60);
        assert_eq!(new_order::SIZE, 12);
        assert_eq!(order::SIZE, 36);
        assert_eq!(order_line::SIZE, 68);
        assert_eq!(item::SIZE, 90);
        assert_eq!(stock::SIZE, 318);
        assert_eq!(analytic_history::SIZE, 60);
        assert_eq!(customer::OFF[customer::C_DATA as usize], 179);
        assert_eq!(stock::C::dist(10), stock::S_DIST_10);
    }

    #[test]
    fn composite_keys_keep_their_fields_apart_and_ordered() {
        let m = MAX_WAREHOUSES as u32;
        assert!(key::order_line(m, 10, u32::MAX, 15) > key::order_line(m, 10, u32::MAX - 1, 15));
        assert!(key::order_line(2, 1, 0, 0) > key::order_line(1, 10, u32::MAX, 15));
        assert!(key::order_customer(m, 10, 3000, u32::MAX) > key::order_customer(m, 10, 3000, 0));
        assert!(key::order_customer(1, 1, 2, 0) > key::order_customer(1, 1, 1, u32::MAX));
        assert!(key::customer_name(1, 2, 0, 0) > key::customer_name(1, 1, 999, 4095));
        assert_eq!(key::order_id(key::order(7, 3, 4242)), 4242);
        assert!(key::stock(2, 1) > key::stock(1, ITEMS));
    }
}
