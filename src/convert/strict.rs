//! A manifest read strictly, before anything maps it: as kubectl's strict decoding
//! (k8s.io/apimachinery `runtime/serializer/json`, `strict decoding error: duplicate field`),
//! a mapping key written twice at any level is refused at the second key's line and column
//! instead of the last one silently winning (`runAsUser: 1000` then `runAsUser: 0`); and flow
//! nesting (`[` and `{`) deeper than [`MAX_DEPTH`] is refused by a linear scan before the YAML
//! parser sees the text, whose cost grows with the square of that depth (a 200 KB file of
//! `{a: ` took a minute of CPU).
//!
//! Owns only the reading of YAML text into a `serde_json::Value`; pure functions of the text.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The deepest flow nesting a manifest may have (real ones use a handful of levels).
pub const MAX_DEPTH: usize = 64;

/// A YAML node as a JSON value, every mapping checked for duplicate keys.
pub struct Strict(pub Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(NodeVisitor).map(Strict)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // As serde_json's own Value: a NaN or infinity has no JSON number.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(NodeVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(NewKey(&out))? {
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key not already in the mapping. The refusal is raised while the key's own scalar
/// is read, so the YAML reader locates it at that key (line and column of the second one).
struct NewKey<'m>(&'m Map<String, Value>);

impl<'de> DeserializeSeed<'de> for NewKey<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NewKey<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        if self.0.contains_key(v) {
            Err(E::custom(format_args!("duplicate field {v:?}")))
        } else {
            Ok(v.to_string())
        }
    }
}

/// Where flow nesting first goes deeper than [`MAX_DEPTH`]: `(line, column)`, 1-based.
///
/// One pass over the text that knows just enough YAML not to count brackets inside quoted
/// scalars, comments, block scalars (`|`, `>`) and plain scalars of block context. It may
/// miscount only text no manifest contains (64 brackets deep in such corner cases); it never
/// looks at a character twice.
pub fn too_deep(text: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let (mut line, mut col) = (1usize, 0usize);
    // The indentation of the current line, and whether only spaces were seen on it so far.
    let mut indent = 0usize;
    let mut at_indent = true;
    // The last character on this line that was not white space (block context: where a node
    // may start), and the character just before the current one.
    let mut last_sig: Option<char> = None;
    let mut prev: Option<char> = None;
    // Inside a block scalar: lines indented more than this are its content.
    let mut block_scalar: Option<usize> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
            indent = 0;
            at_indent = true;
            last_sig = None;
            prev = Some(c);
            continue;
        }
        if at_indent && c == ' ' {
            indent += 1;
            prev = Some(c);
            continue;
        }
        if at_indent {
            at_indent = false;
            if let Some(parent) = block_scalar {
                if indent > parent {
                    skip_line(&mut chars, &mut line, &mut col, &mut at_indent, &mut indent);
                    last_sig = None;
                    prev = Some('\n');
                    continue;
                }
                block_scalar = None;
            }
        }
        let token_start = match prev {
            None => true,
            Some(p) => p.is_whitespace() || (depth > 0 && matches!(p, '[' | '{' | ',' | ':')),
        };
        let node_start =
            depth > 0 || matches!(last_sig, None | Some(':' | '-' | '?' | '[' | '{' | ','));
        match c {
            '#' if token_start => {
                skip_line(&mut chars, &mut line, &mut col, &mut at_indent, &mut indent);
                last_sig = None;
                prev = Some('\n');
                continue;
            }
            '"' | '\'' if token_start && node_start => {
                skip_quoted(c, &mut chars, &mut line, &mut col);
            }
            '[' | '{' if node_start && (depth > 0 || token_start) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some((line, col));
                }
            }
            ']' | '}' if depth > 0 => depth -= 1,
            '|' | '>' if depth == 0 && token_start && node_start => {
                // A block scalar header: indicators, then white space or a comment.
                while chars
                    .peek()
                    .is_some_and(|n| matches!(n, '+' | '-' | '1'..='9'))
                {
                    chars.next();
                    col += 1;
                }
                if chars.peek().is_none_or(|n| n.is_whitespace() || *n == '#') {
                    block_scalar = Some(indent);
                }
            }
            _ => {}
        }
        if !c.is_whitespace() {
            last_sig = Some(c);
        }
        prev = Some(c);
    }
    None
}

