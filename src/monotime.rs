//! Monotonic instants across `execve`: serde helpers that write an [`Instant`] as nanoseconds
//! of `CLOCK_MONOTONIC` and read them back as an `Instant` of this process.
//!
//! `std::time::Instant` is `CLOCK_MONOTONIC` on Linux, and that clock is the same before and
//! after an exec (clock_gettime(2): "a nonsettable system-wide clock"), so a deadline written
//! by the old vigil is the same point in time for the new one. Only the mapping between the
//! opaque `Instant` and the raw clock has to be found, once per process ([`anchor`]).
//!
//! Used only by the handoff's and the state file's (de)serialisation (`#[serde(with = ...)]`
//! on the core's state types). It sits below every other module and names none of them, so
//! the core can name it without standing on the runtime. It reads the clock once, when first
//! used (the first handoff or state-file write or read), and never otherwise; nothing in the
//! core's decisions goes through it.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `(instant, CLOCK_MONOTONIC nanoseconds)` read together, once per process.
fn anchor() -> (Instant, i128) {
    static ANCHOR: OnceLock<(Instant, i128)> = OnceLock::new();
    *ANCHOR.get_or_init(|| {
        let before = raw_now();
        let instant = Instant::now();
        let after = raw_now();
        (instant, before + (after - before) / 2)
    })
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
pub fn raw_now() -> i128 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => i128::from(ts.tv_sec()) * 1_000_000_000 + i128::from(ts.tv_nsec()),
        // Cannot fail for CLOCK_MONOTONIC (clock_gettime(2): EINVAL only for unknown clocks).
        Err(_) => 0,
    }
}

/// `t` as `CLOCK_MONOTONIC` nanoseconds.
pub fn to_nanos(t: Instant) -> i64 {
    let (base, raw) = anchor();
    let offset = if t >= base {
        i128::try_from(t.duration_since(base).as_nanos()).unwrap_or(i128::MAX / 4)
    } else {
        -i128::try_from(base.duration_since(t).as_nanos()).unwrap_or(i128::MAX / 4)
    };
    i64::try_from(raw + offset).unwrap_or(i64::MAX)
}

/// `CLOCK_MONOTONIC` nanoseconds as an `Instant` of this process (clamped to what `Instant`
/// can hold).
pub fn from_nanos(nanos: i64) -> Instant {
    let (base, raw) = anchor();
    let offset = i128::from(nanos) - raw;
    let abs = Duration::from_nanos(u64::try_from(offset.unsigned_abs()).unwrap_or(u64::MAX));
    if offset >= 0 {
        crate::instant::saturating_add(base, abs)
    } else {
        base.checked_sub(abs).unwrap_or(base)
    }
}

pub fn serialize<S: Serializer>(t: &Instant, s: S) -> Result<S::Ok, S::Error> {
    to_nanos(*t).serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
    i64::deserialize(d).map(from_nanos)
}

/// `Option<Instant>`.
pub mod opt {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
        t.map(to_nanos).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
        Option::<i64>::deserialize(d).map(|n| n.map(from_nanos))
    }
}

/// `Option<(Instant, u64)>` (a probe's schedule).
pub mod opt_pair {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<(Instant, u64)>, s: S) -> Result<S::Ok, S::Error> {
        t.map(|(i, k)| (to_nanos(i), k)).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<(Instant, u64)>, D::Error> {
        Option::<(i64, u64)>::deserialize(d).map(|n| n.map(|(i, k)| (from_nanos(i), k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_survives_the_round_trip_through_monotonic_nanoseconds() {
        let now = Instant::now();
        for t in [
            now,
            now + Duration::from_secs(3600),
            now - Duration::from_millis(1500),
        ] {
            let back = from_nanos(to_nanos(t));
            let diff = if back > t { back - t } else { t - back };
            assert!(
                diff < Duration::from_micros(1),
                "{t:?} came back as {back:?}"
            );
        }
    }

    #[test]
    fn monotonic_nanoseconds_are_the_raw_clock() {
        let raw = raw_now();
        let ours = i128::from(to_nanos(Instant::now()));
        // Read one after the other: the second can only be later, and not by seconds.
        assert!(
            ours >= raw - 1_000_000 && ours < raw + 1_000_000_000,
            "{raw} vs {ours}"
        );
    }
}
