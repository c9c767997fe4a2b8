//! A tiny JSON parser and a dotted-path lookup, enough for reading `vigil status -o json` in a
//! shell script. Owns parsing only; it must not grow into a general JSON library (std only).
//!
//! Grammar follows RFC 8259. Numbers are kept as their source text so that `restart_count`
//! prints exactly as vigil wrote it.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// The number's text as written (validated).
    Number(String),
    String(String),
    Array(Vec<Value>),
    /// Members in source order.
    Object(Vec<(String, Value)>),
}

#[derive(Debug, PartialEq)]
pub struct ParseError {
    pub offset: usize,
    pub message: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.message)
    }
}

#[cfg(test)]
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

/// Parse every whitespace-separated JSON value in `text` (one object a line, as `-f` output
/// prints, or a single document).
pub fn parse_many(text: &str) -> Result<Vec<Value>, ParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let mut out = Vec::new();
    p.ws();
    while p.i < p.s.len() {
        out.push(p.value(0)?);
        p.ws();
    }
    Ok(out)
}

const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, message: &'static str) -> ParseError {
        ParseError {
            offset: self.i,
            message,
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        match self.s.get(self.i) {
            None => Err(self.err("unexpected end")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ if self.eat("true") => Ok(Value::Bool(true)),
            _ if self.eat("false") => Ok(Value::Bool(false)),
            _ if self.eat("null") => Ok(Value::Null),
            _ => Err(self.err("expected a value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.i += 1; // '{'
        let mut members = Vec::new();
        self.ws();
        if self.eat("}") {
            return Ok(Value::Object(members));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a member name"));
            }
            let key = self.string()?;
            self.ws();
            if !self.eat(":") {
                return Err(self.err("expected ':'"));
            }
            self.ws();
            let v = self.value(depth + 1)?;
            members.push((key, v));
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(Value::Object(members));
            }
            return Err(self.err("expected ',' or '}'"));
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.i += 1; // '['
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Value::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(Value::Array(items));
            }
            return Err(self.err("expected ',' or ']'"));
        }
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let from = p.i;
            while let Some(b'0'..=b'9') = p.s.get(p.i) {
                p.i += 1;
            }
            p.i - from
        };
        self.eat("-");
        if self.eat("0") {
            // no leading zeros (RFC 8259 §6)
        } else if digits(self) == 0 {
            return Err(self.err("expected digits"));
        }
        if self.eat(".") && digits(self) == 0 {
            return Err(self.err("expected fraction digits"));
        }
        if let Some(b'e' | b'E') = self.s.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.s.get(self.i) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("expected exponent digits"));
            }
        }
        let text =
            std::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.err("bad number"))?;
        Ok(Value::Number(text.to_string()))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("short \\u escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("bad \\u escape"))?;
        let n = u32::from_str_radix(h, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(n)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.i += 1; // '"'
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.push_str(
                std::str::from_utf8(&self.s[start..self.i])
                    .map_err(|_| self.err("invalid UTF-8"))?,
            );
            match self.s.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let esc = *self
                        .s
                        .get(self.i)
                        .ok_or_else(|| self.err("unterminated escape"))?;
                    self.i += 1;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let mut c = self.hex4()?;
                            // A UTF-16 surrogate pair (RFC 8259 §7).
                            if (0xD800..0xDC00).contains(&c) && self.eat("\\u") {
                                let lo = self.hex4()?;
                                c = 0x10000
                                    + ((c - 0xD800) << 10)
                                    + (lo.wrapping_sub(0xDC00) & 0x3FF);
                            }
                            out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                        }
                        _ => return Err(self.err("unknown escape")),
                    }
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }
}

