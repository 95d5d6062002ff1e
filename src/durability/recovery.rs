//! Recovery: rebuilds a database from its log directory.
//!
//! 1. The durable-point marker gives the durable log epoch `D` and, per stream, how many bytes
//!    of which segment were synced when `D` was published.
//! 2. Every stream is read in parallel, segment by segment (their numbers must have no gaps; the
//!    central log is stream 0, whose SKIP records, closing a segment, are passed over).
//!    A bad record before the stream's synced end is corruption: an error naming the file and
//!    offset, and nothing is changed. A bad record after it is the torn tail of an unsynced
//!    write: it and everything after it in that stream is dropped and reported.
//! 3. Complete transactions of a log epoch up to `D` are replayed: for every key, the image (or
//!    deletion) with the largest commit stamp wins, so a deletion is never undone by an older
//!    image, whatever order the streams are read in (Cicada §3.7's rule, by construction); the
//!    COLS records of updates newer than that image (the columns they wrote) are then applied
//!    to it in stamp order. An update's COLS record always has an image under it: the write
//!    that created the row logged a whole one, and a checkpoint holds whole rows.
//!    Keys are split among threads by hash; each inserts its winners with a bulk loader, which
//!    rebuilds the indexes; the phantom buckets start fresh, as after loading.
//!
//! Recovered rows are installed as loaded rows: below every stamp the protocol will give, so
//! that the database continues as after a load (a log continued from a recovered state must
//! start from a checkpoint of it, which holds no older stamps: `Database::open` does so, see
//! [`super::generation`]).
//!
//! The files are only read: recovery never repairs, truncates or deletes anything (an open
//! drops the torn tail with the old generation, after its checkpoint made it unnecessary).

use super::checkpoint;
use super::format::{self, Bad, RecordKind, SegmentHeader, HEADER_LEN};
use super::log::{segment_name, LOG_SUBDIR, MARKER};
use super::{Durable, Install};
use crate::error::Error;
use crate::storage::projection::Projection;
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a recovery found and did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecoveryReport {
    /// The durable log epoch: transactions up to it were replayed.
    pub durable_epoch: u64,
    /// Transactions replayed.
    pub transactions: u64,
    /// Complete transactions found beyond the durable point (never acknowledged), not replayed.
    pub beyond_durable: u64,
    /// Write records replayed from the log (before picking each key's newest).
    pub records: u64,
    /// Of those, records of the columns an update wrote (applied on top of the key's image).
    pub column_records: u64,
    /// Rows read from the checkpoint.
    pub checkpoint_rows: u64,
    /// Rows present afterwards.
    pub rows: u64,
    /// Keys whose newest record is a deletion.
    pub deleted: u64,
    /// Bytes of log read.
    pub bytes: u64,
    /// Segment files read.
    pub segments: u64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Torn tails dropped: one line each, naming the file and offset.
    pub torn: Vec<String>,
}

impl RecoveryReport {
    /// Log bytes replayed per second, in GB/s.
    pub fn gb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e9
        } else {
            0.0
        }
    }
}

/// A write to replay: where its image lies in the segment buffers.
#[derive(Clone, Copy)]
struct Entry {
    table: u32,
    key: u64,
    stamp: u64,
    /// Index of the segment buffer (`u32::MAX`: a deletion).
    buf: u32,
    /// Payload offset in that buffer.
    off: u32,
    /// A COLS record (the written columns: mask, then packed words; `len` payload bytes), not
    /// a whole row image.
    cols: bool,
    len: u32,
}

/// One stream's parse.
struct Parsed {
    entries: Vec<Entry>,
    /// The segment buffers entries point into; the first has global index `base`.
    bufs: Vec<Vec<u8>>,
    base: u32,
    /// From a checkpoint file, not a log stream.
    checkpoint: bool,
    txns: u64,
    beyond: u64,
    bytes: u64,
    torn: Vec<String>,
}

