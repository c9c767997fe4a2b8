//! The YAML text of `vigil convert --to kubernetes`: a JSON value written as block-style YAML
//! that every YAML parser reads back as the same value, whatever version of the language it
//! speaks.
//!
//! YAML 1.1 (go-yaml v2, which sigs.k8s.io/yaml and so kubectl use, and PyYAML) resolves far
//! more plain scalars than YAML 1.2: `no`, `y`, `On` are booleans, `2026-01-01` a timestamp,
//! `1_000` and `1:20` (base 60) integers, `0o17`, `.inf`, `~` numbers and null. A string is
//! therefore written plain only when it cannot be anything but a string in either version:
//! it starts with a letter or `/`, holds only letters, digits and `_ . / -`, and is not one of
//! the 1.1 boolean or null words in any case. Everything else is double-quoted, with every
//! character YAML does not allow raw (controls, DEL, the C1 range, U+2028/U+2029, U+FEFF)
//! escaped, so a value with a newline stays on its line.
//!
//! Owns only the text. Must not decide what the manifest holds (`to_kube` does).

use serde_json::Value;

/// Words YAML 1.1 reads as booleans or null when plain (https://yaml.org/type/bool.html,
/// https://yaml.org/type/null.html), compared without case: quoting `YES` or `Null` as well
/// costs nothing.
const RESERVED: &[&str] = &["y", "n", "yes", "no", "true", "false", "on", "off", "null"];

/// `value` as a YAML document (no `---`), ending in a newline.
pub fn document(value: &Value) -> String {
    let mut lines = Vec::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(map, &mut lines),
        Value::Array(items) if !items.is_empty() => sequence(items, &mut lines),
        other => lines.push(inline(other)),
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// `key: value` lines; a nested mapping is indented by two, a nested sequence is not (the
/// style of kubectl's output).
fn mapping(map: &serde_json::Map<String, Value>, out: &mut Vec<String>) {
    for (key, value) in map {
        let key = string(key);
        match value {
            Value::Object(m) if !m.is_empty() => {
                out.push(format!("{key}:"));
                let mut inner = Vec::new();
                mapping(m, &mut inner);
                out.extend(inner.into_iter().map(|l| format!("  {l}")));
            }
            Value::Array(items) if !items.is_empty() => {
                out.push(format!("{key}:"));
                sequence(items, out);
            }
            other => out.push(format!("{key}: {}", inline(other))),
        }
    }
}

/// `- item` lines; a nested collection starts on the dash's line and continues two deeper.
fn sequence(items: &[Value], out: &mut Vec<String>) {
    for item in items {
        let mut inner = Vec::new();
        match item {
            Value::Object(m) if !m.is_empty() => mapping(m, &mut inner),
            Value::Array(a) if !a.is_empty() => sequence(a, &mut inner),
            other => inner.push(inline(other)),
        }
        for (i, line) in inner.into_iter().enumerate() {
            out.push(if i == 0 {
                format!("- {line}")
            } else {
                format!("  {line}")
            });
        }
    }
}

/// A scalar or an empty collection on one line.
fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

/// `s` plain when no YAML 1.1 or 1.2 parser could read it as anything else, else
/// double-quoted.
pub fn string(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        quoted(s)
    }
}

fn is_plain_safe(s: &str) -> bool {
    // Options (`--appendonly`, `-v`): dashes, then a letter.
    let body = s.trim_start_matches('-');
    let dashed = body.len() < s.len();
    let mut chars = body.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || (first == '/' && !dashed))
        && chars
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-' | '=' | '+'))
        && !RESERVED.iter().any(|w| w.eq_ignore_ascii_case(s))
}

