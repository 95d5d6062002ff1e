//! Transaction histories: what each transaction read, installed and scanned, for the
//! serializability checker ([`crate::checker`]).
//!
//! Every protocol reports through the same small interface, a per-worker [`Recorder`] reached
//! through the worker's storage context, and only when the database was created with history
//! recording on (otherwise the recorder is absent and the protocol pays one predictable branch).
//!
//! ## Versions and stamps
//!
//! A version of a key is named by a [`Stamp`], a number unique among the versions of that key.
//! Which number is the protocol's business: Silo uses the TID it installs, single-version
//! protocols without TIDs (2PL, `nocc`) keep a stamp word in the record header and give every
//! write a fresh stamp. Two stamps are reserved: [`UNBORN`], the state of a row before its first
//! insert, and [`INITIAL`], the version the loader wrote. A delete installs a version too, a
//! tombstone (`present: false`), so that reading an absent row is reading a version.
//!
//! * `Read { stamp, cols }`: the transaction observed that version (a tombstone for an absent
//!   row), or of it the columns `cols` (a mask over the table's declared columns).
//! * `Write { stamp, prev, cols }`: it installed version `stamp` directly after version `prev`
//!   of the same key, `prev` being [`UNBORN`] for a brand-new row, changing the columns `cols`
//!   (every column unless it says fewer: a commutative accumulation of one column). Transactions that later abort report
//!   the writes they made visible too (in-place writers), so reads of aborted data can be seen.
//! * `Range { lo, hi }`: a predicate read. Every key of `[lo, hi]` that the transaction has no
//!   `Read` of was observed absent. A point read that finds no row is `Range { k, k }`.
//!
//! Versions are per key; the columns refine which of a key's writes a read depends on (see
//! [`crate::checker`]). Every protocol reads with the columns it was asked for and writes
//! whole rows, so only a write that names fewer columns makes them matter.
//!
//! Each transaction also carries a timestamp `ts` taken at its serialization point (with its
//! locks held or before its validation), or the protocol's logical commit timestamp where the
//! serialization order is logical (TicToc: [`Recorder::serial_point_at`]); the checker uses it
//! only to order the incarnations of a key (a key deleted, unlinked and inserted again) and to
//! tell which absent state of a key a predicate read observed (the latest one at or before the
//! reader's `ts`).

pub mod check;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Names one version of one key. See the module docs. (128 bits so that a protocol can fold a
/// row id into it: Silo's TIDs are unique per row, not per key.)
pub type Stamp = u128;

/// The state of a row before its first insert.
pub const UNBORN: Stamp = 0;
/// The version written by the loader.
pub const INITIAL: Stamp = 1;

/// One thing a transaction did. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Observed version `stamp` of `key`.
    Read {
        /// Table id.
        table: u32,
        /// Key.
        key: u64,
        /// The version observed.
        stamp: Stamp,
        /// The columns observed.
        cols: u64,
    },
    /// Installed version `stamp` of `key` directly after version `prev`.
    Write {
        /// Table id.
        table: u32,
        /// Key.
        key: u64,
        /// The new version.
        stamp: Stamp,
        /// The version it follows.
        prev: Stamp,
        /// `false` for a delete (a tombstone).
        present: bool,
        /// The columns changed (every one for an insert or delete).
        cols: u64,
    },
    /// Observed every key of `[lo, hi]` it did not read as absent.
    Range {
        /// Table id.
        table: u32,
        /// First key.
        lo: u64,
        /// Last key (inclusive).
        hi: u64,
    },
}

/// Whether a recorded transaction committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Committed.
    Committed,
    /// Aborted (by the protocol or the user).
    Aborted,
}

/// One recorded transaction attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    /// Unique id: `(worker + 1) << 40 | attempt number` for recorded runs.
    pub id: u64,
    /// Commit or abort.
    pub outcome: Outcome,
    /// Nanoseconds since the process's first recorded transaction, at the serialization point.
    pub ts: u64,
    /// Where its reads are placed in the same time line: `ts`, except for protocols that read a
    /// snapshot taken before they commit (multi-version), whose absent keys are judged at it.
    pub read_ts: u64,
    first: usize,
    len: usize,
}

/// A set of recorded transactions, in no particular order.
#[derive(Clone, Debug, Default)]
pub struct History {
    txns: Vec<TxnRecord>,
    events: Vec<Event>,
    /// The protocol orders each key's versions by their stamps (Cicada: a version may be
    /// installed below newer ones, so `prev` is only where it went in when it did).
    stamp_ordered: bool,
    /// Versions that hold another version's value (see [`Alias`]).
    aliases: Vec<Alias>,
}

