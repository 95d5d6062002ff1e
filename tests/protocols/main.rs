//! The protocols against their contract: one suite instantiated per protocol and option
//! combination (conformance), isolation under contention (concurrency, recorded histories, a
//! model-checked state machine), the multi-version substrate, Cicada's rules and commutative
//! accumulations. Run one subject with `cargo test --release --test protocols SUBJECT::`.
//!
//! Why a few binaries of many modules rather than a binary per file: `cargo test --release`
//! links every test binary with the release profile's whole-program optimisation (fat LTO, one
//! codegen unit), minutes each on 2 cores, and each binary instantiates the generic engine for
//! every protocol again. Two binaries of similar size (this one and `tests/end_to_end`) keep both
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