/// The segments of each stream from the first one recovery needs (`first[stream]`, 0 beyond
/// its end), checked for gaps; older ones (left by a crash after a checkpoint was published,
/// before they were deleted) are skipped.
fn list_segments(dir: &Path, first: &[u32]) -> Result<FxHashMap<u32, Vec<(u32, PathBuf)>>, Error> {
    let logdir = dir.join(LOG_SUBDIR);
    let rd = std::fs::read_dir(&logdir).map_err(|e| {
        Error::Durability(format!("{}: {e} (not a txlab log directory?)", logdir.display()))
    })?;
    let mut streams: FxHashMap<u32, Vec<(u32, PathBuf)>> = FxHashMap::default();
    for e in rd {
        let e = e.map_err(|e| Error::Durability(format!("{}: {e}", logdir.display())))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let parsed = name
            .strip_prefix('w')
            .and_then(|r| r.strip_suffix(".log"))
            .and_then(|r| r.split_once('-'))
            .and_then(|(s, q)| Some((s.parse::<u32>().ok()?, q.parse::<u32>().ok()?)));
        let Some((stream, seq)) = parsed.filter(|&(s, q)| segment_name(s, q) == name) else {
            return Err(Error::Durability(format!(
                "{}: not a log segment (expected names like {})",
                e.path().display(),
                segment_name(0, 0)
            )));
        };
        if seq >= first.get(stream as usize).copied().unwrap_or(0) {
            streams.entry(stream).or_default().push((seq, e.path()));
        }
    }
    for (stream, segs) in streams.iter_mut() {
        segs.sort_unstable_by_key(|s| s.0);
        let from = first.get(*stream as usize).copied().unwrap_or(0);
        for (i, &(seq, _)) in segs.iter().enumerate() {
            let want = from + i as u32;
            if seq != want {
                return Err(Error::Durability(format!(
                    "{}: segment {} is missing (stream {stream} has segments up to {})",
                    logdir.display(),
                    segment_name(*stream, want),
                    segs.last().map_or(0, |s| s.0)
                )));
            }
        }
    }
    Ok(streams)
}

/// Reads the marker: the durable epoch and each stream's synced end.
fn read_marker(dir: &Path) -> Result<format::marker::Marker, Error> {
    let path = dir.join(MARKER);
    let bytes = std::fs::read(&path).map_err(|e| {
        Error::Durability(format!("{}: {e} (not a txlab log directory?)", path.display()))
    })?;
    format::marker::decode(&bytes).ok_or_else(|| {
        Error::Durability(format!(
            "{}: neither slot of the durable marker is valid",
            path.display()
        ))
    })
}

/// The synced end the marker gives stream `stream` must lie in one of its segments `segs`.
fn check_synced_end(stream: u32, segs: &[(u32, PathBuf)], end: (u32, u64)) -> Result<(), Error> {
    let first = segs.first().map_or(0, |s| s.0);
    if end != format::marker::NONE && (end.0 < first || (end.0 - first) as usize >= segs.len()) {
        let path = segs.first().map_or_else(|| PathBuf::from("log"), |s| s.1.clone());
        return Err(Error::Durability(format!(
            "{}: segment {} of stream {stream} is missing: the durable marker says {} bytes of it were synced",
            path.parent().unwrap_or(&path).display(),
            segment_name(stream, end.0),
            end.1
        )));
    }
    Ok(())
}

