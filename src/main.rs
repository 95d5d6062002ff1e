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
    std::process::exit(txlab::cli::main());
}
