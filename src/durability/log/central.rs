//! ERMIA's central log (§3.2 of the ERMIA paper): one log for every worker, whose space a
//! committing transaction claims with a single atomic add.
//!
//! ## LSN space and segments
//!
//! Transactions assemble their records privately (`LogWriter`), then claim a block of the
//! *LSN space*, a monotonic byte offset, with one `fetch_add` on `next`. The space need not be
//! contiguous on disk: it is cut into segments, segment `s` covering `[start_s, start_s + cap)`
//! (`cap`: the segment file's size minus its header) and stored at file offset
//! `HEADER_LEN + (o - start_s)` of segment file `s`. A transaction's LSN is `o << 4 | s % 16`:
//! the offset orders commits, the low bits name the segment (ERMIA keeps 16 live segment
//! numbers). A claimed block is checked against the segment table (`starts`, segment start
//! offsets by `s % 16`, and `cur`, the newest segment):
//!
//! * inside a segment: used;
//! * straddling a segment's end: the part up to the end is filled with a SKIP record, which
//!   closes the segment, and the transaction claims again;
//! * after the newest segment's end: the claimant competes (CAS on the table slot) to open the
//!   next segment *at its own offset*; every block between the old end and the winner's offset
//!   (the "dead zone": blocks that lost the race, and the straddler's tail) maps to no file and
//!   its claimant claims again.
//!
//! ## The log buffer and the flusher
//!
//! Offset `o` lives at position `o % capacity` of one shared ring. A claimant waits until the
//! ring has been written out past `o + size - capacity` (ERMIA: "the transaction retains its
//! LSN but must wait for the corresponding buffer space to drain"), copies its block in and
//! leaves. What may be written out is the prefix every claim below has filled: before claiming,
//! a worker publishes a lower bound of its offset in its `claim` word (the value of `next` it
//! just read; `SeqCst` store, fence, then the `fetch_add`), then the offset itself, and `IDLE`
//! once its block is in the ring. The flusher reads `next`, fences, and takes the minimum of
//! `next` and every `claim`: a claim it does not see was taken after it read `next`. It writes
//! that prefix to the segment files in order, skipping dead zones, and advances `flushed`.
//!
//! Group commit and durability are the per-worker log's (`super`): log epochs with the
//! `inflight` handshake; a group waits until every commit of an earlier epoch has left its
//! `inflight` and then until `flushed` passes the `next` it read afterwards, syncs, and writes
//! the marker with the one stream's end. Commit order and dependencies: a transaction that read
//! or overwrote another's write claimed after that one had claimed (locks are held across the
//! claim), so a prefix of the LSN space is closed under dependencies, and its offsets are a
//! commit order the multi-version protocols can use (ERMIA's commit timestamps).
//!
//! Bounds: a block is at most 1/16 of a segment (and half the ring); segments are at least a
//! quarter of the ring, so the slot of segment `s + 16` is reused long after segment `s` was
//! written out.

use super::{LogManager, Ring, StreamFile, IDLE};
use crate::durability::format::{self, FileKind, RecordKind, HEADER_LEN, RECORD_OVERHEAD};
use crossbeam_utils::CachePadded;
use std::io::Write;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Mutex, TryLockError};

/// Live segment numbers (ERMIA's prototype: 16): the table's slots, and the LSN's low bits.
const SLOTS: usize = 16;
/// Blocks are multiples of this: the smallest SKIP record.
const ALIGN: u64 = format::SKIP_MIN as u64;
/// A block's first bytes are reserved for its TXN record and up to 7 bytes of padding.
pub(super) const LEAD: usize = RECORD_OVERHEAD + ALIGN as usize - 1;

/// The central log's shared state.
pub(super) struct Central {
    /// The log buffer.
    pub(super) ring: Ring,
    /// The LSN space claimed so far.
    next: CachePadded<AtomicU64>,
    /// The LSN space written out so far (ring positions below it are free).
    flushed: CachePadded<AtomicU64>,
    /// The newest segment.
    cur: CachePadded<AtomicU64>,
    /// Segment `s` starts at LSN offset `starts[s % SLOTS]`.
    starts: [AtomicU64; SLOTS],
    /// LSN bytes per segment (a multiple of `ALIGN`).
    seg_cap: u64,
    /// The flusher's files.
    file: Mutex<CentralFile>,
}

/// What the flusher writes to.
struct CentralFile {
    out: StreamFile,
    /// The segment being written, and its LSN range.
    seq: u32,
    start: u64,
    end: u64,
}

