//! Primary indexes: `u64` key -> [`RowId`], ordered, dense or hashed.
//!
//! * `Ordered` is `congee` (an adaptive radix tree with optimistic lock coupling) behind a scan
//!   guard ([`ArtIndex`]). congee's point operations are sound under concurrency, but its range
//!   scans miss present keys while keys sharing their nodes are inserted or removed
//!   (`concurrent_tests::*_keeps_owned_keys_under_concurrency` catches that in a fraction of a
//!   second; the crate's issue #5 acknowledges that its range scan is unsound), and a scan that
//!   misses a committed row breaks serializability without any validation noticing. So a scan
//!   runs only while no insert or remove is in flight on that index (writers count themselves in
//!   and out; a scan that overlapped one retries, and after a few tries holds new writers off).
//!   That costs writers two shared counter updates each, so it suits sparse keys with few
//!   inserts (TPC-C's customer-name and order-by-customer indexes); dense keys belong in `Dense`.
//!   The sound alternatives were slower when tried: `scc::TreeIndex` range scans took tens of
//!   microseconds on TPC-C's name index (3.8.8 walks the leaf list backwards from the start
//!   key), and `crossbeam-skiplist` slowed Payment and NewOrder down (`txlab run -w tpcc`
//!   against either shows it).
//! * `Hash` is txlab's own pre-sized, one-cache-line-per-bucket hash table
//!   ([`crate::storage::hash_index`]): optimistic reads that write nothing, chain-locked writes;
//!   point operations only, so a scan of a hash table is refused with [`AbortReason::Unsupported`].
//!   It replaced `scc::HashIndex`, whose lookups touch several cache lines (see that module).
//! * `Dense` is txlab's own ordered index for keys that fill runs of 512 neighbouring keys
//!   ([`crate::storage::dense_index`]): a key's entry sits at a fixed address, so an insert is
//!   one CAS; scans and point operations as `Ordered`. TPC-C's orders, new orders, order lines
//!   and history rows use it.
//!
//! The index is not generic over the protocol: every protocol is measured against the same index,
//! and the kind is a per-table choice dispatched by one `match` (no `dyn`).
//!
//! Reclamation of index memory goes through `crossbeam-epoch`, whose guard the caller passes in
//! ([`IndexGuard`]): congee's replaced nodes and the dense index's replaced directory arrays;
//! the hash index frees nothing while it lives.
//!
//! [`AbortReason::Unsupported`]: crate::error::AbortReason::Unsupported

use crate::storage::dense_index::DenseIndex;
use crate::storage::hash_index::HashIndex;
use crate::storage::row_store::RowId;
use congee::Congee;
use crossbeam_utils::CachePadded;
use serde::Serialize;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Guard that keeps index nodes read by the caller alive. A worker repins it per transaction.
pub type IndexGuard = crossbeam_epoch::Guard;

/// Pins the current thread for index access.
#[inline]
pub fn pin() -> IndexGuard {
    crossbeam_epoch::pin()
}

/// Which index a table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum IndexKind {
    /// Ordered (adaptive radix tree): point lookups and range scans, any keys; inserts and
    /// removes are serialised against scans, so keep it for tables with few of them.
    Ordered,
    /// Hash: point lookups only.
    Hash,
    /// Dense ordered (leaves of 512 consecutive keys): point lookups and range scans, for keys
    /// that come in runs (4 KiB per leaf touched, so sparse keys waste memory).
    Dense,
}

impl IndexKind {
    /// Approximate index memory per key, in bytes, for the load-size estimate.
    pub fn bytes_per_key(self) -> u64 {
        match self {
            // ART leaves with 8-byte values plus inner nodes; measured ~40 B/key at 10 M keys.
            IndexKind::Ordered => 48,
            // One 64-byte bucket per one to two keys.
            IndexKind::Hash => HashIndex::MAX_BYTES_PER_KEY,
            // Full leaves: 8 B/key; TPC-C's order lines fill 10 of every 16 slots.
            IndexKind::Dense => 2 * DenseIndex::BYTES_PER_KEY,
        }
    }
}

/// Reusable buffer for range scans (so a scan allocates nothing once warmed up).
#[derive(Default)]
pub struct ScanBuf {
    raw: Vec<(usize, usize)>,
    len: usize,
}

impl ScanBuf {
    /// The `(key, row)` pairs of the last scan, in key order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (u64, RowId)> + '_ {
        self.raw[..self.len].iter().map(|&(k, v)| (k as u64, RowId(v as u64)))
    }
    /// Number of entries of the last scan.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the last scan found nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A table's primary index.
pub enum Index {
    /// See module docs (boxed: its padded counters would make every index as large).
    Ordered(Box<ArtIndex>),
    /// See module docs.
    Hash(HashIndex),
    /// See module docs.
    Dense(DenseIndex),
}

