//! `[supervisor] pod_dir`: a directory whose files are pods of the running supervisor, as the
//! kubelet's static pod directory (`staticPodPath`: it "creates/deletes static pods as
//! yaml/json files appear/disappear", kubernetes.io, "Create static Pods"). Each `*.toml`
//! file holds `[pods.NAME]` tables (nothing else); each `*.yaml`, `*.yml` or `*.json` file
//! holds Kubernetes Pods, converted as `vigil run -f` converts them.
//!
//! Every file is checked on its own, merged after the config it belongs to (so its pods may
//! use the config's variables and depend on the config's pods, and are located in the file),
//! and gives all its pods or is refused whole. A refused file never takes a pod of another
//! file or of the config down, and the pods it gave before (`previous`: a reload) stay as
//! they were. A pod name defined in two files, or in a file and the config, refuses the file
//! with both named; the definition that runs already keeps the name (else the config's, else
//! that of the file first in lexical order).
//!
//! Owns the listing, the reading (bounded by [`MAX_FILES`] and [`MAX_FILE_BYTES`]; checked
//! like the config when vigil runs as root, [`crate::trust`]) and the composing of the
//! directory's pods with the config. Must not watch the directory: the runtime shell does
//! (`shell::pod_dir`), and applies what this returns as a reload.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::config::spec::{Config, PodFile, PodSpec, ReplicaSetSpec};
use crate::config::{ConfigError, ConfigErrors, ConfigSource, Sources};

/// The most files of a `pod_dir` read (in lexical order; the files after them are refused).
pub const MAX_FILES: usize = 128;
/// The largest `pod_dir` file read.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// What a file of the directory is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `[pods.NAME]` tables.
    Toml,
    /// Kubernetes Pods (YAML or JSON).
    Manifest,
}

/// Whether a name in the directory is a file of pods (`*.toml`, `*.yaml`, `*.yml`,
/// `*.json`, not hidden: editors' temporary files such as `.x.toml.swp` or `x.toml~` are not).
pub fn is_pod_file(name: &OsStr) -> bool {
    kind_of(name).is_some()
}

fn kind_of(name: &OsStr) -> Option<Kind> {
    let b = name.as_encoded_bytes();
    if b.starts_with(b".") {
        return None;
    }
    if b.ends_with(b".toml") {
        Some(Kind::Toml)
    } else if [b".yaml".as_slice(), b".yml", b".json"]
        .iter()
        .any(|s| b.ends_with(s))
    {
        Some(Kind::Manifest)
    } else {
        None
    }
}

/// Why the directory gave no list of files.
struct ListError {
    message: String,
    /// The directory is gone (every file with it: their pods stop), not merely unreadable
    /// (their pods stay as they were).
    gone: bool,
}

/// The pod files of `dir`, in lexical order of their names.
fn list(dir: &Path) -> Result<Vec<PathBuf>, ListError> {
    if nix::unistd::Uid::effective().is_root() {
        crate::trust::check("pod_dir", dir, crate::trust::Target::PrivateDir).map_err(|e| {
            ListError {
                message: e.to_string(),
                gone: false,
            }
        })?;
    }
    let entries = std::fs::read_dir(dir).map_err(|e| ListError {
        message: format!("cannot read the pod_dir directory: {e}"),
        gone: e.kind() == std::io::ErrorKind::NotFound,
    })?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ListError {
            message: format!("cannot read the pod_dir directory: {e}"),
            gone: false,
        })?;
        if is_pod_file(&entry.file_name()) {
            names.push(entry.file_name());
        }
    }
    names.sort();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// The text of one file: a UTF-8 name; as root checked like the config file, opened without
