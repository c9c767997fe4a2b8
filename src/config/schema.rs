//! The key tree of a config file, and a walk of the parsed (spanned) TOML against it that
//! reports EVERY unknown key and wrongly typed value at once.
//!
//! Why not only serde's `deny_unknown_fields`: serde stops at the first problem, and a user
//! fixing a file one error per run is what ripgrep-style "report everything" avoids. The walk
//! removes what it reported, so serde (`raw.rs`) then runs on a clean tree — still with
//! `deny_unknown_fields`, as a second line of defence — and `validate` checks the values of
//! everything else in the same run.
//! The lists here and the structs in `raw.rs` must agree; `tests::every_key_deserializes`
//! keeps them honest. Must not judge values (ranges, names): that is `validate`.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::Problem;
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
    /// An rlimit: a number, "unlimited", or `{ soft, hard }`.
    Rlimit,
}

#[derive(Debug)]
pub(crate) struct Field {
    pub name: &'static str,
    pub kind: Kind,
}

const fn f(name: &'static str, kind: Kind) -> Field {
    Field { name, kind }
}

pub(crate) const BACKOFF: &[Field] = &[
    f("initial_seconds", Kind::Num),
    f("max_seconds", Kind::Num),
    f("reset_after_seconds", Kind::Num),
];

pub(crate) const SUPERVISOR: &[Field] = &[
    f("socket", Kind::Str),
    f("socket_mode", Kind::StrOrInt),
    f("socket_group", Kind::StrOrInt),
    f("admin_uids", Kind::IntArray),
    f("admin_gids", Kind::IntArray),
    f("cgroup_root", Kind::Str),
    f("cgroup_name", Kind::Str),
    f("log_dir", Kind::Str),
    f("log_max_file_bytes", Kind::StrOrInt),
    f("log_max_files", Kind::Int),
    f("log_buffer_bytes", Kind::StrOrInt),
    f("log_forward", Kind::Bool),
    f("shutdown_timeout_seconds", Kind::Num),
    f("oom_score_adj", Kind::StrOrInt),
    f("max_connections_per_uid", Kind::Int),
    f("client_idle_timeout_seconds", Kind::Num),
    f("client_fd_percent", Kind::Int),
    f("on_restart", Kind::Str),
];

pub(crate) const EXEC: &[Field] = &[f("command", Kind::StrArray)];

pub(crate) const HTTP_GET: &[Field] = &[
    f("host", Kind::Str),
    f("port", Kind::Int),
    f("path", Kind::Str),
    f("scheme", Kind::Str),
    f("headers", Kind::Map(&Kind::Str)),
    f("tls", Kind::Table(TLS)),
];

pub(crate) const TLS: &[Field] = &[f("ca_file", Kind::Str), f("server_name", Kind::Str)];

pub(crate) const GRPC: &[Field] = &[
    f("host", Kind::Str),
    f("port", Kind::Int),
    f("service", Kind::Str),
];

pub(crate) const TCP_SOCKET: &[Field] = &[f("host", Kind::Str), f("port", Kind::Int)];

pub(crate) const PROBE: &[Field] = &[
    f("exec", Kind::Table(EXEC)),
    f("http_get", Kind::Table(HTTP_GET)),
    f("tcp_socket", Kind::Table(TCP_SOCKET)),
    f("grpc", Kind::Table(GRPC)),
    f("initial_delay_seconds", Kind::Num),
    f("period_seconds", Kind::Num),
    f("timeout_seconds", Kind::Num),
    f("success_threshold", Kind::Int),
    f("failure_threshold", Kind::Int),
    f("termination_grace_period_seconds", Kind::Num),
];

pub(crate) const SLEEP: &[Field] = &[f("seconds", Kind::Num)];

/// A lifecycle hook: exactly one of these (Kubernetes `LifecycleHandler`).
pub(crate) const HOOK: &[Field] = &[
    f("exec", Kind::Table(EXEC)),
    f("http_get", Kind::Table(HTTP_GET)),
    f("sleep", Kind::Table(SLEEP)),
];

pub(crate) const LIFECYCLE: &[Field] = &[
    f("post_start", Kind::Table(HOOK)),
    f("pre_stop", Kind::Table(HOOK)),
];

pub(crate) const RESOURCES: &[Field] = &[
    f("memory_max", Kind::StrOrInt),
    f("memory_high", Kind::StrOrInt),
    f("swap_max", Kind::StrOrInt),
    f("pids_max", Kind::StrOrInt),
    f("cpu_max", Kind::NumOrStr),
    f("cpu_weight", Kind::Int),
    f("oom_group", Kind::Bool),
];

pub(crate) const RLIMIT_PAIR: &[Field] = &[f("soft", Kind::StrOrInt), f("hard", Kind::StrOrInt)];

pub(crate) const CONTAINER: &[Field] = &[
    f("name", Kind::Str),
    f("command", Kind::StrArray),
    f("image", Kind::Str),
    f("env", Kind::Map(&Kind::Str)),
    f("working_dir", Kind::Str),
    f("env_file", Kind::Str),
    f("user", Kind::StrOrInt),
    f("group", Kind::StrOrInt),
    f("stop_signal", Kind::StrOrInt),
    f("restart_policy", Kind::Str),
    f("termination_grace_period_seconds", Kind::Num),
    f("backoff", Kind::Table(BACKOFF)),
    f("max_restarts", Kind::Int),
    f("capabilities", Kind::StrArray),
    f("no_new_privs", Kind::Bool),
    f("rlimits", Kind::Map(&Kind::Rlimit)),
    f("resources", Kind::Table(RESOURCES)),
    f("startup_probe", Kind::Table(PROBE)),
    f("liveness_probe", Kind::Table(PROBE)),
    f("readiness_probe", Kind::Table(PROBE)),
    f("lifecycle", Kind::Table(LIFECYCLE)),
    f("termination_message_path", Kind::Str),
    f("termination_message_policy", Kind::Str),
];

pub(crate) const POD: &[Field] = &[
    f("restart_policy", Kind::Str),
    f("termination_grace_period_seconds", Kind::Num),
    f("backoff", Kind::Table(BACKOFF)),
    f("max_restarts", Kind::Int),
    f("depends_on", Kind::Map(&Kind::Str)),
    f("init_containers", Kind::TableArray(CONTAINER)),
    f("containers", Kind::TableArray(CONTAINER)),
];

pub(crate) const ROOT: &[Field] = &[
    f("supervisor", Kind::Table(SUPERVISOR)),
    f("pods", Kind::Map(&Kind::Table(POD))),
];

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
        Kind::Rlimit => "an integer, \"unlimited\" or { soft = N, hard = N }",
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
    check_table(root, ROOT, "", &mut walk);
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
        | (Kind::Rlimit, DeValue::String(_) | DeValue::Integer(_)) => true,
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
        (Kind::Rlimit, DeValue::Table(t)) => {
            check_table(t, RLIMIT_PAIR, path, walk);
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
