//! Index memory that the indexes free through `crossbeam-epoch` (congee's replaced nodes, the
//! dense index's replaced directories) is freed during a run, not only when the process ends:
//! workers keep one guard pinned and repin it per transaction, and a repin alone never collects
//! garbage. A counting allocator measures the heap while one worker inserts and deletes keys of
//! an ordered index for many transactions; the heap must stop growing.

use crate::counting;

use std::time::Duration;
use txlab::prelude::*;

const T: TableId = TableId(0);

/// Inserts then deletes `keys` keys spread over the key space (so congee grows and shrinks
/// nodes at every level), `rounds` times.
fn churn<W: Worker>(w: &mut W, rounds: u64, keys: u64) {
    for round in 0..rounds {
        for op in 0..2 {
            for i in 0..keys {
                let key = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) ^ (round % 3);
                w.begin();
                let ok = if op == 0 { w.insert(T, key, &[1; 8]) } else { w.delete(T, key) };
                ok.expect("no other worker");
                w.commit().expect("no other worker");
            }
        }
    }
}

#[test]
fn ordered_index_garbage_is_collected_during_a_run() {
    let opts = DbOptions {
        max_workers: 4,
        epoch_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let _turn = counting::turn();
    let spec = TableSpec::new("t", 8, 4096).with_capacity(1 << 16);
    let db = Database::<txlab::protocols::silo::Silo>::with_options(&[spec], opts).unwrap();
    let mut w = db.worker().unwrap();
    // Warm up: the index, row slots and the worker's buffers reach their working size.
    churn(&mut w, 20, 2048);
    let before = counting::live();
    churn(&mut w, 200, 2048);
    let grown = counting::live() - before;
    // 200 rounds replace hundreds of thousands of congee nodes (tens of megabytes if they were
    // never freed); what stays live may be a few bags of garbage waiting for the next collection.
    assert!(grown < 4 << 20, "the heap grew by {grown} bytes over 800 000 transactions");
}
