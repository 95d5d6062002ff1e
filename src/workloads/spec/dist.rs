//! Drawing a spec operation's keys.

use super::model::{Count, KeyDist};
use crate::workloads::zipf::Zipf;
use rand::{Rng, RngExt};
use std::sync::atomic::{AtomicU64, Ordering};

/// What drawing from one base distribution needs, built once per workload (Zipf's ζ).
#[derive(Debug)]
pub enum Sampler {
    /// Uniform below `n`.
    Uniform(u64),
    /// Zipf over `0..n`.
    Zipf(Zipf),
    /// `hot` keys take `share` of the draws; `n` keys in all.
    Hot {
        /// Keys `0..hot` are hot.
        hot: u64,
        /// Probability of a hot draw.
        share: f64,
        /// Every key.
        n: u64,
    },
    /// Zipf over recency: rank r is the r-th newest key below the table's counter.
    Latest(Zipf),
    /// A worker's cursor over `0..n`.
    Sequential(u64),
    /// The table's insert counter.
    Next,
    /// Derived from an earlier operation's keys.
    Derived,
}

impl Sampler {
    /// The sampler of `dist` over a table of `rows` loaded keys; `threads` compute ζ.
    pub fn new(dist: KeyDist, rows: u64, threads: usize) -> Self {
        match dist {
            KeyDist::Uniform => Sampler::Uniform(rows),
            KeyDist::Zipf(t) => Sampler::Zipf(Zipf::new(rows, t, threads)),
            KeyDist::Hot { keys, accesses } => Sampler::Hot {
                // At least one hot key and one cold one, whatever the rounding.
                hot: ((rows as f64 * keys / 100.0).round() as u64).clamp(1, rows.max(2) - 1),
                share: accesses / 100.0,
                n: rows,
            },
            KeyDist::Latest(t) => Sampler::Latest(Zipf::new(rows, t, threads)),
            KeyDist::Sequential => Sampler::Sequential(rows),
            KeyDist::Next => Sampler::Next,
            KeyDist::Same(_) | KeyDist::Parent(..) | KeyDist::Child(..) => Sampler::Derived,
        }
    }

    /// Draws a key. `cursor` is the worker's position for sequential draws; `counter` the
    /// table's next insert key.
    #[inline]
    pub fn draw<R: Rng>(&self, rng: &mut R, cursor: &mut u64, counter: &AtomicU64) -> u64 {
        match self {
            Sampler::Uniform(n) => rng.random_range(0..*n),
            Sampler::Zipf(z) => z.sample(rng),
            Sampler::Hot { hot, share, n } => {
                if *hot >= *n {
                    rng.random_range(0..*n)
                } else if rng.random::<f64>() < *share {
                    rng.random_range(0..*hot)
                } else {
                    rng.random_range(*hot..*n)
                }
            }
            Sampler::Latest(z) => {
                // Relaxed: a recent key is a hint of what exists; pairs with nothing.
                let newest = counter.load(Ordering::Relaxed).max(1) - 1;
                newest.saturating_sub(z.sample(rng))
            }
            Sampler::Sequential(n) => {
                let k = *cursor % *n;
                *cursor = cursor.wrapping_add(1);
                k
            }
            // Relaxed: only uniqueness matters, which the read-modify-write gives.
            Sampler::Next => counter.fetch_add(1, Ordering::Relaxed),
            Sampler::Derived => unreachable!("derived keys are computed from their source"),
        }
    }

    /// Whether a draw can repeat a key that the same operation drew already, so that drawing
    /// distinct keys must retry (the counter and the cursor never repeat within a
    /// transaction's handful of draws).
    pub fn repeats(&self) -> bool {
        !matches!(self, Sampler::Next | Sampler::Sequential(_) | Sampler::Derived)
    }
}

