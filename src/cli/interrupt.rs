//! Ctrl-C: the first one asks the command to stop after the run in progress and write what it
//! measured; the second exits at once (status 130, as a shell reports SIGINT).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

/// SIGINTs received since the handler was installed.
static RECEIVED: AtomicU32 = AtomicU32::new(0);
static INSTALL: Once = Once::new();

/// A handle on the process's Ctrl-C state.
pub(super) struct Interrupt(());

impl Interrupt {
    /// Installs the handler (once per process) and forgets earlier presses.
    pub fn install() -> Interrupt {
        INSTALL.call_once(|| {
            let handler = ctrlc::set_handler(|| {
                // Relaxed: the count is the only data; `requested` reads it between runs.
                if RECEIVED.fetch_add(1, Ordering::Relaxed) >= 1 {
                    eprintln!("\ninterrupted twice: exiting without waiting for the run");
                    std::process::exit(130);
                }
                eprintln!(
                    "\ninterrupt: stopping after the run in progress and writing what was \
                     measured (Ctrl-C again to exit at once)"
                );
            });
            if let Err(e) = handler {
                eprintln!("note: Ctrl-C cannot be caught ({e}); it will end txlab at once");
            }
        });
        RECEIVED.store(0, Ordering::Relaxed);
        Interrupt(())
    }

    /// Whether Ctrl-C was pressed since [`Interrupt::install`].
    pub fn requested(&self) -> bool {
        RECEIVED.load(Ordering::Relaxed) > 0
    }
}
