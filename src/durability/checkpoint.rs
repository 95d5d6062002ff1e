//! Checkpoints (Cicada §3.7, SiloR): every table's latest committed rows with their commit
//! stamps, written in parallel by checkpointer threads while workers run, after which the log
//! segments the checkpoint makes unnecessary are deleted.
//!
//! ## Why the result is consistent
//!
//! 1. Before anything is read, the checkpoint notes each stream's open segment (every segment
//!    below it is closed, so holds only transactions appended before now) and the log epoch `s`
//!    transactions commit in now, and waits until epoch `s` is durable: every transaction of an
//!    epoch `<= s` has then installed its writes, so the rows read afterwards reflect all of
//!    them. That is the commit contract's point 5 (`engine::Protocol`'s docs): a transaction's log
//!    epoch leaves flight ([`super::log::LogWriter::installed`]) only once its writes are
//!    visible, and a group declares an epoch durable only after every transaction of it left
//!    flight. (A protocol that logs before it installs, as the multi-version ones do, would
//!    otherwise let a transaction logged in epoch `s` and preempted before its install be
//!    missing from the checkpoint, whose rows then hold the older values, and from the replay,
//!    which skips epoch `s`.)
//! 2. Each row is read with [`Durable::read_committed`] (a stable read, or a shared lock under
//!    2PL), with an epoch slot published so that no row is freed under the reader. A row may be
//!    read before or after any later transaction; either way its stamp says which version it
//!    is. `read_committed` never gives a value that may still roll back.
//! 3. When the files are written and synced, the checkpoint waits until the log epoch `e` of its
//!    end is durable, and only then is it published (`checkpoint/CURRENT`, written to a temporary
//!    file, synced and renamed). A row image it holds from a transaction of an epoch above `s`
//!    comes from a transaction that is then durable, whose every write recovery replays too,
//!    so no transaction is half applied.
//! 4. Recovery loads the checkpoint and replays log transactions of epochs in `(s, durable]`,
//!    keeping each key's newest stamp. Transactions of epochs `<= s` are all in the checkpoint,
//!    so segments closed before step 1 are deleted once the checkpoint is published; replaying
//!    them could only resurrect a key that the checkpoint shows deleted.
//!
//! Deleted rows are not in a checkpoint: a key absent from it and from the replayed log is
//! absent. A crash at any point leaves the previous checkpoint and every segment it needs
//! (older checkpoint directories and segments are deleted only after the new `CURRENT` is
//! durable).

use super::format::{self, FileKind, RecordKind, SegmentHeader};
use super::log::{segment_name, sync_dir, SyncPolicy, LOG_SUBDIR};
use super::Durable;
use crate::error::Error;
use crate::storage::{index, TableId};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The checkpoints' subdirectory.
pub const CHECKPOINT_SUBDIR: &str = "checkpoint";
/// The file naming the current checkpoint.
pub const CURRENT: &str = "CURRENT";

/// What `checkpoint/CURRENT` says.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// The checkpoint's directory under `checkpoint/`.
    pub name: String,
    /// Every transaction of a log epoch up to this is in the checkpoint.
    pub start_epoch: u64,
    /// The log epoch was durable up to this when the checkpoint was published.
    pub end_epoch: u64,
    /// Per stream, the first segment recovery needs (the one open when the checkpoint began).
    pub first_segments: Vec<u32>,
    /// The checkpoint's files: name, bytes, rows.
    pub files: Vec<(String, u64, u64)>,
}

impl Manifest {
    /// Encodes the manifest: its JSON, a newline and `crc32c=` with the JSON's checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = serde_json::to_vec(self).expect("a manifest serializes");
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(format!("\ncrc32c={crc:08x}\n").as_bytes());
        body
    }

    /// Decodes a manifest file; `Err` says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not text".to_string())?;
        let (body, tail) =
            text.rsplit_once("\ncrc32c=").ok_or_else(|| "no checksum line".to_string())?;
        let crc = u32::from_str_radix(tail.trim_end(), 16)
            .map_err(|_| "unreadable checksum".to_string())?;
        if crc32c::crc32c(body.as_bytes()) != crc {
            return Err("checksum mismatch".into());
        }
        serde_json::from_str(body).map_err(|e| format!("unreadable: {e}"))
    }
}

