//! The redo log. Two managers share the commit contract, the group commit and the files:
//!
//! * `per-worker` (Silo, SiloR and Cicada §3.7): each worker appends its committed
//!   transactions to its own ring buffer, written to that worker's segment files;
//! * `central` (ERMIA §3.2, `central`): one log whose space transactions claim with one atomic
//!   add each, filled in parallel and written in LSN order to one series of segments.
//!
//! One logger thread makes them durable in groups. A worker's stream ([`LogWriter`]) is in
//! `log/writer.rs`, the central log's space in `log/central.rs`, the log epochs in flight in
//! `log/flight.rs`.
//!
//! ## Group commit by log epoch
//!
//! A transaction is durable once every log holds every transaction it could depend on. The
//! logger keeps a *log epoch* `L` (its own counter, not the storage epoch, so that the group
//! interval is independent of Silo's 40 ms epochs and a commit-synchronous policy can advance it
//! per group). A committing worker, with its write locks held and its reads validated, publishes
//! the log epoch it commits in (`inflight`, `SeqCst` then a fence), reads `L` again, appends the
//! transaction to its ring stamped with that epoch and publishes the ring's head; it clears
//! `inflight` only once its writes are installed ([`LogWriter::installed`]), so that a closed
//! epoch's transactions are all visible (what a checkpoint relies on). The handshake is
//! [`flight`]'s, model-checked by `tests/loom_flight.rs`. A transaction T2 that
//! read or overwrote T1's write did so after T1 installed it, hence after T1 read `L`:
//! `epoch(T1) <= epoch(T2)`.
//!
//! Each group, the logger advances `L` to `n`, waits until no worker is still committing in an
//! epoch below `n` (its `inflight` is `IDLE` or at least `n`), takes every ring's head, writes
//! the rings out, `fdatasync`s the files (per the sync policy) and then the durable-point marker,
//! and publishes `durable = n - 1`. Every transaction of an epoch `<= durable` is on disk and
//! installed, and so is everything it depends on; recovery replays exactly those
//! (`durability::recovery`).
//!
//! The hot path: no allocation, no lock, no shared counter beyond the worker's own ring words;
//! with logging off a protocol pays one branch per commit.

use super::format::{
    self, FileKind, RecordKind, SegmentHeader, HEADER_LEN, PAYLOAD_AT, RECORD_OVERHEAD,
};
use crate::error::Error;
use crate::storage::projection::{Columns, Projection};
use crate::storage::RowRef;
use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod central;
pub mod flight;

/// What [`flight`] takes from its surroundings: std's atomics here; `tests/loom_flight.rs`
/// compiles `flight.rs` against loom's instead, to model-check it.
mod shim {
    pub use std::sync::atomic::{fence, AtomicU64, Ordering};
}

use flight::IDLE;

mod writer;

pub use writer::LogWriter;

/// Which log manager a database logs through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum LogKind {
    /// Each worker its own log (Silo, SiloR, Cicada).
    PerWorker,
    /// One log, space claimed with one atomic add per commit (ERMIA).
    Central,
}

impl LogKind {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            LogKind::PerWorker => "per-worker",
            LogKind::Central => "central",
        }
    }
}

/// When a commit's log records must be on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum SyncPolicy {
    /// Written to the operating system, never `fdatasync`ed (survives a process crash, not a
    /// machine crash).
    None,
    /// `fdatasync` once per group-commit interval; a commit is durable when its group is.
    Group,
    /// A commit returns only after an `fdatasync` that covers it (concurrent commits share one).
    Commit,
}

impl SyncPolicy {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            SyncPolicy::None => "none",
            SyncPolicy::Group => "group",
            SyncPolicy::Commit => "commit",
        }
    }
}

