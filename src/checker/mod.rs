//! `txlab check`: runs a protocol on workloads chosen to provoke each anomaly class, with
//! history recording on, and judges the recorded histories against the protocol's isolation
//! level ([`suite`]; the micro-workloads in `micro`).
//!
//! The judging itself, a recorded history in and the anomalies it shows out, lives beside the
//! recorder in [`crate::history::check`], below the engine (a run's report carries its result);
//! its public items are re-exported here.

mod micro;
pub mod suite;

pub use crate::history::check::{
    check, cycle_text, txn_name, Anomaly, AnomalyClass, CycleStep, Report,
};
