//! The kinds of config values, and a walk of the parsed (spanned) TOML against the key tree of
//! `keys.rs` that reports EVERY unknown key and wrongly typed value at once.
//!
//! Why not only serde's `deny_unknown_fields`: serde stops at the first problem, and a user
//! fixing a file one error per run is what ripgrep-style "report everything" avoids. The walk
//! removes what it reported, so serde (into the raw tables of `keys.rs`) then runs on a clean
//! tree — still with `deny_unknown_fields`, as a second line of defence — and `validate`
//! checks the values of everything else in the same run.
//! The key lists and the raw structs both come from `keys.rs`, so they agree by construction
//! (`tests::every_key_deserializes` still uses every key once). Must not judge values (ranges,
//! names): that is `validate`.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::Problem;
use super::keys::RawConfig;
use super::values::edit_distance;

/// What a key's value must look like.
#[derive(Debug)]
pub(crate) enum Kind {
    Str,
    Int,
    /// Integer or float (all `*_seconds`).
    Num,
    Bool,
    /// A name or a number (`user`, `stop_signal`, `socket_mode`, quantities).
    StrOrInt,
    /// A number or a string (`cpu_max = "max"`).
    NumOrStr,
    StrArray,
    IntArray,
    Table(&'static [Field]),
    /// `[[...]]` or an array of inline tables.
    TableArray(&'static [Field]),
    /// A table whose keys are free (pods, env, depends_on) and values of one kind.
    Map(&'static Kind),
    /// An rlimit: a number, "unlimited", or a table of these keys (`{ soft, hard }`).
    Rlimit(&'static [Field]),
    /// A `depends_on` entry: a condition, or a table of these keys (`{ condition, restart,
    /// stop }`).
    Dependency(&'static [Field]),
}

#[derive(Debug)]
pub(crate) struct Field {
    pub name: &'static str,
    pub kind: Kind,
}

/// `parent.key`, quoting keys that are not bare TOML keys.
pub(crate) fn join(parent: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if parent.is_empty() {
        key
    } else {
        format!("{parent}.{key}")
    }
}

fn describe_value(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn describe_kind(k: &Kind) -> &'static str {
    match k {
        Kind::Str => "a string",
        Kind::Int => "an integer",
        Kind::Num => "a number",
        Kind::Bool => "a boolean (true or false)",
        Kind::StrOrInt => "a string or an integer",
        Kind::NumOrStr => "a number or a string",
        Kind::StrArray => "an array of strings",
        Kind::IntArray => "an array of integers",
        Kind::Table(_) | Kind::Map(_) => "a table",
        Kind::TableArray(_) => "an array of tables",
        Kind::Rlimit(_) => "an integer, \"unlimited\" or { soft = N, hard = N }",
        Kind::Dependency(_) => {
            "a condition (\"started\", \"ready\", \"completed\") or { condition = …, restart = …, stop = … }"
        }
    }
}

/// What the walk found: the problems, and the dotted paths of the entries it removed from the
/// tree so that serde and `validate` can still check everything else.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub problems: Vec<Problem>,
    pub removed: Vec<String>,
}

impl Walk {
    /// Whether a later problem on `field` is a consequence of an entry removed here (the
    /// entry itself, or something inside it), and so would only repeat what was said.
    pub fn explains(&self, field: &str) -> bool {
        self.removed.iter().any(|r| {
            field == r
                || field
                    .strip_prefix(r.as_str())
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

/// Walk the whole document, reporting every unknown key and wrongly typed value, and remove
/// those entries (a wrongly typed array element takes its whole array) so that the rest can
/// be deserialized and validated in the same run.
pub(crate) fn check_document(root: &mut DeTable<'_>) -> Walk {
    let mut walk = Walk::default();
    check_table(root, RawConfig::FIELDS, "", &mut walk);
    walk
}

fn check_table(table: &mut DeTable<'_>, fields: &[Field], path: &str, walk: &mut Walk) {
    let mut remove = Vec::new();
    for (key, value) in table.iter_mut() {
        let name = key.get_ref().as_ref();
        let field_path = join(path, name);
        let keep = match fields.iter().find(|fl| fl.name == name) {
            Some(fl) => check_value(value, &fl.kind, &field_path, walk),
            None => {
                walk.problems
                    .push(unknown_key(key, fields, field_path.clone()));
                false
            }
        };
        if !keep {
            remove.push(name.to_string());
            walk.removed.push(field_path);
        }
    }
    for name in remove {
        table.remove(name.as_str());
    }
}

fn unknown_key(
    key: &Spanned<std::borrow::Cow<'_, str>>,
    fields: &[Field],
    path: String,
) -> Problem {
    let name = key.get_ref().as_ref();
    let best = fields
        .iter()
        .map(|fl| (edit_distance(name, fl.name), fl.name))
        .min();
    let message = match best {
        Some((d, suggestion)) if d <= 2 || (d <= 4 && name.len() > 8) => {
            format!("unknown key {name:?}; did you mean {suggestion:?}?")
        }
        _ => {
            let names: Vec<&str> = fields.iter().map(|fl| fl.name).collect();
            format!(
                "unknown key {name:?}; expected one of: {}",
                names.join(", ")
            )
        }
    };
    Problem::new(key.span(), path, message)
}

/// Check one value against `kind`; false when it must be removed (wrong type, or an array
/// with a wrongly typed element).
fn check_value(value: &mut Spanned<DeValue<'_>>, kind: &Kind, path: &str, walk: &mut Walk) -> bool {
    let span = value.span();
    let v = value.get_mut();
    let ok = match (kind, &mut *v) {
        (Kind::Str, DeValue::String(_))
        | (Kind::Int, DeValue::Integer(_))
        | (Kind::Num, DeValue::Integer(_) | DeValue::Float(_))
        | (Kind::Bool, DeValue::Boolean(_))
        | (Kind::StrOrInt, DeValue::String(_) | DeValue::Integer(_))
        | (Kind::NumOrStr, DeValue::String(_) | DeValue::Integer(_) | DeValue::Float(_))
        | (Kind::Rlimit(_), DeValue::String(_) | DeValue::Integer(_))
        | (Kind::Dependency(_), DeValue::String(_)) => true,
        (Kind::StrArray, DeValue::Array(items)) => {
            return check_items(items.iter_mut(), &Kind::Str, path, walk);
        }
        (Kind::IntArray, DeValue::Array(items)) => {
            return check_items(items.iter_mut(), &Kind::Int, path, walk);
        }
        (Kind::Table(fields), DeValue::Table(t)) => {
            check_table(t, fields, path, walk);
            true
        }
        (Kind::TableArray(fields), DeValue::Array(items)) => {
            return check_items(items.iter_mut(), &Kind::Table(fields), path, walk);
        }
        (Kind::Map(inner), DeValue::Table(t)) => {
            let mut remove = Vec::new();
            for (k, item) in t.iter_mut() {
                let item_path = join(path, k.get_ref());
                if !check_value(item, inner, &item_path, walk) {
                    remove.push(k.get_ref().to_string());
                    walk.removed.push(item_path);
                }
            }
            for k in remove {
                t.remove(k.as_str());
            }
            true
        }
        (Kind::Rlimit(fields) | Kind::Dependency(fields), DeValue::Table(t)) => {
            check_table(t, fields, path, walk);
            true
        }
        _ => false,
    };
    if !ok {
        walk.problems.push(Problem::new(
            span,
            path,
            format!(
                "expected {}, found {}",
                describe_kind(kind),
                describe_value(v)
            ),
        ));
    }
    ok
}

/// Check every element (all are reported); false if any is wrongly typed.
fn check_items<'a, 'i: 'a>(
    items: impl Iterator<Item = &'a mut Spanned<DeValue<'i>>>,
    kind: &Kind,
    path: &str,
    walk: &mut Walk,
) -> bool {
    let mut all_ok = true;
    for (i, item) in items.enumerate() {
        all_ok &= check_value(item, kind, &format!("{path}[{i}]"), walk);
    }
    all_ok
}
