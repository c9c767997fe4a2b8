//! Link choices for the binary (docs/performance.md; BENCHMARKS.md, "The status CLI and the
//! warm resident set").
//!
//! - `-z pack-relative-relocs` (DT_RELR, binutils ≥ 2.38, glibc ≥ 2.36): the PIE's ~8,000
//!   relative relocations become a bitmap of a few kilobytes instead of a 200 KB `.rela.dyn`
//!   table the dynamic loader reads page by page at every start — ASLR is kept. Release
//!   builds only, so debug builds link as before. Also for musl (≥ 1.2.4 relocates DT_RELR
//!   in its static-pie start-up code): without it a musl vigil reads that 200 KB table at
//!   every start, as the dynamic loader would.
//! - libgcc's unwinder linked in (`libgcc_eh.a`, what gcc's `-static-libgcc` and Rust's own
//!   `+crt-static` builds use) instead of loading `libgcc_s.so.1` at every start: one shared
//!   library less for the dynamic loader to open, map and relocate, and no run of its
//!   constructor `__cpu_indicator_init`, whose `cpuid` instructions each cost a VM exit
//!   (~5 µs here). Panics unwind exactly as before (`catch_unwind` in the loop, backtraces);
//!   the binary then needs only libc. Every profile, so the tests run the unwinder the
//!   release binary has. `-bundle`: the archive is named to the final link, not copied into
//!   the rlib; as one of this crate's native libraries it comes before std's `-lgcc_s`, so
//!   the linker takes the unwinder from it and `--as-needed` drops libgcc_s.
//!
//! Neither for static glibc builds (the VM suite's `+crt-static`): they already link
//! libgcc_eh, and their start-up code relocates itself.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let (linux_gnu, linux_musl) = (linux && env == "gnu", linux && env == "musl");
    let static_crt = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|features| features.split(',').any(|f| f == "crt-static"));
    if linux_gnu && !static_crt {
        println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
    }
    if release && ((linux_gnu && !static_crt) || linux_musl) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
