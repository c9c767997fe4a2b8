#![no_main]
//! Fuzz target `metrics_request`: see `vigil_fuzz::metrics_request` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::metrics_request(data));
