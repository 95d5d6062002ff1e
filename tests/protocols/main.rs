//! The protocols against their contract: one suite instantiated per protocol and option
//! combination (conformance), isolation under contention (concurrency, recorded histories, a
//! model-checked state machine), the multi-version substrate, Cicada's rules and commutative
//! accumulations. Run one subject with `cargo test --profile ci --test protocols SUBJECT::`.
//!
//! Why a few binaries of many modules rather than a binary per file: each test binary
//! instantiates the generic engine for every protocol again, a minute or more of optimised
//! compilation on 2 cores (`cargo test --profile ci`, without release's fat LTO). Two binaries of similar size (this one and `tests/end_to_end`) keep both
//! cores compiling; the heap-counting tests have their own (`tests/alloc`).

#[path = "../common/mod.rs"]
mod common;

mod accumulate;
mod cicada;
mod concurrency;
mod conformance;
mod history;
mod mvcc;
mod state_machine;
