//! Where a key of a valid config stands in its file, for problems found after validation
//! (`vigil check`'s host checks: an `env_file` that cannot be read, a probe host that does
//! not resolve): `pods.web.containers[0].env_file` → `LINE:COL` of its value.
//!
//! With drop-ins (`layers`), the key is looked up in the merged tree, so the place found is
//! in the file that set it last ([`locate_in_source`]).
//!
//! Owns only the walk of the parsed TOML along such a path. Must not judge anything.

use std::ops::Range;
use std::path::PathBuf;

use toml::de::{DeTable, DeValue};

use super::ConfigSource;
use super::error::line_col;

/// `(file, line, column)` of the value at `field` in the config `source` reads (its files
/// merged as `load_source` merges them), or `None` when there is no file, it does not
/// parse, or it has no such key.
pub fn locate_in_source(source: &ConfigSource, field: &str) -> Option<(PathBuf, usize, usize)> {
    let mains = match source {
        ConfigSource::File(p) => std::slice::from_ref(p),
        ConfigSource::Layers(ps) => ps.as_slice(),
        ConfigSource::Bundled | ConfigSource::Manifest { .. } => return None,
    };
    let map = super::read_files(mains).ok()?;
    let (doc, _) = super::compose(&map).ok()?;
    let span = span_of(&doc, field)?;
    let (path, line, col) = map.locate(span.start)?;
    Some((path.to_path_buf(), line, col))
}

/// The 1-based line and column of the value at `field` (as [`super::schema::join`] writes
/// paths: dotted keys, `"quoted"` when needed, `[N]` for array elements) in `text`, or
/// `None` when the text does not parse or has no such key (a default, or a manifest).
pub fn locate_field(text: &str, field: &str) -> Option<(usize, usize)> {
    let doc = DeTable::parse(text).ok()?;
    span_of(doc.get_ref(), field).map(|s| line_col(text, s.start))
}

/// The span of the value at `field` in a parsed tree.
fn span_of(doc: &DeTable<'_>, field: &str) -> Option<Range<usize>> {
    let mut table: &DeTable<'_> = doc;
    let mut span = None;
    let segments = split(field);
    let last = segments.len().checked_sub(1)?;
    for (i, (key, indices)) in segments.iter().enumerate() {
        let (_, value) = table.iter().find(|(k, _)| k.get_ref().as_ref() == key)?;
        let mut value = value;
        for &n in indices {
            match value.get_ref() {
                DeValue::Array(items) => value = items.get(n)?,
                _ => return None,
            }
        }
        span = Some(value.span());
        if i < last {
            match value.get_ref() {
                DeValue::Table(t) => table = t,
                _ => return None,
            }
        }
    }
    span
}

/// `a."b.c"[0][1].d` → `[("a", []), ("b.c", [0, 1]), ("d", [])]`.
fn split(field: &str) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    let mut chars = field.chars().peekable();
    while chars.peek().is_some() {
        let mut key = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => key.extend(chars.next()),
                    '"' => break,
                    c => key.push(c),
                }
            }
        }
        while let Some(&c) = chars.peek() {
            if c == '.' || c == '[' {
                break;
            }
            key.push(c);
            chars.next();
        }
        let mut indices = Vec::new();
        while chars.peek() == Some(&'[') {
            chars.next();
            let n: String = chars.by_ref().take_while(|&c| c != ']').collect();
            indices.push(n.parse().unwrap_or(usize::MAX));
        }
        if chars.peek() == Some(&'.') {
            chars.next();
        }
        out.push((key, indices));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[supervisor]\nsocket = \"/run/x.sock\"\n\n[pods.\"a.b\"]\n\
                        [[pods.\"a.b\".containers]]\nname = \"c\"\n\
                        [[pods.\"a.b\".containers]]\nname = \"d\"\nenv_file = \"/e\"\n\
                        readiness_probe = { http_get = { host = \"db.local\", port = 80 } }\n";

    #[test]
    fn keys_quoted_keys_and_array_elements_are_found() {
        assert_eq!(locate_field(TEXT, "supervisor.socket"), Some((2, 10)));
        assert_eq!(
            locate_field(TEXT, "pods.\"a.b\".containers[1].env_file"),
            Some((9, 12))
        );
        assert_eq!(
            locate_field(
                TEXT,
                "pods.\"a.b\".containers[1].readiness_probe.http_get.host"
            ),
            Some((10, 41))
        );
        assert_eq!(locate_field(TEXT, "pods.\"a.b\".containers[2].name"), None);
        assert_eq!(locate_field(TEXT, "supervisor.log_dir"), None);
    }
}