/// following a link (a FIFO cannot block the open or the read), a regular file of at most
/// [`MAX_FILE_BYTES`], UTF-8.
fn read(path: &Path) -> Result<String, String> {
    // Its name is in every message and event about it: one that cannot be shown is not read.
    if path.file_name().and_then(OsStr::to_str).is_none() {
        return Err("its name is not UTF-8 text: not read".to_string());
    }
    if nix::unistd::Uid::effective().is_root() {
        crate::trust::check("pod_dir file", path, crate::trust::Target::File)
            .map_err(|e| e.to_string())?;
    }
    // The directory's own path may run through links (`/var/run`); the file's name may not.
    let real = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map_err(|e| format!("cannot open: {e}"))?
            .join(name),
        _ => path.to_path_buf(),
    };
    let file = crate::trust::open_without_links(&real).map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} bytes: a pod_dir file holds at most {MAX_FILE_BYTES} bytes",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "a pod_dir file holds at most {MAX_FILE_BYTES} bytes"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// A file that passed on its own: its pods, and every name it claims.
struct Candidate {
    /// The names written (`[pods.NAME]`, a Pod's `metadata.name`) and the pods they became
    /// (a pod with `replicas` as its replicas).
    names: BTreeSet<String>,
    pods: Vec<PodSpec>,
    sets: Vec<ReplicaSetSpec>,
    /// What it adds to the config's files (`vigil config` shows them merged: [`show`]).
    layer: Layer,
}

/// A file of the directory as it is merged after the config.
enum Layer {
    /// A TOML file, read as a drop-in is.
    Toml(String),
    /// A manifest: the config it was converted to, taken literally, and its own text.
    Manifest { toml: String, text: String },
}

fn unlocated(path: &Path, message: String) -> ConfigErrors {
    ConfigErrors::unlocated(path, message)
}

/// Where the config defines `name`, for a message: `FILE:LINE:COL` or the config's path.
fn config_place(source: &ConfigSource, config: &Config, name: &str) -> String {
    let field = crate::config::schema_join("pods", name);
    match crate::config::locate_in_source(source, &field) {
        Some((file, line, col)) => format!("{}:{line}:{col}", file.display()),
        None => config.source.display().to_string(),
    }
}

/// Reads and checks one file against the config (`main`, which checked as `config`).
fn candidate(
    path: &Path,
    main: &Sources,
    source: &ConfigSource,
    config: &Config,
) -> Result<Candidate, ConfigErrors> {
    let text = read(path).map_err(|m| unlocated(path, m))?;
    let kind = path.file_name().and_then(kind_of).unwrap_or(Kind::Toml);
    let (written, sources, layer) = match kind {
        Kind::Toml => (
            toml_names(path, &text, main)?,
            main.then_file(path, text.clone()),
            Layer::Toml(text),
        ),
        Kind::Manifest => {
            let (names, toml) = manifest(path, &text)?;
            let sources = main.then_literal(path, toml.clone());
            (names, sources, Layer::Manifest { toml, text })
        }
    };
    let in_config: BTreeSet<&str> = config
        .pods
        .iter()
        .map(|p| p.name.as_str())
        .chain(config.replica_sets.iter().map(|s| s.name.as_str()))
        .collect();
    let clashes: Vec<ConfigError> = written
        .iter()
        .filter(|n| in_config.contains(n.as_str()))
        .map(|n| ConfigError {
            path: path.to_path_buf(),
            line: 0,
            col: 0,
            field: crate::config::schema_join("pods", n),
            message: format!(
                "pod {n:?} is already defined in {}, which keeps it; this file is not applied",
                config_place(source, config, n)
            ),
        })
        .collect();
    if !clashes.is_empty() {
        return Err(ConfigErrors(clashes));
    }
    let checked = sources.check()?;
    let pods: Vec<PodSpec> = checked
        .pods
        .into_iter()
        .filter(|p| !in_config.contains(p.name.as_str()))
        .collect();
    let sets: Vec<ReplicaSetSpec> = checked
        .replica_sets
        .into_iter()
        .filter(|s| !in_config.contains(s.name.as_str()))
        .collect();
    let mut names = written;
    names.extend(pods.iter().map(|p| p.name.clone()));
    names.extend(sets.iter().map(|s| s.name.clone()));
    Ok(Candidate {
        names,
        pods,
        sets,
        layer,
    })
}