/// Skip to the end of the line (the newline is consumed and counted).
fn skip_line(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    line: &mut usize,
    col: &mut usize,
    at_indent: &mut bool,
    indent: &mut usize,
) {
    for c in chars.by_ref() {
        if c == '\n' {
            break;
        }
    }
    *line += 1;
    *col = 0;
    *at_indent = true;
    *indent = 0;
}

/// Skip a quoted scalar opened by `quote`, lines included: `"` with `\` escapes, `'` with `''`.
fn skip_quoted(
    quote: char,
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    line: &mut usize,
    col: &mut usize,
) {
    while let Some(c) = chars.next() {
        *col += 1;
        match c {
            '\n' => {
                *line += 1;
                *col = 0;
            }
            '\\' if quote == '"' && chars.next().is_some() => *col += 1,
            '\'' if quote == '\'' && chars.peek() == Some(&'\'') => {
                chars.next();
                *col += 1;
            }
            c if c == quote => return,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Value, String> {
        let d = serde_norway::Deserializer::from_str(text);
        <Strict as serde::Deserialize>::deserialize(d)
            .map(|s| s.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_key_written_twice_at_any_level_is_refused_at_the_second() {
        let e =
            read("spec:\n  securityContext:\n    runAsUser: 1000\n    runAsUser: 0\n").unwrap_err();
        assert!(
            e.contains("duplicate field \"runAsUser\"") && e.contains("line 4 column 5"),
            "{e}"
        );
        let e = read("a: 1\nb: [ {x: 1, x: 2} ]\n").unwrap_err();
        assert!(
            e.contains("duplicate field \"x\"") && e.contains("line 2"),
            "{e}"
        );
        let e = read("a: 1\na: 1\n").unwrap_err();
        assert!(e.contains("duplicate field \"a\""), "{e}");
        // The same key in sibling mappings is fine.
        let v = read("- {a: 1}\n- {a: 2}\n").unwrap();
        assert_eq!(v, serde_json::json!([{"a": 1}, {"a": 2}]));
        let v = read("a: [1, 2.5, true, null, \"s\"]\nb: ~\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": [1, 2.5, true, null, "s"], "b": null})
        );
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_found_where_it_passes_it() {
        let ok = format!("a: {}{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(too_deep(&ok), None);
        let deep = format!("a: {}\n", "[".repeat(MAX_DEPTH + 1));
        assert_eq!(too_deep(&deep), Some((1, 4 + MAX_DEPTH)));
        let deep = format!("x: 1\ny:\n  - {}\n", "{a: ".repeat(MAX_DEPTH + 1));
        assert_eq!(too_deep(&deep), Some((3, 5 + 4 * MAX_DEPTH)));
        // JSON is YAML.
        let json = format!("{}1{}", "{\"a\": ".repeat(100), "}".repeat(100));
        assert!(too_deep(&json).is_some());
    }

    #[test]
    fn brackets_in_scalars_comments_and_block_scalars_are_not_nesting() {
        let many = "[".repeat(200);
        for text in [
            format!("a: \"{many}\"\n"),
            format!("a: '{many}'' {many}'\n"),
            format!("a: b{many}\n"),
            format!("a: b # {many}\n"),
            format!("# {many}\n"),
            format!("args:\n- |\n  {many}\n  {many}\nnext: 1\n"),
            format!("cmd: >-\n    {many}\n"),
            format!("a: [\"{many}\", '{many}']\n"),
            format!("a: \"x\\\"{many}\"\n"),
            format!("a: \"multi\n  line {many}\"\n"),
        ] {
            assert_eq!(too_deep(&text), None, "{text}");
        }
        // After a block scalar ends, nesting counts again.
        let text = format!("a: |\n  x\nb: {}\n", "[".repeat(MAX_DEPTH + 1));
        assert_eq!(too_deep(&text), Some((3, 4 + MAX_DEPTH)));
    }
}
