//! The ceiling of the multi-version substrate's centralized timestamp counter (`mv::Counter`):
//! every committing transaction draws a timestamp with one `fetch_add`, every transaction takes
//! a snapshot with one load, all on one cache line. Each thread does both (a commit and a
//! snapshot, as one short transaction does), on 1 and 2 threads; criterion reports the time per
//! pair per thread, so the counter's ceiling is threads / that time.
//!
//! `cargo bench --bench timestamps`

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};
use txlab::protocols::mv::{Counter, Timestamps};

fn counter(c: &mut Criterion) {
    let mut group = c.benchmark_group("counter");
    for threads in [1usize, 2] {
        group.bench_function(format!("commit+snapshot/{threads}t"), |b| {
            b.iter_custom(|iters| {
                let clock = Counter::default();
                let barrier = std::sync::Barrier::new(threads);
                let elapsed: Vec<Duration> = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..threads)
                        .map(|_| {
                            s.spawn(|| {
                                barrier.wait();
                                let t = Instant::now();
                                for _ in 0..iters {
                                    black_box(clock.commit());
                                    black_box(clock.snapshot());
                                }
                                t.elapsed()
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                // The slowest thread's time for `iters` pairs: per-thread time per pair.
                elapsed.into_iter().max().unwrap_or_default()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // No plots: criterion's plotting backend needs system fonts, which a fresh machine lacks.
    config = Criterion::default().without_plots();
    targets = counter
}
criterion_main!(benches);
