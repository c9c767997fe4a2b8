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

/// The musl build's allocator: dlmalloc for the supervisor, musl's own for every other command
/// (src/alloc.rs; none on glibc).
#[cfg(all(not(test), target_env = "musl"))]
#[global_allocator]
static GLOBAL: vigil::alloc::Chosen = vigil::alloc::Chosen;

/// The process's entry point (`__libc_start_main` calls it).
// The symbol `main` is what the C runtime calls; nothing else in the program defines it.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    #[cfg(target_env = "musl")]
    if supervises(argc, argv) {
        vigil::alloc::choose_dlmalloc();
    }
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

/// Whether this process will be the supervisor: `vigil run …`, the new instance of `vigil
/// upgrade` (handed its state in `VIGIL_HANDOFF_FD`), or the kernel's init. Read from the raw
/// `argv` and environment, before anything allocates. A wrong answer costs speed only: both
/// allocators serve every command correctly.
#[cfg(all(not(test), target_env = "musl"))]
fn supervises(argc: libc::c_int, argv: *const *const libc::c_char) -> bool {
    // SAFETY: getpid(2) and getenv(3) with a NUL-terminated name read process state only;
    // musl's getenv does not allocate.
    let (pid1, handoff) = unsafe {
        (
            libc::getpid() == 1,
            !libc::getenv(c"VIGIL_HANDOFF_FD".as_ptr()).is_null(),
        )
    };
    // SAFETY: when `argc` ≥ 2, `argv[1]` is a valid pointer to a NUL-terminated string that
    // lives for the process's life.
    let first = (argc >= 2).then(|| unsafe { std::ffi::CStr::from_ptr(*argv.add(1)) });
    is_supervisor(first, pid1, handoff)
}

/// [`supervises`]' rule, given the first argument, whether the process is PID 1 and whether a
/// handoff's state was passed to it.
#[cfg_attr(not(any(test, target_env = "musl")), allow(dead_code))]
fn is_supervisor(first: Option<&std::ffi::CStr>, pid1: bool, handoff: bool) -> bool {
    pid1 || handoff || first == Some(c"run")
}

#[cfg(test)]
mod tests {
    use super::is_supervisor;

    #[test]
    fn only_run_init_and_an_upgrade_s_new_instance_take_the_supervisor_s_allocator() {
        assert!(is_supervisor(Some(c"run"), false, false));
        assert!(is_supervisor(None, true, false), "PID 1 without arguments");
        assert!(
            is_supervisor(Some(c"quiet"), true, false),
            "PID 1, a kernel word"
        );
        assert!(is_supervisor(Some(c"run"), false, true));
        assert!(
            is_supervisor(None, false, true),
            "the new instance of an upgrade"
        );
        for client in [c"status", c"top", c"logs", c"runs", c"--help", c"-h", c""] {
            assert!(!is_supervisor(Some(client), false, false), "{client:?}");
        }
        assert!(!is_supervisor(None, false, false));
    }
}