/// Where a claimed block falls.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// Inside segment `seq`.
    In(u64),
    /// Across the end (this offset) of a segment.
    Straddle(u64),
    /// Between two segments.
    Dead,
}

impl Central {
    pub(super) fn new(ring_bytes: usize, segment_bytes: u64) -> Central {
        let seg_cap = (segment_bytes - HEADER_LEN as u64) / ALIGN * ALIGN;
        Central {
            ring: Ring::new(ring_bytes),
            next: CachePadded::new(AtomicU64::new(0)),
            flushed: CachePadded::new(AtomicU64::new(0)),
            cur: CachePadded::new(AtomicU64::new(0)),
            starts: std::array::from_fn(|_| AtomicU64::new(0)),
            seg_cap,
            file: Mutex::new(CentralFile {
                out: StreamFile::default(),
                seq: 0,
                start: 0,
                end: seg_cap,
            }),
        }
    }

    /// Claimed bytes not yet written out.
    #[inline]
    pub(super) fn backlog(&self) -> u64 {
        // Relaxed: a heuristic for when to write out.
        self.next.load(Ordering::Relaxed).saturating_sub(self.flushed.load(Ordering::Relaxed))
    }

    /// The segment being written (every older one is closed).
    pub(super) fn open_segment(&self) -> u32 {
        self.file.lock().unwrap_or_else(|e| e.into_inner()).seq
    }

    /// The largest block a transaction may claim.
    fn max_block(&self) -> u64 {
        (self.seg_cap / 16).min(self.ring.cap() as u64 / 2)
    }

    /// Where the block `[o, o + size)` just claimed falls; opens the next segment at `o` when
    /// it starts after the newest one.
    fn place(&self, o: u64, size: u64) -> Result<Place, String> {
        loop {
            // Acquire: pairs with the AcqRel CASes that open a segment and advance `cur`.
            let s = self.cur.load(Ordering::Acquire);
            let end = self.starts[s as usize % SLOTS].load(Ordering::Acquire) + self.seg_cap;
            if o >= end {
                let slot = &self.starts[(s as usize + 1) % SLOTS];
                let old = slot.load(Ordering::Acquire);
                if old < end {
                    // A stale start (segment s - 15): compete to open s + 1 here.
                    let _ = slot.compare_exchange(old, o, Ordering::AcqRel, Ordering::Acquire);
                }
                // Opened, by us or another: make it the newest.
                let _ = self.cur.compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Acquire);
                continue;
            }
            // Find the segment at or before `o`, newest first.
            let mut q = s;
            loop {
                let start = self.starts[q as usize % SLOTS].load(Ordering::Acquire);
                if o >= start {
                    let end = start + self.seg_cap;
                    return Ok(if o + size <= end { Place::In(q) } else { Place::Straddle(end) });
                }
                if q == 0 || s - q >= SLOTS as u64 - 2 {
                    return Err(format!(
                        "central log: LSN offset {o} precedes the segments in the table \
                         (segment {s} starts at {start}); the log buffer outran its segments"
                    ));
                }
                let prev_end =
                    self.starts[(q - 1) as usize % SLOTS].load(Ordering::Acquire) + self.seg_cap;
                if o >= prev_end {
                    return Ok(Place::Dead);
                }
                q -= 1;
            }
        }
    }

    /// The prefix of the LSN space that every claim has filled.
    fn filled(&self, streams: &[super::Stream]) -> u64 {
        // SeqCst load, fence, SeqCst loads: pairs with the claimant's SeqCst store of its
        // lower bound, fence and SeqCst fetch_add (`LogManager::append_central`).
        let n = self.next.load(Ordering::SeqCst);
        fence(Ordering::SeqCst);
        streams.iter().map(|s| s.claim.load(Ordering::SeqCst)).fold(n, u64::min)
    }

    /// Copies `bytes` to LSN offset `o` of the ring.
    ///
    /// SAFETY: the caller claimed `[o, o + len)`, which no one else writes, and the flusher has
    /// written it out of the ring's previous lap (`flushed >= o + len - capacity`) and will not
    /// read it before the caller's `claim` word moves past it.
    unsafe fn put(&self, o: u64, bytes: &[u8]) {
        let cap = self.ring.cap();
        let at = (o % cap as u64) as usize;
        let first = bytes.len().min(cap - at);
        // SAFETY: in bounds; ownership per the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ring.ptr().add(at), first);
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr().add(first),
                self.ring.ptr(),
                bytes.len() - first,
            );
        }
    }
}

