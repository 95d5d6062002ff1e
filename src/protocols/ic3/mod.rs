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
//! * [`record`]: the record (a version word for piece validation, the payload holding the
//!   visible value, an accessor list whose writer entries keep before-images), appending with
//!   the dependency it creates, leaving at commit, and rolling back with the marks of §4.4.
//!
//! Decisions taken where the paper is silent or where this engine differs, kept here as the
//! worker grows:
//!
//! * The visible value (the paper's stash) is the payload itself, and writer entries keep
//!   before-images (see [`record`]): reads stay plain seqlock reads and a transaction's commit
//!   installs nothing; a rollback restores.
//! * A rolled-back *reader* marks nobody (the paper marks every entry after any rolled-back
//!   entry); only a writer's successors saw or overwrote what is undone.
//! * A piece that would read or overwrite a doomed value (the last writer's entry is marked)
//!   fails validation and runs again, rather than depending on a transaction that cannot
//!   commit.

pub mod record;
pub mod txn;
