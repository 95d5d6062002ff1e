//! IC3 (Wang, Mu, Li and Huang, SIGMOD 2016): a transaction runs piece by piece, each piece
//! atomic by OCC, and transactions whose pieces conflict interleave instead of aborting: the
//! runtime tracks direct dependencies in per-record accessor lists and makes a piece wait for
//! the pieces of its dependencies that the static analysis of the workload's templates says it
//! could otherwise overtake (`engine::scgraph`).
//!
//! **Not a protocol yet.** This module holds the runtime's building blocks, tested on their
//! own, while the worker is written (`docs/ic3-plan.md` has the state of the work):
//!
//! * [`txn`]: transaction contexts (attempt, type, committed pieces in one word), the waits of
//!   Algorithms 1 and 2, and the dependency queue;
//! * [`record`]: the record (a version word for piece validation and the accessor list with
//!   the writers' stashes), appending with the dependency it creates, unlinking at commit, and
//!   rolling back with the abort marks of §4.4.
//!
//! Decisions taken where the paper is silent, kept here as the worker grows:
//!
//! * A rolled-back *reader* marks nobody (the paper marks every entry after any rolled-back
//!   entry); only a writer's successors saw or overwrote what is undone.
//! * A reader that would read a doomed stash (its writer's entry is marked) fails validation
//!   and runs its piece again, rather than depending on a transaction that cannot commit.
//! * Installing a committed image keeps the record's version: it changes nothing a reader sees.

pub mod record;
pub mod txn;
