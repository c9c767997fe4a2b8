#![no_main]
//! Fuzz target `core_sequence`: see `vigil_fuzz::core_sequence` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::core_sequence(data));
