//! Shared by the integration tests: the protocol options a test runs its protocol with, so that
//! one suite, written once over `P: Protocol`, is instantiated for every protocol and for each
//! option combination that changes a commit path.

// Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use std::cell::RefCell;
use txlab::engine::{Backoff, ProtocolOptions, RunConfig, RunLength, Workload};
use txlab::prelude::*;

thread_local! {
    /// (name, value) pairs for databases created on this thread by [`database`].
    static OPTIONS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with [`database`] giving protocols the options `pairs` on this thread.
pub fn with_options<R>(pairs: &[(&str, &str)], f: impl FnOnce() -> R) -> R {
    OPTIONS.with(|o| {
        *o.borrow_mut() = pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    });
    f()
}

/// Protocol `P`'s options with this thread's pairs (see [`with_options`]).
pub fn options<P: Protocol>() -> P::Options {
    let pairs = OPTIONS.with(|o| o.borrow().clone());
    P::Options::from_pairs(&pairs).expect("the suite's options suit the protocol")
}

/// A database of protocol `P` with `tables`, `opts` and this thread's protocol options.
pub fn database<P: Protocol>(tables: &[TableSpec], opts: DbOptions) -> Database<P> {
    Database::<P>::builder(tables).options(opts).protocol_options(options::<P>()).build().unwrap()
}

/// A database of protocol `P` for workload `w` (its tables and transaction types: a protocol
/// that analyses the types, IC3, runs them typed), with `opts` and this thread's protocol
/// options.
pub fn database_for<P: Protocol, W: Workload>(w: &W, opts: DbOptions) -> Database<P> {
    Database::<P>::builder(&w.tables())
        .options(opts)
        .protocol_options(options::<P>())
        .txn_types(w.txn_types())
        .build()
        .unwrap()
}

/// A fixed-length contended run: `threads` workers (more than cores makes interleavings
/// likelier), `per_worker` transactions each, seed `seed`, a short random backoff, templates
/// and access sets checked at run time.
pub fn contended_run(threads: usize, per_worker: u64, seed: u64) -> RunConfig {
    RunConfig {
        threads,
        length: RunLength::transactions(per_worker),
        backoff: Backoff::Fixed { max_us: 20.0 },
        pin: false,
        seed,
        check_templates: true,
        check_access_sets: true,
        // The leader faults memory in while workers allocate (racing them for new segments).
        prefault: true,
        breakdown: false,
        acks: None,
        ..RunConfig::default()
    }
}
