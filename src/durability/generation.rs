//! Log generations: how a database reopened from its directory continues logging there.
//!
//! A log directory holds one *generation*: a log (`log/`, the `durable` marker) and its
//! checkpoints (`checkpoint/`). The first generation lies in the directory itself (what
//! `txlab run --log-dir` writes); [`Database::open`](crate::engine::Builder::open) starts the
//! next one in a subdirectory `gen-NNNNNN` and names it in the pointer file `GENERATION`:
//!
//! 1. recover the current generation into a fresh database;
//! 2. start a new, empty log in `gen-(N+1)` and write a checkpoint of the recovered state into
//!    it (no transaction runs meanwhile, so the checkpoint is exactly that state);
//! 3. publish it: write `GENERATION.tmp`, sync it, rename it over `GENERATION`, sync the
//!    directory. This rename is the switch;
//! 4. delete the old generation.
//!
//! A crash before step 3 leaves the old generation current and untouched (the next open removes
//! the unfinished `gen-(N+1)`); after it, the new one, complete. The old generation's torn tail
//! and its transactions that were never durable disappear with it: nothing of them is in the
//! checkpoint.
//!
//! Why a new generation rather than appending to the old log: the old log may hold complete
//! transactions beyond its durable point (written, never acknowledged) that recovery dropped.
//! A continued log would make later epochs durable and so bring them back. Starting from a
//! checkpoint also restarts every clock cleanly: the recovered rows are installed as loaded rows
//! (below every stamp the protocol gives), so stamps, TIDs and epochs of the new generation are
//! all above what the checkpoint holds, and no stamp of the old log is ever compared with a new
//! one. The price is one checkpoint per open, written in parallel, of the size of the data.

use super::log::{sync_dir, LOG_SUBDIR, MARKER};
use crate::error::Error;
use std::path::{Path, PathBuf};

/// The pointer file naming the current generation's subdirectory.
pub const POINTER: &str = "GENERATION";

/// The subdirectory of generation `n` (generation 0 is the directory itself).
pub fn subdir(n: u32) -> String {
    format!("gen-{n:06}")
}

fn parse_subdir(name: &str) -> Option<u32> {
    let n = name.strip_prefix("gen-")?.parse::<u32>().ok()?;
    (n > 0 && subdir(n) == name).then_some(n)
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Durability(format!("{}: {e}", path.display()))
}

/// The number of `dir`'s current generation (0 when there is no pointer file).
pub fn number(dir: &Path) -> Result<u32, Error> {
    let path = dir.join(POINTER);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(&path, e)),
    };
    let name = text.strip_suffix('\n').unwrap_or(&text);
    let n = parse_subdir(name).ok_or_else(|| {
        Error::Durability(format!(
            "{}: unreadable generation pointer (expected a line like {})",
            path.display(),
            subdir(1)
        ))
    })?;
    if !dir.join(name).is_dir() {
        return Err(Error::Durability(format!(
            "{}: names {name}, which does not exist",
            path.display()
        )));
    }
    Ok(n)
}

/// The directory holding `dir`'s current generation: `dir` itself, or the subdirectory its
/// pointer file names.
pub fn current(dir: &Path) -> Result<PathBuf, Error> {
    Ok(match number(dir)? {
        0 => dir.to_path_buf(),
        n => dir.join(subdir(n)),
    })
}

/// Whether `dir` holds a log of any generation.
pub fn holds_log(dir: &Path) -> bool {
    dir.join(POINTER).exists() || dir.join(MARKER).exists() || dir.join(LOG_SUBDIR).exists()
}

/// Removes the generations of `dir` other than `keep`: an open that crashed before publishing
/// its generation leaves one that was never current, and one that crashed after it leaves some
/// of the old one.
pub fn remove_others(dir: &Path, keep: u32) -> Result<(), Error> {
    if keep > 0 {
        remove(dir, 0)?;
    }
    let rd = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
    for e in rd {
        let e = e.map_err(|e| io(dir, e))?;
        if let Some(n) = e.file_name().to_str().and_then(parse_subdir) {
            if n != keep {
                std::fs::remove_dir_all(e.path()).map_err(|err| io(&e.path(), err))?;
            }
        }
    }
    Ok(())
}

/// Makes generation `n` current (step 3 of the module docs).
pub fn publish(dir: &Path, n: u32) -> Result<(), Error> {
    use std::io::Write as _;
    let tmp = dir.join(format!("{POINTER}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(format!("{}\n", subdir(n)).as_bytes()).map_err(|e| io(&tmp, e))?;
    f.sync_all().map_err(|e| io(&tmp, e))?;
    let path = dir.join(POINTER);
    std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
    sync_dir(dir)
}

/// Deletes generation `n` of `dir` (no longer current).
pub fn remove(dir: &Path, n: u32) -> Result<(), Error> {
    if n > 0 {
        let p = dir.join(subdir(n));
        return std::fs::remove_dir_all(&p).map_err(|e| io(&p, e));
    }
    for name in [LOG_SUBDIR, super::checkpoint::CHECKPOINT_SUBDIR] {
        let p = dir.join(name);
        if p.exists() {
            std::fs::remove_dir_all(&p).map_err(|e| io(&p, e))?;
        }
    }
    let p = dir.join(MARKER);
    match std::fs::remove_file(&p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&p, e)),
        _ => sync_dir(dir),
    }
}