/// The pod names a TOML file writes; a key other than `pods` at its top is refused (located).
/// A syntax error is located by the config's own check.
fn toml_names(path: &Path, text: &str, main: &Sources) -> Result<BTreeSet<String>, ConfigErrors> {
    let doc = match toml::de::DeTable::parse(text) {
        Ok(doc) => doc,
        Err(_) => {
            return Err(main
                .then_file(path, text.to_string())
                .check()
                .err()
                .unwrap_or_else(|| unlocated(path, "TOML syntax error".to_string())));
        }
    };
    let mut names = BTreeSet::new();
    let mut others = Vec::new();
    for (key, value) in doc.get_ref() {
        let key = key.get_ref().as_ref();
        match value.get_ref() {
            toml::de::DeValue::Table(pods) if key == "pods" => {
                names.extend(pods.keys().map(|k| k.get_ref().to_string()));
            }
            _ => {
                let (line, col) =
                    crate::config::locate_field(text, &crate::config::schema_join("", key))
                        .unwrap_or((0, 0));
                others.push(ConfigError {
                    path: path.to_path_buf(),
                    line,
                    col,
                    field: key.to_string(),
                    message: "a pod_dir file holds only [pods.NAME] tables; [supervisor] and \
                              the rest belong in the config file"
                        .to_string(),
                });
            }
        }
    }
    if others.is_empty() {
        Ok(names)
    } else {
        Err(ConfigErrors(others))
    }
}

#[cfg(feature = "kubernetes")]
/// A manifest converted: the pods it names and the config text they became.
fn manifest(path: &Path, text: &str) -> Result<(BTreeSet<String>, String), ConfigErrors> {
    let out = super::from_kube::convert(text, path).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        unlocated(path, lines.join("\n"))
    })?;
    for w in &out.warnings {
        log::warn!("{}: {w}", path.display());
    }
    let names = out.pod_names.into_iter().collect();
    Ok((names, out.toml))
}

#[cfg(not(feature = "kubernetes"))]
fn manifest(path: &Path, _: &str) -> Result<(BTreeSet<String>, String), ConfigErrors> {
    Err(unlocated(
        path,
        "this vigil was built without the `kubernetes` feature: it cannot read manifests"
            .to_string(),
    ))
}

/// `config` (checked from `main`, read from `source`) with the pods of its `pod_dir`, and
/// every file refused (see the module doc for the rules). `previous`: the config running now.
pub fn add(
    config: Config,
    main: &Sources,
    source: &ConfigSource,
    previous: Option<&Config>,
) -> super::Loaded {
    compose(config, main, source, previous).0
}

/// `vigil config`: the merged, resolved config of `source` with the pods of its `pod_dir`
/// (each file merged after the config as it is checked: `config::show_sources`), `--origin`
/// naming the file of each key. A manifest's keys are located at its line that names the pod
/// (`metadata.name`; the conversion keeps no finer place). A refused file is an error, as for
/// `vigil check`.
pub fn show(
    source: &ConfigSource,
    opts: crate::config::ShowOptions,
) -> Result<String, ConfigErrors> {
    if matches!(source, ConfigSource::Manifest { .. }) {
        return crate::config::show(source, opts);
    }
    let main = Sources::read(source)?;
    let config = main.check()?;
    if config.supervisor.pod_dir.is_none() {
        return crate::config::show(source, opts);
    }
    let (loaded, mut layers) = compose(config, &main, source, None);
    if !loaded.refused.is_empty() {
        return Err(loaded.refused);
    }
    layers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut all = main;
    let mut manifests: Vec<(PathBuf, String, BTreeSet<String>)> = Vec::new();
    for (path, layer, names) in layers {
        all = match layer {
            Layer::Toml(text) => all.then_file(&path, text),
            Layer::Manifest { toml, text } => {
                let merged = all.then_literal(&path, toml);
                manifests.push((path, text, names));
                merged
            }
        };
    }
    let relocate = |path: &Path, field: &str| {
        let (_, text, names) = manifests.iter().find(|(p, _, _)| p == path)?;
        let pod = names.iter().find(|n| {
            let key = crate::config::schema_join("pods", n);
            field
                .strip_prefix(&key)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        })?;
        name_line(text, pod)
    };
    crate::config::show_sources(&all, opts, &relocate)
}

