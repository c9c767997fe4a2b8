//! `vigil config`: the merged, resolved configuration (drop-ins and `-c` layers merged,
//! variables expanded, relative paths resolved), as `docker compose config` and `pebble plan`
//! print theirs: as TOML or JSON, or with `--origin` one line per key with the file, line and
//! column that set it.
//!
//! Owns only the rendering of the tree `load_source` would check. Must not print anything
//! of a config that does not load (its problems are returned instead).

use std::path::PathBuf;

use serde::Deserialize;
use toml::de::{DeTable, DeValue};

use super::error::ConfigErrors;
use super::layers::SourceMap;
use super::schema::join;
use super::{BUNDLED_DEFAULT, BUNDLED_NAME, ConfigSource};

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
    super::check(&map)?;
    let (doc, _) = super::resolved(&map)?;
    let unlocated = |m: String| ConfigErrors::unlocated(&source.display_path(), m);
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
    walk(&doc, &table, "", &map, &mut keys);
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
fn walk(de: &DeTable<'_>, values: &toml::Table, path: &str, map: &SourceMap, out: &mut Vec<Key>) {
    for (key, value) in de.iter() {
        let name = key.get_ref().as_ref();
        let field = join(path, name);
        let Some(converted) = values.get(name) else {
            continue;
        };
        match (value.get_ref(), converted) {
            (DeValue::Table(t), toml::Value::Table(v)) => walk(t, v, &field, map, out),
            (DeValue::Array(items), toml::Value::Array(vs))
                if !items.is_empty()
                    && items
                        .iter()
                        .all(|i| matches!(i.get_ref(), DeValue::Table(_))) =>
            {
                for (i, (item, v)) in items.iter().zip(vs).enumerate() {
                    if let (DeValue::Table(t), toml::Value::Table(v)) = (item.get_ref(), v) {
                        walk(t, v, &format!("{field}[{i}]"), map, out);
                    }
                }
            }
            _ => {
                let (file, line, col) = map
                    .locate(value.span().start)
                    .map_or((String::new(), 0, 0), |(p, l, c)| {
                        (p.display().to_string(), l, c)
                    });
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
