#![no_main]
//! Fuzz target `config`: see `vigil_fuzz::config` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::config(data));
