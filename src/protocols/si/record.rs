//! SI's record: the multi-version substrate's head word (`protocols::common::mv`), with no
//! version fields of its own.

use crate::protocols::common::mv::MvRecord;

/// A record slot of an SI database.
pub type SiRecord = MvRecord<()>;
