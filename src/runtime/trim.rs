//! Giving back, once start-up is done, the memory only start-up needed.
//!
//! Owns: one call, [`after_startup`], made when the first loop turn is about to begin. It
//! (1) drops this process's page-table entries for vigil's own code (the `r-xp` mapping of the
//! executable) with `madvise(MADV_DONTNEED)`, and (2) returns free heap pages to the kernel
//! with glibc's `malloc_trim(0)`.
//!
//! Why (1): the kernel maps file pages "around" every code fault (`fault_around_bytes`, 64 KiB
//! by default; mm/memory.c `do_fault_around`), so config parsing, validation and the CLI
//! layer, run once, leave most of a multi-megabyte text resident for the supervisor's whole
//! life. Text pages are clean, private and never written: zapping their entries loses nothing;
//! the code the loop runs faults back in from the page cache on first use (a one-off
//! microseconds cost on the first restart, probe or request after start-up). madvise(2):
//! "subsequent accesses of pages in the range ... will result in repopulating the memory
//! contents from the up-to-date contents of the underlying mapped file".
//!
//! Must not: touch any writable, RELRO (relocated, copy-on-write) or anonymous mapping — only
//! the executable mapping that holds this very function; fail start-up (everything here is a
//! best effort, logged at debug level).

#![allow(unsafe_code)]

use std::io::BufRead as _;

/// Drop start-up code from the resident set and trim the heap. Best effort.
pub fn after_startup() {
    match own_text() {
        Ok(Some((start, end))) => {
            // SAFETY: [start, end) is exactly one whole `r-xp` private file mapping of the
            // running executable, read from /proc/self/maps and containing this function's
            // address. Its pages are never written (no copy-on-write copies exist), so
            // MADV_DONTNEED only removes page-table entries; later accesses refault the same
            // bytes from the executable file, which the kernel keeps from being written while
            // it runs (ETXTBSY). No Rust object lives in that range.
            let rc = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
            };
            if rc != 0 {
                log::debug!(
                    "madvise(MADV_DONTNEED) on vigil's code {start:#x}-{end:#x}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
        Ok(None) => log::debug!("/proc/self/maps: no r-xp mapping holds vigil's code"),
        Err(e) => log::debug!("/proc/self/maps: {e}"),
    }
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory of glibc's allocator (the one Rust's
    // System allocator uses); it is thread-safe and takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The `[start, end)` of the `r-xp` private mapping that contains this function's code.
fn own_text() -> std::io::Result<Option<(usize, usize)>> {
    let here = after_startup as fn() as usize;
    let file = std::fs::File::open("/proc/self/maps")?;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if let Some(range) = text_mapping_containing(&line, here) {
            return Ok(Some(range));
        }
    }
    Ok(None)
}

/// One /proc/self/maps line (proc(5): `start-end perms offset dev inode path`): its range, if
/// it is an `r-xp` mapping of a file (inode ≠ 0) containing `addr`.
fn text_mapping_containing(line: &str, addr: usize) -> Option<(usize, usize)> {
    let mut fields = line.split_ascii_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let inode = fields.next()?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    (perms == "r-xp" && inode != "0" && start <= addr && addr < end && start < end)
        .then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_private_executable_file_mapping_containing_the_address_is_chosen() {
        let text = "55d0a0000000-55d0a0200000 r-xp 00001000 fe:00 123 /usr/bin/vigil";
        assert_eq!(
            text_mapping_containing(text, 0x55d0a0001000),
            Some((0x55d0a0000000, 0x55d0a0200000))
        );
        // Outside the range, end excluded.
        assert_eq!(text_mapping_containing(text, 0x55d0a0200000), None);
        // Writable, RELRO (r--p), shared or anonymous mappings are never chosen.
        for other in [
            "55d0a0000000-55d0a0200000 rw-p 00001000 fe:00 123 /usr/bin/vigil",
            "55d0a0000000-55d0a0200000 r--p 00001000 fe:00 123 /usr/bin/vigil",
            "55d0a0000000-55d0a0200000 r-xs 00001000 fe:00 123 /usr/bin/vigil",
            "55d0a0000000-55d0a0200000 r-xp 00000000 00:00 0 ",
            "garbage",
        ] {
            assert_eq!(
                text_mapping_containing(other, 0x55d0a0001000),
                None,
                "{other}"
            );
        }
    }

    #[test]
    fn the_running_test_binary_finds_its_own_code_and_survives_dropping_it() {
        let (start, end) = own_text()
            .unwrap()
            .expect("an r-xp mapping holds this code");
        let here = after_startup as fn() as usize;
        assert!(start <= here && here < end);
        after_startup();
        // Code and data still work after the drop (the pages fault back in).
        assert_eq!(format!("{}", 6 * 7), "42");
    }
}
