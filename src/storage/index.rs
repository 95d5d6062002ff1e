//! Primary indexes: `u64` key -> [`RowId`], ordered or hashed, from well-kept crates.
//!
//! * `Ordered` is `congee` (an adaptive radix tree with optimistic lock coupling): readers write no
//!   shared memory, writers lock single nodes, keys are exactly our 8-byte keys, and in our
//!   micro-benchmark it was the fastest ordered index for `u64` (see `benches/index.rs`).
//! * `Hash` is txlab's own pre-sized, one-cache-line-per-bucket hash table
//!   ([`crate::storage::hash_index`]): optimistic reads that write nothing, chain-locked writes;
//!   point operations only, so a scan of a hash table is refused with [`AbortReason::Unsupported`].
//!   It replaced `scc::HashIndex`, whose lookups touch several cache lines (see that module).
//!
//! The index is not generic over the protocol: every protocol is measured against the same index,
//! and the kind is a per-table choice dispatched by one `match` (no `dyn`).
//!
//! Reclamation of index nodes: congee defers frees through `crossbeam-epoch`, whose guard the
//! caller passes in ([`IndexGuard`]); the hash index frees nothing while it lives.
//!
//! [`AbortReason::Unsupported`]: crate::error::AbortReason::Unsupported

use crate::storage::hash_index::HashIndex;
use crate::storage::row_store::RowId;
use congee::Congee;
use serde::Serialize;

/// Guard that keeps index nodes read by the caller alive. A worker repins it per transaction.
pub type IndexGuard = crossbeam_epoch::Guard;

/// Pins the current thread for index access.
#[inline]
pub fn pin() -> IndexGuard {
    crossbeam_epoch::pin()
}

/// Which index a table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum IndexKind {
    /// Ordered (adaptive radix tree): point lookups and range scans.
    Ordered,
    /// Hash: point lookups only.
    Hash,
}

impl IndexKind {
    /// Approximate index memory per key, in bytes, for the load-size estimate.
    pub fn bytes_per_key(self) -> u64 {
        match self {
            // ART leaves with 8-byte values plus inner nodes; measured ~40 B/key at 10 M keys.
            IndexKind::Ordered => 48,
            // One 64-byte bucket per one to two keys.
            IndexKind::Hash => HashIndex::MAX_BYTES_PER_KEY,
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
    /// See module docs.
    Ordered(Congee<usize, usize>),
    /// See module docs.
    Hash(HashIndex),
}

impl Index {
    /// An empty index of `kind`, pre-sized for `expected` keys where the structure supports it.
    pub fn new(kind: IndexKind, expected: usize) -> Self {
        match kind {
            IndexKind::Ordered => Index::Ordered(Congee::default()),
            IndexKind::Hash => Index::Hash(HashIndex::new(expected)),
        }
    }

    /// The kind of this index.
    pub fn kind(&self) -> IndexKind {
        match self {
            Index::Ordered(_) => IndexKind::Ordered,
            Index::Hash(_) => IndexKind::Hash,
        }
    }

    /// Looks `key` up.
    #[inline]
    pub fn get(&self, key: u64, g: &IndexGuard) -> Option<RowId> {
        match self {
            Index::Ordered(t) => t.get(&(key as usize), g).map(|v| RowId(v as u64)),
            Index::Hash(h) => h.get(key),
        }
    }

    /// Inserts `key -> rid` unless `key` is present; returns the existing row id if it is.
    #[inline]
    pub fn insert_if_absent(&self, key: u64, rid: RowId, g: &IndexGuard) -> Result<(), RowId> {
        match self {
            Index::Ordered(t) => {
                let old = t
                    .compute_or_insert(key as usize, |old| old.unwrap_or(rid.0 as usize), g)
                    .expect("the default allocator does not report OOM");
                match old {
                    None => Ok(()),
                    Some(v) => Err(RowId(v as u64)),
                }
            }
            Index::Hash(h) => h.insert_if_absent(key, rid),
        }
    }

    /// Removes `key` if it still maps to `rid`. Returns whether it was removed.
    #[inline]
    pub fn remove_if(&self, key: u64, rid: RowId, g: &IndexGuard) -> bool {
        match self {
            Index::Ordered(t) => {
                let target = rid.0 as usize;
                matches!(
                    t.compute_if_present(
                        &(key as usize),
                        |v| if v == target { None } else { Some(v) },
                        g
                    ),
                    Some((old, None)) if old == target
                )
            }
            Index::Hash(h) => h.remove_if(key, rid),
        }
    }

    /// Collects up to `limit` entries with `lo <= key <= hi`, in key order, into `buf`.
    /// Returns `false` (and leaves `buf` empty) on a hash index, which cannot scan.
    #[inline]
    pub fn scan(&self, lo: u64, hi: u64, limit: usize, buf: &mut ScanBuf, g: &IndexGuard) -> bool {
        buf.len = 0;
        let Index::Ordered(t) = self else {
            return false;
        };
        if lo > hi || limit == 0 {
            return true;
        }
        if buf.raw.len() < limit {
            buf.raw.resize(limit, (0, 0));
        }
        // congee scans [start, end): an inclusive `hi` of u64::MAX needs a separate point get.
        let n = if hi < u64::MAX {
            t.range(&(lo as usize), &(hi as usize + 1), &mut buf.raw[..limit], g)
        } else if lo == u64::MAX {
            0
        } else {
            t.range(&(lo as usize), &usize::MAX, &mut buf.raw[..limit], g)
        };
        // Re-check bounds whatever the crate returns (see ECOSYSTEM.md on range scans).
        let mut len = 0;
        for i in 0..n {
            let (k, v) = buf.raw[i];
            if (k as u64) >= lo && (k as u64) <= hi {
                buf.raw[len] = (k, v);
                len += 1;
            }
        }
        if hi == u64::MAX && len < limit {
            if let Some(v) = t.get(&usize::MAX, g) {
                buf.raw[len] = (usize::MAX, v);
                len += 1;
            }
        }
        buf.len = len;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngExt, SeedableRng};
    use std::collections::BTreeMap;

    /// Random operations against a BTreeMap model; scans checked for order, bounds and limit.
    #[test]
    fn ordered_index_matches_a_btreemap_model() {
        let idx = Index::new(IndexKind::Ordered, 0);
        let mut model = BTreeMap::new();
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut buf = ScanBuf::default();
        let g = pin();
        let edge = [0u64, 1, u64::MAX, u64::MAX - 1];
        for step in 0..20_000u64 {
            let key = if step % 97 == 0 {
                edge[(step / 97 % 4) as usize]
            } else {
                rng.random_range(0..2_000u64)
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
                        lo.saturating_add(rng.random_range(0..300))
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
                    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(t);
                    for n in 0..20_000u64 {
                        let k = rng.random_range(0..64u64);
                        let rid = RowId((t << 32) | n);
                        if idx.insert_if_absent(k, rid, &g).is_ok() {
                            for _ in 0..3 {
                                assert_eq!(idx.get(k, &g), Some(rid), "key {k} lost its entry");
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
    fn hash_index_keeps_owned_keys_under_concurrency() {
        ownership(IndexKind::Hash);
    }
}
