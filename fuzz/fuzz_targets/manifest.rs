#![no_main]
//! Fuzz target `manifest`: see `vigil_fuzz::manifest` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::manifest(data));
