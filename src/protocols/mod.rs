//! Concurrency-control protocols, one module each, built on their family's substrate
//! ([`occ`], [`inplace`], [`mv`]) and on [`common`].
//!
//! Protocols never import each other; [`ProtocolKind`] is the one place that names them all, and
//! [`with_protocol!`](crate::with_protocol) turns a runtime choice into a monomorphised call.

pub mod bohm;
pub mod cicada;
pub mod common;
pub mod ermia_ssi;
pub mod ermia_ssn;
pub mod hekaton;
pub mod ic3;
pub mod inplace;
pub mod mocc;
pub mod mv;
pub mod nocc;
pub mod occ;
pub mod si;
pub mod silo;
pub mod tictoc;
pub mod two_pl;
pub mod two_pl_ordered;

use crate::engine::{Database, DbOptions, Protocol, ProtocolOptions, TxnType};
use crate::error::Error;
use crate::storage::TableSpec;
use serde::Serialize;

/// A program that runs on a database of whichever protocol a run-time choice names
/// ([`ProtocolKind::create`]): generic over the protocol, so that everything it does is
/// monomorphised, with no `dyn` call per operation.
pub trait WithDatabase {
    /// What the program gives back.
    type Output;

    /// Runs on `db`.
    fn run<P: Protocol>(self, db: Database<P>) -> Self::Output;
}

/// What a database is made of, for any protocol: its tables, the database's options, the
/// protocol's options as `--opt` pairs and the workload's transaction types
/// ([`ProtocolKind::create`], [`DatabaseConfig::build`]).
#[derive(Clone, Debug, Default)]
pub struct DatabaseConfig<'a> {
    /// The tables.
    pub tables: &'a [TableSpec],
    /// The database's options (workers, epochs, logging, ...).
    pub options: DbOptions,
    /// The protocol's options, as `txlab run --opt NAME=VALUE` takes them: (name, value)
    /// pairs applied in order over the protocol's defaults; a name scoped `PROTOCOL:NAME`
    /// applies to that protocol only. A name the protocol does not take is an error.
    pub protocol_options: Vec<(String, String)>,
    /// The transaction types the database will run (their piece templates, which IC3
    /// analyses); empty by default.
    pub txn_types: &'a [TxnType],
}

impl<'a> DatabaseConfig<'a> {
    /// A database of `tables` with the default options.
    pub fn new(tables: &'a [TableSpec]) -> Self {
        DatabaseConfig { tables, ..Default::default() }
    }

    /// With the protocol option `name` set to `value` (after those set before).
    pub fn option(mut self, name: &str, value: &str) -> Self {
        self.protocol_options.push((name.to_string(), value.to_string()));
        self
    }

    /// With the database options `options`.
    pub fn options(mut self, options: DbOptions) -> Self {
        self.options = options;
        self
    }

    /// With the transaction types `types`.
    pub fn txn_types(mut self, types: &'a [TxnType]) -> Self {
        self.txn_types = types;
        self
    }

    /// Creates the database for protocol `P` (an option `P` does not take is an error naming
    /// it).
    pub fn build<P: Protocol>(&self) -> Result<Database<P>, Error> {
        let pairs = crate::engine::options::pairs_for(&self.protocol_options, P::NAME);
        let options = P::Options::from_pairs(&pairs)
            .map_err(|e| Error::Config(format!("{}: {e}", P::NAME)))?;
        Database::<P>::builder(self.tables)
            .options(self.options.clone())
            .protocol_options(options)
            .txn_types(self.txn_types)
            .build()
    }
}

