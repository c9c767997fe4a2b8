//! Variables in config values (`${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?message}`,
//! `${VAR?message}`, `$$` for a `$`), as docker compose writes them (compose-spec
//! "Interpolation"), and relative paths resolved against the directory of the file that wrote
//! them.
//!
//! Values come from vigil's environment, then from the variable files: `[supervisor]
//! env_files` when written, else a `.env` beside the (first) config file when there is one —
//! in `env_file`'s format ([`super::envfile`]), checked like the config file when vigil runs as
//! root. Only string values of files read from disk (and of the bundled default) are expanded,
//! keys never; the contents of a container's `env_file` are read at spawn, literally.
//!
//! Owns the expansion, the walk of the merged tree and the reading of the variable files. Must
//! not judge values: a resolved path is still checked by `validate`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use super::error::{ConfigErrors, Problem};
use super::layers::SourceMap;
use super::schema::join;

/// Largest variable file read (as `env_file`'s bound).
const MAX_BYTES: u64 = 1024 * 1024;

/// Keys whose string values are paths on this host; a relative one is resolved against the
/// directory of the file that wrote it. `cgroup_root` only when it is not a keyword.
const PATH_KEYS: [&str; 9] = [
    "socket",
    "log_dir",
    "cgroup_root",
    "working_dir",
    "env_file",
    "termination_message_path",
    "ca_file",
    "env_files",
    "pod_dir",
];

/// Tables whose keys are free (names of variables, headers, pods, limits): their keys are never
/// path keys.
const FREE_KEYS: [&str; 4] = ["env", "headers", "depends_on", "rlimits"];

/// Where variables come from: the environment first, then the variable files (later files win).
pub(crate) struct Vars {
    files: BTreeMap<String, String>,
    env: fn(&str) -> Option<String>,
}

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Vars {
    fn get(&self, name: &str) -> Option<String> {
        (self.env)(name).or_else(|| self.files.get(name).cloned())
    }
}

/// How deep `${A:-${B:-…}}` may nest: a bound on the recursion whatever a file holds.
const MAX_NESTING: usize = 8;

/// Expand one string. `Err` is the message: `${X} is not set`, or what is malformed. A default
/// or message is itself expanded, so `${DATA:-${HOME}/data}` nests as compose's does.
pub(crate) fn expand(s: &str, vars: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    expand_at(s, &vars, 0, Replica::Variable)
}

/// What `${replica}` is where a string is expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replica {
    /// Outside the pods: a variable like any other.
    Variable,
    /// In a pod without `replicas`: refused.
    Refused,
    /// In a pod with `replicas`: kept for each replica's own expansion
    /// (`config::replicas`), so the result is itself a template — a literal `$` is written
    /// `$$` again, and only `${replica}` is left to expand.
    Kept,
}

/// The variable every string of a pod with `replicas` may name: the replica's index.
pub(crate) const REPLICA_VAR: &str = "replica";

/// [`expand`], with `${replica}` as `replica` says.
pub(crate) fn expand_with(
    s: &str,
    vars: impl Fn(&str) -> Option<String>,
    replica: Replica,
) -> Result<String, String> {
    expand_at(s, &vars, 0, replica)
}