impl Index {
    /// An empty index of `kind`, pre-sized for `expected` keys where the structure supports it.
    pub fn new(kind: IndexKind, expected: usize) -> Self {
        match kind {
            IndexKind::Ordered => Index::Ordered(Box::default()),
            IndexKind::Hash => Index::Hash(HashIndex::new(expected)),
            IndexKind::Dense => Index::Dense(DenseIndex::default()),
        }
    }

    /// The kind of this index.
    pub fn kind(&self) -> IndexKind {
        match self {
            Index::Ordered(_) => IndexKind::Ordered,
            Index::Hash(_) => IndexKind::Hash,
            Index::Dense(_) => IndexKind::Dense,
        }
    }

    /// Looks `key` up.
    #[inline]
    pub fn get(&self, key: u64, g: &IndexGuard) -> Option<RowId> {
        match self {
            Index::Ordered(t) => t.tree.get(&(key as usize), g).map(|v| RowId(v as u64)),
            Index::Hash(h) => h.get(key),
            Index::Dense(d) => d.get(key, g),
        }
    }

    /// Hints the CPU to load the line a lookup of `key` ends at, where that takes no miss to
    /// find (the dense index's slot, the hash index's first bucket; nothing for the ordered
    /// index, whose path is a chain of dependent loads), so that a `get` issued a little later
    /// hits the cache.
    #[inline]
    pub fn prefetch(&self, key: u64, g: &IndexGuard) {
        match self {
            Index::Ordered(_) => {}
            Index::Hash(h) => h.prefetch(key),
            Index::Dense(d) => d.prefetch(key, g),
        }
    }

    /// Inserts `key -> rid` unless `key` is present; returns the existing row id if it is.
    #[inline]
    pub fn insert_if_absent(&self, key: u64, rid: RowId, g: &IndexGuard) -> Result<(), RowId> {
        match self {
            Index::Ordered(t) => t.write(|| {
                let old = t
                    .tree
                    .compute_or_insert(key as usize, |old| old.unwrap_or(rid.0 as usize), g)
                    .expect("the default allocator does not report OOM");
                match old {
                    None => Ok(()),
                    Some(v) => Err(RowId(v as u64)),
                }
            }),
            Index::Hash(h) => h.insert_if_absent(key, rid),
            Index::Dense(d) => d.insert_if_absent(key, rid, g),
        }
    }

    /// Faults in memory the index will need for its next inserts, where it can know it ahead
    /// (the dense index's next chunk of leaves); returns the bytes faulted in. See
    /// [`crate::storage::Prefaulter`].
    pub fn prefault(&self) -> usize {
        match self {
            Index::Dense(d) => d.prefault(),
            Index::Ordered(_) | Index::Hash(_) => 0,
        }
    }

    /// Removes `key` if it still maps to `rid`. Returns whether it was removed.
    #[inline]
    pub fn remove_if(&self, key: u64, rid: RowId, g: &IndexGuard) -> bool {
        match self {
            Index::Ordered(t) => t.write(|| {
                let target = rid.0 as usize;
                matches!(
                    t.tree.compute_if_present(
                        &(key as usize),
                        |v| if v == target { None } else { Some(v) },
                        g
                    ),
                    Some((old, None)) if old == target
                )
            }),
            Index::Hash(h) => h.remove_if(key, rid),
            Index::Dense(d) => d.remove_if(key, rid, g),
        }
    }

    /// Calls `f` on the entries of part `part` of `parts` (a split for parallel readers:
    /// ranges of a hash index's chains; an ordered or dense index is one part, read in key
    /// order by scans of 1024 entries, and its other parts are empty). Entries inserted or
    /// removed meanwhile may or may not be seen. `g` is repinned between batches, so a long
    /// walk does not hold back reclamation; the caller must keep whatever the entries point to
    /// alive across that (an epoch slot published for each batch: `on_batch` is called before
    /// each one).
    pub fn for_each_part(
        &self,
        part: usize,
        parts: usize,
        g: &mut IndexGuard,
        mut on_batch: impl FnMut(),
        mut f: impl FnMut(u64, RowId),
    ) {
        const BATCH: usize = 1024;
        match self {
            Index::Hash(h) => {
                let n = h.chains();
                let (lo, hi) = (n * part / parts, n * (part + 1) / parts);
                let mut buf = Vec::new();
                let mut c = lo;
                while c < hi {
                    let end = (c + BATCH).min(hi);
                    on_batch();
                    g.repin();
                    h.for_each_in(c..end, &mut buf, &mut f);
                    c = end;
                }
            }
            Index::Ordered(_) | Index::Dense(_) => {
                if part != 0 {
                    return;
                }
                let mut buf = ScanBuf::default();
                let mut from = 0u64;
                loop {
                    on_batch();
                    g.repin();
                    self.scan(from, u64::MAX, BATCH, &mut buf, g);
                    let mut last = None;
                    for (k, rid) in buf.entries() {
                        f(k, rid);
                        last = Some(k);
                    }
                    match last {
                        Some(k) if buf.len() == BATCH && k < u64::MAX => from = k + 1,
                        _ => return,
                    }
                }
            }
        }
    }

