//! Pure parsers for the scalar value syntaxes a config accepts: quantities (`256Mi`), octal
//! modes (`"0660"`), signal names, capability names, rlimit names and pod/container names.
//!
//! Owns only string → value conversion; each parser returns a message (without the field name,
//! which the caller adds). Must not touch the system.

use std::str::FromStr;

/// Parse a byte quantity: plain bytes, or a number (fractions allowed) with a binary suffix
/// `Ki Mi Gi Ti Pi Ei` (powers of 1024) or a decimal one `k/K M G T P E` (powers of 1000), as
/// Kubernetes' `resource.Quantity` does. Fractional byte counts round up (`0.1Ki` = 103).
pub fn parse_quantity(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "invalid quantity {text:?}: expected bytes, or a number with a suffix Ki, Mi, Gi, Ti \
             (powers of 1024) or K, M, G, T (powers of 1000)"
        )
    };
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => return Err(bad()),
    };
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.chars().all(|c| c.is_ascii_digit())
        || !frac_part.chars().all(|c| c.is_ascii_digit())
        || frac_part.len() > 18
    {
        return Err(bad());
    }
    let too_big = || format!("quantity {text:?} is too large");
    let int: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| too_big())?
    };
    let frac: u128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().map_err(|_| bad())?
    };
    let scale = 10u128.pow(frac_part.len() as u32);
    let scaled = int
        .checked_mul(scale)
        .and_then(|v| v.checked_add(frac))
        .and_then(|v| v.checked_mul(multiplier))
        .ok_or_else(too_big)?;
    let bytes = scaled.div_ceil(scale);
    u64::try_from(bytes).map_err(|_| too_big())
}

/// Parse a file mode written as an octal string: `"0660"`, `"660"` or `"0o660"`.
pub fn parse_octal_mode(text: &str) -> Result<u32, String> {
    let s = text.trim();
    let digits = s.strip_prefix("0o").unwrap_or(s);
    let bad = || format!("invalid mode {text:?}: expected an octal string like \"0660\"");
    if digits.is_empty() || !digits.chars().all(|c| ('0'..='7').contains(&c)) {
        return Err(bad());
    }
    let mode = u32::from_str_radix(digits, 8).map_err(|_| bad())?;
    check_mode(mode)
}

/// A permission mode must fit in the permission bits (`0o777`); set-id bits make no sense on
/// a socket.
pub fn check_mode(mode: u32) -> Result<u32, String> {
    if mode > 0o777 {
        Err(format!(
            "mode {mode:#o} is out of range: expected permission bits 0000..0777"
        ))
    } else {
        Ok(mode)
    }
}

/// Resolve a signal given as `SIGTERM`, `TERM`, `sigterm` or `"15"`; returns its number and
/// canonical `SIG…` name.
pub fn parse_signal_name(text: &str) -> Result<(i32, String), String> {
    let s = text.trim();
    if let Ok(n) = s.parse::<i64>() {
        return signal_number(n);
    }
    let upper = s.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    match nix::sys::signal::Signal::from_str(&name) {
        Ok(sig) => Ok((sig as i32, sig.as_str().to_string())),
        Err(_) => Err(format!(
            "unknown signal {text:?}: expected a name like \"SIGTERM\" or \"TERM\", or a number"
        )),
    }
}

/// Resolve a signal number (`stop_signal = 15`).
pub fn signal_number(n: i64) -> Result<(i32, String), String> {
    let unknown = || format!("unknown signal number {n}");
    let n = i32::try_from(n).map_err(|_| unknown())?;
    match nix::sys::signal::Signal::try_from(n) {
        Ok(sig) => Ok((n, sig.as_str().to_string())),
        Err(_) => Err(unknown()),
    }
}

/// Canonicalise a capability name: `CAP_NET_BIND_SERVICE`, `net_bind_service` and
/// `cap_net_bind_service` all give `CAP_NET_BIND_SERVICE` (capabilities(7)).
pub fn parse_capability(text: &str) -> Result<String, String> {
    let upper = text.trim().to_ascii_uppercase();
    let name = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    match caps::Capability::from_str(&name) {
        Ok(cap) => Ok(cap.to_string()),
        Err(_) => Err(format!(
            "unknown capability {text:?}: expected a name from capabilities(7) like \
             \"CAP_NET_BIND_SERVICE\""
        )),
    }
}

