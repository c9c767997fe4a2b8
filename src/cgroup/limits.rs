//! Turns a container's [`Limits`] into cgroup v2 interface-file writes.
//!
//! Owns the value formats (Documentation/admin-guide/cgroup-v2.rst): bytes for `memory.*`,
//! `$MAX $PERIOD` for `cpu.max`, 1..=10000 for `cpu.weight`, `0|1` for `memory.oom.group`.
//! It writes only into the directory it is given and only the files a limit asks for; it must
//! not create directories or enable controllers (the manager does that).

use std::io;
use std::path::Path;

use log::warn;

use super::CgroupError;
use super::Limits;
use super::files::{
    CPU_MAX, CPU_WEIGHT, MEMORY_HIGH, MEMORY_MAX, MEMORY_OOM_GROUP, MEMORY_SWAP_MAX, PIDS_MAX,
    write_file,
};

/// The CFS period vigil uses for `cpu.max` (the kernel default, 100 ms).
pub const CPU_PERIOD_USEC: u64 = 100_000;

/// `cpu.max` for a number of cores: 1.5 → `150000 100000`. The quota is at least 1000 µs,
/// the kernel's minimum (kernel/sched/core.c, `min_cfs_quota_period`).
pub fn cpu_max_value(cores: f64) -> String {
    let quota = (cores * CPU_PERIOD_USEC as f64).round().max(1000.0) as u64;
    format!("{quota} {CPU_PERIOD_USEC}")
}

/// The writes `res` asks for, in order, as (file, value).
pub fn planned_writes(res: &Limits) -> Vec<(&'static str, String)> {
    let mut w = Vec::new();
    if let Some(v) = res.memory_max {
        w.push((MEMORY_MAX, v.to_string()));
    }
    if let Some(v) = res.memory_high {
        w.push((MEMORY_HIGH, v.to_string()));
    }
    if let Some(v) = res.swap_max {
        w.push((MEMORY_SWAP_MAX, v.to_string()));
    }
    if let Some(v) = res.pids_max {
        w.push((PIDS_MAX, v.to_string()));
    }
    if let Some(c) = res.cpu_max {
        w.push((CPU_MAX, cpu_max_value(c)));
    }
    if let Some(v) = res.cpu_weight {
        w.push((CPU_WEIGHT, v.to_string()));
    }
    if res.oom_group {
        w.push((MEMORY_OOM_GROUP, "1".to_string()));
    }
    w
}

/// Applies `res` to the cgroup at `dir`. A missing `memory.swap.max` (no swap accounting on
/// this kernel) is logged and skipped; any other failure is an error naming the file.
pub fn apply(dir: &Path, res: &Limits) -> Result<(), CgroupError> {
    for (file, value) in planned_writes(res) {
        match write_file(dir, file, &value) {
            Ok(()) => {}
            Err(CgroupError::Write { path, source, .. })
                if file == MEMORY_SWAP_MAX && source.kind() == io::ErrorKind::NotFound =>
            {
                warn!(
                    "{} does not exist (no swap accounting on this kernel); swap_max ignored",
                    path.display()
                );
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in files {
            // Empty: write_file does not truncate (cgroup files need no truncation).
            std::fs::write(d.path().join(f), "").unwrap();
        }
        d
    }

    fn read(d: &tempfile::TempDir, f: &str) -> String {
        std::fs::read_to_string(d.path().join(f)).unwrap()
    }

    #[test]
    fn cpu_max_is_cores_times_period() {
        assert_eq!(cpu_max_value(1.5), "150000 100000");
        assert_eq!(cpu_max_value(2.0), "200000 100000");
        assert_eq!(cpu_max_value(0.25), "25000 100000");
        assert_eq!(cpu_max_value(0.001), "1000 100000");
    }

    #[test]
    fn limits_are_written_to_their_files() {
        let all = [
            MEMORY_MAX,
            MEMORY_HIGH,
            MEMORY_SWAP_MAX,
            PIDS_MAX,
            CPU_MAX,
            CPU_WEIGHT,
            MEMORY_OOM_GROUP,
        ];
        let d = fixture(&all);
        let res = Limits {
            memory_max: Some(20 * 1024 * 1024),
            memory_high: Some(16 * 1024 * 1024),
            swap_max: Some(0),
            pids_max: Some(64),
            cpu_max: Some(1.5),
            cpu_weight: Some(200),
            oom_group: true,
        };
        apply(d.path(), &res).unwrap();
        assert_eq!(read(&d, MEMORY_MAX), "20971520");
        assert_eq!(read(&d, MEMORY_HIGH), "16777216");
        assert_eq!(read(&d, MEMORY_SWAP_MAX), "0");
        assert_eq!(read(&d, PIDS_MAX), "64");
        assert_eq!(read(&d, CPU_MAX), "150000 100000");
        assert_eq!(read(&d, CPU_WEIGHT), "200");
        assert_eq!(read(&d, MEMORY_OOM_GROUP), "1");
    }

    #[test]
    fn unset_limits_write_nothing() {
        let d = fixture(&[MEMORY_MAX, PIDS_MAX]);
        apply(d.path(), &Limits::default()).unwrap();
        assert_eq!(read(&d, MEMORY_MAX), "");
        assert_eq!(read(&d, PIDS_MAX), "");
    }

    #[test]
    fn missing_swap_file_is_tolerated() {
        let d = fixture(&[MEMORY_MAX]);
        let res = Limits {
            memory_max: Some(1 << 20),
            swap_max: Some(0),
            ..Limits::default()
        };
        apply(d.path(), &res).unwrap();
        assert_eq!(read(&d, MEMORY_MAX), "1048576");
    }

    #[test]
    fn missing_limit_file_is_an_error_naming_it() {
        let d = fixture(&[]);
        let res = Limits {
            pids_max: Some(10),
            ..Limits::default()
        };
        let err = apply(d.path(), &res).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&*d.path().join("pids.max").to_string_lossy()),
            "{msg}"
        );
    }
}