/// Parses segments `segs` of stream `stream`, in order (recovery passes one at a time, so
/// that segments are parsed in parallel: they hold whole transactions, and a record is
/// checked strictly or leniently by where it lies against the stream's synced `end` alone).
#[allow(clippy::too_many_arguments)]
fn parse_stream(
    stream: u32,
    segs: &[(u32, PathBuf)],
    end: (u32, u64),
    after: u64,
    durable: u64,
    fingerprint: u64,
    row_sizes: &[usize],
    projections: &[&Projection],
    buf_base: u32,
) -> Result<Parsed, Error> {
    let mut out = Parsed {
        entries: Vec::new(),
        bufs: Vec::new(),
        base: buf_base,
        checkpoint: false,
        txns: 0,
        beyond: 0,
        bytes: 0,
        torn: Vec::new(),
    };
    let synced = |seq: u32, off: u64| end != format::marker::NONE && (seq, off) < end;
    let mut pending: Vec<Entry> = Vec::new();
    'segments: for (seq, path) in segs {
        let seq = *seq;
        let buf = std::fs::read(path)
            .map_err(|e| Error::Durability(format!("{}: {e}", path.display())))?;
        out.bytes += buf.len() as u64;
        let bad = |off: usize, what: &str| {
            Error::Durability(format!("{}: offset {off}: {what}", path.display()))
        };
        let header = match SegmentHeader::decode(&buf, fingerprint) {
            Ok(h) => h,
            // A segment created after the last synced byte whose header the crash cut.
            Err(m)
                if !synced(seq, 0)
                    && (buf.len() < HEADER_LEN || m == "segment header checksum mismatch") =>
            {
                out.torn.push(format!(
                    "{}: offset 0: torn segment header after the last synced byte, {} bytes dropped",
                    path.display(),
                    buf.len()
                ));
                out.bufs.push(buf);
                continue;
            }
            Err(m) => return Err(bad(0, &m)),
        };
        let log = matches!(header.kind, format::FileKind::Log | format::FileKind::CentralLog);
        if !log || header.stream != stream || header.seq != seq {
            return Err(bad(
                0,
                "header names another stream, segment or file kind than the file name",
            ));
        }
        if end.0 == seq && (buf.len() as u64) < end.1 {
            return Err(bad(
                buf.len(),
                &format!(
                    "the file ends here, but the durable marker says {} bytes were synced",
                    end.1
                ),
            ));
        }
        let buf_idx = buf_base + out.bufs.len() as u32;
        let mut off = HEADER_LEN;
        // The open transaction: its epoch, stamp and writes still to come.
        let mut open: Option<(u64, u64, u32)> = None;
        let mut txn_start = off;
        while off < buf.len() {
            let rec = match format::decode_record(&buf[off..]) {
                Ok((r, n)) => Some((r, n)),
                Err(Bad::Zero) | Err(Bad::Truncated) | Err(Bad::Corrupt(_))
                    if !synced(seq, off as u64) =>
                {
                    None
                }
                Err(Bad::Zero) => {
                    return Err(bad(off, "zero bytes inside the synced part of the log"))
                }
                Err(Bad::Truncated) => {
                    return Err(bad(off, "truncated record inside the synced part of the log"))
                }
                Err(Bad::Corrupt(what)) => {
                    return Err(bad(off, &format!("corrupt record ({what})")))
                }
            };
            let Some((r, n)) = rec else {
                out.torn.push(format!(
                    "{}: offset {off}: torn tail after the last synced byte, {} bytes dropped",
                    path.display(),
                    buf.len() - off
                ));
                pending.clear();
                out.bufs.push(buf);
                break 'segments;
            };
            match (r.kind, open) {
                // The rest of a central log segment that a block did not fit in.
                (RecordKind::Skip, None) => {}
                (RecordKind::Txn, None) => {
                    txn_start = off;
                    open = Some((r.key, r.stamp, r.table));
                    pending.clear();
                }
                (
                    RecordKind::Put | RecordKind::Cols | RecordKind::Delete,
                    Some((epoch, stamp, left)),
                ) if left > 0 => {
                    if r.stamp != stamp {
                        return Err(bad(off, "a write's stamp differs from its transaction's"));
                    }
                    let size = row_sizes.get(r.table as usize).copied().ok_or_else(|| {
                        bad(
                            off,
                            &format!(
                                "record for table {}, the schema has {}",
                                r.table,
                                row_sizes.len()
                            ),
                        )
                    })?;
                    let put = r.kind == RecordKind::Put;
                    let cols = r.kind == RecordKind::Cols;
                    if cols {
                        let mask = u64::from_le_bytes(r.payload[..8].try_into().expect("8"));
                        let want = projections[r.table as usize].packed_len(mask, size);
                        if want + 8 != r.payload.len() {
                            return Err(bad(
                                off,
                                &format!(
                                    "written columns {mask:#x} of table {} take {want} bytes, the record holds {}",
                                    r.table,
                                    r.payload.len() - 8
                                ),
                            ));
                        }
                    }
                    if put && r.payload.len() != size {
                        return Err(bad(
                            off,
                            &format!(
                                "row image of {} bytes, table {} has {size}-byte rows",
                                r.payload.len(),
                                r.table
                            ),
                        ));
                    }
                    pending.push(Entry {
                        table: r.table,
                        key: r.key,
                        stamp,
                        buf: if put || cols { buf_idx } else { u32::MAX },
                        off: (off + format::PAYLOAD_AT) as u32,
                        cols,
                        len: r.payload.len() as u32,
                    });
                    open = Some((epoch, stamp, left - 1));
                }
                _ => {
                    return Err(bad(
                        off,
                        "record out of place (a transaction's records are not contiguous)",
                    ))
                }
            }
            off += n;
            if let Some((epoch, _, 0)) = open {
                open = None;
                if epoch <= after {
                    // In the checkpoint already.
                    pending.clear();
                } else if epoch <= durable {
                    out.txns += 1;
                    out.entries.append(&mut pending);
                } else {
                    out.beyond += 1;
                    pending.clear();
                }
            }
        }
        if open.is_some() {
            // A transaction cut by the end of its segment: segments hold whole transactions.
            if synced(seq, txn_start as u64) {
                return Err(bad(txn_start, "transaction cut by the end of its segment"));
            }
            out.torn.push(format!(
                "{}: offset {txn_start}: incomplete transaction at the end, dropped",
                path.display()
            ));
            out.bufs.push(buf);
            break;
        }
        out.bufs.push(buf);
    }
    Ok(out)
}

