//! Random pauses injected into transactions to widen the windows in which concurrent
//! transactions interleave, so that tests and `txlab check` meet rare schedules often.
//!
//! A pause is nothing (half the time), a yield of the core (three in eight: under
//! oversubscription another worker runs in the middle of this one), or a spin of up to
//! `max_us` microseconds (one in eight: the worker keeps its core and everything it holds).
//! The checker's workloads pause between operations; with [`crate::engine::DbOptions`]'s
//! `commit_pause_us`, protocols also pause at the phase boundaries of their commit, where a
//! window between locking and validating is otherwise a few nanoseconds wide.

use rand::{RngExt, SeedableRng};
use std::time::{Duration, Instant};

/// The random generator pauses draw from.
pub type PauseRng = rand::rngs::Xoshiro256PlusPlus;

/// Pauses at random (see the module docs) for at most `max_us` microseconds.
pub fn pause(rng: &mut PauseRng, max_us: u64) {
    match rng.random_range(0..8u32) {
        0..=3 => {}
        4..=6 => std::thread::yield_now(),
        _ => {
            let until = Instant::now() + Duration::from_micros(rng.random_range(0..=max_us));
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
}

/// A worker's own pause source: its generator and the longest spin.
#[derive(Debug)]
pub struct Pauser {
    rng: PauseRng,
    max_us: u64,
}

impl Pauser {
    /// A pauser seeded with `seed`, spinning at most `max_us` microseconds.
    pub fn new(seed: u64, max_us: u64) -> Self {
        Pauser { rng: PauseRng::seed_from_u64(seed), max_us }
    }

    /// Pauses once.
    pub fn pause(&mut self) {
        pause(&mut self.rng, self.max_us);
    }
}