/// The line and column of the first `name: POD` of a manifest (YAML or JSON, quoted or not):
/// where the pod is named.
fn name_line(text: &str, pod: &str) -> Option<(usize, usize)> {
    text.lines().enumerate().find_map(|(i, line)| {
        let body = line.trim_start();
        let body = body.strip_prefix("- ").unwrap_or(body).trim_start();
        let col = line.len() - body.len() + 1;
        let rest = body
            .strip_prefix("name:")
            .or_else(|| body.strip_prefix("\"name\":"))?;
        let value = rest.trim().trim_end_matches(',').trim();
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        (unquoted == pod).then_some((i + 1, col))
    })
}

/// [`add`], and the layer of each file applied (its path and the names it gave).
fn compose(
    mut config: Config,
    main: &Sources,
    source: &ConfigSource,
    previous: Option<&Config>,
) -> (super::Loaded, Vec<(PathBuf, Layer, BTreeSet<String>)>) {
    let mut refused: Vec<ConfigError> = Vec::new();
    let mut layers = Vec::new();
    let Some(dir) = config.supervisor.pod_dir.clone() else {
        let loaded = super::Loaded {
            config,
            refused: ConfigErrors(refused),
        };
        return (loaded, layers);
    };
    let before: &[PodFile] = previous.map_or(&[], |p| p.pod_files.as_slice());
    let mut outcomes: Vec<(PathBuf, Result<Candidate, ConfigErrors>)> = Vec::new();
    match list(&dir) {
        Ok(files) => {
            for (i, path) in files.into_iter().enumerate() {
                let outcome = if i < MAX_FILES {
                    candidate(&path, main, source, &config)
                } else {
                    Err(unlocated(
                        &path,
                        format!("a pod_dir holds at most {MAX_FILES} files: not read"),
                    ))
                };
                outcomes.push((path, outcome));
            }
        }
        Err(e) => {
            refused.extend(unlocated(&dir, e.message).0);
            if !e.gone {
                // Unreadable for now: every file's pods stay as they were (the directory's
                // error says why; nothing more about each file).
                for f in before {
                    outcomes.push((f.path.clone(), Err(ConfigErrors(Vec::new()))));
                }
            }
        }
    }
    let mut owner: BTreeMap<String, PathBuf> = BTreeMap::new();
    for name in config
        .pods
        .iter()
        .map(|p| &p.name)
        .chain(config.replica_sets.iter().map(|s| &s.name))
    {
        owner.insert(name.clone(), config.source.clone());
    }
    let previous_of = |path: &Path| before.iter().find(|f| f.path == path);
    // What runs already keeps its name: a file's own earlier names first.
    for (path, outcome) in &outcomes {
        let Some(earlier) = previous_of(path) else {
            continue;
        };
        for name in earlier.pods.iter().chain(&earlier.replica_sets) {
            let still = match outcome {
                Ok(c) => c.names.contains(name),
                Err(_) => true,
            };
            if still {
                owner.entry(name.clone()).or_insert_with(|| path.clone());
            }
        }
    }
    let mut kept: Vec<&PodFile> = Vec::new();
    for (path, outcome) in outcomes {
        let candidate = match outcome {
            Ok(c) => c,
            Err(errors) => {
                refused.extend(errors.0);
                if let Some(earlier) = previous_of(&path) {
                    kept.push(earlier);
                }
                continue;
            }
        };
        let clash = candidate
            .names
            .iter()
            .find_map(|n| owner.get(n).filter(|o| **o != path).map(|o| (n, o)));
        if let Some((name, other)) = clash {
            refused.push(ConfigError {
                path: path.clone(),
                line: 0,
                col: 0,
                field: crate::config::schema_join("pods", name),
                message: format!(
                    "pod {name:?} is also defined in {}, which keeps it; this file is not applied",
                    other.display()
                ),
            });
            if let Some(earlier) = previous_of(&path) {
                kept.push(earlier);
            }
            continue;
        }
        for n in &candidate.names {
            owner.insert(n.clone(), path.clone());
        }
        layers.push((path.clone(), candidate.layer, candidate.names.clone()));
        config.pod_files.push(PodFile {
            path,
            pods: candidate.pods.iter().map(|p| p.name.clone()).collect(),
            replica_sets: candidate.sets.iter().map(|s| s.name.clone()).collect(),
        });
        config.pods.extend(candidate.pods);
        config.replica_sets.extend(candidate.sets);
    }
    if let Some(previous) = previous {
        keep(&mut config, previous, &kept, &owner, &mut refused);
    }
    config.pods.sort_by(|a, b| a.name.cmp(&b.name));
    config.replica_sets.sort_by(|a, b| a.name.cmp(&b.name));
    config.pod_files.sort_by(|a, b| a.path.cmp(&b.path));
    let loaded = super::Loaded {
        config,
        refused: ConfigErrors(refused),
    };
    (loaded, layers)
}

