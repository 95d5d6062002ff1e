//! Aborts and errors: the vocabulary every layer shares.
//!
//! A transaction that cannot commit returns `Err(Abort)`; it never panics. The reason is an enum
//! the driver counts separately, so a result can say *why* a protocol aborts (CCBench's analysis
//! needs exactly this split). Errors that are not aborts (bad configuration, a table that does not
//! exist, a load that does not fit in memory) are [`Error`]s with a message a person can act on.

use serde::Serialize;
use std::fmt;

/// Why a transaction attempt was aborted.
///
/// The discriminants index per-thread counter arrays, so the enum is dense; [`AbortReason::ALL`]
/// lists every variant in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum AbortReason {
    /// The procedure asked to roll back (e.g. TPC-C NewOrder's invalid item). Not retried.
    User,
    /// A lock was held by another transaction and the policy does not wait (2PL NoWait).
    LockConflict,
    /// Wait-die: a younger transaction found an older lock holder and died.
    WaitDie,
    /// A scan (or an absent-key read) and an insert met on a phantom bucket held by the other
    /// (2PL's bucket holds, which never wait): a conflict over a key range, or a false one
    /// between keys that share a bucket word.
    BucketConflict,
    /// OCC read validation failed: a record read changed or is locked by another transaction.
    ReadValidation,
    /// Phantom validation failed: a key range (or an absent key) read has seen an insert.
    PhantomValidation,
    /// A record this transaction wanted to insert or write is being inserted or deleted by
    /// another, uncommitted transaction.
    InsertConflict,
    /// The keys touched at run time differ from the access set declared before the run
    /// (a stale reconnaissance read, OLLP). Retried after declaring again.
    AccessSetMismatch,
    /// A piece touched a table, column or mode its static template did not declare.
    /// A bug in the procedure: the driver stops the run and reports it.
    TemplateViolation,
    /// The operation is not supported by this table (e.g. a range scan on a hash index) or
    /// by this protocol. A bug in the procedure or its configuration; the driver stops the run.
    Unsupported,
    /// The table is full (its row capacity is exhausted). The driver stops the run.
    TableFull,
    /// A row the workload's own invariants say must exist was not found (e.g. the order of a
    /// TPC-C new-order row). Under a serializable protocol this means a broken database and
    /// fails the run; without isolation (`nocc`) it happens. A final outcome, not retried.
    MissingRow,
    /// First updater wins (the multi-version protocols): the record was written by another
    /// transaction after this one's snapshot, or is being written by one.
    WriteConflict,
    /// The serial safety net's exclusion-window test failed (SSN): a transaction that must
    /// follow this one committed no later than one that must precede it.
    ExclusionWindow,
    /// Serializable snapshot isolation found a dangerous structure (ERMIA's SSI): two
    /// consecutive anti-dependencies through this transaction or to it whose last transaction
    /// committed first.
    DangerousStructure,
    /// A transaction declared read-only tried to write (a multi-version protocol runs such a
    /// transaction on a snapshot without certification). A bug in the procedure: the driver
    /// stops the run and reports it.
    ReadOnlyWrite,
    /// A transaction this one read from speculatively (a version whose writer was committing:
    /// Hekaton's commit dependency) aborted, so this one aborts too.
    CascadingAbort,
    /// The version this transaction's snapshot sees was collected by the aggressive GC
    /// (`protocols::mv`): it is retried with a new snapshot that the GC then spares.
    SnapshotTooOld,
    /// BOHM: a version this transaction reads is being produced by another execution thread;
    /// the attempt is abandoned and run again later (§3.3.1). Not an abort of the transaction.
    DependencyBusy,
    /// The log failed (a write error, a full disk: [`crate::durability::log::LogManager::error`]
    /// names the file and the operating system's error), so this commit cannot be made
    /// durable. Unlike every other reason, its transaction is **not** rolled back: its writes
    /// are installed in memory and other transactions may have read them, but no log holds
    /// them, so the commit must not be acknowledged to anyone who counts on durability. The
    /// database logs nothing from then on; the driver stops the run with the log's error.
    NotDurable,
    /// The program asked to roll back and run the transaction again ([`Abort::retry`]): it saw
    /// a state a later attempt may not see (a reservation another transaction holds for now,
    /// an external resource that is busy). Retried like a concurrency abort, with backoff.
    UserRetry,
    /// The protocol takes its locks from a declared access set (`2pl-ordered`) and the attempt
    /// was begun without one ([`crate::engine::Worker::begin`] instead of
    /// [`crate::engine::Worker::begin_declared`]). A bug in the program: the driver stops the
    /// run. (`2pl-ordered`'s `--opt undeclared=no-wait` runs such attempts with no-wait locks.)
    Undeclared,
}

