#![no_main]
//! Fuzz target `control_request`: see `vigil_fuzz::control_request` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::control_request(data));