    /// Collects up to `limit` entries with `lo <= key <= hi`, in key order, into `buf`.
    /// Returns `false` (and leaves `buf` empty) on a hash index, which cannot scan.
    ///
    /// Every entry present throughout the call is collected (unless `limit` stops the scan
    /// first); entries inserted or removed meanwhile may or may not be.
    #[inline]
    pub fn scan(&self, lo: u64, hi: u64, limit: usize, buf: &mut ScanBuf, g: &IndexGuard) -> bool {
        buf.len = 0;
        if lo > hi || limit == 0 {
            return !matches!(self, Index::Hash(_));
        }
        match self {
            Index::Ordered(t) => {
                if buf.raw.len() < limit {
                    buf.raw.resize(limit, (0, 0));
                }
                buf.len = t.scan(lo, hi, &mut buf.raw[..limit], g);
                true
            }
            Index::Hash(_) => false,
            Index::Dense(d) => {
                if buf.raw.len() < limit {
                    buf.raw.resize(limit, (0, 0));
                }
                buf.len = d.scan(lo, hi, &mut buf.raw[..limit], g);
                true
            }
        }
    }
}

/// congee with scans kept apart from inserts and removes (see the module docs).
#[derive(Default)]
pub struct ArtIndex {
    tree: Congee<usize, usize>,
    /// Inserts and removes begun.
    started: CachePadded<AtomicU64>,
    /// Inserts and removes finished.
    finished: CachePadded<AtomicU64>,
    /// Scans that failed to find a quiet moment a few times; new writers wait while non-zero.
    starving: CachePadded<AtomicU64>,
}

impl ArtIndex {
    /// Tries a scan gets before it holds new writers off.
    const PATIENCE: u32 = 8;

    #[inline]
    fn write<R>(&self, op: impl FnOnce() -> R) -> R {
        while self.starving.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        let r = op();
        self.finished.fetch_add(1, Ordering::SeqCst);
        crate::util::shared_writes::note_n(crate::util::shared_writes::Site::Index, 2);
        r
    }

    /// congee's scan, run while no write is in flight: `finished` read before `started` and
    /// equal means no writer was between the two at the second read; `started` unchanged after
    /// the scan means none began during it. (A writer that passed the `starving` check before a
    /// scan raised it only makes that attempt retry.)
    fn scan(&self, lo: u64, hi: u64, out: &mut [(usize, usize)], g: &IndexGuard) -> usize {
        let mut tries = 0;
        let n = loop {
            let finished = self.finished.load(Ordering::SeqCst);
            let started = self.started.load(Ordering::SeqCst);
            if started == finished {
                let n = self.raw_scan(lo, hi, out, g);
                // The tree reads above happen before the re-check.
                fence(Ordering::SeqCst);
                if self.started.load(Ordering::SeqCst) == started {
                    break n;
                }
            }
            tries += 1;
            if tries == Self::PATIENCE {
                self.starving.fetch_add(1, Ordering::SeqCst);
            }
            std::hint::spin_loop();
        };
        if tries >= Self::PATIENCE {
            self.starving.fetch_sub(1, Ordering::SeqCst);
        }
        n
    }

