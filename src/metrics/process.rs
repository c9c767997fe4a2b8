//! vigil's own process figures, as Prometheus client libraries name them (`process_*`).
//!
//! Owns reading them: `/proc/self/status` (`VmRSS`, `VmSize`, proc(5)), getrusage(2) for CPU
//! time, `/proc/self/fd` for open descriptors, getrlimit(2) for their limit. A figure that
//! cannot be read is left out of the exposition, never guessed.
//!
//! Must not: be called more than once per exposition (a handful of small reads).

use std::time::SystemTime;

/// The `process_*` figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessFigures {
    pub resident_memory_bytes: Option<u64>,
    pub virtual_memory_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    /// Seconds since the Unix epoch at which vigil started.
    pub start_time_seconds: Option<f64>,
}

/// Reads vigil's figures now; `started` is when vigil started (wall clock).
pub fn read_self(started: SystemTime) -> ProcessFigures {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cpu_seconds = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .ok()
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| {
                tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1_000_000.0
            };
            t(u.user_time()) + t(u.system_time())
        });
    ProcessFigures {
        resident_memory_bytes: status_kib(&status, "VmRSS:").map(|k| k * 1024),
        virtual_memory_bytes: status_kib(&status, "VmSize:").map(|k| k * 1024),
        cpu_seconds,
        open_fds: open_fds(),
        max_fds: nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .ok()
            .map(|(soft, _)| soft),
        start_time_seconds: started
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs_f64()),
    }
}

/// vigil's open descriptors: since Linux 6.2 `stat(2)` of `/proc/self/fd` reports their number
/// as the directory's size (proc(5), "/proc/pid/fd"), one syscall instead of listing a
/// directory of thousands of entries (each container holds several); older kernels report 0
/// there, and the directory is listed (less the descriptor listing it holds).
fn open_fds() -> Option<u64> {
    let path = "/proc/self/fd";
    match std::fs::metadata(path) {
        Ok(m) if m.len() > 0 => Some(m.len()),
        _ => std::fs::read_dir(path)
            .ok()
            .map(|d| (d.count() as u64).saturating_sub(1)),
    }
}

/// A `Key:   1234 kB` line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let mut words = line[key.len()..].split_whitespace();
    let n = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_in_kib_and_odd_lines_are_left_out() {
        let status = "Name:\tvigil\nVmSize:\t  12345 kB\nVmRSS:\t 678 kB\nVmOdd:\t12 pages\n";
        assert_eq!(status_kib(status, "VmSize:"), Some(12345));
        assert_eq!(status_kib(status, "VmRSS:"), Some(678));
        assert_eq!(status_kib(status, "VmOdd:"), None);
        assert_eq!(status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn own_figures_are_read_from_this_process() {
        let f = read_self(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(5));
        assert!(f.resident_memory_bytes.is_some_and(|b| b > 0));
        assert!(f.open_fds.is_some_and(|n| n >= 3));
        // The count is of this process's descriptors: 100 more open files add 100 (other
        // test threads open and close a few meanwhile: the margin is theirs).
        let before = open_fds().unwrap();
        let extra: Vec<_> = (0..100)
            .map(|_| std::fs::File::open("/proc/self/status").unwrap())
            .collect();
        let after = open_fds().unwrap();
        drop(extra);
        assert!(after >= before + 50, "{before} then {after}");
        assert!(f.max_fds.is_some());
        assert_eq!(f.start_time_seconds, Some(5.0));
    }
}
