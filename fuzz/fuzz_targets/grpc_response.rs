#![no_main]
//! Fuzz target `grpc_response`: see `vigil_fuzz::grpc_response` for what it feeds and checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| vigil_fuzz::grpc_response(data));
