//! Link choices for the binary (docs/performance.md; BENCHMARKS.md, "Supervisor RSS and the
//! status CLI: before and after").
//!
//! `-z pack-relative-relocs` (DT_RELR, binutils ≥ 2.38, glibc ≥ 2.36): the PIE's ~8,000
//! relative relocations become a bitmap of a few kilobytes instead of a 200 KB `.rela.dyn`
//! table read page by page at every start — ASLR is kept. For the release profile and those
//! that inherit it (`dist`, `vm`), glibc (not a static `+crt-static` one, whose start-up code
//! relocates itself) and musl (≥ 1.2.4 relocates DT_RELR in its static-pie start-up code).
//! The plain link — the debug profile's, which every `cargo test` runs — is chosen for a
//! release build too with `VIGIL_PLAIN_LINK=1` in the build's environment.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VIGIL_PLAIN_LINK");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let plain = std::env::var_os("VIGIL_PLAIN_LINK").is_some_and(|v| v == "1");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let (linux_gnu, linux_musl) = (linux && env == "gnu", linux && env == "musl");
    let static_crt = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|features| features.split(',').any(|f| f == "crt-static"));
    if release && !plain && ((linux_gnu && !static_crt) || linux_musl) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
