//! Parallel loading, with a progress bar when the command line is built (feature `cli`).

use super::database::{Database, Loader};
use super::protocol::Protocol;
use crate::error::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The load's progress bar on stderr, when it is a terminal and the load has at least two
/// chunks.
#[cfg(feature = "cli")]
fn progress_bar(total: u64, chunk: u64, label: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal;
    let bar = if std::io::stderr().is_terminal() && total >= 2 * chunk {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        // Short enough for an 80-column terminal with the longest label.
        ProgressStyle::with_template("{msg} [{bar:24}] {percent:>3}%  eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(format!("loading {label}"));
    bar
}

/// Without the command line (an embedder's build): no bar.
#[cfg(not(feature = "cli"))]
fn progress_bar(_total: u64, _chunk: u64, _label: &str) -> NoBar {
    NoBar
}

#[cfg(not(feature = "cli"))]
struct NoBar;

#[cfg(not(feature = "cli"))]
impl NoBar {
    fn set_position(&self, _: u64) {}
    fn finish_and_clear(&self) {}
}

/// Loads items `0..total` with `threads` threads: each thread takes `chunk` items at a time and
/// calls `f(loader, range)`. A progress bar labelled `label` is drawn on stderr when it is a
/// terminal and the load has at least two chunks; only this (the calling) thread touches it.
pub fn parallel_load<P: Protocol>(
    db: &Database<P>,
    total: u64,
    chunk: u64,
    threads: usize,
    label: &str,
    f: impl Fn(&mut Loader<'_, P>, std::ops::Range<u64>) -> Result<(), Error> + Sync,
) -> Result<(), Error> {
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let error = Mutex::new(None);
    let chunk = chunk.max(1);
    let bar = progress_bar(total, chunk, label);
    let threads = threads.max(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut loader = db.loader();
                // Relaxed throughout: `failed` is a stop hint (the error itself goes through the
                // mutex), `next` hands out disjoint chunks, `done` drives a progress bar; the
                // scope's join orders the loaded rows before the caller reads them.
                while !failed.load(Ordering::Relaxed) {
                    let start = next.fetch_add(chunk, Ordering::Relaxed);
                    if start >= total {
                        break;
                    }
                    let end = (start + chunk).min(total);
                    if let Err(e) = f(&mut loader, start..end) {
                        failed.store(true, Ordering::Relaxed);
                        *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        break;
                    }
                    done.fetch_add(end - start, Ordering::Relaxed);
                }
            });
        }
        while done.load(Ordering::Relaxed) < total && !failed.load(Ordering::Relaxed) {
            bar.set_position(done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(50));
            if next.load(Ordering::Relaxed) >= total + chunk * threads as u64 {
                break;
            }
        }
    });
    bar.finish_and_clear();
    match error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
