//! Counting the writes a transaction makes to cache lines that other workers also write or
//! poll: what decides how a protocol scales on many cores, made visible on two.
//!
//! A store or atomic read-modify-write to a line that another core wrote since (or read, for a
//! line this core owns) costs a coherence transfer, and a line that every worker writes once
//! per transaction serialises them all: a fetch-and-add per commit on one counter caps the
//! machine near the rate at which one line can move between cores (tens of millions per second
//! on one socket, a few million across sockets), whatever the core count. Two cores show the
//! count, not the cap; the count predicts it.
//!
//! Each [`Site`] is one kind of such write, named after what it is for; the engine and the
//! protocols call [`note`] where they make one. Counting is compiled in only with the
//! `shared-writes` feature (`cargo build --release --features shared-writes`, and in the
//! library's own tests): without it [`note`] is an empty inline function and the hot path is
//! the same machine code. With it, `txlab run --breakdown` counts in each worker thread over
//! the measured window and reports the writes per committed transaction, per site.
//!
//! Counted: the workers' own threads (every interactive protocol's transactions). Not
//! counted: background threads (the epoch advancer, log flushers, BOHM's sequencer and
//! execution threads, whose hand-offs are per batch), and a transaction's writes of the rows
//! it writes (locks and installs on written records belong to the workload, not the protocol).

/// What a shared write is for. The first kind (`contended`) writes a line other workers write
/// too; the second (`published`) writes this worker's own line that others read on their hot
/// path, which costs a transfer whenever one read it since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// Contended: a global counter drawn per transaction (the multi-version protocols' begin
    /// and commit timestamps, Cicada's `timestamps=counter`, wait-die's priorities).
    Counter,
    /// Contended: the central log's space reservation (ERMIA's one atomic add per commit).
    LogTail,
    /// Contended: a phantom bucket's version or timestamps (inserts bump it; Cicada raises its
    /// read timestamp for absent keys and scanned ranges).
    Phantom,
    /// Contended: a write a *read* makes to the record or version it reads: read locks (2PL,
    /// MOCC's hot records), read-timestamp extensions (TicToc, Cicada), reader marks (SSN,
    /// SSI).
    ReadMark,
    /// Contended: garbage collection's writes to shared records (Cicada's per-record GC lock)
    /// and shared watermarks.
    Gc,
    /// Contended: a shared schedule or flag taken by whichever worker is due (Cicada's and the
    /// multi-version protocols' watermark refresh).
    Refresh,
    /// Contended: an entry in another transaction's or record's list (IC3's accessor lists).
    Queue,
    /// Contended: a table-wide word that every index insert or removal writes (the ordered
    /// index's two writer counters, which let its scans find a moment without writers).
    Index,
    /// Published: this worker's slot in a table other workers read on their hot path or at
    /// every refresh: Cicada's clocks (read at every begin with external consistency) and QSBR
    /// marks, the multi-version protocols' transaction table (read by whoever meets a pending
    /// version, and by the watermark refresh).
    Slot,
    /// Published: this worker's epoch mark (storage epochs, the log's in-flight mark), read by
    /// a background advancer only: a transfer per advance, not per transaction.
    Epoch,
}

impl Site {
    /// Every site, in report order.
    pub const ALL: [Site; 10] = [
        Site::Counter,
        Site::LogTail,
        Site::Phantom,
        Site::ReadMark,
        Site::Gc,
        Site::Refresh,
        Site::Queue,
        Site::Index,
        Site::Slot,
        Site::Epoch,
    ];
    /// How many sites there are.
    pub const COUNT: usize = Site::ALL.len();

    /// The name in reports and CSV columns.
    pub fn name(self) -> &'static str {
        match self {
            Site::Counter => "counter",
            Site::LogTail => "log-tail",
            Site::Phantom => "phantom",
            Site::ReadMark => "read-mark",
            Site::Gc => "gc",
            Site::Refresh => "refresh",
            Site::Queue => "queue",
            Site::Index => "index",
            Site::Slot => "slot",
            Site::Epoch => "epoch",
        }
    }

    /// Whether other workers write the line too (else it is this worker's, published).
    pub fn contended(self) -> bool {
        !matches!(self, Site::Slot | Site::Epoch)
    }
}

/// Whether this build counts ([`note`] does nothing otherwise).
pub const COUNTING: bool = cfg!(any(test, feature = "shared-writes"));

#[cfg(any(test, feature = "shared-writes"))]
mod counting {
    use super::Site;
    use std::cell::Cell;

    /// This thread's counts, and whether it counts now. Thread-local (no shared line of its
    /// own), const-initialised and without `Drop`, so an access is a load relative to the
    /// thread pointer.
    pub(super) struct Counts {
        pub(super) on: Cell<bool>,
        pub(super) n: [Cell<u64>; Site::COUNT],
    }

    thread_local! {
        pub(super) static COUNTS: Counts = const {
            Counts { on: Cell::new(false), n: [const { Cell::new(0) }; Site::COUNT] }
        };
    }
}

/// One shared write at `site`, counted when this thread counts (see [`start`]).
#[inline(always)]
pub fn note(site: Site) {
    note_n(site, 1);
}

/// `n` shared writes at `site`.
#[inline(always)]
pub fn note_n(site: Site, n: u64) {
    #[cfg(any(test, feature = "shared-writes"))]
    counting::COUNTS.with(|c| {
        if c.on.get() {
            let x = &c.n[site as usize];
            x.set(x.get() + n);
        }
    });
    #[cfg(not(any(test, feature = "shared-writes")))]
    let _ = (site, n);
}

/// Starts counting in this thread, from zero.
pub fn start() {
    #[cfg(any(test, feature = "shared-writes"))]
    counting::COUNTS.with(|c| {
        c.on.set(true);
        c.n.iter().for_each(|x| x.set(0));
    });
}

/// Stops counting in this thread and returns its counts, in [`Site`] order (zeros in a build
/// that does not count).
pub fn take() -> [u64; Site::COUNT] {
    #[cfg(any(test, feature = "shared-writes"))]
    {
        counting::COUNTS.with(|c| {
            c.on.set(false);
            std::array::from_fn(|i| c.n[i].replace(0))
        })
    }
    #[cfg(not(any(test, feature = "shared-writes")))]
    [0; Site::COUNT]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_between_start_and_take_and_per_thread() {
        note(Site::Counter);
        start();
        note(Site::Counter);
        note_n(Site::Slot, 3);
        let other = std::thread::spawn(|| {
            start();
            note(Site::Gc);
            take()
        })
        .join()
        .unwrap();
        let mine = take();
        note(Site::Counter);
        assert_eq!(mine[Site::Counter as usize], 1, "the note before start is not counted");
        assert_eq!(mine[Site::Slot as usize], 3);
        assert_eq!(mine[Site::Gc as usize], 0, "another thread's note is its own");
        assert_eq!(other[Site::Gc as usize], 1);
        assert_eq!(take(), [0; Site::COUNT], "nothing after take");
    }
}