/// The pods of refused files as `previous` ran them, where the name is still theirs and what
/// they depend on is still there (else they stop: said in `refused`).
fn keep(
    config: &mut Config,
    previous: &Config,
    kept: &[&PodFile],
    owner: &BTreeMap<String, PathBuf>,
    refused: &mut Vec<ConfigError>,
) {
    for file in kept {
        let ours = |n: &String| owner.get(n).is_none_or(|o| *o == file.path);
        let pods: Vec<PodSpec> = previous
            .pods
            .iter()
            .filter(|p| file.pods.contains(&p.name) && ours(&p.name))
            .cloned()
            .collect();
        let sets: Vec<ReplicaSetSpec> = previous
            .replica_sets
            .iter()
            .filter(|s| file.replica_sets.contains(&s.name) && ours(&s.name))
            .cloned()
            .collect();
        if pods.is_empty() && sets.is_empty() {
            continue;
        }
        let names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
        refused.push(ConfigError {
            path: file.path.clone(),
            line: 0,
            col: 0,
            field: String::new(),
            message: format!(
                "not applied: its pods keep running as they were ({})",
                names.join(", ")
            ),
        });
        config.pod_files.push(PodFile {
            path: file.path.clone(),
            pods: names,
            replica_sets: sets.iter().map(|s| s.name.clone()).collect(),
        });
        config.pods.extend(pods);
        config.replica_sets.extend(sets);
    }
    // A kept pod whose dependency is gone (the config changed) cannot run as it was.
    let present: BTreeSet<String> = config.pods.iter().map(|p| p.name.clone()).collect();
    let dangling: Vec<(PathBuf, String, String)> = config
        .pods
        .iter()
        .filter_map(|p| {
            let file = kept.iter().find(|f| f.pods.contains(&p.name))?;
            p.depends_on
                .iter()
                .find(|d| !present.contains(&d.pod))
                .map(|d| (file.path.clone(), p.name.clone(), d.pod.clone()))
        })
        .collect();
    for (path, pod, dep) in dangling {
        config.pods.retain(|p| p.name != pod);
        for f in &mut config.pod_files {
            f.pods.retain(|p| *p != pod);
        }
        refused.push(ConfigError {
            path,
            line: 0,
            col: 0,
            field: crate::config::schema_join("pods", &pod),
            message: format!("stopped: it depends on pod {dep:?}, which is gone"),
        });
    }
}

#[cfg(test)]
mod tests;
