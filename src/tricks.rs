//! The switch of vigil's performance tricks: `VIGIL_PLAIN`, a comma-separated list of trick
//! names (or `all`) whose plain path vigil takes instead (docs/performance.md lists each trick,
//! where it lives and what it gained; CI runs the integration tests' plain paths with
//! `VIGIL_PLAIN=all`). Read once per process, at the first question; unknown names are
//! reported by [`unknown`] for the start-up log. The short CPU time slice has a config key of
//! its own (`[supervisor] sched_slice_microseconds`); link and build choices are profiles.
//!
//! Owns: the parsed switch. Must not: change once read (a trick's path is fixed for the
//! process's life), or allocate in [`plain_from_env_unallocated`], which the allocator calls.
#![allow(unsafe_code)]

use std::sync::OnceLock;

/// One trick with a plain path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trick {
    /// A container's clone3 child shares vigil's memory (`CLONE_VM`) on a stack from a pool;
    /// plain: the fork-like clone3 (src/process/raw.rs).
    CloneVm,
    /// The musl build allocates from dlmalloc; plain: musl's `malloc` (src/alloc.rs).
    Dlmalloc,
    /// Short JSON pieces copied by fixed-size moves; plain: `extend_from_slice` each
    /// (src/control/wire.rs).
    JsonPieces,
    /// Code pages dropped and the heap trimmed when idle; plain: neither (src/runtime/trim.rs).
    IdleTrim,
    /// A flooding container's pipe grown to 256 KiB; plain: pipes keep their size
    /// (src/runtime/shell/capture.rs).
    PipeGrowth,
}

impl Trick {
    /// Every trick, in the order docs/performance.md lists them.
    pub const ALL: [Trick; 5] = [
        Trick::CloneVm,
        Trick::Dlmalloc,
        Trick::JsonPieces,
        Trick::IdleTrim,
        Trick::PipeGrowth,
    ];

    /// The trick's name in `VIGIL_PLAIN`.
    pub const fn name(self) -> &'static str {
        match self {
            Trick::CloneVm => "clone-vm",
            Trick::Dlmalloc => "dlmalloc",
            Trick::JsonPieces => "json-pieces",
            Trick::IdleTrim => "idle-trim",
            Trick::PipeGrowth => "pipe-growth",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// `VIGIL_PLAIN`'s value parsed: the tricks turned off, and the names not known.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plain {
    off: u8,
    unknown: Vec<String>,
}

/// Parses a `VIGIL_PLAIN` value: names separated by commas (blanks around them ignored),
/// `all` for every trick.
fn parse(value: &str) -> Plain {
    let mut plain = Plain::default();
    for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if word == "all" {
            plain.off = u8::MAX;
        } else if let Some(t) = Trick::ALL.iter().find(|t| t.name() == word) {
            plain.off |= t.bit();
        } else {
            plain.unknown.push(word.to_owned());
        }
    }
    plain
}

fn switch() -> &'static Plain {
    static PLAIN: OnceLock<Plain> = OnceLock::new();
    PLAIN.get_or_init(|| {
        std::env::var("VIGIL_PLAIN")
            .map(|v| parse(&v))
            .unwrap_or_default()
    })
}

/// Whether `trick` is on in this process (`VIGIL_PLAIN` does not name it).
pub fn on(trick: Trick) -> bool {
    switch().off & trick.bit() == 0
}

/// The names in `VIGIL_PLAIN` that are no trick, for a warning at start.
pub fn unknown() -> &'static [String] {
    &switch().unknown
}

/// Whether `VIGIL_PLAIN` names `trick` (or `all`), read without allocating: for the allocator's
/// choice at the process's first allocation (src/alloc.rs).
pub fn plain_from_env_unallocated(trick: Trick) -> bool {
    // SAFETY: getenv(3) with a NUL-terminated name returns a pointer into the environment
    // (valid until the environment is changed, which nothing does during this call) or null;
    // it does not allocate.
    let ptr = unsafe { libc::getenv(c"VIGIL_PLAIN".as_ptr()) };
    if ptr.is_null() {
        return false;
    }
    // SAFETY: a non-null result of getenv is a NUL-terminated string.
    let value = unsafe { std::ffi::CStr::from_ptr(ptr) }.to_bytes();
    names(value, trick)
}

/// Whether the comma-separated `value` names `trick` or `all`, without allocating.
fn names(value: &[u8], trick: Trick) -> bool {
    value
        .split(|&b| b == b',')
        .map(|w| w.trim_ascii())
        .any(|w| w == b"all" || w == trick.name().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_names_tricks_or_all_and_reports_the_rest() {
        assert_eq!(parse(""), Plain::default());
        let p = parse(" clone-vm , idle-trim,,");
        assert_eq!(p.off, Trick::CloneVm.bit() | Trick::IdleTrim.bit());
        assert!(p.unknown.is_empty());
        let p = parse("all,bogus");
        assert_eq!(p.off, u8::MAX);
        assert_eq!(p.unknown, ["bogus"]);
        for t in Trick::ALL {
            assert_eq!(parse(t.name()).off, t.bit(), "{t:?}");
        }
    }

    #[test]
    fn the_allocator_s_reading_agrees_with_the_parser() {
        for value in [
            "",
            "dlmalloc",
            "all",
            " dlmalloc ,x",
            "clone-vm",
            "dlmallocx",
            "x,all",
        ] {
            assert_eq!(
                names(value.as_bytes(), Trick::Dlmalloc),
                parse(value).off & Trick::Dlmalloc.bit() != 0,
                "{value:?}"
            );
        }
    }

    #[test]
    fn every_trick_has_its_own_bit_and_name() {
        let mut seen = 0u8;
        for t in Trick::ALL {
            assert_eq!(seen & t.bit(), 0, "{t:?}");
            seen |= t.bit();
        }
        let mut names: Vec<_> = Trick::ALL.iter().map(|t| t.name()).collect();
        names.dedup();
        assert_eq!(names.len(), Trick::ALL.len());
    }
}
