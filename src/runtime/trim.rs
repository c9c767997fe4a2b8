//! Giving back the memory only start-up, or a burst of requests, needed.
//!
//! Owns: [`give_back`], called once the initial starts are done, and [`IdleTrim`], which
//! says when to call it again once the supervisor has been idle for [`IDLE_TRIM_AFTER`] after
//! the initial starts or after answering requests. Each (1) drops this process's page-table entries for the code it has
//! mapped — vigil's own text and its shared libraries' (`r-xp` private file mappings) — with
//! `madvise(MADV_DONTNEED)`, and (2) returns free heap pages to the kernel: glibc's
//! `malloc_trim(0)` in a glibc build, dlmalloc's `trim(0)` (the free top of its heap and its
//! unused segments) in the musl release build's supervisor (src/alloc.rs).
//!
//! Why after requests: a `status` or `describe` faults in code that the idle loop never runs
//! again (serialising, text formatting: ~1 MiB of text at 64 KiB per fault), and glibc keeps
//! the heap pages of the largest reply (its mmap threshold rises to the size of the first
//! large block freed, so later large replies come from the heap and stay). At 200 containers
//! that took the idle resident set from 2.9 to 6.7 MiB (BENCHMARKS.md). The cost of a trim:
//! reading /proc/self/smaps once, and the next request faulting its code back in (tens of
//! microseconds); while requests keep coming less than [`IDLE_TRIM_AFTER`] apart (`vigil
//! top`, a monitoring loop), nothing is trimmed.
//!
//! Why (1): the kernel maps file pages "around" every code fault (`fault_around_bytes`, 64 KiB
//! by default; mm/memory.c `do_fault_around`), so config parsing, validation and the CLI
//! layer, run once, leave most of a multi-megabyte text resident for the supervisor's whole
//! life. Text pages are clean and never written: zapping their entries loses nothing; the
//! code the loop runs faults back in from the page cache on first use (a one-off
//! microseconds cost on the first restart, probe or request after start-up). madvise(2):
//! "subsequent accesses of pages in the range ... will result in repopulating the memory
//! contents from the up-to-date contents of the underlying mapped file".
//!
//! Must not: touch a mapping that is writable, anonymous, shared, or has any private
//! (copy-on-write) page — `Anonymous:` in /proc/self/smaps must be 0, so a library with text
//! relocations or a debugger's breakpoint is never reverted to the file's bytes; fail
//! start-up (everything here is a best effort, logged at debug level).

#![allow(unsafe_code)]

use std::io::BufRead as _;

/// Drop code from the resident set and trim the heap. Best effort; nothing under
/// `VIGIL_PLAIN=idle-trim` (src/tricks.rs).
pub fn give_back() {
    if !crate::tricks::on(crate::tricks::Trick::IdleTrim) {
        return;
    }
    match code_mappings() {
        Ok(ranges) => {
            for (start, end) in ranges {
                // SAFETY: [start, end) is one whole `r-xp` private file mapping from
                // /proc/self/smaps with no anonymous (copy-on-write) page: every page is the
                // file's own bytes, never written. MADV_DONTNEED only removes page-table
                // entries; later accesses refault the same bytes from the file, which the
                // kernel keeps from being written while it is executed (ETXTBSY). No Rust
                // object lives in a code mapping.
                let rc = unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
                };
                if rc != 0 {
                    log::debug!(
                        "madvise(MADV_DONTNEED) on code {start:#x}-{end:#x}: {}",
                        std::io::Error::last_os_error()
                    );
                }
            }
        }
        Err(e) => log::debug!("/proc/self/smaps: {e}"),
    }
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory of glibc's allocator (the one Rust's
    // System allocator uses); it is thread-safe and takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
    // The musl build's supervisor allocates from dlmalloc (src/alloc.rs).
    #[cfg(target_env = "musl")]
    crate::alloc::trim();
}

/// How long the supervisor waits, after the last request, before trimming.
pub const IDLE_TRIM_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// When to trim after requests: [`IdleTrim::activity`] on every request or scrape, then one
/// trim [`IDLE_TRIM_AFTER`] after the last one (its deadline is part of the poll timeout).
#[derive(Debug, Default)]
pub struct IdleTrim {
    last_activity: Option<std::time::Instant>,
}

impl IdleTrim {
    /// A request was read or answered at `now` (no trim follows under
    /// `VIGIL_PLAIN=idle-trim`, so no deadline either).
    pub fn activity(&mut self, now: std::time::Instant) {
        if crate::tricks::on(crate::tricks::Trick::IdleTrim) {
            self.last_activity = Some(now);
        }
    }

