//! Workloads, durability and the command line end to end: TPC-C, SmallBank and IC3's
//! micro-benchmark under every protocol, online mix changes, logging and recovery (in process
//! and killed with SIGKILL), and the `txlab` binary's commands, errors, experiments and report.
//! Run one subject with `cargo test --profile ci --test end_to_end SUBJECT::`.
//!
//! Why a few binaries of many modules: see `tests/protocols`.

#[path = "../common/mod.rs"]
mod common;

mod advise;
mod cli;
mod contract;
mod crash;
mod durability;
mod experiments;
mod online;
mod pieces;
mod report_browser;
mod smallbank;
mod spec;
mod tpcc;
mod tpce;
