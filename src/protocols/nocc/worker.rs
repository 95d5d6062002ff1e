//! The `nocc` worker: the shared direct worker ([`crate::protocols::common::direct`]) on its
//! own, with nothing in front of it.

pub use crate::protocols::common::direct::DirectWorker as NoccWorker;
