//! Zipfian key generation: Gray et al.'s fast approximation (as YCSB and CCBench use).
//!
//! Gray, Sundaresan, Englert, Baclawski, Weinberger. *Quickly generating billion-record synthetic
//! databases.* SIGMOD 1994. One uniform draw and one `powf` per value; valid for `0 < θ < 1`.
//! Rank 0 is the hottest. `ζ(n, θ)` costs `n` powers, so it is computed in parallel and cached
//! per `(n, θ)` for the life of the process. Hand-written because the maintained crates either
//! implement exact rejection sampling (`rand_distr::Zipf`, several times slower per draw) or are
//! deprecated.

use rand::{Rng, RngExt};
use std::sync::Mutex;

/// A Zipf(θ) distribution over `0..n` (uniform when θ = 0).
#[derive(Clone, Copy, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

static ZETA_CACHE: Mutex<Vec<((u64, u64), f64)>> = Mutex::new(Vec::new());

/// `ζ(n, θ) = Σ_{i=1..n} 1/i^θ`, computed with up to `threads` threads and cached.
pub fn zeta(n: u64, theta: f64, threads: usize) -> f64 {
    let key = (n, theta.to_bits());
    if let Some(&(_, z)) =
        ZETA_CACHE.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(k, _)| *k == key)
    {
        return z;
    }
    let threads = threads.clamp(1, 64) as u64;
    let chunk = n.div_ceil(threads);
    let z: f64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let (a, b) = (t * chunk + 1, ((t + 1) * chunk).min(n));
                    (a..=b).map(|i| (i as f64).powf(-theta)).sum::<f64>()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("zeta thread")).sum()
    });
    let mut cache = ZETA_CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() > 64 {
        cache.clear();
    }
    cache.push((key, z));
    z
}

impl Zipf {
    /// Zipf(θ) over `0..n`. `θ` must be in `[0, 1)` and `n >= 1` (checked by the caller's config).
    pub fn new(n: u64, theta: f64, threads: usize) -> Self {
        assert!(n >= 1 && (0.0..1.0).contains(&theta), "Zipf: n >= 1 and 0 <= theta < 1");
        if theta == 0.0 {
            return Zipf { n, theta, alpha: 0.0, zetan: 0.0, eta: 0.0, half_pow_theta: 0.0 };
        }
        let zetan = zeta(n, theta, threads);
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf { n, theta, alpha, zetan, eta, half_pow_theta: 0.5f64.powf(theta) }
    }

    /// The number of items.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Draws a rank in `0..n`.
    #[inline]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        if self.theta == 0.0 {
            return rng.random_range(0..self.n);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_hottest_key_has_probability_one_over_zeta() {
        // θ = 0.99, n = 100 000: P(rank 0) = 1/ζ(n, θ).
        let z = Zipf::new(100_000, 0.99, 2);
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(3);
        let draws = 400_000;
        let mut zero = 0u64;
        let mut max = 0;
        for _ in 0..draws {
            let r = z.sample(&mut rng);
            max = max.max(r);
            zero += u64::from(r == 0);
        }
        let expect = 1.0 / zeta(100_000, 0.99, 1);
        let got = zero as f64 / draws as f64;
        assert!((got - expect).abs() < 0.01 * expect.max(0.01) + 0.003, "{got} vs {expect}");
        assert!(max < 100_000 && max > 50_000);
    }

    #[test]
    fn theta_zero_is_uniform() {
        let z = Zipf::new(10, 0.0, 1);
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
    }

    #[test]
    fn parallel_zeta_matches_the_serial_sum() {
        let serial: f64 = (1..=12_345u64).map(|i| (i as f64).powf(-0.7)).sum();
        assert!((zeta(12_345, 0.7, 7) - serial).abs() < 1e-9 * serial);
    }
}
