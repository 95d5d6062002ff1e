//! Model-checks the queue lock (`src/protocols/mocc/mql.rs`) with loom: every interleaving
//! (within loom's bounds) of a few threads requesting, cancelling and releasing, with loom's
//! atomics standing in for std's. Compiled only under `--cfg loom`: `scripts/loom.sh` runs it.
#![cfg(loom)]

/// What `mql.rs` takes from its parent module: loom's atomics, a spin-wait that yields to
/// loom's scheduler, and small chunks.
mod shim {
    pub use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

    pub const CHUNK: usize = 2;
    pub const CHUNKS: usize = 4;

    pub struct Yield;

    impl Yield {
        pub fn spin(&mut self) {
            loom::thread::yield_now();
        }
    }

    pub fn spin_wait() -> Yield {
        Yield
    }
}

#[allow(dead_code)]
#[path = "../src/protocols/mocc/mql.rs"]
mod mql;

use loom::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use loom::sync::Arc;
use mql::{Grant, Mql, Patience, QNodes};

/// Holds the grant `g` in a critical section that checks exclusion, then releases it.
fn hold(h: &mut Mql, word: &AtomicU64, inside: &AtomicI64, g: Grant) {
    match g {
        Grant::Read => {
            assert!(inside.fetch_add(1, Ordering::SeqCst) >= 0, "a reader beside a writer");
            inside.fetch_sub(1, Ordering::SeqCst);
            Mql::release_read(word);
        }
        Grant::Write(n) => {
            assert_eq!(
                inside.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst),
                Ok(0),
                "a writer beside another holder"
            );
            inside.store(0, Ordering::SeqCst);
            h.release_write(word, n);
        }
        Grant::No => {}
    }
}

/// Runs `modes` (write?, patience) on one thread each against one lock, exploring every
/// interleaving with at most `preemptions` preemptions, then checks that the lock is free and
/// every abandoned node was passed.
fn model(preemptions: usize, modes: &'static [(bool, Patience)]) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    // Spin loops branch at every yield; the default bound (1 000) is too low for three.
    b.max_branches = 100_000;
    b.check(move || {
        let nodes = std::sync::Arc::new(QNodes::new(modes.len()).unwrap());
        let word = Arc::new(AtomicU64::new(0));
        let inside = Arc::new(AtomicI64::new(0));
        let ts: Vec<_> = modes
            .iter()
            .enumerate()
            .map(|(i, &(write, patience))| {
                let (nodes, word, inside) = (nodes.clone(), word.clone(), inside.clone());
                loom::thread::spawn(move || {
                    let mut h = Mql::new(nodes, i);
                    let g = h.acquire(&word, write, patience);
                    hold(&mut h, &word, &inside, g);
                    h.abandoned()
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(word.load(Ordering::SeqCst), 0, "the lock is free in the end");
        for i in 0..modes.len() {
            let h = Mql::new(nodes.clone(), i);
            assert_eq!(h.abandoned(), 0, "slot {i}: an abandoned node was never passed");
        }
    });
}

#[test]
fn two_writers() {
    model(3, &[(true, Patience::Forever), (true, Patience::Forever)]);
}

#[test]
fn a_writer_and_a_cancelling_writer() {
    model(3, &[(true, Patience::Forever), (true, Patience::Spins(1))]);
}

#[test]
fn a_reader_between_writers_that_may_cancel() {
    model(3, &[(true, Patience::Spins(1)), (false, Patience::Forever), (true, Patience::Spins(1))]);
}

#[test]
fn a_reader_and_a_writer() {
    model(3, &[(false, Patience::Forever), (true, Patience::Forever)]);
}

#[test]
fn a_cancelling_reader_and_a_cancelling_writer() {
    model(3, &[(false, Patience::Spins(1)), (true, Patience::Spins(1))]);
}
