//! (skeleton)
use std::path::PathBuf;

/// `vigil run`: returns the exit code.
pub fn run_main(config: Option<PathBuf>) -> i32 {
    let _ = config;
    todo!()
}
