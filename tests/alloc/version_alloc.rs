//! `version-alloc=malloc`: every version comes from the global allocator and goes back to it,
//! those reclaimed during the run and those left on chains when the database drops. A counting
//! global allocator sees what is still allocated after the database is gone.

use crate::common;
use crate::counting;

use std::time::Duration;
use txlab::engine::Retry;
use txlab::prelude::*;
use txlab::protocols::ermia_ssn::ErmiaSsn;
use txlab::protocols::si::Si;

const T: TableId = TableId(0);
const ROWS: u64 = 20_000;

/// Loads `ROWS` rows of 100 bytes, updates them from two threads while a third holds a
/// snapshot for a while (chains grow, then are cut), deletes some; returns the versions
/// alive at the end and how many the run allocated in all (carved, with pools).
fn run<P: Protocol>() -> (u64, u64) {
    let opts = DbOptions {
        max_workers: 4,
        epoch_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let db = common::database::<P>(&[TableSpec::new("t", 100, 2 * ROWS)], opts);
    let mut l = db.loader();
    for k in 0..ROWS {
        l.insert(T, k, &[k as u8; 100]).unwrap();
    }
    drop(l);
    std::thread::scope(|s| {
        let db = &db;
        let mut reader = db.worker().unwrap();
        reader.begin();
        let writers: Vec<_> = (0..2u64)
            .map(|i| {
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    let mut retry = Retry::new().seed(i);
                    for n in 0..20_000u64 {
                        let k = (n * 7 + i * 13) % ROWS;
                        retry
                            .run(&mut w, |w| {
                                if n % 50 == 0 {
                                    w.delete(T, k).map(drop)
                                } else {
                                    w.write(T, k, &[n as u8; 100]).map(drop)
                                }
                            })
                            .unwrap();
                    }
                })
            })
            .collect();
        for h in writers {
            h.join().unwrap();
        }
        assert!(reader.read(T, 5, |r| r[0]).unwrap().is_some());
        reader.commit().unwrap();
    });
    let v = db.protocol().versions(&db).unwrap();
    (v.alive, v.carved)
}

/// Bytes still allocated after `f` (the database it makes is dropped inside).
fn leaked(f: impl FnOnce()) -> isize {
    let before = counting::live();
    f();
    counting::live() - before
}

fn returns_every_version<P: Protocol>() {
    let _turn = counting::turn();
    // Once first: statics that allocate lazily (the clock's calibration, thread-locals) are
    // in place before anything is counted.
    common::with_options(&[("version-alloc", "malloc")], run::<P>);
    let mut alive = 0;
    let leak = leaked(|| {
        (alive, _) = common::with_options(&[("version-alloc", "malloc")], run::<P>);
    });
    // Each version takes at least its 100-byte payload: a leak of the chains left at the drop
    // would be about `alive` * 124 bytes.
    assert!(alive >= ROWS - 1000, "{alive}");
    assert!(leak < 64 << 10, "{leak} bytes still allocated after the database dropped");
}

#[test]
fn si_returns_every_version_to_the_allocator() {
    returns_every_version::<Si>();
}

#[test]
fn ssn_returns_every_version_to_the_allocator() {
    returns_every_version::<ErmiaSsn>();
}

/// The default keeps versions in pools: the whole run carves versions from chunks, not from
/// the allocator (the chunks are mapped memory the counting allocator never sees).
#[test]
fn pools_take_nothing_from_the_allocator_per_version() {
    let _turn = counting::turn();
    run::<Si>();
    let mut carved = 0;
    let leak = leaked(|| (_, carved) = run::<Si>());
    assert!(carved >= ROWS, "{carved}");
    assert!(leak < 64 << 10, "{leak}");
}
