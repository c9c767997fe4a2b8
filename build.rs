//! Link choices for the release binary (README, Design: "Build").
//!
//! `-z pack-relative-relocs` (DT_RELR, binutils ≥ 2.38, glibc ≥ 2.36): the PIE's ~8,000
//! relative relocations become a bitmap of a few kilobytes instead of a 200 KB `.rela.dyn`
//! table the dynamic loader reads page by page at every start — ASLR is kept. Release builds
//! only, so debug builds link as before; not for static builds (the VM suite's
//! `+crt-static`), whose start-up code relocates itself.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu");
    let static_crt = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|features| features.split(',').any(|f| f == "crt-static"));
    if release && linux_gnu && !static_crt {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