/// Reads checkpoint file `path`, which the manifest says is `(name, bytes, rows)`: every byte
/// must be intact (a checkpoint is published only once complete and synced).
fn parse_checkpoint(
    path: &Path,
    listed: &(String, u64, u64),
    start_epoch: u64,
    fingerprint: u64,
    row_sizes: &[usize],
    buf_idx: u32,
) -> Result<Parsed, Error> {
    let bad = |off: usize, what: &str| {
        Error::Durability(format!("{}: offset {off}: {what}", path.display()))
    };
    let buf =
        std::fs::read(path).map_err(|e| Error::Durability(format!("{}: {e}", path.display())))?;
    if buf.len() as u64 != listed.1 {
        return Err(bad(
            buf.len(),
            &format!("the checkpoint's manifest says the file has {} bytes", listed.1),
        ));
    }
    let header = SegmentHeader::decode(&buf, fingerprint).map_err(|m| bad(0, &m))?;
    if header.kind != format::FileKind::Checkpoint || header.aux != start_epoch {
        return Err(bad(0, "not a file of this checkpoint"));
    }
    let mut entries = Vec::new();
    let mut off = HEADER_LEN;
    while off < buf.len() {
        let (r, n) = format::decode_record(&buf[off..]).map_err(|b| match b {
            Bad::Corrupt(what) => bad(off, &format!("corrupt record ({what})")),
            Bad::Truncated | Bad::Zero => bad(off, "truncated record"),
        })?;
        let size = row_sizes.get(r.table as usize).copied();
        if r.kind != RecordKind::Put || size != Some(r.payload.len()) {
            return Err(bad(off, "not a row image of this schema"));
        }
        entries.push(Entry {
            table: r.table,
            key: r.key,
            stamp: r.stamp,
            buf: buf_idx,
            off: (off + format::PAYLOAD_AT) as u32,
            cols: false,
            len: r.payload.len() as u32,
        });
        off += n;
    }
    if entries.len() as u64 != listed.2 {
        return Err(bad(
            off,
            &format!("{} rows, the checkpoint's manifest says {}", entries.len(), listed.2),
        ));
    }
    Ok(Parsed {
        entries,
        bufs: vec![buf],
        base: buf_idx,
        checkpoint: true,
        txns: 0,
        beyond: 0,
        bytes: listed.1,
        torn: Vec::new(),
    })
}

