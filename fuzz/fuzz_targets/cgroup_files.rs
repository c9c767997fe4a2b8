#![no_main]
//! Fuzz target `cgroup_files`: see `vigil_fuzz::cgroup_files` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::cgroup_files(data));
