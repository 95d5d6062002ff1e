//! Index micro-benchmark behind the choice of indexes (see storage/index.rs): 1 M and 10 M `u64`
//! keys inserted in shuffled order, then uniform random point lookups, 50-key range scans, and
//! inserts into a loaded index, for txlab's three kinds (dense, ordered = congee with guarded
//! scans, hash), scc::TreeIndex (a sound ordered alternative, rejected for its slow range scans)
//! and scc::HashIndex (the hash index txlab's replaced). Dense inserts append (as TPC-C's and
//! YCSB's do); the others insert scattered keys.
//!
//! `cargo bench --bench index`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rand::{Rng, RngExt, SeedableRng};
use std::hint::black_box;
use txlab::storage::index::{pin, Index, IndexKind, ScanBuf};
use txlab::storage::RowId;

const N: u64 = 1_000_000;

fn shuffled(n: u64) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n).collect();
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(1);
    for i in (1..keys.len()).rev() {
        let j = rng.random_range(0..=i);
        keys.swap(i, j);
    }
    keys
}

/// Uniform point lookups on `n` keys in every index.
fn gets(c: &mut Criterion, n: u64, name: &str) {
    let g = pin();
    let dense = Index::new(IndexKind::Dense, 0);
    let ordered = Index::new(IndexKind::Ordered, 0);
    let hash = Index::new(IndexKind::Hash, n as usize);
    let scc_hash = scc::HashIndex::<u64, u64, rustc_hash::FxBuildHasher>::with_capacity_and_hasher(
        n as usize,
        rustc_hash::FxBuildHasher,
    );
    let tree = scc::TreeIndex::<u64, u64>::new();
    for k in shuffled(n) {
        dense.insert_if_absent(k, RowId(k), &g).unwrap();
        ordered.insert_if_absent(k, RowId(k), &g).unwrap();
        hash.insert_if_absent(k, RowId(k), &g).unwrap();
        scc_hash.insert_sync(k, k).unwrap();
        tree.insert_sync(k, k).unwrap();
    }
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(2);
    let mut group = c.benchmark_group(name);
    group
        .bench_function("txlab_dense", |b| b.iter(|| black_box(dense.get(rng.next_u64() % n, &g))));
    group.bench_function("txlab_ordered", |b| {
        b.iter(|| black_box(ordered.get(rng.next_u64() % n, &g)))
    });
    group.bench_function("scc_tree", |b| {
        b.iter(|| black_box(tree.peek_with(&(rng.next_u64() % n), |_, v| *v)))
    });
    group.bench_function("txlab_hash", |b| b.iter(|| black_box(hash.get(rng.next_u64() % n, &g))));
    group.bench_function("scc_hash", |b| {
        b.iter(|| black_box(scc_hash.peek_with(&(rng.next_u64() % n), |_, v| *v)))
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    gets(c, N, "get_uniform_1M");
    gets(c, 10 * N, "get_uniform_10M");
    let keys = shuffled(N);
    let g = pin();
    let dense = Index::new(IndexKind::Dense, 0);
    let ordered = Index::new(IndexKind::Ordered, 0);
    // Sized for the keys the insert benchmark adds, so its chains do not grow without bound.
    let hash = Index::new(IndexKind::Hash, 32 * N as usize);
    let tree = scc::TreeIndex::<u64, u64>::new();
    let scc_hash = scc::HashIndex::<u64, u64, rustc_hash::FxBuildHasher>::with_capacity_and_hasher(
        N as usize,
        rustc_hash::FxBuildHasher,
    );
    for &k in &keys {
        dense.insert_if_absent(k, RowId(k), &g).unwrap();
        ordered.insert_if_absent(k, RowId(k), &g).unwrap();
        hash.insert_if_absent(k, RowId(k), &g).unwrap();
        tree.insert_sync(k, k).unwrap();
        scc_hash.insert_sync(k, k).unwrap();
    }
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(3);

    let mut group = c.benchmark_group("scan50_1M");
    let mut buf = ScanBuf::default();
    group.bench_function("txlab_dense", |b| {
        b.iter(|| {
            let lo = rng.next_u64() % N;
            dense.scan(lo, u64::MAX, 50, &mut buf, &g);
            black_box(buf.len())
        })
    });
    group.bench_function("txlab_ordered", |b| {
        b.iter(|| {
            let lo = rng.next_u64() % N;
            ordered.scan(lo, u64::MAX, 50, &mut buf, &g);
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
    let mut append = N;
    group.bench_function("txlab_dense_append", |b| {
        b.iter(|| {
            append += 1;
            dense.insert_if_absent(append, RowId(append), &g)
        })
    });
    group.bench_function("txlab_ordered", |b| {
        b.iter(|| {
            next += 1;
            ordered.insert_if_absent(next.wrapping_mul(0x9E37_79B9) % (N * 1000), RowId(next), &g)
        })
    });
    group.bench_function("scc_tree", |b| {
        b.iter(|| {
            next += 1;
            tree.insert_sync(next.wrapping_mul(0x9E37_79B9) % (N * 1000), next)
        })
    });
    group.bench_function("txlab_hash", |b| {
        b.iter(|| {
            next += 1;
            hash.insert_if_absent(next.wrapping_mul(0x9E37_79B9) % (N * 1000), RowId(next), &g)
        })
    });
    group.bench_function("scc_hash", |b| {
        b.iter(|| {
            next += 1;
            scc_hash.insert_sync(next.wrapping_mul(0x9E37_79B9) % (N * 1000), next)
        })
    });
    group.finish();
    let _ = BatchSize::SmallInput;
}

criterion_group! {
    name = benches;
    // No plots: criterion's plotting backend needs system fonts, which a fresh machine lacks.
    config = Criterion::default()
        .without_plots()
        .sample_size(20)
        .measurement_time(std::time::Duration::from_secs(2))
        .warm_up_time(std::time::Duration::from_millis(500));
    targets = bench
}
criterion_main!(benches);
