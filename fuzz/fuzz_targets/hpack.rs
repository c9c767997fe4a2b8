#![no_main]
//! Fuzz target `hpack`: see `vigil_fuzz::hpack` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::hpack(data));