/// A version that holds the value of an earlier one: a rollback put the earlier value back
/// under a fresh stamp (IC3, so that a record's word never returns to a value it had). Reads
/// of `stamp` read `of`, and a write after `stamp` follows `of`; the checker names the version
/// by `of` ([`History::resolved`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alias {
    /// Table id.
    pub table: u32,
    /// Key.
    pub key: u64,
    /// The fresh stamp.
    pub stamp: Stamp,
    /// The version whose value it holds.
    pub of: Stamp,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// The transactions.
    pub fn txns(&self) -> &[TxnRecord] {
        &self.txns
    }

    /// The events of `t`, in the order it did them.
    pub fn events(&self, t: &TxnRecord) -> &[Event] {
        &self.events[t.first..t.first + t.len]
    }

    /// Number of transactions.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether no transaction was recorded.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Appends a finished transaction (for hand-written histories and tests).
    pub fn push(&mut self, id: u64, outcome: Outcome, ts: u64, events: &[Event]) {
        let first = self.events.len();
        self.events.extend_from_slice(events);
        self.txns.push(TxnRecord { id, outcome, ts, read_ts: ts, first, len: events.len() });
    }

    /// Whether each key's committed versions are ordered by their stamps rather than by the
    /// writes' `prev` (see [`Recorder::order_by_stamps`]).
    pub fn stamp_ordered(&self) -> bool {
        self.stamp_ordered
    }

    /// Declares that each key's committed versions are ordered by their stamps.
    pub fn set_stamp_ordered(&mut self) {
        self.stamp_ordered = true;
    }

    /// Records that `alias.stamp` holds the value of `alias.of` (see [`Alias`]).
    pub fn push_alias(&mut self, alias: Alias) {
        self.aliases.push(alias);
    }

    /// The aliases recorded.
    pub fn aliases(&self) -> &[Alias] {
        &self.aliases
    }

    /// The same history with every alias resolved: each read of a stamp that holds another
    /// version's value names that version, and so does each write that followed it (through
    /// chains of aliases); no alias is left.
    pub fn resolved(&self) -> History {
        let map: rustc_hash::FxHashMap<(u32, u64, Stamp), Stamp> =
            self.aliases.iter().map(|a| ((a.table, a.key, a.stamp), a.of)).collect();
        let canon = |table: u32, key: u64, mut s: Stamp| {
            // Each alias names an earlier version (fresh stamps are drawn after the value
            // they restore was written), so a chain ends; the bound guards a malformed one.
            for _ in 0..=map.len() {
                match map.get(&(table, key, s)) {
                    Some(&of) => s = of,
                    None => break,
                }
            }
            s
        };
        let mut out = self.clone();
        out.aliases.clear();
        for e in &mut out.events {
            match e {
                Event::Read { table, key, stamp, .. } => *stamp = canon(*table, *key, *stamp),
                Event::Write { table, key, prev, .. } => *prev = canon(*table, *key, *prev),
                Event::Range { .. } => {}
            }
        }
        out
    }

    /// Moves every transaction of `other` into `self`.
    pub fn append(&mut self, other: &mut History) {
        self.stamp_ordered |= other.stamp_ordered;
        self.aliases.append(&mut other.aliases);
        let base = self.events.len();
        self.events.append(&mut other.events);
        self.txns.extend(other.txns.drain(..).map(|t| TxnRecord { first: t.first + base, ..t }));
    }
}

/// Nanoseconds on a clock shared by all threads (the first call starts it).
pub fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Bits of [`epoch_ts`] below the epoch: the clock within it, in nanoseconds (4.8 hours).
const EPOCH_TS_SHIFT: u32 = 44;

/// A timestamp on the time line of the protocols that serialize by epochs (Silo's commit and
/// its snapshots, `storage::snapshot`): the epoch first, then the clock `ns` ([`now_ns`]) within
/// it. A Silo commit's epoch is read at its serialization point, and transactions of an earlier
/// epoch serialize before those of a later one, so this order agrees with the serialization
/// order wherever the checker asks it (which absence a reader saw, the order of a key's
/// incarnations); a snapshot reader at boundary `b` sits at `epoch_ts(b, 0) - 1`, after every
/// commit below `b` and before the others, which the clock alone cannot say.
#[inline]
pub fn epoch_ts(epoch: u64, ns: u64) -> u64 {
    (epoch << EPOCH_TS_SHIFT) | ns.min((1 << EPOCH_TS_SHIFT) - 1)
}