impl Value {
    /// Follow a dotted path. Each component is an object member name, an array index
    /// (`0`, `1`, …), or `key=value`: the first array element that is an object whose member
    /// `key` renders as `value` (`pods.name=web.containers.0.restart_count`).
    pub fn at(&self, path: &str) -> Option<&Value> {
        let mut cur = self;
        if path.is_empty() || path == "." {
            return Some(cur);
        }
        for comp in path.split('.') {
            cur = match cur {
                Value::Object(members) => {
                    members.iter().find(|(k, _)| k == comp).map(|(_, v)| v)?
                }
                Value::Array(items) => {
                    if let Some((key, want)) = comp.split_once('=') {
                        items
                            .iter()
                            .find(|item| item.at(key).is_some_and(|v| v.render() == want))?
                    } else {
                        items.get(comp.parse::<usize>().ok()?)?
                    }
                }
                _ => return None,
            };
        }
        Some(cur)
    }

    /// Shell-friendly text: strings raw (unquoted), everything else as compact JSON.
    pub fn render(&self) -> String {
        match self {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

fn write_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

/// Compact JSON.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => f.write_str(n),
            Value::String(s) => write_str(f, s),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Object(members) => {
                f.write_str("{")?;
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write_str(f, k)?;
                    write!(f, ":{v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = r#"{"pods": [
      {"name": "checker", "containers": []},
      {"name": "oom-main", "phase": "Running", "containers": [{
        "name": "eater", "ready": false, "restart_count": 3, "pid": null,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 0.2s"}},
        "last_state": {"terminated": {"exit_code": 137, "signal": 9, "reason": "OOMKilled",
                       "started_at": "2024-01-02T03:04:05.250Z"}},
        "resources": {"oom_kills": 1, "memory_max": 20971520}
      }]}
    ]}"#;

    fn get(path: &str) -> Option<String> {
        parse(STATUS).unwrap().at(path).map(Value::render)
    }

    #[test]
    fn path_follows_members_and_indices() {
        assert_eq!(
            get("pods.1.containers.0.restart_count").as_deref(),
            Some("3")
        );
        assert_eq!(
            get("pods.1.containers.0.last_state.terminated.reason").as_deref(),
            Some("OOMKilled")
        );
        assert_eq!(
            get("pods.1.containers.0.last_state.terminated.signal").as_deref(),
            Some("9")
        );
    }

    #[test]
    fn path_selects_array_element_by_member_value() {
        assert_eq!(
            get("pods.name=oom-main.containers.name=eater.state.waiting.reason").as_deref(),
            Some("CrashLoopBackOff")
        );
        assert_eq!(get("pods.name=checker.containers").as_deref(), Some("[]"));
    }

    #[test]
    fn absent_paths_are_none() {
        assert_eq!(get("pods.2"), None);
        assert_eq!(get("pods.name=nope"), None);
        assert_eq!(get("pods.1.containers.0.state.running"), None);
        assert_eq!(get("pods.x"), None);
        assert_eq!(get("pods.1.phase.deeper"), None);
    }

    #[test]
    fn null_and_bool_and_objects_render_as_json() {
        assert_eq!(get("pods.1.containers.0.pid").as_deref(), Some("null"));
        assert_eq!(get("pods.1.containers.0.ready").as_deref(), Some("false"));
        assert_eq!(
            get("pods.1.containers.0.resources").as_deref(),
            Some(r#"{"oom_kills":1,"memory_max":20971520}"#)
        );
    }

    #[test]
    fn strings_unescape_including_surrogate_pairs() {
        let v = parse(r#"{"s": "a\"b\\c\nd\u00e9\ud83d\ude00"}"#).unwrap();
        assert_eq!(v.at("s").unwrap().render(), "a\"b\\c\nd\u{e9}\u{1F600}");
    }

    #[test]
    fn numbers_keep_their_text() {
        let v = parse("[0, -1.5, 2e10, 0.25E-3]").unwrap();
        assert_eq!(v.to_string(), "[0,-1.5,2e10,0.25E-3]");
    }

    #[test]
    fn malformed_input_is_rejected() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "01",
            "tru",
            "\"abc",
            "[1] x",
            "{\"a\":1,}",
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn several_documents_one_a_line() {
        let vs = parse_many("{\"reason\":\"Started\"}\n{\"reason\":\"OOMKilling\"}\n").unwrap();
        assert_eq!(vs.len(), 2);
        assert_eq!(vs[1].at("reason").unwrap().render(), "OOMKilling");
    }
}