fn expand_at(
    s: &str,
    vars: &impl Fn(&str) -> Option<String>,
    depth: usize,
    replica: Replica,
) -> Result<String, String> {
    if depth > MAX_NESTING {
        return Err(format!(
            "${{…}} nested more than {MAX_NESTING} deep (write $$ for a literal $)"
        ));
    }
    // A literal `$` of the result: `$$` again in a template.
    let dollar = if replica == Replica::Kept { "$$" } else { "$" };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push_str(dollar);
            rest = r;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            out.push_str(dollar);
            rest = after;
            continue;
        };
        let Some(end) = closing_brace(body) else {
            return Err("unterminated ${ (write $$ for a literal $)".to_string());
        };
        let inner = &body[..end];
        let names_replica = inner
            .strip_prefix(REPLICA_VAR)
            .is_some_and(|op| !op.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
        match replica {
            Replica::Kept if names_replica => {
                if inner != REPLICA_VAR {
                    return Err(format!(
                        "${{{inner}}}: the replica's index is always set: write ${{{REPLICA_VAR}}}"
                    ));
                }
                out.push_str("${replica}");
            }
            Replica::Refused if names_replica => {
                return Err(format!(
                    "${{{inner}}}: ${{{REPLICA_VAR}}} is the index of a replica, set only in a \
                     pod with `replicas` (write $$ for a literal $)"
                ));
            }
            _ => out.push_str(&reference(inner, vars, depth, replica)?),
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where the `}` closing a `${` is in `body` (the text after the `${`): the first one not
/// closing a nested `${`, skipping `$$`.
fn closing_brace(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut open = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'$', Some(b'$')) => i += 2,
            (b'$', Some(b'{')) => {
                open += 1;
                i += 2;
            }
            (b'}', _) if open == 0 => return Some(i),
            (b'}', _) => {
                open -= 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// The value of one `${…}` (its inside given); a default or message used is expanded in turn.
/// In a template (`Replica::Kept`) the value is one too: a variable's `$` is written `$$`.
fn reference(
    inner: &str,
    vars: &impl Fn(&str) -> Option<String>,
    depth: usize,
    replica: Replica,
) -> Result<String, String> {
    let nested = |text: &str| expand_at(text, vars, depth + 1, replica);
    let vars = |name: &str| {
        let value = vars(name);
        match replica {
            Replica::Kept => value.map(|v| v.replace('$', "$$")),
            _ => value,
        }
    };
    let name_len = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    let (name, op) = inner.split_at(name_len);
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !valid {
        return Err(format!(
            "${{{inner}}}: not a variable name (letters, digits and _, not starting with a \
             digit; write $$ for a literal $)"
        ));
    }
    let value = vars(name);
    let set_nonempty = value.as_deref().is_some_and(|v| !v.is_empty());
    let unset = |message: &str| -> String {
        if message.is_empty() {
            return format!("${{{name}}} is not set");
        }
        match nested(message) {
            Ok(message) => format!("${{{name}}} is not set: {message}"),
            Err(problem) => problem,
        }
    };
    if op.is_empty() {
        return value.ok_or_else(|| unset(""));
    }
    if let Some(default) = op.strip_prefix(":-") {
        return match value.filter(|_| set_nonempty) {
            Some(v) => Ok(v),
            None => nested(default),
        };
    }
    if let Some(default) = op.strip_prefix('-') {
        return match value {
            Some(v) => Ok(v),
            None => nested(default),
        };
    }
    if let Some(message) = op.strip_prefix(":?") {
        return value.filter(|_| set_nonempty).ok_or_else(|| unset(message));
    }
    if let Some(message) = op.strip_prefix('?') {
        return value.ok_or_else(|| unset(message));
    }
    Err(format!(
        "${{{inner}}}: expected ${{{name}}}, ${{{name}:-default}} or ${{{name}:?message}} \
         (write $$ for a literal $)"
    ))
}

/// Read the variable files of the config in `map` whose merged tree is `doc`: `[supervisor]
/// env_files` (each relative one against its file's directory), else `.env` beside the first
/// file. A file that cannot be used is a problem (located at its `env_files` entry) or, for
/// `.env`, an error naming it.
pub(crate) fn vars(
    doc: &DeTable<'_>,
    map: &SourceMap,
    problems: &mut Vec<Problem>,
) -> Result<Vars, ConfigErrors> {
    let mut files = BTreeMap::new();
    let listed = doc
        .get("supervisor")
        .and_then(|s| s.get_ref().get("env_files"))
        .and_then(|v| match v.get_ref() {
            DeValue::Array(items) => Some(items),
            _ => None,
        });
    match listed {
        Some(items) => {
            for (i, item) in items.iter().enumerate() {
                let Some(text) = item.get_ref().as_str() else {
                    continue; // the schema walk reports it
                };
                let Some(file) = map.file_of(item.span().start).filter(|f| f.expand) else {
                    continue; // a literal text reads no files
                };
                let field = format!("supervisor.env_files[{i}]");
                let dir = file.dir.clone();
                let path = resolve(text, dir.as_deref());
                match read_vars(&path) {
                    Ok(pairs) => files.extend(pairs),
                    Err(message) => problems.push(Problem::new(item.span(), field, message)),
                }
            }
        }
        None => {
            let first = map.files().first().filter(|f| f.expand);
            if let Some(dir) = first.and_then(|f| f.dir.as_deref()) {
                let path = dir.join(".env");
                if std::fs::symlink_metadata(&path).is_ok() {
                    let pairs = read_vars(&path)
                        .map_err(|m| ConfigErrors::unlocated(&path, format!(".env: {m}")))?;
                    files.extend(pairs);
                }
            }
        }
    }
    Ok(Vars {
        files,
        env: process_env,
    })
}

/// One variable file's pairs, or why it cannot be used (no value in the message).
fn read_vars(path: &Path) -> Result<Vec<(String, String)>, String> {
    if nix::unistd::Uid::effective().is_root() {
        crate::trust::check("variable file", path, crate::trust::Target::File)
            .map_err(|e| e.to_string())?;
    }
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_BYTES {
        return Err(format!(
            "{} is larger than {MAX_BYTES} bytes",
            path.display()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    super::envfile::parse(&bytes)
        .map_err(|(line, problem)| format!("{}:{line}: {problem}", path.display()))
}

/// `text` as a path: itself when absolute (or no directory is known), else joined to `dir`.
fn resolve(text: &str, dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(d) if !text.is_empty() && !text.starts_with('/') => d.join(text),
        _ => PathBuf::from(text),
    }
}

/// Expand every string value of the files that take variables, and resolve every relative path
/// against its file's directory; problems (unset variables, malformed references) go to
/// `problems`, located at the value.
pub(crate) fn resolve_tree(
    doc: &mut DeTable<'_>,
    map: &SourceMap,
    vars: &Vars,
    problems: &mut Vec<Problem>,
) {
    let walk = Walk {
        map,
        vars,
        replica: Replica::Variable,
    };
    walk_table(doc, "", false, &walk, problems);
}

/// What a walk carries down the tree.
struct Walk<'w> {
    map: &'w SourceMap,
    vars: &'w Vars,
    /// What `${replica}` is below here: a variable outside the pods, kept in a pod with
    /// `replicas`, refused in other pods.
    replica: Replica,
}

fn walk_table(
    table: &mut DeTable<'_>,
    path: &str,
    free: bool,
    walk: &Walk<'_>,
    problems: &mut Vec<Problem>,
) {
    for (key, value) in table.iter_mut() {
        let name = key.get_ref().as_ref();
        let field = join(path, name);
        let is_path = !free && PATH_KEYS.contains(&name);
        let free_below = !free && FREE_KEYS.contains(&name);
        if path == "pods" {
            // A pod's strings: templates when it has replicas.
            let replicated =
                matches!(value.get_ref(), DeValue::Table(t) if t.get("replicas").is_some());
            let below = Walk {
                replica: if replicated {
                    Replica::Kept
                } else {
                    Replica::Refused
                },
                ..*walk
            };
            walk_value(value, &field, is_path, free_below, &below, problems);
        } else {
            walk_value(value, &field, is_path, free_below, walk, problems);
        }
    }
}

fn walk_value(
    value: &mut toml::Spanned<DeValue<'_>>,
    field: &str,
    is_path: bool,
    free: bool,
    walk: &Walk<'_>,
    problems: &mut Vec<Problem>,
) {
    let span = value.span();
    let template = walk.replica == Replica::Kept;
    match value.get_mut() {
        DeValue::String(s) => {
            let Some(file) = walk.map.file_of(span.start) else {
                return;
            };
            // env_files is read before expansion: it takes no variables.
            let expanded = if file.expand && !field.starts_with("supervisor.env_files") {
                match expand_with(s, |n| walk.vars.get(n), walk.replica) {
                    Ok(v) => v,
                    Err(message) => {
                        problems.push(Problem::new(span, field, message));
                        return;
                    }
                }
            } else if template {
                // Taken literally: every `$` stays one, `${replica}` too.
                s.replace('$', "$$")
            } else {
                s.to_string()
            };
            let keyword =
                field == "supervisor.cgroup_root" && matches!(&*expanded, "auto" | "none");
            let resolved = if is_path && !keyword {
                let dir = match (template, file.dir.as_deref()) {
                    // The directory is literal text in a template too.
                    (true, Some(d)) => Some(PathBuf::from(d.to_string_lossy().replace('$', "$$"))),
                    (_, d) => d.map(Path::to_path_buf),
                };
                resolve(&expanded, dir.as_deref())
                    .into_os_string()
                    .into_string()
                    .unwrap_or(expanded)
            } else {
                expanded
            };
            if resolved != **s {
                *s = Cow::Owned(resolved);
            }
        }
        DeValue::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let item_field = format!("{field}[{i}]");
                walk_value(item, &item_field, is_path, free, walk, problems);
            }
        }
        DeValue::Table(t) => walk_table(t, field, free, walk, problems),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "DIR" => Some("/srv".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn references_defaults_required_and_escapes_expand_as_compose_does() {
        assert_eq!(expand("${DIR}/x", env).unwrap(), "/srv/x");
        assert_eq!(expand("$$DIR $${DIR} $", env).unwrap(), "$DIR ${DIR} $");
        assert_eq!(expand("$HOME $1 $(date)", env).unwrap(), "$HOME $1 $(date)");
        assert_eq!(expand("${NOPE:-/d}", env).unwrap(), "/d");
        assert_eq!(expand("${EMPTY:-/d}", env).unwrap(), "/d");
        assert_eq!(expand("${EMPTY-/d}", env).unwrap(), "");
        assert_eq!(expand("${NOPE-/d}", env).unwrap(), "/d");
        assert_eq!(expand("${EMPTY}", env).unwrap(), "");
        assert_eq!(expand("${DIR:?set it}", env).unwrap(), "/srv");
    }

    #[test]
    fn a_default_or_message_is_expanded_in_turn_and_may_nest() {
        assert_eq!(expand("${NOPE:-${DIR}/d}", env).unwrap(), "/srv/d");
        assert_eq!(expand("${NOPE:-${ALSO:-${DIR}}}x", env).unwrap(), "/srvx");
        assert_eq!(expand("${DIR:-${NOPE}}", env).unwrap(), "/srv");
        assert_eq!(expand("${NOPE-a $$b}", env).unwrap(), "a $b");
        // The first `}` not closing a nested `${` closes: a default holds no literal `}`.
        assert_eq!(expand("${NOPE-a $${b} c}", env).unwrap(), "a ${b c}");
        assert_eq!(expand("${NOPE:-}}", env).unwrap(), "}");
        assert_eq!(
            expand("${NOPE:?under ${DIR}}", env).unwrap_err(),
            "${NOPE} is not set: under /srv"
        );
        assert_eq!(
            expand("${NOPE:-${GONE}}", env).unwrap_err(),
            "${GONE} is not set"
        );
        assert_eq!(
            expand("${NOPE:-${DIR}", env).unwrap_err(),
            "unterminated ${ (write $$ for a literal $)"
        );
        let deep = format!("{}x{}", "${NOPE:-".repeat(20), "}".repeat(20));
        assert!(
            expand(&deep, env)
                .unwrap_err()
                .contains("nested more than 8 deep")
        );
        let hostile = format!("{}x", "${NOPE:-".repeat(100_000));
        assert!(expand(&hostile, env).is_err());
    }

    #[test]
    fn unset_and_malformed_references_say_what_is_wrong() {
        assert_eq!(
            expand("a ${NOPE} b", env).unwrap_err(),
            "${NOPE} is not set"
        );
        assert_eq!(
            expand("${NOPE:?the data directory}", env).unwrap_err(),
            "${NOPE} is not set: the data directory"
        );
        assert_eq!(
            expand("${EMPTY:?needed}", env).unwrap_err(),
            "${EMPTY} is not set: needed"
        );
        assert!(
            expand("${DIR", env)
                .unwrap_err()
                .starts_with("unterminated ${")
        );
        assert!(
            expand("${1X}", env)
                .unwrap_err()
                .contains("not a variable name")
        );
        assert!(
            expand("${#X}", env)
                .unwrap_err()
                .contains("not a variable name")
        );
        assert!(
            expand("${X:+y}", env)
                .unwrap_err()
                .contains("expected ${X}")
        );
    }
}
