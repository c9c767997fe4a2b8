#![no_main]
//! Fuzz target `http_response`: see `vigil_fuzz::http_response` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::http_response(data));
