//! Kernel file names of cgroup v2 and the small read/write/parse helpers over them.
//!
//! Owns the interface-file vocabulary (Documentation/admin-guide/cgroup-v2.rst, "Interface
//! Files") and its text formats: flat-keyed (`key value\n`), single values (`max` or a u64),
//! `cpu.stat` and PSI `memory.pressure`. Every helper takes the cgroup directory explicitly
//! and every error carries the full path it failed on. Parsers take `&str` so they are tested
//! on strings. This module must not decide policy (what to create, what to tolerate): callers do.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::CgroupError;

pub const CGROUP_PROCS: &str = "cgroup.procs";
pub const CGROUP_CONTROLLERS: &str = "cgroup.controllers";
pub const CGROUP_SUBTREE_CONTROL: &str = "cgroup.subtree_control";
pub const CGROUP_EVENTS: &str = "cgroup.events";
/// Since Linux 5.14.
pub const CGROUP_KILL: &str = "cgroup.kill";
pub const MEMORY_MAX: &str = "memory.max";
pub const MEMORY_HIGH: &str = "memory.high";
/// Absent when the kernel has no swap accounting (`CONFIG_MEMCG_SWAP` off or `swapaccount=0`).
pub const MEMORY_SWAP_MAX: &str = "memory.swap.max";
pub const MEMORY_OOM_GROUP: &str = "memory.oom.group";
pub const MEMORY_EVENTS: &str = "memory.events";
pub const MEMORY_CURRENT: &str = "memory.current";
/// Since Linux 5.19.
pub const MEMORY_PEAK: &str = "memory.peak";
/// Needs PSI (`CONFIG_PSI`, not disabled with `psi=0`).
pub const MEMORY_PRESSURE: &str = "memory.pressure";
pub const PIDS_MAX: &str = "pids.max";
pub const PIDS_CURRENT: &str = "pids.current";
pub const CPU_MAX: &str = "cpu.max";
pub const CPU_WEIGHT: &str = "cpu.weight";
pub const CPU_STAT: &str = "cpu.stat";

/// Reads a whole interface file.
pub fn read_file(dir: &Path, name: &str) -> Result<String, CgroupError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|source| CgroupError::Read { path, source })
}

/// Reads an interface file that may legitimately be absent (controller not enabled, older
/// kernel): `Ok(None)` on ENOENT.
pub fn read_optional(dir: &Path, name: &str) -> Result<Option<String>, CgroupError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CgroupError::Read { path, source }),
    }
}

/// Re-reads an already open interface file from offset 0 (pread), without moving any file
/// position. Reading is also what re-arms kernfs change notification for this open file
/// (fs/kernfs/file.c: the poll state compares the file's event count with the last read one).
pub fn reread(file: &File, path: &Path) -> Result<String, CgroupError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    let mut offset = 0u64;
    loop {
        let n = file
            .read_at(&mut chunk, offset)
            .map_err(|source| CgroupError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        offset += n as u64;
    }
    String::from_utf8(buf).map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        message: "not UTF-8".to_string(),
    })
}

/// Reads a small interface file of the cgroup whose directory is open as `dir`: `openat(2)`
/// relative to that descriptor (one path component to look up instead of the whole path from
/// `/`, which dominated a scrape of many containers: most of its time was kernfs path walks),
/// one `read(2)` into a stack buffer (no `statx` for a size hint, no heap until the text),
/// then close. `Ok(None)` when the file is absent (controller not enabled, older kernel).
/// Files longer than the buffer are read to their end. Not for files kept open for poll:
/// those are re-read with [`reread`].
pub fn read_in_dir(dir: &File, dir_path: &Path, name: &str) -> Result<Option<String>, CgroupError> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    let err = |source: io::Error| CgroupError::Read {
        path: dir_path.join(name),
        source,
    };
    let fd = match openat(dir, name, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(err(io::Error::from(e))),
    };
    let mut file = File::from(fd);
    let mut buf = [0u8; 1024];
    let mut text = Vec::new();
    loop {
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(e)),
        };
        text.extend_from_slice(&buf[..n]);
        // A seq_file read returns the whole rendering when it fits: a short read that ends a
        // line is the end (saves the read that would return 0).
        if n == 0 || (n < buf.len() && buf[n - 1] == b'\n') {
            break;
        }
    }
    String::from_utf8(text)
        .map(Some)
        .map_err(|_| CgroupError::Parse {
            path: dir_path.join(name),
            message: "not UTF-8".to_string(),
        })
}

