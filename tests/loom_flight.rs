//! Model-checks the log epochs' in-flight handshake (`src/durability/log/flight.rs`) with loom:
//! every interleaving (within loom's bounds) of committing workers and a group commit, with
//! loom's atomics standing in for std's. The property the commit contract rests on: once a
//! group has closed epoch `n` and seen every slot settled, every commit that entered an epoch
//! below `n` has installed its writes (a checkpoint that waited for such a group reads them),
//! and a commit that did not leave in time entered `n` or later. Compiled only under
//! `--cfg loom`: `scripts/loom.sh` runs it.
#![cfg(loom)]

/// What `flight.rs` takes from its parent module: loom's atomics.
mod shim {
    pub use loom::sync::atomic::{fence, AtomicU64, Ordering};
}

#[allow(dead_code)]
#[path = "../src/durability/log/flight.rs"]
mod flight;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// `workers` workers each commit once (enter, write their datum, leave) while a group closes
/// the epoch and waits for the slots; the group then checks every worker whose epoch it can
/// see: one below the closed epoch must have its datum written.
fn model(workers: usize, preemptions: usize) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.check(move || {
        let epoch = Arc::new(AtomicU64::new(1));
        let slots: Arc<Vec<AtomicU64>> =
            Arc::new((0..workers).map(|_| AtomicU64::new(flight::IDLE)).collect());
        // Per worker: the epoch it entered (0: not yet known) and its installed datum.
        let entered: Arc<Vec<AtomicU64>> =
            Arc::new((0..workers).map(|_| AtomicU64::new(0)).collect());
        let data: Arc<Vec<AtomicU64>> = Arc::new((0..workers).map(|_| AtomicU64::new(0)).collect());
        let ts: Vec<_> = (0..workers)
            .map(|i| {
                let (epoch, slots, entered, data) =
                    (epoch.clone(), slots.clone(), entered.clone(), data.clone());
                loom::thread::spawn(move || {
                    let e = flight::enter(&epoch, &slots[i]);
                    entered[i].store(e, Ordering::Relaxed);
                    // The install: a plain write the group must see once the worker left.
                    data[i].store(1, Ordering::Relaxed);
                    flight::leave(&slots[i]);
                })
            })
            .collect();
        let n = flight::close(&epoch);
        for s in slots.iter() {
            while !flight::settled(s, n) {
                loom::thread::yield_now();
            }
        }
        for i in 0..workers {
            let e = entered[i].load(Ordering::Relaxed);
            if e != 0 && e < n {
                assert_eq!(data[i].load(Ordering::Relaxed), 1, "worker {i} of epoch {e} < {n}");
            }
        }
        for t in ts {
            t.join().unwrap();
        }
        // Every worker entered: those the group did not wait for entered `n` or later.
        for i in 0..workers {
            assert!(entered[i].load(Ordering::Relaxed) >= 1);
        }
    });
}

#[test]
fn one_worker_and_a_group() {
    model(1, 3);
}

#[test]
fn two_workers_and_a_group() {
    model(2, 2);
}
