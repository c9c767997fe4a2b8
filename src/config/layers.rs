//! Configuration that composes: the files of one config (each main file, then its drop-ins
//! `<file>.d/*.toml` in lexical order, systemd's naming: systemd.unit(5) "drop-in"), parsed
//! one by one and merged into one spanned tree, and the [`SourceMap`] that turns a byte offset
//! of that tree back into `FILE:LINE:COL`.
//!
//! Every file's spans are shifted by the file's base offset in the map, so the merged tree
//! carries its origin in every span: the schema walk, serde and `validate` run on it unchanged,
//! and a problem is located in the file that set the key.
//!
//! Merge rules (docs/interface.md §4.0): a later file's tables merge key by key into the
//! earlier ones (a value replaces, a table merges, a list replaces), containers are matched by
//! `name` (an unmatched one is added), a probe's or hook's action replaces the earlier action,
//! and a pod with `override = "replace"` replaces the earlier pod whole.
//!
//! Owns the listing and reading of drop-in directories; drop-ins are checked like the config
//! file ([`crate::trust`]) when vigil runs as root. Must not judge values: that is `schema` and
//! `validate`.

use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use super::error::{ConfigError, ConfigErrors, Problem, line_col};

/// One file of a config: where it is, its text, and where its offsets start in the map.
#[derive(Debug, Clone)]
pub(crate) struct SourceFile {
    pub path: PathBuf,
    pub text: String,
    /// Whether its string values take variables (files read from disk, the bundled default;
    /// not a text handed over in memory, such as a converted manifest).
    pub expand: bool,
    /// The directory its relative paths are resolved against (`None`: left as written).
    pub dir: Option<PathBuf>,
    base: usize,
}

/// The files of one config, laid end to end in one offset space (one byte apart, so an
/// offset at the end of a file is still that file's).
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// Add a text that is taken literally (no variables, paths as written).
    pub fn push_literal(&mut self, path: PathBuf, text: String) {
        self.push(SourceFile {
            path,
            text,
            expand: false,
            dir: None,
            base: 0,
        });
    }

    /// Add a file read from `path`: variables expanded, relative paths resolved against its
    /// directory (made absolute from vigil's working directory).
    pub fn push_file(&mut self, path: PathBuf, text: String) {
        let dir = std::path::absolute(&path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        self.push(SourceFile {
            path,
            text,
            expand: true,
            dir,
            base: 0,
        });
    }

    /// The bundled default: variables expanded, no directory.
    pub fn push_bundled(&mut self, path: PathBuf, text: String) {
        self.push(SourceFile {
            path,
            text,
            expand: true,
            dir: None,
            base: 0,
        });
    }

    fn push(&mut self, mut file: SourceFile) {
        file.base = self.files.last().map_or(0, |f| f.base + f.text.len() + 1);
        self.files.push(file);
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// Where `file`'s offsets start.
    pub fn base_of(&self, file: &SourceFile) -> usize {
        file.base
    }

    /// The file an offset of the merged tree belongs to.
    pub fn file_of(&self, offset: usize) -> Option<&SourceFile> {
        self.files.iter().rev().find(|f| f.base <= offset)
    }

    /// `(file, line, column)` of an offset of the merged tree.
    pub fn locate(&self, offset: usize) -> Option<(&Path, usize, usize)> {
        let f = self.file_of(offset)?;
        let (line, col) = line_col(&f.text, offset - f.base);
        Some((&f.path, line, col))
    }

    /// Locate and sort problems (by file and position, then field) into [`ConfigErrors`].
    pub fn errors(&self, mut problems: Vec<Problem>) -> ConfigErrors {
        problems.sort_by(|a, b| {
            (a.span.start, &a.field, &a.message).cmp(&(b.span.start, &b.field, &b.message))
        });
        problems.dedup();
        let fallback = self
            .files
            .first()
            .map_or_else(PathBuf::new, |f| f.path.clone());
        ConfigErrors(
            problems
                .into_iter()
                .map(|p| {
                    let (path, line, col) = match self.locate(p.span.start) {
                        Some((path, line, col)) => (path.to_path_buf(), line, col),
                        None => (fallback.clone(), 0, 0),
                    };
                    ConfigError {
                        path,
                        line,
                        col,
                        field: p.field,
                        message: p.message,
                    }
                })
                .collect(),
        )
    }
}

/// `main`, then the `*.toml` files of `main.d/` in lexical order of their names (a missing
/// directory has none). Other names in the directory (editors' backups, `README`) are skipped.
pub(crate) fn with_drop_ins(main: &Path) -> Result<Vec<PathBuf>, ConfigErrors> {
    let mut dir = main.as_os_str().to_owned();
    dir.push(".d");
    let dir = PathBuf::from(dir);
    let mut out = vec![main.to_path_buf()];
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => {
            return Err(ConfigErrors::unlocated(
                &dir,
                format!("cannot read drop-in directory: {e}"),
            ));
        }
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            ConfigErrors::unlocated(&dir, format!("cannot read drop-in directory: {e}"))
        })?;
        let name = entry.file_name();
        let bytes = name.as_encoded_bytes();
        if bytes.ends_with(b".toml") && !bytes.starts_with(b".") {
            names.push(name);
        }
    }
    names.sort();
    out.extend(names.into_iter().map(|n| dir.join(n)));
    Ok(out)
}

/// Read one file of a config: a drop-in (`trusted` false) is first checked like the config
/// file when vigil runs as root; the main file was checked by the caller before it asked.
pub(crate) fn read_file(
    path: &Path,
    what: &'static str,
    check: bool,
) -> Result<String, ConfigErrors> {
    if check && nix::unistd::Uid::effective().is_root() {
        crate::trust::check(what, path, crate::trust::Target::File)
            .map_err(|e| ConfigErrors::unlocated(path, e.to_string()))?;
    }
    std::fs::read_to_string(path)
        .map_err(|e| ConfigErrors::unlocated(path, format!("cannot read config file: {e}")))
}