/// Reads a file via a fresh descriptor (for files read once, like `cgroup.procs`).
pub fn read_path(path: &Path) -> Result<String, CgroupError> {
    let mut s = String::new();
    File::open(path)
        .and_then(|mut f| f.read_to_string(&mut s))
        .map_err(|source| CgroupError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(s)
}

/// Writes `value` to an existing interface file in one `write(2)`: cgroup files parse each
/// write as one command, so the value must not be split. Never creates files.
pub fn write_file(dir: &Path, name: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(name);
    write_path(&path, value)
}

/// [`write_file`] on a full path.
pub fn write_path(path: &Path, value: &str) -> Result<(), CgroupError> {
    let err = |source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    };
    let mut f = OpenOptions::new().write(true).open(path).map_err(err)?;
    let n = f.write(value.as_bytes()).map_err(err)?;
    if n != value.len() {
        return Err(err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short write to a cgroup file",
        )));
    }
    Ok(())
}

/// Opens an interface file for repeated pread / poll registration.
pub fn open_read(dir: &Path, name: &str) -> Result<File, CgroupError> {
    let path = dir.join(name);
    File::open(&path).map_err(|source| CgroupError::Open { path, source })
}

/// Parses a flat-keyed file (`memory.events`, `cgroup.events`, `cpu.stat`): one `key value`
/// per line. Lines without a value are skipped.
pub fn parse_flat_keyed(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines().filter_map(|line| {
        let mut it = line.split_whitespace();
        let key = it.next()?;
        let value = it.next()?;
        Some((key, value))
    })
}

/// The u64 under `key` in flat-keyed text.
pub fn flat_keyed_u64(text: &str, key: &str) -> Option<u64> {
    parse_flat_keyed(text)
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// A single-value file that may say `max` (`memory.max`, `pids.max`, `memory.swap.max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxValue {
    Max,
    Value(u64),
}

impl MaxValue {
    /// `None` for `max`.
    pub fn limit(self) -> Option<u64> {
        match self {
            MaxValue::Max => None,
            MaxValue::Value(v) => Some(v),
        }
    }
}

/// Parses `max` or a u64 (surrounding whitespace ignored).
pub fn parse_max_value(text: &str) -> Option<MaxValue> {
    let t = text.trim();
    if t == "max" {
        Some(MaxValue::Max)
    } else {
        t.parse().ok().map(MaxValue::Value)
    }
}

/// Parses a plain u64 value file (`memory.current`, `pids.current`).
pub fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// `usage_usec` from `cpu.stat` (present even without the cpu controller since Linux 4.15).
pub fn parse_cpu_usage_usec(text: &str) -> Option<u64> {
    flat_keyed_u64(text, "usage_usec")
}