/// What a checkpoint wrote.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CheckpointReport {
    /// Transactions of log epochs up to this are in it.
    pub start_epoch: u64,
    /// Rows written.
    pub rows: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Files written.
    pub files: u64,
    /// Log segments deleted afterwards.
    pub segments_deleted: u64,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Reads `checkpoint/CURRENT` of a log directory, if there is one.
pub fn current(dir: &Path) -> Result<Option<Manifest>, Error> {
    let path = dir.join(CHECKPOINT_SUBDIR).join(CURRENT);
    match std::fs::read(&path) {
        Ok(bytes) => Manifest::decode(&bytes)
            .map(Some)
            .map_err(|e| Error::Durability(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Durability(format!("{}: {e}", path.display()))),
    }
}

/// Writes a checkpoint of `db` (which must log) with `threads` checkpointer threads, while
/// workers may run; publishes it and deletes the log segments and older checkpoints it makes
/// unnecessary. See the module docs.
pub fn checkpoint<D: Durable>(db: &D, threads: usize) -> Result<CheckpointReport, Error> {
    let t0 = Instant::now();
    let mgr = db.log().ok_or_else(|| {
        Error::Config("a checkpoint needs a database that logs (DbOptions::log)".into())
    })?;
    let (dir, sync) = (mgr.options().dir.clone(), mgr.options().sync);
    let specs: Vec<_> = db.storage().tables().iter().map(|t| t.spec.clone()).collect();
    let fingerprint = format::fingerprint(&specs);
    let first_segments = mgr.open_segments();
    let start = mgr.epoch_now();
    mgr.await_durable(start)?;
    let name = format!("c{start:012}");
    let root = dir.join(CHECKPOINT_SUBDIR);
    let cdir = root.join(&name);
    let io = |p: &Path, e: std::io::Error| Error::Durability(format!("{}: {e}", p.display()));
    if cdir.exists() {
        // Left by a checkpoint that crashed before publishing (the epoch is the same only if no
        // transaction committed since): never the current one, which names a published epoch.
        if current(&dir)?.is_some_and(|m| m.name == name) {
            return Err(Error::Durability(format!(
                "{}: is the current checkpoint already",
                cdir.display()
            )));
        }
        std::fs::remove_dir_all(&cdir).map_err(|e| io(&cdir, e))?;
    }
    std::fs::create_dir_all(&cdir).map_err(|e| io(&cdir, e))?;

    // Jobs: a hash index splits into parts by chains, the others are one part each.
    let threads = threads.max(1);
    let mut jobs: Vec<(TableId, usize, usize)> = Vec::new();
    for t in db.storage().tables() {
        let parts = if t.index.kind() == index::IndexKind::Hash { threads * 4 } else { 1 };
        jobs.extend((0..parts).map(|p| (t.id, p, parts)));
    }
    let next = AtomicUsize::new(0);
    let results: Vec<Result<(String, u64, u64), Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (jobs, next, cdir) = (&jobs, &next, &cdir);
                s.spawn(move || write_part(db, i, jobs, next, cdir, fingerprint, start, sync))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a checkpointer thread panicked")).collect()
    });
    let mut report = CheckpointReport { start_epoch: start, ..Default::default() };
    let mut files = Vec::new();
    for r in results {
        let (file, bytes, rows) = r?;
        report.rows += rows;
        report.bytes += bytes;
        report.files += 1;
        files.push((file, bytes, rows));
    }
    if sync != SyncPolicy::None {
        sync_dir(&cdir)?;
    }
    // Every row image read is from a transaction of an epoch at most `end`: durable before the
    // checkpoint is published.
    let end = mgr.epoch_now();
    mgr.await_durable(end)?;
    let manifest = Manifest {
        name: name.clone(),
        start_epoch: start,
        end_epoch: end,
        first_segments: first_segments.clone(),
        files,
    };
    let tmp = root.join("CURRENT.tmp");
    let mut f = File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(&manifest.encode()).map_err(|e| io(&tmp, e))?;
    if sync != SyncPolicy::None {
        f.sync_all().map_err(|e| io(&tmp, e))?;
    }
    let cur = root.join(CURRENT);
    std::fs::rename(&tmp, &cur).map_err(|e| io(&cur, e))?;
    if sync != SyncPolicy::None {
        sync_dir(&root)?;
    }
    // Published: what it makes unnecessary can go.
    for e in std::fs::read_dir(&root).map_err(|e| io(&root, e))? {
        let e = e.map_err(|e| io(&root, e))?;
        let n = e.file_name();
        if e.path().is_dir() && n.to_string_lossy() != name {
            std::fs::remove_dir_all(e.path()).map_err(|err| io(&e.path(), err))?;
        }
    }
    let logdir = dir.join(LOG_SUBDIR);
    for (stream, &first) in first_segments.iter().enumerate() {
        for seq in 0..first {
            let p = logdir.join(segment_name(stream as u32, seq));
            match std::fs::remove_file(&p) {
                Ok(()) => report.segments_deleted += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&p, e)),
            }
        }
    }
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// The file checkpointer `i` writes.
pub fn part_name(i: usize) -> String {
    format!("p{i:04}.ckpt")
}