/// Draws a count.
#[inline]
pub fn count<R: Rng>(c: Count, rng: &mut R) -> u32 {
    if c.lo == c.hi {
        c.lo
    } else {
        rng.random_range(c.lo..=c.hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng() -> rand::rngs::Xoshiro256PlusPlus {
        rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7)
    }

    /// Pearson's statistic of `counts` against `expected` per bucket.
    fn chi_square(counts: &[u64], expected: &[f64]) -> f64 {
        counts.iter().zip(expected).map(|(&c, &e)| (c as f64 - e).powi(2) / e).sum()
    }

    fn histogram(s: &Sampler, n: usize, draws: u64, counter: &AtomicU64) -> Vec<u64> {
        let (mut rng, mut cursor) = (rng(), 0);
        let mut counts = vec![0u64; n];
        for _ in 0..draws {
            counts[s.draw(&mut rng, &mut cursor, counter) as usize] += 1;
        }
        counts
    }

    #[test]
    fn uniform_passes_a_chi_square_test() {
        let counts =
            histogram(&Sampler::new(KeyDist::Uniform, 50, 1), 50, 100_000, &AtomicU64::new(50));
        // 49 degrees of freedom: the 99.9 % quantile is 85.4.
        let x2 = chi_square(&counts, &[2_000.0; 50]);
        assert!(x2 < 85.4, "chi-square {x2}: {counts:?}");
    }

    #[test]
    fn zipf_follows_its_probabilities() {
        // P(k) = (k+1)^-θ / ζ(n, θ) for n = 20, θ = 0.9; ranks 0 and 1 are drawn exactly as
        // Gray's method does, the rest approximately, so the test bins them in five groups.
        let (n, theta) = (20usize, 0.9);
        let zeta: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
        let p: Vec<f64> = (1..=n).map(|i| (i as f64).powf(-theta) / zeta).collect();
        let draws = 200_000;
        let counts = histogram(
            &Sampler::new(KeyDist::Zipf(theta), n as u64, 1),
            n,
            draws,
            &AtomicU64::new(0),
        );
        for (rank, want) in [(0, p[0]), (1, p[1])] {
            let got = counts[rank] as f64 / draws as f64;
            assert!((got - want).abs() < 0.005, "rank {rank}: {got} vs {want}");
        }
        let tail: f64 = p[10..].iter().sum();
        let got = counts[10..].iter().sum::<u64>() as f64 / draws as f64;
        assert!((got - tail).abs() < 0.03, "ranks 10..20: {got} vs {tail}");
        assert!(counts.windows(2).take(10).all(|w| w[0] >= w[1]), "decreasing: {counts:?}");
    }

    #[test]
    fn a_hot_set_takes_its_share_uniformly() {
        // 10 % of 1000 keys take 80 % of the draws.
        let s = Sampler::new(KeyDist::Hot { keys: 10.0, accesses: 80.0 }, 1000, 1);
        let draws = 200_000u64;
        let counts = histogram(&s, 1000, draws, &AtomicU64::new(0));
        let hot: u64 = counts[..100].iter().sum();
        let share = hot as f64 / draws as f64;
        assert!((share - 0.8).abs() < 0.005, "hot share {share}");
        // Within each set, uniform: chi-square over ten bins of each.
        let bins = |c: &[u64]| c.chunks(c.len() / 10).map(|b| b.iter().sum()).collect::<Vec<u64>>();
        let (h, cold) = (bins(&counts[..100]), bins(&counts[100..]));
        assert!(chi_square(&h, &[hot as f64 / 10.0; 10]) < 27.9, "hot bins {h:?}");
        assert!(chi_square(&cold, &[(draws - hot) as f64 / 10.0; 10]) < 27.9, "cold bins {cold:?}");
    }

    #[test]
    fn latest_prefers_the_newest_keys() {
        let counter = AtomicU64::new(1000);
        let s = Sampler::new(KeyDist::Latest(0.99), 1000, 1);
        let counts = histogram(&s, 1000, 100_000, &counter);
        assert!(counts[999] > counts[998] && counts[998] > counts[990], "{:?}", &counts[990..]);
        assert!(counts[999] > 10 * counts[500].max(1), "the newest far ahead of the middle");
        // After inserts the newest key moves with the counter.
        counter.store(1500, Ordering::Relaxed);
        let (mut rng, mut cursor) = (rng(), 0);
        let top = (0..1000).filter(|_| s.draw(&mut rng, &mut cursor, &counter) == 1499).count();
        assert!(top > 50, "key 1499 drawn {top} times");
    }

    #[test]
    fn sequential_walks_and_wraps_and_next_never_repeats() {
        let s = Sampler::new(KeyDist::Sequential, 5, 1);
        let (mut rng, mut cursor, c) = (rng(), 3, AtomicU64::new(0));
        let walk: Vec<u64> = (0..6).map(|_| s.draw(&mut rng, &mut cursor, &c)).collect();
        assert_eq!(walk, [3, 4, 0, 1, 2, 3]);
        let next = Sampler::new(KeyDist::Next, 5, 1);
        let c = AtomicU64::new(5);
        let keys: Vec<u64> = (0..4).map(|_| next.draw(&mut rng, &mut cursor, &c)).collect();
        assert_eq!(keys, [5, 6, 7, 8]);
        assert!(!next.repeats() && !s.repeats() && Sampler::new(KeyDist::Uniform, 5, 1).repeats());
    }

    #[test]
    fn counts_are_fixed_or_uniform_in_their_range() {
        let mut rng = rng();
        assert_eq!(count(Count::fixed(3), &mut rng), 3);
        let mut seen = [0u64; 4];
        for _ in 0..40_000 {
            let c = count(Count::range(2, 5), &mut rng);
            seen[c as usize - 2] += 1;
        }
        assert!(chi_square(&seen, &[10_000.0; 4]) < 16.3, "{seen:?}");
    }
}
