//! The process's command-line arguments, for every part of vigil that reads them (the CLI,
//! the upgrade path, the supervisor's own record of how it was started).
//!
//! std's `env::args` learns argv from the C library: glibc passes `argc`/`argv` to the
//! functions of `.init_array`, one of which is std's, so it works even though vigil skips
//! std's runtime start-up (`no_main`, src/main.rs). musl does not pass them; there `main`
//! hands its `argv` to [`init`] before anything reads it. Owns only that copy; it never
//! changes after [`init`].

use std::ffi::OsString;
use std::sync::OnceLock;

static ARGS: OnceLock<Vec<OsString>> = OnceLock::new();

/// The arguments as `main` received them; a second call changes nothing.
pub fn init(args: Vec<OsString>) {
    let _ = ARGS.set(args);
}

/// argv, the program name first: what [`init`] was given, else std's `env::args_os`.
pub fn args_os() -> impl Iterator<Item = OsString> {
    ARGS.get()
        .cloned()
        .unwrap_or_else(|| std::env::args_os().collect())
        .into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_init_the_arguments_are_std_s() {
        let ours: Vec<OsString> = args_os().collect();
        let std: Vec<OsString> = std::env::args_os().collect();
        assert_eq!(ours, std);
    }
}