/// Every implemented protocol, as chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ProtocolKind {
    /// No concurrency control.
    #[cfg_attr(feature = "cli", value(name = "nocc"))]
    #[serde(rename = "nocc")]
    Nocc,
    /// Strict 2PL, no-wait.
    #[cfg_attr(feature = "cli", value(name = "2pl-nowait"))]
    #[serde(rename = "2pl-nowait")]
    TwoPlNoWait,
    /// Strict 2PL, wait-die.
    #[cfg_attr(feature = "cli", value(name = "2pl-waitdie"))]
    #[serde(rename = "2pl-waitdie")]
    TwoPlWaitDie,
    /// Strict 2PL, every lock taken at begin in one global order from the declared access set.
    #[cfg_attr(feature = "cli", value(name = "2pl-ordered"))]
    #[serde(rename = "2pl-ordered")]
    TwoPlOrdered,
    /// Silo OCC.
    #[cfg_attr(feature = "cli", value(name = "silo"))]
    #[serde(rename = "silo")]
    Silo,
    /// TicToc OCC.
    #[cfg_attr(feature = "cli", value(name = "tictoc"))]
    #[serde(rename = "tictoc")]
    TicToc,
    /// MOCC: Silo plus temperature-driven pessimistic locks.
    #[cfg_attr(feature = "cli", value(name = "mocc"))]
    #[serde(rename = "mocc")]
    Mocc,
    /// Snapshot isolation (multi-version).
    #[cfg_attr(feature = "cli", value(name = "si"))]
    #[serde(rename = "si")]
    Si,
    /// ERMIA's snapshot isolation with the serial safety net (multi-version, serializable).
    #[cfg_attr(feature = "cli", value(name = "ermia-ssn"))]
    #[serde(rename = "ermia-ssn")]
    ErmiaSsn,
    /// ERMIA's serializable snapshot isolation (multi-version, serializable).
    #[cfg_attr(feature = "cli", value(name = "ermia-ssi"))]
    #[serde(rename = "ermia-ssi")]
    ErmiaSsi,
    /// Hekaton's optimistic multi-version concurrency control (serializable).
    #[cfg_attr(feature = "cli", value(name = "hekaton"))]
    #[serde(rename = "hekaton")]
    Hekaton,
    /// Cicada's optimistic multi-version timestamp ordering (serializable).
    #[cfg_attr(feature = "cli", value(name = "cicada"))]
    #[serde(rename = "cicada")]
    Cicada,
    /// BOHM: deterministic multi-version execution of sequenced batches.
    #[cfg_attr(feature = "cli", value(name = "bohm"))]
    #[serde(rename = "bohm")]
    Bohm,
    /// IC3: piece-wise OCC with dependency tracking, constrained by static analysis.
    #[cfg_attr(feature = "cli", value(name = "ic3"))]
    #[serde(rename = "ic3")]
    Ic3,
}

impl ProtocolKind {
    /// All protocols, in the order comparisons print them.
    pub const ALL: [ProtocolKind; 14] = [
        ProtocolKind::Nocc,
        ProtocolKind::TwoPlNoWait,
        ProtocolKind::TwoPlWaitDie,
        ProtocolKind::TwoPlOrdered,
        ProtocolKind::Silo,
        ProtocolKind::TicToc,
        ProtocolKind::Mocc,
        ProtocolKind::Si,
        ProtocolKind::ErmiaSsn,
        ProtocolKind::ErmiaSsi,
        ProtocolKind::Hekaton,
        ProtocolKind::Cicada,
        ProtocolKind::Bohm,
        ProtocolKind::Ic3,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        use crate::engine::Protocol;
        match self {
            ProtocolKind::Nocc => nocc::Nocc::NAME,
            ProtocolKind::TwoPlNoWait => two_pl::TwoPlNoWait::NAME,
            ProtocolKind::TwoPlWaitDie => two_pl::TwoPlWaitDie::NAME,
            ProtocolKind::TwoPlOrdered => two_pl_ordered::TwoPlOrdered::NAME,
            ProtocolKind::Silo => silo::Silo::NAME,
            ProtocolKind::TicToc => tictoc::TicToc::NAME,
            ProtocolKind::Mocc => mocc::Mocc::NAME,
            ProtocolKind::Si => si::Si::NAME,
            ProtocolKind::ErmiaSsn => ermia_ssn::ErmiaSsn::NAME,
            ProtocolKind::ErmiaSsi => ermia_ssi::ErmiaSsi::NAME,
            ProtocolKind::Hekaton => hekaton::Hekaton::NAME,
            ProtocolKind::Cicada => cicada::Cicada::NAME,
            ProtocolKind::Bohm => bohm::Bohm::NAME,
            ProtocolKind::Ic3 => ic3::Ic3::NAME,
        }
    }

