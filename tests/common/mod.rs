//! Shared by the integration tests: the protocol options a test runs its protocol with, so that
//! one suite, written once over `P: Protocol`, is instantiated for every protocol and for each
//! option combination that changes a commit path.

use std::cell::RefCell;
use txlab::engine::ProtocolOptions;
use txlab::prelude::*;

thread_local! {
    /// (name, value) pairs for databases created on this thread by [`database`].
    static OPTIONS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with [`database`] giving protocols the options `pairs` on this thread.
pub fn with_options<R>(pairs: &[(&str, &str)], f: impl FnOnce() -> R) -> R {
    OPTIONS.with(|o| {
        *o.borrow_mut() = pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    });
    f()
}

/// Protocol `P`'s options with this thread's pairs (see [`with_options`]).
pub fn options<P: Protocol>() -> P::Options {
    let pairs = OPTIONS.with(|o| o.borrow().clone());
    P::Options::from_pairs(&pairs).expect("the suite's options suit the protocol")
}

/// A database of protocol `P` with `tables`, `opts` and this thread's protocol options.
pub fn database<P: Protocol>(tables: &[TableSpec], opts: DbOptions) -> Database<P> {
    Database::<P>::builder(tables).options(opts).protocol_options(options::<P>()).build().unwrap()
}
