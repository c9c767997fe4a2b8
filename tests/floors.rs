//! Floors that hold: every `crate::…` name in `src/` (in code, `use` groups and the paths of
//! `#[serde(with = "…")]` attributes alike) is checked against one table of the edges allowed
//! between vigil's top-level modules (docs/architecture.md, "Module map"). A new edge fails
//! here until it is added to the table, and the table never lets `core` or `config` name a
//! layer above them (`runtime`, `process`, `convert`, `control`, …). It also holds the core to
//! files of at most 600 lines, and every `ContainerSpec` fixture to `..ContainerSpec::new(…)`
//! (so that a new container key does not touch them).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules it may name. A module not listed may name nothing but the leaves.
/// Read bottom-up: the leaves, then `config`, the pure `core`, the system layers, the control
/// surface, and the shell (`runtime`) and command line (`cli`) on top.
const ALLOWED: &[(&str, &[&str])] = &[
    // Leaves: name nothing of vigil's ([`LEAVES`]).
    // The musl build's allocator reads the tricks' switch (`VIGIL_PLAIN=dlmalloc`).
    ("alloc", &["tricks"]),
    // The configuration: its schema, validation and definitions; nothing above it.
    ("config", &[]),
    // The pure lifecycle core: decisions on values; its serde helpers are the leaf monotime.
    ("core", &["config"]),
    // The system layers, each on config only (logs and process share the child setup).
    ("process", &["config"]),
    ("cgroup", &["config"]),
    ("logs", &["config", "process"]),
    ("probe", &["config", "core"]),
    ("convert", &["config"]),
    // The control surface: the wire types render the core's status; metrics and control
    // share the scrape's wire types (the `metrics` request and the render's `Observed`).
    ("control", &["cgroup", "config", "core", "metrics"]),
    ("metrics", &["cgroup", "config", "control", "core"]),
    ("top", &["control", "core"]),
    // What the host offers (`vigil check`'s host checks) and the shell that runs it all.
    (
        "host",
        &[
            "cgroup", "config", "control", "convert", "probe", "process", "runtime",
        ],
    ),
    (
        "runtime",
        &[
            "alloc", "cgroup", "config", "control", "convert", "core", "host", "logs", "metrics",
            "probe", "process",
        ],
    ),
    (
        "cli",
        &[
            "config", "control", "convert", "host", "logs", "metrics", "runtime", "top",
        ],
    ),
];

/// Modules any module may name: they name no other module of vigil's themselves.
const LEAVES: &[&str] = &[
    "format", "instant", "monotime", "testutil", "tricks", "trust",
];

/// The layers `core` and `config` must never name (issue 37: "floors that hold").
const ABOVE_THE_FLOOR: &[&str] = &["runtime", "process", "convert", "control", "cgroup", "host"];