    /// The one-line description.
    pub fn description(self) -> &'static str {
        use crate::engine::Protocol;
        match self {
            ProtocolKind::Nocc => nocc::Nocc::DESCRIPTION,
            ProtocolKind::TwoPlNoWait => two_pl::TwoPlNoWait::DESCRIPTION,
            ProtocolKind::TwoPlWaitDie => two_pl::TwoPlWaitDie::DESCRIPTION,
            ProtocolKind::TwoPlOrdered => two_pl_ordered::TwoPlOrdered::DESCRIPTION,
            ProtocolKind::Silo => silo::Silo::DESCRIPTION,
            ProtocolKind::TicToc => tictoc::TicToc::DESCRIPTION,
            ProtocolKind::Mocc => mocc::Mocc::DESCRIPTION,
            ProtocolKind::Si => si::Si::DESCRIPTION,
            ProtocolKind::ErmiaSsn => ermia_ssn::ErmiaSsn::DESCRIPTION,
            ProtocolKind::ErmiaSsi => ermia_ssi::ErmiaSsi::DESCRIPTION,
            ProtocolKind::Hekaton => hekaton::Hekaton::DESCRIPTION,
            ProtocolKind::Cicada => cicada::Cicada::DESCRIPTION,
            ProtocolKind::Bohm => bohm::Bohm::DESCRIPTION,
            ProtocolKind::Ic3 => ic3::Ic3::DESCRIPTION,
        }
    }

    /// The options the protocol takes (`--opt NAME=VALUE`).
    pub fn option_specs(self) -> &'static [crate::engine::OptionSpec] {
        use crate::engine::{Protocol, ProtocolOptions};
        fn specs<P: Protocol>() -> &'static [crate::engine::OptionSpec] {
            <P::Options as ProtocolOptions>::SPECS
        }
        crate::with_protocol!(self, P => specs::<P>())
    }

    /// The protocol named `name` (as `txlab list` prints it), or an error naming every one.
    pub fn from_name(name: &str) -> Result<ProtocolKind, crate::error::Error> {
        ProtocolKind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            let names: Vec<&str> = ProtocolKind::ALL.iter().map(|k| k.name()).collect();
            crate::error::Error::Config(format!(
                "no protocol is named '{name}' (the protocols: {})",
                names.join(", ")
            ))
        })
    }

    /// Creates a database of this protocol as `config` says and runs `program` on it: the way
    /// to use a protocol chosen at run time (by [`ProtocolKind::from_name`], say) with one
    /// code path, monomorphised for each protocol. Fails (before `program` runs) with the
    /// database's error: an option the protocol does not take, a bad value, a bad schema.
    ///
    /// ```
    /// use txlab::prelude::*;
    /// use txlab::protocols::{DatabaseConfig, ProtocolKind, WithDatabase};
    ///
    /// /// Inserts a row and reads it back, whatever the protocol.
    /// struct RoundTrip;
    ///
    /// impl WithDatabase for RoundTrip {
    ///     type Output = Result<Option<u64>, Error>;
    ///     fn run<P: Protocol>(self, db: Database<P>) -> Self::Output {
    ///         let t = db.table_id("kv").expect("declared");
    ///         let mut w = db.worker()?;
    ///         let mut retry = db.retry();
    ///         retry.run(&mut w, |w| w.insert(t, 7, &42u64.to_le_bytes()).map(drop))?;
    ///         let row = retry.run(&mut w, |w| w.read(t, 7, |r| r[0] as u64))?;
    ///         Ok(row)
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), Error> {
    /// let tables = [TableSpec::new("kv", 8, 100)];
    /// let config = DatabaseConfig::new(&tables).option("snapshot-epochs", "25");
    /// let kind = ProtocolKind::from_name("silo")?;
    /// assert_eq!(kind.create(&config, RoundTrip)??, Some(42));
    /// // An option the protocol does not take is refused.
    /// let err = ProtocolKind::from_name("2pl-nowait")?.create(&config, RoundTrip).unwrap_err();
    /// assert_eq!(err.to_string(), "2pl-nowait: --opt snapshot-epochs: not an option of this protocol");
    /// // So is a name no protocol has.
    /// let err = ProtocolKind::from_name("sillo").unwrap_err().to_string();
    /// assert!(err.starts_with("no protocol is named 'sillo' (the protocols: nocc, 2pl-nowait, "));
    /// # Ok(())
    /// # }
    /// ```
    pub fn create<F: WithDatabase>(
        self,
        config: &DatabaseConfig<'_>,
        program: F,
    ) -> Result<F::Output, crate::error::Error> {
        fn create<P: crate::engine::Protocol, F: WithDatabase>(
            config: &DatabaseConfig<'_>,
            program: F,
        ) -> Result<F::Output, crate::error::Error> {
            Ok(program.run(config.build::<P>()?))
        }
        crate::with_protocol!(self, P => create::<P, F>(config, program))
    }

    /// Checks `pairs` (name, value) as this protocol's options.
    pub fn check_options(self, pairs: &[(String, String)]) -> Result<(), String> {
        use crate::engine::{Protocol, ProtocolOptions};
        fn check<P: Protocol>(pairs: &[(String, String)]) -> Result<(), String> {
            P::Options::from_pairs(pairs).map(drop)
        }
        crate::with_protocol!(self, P => check::<P>(pairs))
    }

    /// Checks that a run of `threads` workers can use the options `pairs` (already checked
    /// by [`ProtocolKind::check_options`]).
    pub fn check_threads(self, pairs: &[(String, String)], threads: usize) -> Result<(), String> {
        use crate::engine::{Protocol, ProtocolOptions};
        fn check<P: Protocol>(pairs: &[(String, String)], threads: usize) -> Result<(), String> {
            P::Options::from_pairs(pairs)?.check_threads(threads)
        }
        crate::with_protocol!(self, P => check::<P>(pairs, threads))
    }

    /// The backoff the protocol runs with unless a run names one.
    pub fn default_backoff(self) -> crate::engine::Backoff {
        use crate::engine::Protocol;
        fn of<P: Protocol>() -> crate::engine::Backoff {
            P::DEFAULT_BACKOFF
        }
        crate::with_protocol!(self, P => of::<P>())
    }

    /// What the protocol supports.
    pub fn caps(self) -> crate::engine::Capabilities {
        use crate::engine::Protocol;
        match self {
            ProtocolKind::Nocc => nocc::Nocc::CAPS,
            ProtocolKind::TwoPlNoWait => two_pl::TwoPlNoWait::CAPS,
            ProtocolKind::TwoPlWaitDie => two_pl::TwoPlWaitDie::CAPS,
            ProtocolKind::TwoPlOrdered => two_pl_ordered::TwoPlOrdered::CAPS,
            ProtocolKind::Silo => silo::Silo::CAPS,
            ProtocolKind::TicToc => tictoc::TicToc::CAPS,
            ProtocolKind::Mocc => mocc::Mocc::CAPS,
            ProtocolKind::Si => si::Si::CAPS,
            ProtocolKind::ErmiaSsn => ermia_ssn::ErmiaSsn::CAPS,
            ProtocolKind::ErmiaSsi => ermia_ssi::ErmiaSsi::CAPS,
            ProtocolKind::Hekaton => hekaton::Hekaton::CAPS,
            ProtocolKind::Cicada => cicada::Cicada::CAPS,
            ProtocolKind::Bohm => bohm::Bohm::CAPS,
            ProtocolKind::Ic3 => ic3::Ic3::CAPS,
        }
    }
}

