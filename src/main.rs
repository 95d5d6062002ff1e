use mimalloc::MiMalloc;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`txlab check | head`) instead of panicking on a failed print.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts; no signal
    // handler of ours is replaced.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A panic ends the process, as `panic = "abort"` would (the release profile unwinds so that
    // tests and the binary share one build): a worker that died unwinding could leave others
    // waiting forever for a lock it held or a transaction it was running.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    std::process::exit(txlab::cli::main());
}