impl AbortReason {
    /// Every reason, in discriminant order.
    pub const ALL: [AbortReason; 22] = [
        AbortReason::User,
        AbortReason::LockConflict,
        AbortReason::WaitDie,
        AbortReason::BucketConflict,
        AbortReason::ReadValidation,
        AbortReason::PhantomValidation,
        AbortReason::InsertConflict,
        AbortReason::AccessSetMismatch,
        AbortReason::TemplateViolation,
        AbortReason::Unsupported,
        AbortReason::TableFull,
        AbortReason::MissingRow,
        AbortReason::WriteConflict,
        AbortReason::ExclusionWindow,
        AbortReason::DangerousStructure,
        AbortReason::ReadOnlyWrite,
        AbortReason::CascadingAbort,
        AbortReason::SnapshotTooOld,
        AbortReason::DependencyBusy,
        AbortReason::NotDurable,
        AbortReason::UserRetry,
        AbortReason::Undeclared,
    ];
    /// Number of reasons (the length of per-reason counter arrays).
    pub const COUNT: usize = Self::ALL.len();

    /// A stable, kebab-case name used in tables, JSON and CSV.
    pub fn name(self) -> &'static str {
        match self {
            AbortReason::User => "user",
            AbortReason::LockConflict => "lock-conflict",
            AbortReason::WaitDie => "wait-die",
            AbortReason::BucketConflict => "bucket-conflict",
            AbortReason::ReadValidation => "read-validation",
            AbortReason::PhantomValidation => "phantom-validation",
            AbortReason::InsertConflict => "insert-conflict",
            AbortReason::AccessSetMismatch => "access-set-mismatch",
            AbortReason::TemplateViolation => "template-violation",
            AbortReason::Unsupported => "unsupported",
            AbortReason::TableFull => "table-full",
            AbortReason::MissingRow => "missing-row",
            AbortReason::WriteConflict => "write-conflict",
            AbortReason::ExclusionWindow => "exclusion-window",
            AbortReason::DangerousStructure => "dangerous-structure",
            AbortReason::ReadOnlyWrite => "read-only-write",
            AbortReason::CascadingAbort => "cascading-abort",
            AbortReason::SnapshotTooOld => "snapshot-too-old",
            AbortReason::DependencyBusy => "dependency-busy",
            AbortReason::NotDurable => "not-durable",
            AbortReason::UserRetry => "user-retry",
            AbortReason::Undeclared => "undeclared",
        }
    }

    /// Whether the driver retries a transaction aborted for this reason. Concurrency-control
    /// aborts are retried with the same parameters; user aborts are final outcomes; the rest
    /// are bugs or exhausted resources that stop the run.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            AbortReason::LockConflict
                | AbortReason::WaitDie
                | AbortReason::BucketConflict
                | AbortReason::ReadValidation
                | AbortReason::PhantomValidation
                | AbortReason::InsertConflict
                | AbortReason::AccessSetMismatch
                | AbortReason::WriteConflict
                | AbortReason::ExclusionWindow
                | AbortReason::DangerousStructure
                | AbortReason::CascadingAbort
                | AbortReason::SnapshotTooOld
                | AbortReason::DependencyBusy
                | AbortReason::UserRetry
        )
    }

    /// Whether this reason ends a transaction for good without stopping the run (a user abort,
    /// a missing row).
    pub fn is_final(self) -> bool {
        matches!(self, AbortReason::User | AbortReason::MissingRow)
    }

    /// Whether this reason means the run cannot go on (a procedure bug, a full table, a failed
    /// log).
    pub fn is_fatal(self) -> bool {
        !self.is_retryable() && !self.is_final()
    }
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A transaction attempt that did not commit. Returned as `Err(Abort)` by every operation.
///
/// The engine makes aborts for its own reasons; an application makes only two kinds, so a
/// count of, say, insert conflicts is always the engine's:
/// - a **final** one, [`Abort::user`] or [`Abort::with_code`]: the transaction decided to roll
///   back (TPC-C's invalid item, an overdrawn account), and retrying would decide the same;
///   [`crate::engine::Retry`] and the driver give it back as the outcome;
/// - a **retryable** one, [`Abort::retry`]: the transaction saw a state a later attempt may not
///   see; it is rolled back and run again after the protocol's backoff, like a conflict.
///
/// An operation's own `Err` is passed on unchanged (`?`), whatever its reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Abort {
    /// Why the attempt ended.
    pub reason: AbortReason,
    /// The application's code of a user abort (0 when it gave none; always 0 otherwise).
    code: u32,
}

