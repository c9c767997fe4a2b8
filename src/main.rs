//! The `vigil` binary: runs [`vigil::cli::main`] and exits with its code.
//!
//! std's own start-up does what a supervisor needs before `main`: SIGPIPE is ignored (a write to
//! a closed pipe or socket fails with EPIPE instead of killing the process), descriptors 0–2 are
//! opened on /dev/null if they are closed (so no file or socket vigil opens takes their place),
//! and a panic outside the loop ends the process with exit code 101.

/// The musl build's allocator: dlmalloc unless `VIGIL_PLAIN` names it (src/alloc.rs; none on
/// glibc).
#[cfg(target_env = "musl")]
#[global_allocator]
static GLOBAL: vigil::alloc::Chosen = vigil::alloc::Chosen;

fn main() {
    std::process::exit(vigil::cli::main())
}