/// Parse one file's text into a tree whose spans are offsets of the map (`base` added).
pub(crate) fn parse<'a>(text: &'a str, base: usize) -> Result<DeTable<'a>, Problem> {
    match DeTable::parse(text) {
        Ok(doc) => Ok(shift_table(doc.into_inner(), base)),
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            Err(Problem::new(
                span.start + base..span.end + base,
                "",
                format!("TOML syntax error: {}", e.message().trim_end()),
            ))
        }
    }
}

fn shift<T>(v: Spanned<T>, by: usize, f: impl FnOnce(T) -> T) -> Spanned<T> {
    let span = v.span();
    Spanned::new(span.start + by..span.end + by, f(v.into_inner()))
}

fn shift_value<'a>(v: DeValue<'a>, by: usize) -> DeValue<'a> {
    match v {
        DeValue::Table(t) => DeValue::Table(shift_table(t, by)),
        DeValue::Array(mut items) => {
            for item in items.iter_mut() {
                let old = std::mem::replace(item, Spanned::new(0..0, DeValue::Boolean(false)));
                *item = shift(old, by, |v| shift_value(v, by));
            }
            DeValue::Array(items)
        }
        other => other,
    }
}

fn shift_table<'a>(t: DeTable<'a>, by: usize) -> DeTable<'a> {
    t.into_iter()
        .map(|(k, v)| (shift(k, by, |k| k), shift(v, by, |v| shift_value(v, by))))
        .collect()
}

/// The actions of a probe or hook: one of them in a later file replaces the earlier one.
const ACTIONS: [&str; 5] = ["exec", "http_get", "tcp_socket", "grpc", "sleep"];
/// Keys whose tables hold one action.
const WITH_ACTION: [&str; 5] = [
    "startup_probe",
    "liveness_probe",
    "readiness_probe",
    "post_start",
    "pre_stop",
];
/// Arrays of tables matched by `name` when merged.
const BY_NAME: [&str; 2] = ["containers", "init_containers"];

/// Merge `over` (a later file's tree, its `override` keys taken out) into `base`; the pods
/// `replace` names are removed from `base` first.
pub(crate) fn merge<'a>(base: &mut DeTable<'a>, over: DeTable<'a>, replace: &[String]) {
    if let Some(pods) = base.get_mut("pods")
        && let DeValue::Table(pods) = pods.get_mut()
    {
        for name in replace {
            pods.remove(name.as_str());
        }
    }
    merge_table(base, over);
}

/// Strip and check the `override` keys of the pods of one file's tree (the first file's too:
/// there is nothing for it to override, but its value is still checked); returns the pods
/// to be replaced whole.
pub(crate) fn take_overrides<'a>(
    doc: &mut DeTable<'a>,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(pods) = doc.get_mut("pods") else {
        return out;
    };
    let DeValue::Table(pods) = pods.get_mut() else {
        return out;
    };
    for (name, pod) in pods.iter_mut() {
        let DeValue::Table(pod) = pod.get_mut() else {
            continue;
        };
        let Some(value) = pod.remove("override") else {
            continue;
        };
        let field = super::schema::join(&super::schema::join("pods", name.get_ref()), "override");
        match value.get_ref() {
            DeValue::String(s) if s == "merge" => {}
            DeValue::String(s) if s == "replace" => out.push(name.get_ref().to_string()),
            _ => {
                problems.push(Problem::new(
                    value.span(),
                    field,
                    "expected \"merge\" or \"replace\"",
                ));
            }
        }
    }
    out
}

/// A later `value` for the key `key` over an earlier `base`.
fn merge_value<'a>(base: &mut Spanned<DeValue<'a>>, over: Spanned<DeValue<'a>>, key: &str) {
    let by_name = BY_NAME.contains(&key);
    match (base.get_mut(), over.get_ref()) {
        (DeValue::Table(b), DeValue::Table(o)) => {
            if WITH_ACTION.contains(&key)
                && o.keys().any(|k| ACTIONS.contains(&k.get_ref().as_ref()))
            {
                for action in ACTIONS {
                    b.remove(action);
                }
            }
            let DeValue::Table(o) = over.into_inner() else {
                return;
            };
            merge_table(b, o);
        }
        (DeValue::Array(b), DeValue::Array(_)) if by_name => {
            let DeValue::Array(o) = over.into_inner() else {
                return;
            };
            merge_by_name(b, o);
        }
        _ => *base = over,
    }
}

fn merge_table<'a>(base: &mut DeTable<'a>, over: DeTable<'a>) {
    for (key, value) in over {
        let name = key.get_ref().to_string();
        match base.get_mut(name.as_str()) {
            Some(old) => merge_value(old, value, &name),
            None => {
                base.insert(key, value);
            }
        }
    }
}

fn name_of(v: &DeValue<'_>) -> Option<String> {
    match v {
        DeValue::Table(t) => t
            .get("name")
            .and_then(|n| n.get_ref().as_str())
            .map(str::to_string),
        _ => None,
    }
}

/// Containers: each later one merges into the earlier one of the same `name`, or is added.
fn merge_by_name<'a>(base: &mut DeArray<'a>, over: DeArray<'a>) {
    for item in over {
        let found = name_of(item.get_ref()).and_then(|n| {
            base.iter()
                .position(|b| name_of(b.get_ref()).as_deref() == Some(n.as_str()))
        });
        match found {
            Some(i) => merge_value(&mut base.as_mut()[i], item, ""),
            None => base.push(item),
        }
    }
}