/// Writes the TXN record in front of the writes assembled in `block` (from [`LEAD`] on), padded
/// so that the block is a multiple of `ALIGN` bytes; returns the block.
#[inline]
pub(super) fn seal(block: &mut [u8], stamp: u64, writes: u32, epoch: u64) -> &[u8] {
    let rest = block.len() - LEAD;
    let pad = (ALIGN as usize - (RECORD_OVERHEAD + rest) % ALIGN as usize) % ALIGN as usize;
    let at = LEAD - RECORD_OVERHEAD - pad;
    super::encode_in_place(&mut block[at..LEAD], RecordKind::Txn, writes, stamp, epoch, |p| {
        p.fill(0)
    });
    &block[at..]
}

impl LogManager {
    fn central(&self) -> &Central {
        self.central.as_ref().expect("the central log")
    }

    /// Appends a transaction's block (see the module docs); returns its LSN. The worker's
    /// `inflight` is set.
    pub(super) fn append_central(&self, stream: usize, block: &[u8]) -> Result<u64, String> {
        let c = self.central();
        let me = &self.streams[stream].claim;
        let size = block.len() as u64;
        if size > c.max_block() {
            return Err(format!(
                "a transaction's log records ({size} bytes) exceed the central log's largest \
                 block ({} bytes: 1/16 of a segment, at most half the log buffer); raise the \
                 segment size or the log buffer",
                c.max_block()
            ));
        }
        loop {
            // The lower bound first (see `Central::filled`).
            me.store(c.next.load(Ordering::SeqCst), Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let o = c.next.fetch_add(size, Ordering::SeqCst);
            // The one contended write of ERMIA's log; `me` is this worker's bound, which the
            // flusher polls.
            crate::util::shared_writes::note(crate::util::shared_writes::Site::LogTail);
            // Release: a tighter bound, ordered after the lower one.
            me.store(o, Ordering::Release);
            match c.place(o, size)? {
                Place::In(seq) => {
                    self.await_ring(o + size)?;
                    // SAFETY: claimed by the fetch_add, drained by `await_ring`, and not read
                    // before `me` moves past it.
                    unsafe { c.put(o, block) };
                    // Release: the block is in the ring before the flusher sees `IDLE`.
                    me.store(IDLE, Ordering::Release);
                    return Ok((o << 4) | (seq % SLOTS as u64));
                }
                Place::Straddle(end) => {
                    // Close the segment with one SKIP record up to its end (offsets and
                    // segment sizes are multiples of 8, so the gap holds one).
                    self.await_ring(end)?;
                    const ZEROS: [u8; 4096] = [0; 4096];
                    let head = format::skip_header((end - o) as u32);
                    // SAFETY: as above, for `[o, end)`.
                    unsafe { c.put(o, &head) };
                    let mut at = o + head.len() as u64;
                    while at < end {
                        let n = (end - at).min(ZEROS.len() as u64);
                        // SAFETY: as above.
                        unsafe { c.put(at, &ZEROS[..n as usize]) };
                        at += n;
                    }
                }
                Place::Dead => {}
            }
        }
    }

    /// Waits until the ring has been written out up to `upto - capacity`, writing it out
    /// meanwhile if no one else is.
    fn await_ring(&self, upto: u64) -> Result<(), String> {
        let c = self.central();
        let cap = c.ring.cap() as u64;
        let mut spin = crate::util::SpinWait::default();
        // Acquire: pairs with the flusher's Release store of `flushed` after its writes.
        while upto > c.flushed.load(Ordering::Acquire) + cap {
            if self.failed() {
                return Err("the log failed".into());
            }
            self.flush_central(false)?;
            spin.spin();
        }
        Ok(())
    }

    /// Writes the filled prefix of the LSN space out to the segment files; whether anything
    /// was written. With `wait` false, returns at once if someone else is writing.
    pub(super) fn flush_central(&self, wait: bool) -> Result<bool, String> {
        let c = self.central();
        let mut f = match c.file.try_lock() {
            Ok(f) => f,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) if wait => {
                c.file.lock().unwrap_or_else(|e| e.into_inner())
            }
            Err(TryLockError::WouldBlock) => return Ok(false),
        };
        let f = &mut *f;
        // Relaxed: only written under the lock held here.
        let from = c.flushed.load(Ordering::Relaxed);
        let to = c.filled(&self.streams);
        if to <= from {
            return Ok(false);
        }
        let mut at = from;
        while at < to {
            if at < f.start {
                // The dead zone before the segment.
                at = f.start.min(to);
                continue;
            }
            if at >= f.end {
                // SeqCst: read after `filled`; a segment opened at an offset below `to` was
                // opened before its opener's claim word moved past it, which `filled` saw.
                let next = c.starts[(f.seq as usize + 1) % SLOTS].load(Ordering::SeqCst);
                if next < f.end {
                    // Not opened yet: everything up to `to` is dead.
                    at = to;
                    continue;
                }
                f.out.close();
                f.seq += 1;
                f.start = next;
                f.end = next + c.seg_cap;
                f.out.seg = Some(self.create_segment(FileKind::CentralLog, 0, f.seq, next)?);
                continue;
            }
            if f.out.seg.is_none() {
                f.out.seg = Some(self.create_segment(FileKind::CentralLog, 0, f.seq, f.start)?);
            }
            let upto = to.min(f.end);
            let seg = f.out.seg.as_mut().expect("a segment is open");
            // SAFETY: `[at, upto)` lies below every claim (`filled`), so its blocks are
            // complete and their ring space is not reused before `flushed` moves past it.
            let (a, b) = unsafe { c.ring.slices(at, upto) };
            let path =
                || self.opts.dir.join(super::LOG_SUBDIR).join(super::segment_name(0, seg.seq));
            (&*seg.file).write_all(a).map_err(|e| format!("{}: write: {e}", path().display()))?;
            (&*seg.file).write_all(b).map_err(|e| format!("{}: write: {e}", path().display()))?;
            seg.len += upto - at;
            seg.dirty = true;
            self.stats.bytes.fetch_add(upto - at, Ordering::Relaxed);
            at = upto;
        }
        // Release: pairs with claimants' Acquire loads before they reuse the space.
        c.flushed.store(to, Ordering::Release);
        Ok(true)
    }

