//! Checker self-tests: a hand-written history per anomaly class is classified as exactly that
//! class, and serializable histories give no false positive.

use super::*;
use crate::history::Outcome::{Aborted, Committed};

const X: u64 = 1;
const Y: u64 = 2;

fn r(key: u64, stamp: Stamp) -> Event {
    Event::Read { table: 0, key, stamp, cols: u64::MAX }
}
fn w(key: u64, stamp: Stamp, prev: Stamp) -> Event {
    Event::Write { table: 0, key, stamp, prev, present: true, cols: u64::MAX }
}
fn del(key: u64, stamp: Stamp, prev: Stamp) -> Event {
    Event::Write { table: 0, key, stamp, prev, present: false, cols: u64::MAX }
}
fn scan(lo: u64, hi: u64) -> Event {
    Event::Range { table: 0, lo, hi }
}

fn history(txns: &[(u64, crate::history::Outcome, &[Event])]) -> History {
    let mut h = History::new();
    for (i, (id, outcome, events)) in txns.iter().enumerate() {
        h.push(*id, *outcome, 10 * (i as u64 + 1), events);
    }
    h
}

#[track_caller]
fn only(h: &History, class: AnomalyClass) -> Report {
    let rep = check(h);
    assert_eq!(rep.classes(), vec![class], "{rep}");
    rep
}

#[test]
fn serial_histories_have_no_anomaly() {
    let h = history(&[
        (1, Committed, &[r(X, INITIAL), w(X, 10, INITIAL)]),
        (2, Committed, &[r(X, 10), w(X, 20, 10), w(Y, 21, INITIAL)]),
        (3, Aborted, &[r(X, 20), w(X, 30, 20)]),
        (4, Committed, &[r(X, 20), r(Y, 21), scan(0, 100)]),
        (5, Committed, &[w(7, 50, UNBORN)]),
        (6, Committed, &[scan(5, 10), r(7, 50)]),
    ]);
    let rep = check(&h);
    assert!(rep.anomalies.is_empty(), "{rep}");
    assert_eq!(rep.committed, 5);
    assert!(rep.edges[0] >= 1 && rep.edges[1] >= 3, "{rep}");
    assert!(rep.to_string().contains("no anomaly"));
}

#[test]
fn g0_write_cycle() {
    let h = history(&[
        (1, Committed, &[w(X, 10, INITIAL), w(Y, 21, 20)]),
        (2, Committed, &[w(X, 11, 10), w(Y, 20, INITIAL)]),
    ]);
    let rep = only(&h, AnomalyClass::G0);
    let cy = &rep.anomalies[0].cycle;
    assert_eq!(cy.len(), 2);
    assert!(cy.iter().all(|s| s.kind == EdgeKind::Ww));
}

#[test]
fn g0_committed_write_over_an_aborted_version() {
    let h = history(&[(1, Aborted, &[w(X, 10, INITIAL)]), (2, Committed, &[w(X, 11, 10)])]);
    only(&h, AnomalyClass::G0);
}

#[test]
fn g1a_aborted_read() {
    let h = history(&[(1, Aborted, &[w(X, 10, INITIAL)]), (2, Committed, &[r(X, 10)])]);
    let rep = only(&h, AnomalyClass::G1a);
    assert!(rep.anomalies[0].example.contains("aborted"), "{rep}");
}

#[test]
fn g1b_intermediate_read() {
    let h =
        history(&[(1, Committed, &[w(X, 10, INITIAL), w(X, 11, 10)]), (2, Committed, &[r(X, 10)])]);
    let rep = check(&h);
    assert!(rep.has(AnomalyClass::G1b), "{rep}");
    // Reading 10 and not 11 also puts the reader between the writer's two versions.
    assert!(rep.classes().iter().all(|c| matches!(c, AnomalyClass::G1b | AnomalyClass::GSingle)));
}

#[test]
fn g1c_circular_information_flow() {
    let h = history(&[
        (1, Committed, &[w(X, 10, INITIAL), r(Y, 20)]),
        (2, Committed, &[w(Y, 20, INITIAL), r(X, 10)]),
    ]);
    let rep = only(&h, AnomalyClass::G1c);
    assert!(rep.anomalies[0].cycle.iter().all(|s| s.kind == EdgeKind::Wr));
}

#[test]
fn lost_update_as_a_fork_and_as_a_two_cycle() {
    let fork = history(&[
        (1, Committed, &[r(X, INITIAL), w(X, 10, INITIAL)]),
        (2, Committed, &[r(X, INITIAL), w(X, 11, INITIAL)]),
    ]);
    assert!(check(&fork).has(AnomalyClass::LostUpdate));
    let chain = history(&[
        (1, Committed, &[r(X, INITIAL), w(X, 10, INITIAL)]),
        (2, Committed, &[r(X, INITIAL), w(X, 11, 10)]),
    ]);
    let rep = only(&chain, AnomalyClass::LostUpdate);
    let kinds: Vec<_> = rep.anomalies[0].cycle.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, vec![EdgeKind::Rw, EdgeKind::Ww]);
}