/// `(name, libc::RLIMIT_* number)` for every resource setrlimit(2) knows on Linux.
// The casts are no-ops on glibc (`__rlimit_resource_t` is u32) but not on musl (c_int).
#[allow(clippy::unnecessary_cast)]
pub const RLIMITS: &[(&str, u32)] = &[
    ("as", libc::RLIMIT_AS as u32),
    ("core", libc::RLIMIT_CORE as u32),
    ("cpu", libc::RLIMIT_CPU as u32),
    ("data", libc::RLIMIT_DATA as u32),
    ("fsize", libc::RLIMIT_FSIZE as u32),
    ("locks", libc::RLIMIT_LOCKS as u32),
    ("memlock", libc::RLIMIT_MEMLOCK as u32),
    ("msgqueue", libc::RLIMIT_MSGQUEUE as u32),
    ("nice", libc::RLIMIT_NICE as u32),
    ("nofile", libc::RLIMIT_NOFILE as u32),
    ("nproc", libc::RLIMIT_NPROC as u32),
    ("rss", libc::RLIMIT_RSS as u32),
    ("rtprio", libc::RLIMIT_RTPRIO as u32),
    ("rttime", libc::RLIMIT_RTTIME as u32),
    ("sigpending", libc::RLIMIT_SIGPENDING as u32),
    ("stack", libc::RLIMIT_STACK as u32),
];

/// Look up an rlimit by its lower-case name (`nofile`, also `RLIMIT_NOFILE`).
pub fn parse_rlimit_name(text: &str) -> Result<(&'static str, u32), String> {
    let lower = text.trim().to_ascii_lowercase();
    let name = lower.strip_prefix("rlimit_").unwrap_or(&lower);
    RLIMITS
        .iter()
        .find(|(n, _)| *n == name)
        .copied()
        .ok_or_else(|| {
            let known: Vec<&str> = RLIMITS.iter().map(|(n, _)| *n).collect();
            format!(
                "unknown rlimit {text:?}: expected one of {}",
                known.join(", ")
            )
        })
}

/// An rlimit value written as a string: a number or `unlimited`/`infinity` (RLIM_INFINITY).
pub fn parse_rlimit_str(text: &str) -> Result<u64, String> {
    match text.trim() {
        "unlimited" | "infinity" => Ok(libc::RLIM_INFINITY),
        s => s.parse::<u64>().map_err(|_| {
            format!(
                "invalid rlimit value {text:?}: expected a non-negative integer or \"unlimited\""
            )
        }),
    }
}

/// Cgroup v2 interface-file prefixes: a directory named `memory.max` or `cgroup.procs` would
/// collide with the kernel's files in the parent cgroup (Documentation/admin-guide/cgroup-v2.rst,
/// "Interface Files").
const RESERVED_PREFIXES: &[&str] = &[
    "cgroup", "cpu", "cpuset", "io", "memory", "pids", "rdma", "hugetlb", "misc",
];

/// Pod and container names become cgroup directory names (`<root>/<pod>/<container>`) and
/// `pod/container` CLI targets, so they are DNS-label-like: `[a-z0-9][-a-z0-9_.]*`, at most
/// 63 characters, never `supervisor` for a pod (the supervisor's own leaf cgroup sits next to
/// the pods), never a cgroup interface-file name.
///
/// `what` is `"pod"`, `"container"` or another noun for the message.
pub fn check_name(text: &str, what: &str) -> Result<(), String> {
    let is_pod = what == "pod";
    if text.is_empty() {
        return Err(format!("{what} name must not be empty"));
    }
    if text.len() > 63 {
        return Err(format!("{what} name {text:?} is longer than 63 characters"));
    }
    let mut chars = text.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = chars
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' || c == '.');
    if !first_ok || !rest_ok {
        return Err(format!(
            "invalid {what} name {text:?}: use lower-case letters, digits, '-', '_' and '.', \
             starting with a letter or digit (it becomes a cgroup directory name)"
        ));
    }
    if is_pod && text == "supervisor" {
        return Err("pod name \"supervisor\" is reserved for vigil's own cgroup leaf".to_string());
    }
    if let Some((prefix, _)) = text.split_once('.')
        && RESERVED_PREFIXES.contains(&prefix)
    {
        return Err(format!(
            "{what} name {text:?} would collide with a cgroup interface file ({prefix}.*)"
        ));
    }
    Ok(())
}

/// A profile name (`profiles = [...]`, `run --profile`, `$VIGIL_PROFILES`): compose's rule,
/// `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, so that a comma-separated list of them reads one way.
pub fn check_profile(text: &str) -> Result<(), String> {
    let mut chars = text.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
        return Ok(());
    }
    Err(format!(
        "invalid profile name {text:?}: use letters, digits, '-', '_' and '.', starting with a letter or digit"
    ))
}