/// Where workers deliver their histories when they are dropped.
#[derive(Debug, Default)]
pub struct Sink {
    merged: Mutex<History>,
    recorders: AtomicU64,
}

impl Sink {
    /// A recorder with an id no other recorder of this sink has had. (Worker slots are reused
    /// when workers come and go, so they cannot name recorders: two would hand out equal stamps.)
    pub fn recorder(&self) -> Recorder {
        Recorder::new(self.recorders.fetch_add(1, Ordering::Relaxed) as usize)
    }

    /// Adds a worker's history.
    pub fn deliver(&self, h: &mut History) {
        self.merged.lock().unwrap_or_else(|e| e.into_inner()).append(h);
    }

    /// Takes everything delivered so far.
    pub fn take(&self) -> History {
        std::mem::take(&mut *self.merged.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A worker's recorder: the one interface every protocol reports through.
#[derive(Debug)]
pub struct Recorder {
    worker: u64,
    attempts: u64,
    writes: u64,
    open: Option<Open>,
    history: History,
}

#[derive(Clone, Copy, Debug)]
struct Open {
    id: u64,
    first: usize,
    ts: Option<u64>,
    read_ts: Option<u64>,
    committed: bool,
}

impl Recorder {
    /// A recorder numbered `worker`: its transaction ids and stamps embed the number, so each
    /// recorder of one history needs its own (see [`Sink::recorder`]).
    pub fn new(worker: usize) -> Self {
        Recorder {
            worker: worker as u64 + 1,
            attempts: 0,
            writes: 0,
            open: None,
            history: History::new(),
        }
    }

    /// Starts a transaction attempt (called by the storage context at begin).
    #[inline]
    pub fn begin(&mut self) {
        self.attempts += 1;
        let id = (self.worker << 40) | self.attempts;
        let first = self.history.events.len();
        self.open = Some(Open { id, first, ts: None, read_ts: None, committed: false });
    }

    /// A fresh stamp for a write by this worker (for protocols without TIDs), unique in the
    /// history; never [`UNBORN`] or [`INITIAL`]. It fits in 62 bits.
    #[inline]
    pub fn next_stamp(&mut self) -> u64 {
        self.writes += 1;
        (self.worker << 40) | self.writes
    }

    /// Records a read of version `stamp`.
    #[inline]
    pub fn read(&mut self, table: u32, key: u64, stamp: Stamp) {
        self.read_cols(table, key, stamp, u64::MAX);
    }

    /// Records a read of the columns `cols` of version `stamp`.
    #[inline]
    pub fn read_cols(&mut self, table: u32, key: u64, stamp: Stamp, cols: u64) {
        self.history.events.push(Event::Read { table, key, stamp, cols });
    }

    /// Records an installed version.
    #[inline]
    pub fn write(&mut self, table: u32, key: u64, stamp: Stamp, prev: Stamp, present: bool) {
        self.write_cols(table, key, stamp, prev, present, u64::MAX);
    }

    /// Records an installed version that changed only the columns `cols`.
    #[inline]
    pub fn write_cols(
        &mut self,
        table: u32,
        key: u64,
        stamp: Stamp,
        prev: Stamp,
        present: bool,
        cols: u64,
    ) {
        self.history.events.push(Event::Write { table, key, stamp, prev, present, cols });
    }

    /// Moves the open attempt's write of `key` that followed version `from` to follow version
    /// `to` instead: a version committed after the write went in, but ordered before it (IC3's
    /// accumulation applied under an uncommitted write of the row's other columns becomes the
    /// committed version that write follows once it commits). Nothing when there is no such
    /// write.
    pub fn rebase(&mut self, table: u32, key: u64, from: Stamp, to: Stamp) {
        let Some(o) = &self.open else { return };
        for e in &mut self.history.events[o.first..] {
            if let Event::Write { table: t, key: k, prev, .. } = e {
                if (*t, *k, *prev) == (table, key, from) {
                    *prev = to;
                    return;
                }
            }
        }
        debug_assert!(false, "no write of t{table} k{key} after {from:#x} to rebase");
    }

    /// Records that version `stamp` of `key` holds the value of version `of`: a rollback put
    /// that value back under a fresh stamp (see [`Alias`]). Kept whatever becomes of the
    /// attempt.
    pub fn restored(&mut self, table: u32, key: u64, stamp: Stamp, of: Stamp) {
        self.history.aliases.push(Alias { table, key, stamp, of });
    }

    /// Declares that this protocol orders each key's committed versions by their stamps, not
    /// by install order: a version may go in below newer ones (Cicada installs versions by
    /// write timestamp anywhere in a chain). Its writes still name as `prev` the version they
    /// went in after, the state they overwrote when they were installed, and the checker places
    /// them by stamp among the key's committed versions (the first keeps its `prev`: the loaded
    /// version, or none).
    pub fn order_by_stamps(&mut self) {
        self.history.stamp_ordered = true;
    }

    /// Where the open attempt's events end now: a mark for [`Recorder::rewind`].
    #[inline]
    pub fn mark(&self) -> usize {
        self.history.events.len()
    }

    /// Forgets the events recorded since `mark` (taken in the same attempt): a part of the
    /// attempt that the protocol discarded and runs again (IC3's piece that failed its
    /// validation) observed nothing the transaction keeps.
    #[inline]
    pub fn rewind(&mut self, mark: usize) {
        debug_assert!(self.open.as_ref().is_some_and(|o| o.first <= mark));
        self.history.events.truncate(mark);
    }

    /// Records a predicate read of `[lo, hi]`.
    #[inline]
    pub fn range(&mut self, table: u32, lo: u64, hi: u64) {
        self.history.events.push(Event::Range { table, lo, hi });
    }

    /// Marks the serialization point (the first call of an attempt counts). Without a call,
    /// the end of the attempt is used.
    #[inline]
    pub fn serial_point(&mut self) {
        if let Some(o) = &mut self.open {
            o.ts.get_or_insert_with(now_ns);
        }
    }

    /// Marks the serialization point with the protocol's own logical timestamp instead of the
    /// clock (TicToc's commit timestamp). A history takes one kind of timestamp for all its
    /// transactions: a protocol that calls this calls it at every commit.
    #[inline]
    pub fn serial_point_at(&mut self, ts: u64) {
        if let Some(o) = &mut self.open {
            o.ts = Some(ts);
        }
    }

    /// Marks where the attempt's reads took place with the protocol's logical timestamp (a
    /// multi-version protocol's snapshot), when that is not its serialization point: the
    /// checker judges the keys it found absent there. Same time line as
    /// [`Recorder::serial_point_at`].
    #[inline]
    pub fn read_point_at(&mut self, ts: u64) {
        if let Some(o) = &mut self.open {
            o.read_ts = Some(ts);
        }
    }

    /// Marks the attempt committed (called by the protocol once its commit cannot fail).
    #[inline]
    pub fn committed(&mut self) {
        if let Some(o) = &mut self.open {
            o.committed = true;
        }
    }

    /// Ends the attempt (called by the storage context when the transaction leaves).
    #[inline]
    pub fn end(&mut self) {
        if let Some(o) = self.open.take() {
            let outcome = if o.committed { Outcome::Committed } else { Outcome::Aborted };
            let len = self.history.events.len() - o.first;
            let ts = o.ts.unwrap_or_else(now_ns);
            let read_ts = o.read_ts.unwrap_or(ts);
            let first = o.first;
            self.history.txns.push(TxnRecord { id: o.id, outcome, ts, read_ts, first, len });
        }
    }

    /// Ends the attempt and forgets it with its events, for a protocol whose uncommitted
    /// attempts leave nothing any transaction can read (BOHM: an abandoned attempt's versions
    /// stay unproduced, a rolled-back one's hold the previous values under their origins), so
    /// that a history of many abandoned attempts holds only what the checker can use.
    #[inline]
    pub fn discard(&mut self) {
        if let Some(o) = self.open.take() {
            self.history.events.truncate(o.first);
        }
    }

    /// The history recorded so far (moved out).
    pub fn take(&mut self) -> History {
        std::mem::take(&mut self.history)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rollback that put version 5's value back as 9, then again as 12: a read of 12 and a
    /// write after it name 5 once resolved (through the chain), reads of other keys and other
    /// events stay; the checker finds the history clean, and without the aliases a read of a
    /// version nobody wrote.
    #[test]
    fn aliases_resolve_to_the_version_whose_value_they_hold() {
        let read = |key, stamp| Event::Read { table: 0, key, stamp, cols: u64::MAX };
        let write = |stamp, prev| Event::Write {
            table: 0,
            key: 1,
            stamp,
            prev,
            present: true,
            cols: u64::MAX,
        };
        let mut h = History::new();
        h.push(1, Outcome::Committed, 10, &[write(5, INITIAL)]);
        h.push(2, Outcome::Aborted, 20, &[write(7, 5)]);
        h.push(3, Outcome::Committed, 30, &[read(1, 12), read(2, 12)]);
        h.push(4, Outcome::Committed, 40, &[write(13, 12)]);
        h.push_alias(Alias { table: 0, key: 1, stamp: 9, of: 5 });
        h.push_alias(Alias { table: 0, key: 1, stamp: 12, of: 9 });
        let r = h.resolved();
        assert!(r.aliases().is_empty());
        let events: Vec<Event> = r.txns().iter().flat_map(|t| r.events(t).to_vec()).collect();
        assert_eq!(
            events,
            [write(5, INITIAL), write(7, 5), read(1, 5), read(2, 12), write(13, 5)],
            "key 2 has no alias"
        );
        let mut clean = History::new();
        clean.push(1, Outcome::Committed, 10, &[write(5, INITIAL)]);
        clean.push(2, Outcome::Aborted, 20, &[write(7, 5)]);
        clean.push(3, Outcome::Committed, 30, &[read(1, 12)]);
        clean.push(4, Outcome::Committed, 40, &[write(13, 12)]);
        let invented = |h: &History| {
            check::check(h).anomalies.iter().any(|a| a.class == check::AnomalyClass::Invented)
        };
        assert!(invented(&clean), "without aliases, 12 is a version nobody wrote");
        clean.push_alias(Alias { table: 0, key: 1, stamp: 9, of: 5 });
        clean.push_alias(Alias { table: 0, key: 1, stamp: 12, of: 9 });
        let report = check::check(&clean);
        assert!(report.anomalies.is_empty(), "{report:?}");
    }

    #[test]
    fn recorder_assigns_unique_ids_and_stamps_and_keeps_events_per_attempt() {
        let mut r = Recorder::new(3);
        r.begin();
        let s = r.next_stamp() as Stamp;
        assert!(s > INITIAL);
        r.write(0, 7, s, INITIAL, true);
        r.committed();
        r.end();
        r.begin();
        r.read(0, 7, s);
        r.end();
        let h = r.take();
        assert_eq!(h.len(), 2);
        let (a, b) = (h.txns()[0], h.txns()[1]);
        assert_ne!(a.id, b.id);
        assert_eq!(a.outcome, Outcome::Committed);
        assert_eq!(b.outcome, Outcome::Aborted);
        assert_eq!(
            h.events(&a),
            &[Event::Write {
                table: 0,
                key: 7,
                stamp: s,
                prev: INITIAL,
                present: true,
                cols: u64::MAX
            }]
        );
        assert_eq!(h.events(&b), &[Event::Read { table: 0, key: 7, stamp: s, cols: u64::MAX }]);
        assert_ne!(Recorder::new(4).next_stamp() as Stamp, s, "stamps differ between workers");
    }

    #[test]
    fn a_discarded_attempt_leaves_no_trace() {
        let mut r = Recorder::new(1);
        r.begin();
        r.read(0, 1, INITIAL);
        r.committed();
        r.end();
        r.begin();
        r.read(0, 2, INITIAL);
        r.range(0, 3, 4);
        r.discard();
        r.end();
        let h = r.take();
        assert_eq!(h.len(), 1);
        assert_eq!(
            h.events(&h.txns()[0]),
            &[Event::Read { table: 0, key: 1, stamp: INITIAL, cols: u64::MAX }]
        );
        assert_eq!(h.events.len(), 1, "the discarded attempt's events are gone");
    }

    #[test]
    fn append_keeps_each_transactions_events() {
        let mut a = History::new();
        a.push(1, Outcome::Committed, 5, &[Event::Range { table: 1, lo: 2, hi: 3 }]);
        let mut b = History::new();
        b.push(
            2,
            Outcome::Aborted,
            6,
            &[Event::Read { table: 0, key: 1, stamp: INITIAL, cols: u64::MAX }],
        );
        a.append(&mut b);
        assert!(b.is_empty());
        let t = a.txns()[1];
        assert_eq!(t.id, 2);
        assert_eq!(
            a.events(&t),
            &[Event::Read { table: 0, key: 1, stamp: INITIAL, cols: u64::MAX }]
        );
    }
}
