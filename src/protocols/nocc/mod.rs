//! `nocc`: no concurrency control at all — the speed limit every protocol is measured against.
//!
//! Reads copy the row as it is (possibly torn, possibly uncommitted); writes go straight into the
//! record; nothing is locked or validated, so concurrent transactions lose updates, read dirty data
//! and see phantoms (the concurrency tests show this). It still keeps an undo log, so a
//! transaction that aborts on purpose rolls back its own writes: the conformance suite's
//! single-threaded guarantees hold; isolation does not.
//!
//! Record: one state word (present / absent / unlinked) in front of the payload.
//!
//! **Commit contract** (`Protocol`'s docs): passed as 2PL passes it, with nothing held: its
//! writes are visible before it logs, so the log epochs' dependency rule does not hold for it
//! (nor does any isolation), and it logs whole images (see
//! [`crate::protocols::inplace::log_in_place`]). Its log still recovers what it acknowledged.

/// The `nocc` record: the in-place family's direct record, one state word (so `nocc` has no
/// `record.rs` or `worker.rs` of its own).
pub use crate::protocols::inplace::direct::DirectRecord as NoccRecord;
/// The `nocc` worker: the direct worker ([`crate::protocols::inplace::direct`]) on its own,
/// with nothing in front of it.
pub use crate::protocols::inplace::direct::DirectWorker as NoccWorker;

use crate::engine::{Capabilities, Database, Isolation, NoOptions, Protocol, Reads, Setup};
use crate::error::Error;
use crate::protocols::inplace::state::PRESENT;
use crate::storage::{RowRef, TableId};

/// The `nocc` protocol. Stateless.
#[derive(Clone, Copy, Debug, Default)]
pub struct Nocc;

impl Protocol for Nocc {
    const NAME: &'static str = "nocc";
    const DESCRIPTION: &'static str =
        "no concurrency control: the throughput ceiling (loses updates, reads dirty data)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::None,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: false,
        reads: Reads::Invisible,
        interactive: true,
        templates: false,
    };
    type Record = NoccRecord;
    type Worker<'db> = NoccWorker<'db>;
    type Options = NoOptions;

    fn new(_: NoOptions, _: &Setup<'_>) -> Result<Self, Error> {
        Ok(Nocc)
    }

    fn options(&self) -> &NoOptions {
        &NoOptions {}
    }

    fn load(&self, _: TableId, row: RowRef<'_, NoccRecord>, payload: &[u8]) {
        row.write_from(payload);
        let rec = row.header;
        rec.state.set_versioned(PRESENT, crate::history::INITIAL as u64);
    }

    fn is_present(&self, rec: &NoccRecord) -> bool {
        rec.present()
    }

    /// No isolation: the image is whatever the row holds now.
    fn read_committed(
        &self,
        _: TableId,
        _: u64,
        row: RowRef<'_, NoccRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        if !row.header.present() {
            return None;
        }
        row.read_into(buf);
        Some(row.header.state.stamp())
    }

    fn worker(db: &Database<Self>) -> Result<NoccWorker<'_>, Error> {
        Ok(NoccWorker::new(db.worker_ctx()?))
    }
}
