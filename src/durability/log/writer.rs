//! A worker's log stream ([`LogWriter`]): a transaction's records encoded into the stream's ring
//! (whole images, changed columns, deletions), its log epoch kept in flight until its writes
//! are installed, and the wait for durability under `--sync commit`.

use super::*;

/// A worker's end of its log stream. The protocol's commit calls [`LogWriter::begin`], then
/// [`LogWriter::put_row`] / [`LogWriter::delete`] for every write, then [`LogWriter::end`], all with
/// its write locks held.
pub struct LogWriter {
    pub(super) mgr: Arc<LogManager>,
    pub(super) stream: usize,
    /// `central`: the open transaction's block, assembled privately (ERMIA §3.2) from
    /// [`central::LEAD`] on; reused, so it allocates only while it grows.
    pub(super) block: Vec<u8>,
    /// `central`: the open transaction's stamp and number of writes (its TXN record is
    /// written last, in front of its writes).
    pub(super) txn: (u64, u32),
    /// `central`: the LSN of the last block appended.
    pub(super) lsn: Option<u64>,
    /// The log is the central one.
    pub(super) central: bool,
    /// Where the next byte goes (unpublished until `end`).
    pub(super) pos: u64,
    /// Where the open transaction started.
    pub(super) start: u64,
    /// The log epoch of the last transaction appended.
    pub(super) epoch: u64,
    /// A record that wraps around the ring's end is assembled here.
    pub(super) scratch: Vec<u8>,
    /// The log has failed: records are dropped (the run is stopping; nothing after the failure
    /// is acknowledged).
    pub(super) dropped: bool,
    /// Commits wait for their group's sync (`SyncPolicy::Commit`).
    pub(super) sync_commit: bool,
    /// A transaction's log epoch is in flight: published in `inflight` by `begin` and not yet
    /// released by `installed`.
    pub(super) in_flight: bool,
}

impl Drop for LogWriter {
    /// A worker that goes away between `begin` and `installed` (a panic) must not hold the
    /// logger's groups back for good.
    fn drop(&mut self) {
        self.installed();
    }
}

/// The packed length of a COLS record of the columns `cols` of a `len`-byte row, when one is
/// worth writing (not every column, and smaller than the whole image); `None` otherwise.
#[inline]
pub(super) fn cols_record_len(p: &Projection, cols: Columns, len: usize) -> Option<usize> {
    if p.is_whole(cols) {
        return None;
    }
    let n = p.packed_len(cols, len);
    (n + 8 < len).then_some(n)
}

impl LogWriter {
    #[inline]
    pub(super) fn stream(&self) -> &Stream {
        &self.mgr.streams[self.stream]
    }

    /// Starts appending a committed transaction with commit stamp `stamp` and `writes` writes;
    /// returns its log epoch. Called at the serialization point, write locks held.
    #[inline]
    pub fn begin(&mut self, stamp: u64, writes: u32) -> u64 {
        let e = flight::enter(&self.mgr.epoch, &self.mgr.streams[self.stream].inflight);
        self.epoch = e;
        self.in_flight = true;
        if self.central {
            self.txn = (stamp, writes);
            self.block.resize(central::LEAD, 0);
            return e;
        }
        self.start = self.pos;
        self.record(RecordKind::Txn, writes, stamp, e, 0, |_| ());
        e
    }

    /// Appends the write of `key` in `table`: the columns `cols` of `row` (a COLS record), or
    /// its whole image when `cols` covers the row or a COLS record would not be smaller.
    /// Called under the writer's lock, after the new image is installed. A write that creates
    /// the row (an insert, a revival) passes every column: recovery applies a COLS record on
    /// top of the key's previous image, which such a write does not have.
    #[inline]
    pub fn put_row<R>(
        &mut self,
        table: u32,
        stamp: u64,
        key: u64,
        row: RowRef<'_, R>,
        p: &Projection,
        cols: Columns,
    ) {
        let len = row.len();
        if let Some(n) = cols_record_len(p, cols, len) {
            return self.record(RecordKind::Cols, table, stamp, key, 8 + n, |dst| {
                dst[..8].copy_from_slice(&cols.to_le_bytes());
                row.read_cols_packed(&mut dst[8..], p, cols);
            });
        }
        self.record(RecordKind::Put, table, stamp, key, len, |dst| row.read_into(dst));
    }

