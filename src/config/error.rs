//! Located configuration problems: byte spans from the TOML parser turned into `LINE:COL`.
//!
//! Owns [`ConfigError`] / [`ConfigErrors`] and the span → line/column translation. Must not
//! decide what is a problem (that is `schema` and `validate`).

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One problem found in a config file.
///
/// `line`/`col` are 1-based (columns count characters, as editors do); `0:0` means the
/// problem has no location (the file could not be read). `field` is the dotted path of the
/// offending key, e.g. `pods.web.containers[0].liveness_probe.period_seconds`, empty for
/// syntax errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: usize,
    pub col: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    /// `FILE:LINE:COL: field: message` (the field part only when there is one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.col)?;
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.field, self.message)
        }
    }
}

/// Every problem found in one file, in file order; never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A single unlocated problem (e.g. the file could not be read).
    pub fn unlocated(path: &Path, message: String) -> Self {
        ConfigErrors(vec![ConfigError {
            path: path.to_path_buf(),
            line: 0,
            col: 0,
            field: String::new(),
            message,
        }])
    }
}

impl fmt::Display for ConfigErrors {
    /// One problem per line, no trailing newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A problem before it is located: the byte span the parser gave us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub span: Range<usize>,
    pub field: String,
    pub message: String,
}

impl Problem {
    pub fn new(span: Range<usize>, field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            span,
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Translate byte offsets of `text` into 1-based line and character column.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one_in_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 4), (1, 5));
        assert_eq!(line_col(text, 6), (2, 1));
        // 'é' is two bytes but one column.
        assert_eq!(line_col(text, 9), (2, 3));
        assert_eq!(line_col(text, 1000), (3, 1));
    }

    #[test]
    fn display_is_file_line_col_field_message() {
        let e = ConfigError {
            path: PathBuf::from("v.toml"),
            line: 3,
            col: 7,
            field: "pods.web.restart_policy".into(),
            message: "bad".into(),
        };
        assert_eq!(e.to_string(), "v.toml:3:7: pods.web.restart_policy: bad");
        let u = ConfigErrors::unlocated(Path::new("x.toml"), "cannot read".into());
        assert_eq!(u.to_string(), "x.toml: cannot read");
    }
}
