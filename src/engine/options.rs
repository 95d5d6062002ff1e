//! Protocol options: each protocol's typed options struct (defaults as its paper), set from the
//! command line with one mechanism for all protocols, `--opt NAME=VALUE`, listed by `txlab list`
//! and recorded with every result.
//!
//! A protocol declares its options as [`OptionSpec`]s (name, values, default, help) and parses a
//! value by name in [`ProtocolOptions::set`]. Names are fixed: scripts use them.

use serde::Serialize;
use std::fmt::Debug;

/// One option of a protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OptionSpec {
    /// The name after `--opt` (`validation-lock`).
    pub name: &'static str,
    /// The values it takes, as shown to users (`wait|nowait`, `1 to 1000000`).
    pub values: &'static str,
    /// The default, as text.
    pub default: &'static str,
    /// What it does.
    pub help: &'static str,
}

/// A protocol's typed options.
pub trait ProtocolOptions: Clone + Default + Debug + Serialize + Send + Sync + 'static {
    /// Every option the protocol takes.
    const SPECS: &'static [OptionSpec];

    /// Sets option `name` (one of [`ProtocolOptions::SPECS`]) from `value`; an error says what
    /// the valid values are.
    fn set(&mut self, name: &str, value: &str) -> Result<(), String>;

    /// Whether a run of `threads` workers can use these options (an error says why not).
    /// Runs check it before they load anything.
    fn check_threads(&self, _threads: usize) -> Result<(), String> {
        Ok(())
    }

    /// The defaults with `pairs` (name, value) applied in order.
    fn from_pairs(pairs: &[(String, String)]) -> Result<Self, String> {
        let mut options = Self::default();
        for (name, value) in pairs {
            if !Self::SPECS.iter().any(|s| s.name == name) {
                return Err(format!("--opt {name}: not an option of this protocol"));
            }
            options.set(name, value)?;
        }
        Ok(options)
    }
}

/// Of `--opt` pairs, those that apply to `protocol`: the pairs for every protocol (`NAME`), and
/// those scoped to it (`PROTOCOL:NAME`) with the scope removed, in their order (a scoped pair
/// after an unscoped one of the same name overrides it).
pub fn pairs_for(pairs: &[(String, String)], protocol: &str) -> Vec<(String, String)> {
    pairs
        .iter()
        .filter_map(|(name, value)| match name.split_once(':') {
            None => Some((name.clone(), value.clone())),
            Some((scope, name)) if scope == protocol => Some((name.to_string(), value.clone())),
            Some(_) => None,
        })
        .collect()
}

/// The options of a protocol that has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NoOptions {}

impl ProtocolOptions for NoOptions {
    const SPECS: &'static [OptionSpec] = &[];

    fn set(&mut self, name: &str, _: &str) -> Result<(), String> {
        Err(format!("--opt {name}: not an option of this protocol"))
    }
}

/// Parses `value` as one of `choices` (name, value) for option `name`.
pub fn choice<T: Copy>(name: &str, value: &str, choices: &[(&str, T)]) -> Result<T, String> {
    choices.iter().find(|(n, _)| *n == value).map(|(_, v)| *v).ok_or_else(|| {
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        format!("--opt {name}={value}: expected {}", names.join(" or "))
    })
}

/// Parses `value` as `on` or `off` for option `name`.
pub fn switch(name: &str, value: &str) -> Result<bool, String> {
    choice(name, value, &[("on", true), ("off", false)])
}

/// Serializes a [`switch`] option as the word that sets it (`on` or `off`), so that results,
/// headers and CSV rows show what `--opt` takes (`#[serde(serialize_with = ...)]`).
pub fn serialize_switch<S: serde::Serializer>(on: &bool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(if *on { "on" } else { "off" })
}

/// Parses `value` as a number in `lo..=hi` for option `name`.
pub fn number<T>(name: &str, value: &str, lo: T, hi: T) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match value.parse::<T>() {
        Ok(v) if v >= lo && v <= hi => Ok(v),
        _ => Err(format!("--opt {name}={value}: expected a number from {lo} to {hi}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_and_numbers_name_what_is_valid() {
        let c = choice("validation-lock", "maybe", &[("wait", 0), ("nowait", 1)]);
        assert_eq!(c.unwrap_err(), "--opt validation-lock=maybe: expected wait or nowait");
        assert_eq!(choice("x", "nowait", &[("wait", 0), ("nowait", 1)]), Ok(1));
        assert_eq!(number("threshold", "7", 1u32, 10), Ok(7));
        assert_eq!(switch("x", "off"), Ok(false));
        assert_eq!(switch("x", "yes").unwrap_err(), "--opt x=yes: expected on or off");
        #[derive(Serialize)]
        struct Switches {
            #[serde(serialize_with = "serialize_switch")]
            a: bool,
            #[serde(serialize_with = "serialize_switch")]
            b: bool,
        }
        let json = serde_json::to_value(Switches { a: true, b: false }).unwrap();
        assert_eq!(json, serde_json::json!({"a": "on", "b": "off"}), "what --opt takes");
        assert_eq!(
            number("threshold", "70", 1u32, 10).unwrap_err(),
            "--opt threshold=70: expected a number from 1 to 10"
        );
        assert_eq!(
            NoOptions::from_pairs(&[("a".into(), "b".into())]).unwrap_err(),
            "--opt a: not an option of this protocol"
        );
    }
}