    /// [`LogWriter::put_row`] from a row image in the caller's memory (a protocol that keeps
    /// the images it installed, IC3 until its transaction commits): the columns `cols` of
    /// `image` as a COLS record, or the whole image.
    #[inline]
    pub fn put_image_cols(
        &mut self,
        table: u32,
        stamp: u64,
        key: u64,
        image: &[u8],
        p: &Projection,
        cols: Columns,
    ) {
        if let Some(n) = cols_record_len(p, cols, image.len()) {
            return self.put_packed_cols(table, stamp, key, image, p, cols, n);
        }
        self.put_image(table, stamp, key, image);
    }

    /// [`LogWriter::put_image_cols`] that never falls back to the whole image: a COLS record of
    /// exactly the columns `cols` of `image`, unless they cover the row. For a protocol whose
    /// image may hold other transactions' uncommitted columns beside the ones this write
    /// changed (IC3's accumulations go in under other transactions' pending writes of the
    /// row's other columns, and a writer's image predates the accumulations that went in
    /// under it): a whole image would log an uncommitted value, or a stale one above a
    /// committed accumulation's stamp.
    #[inline]
    pub fn put_image_only_cols(
        &mut self,
        table: u32,
        stamp: u64,
        key: u64,
        image: &[u8],
        p: &Projection,
        cols: Columns,
    ) {
        if p.is_whole(cols) {
            return self.put_image(table, stamp, key, image);
        }
        let n = p.packed_len(cols, image.len());
        self.put_packed_cols(table, stamp, key, image, p, cols, n);
    }