    fn raw_scan(&self, lo: u64, hi: u64, out: &mut [(usize, usize)], g: &IndexGuard) -> usize {
        let t = &self.tree;
        // congee scans [start, end): an inclusive `hi` of u64::MAX needs a separate point get.
        let n = if hi < u64::MAX {
            t.range(&(lo as usize), &(hi as usize + 1), out, g)
        } else if lo == u64::MAX {
            0
        } else {
            t.range(&(lo as usize), &usize::MAX, out, g)
        };
        // Re-check bounds whatever the crate returns (see ECOSYSTEM.md on range scans).
        let mut len = 0;
        for i in 0..n {
            let (k, v) = out[i];
            if (k as u64) >= lo && (k as u64) <= hi {
                out[len] = (k, v);
                len += 1;
            }
        }
        if hi == u64::MAX && len < out.len() {
            if let Some(v) = t.get(&usize::MAX, g) {
                out[len] = (usize::MAX, v);
                len += 1;
            }
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngExt, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn ordered_index_matches_a_btreemap_model() {
        matches_a_btreemap_model(IndexKind::Ordered, 2_000);
    }

    #[test]
    fn dense_index_matches_a_btreemap_model() {
        // Keys spread over several leaves and directories (2^18 keys each) as well as packed.
        matches_a_btreemap_model(IndexKind::Dense, 2_000);
        matches_a_btreemap_model(IndexKind::Dense, 1 << 20);
    }

    /// Random operations against a BTreeMap model; scans checked for order, bounds and limit.
    fn matches_a_btreemap_model(kind: IndexKind, span: u64) {
        let idx = Index::new(kind, 0);
        let mut model = BTreeMap::new();
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut buf = ScanBuf::default();
        let g = pin();
        let edge = [0u64, 1, u64::MAX, u64::MAX - 1];
        for step in 0..20_000u64 {
            let key = if step % 97 == 0 {
                edge[(step / 97 % 4) as usize]
            } else {
                rng.random_range(0..span)
            };
            match rng.next_u32() % 4 {
                0 | 1 => {
                    let r = idx.insert_if_absent(key, RowId(step), &g);
                    match model.get(&key) {
                        Some(&old) => assert_eq!(r, Err(RowId(old))),
                        None => {
                            assert_eq!(r, Ok(()));
                            model.insert(key, step);
                        }
                    }
                }
                2 => {
                    let expect = model.get(&key).copied();
                    let target = if step % 2 == 0 { expect.unwrap_or(1) } else { 12345678 };
                    let removed = idx.remove_if(key, RowId(target), &g);
                    assert_eq!(removed, expect == Some(target));
                    if removed {
                        model.remove(&key);
                    }
                }
                _ => {
                    let lo = key;
                    let hi = if step % 5 == 0 {
                        u64::MAX
                    } else {
                        lo.saturating_add(rng.random_range(0..span / 5))
                    };
                    let limit = rng.random_range(1..50usize);
                    assert!(idx.scan(lo, hi, limit, &mut buf, &g));
                    let got: Vec<_> = buf.entries().map(|(k, r)| (k, r.0)).collect();
                    let want: Vec<_> =
                        model.range(lo..=hi).take(limit).map(|(k, v)| (*k, *v)).collect();
                    assert_eq!(got, want, "scan [{lo}, {hi}] limit {limit}");
                }
            }
            assert_eq!(idx.get(key, &g).map(|r| r.0), model.get(&key).copied());
        }
    }

    #[test]
    fn hash_index_point_operations_and_refused_scan() {
        let idx = Index::new(IndexKind::Hash, 16);
        let g = pin();
        assert_eq!(idx.insert_if_absent(5, RowId(1), &g), Ok(()));
        assert_eq!(idx.insert_if_absent(5, RowId(2), &g), Err(RowId(1)));
        assert_eq!(idx.get(5, &g), Some(RowId(1)));
        assert!(!idx.remove_if(5, RowId(2), &g));
        assert!(idx.remove_if(5, RowId(1), &g));
        assert_eq!(idx.get(5, &g), None);
        let mut buf = ScanBuf::default();
        assert!(!idx.scan(0, 10, 5, &mut buf, &g));
    }
}

#[cfg(test)]
mod concurrent_tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// Keys are owned by whoever inserted them until they remove them: while owned, a key must
    /// map to the owner's row for everybody, and nobody else's insert may succeed.
    fn ownership(kind: IndexKind) {
        let idx = Index::new(kind, 64);
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let idx = &idx;
                s.spawn(move || {
                    let g = pin();
                    let mut buf = ScanBuf::default();
                    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(t);
                    for n in 0..20_000u64 {
                        let k = rng.random_range(0..64u64);
                        let rid = RowId((t << 32) | n);
                        if idx.insert_if_absent(k, rid, &g).is_ok() {
                            for _ in 0..3 {
                                assert_eq!(idx.get(k, &g), Some(rid), "key {k} lost its entry");
                                // Scans see it too (the dense index's occupancy bits race
                                // with other threads emptying and refilling the same leaf).
                                if kind != IndexKind::Hash {
                                    assert!(idx.scan(k, k, 1, &mut buf, &g));
                                    let got: Vec<_> = buf.entries().collect();
                                    assert_eq!(got, [(k, rid)], "a scan missed key {k}");
                                }
                                std::thread::yield_now();
                            }
                            assert!(idx.remove_if(k, rid, &g), "key {k}: our entry was replaced");
                        } else if let Some(other) = idx.get(k, &g) {
                            assert_ne!(other.0 >> 32, t, "key {k} maps to a row we removed");
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn ordered_index_keeps_owned_keys_under_concurrency() {
        ownership(IndexKind::Ordered);
    }

    #[test]
    fn dense_index_keeps_owned_keys_under_concurrency() {
        ownership(IndexKind::Dense);
    }

    #[test]
    fn hash_index_keeps_owned_keys_under_concurrency() {
        ownership(IndexKind::Hash);
    }
}