/// `avg10` of the `some` line of a PSI file (Documentation/accounting/psi.rst):
/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0`.
pub fn parse_pressure_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("avg10="))
        .and_then(|v| v.parse().ok())
}

/// Space-separated controller names (`cgroup.controllers`, `cgroup.subtree_control`).
pub fn parse_controller_list(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// PIDs listed in `cgroup.procs`.
pub fn parse_procs(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// `populated` from `cgroup.events`.
pub fn parse_populated(text: &str, path: &Path) -> Result<bool, CgroupError> {
    match flat_keyed_u64(text, "populated") {
        Some(v) => Ok(v != 0),
        None => Err(CgroupError::Parse {
            path: path.to_path_buf(),
            message: format!("no `populated` key in {text:?}"),
        }),
    }
}

/// `dir/name` as an owned path (for error construction at call sites).
pub fn file_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_read_in_a_directory_are_whole_and_absent_ones_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let handle = File::open(dir.path()).unwrap();
        // Longer than the stack buffer, with and without a final line feed.
        let long: String = (0..300).map(|i| format!("key{i} {i}\n")).collect();
        std::fs::write(dir.path().join("cpu.stat"), &long).unwrap();
        let unterminated = "x".repeat(2500);
        std::fs::write(dir.path().join("memory.current"), &unterminated).unwrap();
        std::fs::write(dir.path().join("pids.current"), "7\n").unwrap();
        let read = |name| read_in_dir(&handle, dir.path(), name).unwrap();
        assert_eq!(read("cpu.stat").as_deref(), Some(long.as_str()));
        assert_eq!(
            read("memory.current").as_deref(),
            Some(unterminated.as_str())
        );
        assert_eq!(read("pids.current").as_deref(), Some("7\n"));
        assert_eq!(read("memory.peak"), None);
        // An error other than absence names the file.
        std::fs::create_dir(dir.path().join("memory.max")).unwrap();
        let e = read_in_dir(&handle, dir.path(), "memory.max").unwrap_err();
        assert!(e.to_string().contains("memory.max"), "{e}");
    }

    #[test]
    fn flat_keyed_parses_memory_events() {
        let text = "low 0\nhigh 3\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n";
        let all: Vec<_> = parse_flat_keyed(text).collect();
        assert_eq!(all.len(), 6);
        assert_eq!(flat_keyed_u64(text, "oom_kill"), Some(1));
        assert_eq!(flat_keyed_u64(text, "max"), Some(7));
        assert_eq!(flat_keyed_u64(text, "absent"), None);
    }

    #[test]
    fn flat_keyed_skips_blank_and_keyless_lines() {
        let text = "\npopulated 1\nbroken\nfrozen 0\n";
        let all: Vec<_> = parse_flat_keyed(text).collect();
        assert_eq!(all, vec![("populated", "1"), ("frozen", "0")]);
    }

    #[test]
    fn max_value_parses_max_and_numbers() {
        assert_eq!(parse_max_value("max\n"), Some(MaxValue::Max));
        assert_eq!(
            parse_max_value("20971520\n"),
            Some(MaxValue::Value(20971520))
        );
        assert_eq!(parse_max_value("garbage"), None);
        assert_eq!(MaxValue::Max.limit(), None);
    }

    #[test]
    fn cpu_stat_usage_usec_is_read() {
        let text = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n\
                    nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n";
        assert_eq!(parse_cpu_usage_usec(text), Some(123456));
        assert_eq!(parse_cpu_usage_usec("user_usec 1\n"), None);
    }

    #[test]
    fn memory_pressure_some_avg10_is_read() {
        let text = "some avg10=1.25 avg60=0.50 avg300=0.10 total=12345\n\
                    full avg10=0.75 avg60=0.20 avg300=0.05 total=2345\n";
        assert_eq!(parse_pressure_some_avg10(text), Some(1.25));
        assert_eq!(parse_pressure_some_avg10("full avg10=1.00\n"), None);
    }

    #[test]
    fn procs_and_controllers_lists_parse() {
        assert_eq!(parse_procs("12\n345\n\n"), vec![12, 345]);
        assert_eq!(
            parse_controller_list("cpuset cpu io memory pids\n"),
            vec!["cpuset", "cpu", "io", "memory", "pids"]
        );
    }

    #[test]
    fn populated_parse_error_carries_path() {
        let p = Path::new("/x/cgroup.events");
        assert!(parse_populated("populated 1\nfrozen 0\n", p).unwrap());
        assert!(!parse_populated("populated 0\n", p).unwrap());
        let err = parse_populated("frozen 0\n", p).unwrap_err();
        assert!(err.to_string().contains("/x/cgroup.events"), "{err}");
    }

    #[test]
    fn read_and_write_errors_carry_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_file(dir.path(), MEMORY_MAX).unwrap_err();
        assert!(
            err.to_string()
                .contains(&*dir.path().join("memory.max").to_string_lossy())
        );
        // write_file never creates: a missing file is an error naming it and the value.
        let err = write_file(dir.path(), PIDS_MAX, "64").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("pids.max") && msg.contains("64"), "{msg}");
        assert!(read_optional(dir.path(), MEMORY_PEAK).unwrap().is_none());
    }

    #[test]
    fn reread_returns_current_contents_each_time() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CGROUP_EVENTS), "populated 1\n").unwrap();
        let f = open_read(dir.path(), CGROUP_EVENTS).unwrap();
        let p = dir.path().join(CGROUP_EVENTS);
        assert_eq!(reread(&f, &p).unwrap(), "populated 1\n");
        std::fs::write(&p, "populated 0\n").unwrap();
        assert_eq!(reread(&f, &p).unwrap(), "populated 0\n");
    }
}
