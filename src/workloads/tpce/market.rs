//! The market: each security's price over time, the trading rules every completed trade
//! follows (commission, charge, tax, settlement), and the market exchange emulator (MEE) that
//! turns submitted orders into Trade-Result and Market-Feed transactions.
//!
//! **Prices.** A security's price follows a triangular wave between $20.00 and $30.00 with a
//! period of 15 minutes and a phase of its own, as EGen's MEE prices securities: the loader
//! prices the initial trades and the daily market with it, and a run's Market-Feed tickers and
//! trade results price with it at the time they run, so prices stay continuous from the load
//! into the run.
//!
//! **The emulator.** Each worker's generator owns an emulator (no shared queue, no lock). A
//! committed Trade-Order's market order is executed by the emulator of the worker that
//! submitted it: it queues the trade for a Trade-Result and adds a ticker for a Market-Feed.
//! A limit order waits in TRADE_REQUEST until some worker's Market-Feed moves the price past
//! its bid; that Market-Feed hands the triggered trades to its own worker's emulator, which
//! queues them for Trade-Result. The generator runs what the emulator has ready when the mix
//! draws Trade-Result (the oldest queued trade) or Market-Feed (20 tickers, the
//! specification's batch); when nothing is ready, it draws again among the customer-emulator
//! types, so Trade-Result's and Market-Feed's shares are at most the mix's and follow from the
//! orders, as in the specification, where the MEE, not the mix, starts them.

use super::schema::trade_types;
use std::collections::VecDeque;

/// Lowest price, in cents.
pub const PRICE_LOW: i64 = 2_000;
/// Highest price, in cents.
pub const PRICE_HIGH: i64 = 3_000;
/// The wave's period, in seconds.
pub const PERIOD: i64 = 900;
/// Tickers per Market-Feed (clause 3.3.4: a batch of 20).
pub const FEED_BATCH: usize = 20;

/// Security `s`'s price in cents at `t` (seconds since the Unix epoch).
pub fn price(s: u32, t: i64) -> i64 {
    let phase = i64::from(s.wrapping_mul(2_654_435_761) % PERIOD as u32);
    let x = (t + phase).rem_euclid(PERIOD);
    let half = PERIOD / 2;
    let up = if x < half { x } else { PERIOD - x };
    PRICE_LOW + (PRICE_HIGH - PRICE_LOW) * up / half
}

/// A trade's money once executed at `price` (clause 3.3.8's Trade-Result frames 2 to 6),
/// computed the same way by the loader and by Trade-Result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Execution {
    /// `T_COMM`: the commission, `qty · price · rate` (rate in 1/100 percent).
    pub commission: i64,
    /// `T_TAX`: tax on a sell's gain for a taxable account (0 otherwise).
    pub tax: i64,
    /// `SE_AMT`: what settles into the account.
    pub settlement: i64,
}

/// What a trade is: its type, shares and price, and what the customer's tier pays on it.
#[derive(Clone, Copy, Debug)]
pub struct Terms {
    /// Trade type.
    pub kind: u32,
    /// Shares.
    pub qty: i32,
    /// Price per share, in cents.
    pub price: i64,
    /// `CH_CHRG`.
    pub charge: i64,
    /// `CR_RATE`, 1/100 percent.
    pub commission_rate: u32,
}

/// The execution of a trade on `terms`, with the gain `sell_value - buy_value` of the shares
/// it sold (for tax), the account's `tax_status` (0 none, 1 withheld from the settlement, 2
/// reported) and the customer's tax rate `tax_rate` (1/10 000).
pub fn execute(terms: Terms, gain: i64, tax_status: u32, tax_rate: u32) -> Execution {
    let Terms { kind: tt, qty, price, charge, commission_rate: rate } = terms;
    let value = i64::from(qty) * price;
    let commission = value * i64::from(rate) / 10_000;
    let tax = if tax_status != 0 && trade_types::is_sell(tt) && gain > 0 {
        gain * i64::from(tax_rate) / 10_000
    } else {
        0
    };
    let mut settlement = if trade_types::is_sell(tt) {
        value - charge - commission
    } else {
        -(value + charge + commission)
    };
    if tax_status == 1 {
        settlement -= tax;
    }
    Execution { commission, tax, settlement }
}

/// A holding as the trading rules see it: the trade that created it, its price and quantity
/// (negative: short).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lot {
    /// `H_T_ID`.
    pub trade: u64,
    /// Its sequence number in the holding key.
    pub n: u32,
    /// `H_PRICE`.
    pub price: i64,
    /// `H_QTY`.
    pub qty: i32,
    /// `H_DTS`.
    pub dts: i64,
    /// `H_HIST_N`: history rows naming it so far.
    pub hist: u32,
}

/// What one lot went through in a trade: its quantity before and after (0 after: removed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LotChange {
    /// The lot.
    pub lot: Lot,
    /// `HH_AFTER_QTY`.
    pub after: i32,
}

/// Applies a trade of `qty` shares (`sell` or buy) at `price` to a position's `lots` (oldest
/// first), as Trade-Result's frame 2 does: a sell consumes long lots (a buy short ones) LIFO
/// or FIFO, and what is left over opens a new lot (short for a sell) numbered `next`. Returns
/// the changes to existing lots in the order made, the new lot if any, and the buy and sell
/// values of the shares that closed positions (for the tax on gains).
pub fn trade_lots(
    lots: &[Lot],
    sell: bool,
    lifo: bool,
    qty: i32,
    price: i64,
    changes: &mut Vec<LotChange>,
) -> (i32, i64, i64) {
    changes.clear();
    let mut needed = qty;
    let (mut buy_value, mut sell_value) = (0i64, 0i64);
    let opposite = |l: &Lot| if sell { l.qty > 0 } else { l.qty < 0 };
    for i in 0..lots.len() {
        let lot = &lots[if lifo { lots.len() - 1 - i } else { i }];
        if needed == 0 {
            break;
        }
        if !opposite(lot) {
            continue;
        }
        let have = lot.qty.abs();
        let take = have.min(needed);
        let after = if sell { lot.qty - take } else { lot.qty + take };
        changes.push(LotChange { lot: *lot, after });
        if sell {
            buy_value += i64::from(take) * lot.price;
            sell_value += i64::from(take) * price;
        } else {
            sell_value += i64::from(take) * lot.price;
            buy_value += i64::from(take) * price;
        }
        needed -= take;
    }
    (needed, buy_value, sell_value)
}

