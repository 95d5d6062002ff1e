//! Running a transaction until it commits: the retry loop every embedding program needs.
//!
//! [`Retry::run`] begins an attempt, runs a closure against the worker, commits, and on a
//! concurrency abort rolls back, waits a random backoff and tries again; it stops at a commit,
//! at an abort that retrying cannot cure (a user abort, a missing row, a procedure bug or a full
//! table: see [`AbortReason::is_retryable`](crate::error::AbortReason::is_retryable)), or after [`Retry::max_attempts`] attempts.
//! [`Retry::run_procedure`] does the same for a [`Procedure`]. Attempts are counted by the
//! worker itself (see [`Worker::begin`]), so a retried transaction keeps its age under wait-die.
//!
//! The backoff is randomized and truncated exponential: after the `n`-th failed attempt it waits
//! a uniform time below `min(2^n µs, max_backoff)`. The driver's benchmark runs use their own
//! policies ([`crate::engine::Backoff`]); this is for programs that embed txlab.
//!
//! ```
//! use txlab::engine::Retry;
//! use txlab::prelude::*;
//! use txlab::protocols::two_pl::TwoPlWaitDie;
//!
//! # fn main() -> Result<(), Error> {
//! let db = Database::<TwoPlWaitDie>::new(&[TableSpec::new("kv", 8, 100)])?;
//! let kv = db.table_id("kv").expect("declared above");
//! let mut w = db.worker()?;
//! let mut retry = Retry::new();
//! retry.run(&mut w, |w| w.insert(kv, 1, &10u64.to_le_bytes()).map(drop))?;
//! // Withdraw 15 if the balance allows; code 1 says why not.
//! let outcome = retry.run(&mut w, |w| {
//!     let balance = w.read(kv, 1, |r| u64::from_le_bytes(r.try_into().unwrap()))?;
//!     match balance {
//!         Some(b) if b >= 15 => w.write(kv, 1, &(b - 15).to_le_bytes()).map(drop),
//!         _ => Err(Abort::with_code(1)),
//!     }
//! });
//! assert_eq!(outcome.unwrap_err().user_code(), Some(1));
//! # Ok(())
//! # }
//! ```

use super::driver::classify;
use super::procedure::{Checks, Intent, Procedure, Tx, TxnType};
use super::protocol::Worker;
use crate::error::Abort;
use rand::{RngExt, SeedableRng};
use std::time::{Duration, Instant};

/// A retry policy with its own random source (one per thread, like a worker).
#[derive(Debug)]
pub struct Retry {
    max_attempts: u32,
    max_backoff: Duration,
    rng: rand::rngs::Xoshiro256PlusPlus,
}

impl Default for Retry {
    fn default() -> Self {
        Retry::new()
    }
}

impl Retry {
    /// Unlimited attempts, backoff of at most 100 µs (DBx1000's bound), a fixed seed.
    pub fn new() -> Self {
        Retry {
            max_attempts: u32::MAX,
            max_backoff: Duration::from_micros(100),
            rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(0x7E7),
        }
    }

    /// Gives up after `n` attempts (at least 1), returning the last abort.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Waits at most `d` between attempts (zero: retry at once).
    pub fn max_backoff(mut self, d: Duration) -> Self {
        self.max_backoff = d;
        self
    }

    /// Seeds the backoff's random source (threads that retry with one seed back off alike).
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed);
        self
    }

    /// Runs `body` in transaction attempts on `w` until one commits; returns what that attempt's
    /// `body` returned. `Err` is the abort that ended it: one retrying cannot cure, or the last
    /// after [`Retry::max_attempts`]. Every failed attempt is rolled back.
    pub fn run<W: Worker, T>(
        &mut self,
        w: &mut W,
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        self.run_as(w, Intent::ReadWrite, None, body)
    }

    /// [`Retry::run`] for a transaction that reads much and writes little: every attempt begins
    /// with [`Worker::begin_read_mostly`].
    pub fn run_read_mostly<W: Worker, T>(
        &mut self,
        w: &mut W,
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        self.run_as(w, Intent::ReadMostly, None, body)
    }

    /// [`Retry::run`] for a transaction that writes nothing: every attempt begins with
    /// [`Worker::begin_read_only`].
    pub fn run_read_only<W: Worker, T>(
        &mut self,
        w: &mut W,
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        self.run_as(w, Intent::ReadOnly, None, body)
    }

    fn run_as<W: Worker, T>(
        &mut self,
        w: &mut W,
        intent: Intent,
        ty: Option<usize>,
        mut body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        let mut attempts = 0u32;
        loop {
            match ty {
                Some(ty) => intent.begin_typed(w, ty),
                None => intent.begin(w),
            }
            let abort = match body(w) {
                Ok(out) => match w.commit() {
                    Ok(()) => return Ok(out),
                    Err(a) => a,
                },
                Err(a) => a,
            };
            // A missing row seen through stale reads is a concurrency abort (see `classify`).
            let reason = classify(w, abort);
            w.abort();
            attempts += 1;
            if !reason.is_retryable() {
                return Err(abort);
            }
            if attempts >= self.max_attempts {
                return Err(abort);
            }
            self.back_off(attempts);
        }
    }

    /// Runs `procedure` (of transaction type `ty`) until it commits, as [`Retry::run`] does,
    /// with `checks` applied to every attempt (a procedure that declares itself read-only runs
    /// as one: [`Retry::run_read_only`]; one that declares itself read-mostly begins so:
    /// [`Retry::run_read_mostly`]).
    pub fn run_procedure<W: Worker, P: Procedure>(
        &mut self,
        w: &mut W,
        ty: &TxnType,
        procedure: &P,
        checks: Checks<'_>,
    ) -> Result<(), Abort> {
        let read_only = procedure.read_only();
        let checks = Checks { read_only, ..checks };
        let body = |w: &mut W| procedure.run(&mut Tx::new(w, ty, checks));
        self.run_as(w, Intent::of(procedure), Some(procedure.txn_type()), body)
    }

    /// Waits a random time below `min(2^attempts µs, max_backoff)`: spinning for short waits
    /// (a sleep's wake-up costs more than they last), sleeping for long ones.
    fn back_off(&mut self, attempts: u32) {
        let cap = Duration::from_micros(1u64 << attempts.min(30)).min(self.max_backoff);
        if cap.is_zero() {
            return;
        }
        let wait = Duration::from_nanos(self.rng.random_range(0..cap.as_nanos() as u64));
        if wait > Duration::from_micros(200) {
            std::thread::sleep(wait);
            return;
        }
        let until = Instant::now() + wait;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}