/// How a database logs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LogOptions {
    /// The directory of the log (created if missing; must hold no log yet).
    pub dir: PathBuf,
    /// The log manager.
    pub kind: LogKind,
    /// When commits are synced.
    pub sync: SyncPolicy,
    /// The group-commit interval (`--group-commit-ms`).
    #[serde(rename = "group_commit_s", serialize_with = "crate::util::serialize_secs")]
    pub group_interval: Duration,
    /// A segment file is closed and the next one started once it holds this many bytes.
    pub segment_bytes: u64,
    /// Each worker's ring buffer (`per-worker`) or the log buffer (`central`), bytes (a power
    /// of two).
    pub buffer_bytes: usize,
}

impl LogOptions {
    /// Logging into `dir` with the defaults: per-worker logs, group commit every 10 ms, 64 MiB
    /// segments, 16 MiB rings.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LogOptions {
            dir: dir.into(),
            kind: LogKind::PerWorker,
            sync: SyncPolicy::Group,
            group_interval: Duration::from_millis(10),
            segment_bytes: 64 << 20,
            buffer_bytes: 16 << 20,
        }
    }

    fn check(&self) -> Result<(), Error> {
        if !self.buffer_bytes.is_power_of_two() || self.buffer_bytes < 1 << 16 {
            return Err(Error::Config(format!(
                "log buffer must be a power of two of at least 64 KiB, not {} bytes",
                self.buffer_bytes
            )));
        }
        if self.segment_bytes < 1 << 16 {
            return Err(Error::Config(format!(
                "log segments must be at least 64 KiB, not {} bytes",
                self.segment_bytes
            )));
        }
        if self.kind == LogKind::Central && self.segment_bytes < self.buffer_bytes as u64 / 4 {
            return Err(Error::Config(format!(
                "with the central log, segments must be at least a quarter of the log buffer \
                 ({} bytes), not {} bytes",
                self.buffer_bytes, self.segment_bytes
            )));
        }
        if self.group_interval.is_zero() || self.group_interval > Duration::from_secs(10) {
            return Err(Error::Config(format!(
                "the group-commit interval must be above 0 and at most 10 s, not {:?}",
                self.group_interval
            )));
        }
        Ok(())
    }
}

/// The name of stream `stream`'s segment `seq`.
pub fn segment_name(stream: u32, seq: u32) -> String {
    format!("w{stream:04}-{seq:08}.log")
}

/// The subdirectory of the log segments.
pub const LOG_SUBDIR: &str = "log";
/// The durable-point marker's file name.
pub const MARKER: &str = "durable";

/// One worker's ring and its file (the file is the logger's alone).
struct Stream {
    /// Bytes the worker has published (monotonic; position = head % capacity).
    head: CachePadded<AtomicU64>,
    /// Bytes the logger has written out (monotonic).
    tail: CachePadded<AtomicU64>,
    /// The log epoch of the commit the worker is appending, or `IDLE`.
    inflight: CachePadded<AtomicU64>,
    /// `central`: a lower bound of the LSN offset of the block the worker is claiming and
    /// filling, or `IDLE` (see [`central`]).
    claim: CachePadded<AtomicU64>,
    ring: OnceLock<Ring>,
    file: Mutex<StreamFile>,
}

/// A stream's files: the segment being written and the ones closed since the last sync.
#[derive(Default)]
struct StreamFile {
    seg: Option<SegmentFile>,
    /// Closed segments with bytes no group has synced yet.
    unsynced: Vec<Arc<File>>,
}

impl StreamFile {
    /// For a group: moves the files that need a sync into `to_sync` (or forgets them when the
    /// group does not sync) and returns where the stream ends.
    fn take_sync(&mut self, syncing: bool, to_sync: &mut Vec<Arc<File>>) -> (u32, u64) {
        if syncing {
            to_sync.append(&mut self.unsynced);
            if let Some(seg) = self.seg.as_mut().filter(|seg| seg.dirty) {
                to_sync.push(seg.file.clone());
                seg.dirty = false;
            }
        } else {
            self.unsynced.clear();
        }
        self.seg.as_ref().map_or(format::marker::NONE, |seg| (seg.seq, seg.len))
    }

