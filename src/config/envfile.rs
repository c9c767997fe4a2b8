//! The `KEY=VALUE` format of a container's `env_file` and of the config's variable files
//! (`.env` beside the config, `[supervisor] env_files`): one `KEY=VALUE` per line; blank lines
//! and lines whose first non-blank character is `#` are skipped; leading blanks before the key
//! are ignored; the value is everything after the first `=` up to the end of the line, taken
//! literally (no quotes, escapes or variable expansion, unlike a shell).
//!
//! Owns only the parse, pure. Must not put a value in an error (it may hold a secret).

/// What is wrong with one line (without repeating it: it may hold a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    #[error("expected KEY=VALUE (no '=' on this line)")]
    NoEquals,
    #[error("empty variable name before '='")]
    EmptyKey,
    #[error("variable name {0:?} contains a blank")]
    BlankInKey(String),
    #[error("not valid UTF-8")]
    NotUtf8,
    #[error("contains a NUL byte")]
    Nul,
}

/// Parses the text of an env file. Pure; `(line number, problem)` on the first bad line.
pub fn parse(bytes: &[u8]) -> Result<Vec<(String, String)>, (usize, LineProblem)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let n = i + 1;
        if raw.contains(&0) {
            return Err((n, LineProblem::Nul));
        }
        let line = std::str::from_utf8(raw).map_err(|_| (n, LineProblem::NotUtf8))?;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (key, value) = trimmed.split_once('=').ok_or((n, LineProblem::NoEquals))?;
        if key.is_empty() {
            return Err((n, LineProblem::EmptyKey));
        }
        if key.chars().any(char::is_whitespace) {
            return Err((n, LineProblem::BlankInKey(key.to_string())));
        }
        out.retain(|(k, _)| k != key);
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}
