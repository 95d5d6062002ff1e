//! The `nocc` record header: the shared direct record, one state word
//! ([`crate::protocols::common::direct`]).

pub use crate::protocols::common::direct::DirectRecord as NoccRecord;
