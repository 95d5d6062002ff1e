//! `2pl-nowait` and `2pl-waitdie`: strict two-phase locking with a reader-writer lock word per
//! record.
//!
//! Bernstein, Hadzilacos, Goodman, *Concurrency Control and Recovery in Database Systems*, ch. 3;
//! the variants as evaluated by CCBench (Tanabe et al., VLDB 2020, §2) and DBx1000 (Yu et al.,
//! VLDB 2014).
//!
//! **Record**: a lock word (writer bit, reader count, timestamp of the oldest holder) and a state
//! word (present / absent / unlinked) in front of the payload. See [`record`].
//!
//! **Execution**: reads take a shared lock, writes an exclusive one (upgrading a shared lock held
//! alone), all held until commit or abort (strict 2PL). Writes happen in place; an undo log of
//! before-images rolls them back. Inserts publish a new record locked exclusively; deletes mark the
//! record absent under its exclusive lock and the epoch GC unlinks it after commit.
//!
//! **Conflicts**: `NoWait` aborts at once. `WaitDie` compares timestamps: an older requester
//! (smaller timestamp) waits for a younger holder; a younger one dies. A transaction keeps its
//! timestamp across retries, so it eventually becomes the oldest and wins. Timestamps are the time
//! since the database was created (1.024 µs units) above the worker's slot: unique, monotonic per
//! worker, compared with serial-number arithmetic so the 53-bit field may wrap (after 51 days),
//! and taken from no shared counter (see [`record::TsClock`]). The lock word keeps only the *smallest*
//! timestamp among readers, and never raises it while readers remain, so a requester may die
//! needlessly but never waits for an older holder: deadlock freedom holds. An upgrade with other
//! readers present waits under wait-die only if the upgrader is the oldest reader (then every
//! other reader is younger); otherwise it dies.
//!
//! **Phantoms**: scans and absent-key reads take *scan* holds on the phantom buckets they cover;
//! inserts take *insert* holds (see [`crate::storage::phantom`]). Bucket holds never wait.
//!
//! **Commit contract** (`Protocol`'s docs): every lock is held at commit, so `Locked` and
//! `Validated` come at once; the writes, made in place under the locks, are logged with them
//! still held (`Logged`, [`crate::protocols::inplace::commit_in_place`]), and are `Installed`
//! when the locks are released, after which the log epoch leaves flight. A checkpoint reads a
//! row under a shared lock, never a write in progress.

pub mod record;
mod worker;

pub use record::TwoPlRecord;
pub use worker::TwoPlWorker;

use crate::engine::{Capabilities, Database, Isolation, NoOptions, Protocol, Reads, Setup};
use crate::error::{AbortReason, Error};
use crate::protocols::inplace::state::PRESENT;
use crate::storage::{RowRef, TableId};
use std::marker::PhantomData;

/// What a lock conflict does.
pub trait LockPolicy: Send + Sync + 'static {
    /// Protocol name.
    const NAME: &'static str;
    /// One-line description.
    const DESCRIPTION: &'static str;
    /// Whether an older requester waits (wait-die) instead of aborting (no-wait).
    const WAIT: bool;
    /// The abort reason of a conflict.
    const REASON: AbortReason;
}

/// Abort on any conflict.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoWait;
impl LockPolicy for NoWait {
    const NAME: &'static str = "2pl-nowait";
    const DESCRIPTION: &'static str = "strict 2PL, abort on any lock conflict";
    const WAIT: bool = false;
    const REASON: AbortReason = AbortReason::LockConflict;
}

/// Wait-die.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitDie;
impl LockPolicy for WaitDie {
    const NAME: &'static str = "2pl-waitdie";
    const DESCRIPTION: &'static str =
        "strict 2PL, older transactions wait for younger ones, younger ones die";
    const WAIT: bool = true;
    const REASON: AbortReason = AbortReason::WaitDie;
}

/// Strict two-phase locking with policy `L`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TwoPl<L: LockPolicy>(PhantomData<L>);

/// `2pl-nowait`.
pub type TwoPlNoWait = TwoPl<NoWait>;
/// `2pl-waitdie`.
pub type TwoPlWaitDie = TwoPl<WaitDie>;

impl<L: LockPolicy> Protocol for TwoPl<L> {
    const NAME: &'static str = L::NAME;
    const DESCRIPTION: &'static str = L::DESCRIPTION;
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: false,
        reads: Reads::Visible,
        interactive: true,
        templates: false,
    };
    type Record = TwoPlRecord;
    type Worker<'db> = TwoPlWorker<'db, L>;
    type Options = NoOptions;

    fn new(_: NoOptions, _: &Setup<'_>) -> Result<Self, Error> {
        Ok(TwoPl(PhantomData))
    }

    fn options(&self) -> &NoOptions {
        &NoOptions {}
    }

    fn load(&self, _: TableId, row: RowRef<'_, TwoPlRecord>, payload: &[u8]) {
        row.write_from(payload);
        let rec = row.header;
        rec.state.set_versioned(PRESENT, crate::history::INITIAL as u64);
    }

    fn is_present(&self, rec: &TwoPlRecord) -> bool {
        rec.state.present()
    }

    /// Under a shared lock, taken by spinning (with the oldest timestamp, so a writer that
    /// meets it dies rather than waits: the lock is held for one copy).
    fn read_committed(
        &self,
        _: TableId,
        _: u64,
        row: RowRef<'_, TwoPlRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        let mut spin = crate::util::SpinWait::default();
        while row.header.try_read(0).is_err() {
            spin.spin();
        }
        let out = row.header.state.present().then(|| {
            row.read_into(buf);
            row.header.state.stamp()
        });
        row.header.unlock_read();
        out
    }

    fn worker(db: &Database<Self>) -> Result<TwoPlWorker<'_, L>, Error> {
        let ctx = db.worker_ctx()?;
        if ctx.slot >= record::MAX_WORKERS {
            return Err(Error::Config(format!(
                "too many workers: {} supports at most {} at once (timestamps name the worker in \
                 {} bits)",
                L::NAME,
                record::MAX_WORKERS,
                record::SLOT_BITS
            )));
        }
        Ok(TwoPlWorker::new(ctx))
    }
}