#[test]
fn g_single_read_skew() {
    let h = history(&[
        (1, Committed, &[r(X, INITIAL), r(Y, 20)]),
        (2, Committed, &[w(X, 10, INITIAL), w(Y, 20, INITIAL)]),
    ]);
    only(&h, AnomalyClass::GSingle);
}

#[test]
fn g2_item_write_skew() {
    let h = history(&[
        (1, Committed, &[r(X, INITIAL), r(Y, INITIAL), w(X, 10, INITIAL)]),
        (2, Committed, &[r(X, INITIAL), r(Y, INITIAL), w(Y, 20, INITIAL)]),
    ]);
    let rep = only(&h, AnomalyClass::G2Item);
    assert!(rep.anomalies[0].cycle.iter().all(|s| s.kind == EdgeKind::Rw));
}

/// Fekete et al.'s read-only anomaly: allowed by snapshot isolation, a G2-item cycle through a
/// read-only transaction.
#[test]
fn read_only_anomaly_is_g2_item() {
    let h = history(&[
        (2, Committed, &[r(X, INITIAL), r(Y, INITIAL), w(Y, 20, INITIAL)]),
        (1, Committed, &[w(X, 10, INITIAL)]),
        (3, Committed, &[r(X, 10), r(Y, INITIAL)]),
    ]);
    let rep = only(&h, AnomalyClass::G2Item);
    assert_eq!(rep.anomalies[0].cycle.len(), 3);
}

#[test]
fn g2_phantom_two_scanners_inserting_into_each_others_range() {
    let h = history(&[
        (1, Committed, &[scan(0, 10), w(20, 100, UNBORN)]),
        (2, Committed, &[scan(15, 25), w(5, 200, UNBORN)]),
    ]);
    let rep = only(&h, AnomalyClass::G2);
    let cy = &rep.anomalies[0].cycle;
    assert!(cy.iter().all(|s| s.kind == EdgeKind::PredRw), "{rep}");
    let text = rep.to_string();
    assert!(text.contains("cycle: t") && text.contains("rw(predicate)"), "{text}");
}

#[test]
fn a_scan_placed_between_incarnations_of_a_key_is_serializable() {
    // k is inserted, deleted, then inserted again as a new row; a scan at ts 30 (between the
    // delete and the re-insert) saw nothing, a read at ts 50 saw the new row.
    let h = history(&[
        (1, Committed, &[w(9, 100, UNBORN)]),
        (2, Committed, &[del(9, 101, 100)]),
        (3, Committed, &[scan(0, 10)]),
        (4, Committed, &[w(9, 300, UNBORN)]),
        (5, Committed, &[r(9, 300), r(9, 300)]),
    ]);
    let rep = check(&h);
    assert!(rep.anomalies.is_empty(), "{rep}");
    assert_eq!(rep.edges[3], 1, "the scan read the delete: {rep}");
    assert_eq!(rep.edges[4], 1, "the re-insert overwrote what the scan saw: {rep}");
}

#[test]
fn invented_versions_and_absences() {
    let h = history(&[(1, Committed, &[w(X, 10, INITIAL)]), (2, Committed, &[r(X, 999)])]);
    only(&h, AnomalyClass::Invented);
    // X was loaded and only ever overwritten: no scan can have seen it absent.
    let h = history(&[(1, Committed, &[w(X, 10, INITIAL)]), (2, Committed, &[scan(0, 5)])]);
    only(&h, AnomalyClass::Invented);
    let h = history(&[
        (1, Committed, &[w(X, 10, INITIAL)]),
        (2, Committed, &[w(Y, 10, INITIAL)]),
        (3, Committed, &[w(X, 10, INITIAL)]),
    ]);
    assert!(check(&h).has(AnomalyClass::Invented), "a stamp installed twice");
}

#[test]
fn reports_one_entry_per_class_with_counts() {
    let mut txns: Vec<(u64, crate::history::Outcome, Vec<Event>)> = Vec::new();
    for k in 0..5u64 {
        // Five independent write skews.
        let (a, b) = (100 + 2 * k, 101 + 2 * k);
        txns.push((
            10 * k + 1,
            Committed,
            vec![r(a, INITIAL), r(b, INITIAL), w(a, 1000 + k as Stamp, INITIAL)],
        ));
        txns.push((
            10 * k + 2,
            Committed,
            vec![r(a, INITIAL), r(b, INITIAL), w(b, 2000 + k as Stamp, INITIAL)],
        ));
    }
    let mut h = History::new();
    for (i, (id, o, e)) in txns.iter().enumerate() {
        h.push(*id, *o, i as u64, e);
    }
    let rep = check(&h);
    assert_eq!(rep.classes(), vec![AnomalyClass::G2Item]);
    assert_eq!(rep.anomalies[0].count, 5);
}