/// Replays the log in `dir` (its current generation, see [`super::generation`]) into `db`,
/// whose tables must be empty (freshly created with the schema the log was written for). See
/// the module docs.
pub fn recover<D: Durable>(db: &D, dir: &Path) -> Result<RecoveryReport, Error> {
    let start = Instant::now();
    let dir = &super::generation::current(dir)?;
    let specs: Vec<_> = db.storage().tables().iter().map(|t| t.spec.clone()).collect();
    let fingerprint = format::fingerprint(&specs);
    let row_sizes: Vec<usize> = specs.iter().map(|s| s.row_size).collect();
    let projections: Vec<&Projection> =
        db.storage().tables().iter().map(|t| &t.projection).collect();
    let marker = read_marker(dir)?;
    let manifest = checkpoint::current(dir)?;
    if let Some(m) = &manifest {
        if m.end_epoch > marker.durable {
            return Err(Error::Durability(format!(
                "{}: checkpoint {} was published at log epoch {}, but the log is durable only up to {}",
                dir.join(checkpoint::CHECKPOINT_SUBDIR).join(checkpoint::CURRENT).display(),
                m.name,
                m.end_epoch,
                marker.durable
            )));
        }
    }
    let first: Vec<u32> = manifest.as_ref().map(|m| m.first_segments.clone()).unwrap_or_default();
    let after = manifest.as_ref().map_or(0, |m| m.start_epoch);
    let streams = list_segments(dir, &first)?;
    for (i, &end) in marker.ends.iter().enumerate() {
        if end != format::marker::NONE && !streams.contains_key(&(i as u32)) {
            return Err(Error::Durability(format!(
                "{}: stream {i} has no segments, but the durable marker says {} bytes of its segment {} were synced",
                dir.join(LOG_SUBDIR).display(),
                end.1,
                end.0
            )));
        }
    }
    let mut order: Vec<u32> = streams.keys().copied().collect();
    order.sort_unstable();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Parse the segments in parallel, a few per thread (a central log has one stream); buffer
    // indexes are global.
    let mut base = 0u32;
    let mut jobs = Vec::new();
    for &s in &order {
        let segs = &streams[&s];
        let end = marker.ends.get(s as usize).copied().unwrap_or(format::marker::NONE);
        check_synced_end(s, segs, end)?;
        for k in 0..segs.len() {
            jobs.push((s, k, base));
            base += 1;
        }
    }
    let parsed: Vec<Result<Parsed, Error>> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<(u32, usize, u32)>> =
            (0..threads).map(|t| jobs.iter().copied().skip(t).step_by(threads).collect()).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let (streams, marker, row_sizes, projections) =
                    (&streams, &marker, &row_sizes, &projections);
                scope.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|(s, k, base)| {
                            let end = marker
                                .ends
                                .get(s as usize)
                                .copied()
                                .unwrap_or(format::marker::NONE);
                            parse_stream(
                                s,
                                &streams[&s][k..k + 1],
                                end,
                                after,
                                marker.durable,
                                fingerprint,
                                row_sizes,
                                projections,
                                base,
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a recovery thread panicked")).collect()
    });
    let mut report = RecoveryReport { durable_epoch: marker.durable, ..Default::default() };
    let mut all = Vec::with_capacity(parsed.len());
    for p in parsed {
        all.push(p?);
    }
    if let Some(m) = &manifest {
        let cdir = dir.join(checkpoint::CHECKPOINT_SUBDIR).join(&m.name);
        let files: Vec<_> = m.files.iter().enumerate().collect();
        let first_buf = base;
        base += files.len() as u32;
        let loaded: Vec<Result<Parsed, Error>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (files, cdir, row_sizes) = (&files, &cdir, &row_sizes);
                    scope.spawn(move || {
                        files
                            .iter()
                            .skip(t)
                            .step_by(threads)
                            .map(|&(i, f)| {
                                parse_checkpoint(
                                    &cdir.join(&f.0),
                                    f,
                                    m.start_epoch,
                                    fingerprint,
                                    row_sizes,
                                    first_buf + i as u32,
                                )
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a recovery thread panicked"))
                .collect()
        });
        for p in loaded {
            let p = p?;
            report.checkpoint_rows += p.entries.len() as u64;
            all.push(p);
        }
    }
    // Global buffer index -> buffer.
    let mut bufs: Vec<&[u8]> = vec![&[]; base as usize];
    for p in &all {
        for (i, b) in p.bufs.iter().enumerate() {
            bufs[p.base as usize + i] = b;
        }
        report.transactions += p.txns;
        report.beyond_durable += p.beyond;
        if !p.checkpoint {
            report.records += p.entries.len() as u64;
            report.column_records += p.entries.iter().filter(|e| e.cols).count() as u64;
        }
        report.bytes += p.bytes;
        report.torn.extend(p.torn.iter().cloned());
    }
    report.segments = all.iter().map(|p| p.bufs.len() as u64).sum();
    // Apply: threads own the keys that hash to them. Per key, the newest whole image or
    // deletion is its base; COLS records newer than it are applied on top, oldest first.
    let results: Vec<Result<(u64, u64), Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (all, bufs, row_sizes, projections) = (&all, &bufs, &row_sizes, &projections);
                scope.spawn(move || -> Result<(u64, u64), Error> {
                    // Per key: the base, and the newest of its COLS records (their list runs
                    // through `older`: the index of the next one, or `NONE`).
                    const NONE: u32 = u32::MAX;
                    let mut keys: FxHashMap<(u32, u64), (Option<Entry>, u32)> =
                        FxHashMap::default();
                    let mut deltas: Vec<(Entry, u32)> = Vec::new();
                    for p in all {
                        for e in &p.entries {
                            if owner(e.table, e.key, threads) != t {
                                continue;
                            }
                            let k = keys.entry((e.table, e.key)).or_insert((None, NONE));
                            if e.cols {
                                deltas.push((*e, k.1));
                                k.1 = deltas.len() as u32 - 1;
                            } else if k.0.is_none_or(|b| e.stamp > b.stamp) {
                                k.0 = Some(*e);
                            }
                        }
                    }
                    let mut loader = db.installer();
                    let (mut rows, mut deleted) = (0, 0);
                    let mut newer: Vec<Entry> = Vec::new();
                    let mut image: Vec<u8> = Vec::new();
                    for (&(table, key), &(base, mut d)) in &keys {
                        let from = base.map_or(0, |b| b.stamp);
                        newer.clear();
                        while d != NONE {
                            let (e, next) = deltas[d as usize];
                            if e.stamp > from {
                                newer.push(e);
                            }
                            d = next;
                        }
                        let base = match base {
                            Some(b) if b.buf != u32::MAX => b,
                            _ if newer.is_empty() => {
                                deleted += 1;
                                continue;
                            }
                            _ => {
                                return Err(Error::Durability(format!(
                                    "{}: key {key} of table {table}: columns written at stamp {} on a row the log and checkpoint have no image of (an incomplete log)",
                                    dir.display(),
                                    newer[0].stamp
                                )))
                            }
                        };
                        let size = row_sizes[table as usize];
                        image.clear();
                        let off = base.off as usize;
                        image.extend_from_slice(&bufs[base.buf as usize][off..off + size]);
                        newer.sort_unstable_by_key(|e| e.stamp);
                        for e in &newer {
                            let (off, len) = (e.off as usize, e.len as usize);
                            let rec = &bufs[e.buf as usize][off..off + len];
                            let mask = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
                            projections[table as usize].unpack(mask, &rec[8..], &mut image);
                        }
                        loader.insert(crate::storage::TableId(table), key, &image)?;
                        rows += 1;
                    }
                    Ok((rows, deleted))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a recovery thread panicked")).collect()
    });
    for r in results {
        let (rows, deleted) = r?;
        report.rows += rows;
        report.deleted += deleted;
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// The recovery thread that owns `key` of `table`.
#[inline]
fn owner(table: u32, key: u64, threads: usize) -> usize {
    let h = (key ^ u64::from(table).rotate_left(48)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 32) as usize) % threads
}