    /// `central`: closes log epoch `n - 1`: waits until its commits have claimed and filled
    /// their blocks and the prefix holding them is written out; returns the stream's end and
    /// adds the files to sync to `to_sync`.
    pub(super) fn close_central(
        &self,
        c: &Central,
        n: u64,
        syncing: bool,
        to_sync: &mut Vec<std::sync::Arc<std::fs::File>>,
    ) -> Result<(u32, u64), String> {
        self.await_epoch(n, |_| self.flush_central(true).map(drop))?;
        // Every block of an epoch below `n` lies below this.
        let upto = c.next.load(Ordering::SeqCst);
        let mut spins = 0u32;
        while c.flushed.load(Ordering::Acquire) < upto {
            // Blocks of later epochs below `upto` are being filled: nothing holds them up.
            if !self.flush_central(true)? {
                spins += 1;
                if spins > 64 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        let mut f = c.file.lock().unwrap_or_else(|e| e.into_inner());
        Ok(f.out.take_sync(syncing, to_sync))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_placed_in_segments_straddle_their_ends_and_open_the_next() {
        // 64-byte segments: LSN bytes [0, 64) are segment 0.
        let c = Central::new(1 << 16, HEADER_LEN as u64 + 64);
        assert_eq!(c.place(0, 16), Ok(Place::In(0)));
        assert_eq!(c.place(48, 16), Ok(Place::In(0)));
        assert_eq!(c.place(56, 16), Ok(Place::Straddle(64)));
        // After the end: opens segment 1 at its own offset.
        assert_eq!(c.place(72, 16), Ok(Place::In(1)));
        assert_eq!(c.starts[1].load(Ordering::Relaxed), 72);
        // Between segment 0's end and segment 1's start: dead.
        assert_eq!(c.place(64, 8), Ok(Place::Dead));
        // A late claim inside segment 0 is still placed there.
        assert_eq!(c.place(40, 8), Ok(Place::In(0)));
        assert_eq!(c.place(130, 8), Ok(Place::Straddle(136)));
        assert_eq!(c.place(200, 8), Ok(Place::In(2)));
    }

    #[test]
    fn sealed_blocks_are_aligned_and_decode() {
        for payload in 0..9usize {
            let mut block = vec![0u8; LEAD];
            let at = block.len();
            block.resize(at + RECORD_OVERHEAD + payload, 0);
            super::super::encode_in_place(&mut block[at..], RecordKind::Put, 1, 7, 3, |p| {
                p.fill(9)
            });
            let b = seal(&mut block, 7, 1, 5);
            assert_eq!(b.len() % ALIGN as usize, 0);
            let (txn, n) = format::decode_record(b).unwrap();
            assert_eq!((txn.kind, txn.table, txn.stamp, txn.key), (RecordKind::Txn, 1, 7, 5));
            let (put, _) = format::decode_record(&b[n..]).unwrap();
            assert_eq!((put.kind, put.payload.len()), (RecordKind::Put, payload));
        }
    }
}
