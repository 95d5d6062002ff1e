//! Index micro-benchmark behind the choice of index crates (see storage/index.rs):
//! 1 M `u64` keys inserted in shuffled order, then uniform random point lookups, 50-key range
//! scans, and inserts into a loaded index, for congee (the ordered index txlab uses),
//! scc::TreeIndex (the alternative ordered index) and scc::HashIndex (the hash index).
//!
//! `cargo bench --bench index`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rand::{Rng, RngExt, SeedableRng};
use std::hint::black_box;
use txlab::storage::index::{pin, Index, IndexKind, ScanBuf};
use txlab::storage::RowId;

const N: u64 = 1_000_000;

fn shuffled() -> Vec<u64> {
    let mut keys: Vec<u64> = (0..N).collect();
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(1);
    for i in (1..keys.len()).rev() {
        let j = rng.random_range(0..=i);
        keys.swap(i, j);
    }
    keys
}

fn bench(c: &mut Criterion) {
    let keys = shuffled();
    let g = pin();
    let congee = Index::new(IndexKind::Ordered, 0);
    let hash = Index::new(IndexKind::Hash, N as usize);
    let tree = scc::TreeIndex::<u64, u64>::new();
    for &k in &keys {
        congee.insert_if_absent(k, RowId(k), &g).unwrap();
        hash.insert_if_absent(k, RowId(k), &g).unwrap();
        tree.insert_sync(k, k).unwrap();
    }
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(2);
    let mut group = c.benchmark_group("get_uniform_1M");
    group.bench_function("congee", |b| b.iter(|| black_box(congee.get(rng.next_u64() % N, &g))));
    group.bench_function("scc_tree", |b| {
        b.iter(|| black_box(tree.peek_with(&(rng.next_u64() % N), |_, v| *v)))
    });
    group.bench_function("scc_hash", |b| b.iter(|| black_box(hash.get(rng.next_u64() % N, &g))));
    group.finish();

    let mut group = c.benchmark_group("scan50_1M");
    let mut buf = ScanBuf::default();
    group.bench_function("congee", |b| {
        b.iter(|| {
            let lo = rng.next_u64() % N;
            congee.scan(lo, u64::MAX, 50, &mut buf, &g);
            black_box(buf.len())
        })
    });
    group.bench_function("scc_tree", |b| {
        let sg = scc::Guard::new();
        b.iter(|| {
            let lo = rng.next_u64() % N;
            black_box(tree.range(lo.., &sg).take(50).count())
        })
    });
    group.finish();

    let mut group = c.benchmark_group("insert_into_1M");
    let mut next = N;
    group.bench_function("congee", |b| {
        b.iter(|| {
            next += 1;
            congee.insert_if_absent(next.wrapping_mul(0x9E37_79B9) % (N * 1000), RowId(next), &g)
        })
    });
    group.bench_function("scc_tree", |b| {
        b.iter(|| {
            next += 1;
            tree.insert_sync(next.wrapping_mul(0x9E37_79B9) % (N * 1000), next)
        })
    });
    group.bench_function("scc_hash", |b| {
        b.iter(|| {
            next += 1;
            hash.insert_if_absent(next.wrapping_mul(0x9E37_79B9) % (N * 1000), RowId(next), &g)
        })
    });
    group.finish();
    let _ = BatchSize::SmallInput;
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);
