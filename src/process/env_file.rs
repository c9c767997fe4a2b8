//! `env_file`: a container's secrets, read from a file at every spawn (and every exec probe,
//! which runs with the container's environment) rather than written into the config.
//!
//! Format: one `KEY=VALUE` per line; blank lines and lines whose first non-blank character is
//! `#` are skipped; leading blanks before the key are ignored; the value is everything after
//! the first `=` up to the end of the line, taken literally (no quotes, escapes or variable
//! expansion, unlike a shell). The file is checked like the config file when vigil runs as root
//! (owner root or vigil's uid, not writable by group or others, every ancestor directory too:
//! see [`crate::trust`]).
//!
//! Must not: put a value in an error or a log line (errors name the file, the line number and
//! the key at most), or keep what was read beyond the spawn it was read for.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::trust::{self, Target};

/// Largest env file read: environments are small; a huge file is a mistake.
pub const MAX_BYTES: u64 = 1024 * 1024;

/// Why an env file cannot be used. No variant carries a value from the file.
#[derive(Debug, thiserror::Error)]
pub enum EnvFileError {
    #[error(transparent)]
    Untrusted(#[from] trust::TrustError),
    #[error("env_file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("env_file {}: larger than {MAX_BYTES} bytes", path.display())]
    TooLarge { path: PathBuf },
    #[error("env_file {}:{line}: {problem}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        problem: LineProblem,
    },
}

/// The format is shared with the config's variable files (`.env`, `env_files`).
pub use crate::config::envfile::{LineProblem, parse};

/// Reads and parses `path`, checking it first when vigil runs as root.
pub fn read(path: &Path) -> Result<Vec<(String, String)>, EnvFileError> {
    if nix::unistd::Uid::effective().is_root() {
        trust::check("env_file", path, Target::File)?;
    }
    let err = |source| EnvFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    // O_NONBLOCK: a FIFO put in its place must not hold the loop in open(2) (vigil runs the
    // spawn on its event loop); only a regular file is read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(err)?;
    if !file.metadata().map_err(err)?.is_file() {
        return Err(err(std::io::Error::other("not a regular file")));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(EnvFileError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    parse(&bytes).map_err(|(line, problem)| EnvFileError::Line {
        path: path.to_path_buf(),
        line,
        problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_values_comments_and_blank_lines() {
        let text =
            b"# db\n\nDB_USER=app\n  DB_PASSWORD=s3cr=t \"q\"\r\nEMPTY=\n#X=1\nDB_USER=other\n";
        let env = parse(text).unwrap();
        assert_eq!(
            env,
            vec![
                ("DB_PASSWORD".to_string(), "s3cr=t \"q\"".to_string()),
                ("EMPTY".to_string(), String::new()),
                ("DB_USER".to_string(), "other".to_string()),
            ]
        );
    }

    #[test]
    fn bad_lines_are_located_without_their_text() {
        assert_eq!(
            parse(b"A=1\nsecret-value\n"),
            Err((2, LineProblem::NoEquals))
        );
        assert_eq!(parse(b"=x\n"), Err((1, LineProblem::EmptyKey)));
        assert_eq!(
            parse(b"\n\nMY KEY=x\n"),
            Err((3, LineProblem::BlankInKey("MY KEY".into())))
        );
        assert_eq!(parse(b"A=\xff\n"), Err((1, LineProblem::NotUtf8)));
        assert_eq!(parse(b"A=a\0b\n"), Err((1, LineProblem::Nul)));
        let e = EnvFileError::Line {
            path: PathBuf::from("/etc/vigil/web.env"),
            line: 2,
            problem: LineProblem::NoEquals,
        };
        let m = e.to_string();
        assert!(m.starts_with("env_file /etc/vigil/web.env:2: "), "{m}");
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("none.env");
        let m = read(&p).unwrap_err().to_string();
        assert!(m.contains("none.env"), "{m}");
    }
}
