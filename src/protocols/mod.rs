//! Concurrency-control protocols, one module each, sharing `common`.
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
pub mod mocc;
pub mod nocc;
pub mod si;
pub mod silo;
pub mod tictoc;
pub mod two_pl;
pub mod two_pl_ordered;

use serde::Serialize;

/// Every implemented protocol, as chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
pub enum ProtocolKind {
    /// No concurrency control.
    #[value(name = "nocc")]
    #[serde(rename = "nocc")]
    Nocc,
    /// Strict 2PL, no-wait.
    #[value(name = "2pl-nowait")]
    #[serde(rename = "2pl-nowait")]
    TwoPlNoWait,
    /// Strict 2PL, wait-die.
    #[value(name = "2pl-waitdie")]
    #[serde(rename = "2pl-waitdie")]
    TwoPlWaitDie,
    /// Strict 2PL, every lock taken at begin in one global order from the declared access set.
    #[value(name = "2pl-ordered")]
    #[serde(rename = "2pl-ordered")]
    TwoPlOrdered,
    /// Silo OCC.
    #[value(name = "silo")]
    #[serde(rename = "silo")]
    Silo,
    /// TicToc OCC.
    #[value(name = "tictoc")]
    #[serde(rename = "tictoc")]
    TicToc,
    /// MOCC: Silo plus temperature-driven pessimistic locks.
    #[value(name = "mocc")]
    #[serde(rename = "mocc")]
    Mocc,
    /// Snapshot isolation (multi-version).
    #[value(name = "si")]
    #[serde(rename = "si")]
    Si,
    /// ERMIA's snapshot isolation with the serial safety net (multi-version, serializable).
    #[value(name = "ermia-ssn")]
    #[serde(rename = "ermia-ssn")]
    ErmiaSsn,
    /// ERMIA's serializable snapshot isolation (multi-version, serializable).
    #[value(name = "ermia-ssi")]
    #[serde(rename = "ermia-ssi")]
    ErmiaSsi,
    /// Hekaton's optimistic multi-version concurrency control (serializable).
    #[value(name = "hekaton")]
    #[serde(rename = "hekaton")]
    Hekaton,
    /// Cicada's optimistic multi-version timestamp ordering (serializable).
    #[value(name = "cicada")]
    #[serde(rename = "cicada")]
    Cicada,
    /// BOHM: deterministic multi-version execution of sequenced batches.
    #[value(name = "bohm")]
    #[serde(rename = "bohm")]
    Bohm,
    /// IC3: piece-wise OCC with dependency tracking, constrained by static analysis.
    #[value(name = "ic3")]
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

    /// Checks `pairs` (name, value) as this protocol's options.
    pub fn check_options(self, pairs: &[(String, String)]) -> Result<(), String> {
        use crate::engine::{Protocol, ProtocolOptions};
        fn check<P: Protocol>(pairs: &[(String, String)]) -> Result<(), String> {
            P::Options::from_pairs(pairs).map(drop)
        }
        crate::with_protocol!(self, P => check::<P>(pairs))
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