    /// When the next trim is due, if one is.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.last_activity.map(|t| t + IDLE_TRIM_AFTER)
    }

    /// Whether a trim is due at `now`; if so it is taken (the caller trims, once).
    pub fn take_due(&mut self, now: std::time::Instant) -> bool {
        let due = self.deadline().is_some_and(|d| d <= now);
        if due {
            self.last_activity = None;
        }
        due
    }
}

/// The `[start, end)` of every code mapping that may be dropped, from /proc/self/smaps.
fn code_mappings() -> std::io::Result<Vec<(usize, usize)>> {
    let file = std::fs::File::open("/proc/self/smaps")?;
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        lines.push(line?);
    }
    Ok(droppable(lines.iter().map(String::as_str)))
}

/// From smaps text (proc(5): a `start-end perms offset dev inode path` header, then
/// `Key: value kB` lines): the ranges of `r-xp` file mappings whose `Anonymous:` is 0.
fn droppable<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut candidate = None;
    for line in lines {
        if let Some(range) = header(line) {
            candidate = range;
        } else if let Some(rest) = line.strip_prefix("Anonymous:") {
            if let Some(range) = candidate.take() {
                if rest.trim() == "0 kB" {
                    out.push(range);
                }
            }
        }
    }
    out
}

/// A smaps header line: `Some(Some(range))` for an `r-xp` file mapping (inode ≠ 0),
/// `Some(None)` for any other mapping, `None` for a line that is not a header.
#[allow(clippy::option_option)]
fn header(line: &str) -> Option<Option<(usize, usize)>> {
    let mut fields = line.split_ascii_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let inode = fields.next()?;
    Some((perms == "r-xp" && inode != "0" && start < end).then_some((start, end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_code_file_mappings_without_copied_pages_are_dropped() {
        let smaps = "\
55d0a0000000-55d0a0200000 r-xp 00001000 fe:00 123 /usr/bin/vigil
Size:               2048 kB
Rss:                1024 kB
Anonymous:             0 kB
55d0a0200000-55d0a0300000 r--p 00201000 fe:00 123 /usr/bin/vigil
Anonymous:           140 kB
55d0a0300000-55d0a0301000 rw-p 00301000 fe:00 123 /usr/bin/vigil
Anonymous:             4 kB
7f0000000000-7f0000100000 r-xp 00026000 fe:00 456 /usr/lib/libtextrel.so
Anonymous:             8 kB
7f0000100000-7f0000200000 r-xs 00000000 fe:00 789 /dev/shm/x
Anonymous:             0 kB
7f0000200000-7f0000300000 r-xp 00000000 00:00 0 
Anonymous:             0 kB
7f0000300000-7f0000400000 r-xp 00026000 fe:00 999 /usr/lib/libc.so.6
Anonymous:             0 kB
";
        assert_eq!(
            droppable(smaps.lines()),
            vec![
                (0x55d0a0000000, 0x55d0a0200000),
                (0x7f0000300000, 0x7f0000400000)
            ]
        );
    }

    #[test]
    fn an_idle_trim_is_due_once_after_the_last_activity_and_not_before() {
        let t0 = std::time::Instant::now();
        let mut idle = IdleTrim::default();
        assert_eq!(idle.deadline(), None);
        assert!(!idle.take_due(t0 + IDLE_TRIM_AFTER * 10));
        idle.activity(t0);
        idle.activity(t0 + IDLE_TRIM_AFTER / 2);
        let due = t0 + IDLE_TRIM_AFTER / 2 + IDLE_TRIM_AFTER;
        assert_eq!(idle.deadline(), Some(due));
        assert!(!idle.take_due(due - std::time::Duration::from_millis(1)));
        assert!(idle.take_due(due));
        assert!(!idle.take_due(due + IDLE_TRIM_AFTER));
        assert_eq!(idle.deadline(), None);
    }

    #[test]
    fn the_running_test_binary_finds_its_own_code_and_survives_dropping_it() {
        let here = give_back as fn() as usize;
        let ranges = code_mappings().unwrap();
        assert!(
            ranges
                .iter()
                .any(|&(start, end)| start <= here && here < end),
            "{ranges:x?}"
        );
        give_back();
        // Code and data still work after the drop (the pages fault back in).
        assert_eq!(format!("{}", 6 * 7), "42");
    }
}