    /// Closes the segment being written (a group syncs it before a marker names its successor).
    fn close(&mut self) {
        if let Some(old) = self.seg.take().filter(|old| old.dirty) {
            self.unsynced.push(old.file);
        }
    }
}

/// A ring of bytes written by one worker and read by the logger.
struct Ring {
    buf: Box<[UnsafeCell<u8>]>,
}

// SAFETY: the worker writes only bytes in `[head, tail + capacity)` and publishes them with a
// Release store of `head`; the logger reads only `[tail, head)` after an Acquire load of `head`
// and hands space back with a Release store of `tail`, which the worker loads (Acquire) before
// writing there again. No byte is written and read concurrently. The central log's shared ring
// follows its own protocol with the same guarantee (claims, claim words and `flushed`: see
// `central::Central::put` and `LogManager::flush_central`).
unsafe impl Sync for Ring {}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring { buf: (0..cap).map(|_| UnsafeCell::new(0)).collect() }
    }
    #[inline]
    fn cap(&self) -> usize {
        self.buf.len()
    }
    #[inline]
    fn ptr(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.buf.as_ptr())
    }
    /// The bytes of `[from, to)` (positions modulo the capacity) as at most two slices.
    ///
    /// SAFETY: the caller owns that range under the ring protocol (see `unsafe impl Sync`).
    unsafe fn slices(&self, from: u64, to: u64) -> (&[u8], &[u8]) {
        let cap = self.cap() as u64;
        let start = (from % cap) as usize;
        let len = (to - from) as usize;
        let first = len.min(self.cap() - start);
        // SAFETY: in bounds by construction; ownership per the caller's contract.
        unsafe {
            (
                std::slice::from_raw_parts(self.ptr().add(start), first),
                std::slice::from_raw_parts(self.ptr(), len - first),
            )
        }
    }
}

/// An open segment file.
struct SegmentFile {
    /// Shared with a group that syncs it without holding the stream's lock.
    file: Arc<File>,
    seq: u32,
    len: u64,
    /// Written since the last `fdatasync`.
    dirty: bool,
}

/// The log of one database: the streams, the logger thread and the durable point.
pub struct LogManager {
    opts: LogOptions,
    fingerprint: u64,
    streams: Box<[Stream]>,
    /// The log epoch transactions commit in.
    epoch: CachePadded<AtomicU64>,
    /// Every transaction of a log epoch up to this one is durable.
    durable: CachePadded<AtomicU64>,
    /// The durable epoch the marker on disk says (at most `durable`: a group that wrote nothing
    /// leaves the marker alone, which recovers the same state).
    marked: AtomicU64,
    /// Someone waits for the marker itself to advance (`await_durable`): the next group writes
    /// it even if it wrote nothing.
    marker_wanted: AtomicBool,
    /// Commits waiting for durability (sync = commit), so the logger need not wait out its
    /// interval.
    waiting: CachePadded<AtomicU64>,
    failed: AtomicBool,
    /// The logger thread has stopped.
    closed: AtomicBool,
    error: Mutex<Option<String>>,
    logger: OnceLock<std::thread::Thread>,
    stats: LogCounters,
    /// The durable-point marker file (the logger's).
    marker: Mutex<File>,
    /// A segment file was created since the last group (the directory needs a sync).
    created: AtomicBool,
    /// The central log (`LogKind::Central`).
    central: Option<central::Central>,
}

/// What the logger did, for reports.
#[derive(Default)]
struct LogCounters {
    bytes: AtomicU64,
    syncs: AtomicU64,
    groups: AtomicU64,
}

/// Totals of a log's activity since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogStats {
    /// Bytes written to segment files (headers included).
    pub bytes: u64,
    /// `fdatasync` calls.
    pub syncs: u64,
    /// Groups made durable.
    pub groups: u64,
}