impl Abort {
    /// An engine abort for `reason`.
    #[inline]
    pub(crate) const fn new(reason: AbortReason) -> Self {
        Abort { reason, code: 0 }
    }
    /// A user abort: the procedure decided to roll back.
    #[inline]
    pub const fn user() -> Self {
        Abort::new(AbortReason::User)
    }
    /// A user abort carrying the application's `code` (why it rolled back), which
    /// [`Abort::user_code`] gives back to whoever handles the outcome (0 is the same as no code).
    #[inline]
    pub const fn with_code(code: u32) -> Self {
        Abort { reason: AbortReason::User, code }
    }
    /// A retryable abort raised by the program ([`AbortReason::UserRetry`]): roll back and run
    /// the transaction again, after backoff, as after a conflict.
    #[inline]
    pub const fn retry() -> Self {
        Abort::new(AbortReason::UserRetry)
    }
    /// The code of a user abort made with [`Abort::with_code`]; `None` for any other abort.
    #[inline]
    pub const fn user_code(&self) -> Option<u32> {
        match self.reason {
            AbortReason::User if self.code != 0 => Some(self.code),
            _ => None,
        }
    }
}

impl fmt::Display for Abort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.user_code() {
            Some(code) => write!(f, "transaction aborted: {} (code {code})", self.reason),
            None => write!(f, "transaction aborted: {}", self.reason),
        }
    }
}

impl std::error::Error for Abort {}

/// An error outside a transaction: configuration, schema, loading, resources.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A configuration value is out of range or inconsistent. The message names the setting
    /// and the valid range.
    #[error("{0}")]
    Config(String),
    /// The data would not fit in this machine's memory.
    #[error("{0}")]
    OutOfMemory(String),
    /// A table's row capacity was exhausted.
    #[error("table '{table}' is full: its capacity of {capacity} rows is exhausted")]
    TableFull {
        /// Table name.
        table: String,
        /// Its row capacity.
        capacity: u64,
    },
    /// A key was loaded twice.
    #[error("duplicate key {key} while loading table '{table}'")]
    DuplicateKey {
        /// Table name.
        table: String,
        /// The key.
        key: u64,
    },
    /// A workload's invariant did not hold after a run (e.g. SmallBank's money).
    #[error("invariant violated: {0}")]
    Invariant(String),
    /// A log, checkpoint or durability setting is unusable: the message names the file (and
    /// offset) or the setting. Files named in it are left as they were.
    #[error("{0}")]
    Durability(String),
    /// A transaction did not commit (see [`Abort`]): what `?` on an operation's result gives in
    /// code that returns `Result<_, Error>`.
    #[error("{0}")]
    Aborted(Abort),
    /// A run stopped because a procedure returned a fatal abort.
    #[error("run stopped: a '{txn}' transaction aborted with '{reason}' (a procedure bug or an exhausted resource)")]
    Fatal {
        /// Transaction type name.
        txn: String,
        /// The fatal reason.
        reason: AbortReason,
    },
}

impl From<Abort> for Error {
    fn from(a: Abort) -> Self {
        Error::Aborted(a)
    }
}

/// Shorthand for results with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