/// Runs `$body` with `$P` bound to the protocol type of `$kind` (a [`ProtocolKind`]).
///
/// ```
/// use txlab::protocols::ProtocolKind;
/// use txlab::engine::Protocol;
/// fn name<P: Protocol>() -> &'static str { P::NAME }
/// let n = txlab::with_protocol!(ProtocolKind::Silo, P => name::<P>());
/// assert_eq!(n, "silo");
/// ```
#[macro_export]
macro_rules! with_protocol {
    ($kind:expr, $P:ident => $body:expr) => {
        match $kind {
            $crate::protocols::ProtocolKind::Nocc => {
                type $P = $crate::protocols::nocc::Nocc;
                $body
            }
            $crate::protocols::ProtocolKind::TwoPlNoWait => {
                type $P = $crate::protocols::two_pl::TwoPlNoWait;
                $body
            }
            $crate::protocols::ProtocolKind::TwoPlWaitDie => {
                type $P = $crate::protocols::two_pl::TwoPlWaitDie;
                $body
            }
            $crate::protocols::ProtocolKind::TwoPlOrdered => {
                type $P = $crate::protocols::two_pl_ordered::TwoPlOrdered;
                $body
            }
            $crate::protocols::ProtocolKind::Silo => {
                type $P = $crate::protocols::silo::Silo;
                $body
            }
            $crate::protocols::ProtocolKind::TicToc => {
                type $P = $crate::protocols::tictoc::TicToc;
                $body
            }
            $crate::protocols::ProtocolKind::Mocc => {
                type $P = $crate::protocols::mocc::Mocc;
                $body
            }
            $crate::protocols::ProtocolKind::Si => {
                type $P = $crate::protocols::si::Si;
                $body
            }
            $crate::protocols::ProtocolKind::ErmiaSsn => {
                type $P = $crate::protocols::ermia_ssn::ErmiaSsn;
                $body
            }
            $crate::protocols::ProtocolKind::ErmiaSsi => {
                type $P = $crate::protocols::ermia_ssi::ErmiaSsi;
                $body
            }
            $crate::protocols::ProtocolKind::Hekaton => {
                type $P = $crate::protocols::hekaton::Hekaton;
                $body
            }
            $crate::protocols::ProtocolKind::Cicada => {
                type $P = $crate::protocols::cicada::Cicada;
                $body
            }
            $crate::protocols::ProtocolKind::Bohm => {
                type $P = $crate::protocols::bohm::Bohm;
                $body
            }
            $crate::protocols::ProtocolKind::Ic3 => {
                type $P = $crate::protocols::ic3::Ic3;
                $body
            }
        }
    };
}