    /// A COLS record of the columns `cols` of `image`, `n` bytes packed.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn put_packed_cols(
        &mut self,
        table: u32,
        stamp: u64,
        key: u64,
        image: &[u8],
        p: &Projection,
        cols: Columns,
        n: usize,
    ) {
        let len = image.len();
        self.record(RecordKind::Cols, table, stamp, key, 8 + n, |dst| {
            dst[..8].copy_from_slice(&cols.to_le_bytes());
            let mut at = 8;
            p.runs(cols, |lo, hi| {
                let (a, b) = (lo * 8, (hi * 8).min(len));
                dst[at..at + b - a].copy_from_slice(&image[a..b]);
                at += b - a;
            });
        });
    }

    /// Appends the write of `key` in `table` as its whole image `row` (a protocol that
    /// buffers whole row images, BOHM's execution threads).
    #[inline]
    pub fn put_image(&mut self, table: u32, stamp: u64, key: u64, row: &[u8]) {
        self.record(RecordKind::Put, table, stamp, key, row.len(), |dst| dst.copy_from_slice(row));
    }

    /// Appends the deletion of `key` in `table`.
    #[inline]
    pub fn delete(&mut self, table: u32, stamp: u64, key: u64) {
        self.record(RecordKind::Delete, table, stamp, key, 0, |_| ());
    }

    /// Publishes the transaction's records to the logger. Returns its log epoch, which stays
    /// in flight (no group closes it) until [`LogWriter::installed`]: call `end` before or
    /// after installing the writes, and `installed` once they are visible.
    #[inline]
    pub fn end(&mut self) -> u64 {
        let s = &self.mgr.streams[self.stream];
        if self.central {
            if !self.dropped {
                let (stamp, writes) = self.txn;
                let block = central::seal(&mut self.block, stamp, writes, self.epoch);
                match self.mgr.append_central(self.stream, block) {
                    Ok(lsn) => self.lsn = Some(lsn),
                    Err(msg) => {
                        self.mgr.fail(msg);
                        self.dropped = true;
                    }
                }
            }
            return self.epoch;
        }
        // Release: the record bytes happen before the logger's Acquire load of `head`.
        s.head.store(self.pos, Ordering::Release);
        self.epoch
    }

    /// The transaction logged since [`LogWriter::begin`] has installed its writes: its log
    /// epoch leaves flight, and a group may close it (nothing if none is in flight).
    ///
    /// Why a checkpoint needs this order: a checkpoint that starts in log epoch `s` waits
    /// until `s` is durable, which a group declares only after every transaction of an epoch
    /// up to `s` left flight, and then reads the rows; recovery replays only the epochs above
    /// `s`. A transaction that left flight before its writes were visible (logged, then
    /// preempted before it installed) would be in neither the checkpoint nor the replay.
    #[inline]
    pub fn installed(&mut self) {
        if self.in_flight {
            self.in_flight = false;
            // The installed writes (and, central, the block in the log buffer) happen before
            // the group that sees the slot left, and so before a checkpoint that waited for
            // this epoch reads the rows.
            flight::leave(&self.mgr.streams[self.stream].inflight);
        }
    }

    /// Waits until the transaction of log epoch `epoch` is durable (sync = commit); `false`
    /// if the log failed first. Call after the write locks are released: other transactions
    /// go on meanwhile.
    pub fn wait_durable(&self, epoch: u64) -> bool {
        if self.mgr.durable_epoch() >= epoch {
            return true;
        }
        // AcqRel: pairs with the logger's Acquire load of `waiting` (it makes a group at once); the
        // durable epoch is read after it with Acquire (`durable_epoch`), so a group closed before
        // the count rose is seen.
        self.mgr.waiting.fetch_add(1, Ordering::AcqRel);
        self.mgr.wake_logger();
        let mut spin = crate::util::SpinWait::default();
        while self.mgr.durable_epoch() < epoch && !self.mgr.failed() {
            spin.spin();
        }
        // AcqRel: the count back, after the durable epoch was seen (or the log failed).
        self.mgr.waiting.fetch_sub(1, Ordering::AcqRel);
        self.mgr.durable_epoch() >= epoch
    }

    /// The end of a commit (see `engine::context::WorkerCtx::commit_returning`), its writes
    /// installed and its locks released: the transaction it logged, if any, leaves flight
    /// ([`LogWriter::installed`]), the ring is written out when a quarter full, and under
    /// `SyncPolicy::Commit` it waits until the commit is durable: the transaction of log epoch
    /// `epoch` it logged, or, when it logged nothing, every transaction it could have read
    /// (those of the log epoch in progress now and before: a writer whose install it read had
    /// read the epoch before, and the epoch only grows). `false` when the commit cannot be
    /// made durable: the log has failed and the commit logged, or, under `SyncPolicy::Commit`,
    /// its wait ended with the failure.
    #[inline]
    pub fn returning(&mut self, epoch: u64) -> bool {
        let logged = self.in_flight;
        self.installed();
        self.write_out();
        if self.sync_commit {
            // SeqCst: the load follows the commit's reads of installed writes (see above).
            let epoch = if logged { epoch } else { self.mgr.epoch_now() };
            return self.wait_durable(epoch);
        }
        !(logged && (self.dropped || self.mgr.failed()))
    }

    /// Whether a commit waits until it is durable before it returns (`SyncPolicy::Commit`).
    pub fn sync_commit(&self) -> bool {
        self.sync_commit
    }

    /// Writes this writer's ring out once it is a quarter full (part of
    /// [`LogWriter::returning`]; a pipeline that acknowledges commits later calls it after
    /// each transaction it logs).
    #[inline]
    pub fn write_out(&mut self) {
        // Write our own ring out once it is a quarter full: the worker pays for its log writes
        // with its own time (on a machine whose cores the workers fill, a logger thread that
        // had to would fall behind and stall them), outside its locks.
        let s = &self.mgr.streams[self.stream];
        let cap = self.mgr.opts.buffer_bytes as u64;
        if let Some(c) = &self.mgr.central {
            // The same for the central log buffer, if no one else is writing it out.
            if c.backlog() >= cap / 4 && !self.dropped {
                if let Err(msg) = self.mgr.flush_central(false) {
                    self.mgr.fail(msg);
                    self.dropped = true;
                }
            }
        // Acquire `tail`: pairs with the logger's Release store after it wrote the bytes out
        // (`LogManager::write_stream`), so the space below it may be reused.
        } else if self.pos - s.tail.load(Ordering::Acquire) >= cap / 4 && !self.dropped {
            if let Err(msg) = self.mgr.write_stream(self.stream, self.pos) {
                self.mgr.fail(msg);
                self.dropped = true;
            }
        }
    }

    /// The log this writer appends to.
    pub fn manager(&self) -> &Arc<LogManager> {
        &self.mgr
    }

    /// `central`: the log sequence number of the last transaction appended (its offset in the
    /// LSN space shifted left by 4, the segment number modulo 16 in the low bits); a total
    /// order of commits consistent with their dependencies.
    pub fn last_lsn(&self) -> Option<u64> {
        self.lsn
    }

    #[inline]
    pub(super) fn record(
        &mut self,
        kind: RecordKind,
        table: u32,
        stamp: u64,
        key: u64,
        payload: usize,
        fill: impl FnOnce(&mut [u8]),
    ) {
        if self.dropped {
            return;
        }
        let len = RECORD_OVERHEAD + payload;
        if self.central {
            let at = self.block.len();
            self.block.resize(at + len, 0);
            encode_in_place(&mut self.block[at..], kind, table, stamp, key, fill);
            return;
        }
        let (base, cap) = {
            let ring = self.stream().ring.get().expect("writers allocate their ring");
            (ring.ptr(), ring.cap())
        };
        if (self.pos - self.start) as usize + len > cap {
            self.mgr.fail(format!(
                "a transaction's log records need more than the {cap}-byte log buffer; raise --log-buffer-kb"
            ));
            self.dropped = true;
            return;
        }
        self.reserve(len);
        if self.dropped {
            return;
        }
        let at = (self.pos % cap as u64) as usize;
        if at + len <= cap {
            // SAFETY: `[pos, pos + len)` is free (`reserve`) and owned by this worker until it
            // publishes `head` (see `unsafe impl Sync for Ring`).
            let rec = unsafe { std::slice::from_raw_parts_mut(base.add(at), len) };
            encode_in_place(rec, kind, table, stamp, key, fill);
        } else {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.resize(len, 0);
            encode_in_place(&mut scratch, kind, table, stamp, key, fill);
            let first = cap - at;
            // SAFETY: as above; the record is split at the ring's end.
            unsafe {
                std::ptr::copy_nonoverlapping(scratch.as_ptr(), base.add(at), first);
                std::ptr::copy_nonoverlapping(scratch.as_ptr().add(first), base, len - first);
            }
            self.scratch = scratch;
        }
        self.pos += len as u64;
    }

    /// Waits until `len` bytes from `pos` are free in the ring.
    #[inline]
    pub(super) fn reserve(&mut self, len: usize) {
        let s = &self.mgr.streams[self.stream];
        let cap = self.mgr.opts.buffer_bytes as u64;
        // Acquire: pairs with the logger's Release store of `tail` after it wrote the bytes out.
        if self.pos + len as u64 - s.tail.load(Ordering::Acquire) <= cap {
            return;
        }
        // The bytes of the open transaction are not published yet, so only those up to
        // `start` can be written out (the size check in `record` keeps one transaction below
        // the capacity): write them ourselves, then wait for whoever holds the stream's lock.
        if let Err(msg) = self.mgr.write_stream(self.stream, self.start) {
            self.mgr.fail(msg);
        }
        let mut spin = crate::util::SpinWait::default();
        // Acquire `tail`: pairs with the logger's Release store once the bytes are written out;
        // `failed` pairs with `fail`'s Release.
        while self.pos + len as u64 - s.tail.load(Ordering::Acquire) > cap {
            if self.mgr.failed.load(Ordering::Acquire) {
                self.dropped = true;
                return;
            }
            spin.spin();
        }
    }
}