/// A long serial chain (one key overwritten 300 000 times, each transaction reading the previous
/// version) checks without deep recursion and without false positives.
#[test]
fn long_serial_chain_scales() {
    let mut h = History::new();
    let mut prev = INITIAL;
    for i in 0..300_000u64 {
        let s = 10 + i as Stamp;
        h.push(i + 1, Committed, i, &[r(X, prev), w(X, s, prev)]);
        prev = s;
    }
    let rep = check(&h);
    assert!(rep.anomalies.is_empty(), "{rep}");
    assert_eq!(rep.edges[0], 299_999);
}

/// One cycle through 100 000 transactions (each reads the initial version of the key the next
/// one overwrites): found, and reported with all its edges.
#[test]
fn one_huge_cycle_is_found() {
    let n = 100_000u64;
    let mut h = History::new();
    for i in 0..n {
        h.push(i + 1, Committed, i, &[w(i, 10, INITIAL), r((i + 1) % n, INITIAL)]);
    }
    let rep = only(&h, AnomalyClass::G2Item);
    assert_eq!(rep.anomalies[0].cycle.len() as u64, n);
}

/// Cicada installs a version below a newer one: both name the loaded version as `prev`. In a
/// stamp-ordered history that is the order 1 < 20 < 30, not two overwrites of version 1: with
/// T1 (at 30) writing X blindly, T2 (at 20) writing X below it and T3 (at 25) reading T2's X,
/// the history is serializable (T2, T3, T1). The same history without the declaration is a
/// lost update, and write skew is still found in a stamp-ordered history.
#[test]
fn stamp_ordered_versions_are_placed_by_stamp() {
    let events: [(u64, crate::history::Outcome, &[Event]); 3] = [
        (1, Committed, &[w(X, 30, INITIAL)]),
        (2, Committed, &[w(X, 20, INITIAL)]),
        (3, Committed, &[r(X, 20), w(Y, 25, INITIAL)]),
    ];
    let mut h = history(&events);
    only(&h, AnomalyClass::LostUpdate);
    h.set_stamp_ordered();
    let rep = check(&h);
    assert!(rep.anomalies.is_empty(), "{rep}");
    let mut h = history(&[
        (1, Committed, &[r(X, INITIAL), w(Y, 30, INITIAL)]),
        (2, Committed, &[r(Y, INITIAL), w(X, 20, INITIAL)]),
    ]);
    h.set_stamp_ordered();
    only(&h, AnomalyClass::G2Item);
}

fn r_cols(key: u64, stamp: Stamp, cols: u64) -> Event {
    Event::Read { table: 0, key, stamp, cols }
}
fn acc(key: u64, stamp: Stamp, prev: Stamp, cols: u64) -> Event {
    Event::Write { table: 0, key, stamp, prev, present: true, cols }
}

/// A read of one column of a row does not depend on a write of another column of it (IC3's
/// accumulation deferred to commit): the cycle a per-row graph would see is not there. A read
/// of the written column still closes it.
#[test]
fn reads_and_writes_of_disjoint_columns_do_not_conflict() {
    // t1 reads column 0b10 of X as loaded; t2 accumulates into column 0b01 of X and writes Y,
    // which t1 reads: per row, t1 -rw-> t2 -wr-> t1.
    let h = history(&[
        (1, Committed, &[r_cols(X, INITIAL, 0b10), r(Y, 20)]),
        (2, Committed, &[acc(X, 10, INITIAL, 0b01), w(Y, 20, INITIAL)]),
    ]);
    let rep = check(&h);
    assert!(rep.anomalies.is_empty(), "{rep:#?}");
    assert_eq!(rep.edges, [0, 1, 0, 0, 0], "only t2 -wr-> t1 on Y");
    let h = history(&[
        (1, Committed, &[r_cols(X, INITIAL, 0b11), r(Y, 20)]),
        (2, Committed, &[acc(X, 10, INITIAL, 0b01), w(Y, 20, INITIAL)]),
    ]);
    assert_eq!(check(&h).anomalies[0].class, AnomalyClass::GSingle);
}

/// A read depends on the latest writer of each column it read, however many writes of other
/// columns came between, and anti-depends on the next writer of each.
#[test]
fn a_read_depends_on_the_last_writer_of_each_column_it_read() {
    // X: t1 writes the whole row (10), t2..t4 accumulate column 0b01 (11..13), t5 reads
    // column 0b10 of 13, t6 accumulates 0b01 (14), t7 writes the whole row (15).
    let h = history(&[
        (1, Committed, &[w(X, 10, INITIAL)]),
        (2, Committed, &[acc(X, 11, 10, 0b01)]),
        (3, Committed, &[acc(X, 12, 11, 0b01)]),
        (4, Committed, &[acc(X, 13, 12, 0b01)]),
        (5, Committed, &[r_cols(X, 13, 0b10)]),
        (6, Committed, &[acc(X, 14, 13, 0b01)]),
        (7, Committed, &[w(X, 15, 14)]),
    ]);
    let rep = check(&h);
    assert!(rep.anomalies.is_empty(), "{rep:#?}");
    // ww: the five consecutive pairs of six writers; wr: t1 -> t5 only; rw: t5 -> t7 only.
    assert_eq!(rep.edges, [5, 1, 1, 0, 0]);
}
