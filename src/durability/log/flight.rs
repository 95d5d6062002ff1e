//! The log epochs' handshake between committing workers and the group commit (see the parent
//! module's docs): a worker puts the log epoch it commits in *in flight* in its slot before
//! its log record and any of its writes become visible, and takes it out once its writes are
//! installed; a group closes the epoch in progress and then waits until no slot holds an
//! epoch below the new one.
//!
//! What it guarantees, with `n` what [`close`] returned: once [`settled`] holds for `n` in
//! every slot, every commit that entered an epoch below `n` has left, and so its record and
//! writes happen before the group's later steps (its syncs, the durable epoch it publishes, a
//! checkpoint that waited for that); a commit that enters after the close enters `n` or later.
//! Why: [`enter`] stores the epoch it read, fences, and reads the epoch again; [`close`] adds
//! to the epoch, fences, and the group then loads the slots. Of a worker's store to its slot
//! and the group's add (both SeqCst, each followed by a SeqCst fence and then a load of the
//! other's location), at least one sees the other: the worker reads the new epoch and enters
//! again, or the group sees the slot.
//!
//! Kept apart from the log's files and rings so that `tests/loom_flight.rs` can model-check it
//! with loom's atomics (through `shim`, std's here).

use super::shim::{fence, AtomicU64, Ordering};

/// A slot's value while its worker has nothing in flight.
pub const IDLE: u64 = u64::MAX;

/// Puts a commit's log epoch in flight in `slot` (the worker's own): returns the epoch, the
/// one in progress when the slot was seen.
#[inline]
pub fn enter(epoch: &AtomicU64, slot: &AtomicU64) -> u64 {
    let mut e = epoch.load(Ordering::SeqCst);
    loop {
        // SeqCst store, fence, re-read: pairs with `close`'s fetch_add and fence (the same
        // handshake as `storage::epoch::Epochs::enter`).
        slot.store(e, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Epoch);
        let again = epoch.load(Ordering::SeqCst);
        if again == e {
            return e;
        }
        e = again;
    }
}

/// Takes the commit in `slot` out of flight: its writes are installed (and its log record
/// complete).
#[inline]
pub fn leave(slot: &AtomicU64) {
    // Release: the record and the installed writes happen before the group's SeqCst load in
    // `settled` that sees IDLE, and so before whatever the group does after.
    slot.store(IDLE, Ordering::Release);
    crate::util::shared_writes::note(crate::util::shared_writes::Site::Epoch);
}

/// Whether `slot` holds a commit in flight.
#[inline]
pub fn in_flight(slot: &AtomicU64) -> bool {
    // Acquire: pairs with `leave`'s Release.
    slot.load(Ordering::Acquire) != IDLE
}

/// Closes the log epoch in progress: returns `n`, the epoch commits enter from now on. Once
/// [`settled`] holds for `n` in every slot, every commit of an epoch below `n` has left.
#[inline]
pub fn close(epoch: &AtomicU64) -> u64 {
    // SeqCst: a worker that publishes its slot and then reads the epoch either sees `n` or
    // is seen in its slot by `settled` (the store/load pairs on both sides are SeqCst).
    let n = epoch.fetch_add(1, Ordering::SeqCst) + 1;
    fence(Ordering::SeqCst);
    n
}

/// Whether `slot` holds no commit of an epoch below `n` (what a group waits for after
/// [`close`] returned `n`).
#[inline]
pub fn settled(slot: &AtomicU64, n: u64) -> bool {
    // SeqCst: see `close`; IDLE is above every epoch.
    slot.load(Ordering::SeqCst) >= n
}
