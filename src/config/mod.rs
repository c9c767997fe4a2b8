//! Configuration: TOML → raw serde mirror → validated [`spec::Config`].
//!
//! Owns parsing, validation with located messages (`FILE:LINE:COL: message`) and defaults.
//! Must not touch the system beyond reading the file (user names, cgroup controllers are
//! checked elsewhere, at start).

pub mod spec;

use std::path::PathBuf;

/// `vigil check`: validate and print every problem; returns the exit code. (Skeleton.)
pub fn check_main(path: Option<PathBuf>) -> i32 {
    let _ = path;
    todo!()
}