/// A YAML double-quoted scalar: `\` and `"` escaped, and every character outside YAML's
/// printable set (YAML 1.2 §5.1 `c-printable`; 1.1 has the same) or that some parsers treat
/// as a line break or a byte-order mark, as a `\xXX`/`\uXXXX`/`\UXXXXXXXX` escape.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            ' '..='~' => out.push(c),
            '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'.. => {
                if matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push(c);
                }
            }
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_numbers_yaml_1_1_would_resolve_are_quoted() {
        for s in [
            "no",
            "yes",
            "on",
            "off",
            "y",
            "n",
            "NO",
            "Yes",
            "~",
            "null",
            "Null",
            "true",
            "False",
            "2026-01-01",
            "1_000",
            "0x1F",
            "0o17",
            ".inf",
            "-.inf",
            ".NaN",
            "1e3",
            "1:20",
            "010",
            "+1",
            ".5",
            "",
            " lead",
            "trail ",
            "a: b",
            "a #b",
            "#x",
            "-",
            "<<",
            "=",
        ] {
            let out = string(s);
            assert!(out.starts_with('"') && out.ends_with('"'), "{s:?} → {out}");
        }
    }

    #[test]
    fn names_paths_and_images_stay_plain() {
        for s in [
            "web",
            "/bin/sh",
            "app.kubernetes.io/name",
            "vigil/depends-on",
            "registry.example/app",
            "Always",
            "--appendonly",
            "--port=6379",
        ] {
            assert_eq!(string(s), s);
        }
    }

    #[test]
    fn a_newline_and_characters_yaml_does_not_allow_raw_are_escaped() {
        assert_eq!(string("a\nb"), "\"a\\nb\"");
        assert_eq!(string("x\u{7f}\u{85}\u{2028}é"), "\"x\\x7f\\x85\\u2028é\"");
        assert_eq!(string("say \"hi\" \\"), "\"say \\\"hi\\\" \\\\\"");
    }

    #[test]
    fn collections_are_written_in_kubectl_s_block_style() {
        let v = serde_json::json!({
            "kind": "Pod",
            "spec": {"containers": [{"name": "c", "args": ["--appendonly", "no"], "env": []}]},
            "meta": {}
        });
        assert_eq!(
            document(&v),
            "kind: Pod\nmeta: {}\nspec:\n  containers:\n  - args:\n    - --appendonly\n    - \"no\"\n    env: []\n    name: c\n"
        );
    }

    /// Random strings built from the pieces YAML gives meaning to, as keys and values, written
    /// and read back by PyYAML (a YAML 1.1 parser, the stricter one for plain scalars): every
    /// one comes back the same string.
    #[test]
    #[ignore = "needs python3 with PyYAML (python3-yaml; tests/run-all.sh installs it)"]
    fn random_strings_round_trip_through_pyyaml() {
        use std::io::Write as _;
        const PIECES: &[&str] = &[
            "no",
            "yes",
            "On",
            "OFF",
            "y",
            "N",
            "true",
            "Null",
            "~",
            "2026-01-01",
            "12:30:00",
            "0x1F",
            "0o17",
            "0b1",
            "1_000",
            ".inf",
            ".NaN",
            "e3",
            "1",
            "0",
            "9",
            "-",
            "+",
            ".",
            ":",
            ": ",
            "#",
            " #",
            " ",
            "\n",
            "\t",
            "\r",
            "\"",
            "'",
            "\\",
            "{",
            "}",
            "[",
            "]",
            ",",
            "&",
            "*",
            "!",
            "|",
            ">",
            "%",
            "@",
            "`",
            "?",
            "=",
            "<<",
            "_",
            "/",
            "a",
            "Z",
            "web",
            "é",
            "\u{2028}",
            "\u{85}",
            "\u{feff}",
            "\u{7f}",
            "\u{0}",
            "\u{1b}",
            "\u{fffe}",
            "😀",
            "---",
            "...",
        ];
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        let mut state = seed;
        let mut next = |n: usize| {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut strings: Vec<String> = Vec::new();
        for _ in 0..4000 {
            let len = next(6);
            strings.push((0..len).map(|_| PIECES[next(PIECES.len())]).collect());
        }
        let mut map = serde_json::Map::new();
        for (i, s) in strings.iter().enumerate() {
            map.insert(format!("{s}{i}"), Value::String(s.clone()));
        }
        let value = serde_json::json!({ "values": strings, "keys": map });
        let text = document(&value);
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, json, yaml; \
                 print(json.dumps(yaml.safe_load(sys.stdin.buffer.read().decode())))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (with PyYAML: apt-get install python3-yaml)");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("python3");
        assert!(
            out.status.success(),
            "seed {seed}: PyYAML refused the text: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let back: Value = serde_json::from_slice(&out.stdout).expect("json");
        for (i, s) in strings.iter().enumerate() {
            assert_eq!(back["values"][i], Value::String(s.clone()), "seed {seed}");
        }
        assert_eq!(back, value, "seed {seed}");
    }
}