impl LogManager {
    /// Creates the log in `opts.dir` (which must not hold one already) for at most `streams`
    /// workers and the schema `fingerprint`, and starts its logger thread.
    pub fn start(opts: LogOptions, streams: usize, fingerprint: u64) -> Result<LogHandle, Error> {
        opts.check()?;
        let logdir = opts.dir.join(LOG_SUBDIR);
        if opts.dir.join(super::generation::POINTER).exists() {
            return Err(Error::Durability(format!(
                "{}: holds a log already; recover it (txlab recover), open it (Database::open) or choose an empty directory",
                opts.dir.display()
            )));
        }
        if logdir.exists() {
            let mut entries = std::fs::read_dir(&logdir).map_err(|e| io_err(&logdir, e))?;
            if entries.next().is_some() {
                return Err(Error::Durability(format!(
                    "{}: holds a log already; recover it (txlab recover), open it (Database::open) or choose an empty directory",
                    logdir.display()
                )));
            }
        }
        std::fs::create_dir_all(&logdir).map_err(|e| io_err(&logdir, e))?;
        let marker = opts.dir.join(MARKER);
        let mut f = File::create(&marker).map_err(|e| io_err(&marker, e))?;
        let marked_streams = match opts.kind {
            LogKind::PerWorker => streams,
            LogKind::Central => 1,
        };
        let mut init = format::marker::encode(0, 0, &vec![format::marker::NONE; marked_streams]);
        init.resize(2 * init.len(), 0);
        f.write_all(&init).map_err(|e| io_err(&marker, e))?;
        if opts.sync != SyncPolicy::None {
            f.sync_all().map_err(|e| io_err(&marker, e))?;
            sync_dir(&opts.dir)?;
        }
        let mgr = Arc::new(LogManager {
            fingerprint,
            streams: (0..streams)
                .map(|_| Stream {
                    head: CachePadded::new(AtomicU64::new(0)),
                    tail: CachePadded::new(AtomicU64::new(0)),
                    inflight: CachePadded::new(AtomicU64::new(IDLE)),
                    claim: CachePadded::new(AtomicU64::new(IDLE)),
                    ring: OnceLock::new(),
                    file: Mutex::new(StreamFile::default()),
                })
                .collect(),
            epoch: CachePadded::new(AtomicU64::new(1)),
            durable: CachePadded::new(AtomicU64::new(0)),
            marked: AtomicU64::new(0),
            marker_wanted: AtomicBool::new(false),
            waiting: CachePadded::new(AtomicU64::new(0)),
            failed: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            error: Mutex::new(None),
            logger: OnceLock::new(),
            stats: LogCounters::default(),
            marker: Mutex::new(f),
            created: AtomicBool::new(false),
            central: (opts.kind == LogKind::Central)
                .then(|| central::Central::new(opts.buffer_bytes, opts.segment_bytes)),
            opts,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (m, s) = (mgr.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("txlab-logger".into())
            .spawn(move || {
                m.logger_loop(&s);
                // Release: after the logger's last group (its `marked` store); pairs with
                // `await_durable`'s Acquire.
                m.closed.store(true, Ordering::Release);
            })
            .map_err(|e| Error::Durability(format!("cannot start the logger thread: {e}")))?;
        let _ = mgr.logger.set(handle.thread().clone());
        Ok(LogHandle { mgr, stop, thread: Some(handle) })
    }

    /// The options.
    pub fn options(&self) -> &LogOptions {
        &self.opts
    }

    /// Every transaction of a log epoch up to this one is durable.
    #[inline]
    pub fn durable_epoch(&self) -> u64 {
        // Acquire: pairs with the logger's Release after its syncs.
        self.durable.load(Ordering::Acquire)
    }

    /// The log epoch transactions commit in now.
    pub fn epoch_now(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Whether the worker of stream `stream` has a transaction's log epoch in flight (logged
    /// or logging, not yet installed: see [`LogWriter::installed`]). No group closes that
    /// epoch meanwhile.
    pub fn in_flight(&self, stream: usize) -> bool {
        self.streams.get(stream).is_some_and(|s| flight::in_flight(&s.inflight))
    }

    /// Per stream, the number of the segment being written (0 for a stream that has none yet):
    /// every segment below it is closed.
    pub fn open_segments(&self) -> Vec<u32> {
        if let Some(c) = &self.central {
            return vec![c.open_segment()];
        }
        self.streams
            .iter()
            .map(|s| {
                let f = s.file.lock().unwrap_or_else(|e| e.into_inner());
                f.seg.as_ref().map_or(0, |seg| seg.seq)
            })
            .collect()
    }

    /// Waits until every transaction of a log epoch up to `epoch` is durable and the marker on
    /// disk says so (asking the logger for a group now rather than at its next interval); the
    /// log's error if it failed.
    pub fn await_durable(&self, epoch: u64) -> Result<(), Error> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        // Acquire: pairs with the logger's Release store of `marked`.
        while self.marked.load(Ordering::Acquire) < epoch {
            self.marker_wanted.store(true, Ordering::Release);
            if let Some(e) = self.error() {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                return Err(Error::Durability(e));
            }
            // Acquire: pairs with the logger's Release stores of `closed` (after its last group)
            // and `marked`: a closed log whose marker is below `epoch` will never reach it.
            if self.closed.load(Ordering::Acquire) && self.marked.load(Ordering::Acquire) < epoch {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                return Err(Error::Durability(format!(
                    "{}: the log is closed",
                    self.opts.dir.display()
                )));
            }
            self.wake_logger();
            std::thread::sleep(Duration::from_micros(200));
        }
        // AcqRel: as the increment (pairs with the logger's Acquire load of `waiting`).
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }

    /// Whether the log has failed (see [`LogManager::error`]).
    #[inline]
    pub fn failed(&self) -> bool {
        // Acquire: pairs with the Release store in `fail`, after the message is set.
        self.failed.load(Ordering::Acquire)
    }

    /// The first error the log met (it stops logging: nothing after it is acknowledged).
    pub fn error(&self) -> Option<String> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What the logger has done so far.
    pub fn stats(&self) -> LogStats {
        LogStats {
            // Relaxed: statistics, no data is read through them.
            bytes: self.stats.bytes.load(Ordering::Relaxed),
            syncs: self.stats.syncs.load(Ordering::Relaxed),
            groups: self.stats.groups.load(Ordering::Relaxed),
        }
    }

    /// A writer for worker slot `stream` (allocates its ring on first use).
    pub fn writer(self: &Arc<Self>, stream: usize) -> LogWriter {
        let s = &self.streams[stream];
        if self.central.is_none() {
            s.ring.get_or_init(|| Ring::new(self.opts.buffer_bytes));
        }
        // Acquire: pairs with the previous writer of the stream's Release store of `head` (a worker
        // slot reused after a departure).
        let pos = s.head.load(Ordering::Acquire);
        LogWriter {
            block: Vec::new(),
            txn: (0, 0),
            lsn: None,
            central: self.central.is_some(),
            mgr: self.clone(),
            stream,
            pos,
            start: pos,
            epoch: 0,
            scratch: Vec::new(),
            dropped: false,
            sync_commit: self.opts.sync == SyncPolicy::Commit,
            in_flight: false,
        }
    }

    fn fail(&self, msg: String) {
        let mut e = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if e.is_none() {
            *e = Some(msg);
        }
        // Release: after the message is set (pairs with `failed`'s Acquire).
        self.failed.store(true, Ordering::Release);
    }

    fn logger_loop(&self, stop: &AtomicBool) {
        let interval = self.opts.group_interval;
        let mut next = Instant::now() + interval;
        let mut marks = Marks::default();
        loop {
            // Acquire: pairs with the handle's Release store in `close`: what the workers logged
            // before it is in the rings.
            let stopping = stop.load(Ordering::Acquire);
            let now = Instant::now();
            // Acquire: pairs with the waiters' AcqRel increments (`LogWriter::wait_durable`,
            // `await_durable`).
            let urgent = self.waiting.load(Ordering::Acquire) > 0;
            let mut wrote = false;
            let step = if stopping || urgent || now >= next {
                next = now + interval;
                self.group(&mut marks).map(|w| wrote = w)
            } else {
                // Drain full-ish rings between groups (workers also write their own).
                self.drain().map(drop)
            };
            if let Err(msg) = step {
                self.fail(msg);
                return;
            }
            if stopping {
                return;
            }
            if !(urgent && wrote) {
                let wait = next.saturating_duration_since(Instant::now());
                std::thread::park_timeout(wait.min(Duration::from_millis(1)));
            }
        }
    }

    /// Writes out the rings that are over a quarter full, without syncing; whether it wrote.
    fn drain(&self) -> Result<bool, String> {
        if let Some(c) = &self.central {
            if c.backlog() >= c.ring.cap() as u64 / 4 {
                return self.flush_central(true);
            }
            return Ok(false);
        }
        let mut wrote = false;
        for (i, s) in self.streams.iter().enumerate() {
            let Some(ring) = s.ring.get() else { continue };
            // Acquire: pairs with the worker's Release store of `head` after it copied its records
            // into the ring: the bytes below it are complete.
            let head = s.head.load(Ordering::Acquire);
            if head - s.tail.load(Ordering::Acquire) >= ring.cap() as u64 / 4 {
                wrote |= self.write_stream(i, head)?;
            }
        }
        Ok(wrote)
    }

    /// One group: close log epoch `n - 1`, write every ring, sync, publish `durable = n - 1`.
    /// Whether the files changed since the last group.
    fn group(&self, marks: &mut Marks) -> Result<bool, String> {
        // A worker that commits from now on enters epoch `n` or later (see `flight`).
        let n = flight::close(&self.epoch);
        let syncing = self.opts.sync != SyncPolicy::None;
        let mut to_sync: Vec<Arc<File>> = Vec::new();
        let ends = match &self.central {
            Some(c) => vec![self.close_central(c, n, syncing, &mut to_sync)?],
            None => self.close_streams(n, syncing, &mut to_sync)?,
        };
        self.publish(n, marks, ends, to_sync)
    }

    /// Waits until every commit of a log epoch below `n` has published its records, spinning
    /// (then yielding) and calling `help` meanwhile.
    fn await_epoch(
        &self,
        n: u64,
        mut help: impl FnMut(usize) -> Result<(), String>,
    ) -> Result<(), String> {
        for (i, s) in self.streams.iter().enumerate() {
            let mut spins = 0u32;
            while !flight::settled(&s.inflight, n) {
                // A worker between reading the old epoch and publishing its records: a few
                // hundred nanoseconds, unless it was preempted or waits for buffer space, which
                // writing out what was published so far gives it.
                help(i)?;
                spins += 1;
                if spins > 64 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        Ok(())
    }

    /// `per-worker`: closes log epoch `n - 1` in every stream; returns each stream's end and
    /// adds the files to sync to `to_sync`.
    fn close_streams(
        &self,
        n: u64,
        syncing: bool,
        to_sync: &mut Vec<Arc<File>>,
    ) -> Result<Vec<(u32, u64)>, String> {
        self.await_epoch(n, |i| {
            let s = &self.streams[i];
            if s.ring.get().is_some() {
                // Acquire: pairs with the worker's Release store of `head`, as in `drain`.
                self.write_stream(i, s.head.load(Ordering::Acquire))?;
            }
            Ok(())
        })?;
        // Every transaction of an epoch below `n` is in its ring: write them all out, then note
        // where each stream ends and what needs a sync (workers may append meanwhile: what
        // they add is synced by a later group).
        let mut ends = Vec::with_capacity(self.streams.len());
        for (i, s) in self.streams.iter().enumerate() {
            if s.ring.get().is_some() {
                self.write_stream(i, s.head.load(Ordering::Acquire))?;
            }
            let mut f = s.file.lock().unwrap_or_else(|e| e.into_inner());
            ends.push(f.take_sync(syncing, to_sync));
        }
        Ok(ends)
    }

    /// Syncs `to_sync` and writes the marker when the files changed (or someone waits for
    /// it), then publishes `durable = n - 1`. Whether the files changed since the last group.
    fn publish(
        &self,
        n: u64,
        marks: &mut Marks,
        ends: Vec<(u32, u64)>,
        to_sync: Vec<Arc<File>>,
    ) -> Result<bool, String> {
        let syncing = self.opts.sync != SyncPolicy::None;
        let changed = ends != marks.last_ends;
        if changed {
            // This group's bytes may hold transactions of epoch `n` (appended after the bump),
            // which only the next group's marker covers.
            marks.owed = 2;
        }
        let durable = n - 1;
        if marks.owed > 0 || self.marker_wanted.swap(false, Ordering::AcqRel) {
            for f in &to_sync {
                f.sync_data().map_err(|e| format!("fdatasync of a log segment: {e}"))?;
            }
            // Relaxed: a statistic.
            self.stats.syncs.fetch_add(to_sync.len() as u64, Ordering::Relaxed);
            // AcqRel: pairs with `new_segment`'s Release store (the file exists before the
            // directory is synced).
            if self.created.swap(false, Ordering::AcqRel) && syncing {
                // New segment files exist on disk before a marker names them.
                sync_dir(&self.opts.dir.join(LOG_SUBDIR)).map_err(|e| e.to_string())?;
                self.stats.syncs.fetch_add(1, Ordering::Relaxed);
            }
            self.write_marker(n, durable, &ends)?;
            // `durable` first: a reader that sees `marked` reach an epoch sees `durable` there
            // too (Release/Acquire on `marked` orders the earlier store).
            self.durable.store(durable, Ordering::Release);
            // Release: the marker write happens before a reader of `marked` acts on it.
            self.marked.store(durable, Ordering::Release);
            marks.owed = marks.owed.saturating_sub(1);
            marks.last_ends = ends;
        }
        // Relaxed: a statistic.
        self.stats.groups.fetch_add(1, Ordering::Relaxed);
        // Release: the data and marker writes happen before a reader acts on `durable`.
        self.durable.store(durable, Ordering::Release);
        Ok(changed)
    }

    fn write_marker(&self, seq: u64, durable: u64, ends: &[(u32, u64)]) -> Result<(), String> {
        use std::os::unix::fs::FileExt;
        let slot = format::marker::encode(seq, durable, ends);
        let path = || self.opts.dir.join(MARKER).display().to_string();
        let f = self.marker.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all_at(&slot, (seq % 2) * slot.len() as u64)
            .map_err(|e| format!("{}: write: {e}", path()))?;
        if self.opts.sync != SyncPolicy::None {
            f.sync_data().map_err(|e| format!("{}: fdatasync: {e}", path()))?;
            // Relaxed: a statistic.
            self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes stream `i`'s ring up to `head` to its segment files (the logger, or the stream's
    /// worker itself: whoever holds the stream's lock); whether anything was written.
    fn write_stream(&self, i: usize, head: u64) -> Result<bool, String> {
        let s = &self.streams[i];
        let mut f = s.file.lock().unwrap_or_else(|e| e.into_inner());
        // Only written under this lock.
        let tail = s.tail.load(Ordering::Relaxed);
        if head <= tail {
            return Ok(false);
        }
        let ring = s.ring.get().expect("a stream with data has a ring");
        let len = head - tail;
        let f = &mut *f;
        let roll = match f.seg.as_ref() {
            None => true,
            Some(seg) => seg.len > HEADER_LEN as u64 && seg.len + len > self.opts.segment_bytes,
        };
        if roll {
            let seq = f.seg.as_ref().map_or(0, |seg| seg.seq + 1);
            f.close();
            f.seg = Some(self.create_segment(FileKind::Log, i as u32, seq, 0)?);
        }
        let seg = f.seg.as_mut().expect("a segment is open");
        // SAFETY: `[tail, head)` was published by the worker (Acquire load of `head` by the
        // caller) and is not reused before the Release store of `tail` below.
        let (a, b) = unsafe { ring.slices(tail, head) };
        let path = || self.opts.dir.join(LOG_SUBDIR).join(segment_name(i as u32, seg.seq));
        (&*seg.file).write_all(a).map_err(|e| format!("{}: write: {e}", path().display()))?;
        (&*seg.file).write_all(b).map_err(|e| format!("{}: write: {e}", path().display()))?;
        seg.len += len;
        seg.dirty = true;
        // Relaxed: a statistic.
        self.stats.bytes.fetch_add(len, Ordering::Relaxed);
        // Release: pairs with the worker's Acquire load before it reuses the space.
        s.tail.store(head, Ordering::Release);
        Ok(true)
    }

    /// Creates segment `seq` of `stream` (`aux`: see [`SegmentHeader`]).
    fn create_segment(
        &self,
        kind: FileKind,
        stream: u32,
        seq: u32,
        aux: u64,
    ) -> Result<SegmentFile, String> {
        let path = self.opts.dir.join(LOG_SUBDIR).join(segment_name(stream, seq));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let h = SegmentHeader { kind, fingerprint: self.fingerprint, stream, seq, aux };
        file.write_all(&h.encode()).map_err(|e| format!("{}: write: {e}", path.display()))?;
        // Release: the file is created before the next group's AcqRel swap sees the flag and syncs
        // the directory.
        self.created.store(true, Ordering::Release);
        self.stats.bytes.fetch_add(HEADER_LEN as u64, Ordering::Relaxed);
        Ok(SegmentFile { file: Arc::new(file), seq, len: HEADER_LEN as u64, dirty: true })
    }

    fn wake_logger(&self) {
        if let Some(t) = self.logger.get() {
            t.unpark();
        }
    }
}

/// What the logger remembers between groups about its markers.
#[derive(Default)]
struct Marks {
    /// The stream ends the last marker recorded.
    last_ends: Vec<(u32, u64)>,
    /// Groups that still owe a marker (two after the files changed, see `group`).
    owed: u8,
}

/// Owns the logger thread: dropping it makes a last group durable and joins the thread.
pub struct LogHandle {
    mgr: Arc<LogManager>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LogHandle {
    /// The log.
    pub fn manager(&self) -> &Arc<LogManager> {
        &self.mgr
    }

    /// Makes everything committed so far durable and stops the logger; returns the log's first
    /// error, if it met one.
    pub fn close(&mut self) -> Result<(), Error> {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        match self.mgr.error() {
            Some(e) => Err(Error::Durability(e)),
            None => Ok(()),
        }
    }
}

impl Drop for LogHandle {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Writes a whole record into `rec` (its exact length).
#[inline]
fn encode_in_place(
    rec: &mut [u8],
    kind: RecordKind,
    table: u32,
    stamp: u64,
    key: u64,
    fill: impl FnOnce(&mut [u8]),
) {
    let len = rec.len();
    format::put_header(rec, len as u32, kind, table, stamp, key);
    fill(&mut rec[PAYLOAD_AT..len - 4]);
    let crc = crc32c::crc32c(&rec[..len - 4]);
    rec[len - 4..].copy_from_slice(&crc.to_le_bytes());
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Durability(format!("{}: {e}", path.display()))
}

/// `fsync`s a directory, so that files created in it survive a crash.
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_err(dir, e))
}