/// A trade the emulator executes next: its id and the price it executes at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ready {
    /// `T_ID`.
    pub trade: u64,
    /// The security, for its price and ticker.
    pub security: u32,
    /// Shares.
    pub qty: i32,
}

/// One worker's market exchange emulator (see the module docs).
#[derive(Debug, Default)]
pub struct Emulator {
    /// Trades submitted to the market, oldest first, waiting for their Trade-Result.
    pub queued: VecDeque<Ready>,
    /// Tickers of executed trades not yet fed: security and shares.
    pub tickers: Vec<(u32, i32)>,
}

impl Emulator {
    /// A submitted trade (a market order, or a triggered limit order) reaches the market.
    pub fn submit(&mut self, r: Ready) {
        self.queued.push_back(r);
    }

    /// The next trade to execute, if any; its ticker joins the next Market-Feed.
    pub fn next_result(&mut self) -> Option<Ready> {
        let r = self.queued.pop_front()?;
        self.tickers.push((r.security, r.qty));
        Some(r)
    }

    /// A full batch of tickers for a Market-Feed, if one is ready (taken out into `out`).
    pub fn next_feed(&mut self, out: &mut Vec<(u32, i32)>) -> bool {
        if self.tickers.len() < FEED_BATCH {
            return false;
        }
        out.clear();
        out.extend(self.tickers.drain(..FEED_BATCH));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_stay_in_range_and_move_continuously() {
        for s in [0, 1, 684, 99_999] {
            let mut last = price(s, 1_700_000_000);
            for t in 1_700_000_001..1_700_002_000 {
                let p = price(s, t);
                assert!((PRICE_LOW..=PRICE_HIGH).contains(&p));
                assert!((p - last).abs() <= 3, "a second moves the price by at most 3 cents");
                last = p;
            }
        }
        assert_ne!(price(1, 0), price(2, 0), "securities have phases of their own");
    }

    #[test]
    fn a_sell_consumes_lots_lifo_or_fifo_and_opens_a_short_with_the_rest() {
        let lots = [
            Lot { trade: 1, n: 0, price: 2_000, qty: 100, dts: 10, hist: 1 },
            Lot { trade: 2, n: 1, price: 2_500, qty: 200, dts: 20, hist: 1 },
        ];
        let mut ch = Vec::new();
        // FIFO: the oldest lot first; 400 shares leave 100 to open a short position.
        let (left, buy, sell) = trade_lots(&lots, true, false, 400, 3_000, &mut ch);
        assert_eq!(left, 100);
        assert_eq!(
            ch,
            vec![LotChange { lot: lots[0], after: 0 }, LotChange { lot: lots[1], after: 0 }]
        );
        assert_eq!((buy, sell), (100 * 2_000 + 200 * 2_500, 300 * 3_000));
        // LIFO: the newest lot first, partly.
        let (left, buy, _) = trade_lots(&lots, true, true, 150, 3_000, &mut ch);
        assert_eq!((left, buy), (0, 150 * 2_500));
        assert_eq!(ch, vec![LotChange { lot: lots[1], after: 50 }]);
        // A buy covers no long lot: it all opens a new lot.
        let (left, _, _) = trade_lots(&lots, false, true, 100, 3_000, &mut ch);
        assert_eq!((left, ch.len()), (100, 0));
    }

    #[test]
    fn executions_charge_commission_and_withhold_tax_on_gains_only() {
        use trade_types::*;
        let terms =
            |kind| Terms { kind, qty: 100, price: 2_500, charge: 1_000, commission_rate: 50 };
        let buy = execute(terms(MARKET_BUY), 0, 1, 2_000);
        assert_eq!(buy, Execution { commission: 1_250, tax: 0, settlement: -(250_000 + 2_250) });
        let sell = execute(terms(LIMIT_SELL), 10_000, 1, 2_000);
        assert_eq!(sell.tax, 2_000);
        assert_eq!(sell.settlement, 250_000 - 1_000 - 1_250 - 2_000);
        // Status 2: the tax is reported, not withheld; status 0: none.
        assert_eq!(execute(terms(LIMIT_SELL), 10_000, 2, 2_000).settlement, 250_000 - 2_250);
        assert_eq!(execute(terms(LIMIT_SELL), 10_000, 0, 2_000).tax, 0);
    }

    #[test]
    fn the_emulator_feeds_twenty_tickers_of_executed_trades() {
        let mut e = Emulator::default();
        let mut feed = Vec::new();
        for t in 0..25 {
            e.submit(Ready { trade: t, security: t as u32, qty: 100 });
        }
        assert!(!e.next_feed(&mut feed), "no ticker before a trade executes");
        for t in 0..25 {
            assert_eq!(e.next_result().map(|r| r.trade), Some(t), "oldest first");
        }
        assert!(e.next_result().is_none());
        assert!(e.next_feed(&mut feed));
        assert_eq!(feed.len(), FEED_BATCH);
        assert_eq!(feed[0], (0, 100));
        assert!(!e.next_feed(&mut feed), "five tickers wait for the next batch");
    }
}