/// Checkpointer `i`: takes jobs until none is left, writing the rows to its own file.
#[allow(clippy::too_many_arguments)]
fn write_part<D: Durable>(
    db: &D,
    i: usize,
    jobs: &[(TableId, usize, usize)],
    next: &AtomicUsize,
    cdir: &Path,
    fingerprint: u64,
    start: u64,
    sync: SyncPolicy,
) -> Result<(String, u64, u64), Error> {
    let name = part_name(i);
    let path: PathBuf = cdir.join(&name);
    let io = |e: std::io::Error| Error::Durability(format!("{}: {e}", path.display()));
    let mut file = File::create(&path).map_err(io)?;
    let header = SegmentHeader {
        kind: FileKind::Checkpoint,
        fingerprint,
        stream: i as u32,
        seq: 0,
        aux: start,
    };
    let mut buf = header.encode().to_vec();
    let (mut bytes, mut rows) = (0u64, 0u64);
    let epochs = db.storage().epochs();
    let slot = epochs.register().ok_or_else(|| {
        Error::Config(format!(
            "a checkpointer needs a worker slot, and all {} are taken",
            epochs.capacity()
        ))
    })?;
    let mut guard = index::pin();
    let mut image = Vec::new();
    let mut failed = None;
    loop {
        let j = next.fetch_add(1, Ordering::Relaxed);
        let Some(&(t, part, parts)) = jobs.get(j) else { break };
        let table = db.storage().table(t);
        image.resize(table.spec.row_size, 0);
        // An epoch published while a batch's entries are read: their slots are not reused.
        epochs.enter(slot);
        table.index.for_each_part(
            part,
            parts,
            &mut guard,
            || {
                epochs.exit(slot);
                epochs.enter(slot);
            },
            |key, rid| {
                let row = table.rows.get(rid);
                if let Some(stamp) = db.read_committed(t, key, row, &mut image) {
                    format::encode_record(&mut buf, RecordKind::Put, t.0, stamp, key, &image);
                    rows += 1;
                }
                if buf.len() >= 1 << 20 && failed.is_none() {
                    bytes += buf.len() as u64;
                    if let Err(e) = file.write_all(&buf) {
                        failed = Some(e);
                    }
                    buf.clear();
                }
            },
        );
        epochs.exit(slot);
        if failed.is_some() {
            break;
        }
    }
    epochs.unregister(slot);
    drop(guard);
    if let Some(e) = failed {
        return Err(io(e));
    }
    bytes += buf.len() as u64;
    file.write_all(&buf).map_err(io)?;
    if sync != SyncPolicy::None {
        file.sync_data().map_err(io)?;
    }
    Ok((name, bytes, rows))
}
