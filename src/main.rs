//! The `vigil` binary: the C library's start-up code calls [`main`], which runs
//! [`vigil::cli::main`].
//!
//! `no_main`: Rust's own runtime start-up (std's `lang_start`) is not run. It costs every
//! `vigil status` about 15 system calls and ~60 µs: glibc's `pthread_getattr_np` reads and
//! parses /proc/self/maps to find the main thread's stack, and a signal stack and
//! SIGSEGV/SIGBUS handlers are set up, only to print "has overflowed its stack" before the
//! abort a stack overflow ends in either way (without them: the same end by SIGSEGV). What
//! vigil needs of that start-up is done here, as std does it: SIGPIPE ignored, so a write to
//! a closed pipe or socket fails with EPIPE instead of killing the process; descriptors 0–2
//! opened on /dev/null if they are closed, so no file or socket vigil opens takes their
//! place; a panic outside the loop ends the process with exit code 101;
//! `std::process::exit` flushes stdout. argv is handed to [`vigil::args`], which every part of
//! vigil reads it from (glibc also passes it to std's `.init_array` function, musl does not).
//! One difference remains: panic messages name the main thread `<unnamed>` instead of `main`.
#![cfg_attr(not(test), no_main)]
#![allow(unsafe_code)]

/// The process's entry point (`__libc_start_main` calls it).
// The symbol `main` is what the C runtime calls; nothing else in the program defines it.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    vigil::args::init(arguments(argc, argv));
    sanitize_standard_fds();
    // SAFETY: signal(2) with SIG_IGN installs no handler code; at this point the process has
    // one thread and nothing else is changing signal dispositions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let code = std::panic::catch_unwind(vigil::cli::main).unwrap_or(101);
    std::process::exit(code)
}

/// `argv` as the C runtime passed it to `main` (musl, unlike glibc, does not hand it to
/// std's start-up code: src/args.rs).
#[cfg(not(test))]
fn arguments(argc: libc::c_int, argv: *const *const libc::c_char) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let count = usize::try_from(argc).unwrap_or(0);
    let mut args = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: the C runtime passes `argc` valid pointers in `argv`, each to a
        // NUL-terminated string that lives, unchanged by vigil, for the process's life.
        let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
        args.push(std::ffi::OsStr::from_bytes(arg.to_bytes()).to_os_string());
    }
    args
}

/// Descriptors 0, 1 and 2 that are not open are opened on /dev/null (what std's start-up
/// does: one poll(2), see its `sanitize_standard_fds`); an open one is left as it is.
#[cfg(not(test))]
fn sanitize_standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is a valid array of three pollfd structures for the call's duration.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) };
    if rc < 0 {
        return;
    }
    for pfd in fds {
        if pfd.revents & libc::POLLNVAL != 0 {
            // SAFETY: a NUL-terminated path; the descriptor returned (the lowest free, i.e.
            // `pfd.fd`, as the lower ones are open) is meant to stay open for the process's
            // life, so it is not wrapped in an owner that would close it.
            unsafe {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
}
