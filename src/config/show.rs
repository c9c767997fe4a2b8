//! `vigil config`: the merged, resolved configuration (drop-ins and `-c` layers merged,
//! variables expanded, relative paths resolved), as `docker compose config` and `pebble plan`
//! print theirs: as TOML or JSON, or with `--origin` one line per key with the file, line and
//! column that set it.
//!
//! Owns only the rendering of the tree `load_source` would check (with the files of a
//! `pod_dir` when `convert::pod_dir::show` hands them over: config must not read them). Must not print anything
//! of a config that does not load (its problems are returned instead).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::de::{DeTable, DeValue};

use super::error::ConfigErrors;
use super::layers::SourceMap;
use super::schema::join;
use super::{BUNDLED_DEFAULT, BUNDLED_NAME, ConfigSource, Sources};

/// How `vigil config` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShowOptions {
    pub json: bool,
    pub origin: bool,
}

/// The text `vigil config` prints for `source`, or the problems that keep it from loading.
pub fn show(source: &ConfigSource, opts: ShowOptions) -> Result<String, ConfigErrors> {
    let map = match source {
        ConfigSource::File(p) => super::read_files(std::slice::from_ref(p))?,
        ConfigSource::Layers(ps) => super::read_files(ps)?,
        ConfigSource::Bundled => {
            let mut map = SourceMap::default();
            map.push_bundled(PathBuf::from(BUNDLED_NAME), BUNDLED_DEFAULT.to_string());
            map
        }
        ConfigSource::Manifest { manifest, .. } => {
            return Err(ConfigErrors::unlocated(
                manifest,
                "vigil config shows config files; `vigil convert --from kubernetes` shows what a \
                 manifest becomes"
                    .to_string(),
            ));
        }
    };
    show_map(&map, &source.display_path(), opts, &|_, _| None)
}

/// Where a key of a text taken literally (a converted manifest) was written, from its file
/// and the key (`pods.web.containers[0].command`): `(line, column)` in that file, if known.
pub type Relocate<'a> = &'a dyn Fn(&Path, &str) -> Option<(usize, usize)>;

/// [`show`] of the files of `sources` merged in order (a config and the files of its
/// `pod_dir`: `convert::pod_dir::show`). A key set by a text taken literally is located by
/// `relocate` (its lines are not the file's), else at line 0.
pub fn show_sources(
    sources: &Sources,
    opts: ShowOptions,
    relocate: Relocate<'_>,
) -> Result<String, ConfigErrors> {
    let display = sources
        .0
        .files()
        .first()
        .map_or_else(PathBuf::new, |f| f.path.clone());
    show_map(&sources.0, &display, opts, relocate)
}

fn show_map(
    map: &SourceMap,
    display: &Path,
    opts: ShowOptions,
    relocate: Relocate<'_>,
) -> Result<String, ConfigErrors> {
    super::check(map)?;
    let (doc, _) = super::resolved(map)?;
    let unlocated = |m: String| ConfigErrors::unlocated(display, m);
    let table = toml::Table::deserialize(toml::de::Deserializer::from(toml::Spanned::new(
        0..0,
        doc.clone(),
    )))
    .map_err(|e| unlocated(e.to_string()))?;
    if !opts.origin {
        return if opts.json {
            serde_json::to_string_pretty(&table)
                .map(|s| s + "\n")
                .map_err(|e| unlocated(e.to_string()))
        } else {
            toml::to_string(&table).map_err(|e| unlocated(e.to_string()))
        };
    }
    let mut keys = Vec::new();
    walk(&doc, &table, "", map, relocate, &mut keys);
    if opts.json {
        let items: Vec<serde_json::Value> = keys
            .into_iter()
            .map(|k| {
                serde_json::json!({
                    "key": k.field,
                    "value": k.value,
                    "file": k.file,
                    "line": k.line,
                    "column": k.col,
                })
            })
            .collect();
        serde_json::to_string_pretty(&items)
            .map(|s| s + "\n")
            .map_err(|e| unlocated(e.to_string()))
    } else {
        Ok(keys
            .into_iter()
            .map(|k| {
                format!(
                    "{} = {}  # {}:{}:{}\n",
                    k.field, k.value, k.file, k.line, k.col
                )
            })
            .collect())
    }
}

/// One key of the merged tree and where it was set.
struct Key {
    field: String,
    value: toml::Value,
    file: String,
    line: usize,
    col: usize,
}

/// Every leaf of `de` (spans) with its value from `values` (the same tree, converted).
fn walk(
    de: &DeTable<'_>,
    values: &toml::Table,
    path: &str,
    map: &SourceMap,
    relocate: Relocate<'_>,
    out: &mut Vec<Key>,
) {
    for (key, value) in de.iter() {
        let name = key.get_ref().as_ref();
        let field = join(path, name);
        let Some(converted) = values.get(name) else {
            continue;
        };
        match (value.get_ref(), converted) {
            (DeValue::Table(t), toml::Value::Table(v)) => walk(t, v, &field, map, relocate, out),
            (DeValue::Array(items), toml::Value::Array(vs))
                if !items.is_empty()
                    && items
                        .iter()
                        .all(|i| matches!(i.get_ref(), DeValue::Table(_))) =>
            {
                for (i, (item, v)) in items.iter().zip(vs).enumerate() {
                    if let (DeValue::Table(t), toml::Value::Table(v)) = (item.get_ref(), v) {
                        walk(t, v, &format!("{field}[{i}]"), map, relocate, out);
                    }
                }
            }
            _ => {
                let offset = value.span().start;
                let (file, line, col) = match (map.file_of(offset), map.locate(offset)) {
                    (Some(f), _) if !f.expand => {
                        let (l, c) = relocate(&f.path, &field).unwrap_or((0, 0));
                        (f.path.display().to_string(), l, c)
                    }
                    (_, Some((p, l, c))) => (p.display().to_string(), l, c),
                    _ => (String::new(), 0, 0),
                };
                out.push(Key {
                    field,
                    value: converted.clone(),
                    file,
                    line,
                    col,
                });
            }
        }
    }
}