/// Levenshtein distance, for "did you mean" hints on unknown keys.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The name among `names` closest to `name` when it is within 2 edits (a typo), for "did you
/// mean" hints on unknown pod names: the config checker's for `depends_on`, the control
/// socket's for `logs`, `describe`, `restart` and the rest.
pub fn closest_name<'a>(name: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|n| (edit_distance(name, n), n))
        .min()
        .filter(|(d, _)| *d <= 2)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_accepts_binary_decimal_and_plain_bytes() {
        assert_eq!(parse_quantity("256Mi"), Ok(256 << 20));
        assert_eq!(parse_quantity("1Gi"), Ok(1 << 30));
        assert_eq!(parse_quantity("2Ki"), Ok(2048));
        assert_eq!(parse_quantity("1.5Ki"), Ok(1536));
        assert_eq!(parse_quantity("0.1Ki"), Ok(103));
        assert_eq!(parse_quantity("1K"), Ok(1000));
        assert_eq!(parse_quantity("1k"), Ok(1000));
        assert_eq!(parse_quantity("3M"), Ok(3_000_000));
        assert_eq!(parse_quantity("2T"), Ok(2_000_000_000_000));
        assert_eq!(parse_quantity("4096"), Ok(4096));
        assert_eq!(parse_quantity("0"), Ok(0));
    }

    #[test]
    fn quantity_rejects_bad_suffixes_and_signs() {
        for bad in ["20Mx", "", "Mi", "-1", "1.2.3Mi", "1 Mi x", "1e3", "."] {
            assert!(parse_quantity(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_quantity("20Ei").unwrap_err().contains("too large"));
    }

    #[test]
    fn octal_mode_accepts_common_spellings() {
        assert_eq!(parse_octal_mode("0660"), Ok(0o660));
        assert_eq!(parse_octal_mode("600"), Ok(0o600));
        assert_eq!(parse_octal_mode("0o640"), Ok(0o640));
        assert!(parse_octal_mode("0968").is_err());
        assert!(parse_octal_mode("rw").is_err());
        assert!(parse_octal_mode("4777").is_err());
    }

    #[test]
    fn signals_accept_full_short_and_numeric_forms() {
        assert_eq!(parse_signal_name("SIGTERM"), Ok((15, "SIGTERM".into())));
        assert_eq!(parse_signal_name("term"), Ok((15, "SIGTERM".into())));
        assert_eq!(parse_signal_name("15"), Ok((15, "SIGTERM".into())));
        assert_eq!(parse_signal_name("SIGQUIT"), Ok((3, "SIGQUIT".into())));
        assert!(parse_signal_name("SIGFOO").is_err());
        assert!(signal_number(99).is_err());
    }

    #[test]
    fn capabilities_are_canonicalised() {
        assert_eq!(
            parse_capability("net_bind_service"),
            Ok("CAP_NET_BIND_SERVICE".into())
        );
        assert_eq!(parse_capability("CAP_CHOWN"), Ok("CAP_CHOWN".into()));
        assert!(parse_capability("CAP_FLY").is_err());
    }

    #[test]
    fn rlimit_names_and_values() {
        assert_eq!(parse_rlimit_name("nofile"), Ok(("nofile", RLIMITS[9].1)));
        assert_eq!(parse_rlimit_name("RLIMIT_CORE").map(|r| r.0), Ok("core"));
        assert!(parse_rlimit_name("files").is_err());
        assert_eq!(parse_rlimit_str("unlimited"), Ok(libc::RLIM_INFINITY));
        assert_eq!(parse_rlimit_str("10"), Ok(10));
        assert!(parse_rlimit_str("-1").is_err());
    }

    #[test]
    fn names_are_dns_label_like() {
        assert!(check_name("web-1.a_b", "pod").is_ok());
        assert!(check_name("0db", "container").is_ok());
        for bad in ["", "Web", "a/b", "-x", ".x", "a b"] {
            assert!(check_name(bad, "pod").is_err(), "{bad:?} accepted");
        }
        assert!(check_name("supervisor", "pod").is_err());
        assert!(check_name("supervisor", "container").is_ok());
        assert!(check_name("memory.max", "container").is_err());
        assert!(check_name(&"a".repeat(64), "container").is_err());
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("perod_seconds", "period_seconds"), 1);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("", "ab"), 2);
    }
}