/// `text` without its comments; string literals are kept (serde's `with = "crate::…"` paths
/// are names too), and a `//` inside a string is not taken for a comment.
fn without_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            // A string: copied whole, escapes included.
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            out.push_str(&text[start..i]);
        } else if b[i] == b'\'' && (b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\')) {
            // A char literal ('"', '\'', '/'): skipped, so it opens no string or comment.
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The top-level modules named by `crate::NAME` and `crate::{A, B::…}` in `code`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first path segment of each item at depth 0 of the group.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && depth == 0 && (c.is_ascii_alphanumeric() || c == '_') => {
                        out.insert(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Module → (named module → the files that name it), over `src/`.
fn edges() -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if top == "main" || top == "lib" {
            continue;
        }
        let code = without_comments(&std::fs::read_to_string(&file).unwrap());
        for named in named_modules(&code) {
            if named != top {
                edges
                    .entry(top.clone())
                    .or_default()
                    .entry(named)
                    .or_default()
                    .push(rel.clone());
            }
        }
    }
    edges
}

#[test]
fn every_module_names_only_the_modules_the_table_allows() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut wrong = Vec::new();
    for (from, to) in edges() {
        for (named, files) in to {
            let ok = LEAVES.contains(&named.as_str())
                || allowed
                    .get(from.as_str())
                    .is_some_and(|may| may.contains(&named.as_str()));
            if !ok {
                wrong.push(format!("{from} -> {named} (in {})", files.join(", ")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that the floors do not allow (tests/floors.rs, ALLOWED; \
         docs/architecture.md):\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_table_keeps_core_and_config_below_every_system_layer() {
    for (from, may) in ALLOWED {
        if matches!(*from, "core" | "config") {
            for above in ABOVE_THE_FLOOR {
                assert!(!may.contains(above), "{from} may not name {above}");
            }
        }
    }
    for leaf in LEAVES {
        assert!(
            !ALLOWED.iter().any(|(m, _)| m == leaf),
            "{leaf} is a leaf: it names no module of vigil's"
        );
    }
}

#[test]
fn leaves_name_no_other_module() {
    let edges = edges();
    for leaf in LEAVES {
        if let Some(to) = edges.get(*leaf) {
            let named: Vec<_> = to
                .keys()
                .filter(|n| !LEAVES.contains(&n.as_str()))
                .collect();
            assert!(named.is_empty(), "leaf {leaf} names {named:?}");
        }
    }
}

#[test]
fn the_scanner_sees_grouped_uses_and_serde_paths_and_skips_comments() {
    let code = without_comments(
        r#"
        use crate::{config::spec::Config, core::{A, B}, logs};
        #[serde(with = "crate::runtime::handoff::mono")]
        // use crate::process;
        /* crate::control */
        let url = "http://x"; crate::cgroup::f();
        let c = '"'; crate::trust::g();
        "#,
    );
    let got: Vec<String> = named_modules(&code).into_iter().collect();
    assert_eq!(
        got,
        ["cgroup", "config", "core", "logs", "runtime", "trust"]
    );
}

/// Issue 37: the core stays readable file by file — `core/pod/` and `core/supervisor/` are
/// split by concern so that no file of `src/core` (its tests included) passes 600 lines.
#[test]
fn no_file_in_the_core_passes_600_lines() {
    const MOST: usize = 600;
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    rust_files(&core, &mut files);
    assert!(files.len() > 20, "the scan found the core's files");
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MOST).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    long.sort();
    assert!(long.is_empty(), "split by concern: {long:?}");
}

/// Issue 37: a new container key touches six files (docs/architecture.md, "Recipe: a new
/// per-container config key"), not every test fixture: a `ContainerSpec { … }` written out
/// anywhere but where every field is decided — `ContainerSpec::new` (config/spec.rs) and the
/// validated spec (config/validate/pod.rs) — names only the fields it cares about and takes
/// the rest from `..ContainerSpec::new(name, argv)`.
#[test]
fn container_spec_fixtures_start_from_container_spec_new() {
    const EVERY_FIELD: [&str; 2] = ["config/spec.rs", "config/validate/pod.rs"];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut literals = 0;
    let mut listing = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap().to_string_lossy();
        if EVERY_FIELD.contains(&rel.as_ref()) {
            continue;
        }
        let code = without_comments(&std::fs::read_to_string(&file).unwrap());
        for (at, _) in code.match_indices("ContainerSpec {") {
            // A struct literal, not the type's declaration, an impl or a return type.
            let before = code[..at].trim_end().trim_end_matches('&').trim_end();
            if ["struct", "impl", "->", "for"]
                .iter()
                .any(|w| before.ends_with(w))
            {
                continue;
            }
            let body = &code[at + "ContainerSpec {".len()..];
            let mut depth = 0;
            let end = body
                .char_indices()
                .find(|&(_, c)| match c {
                    '{' => {
                        depth += 1;
                        false
                    }
                    '}' if depth == 0 => true,
                    '}' => {
                        depth -= 1;
                        false
                    }
                    _ => false,
                })
                .map_or(body.len(), |(i, _)| i);
            literals += 1;
            if !body[..end].contains("..ContainerSpec::new(") {
                let line = code[..at].lines().count();
                listing.push(format!("{rel}:{line}"));
            }
        }
    }
    assert!(literals >= 2, "the scan found the fixtures ({literals})");
    assert!(
        listing.is_empty(),
        "ContainerSpec literals listing every field (start them from `..ContainerSpec::new(…)`): \
         {listing:?}"
    );
}
