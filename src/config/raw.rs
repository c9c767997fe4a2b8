//! The value types of the serde mirror of the TOML file; its tables (`RawConfig`, …) are
//! generated in `keys.rs` from the one key list. Every value is wrapped in [`Spanned`] so
//! validation can point at it, and every field is optional so that a missing required key is
//! reported by `validate` with a good message rather than by serde.
//!
//! Numbers are kept wide (`i64`, `f64`) on purpose: ranges are checked in `validate`, which
//! names the field; a serde "invalid value: integer -1, expected u32" would not.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::keys::RawRlimitPair;

/// A table with free keys (env, depends_on, headers), in key order.
pub(crate) type StrMap = BTreeMap<Spanned<String>, Spanned<String>>;

/// A value that may be a name or a number (`user = "app"` / `user = 1000`; `"256Mi"` / `1024`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum StrOrInt {
    Int(i64),
    Str(String),
}

/// A number or a keyword (`cpu_max = 1.5` / `cpu_max = "max"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum NumOrStr {
    Num(f64),
    Str(String),
}

/// `nofile = 1024`, `core = "unlimited"` or `nofile = { soft = 1024, hard = 4096 }`. The pair
/// is a table of `keys.rs` like any other ([`RawRlimitPair`]); untagged, so its values are
/// not spanned (serde buffers the value).
/// `db = "ready"` or `db = { condition = "ready", restart = true, stop = true }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawDependency {
    Condition(String),
    Table(super::keys::RawDependsOn),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawRlimit {
    Both(StrOrInt),
    Pair(RawRlimitPair),
}
