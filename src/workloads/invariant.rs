//! What a standard workload's procedures may take for granted: rows and keys its invariants
//! guarantee (a customer's account, a fresh order id). Where the database breaks one, the
//! transaction aborts with `MissingRow` instead of panicking, so a broken database (or a
//! protocol that lost an update) shows in the abort statistics and the consistency checks.

use crate::error::{Abort, AbortReason};

/// A row the database's invariants guarantee.
pub trait Must<T> {
    /// The row, or a `MissingRow` abort.
    fn must(self) -> Result<T, Abort>;
}

impl<T> Must<T> for Option<T> {
    #[inline]
    fn must(self) -> Result<T, Abort> {
        self.ok_or(Abort::new(AbortReason::MissingRow))
    }
}

/// An insert of a fresh key or a delete of a present row, as the invariants guarantee, or a
/// `MissingRow` abort (an insert that finds its key means a key was handed out twice).
#[inline]
pub fn must_hit(done: bool) -> Result<(), Abort> {
    if done {
        Ok(())
    } else {
        Err(Abort::new(AbortReason::MissingRow))
    }
}
