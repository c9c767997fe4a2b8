//! `Instant` arithmetic that cannot panic: a deadline `now + d` where `d` came from outside (a
//! config or manifest duration, a CLI timeout) saturates at a far-future instant instead of
//! panicking with "overflow when adding duration to instant" (docs/bad-input.md: no input makes
//! vigil panic). Validation bounds every configured duration (`config::validate`, at most
//! [`crate::config::MAX_SECONDS`]); this is the second line, for every place that adds one.
//!
//! Pure functions of their arguments; no clock reads.

use std::time::{Duration, Instant};

/// How far a saturated deadline lies when `t + d` does not fit: far beyond any run of vigil,
/// so such a deadline never comes.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `t + d`, or the latest instant not beyond `t + min(d, 100 years)` that an `Instant` can
/// hold when the sum overflows. Never panics.
pub fn saturating_add(t: Instant, d: Duration) -> Instant {
    if let Some(sum) = t.checked_add(d) {
        return sum;
    }
    // Halve the step until it fits: at most 128 tries (a Duration has < 2^96 ns).
    let mut step = d.min(FAR);
    loop {
        if let Some(sum) = t.checked_add(step) {
            return sum;
        }
        if step.is_zero() {
            return t;
        }
        step /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_add_is_the_sum_when_it_fits() {
        let t = Instant::now();
        assert_eq!(
            saturating_add(t, Duration::from_secs(30)),
            t + Duration::from_secs(30)
        );
        assert_eq!(saturating_add(t, Duration::ZERO), t);
    }

    #[test]
    fn saturating_add_never_panics_and_lies_far_ahead_on_overflow() {
        let t = Instant::now();
        for d in [
            Duration::MAX,
            Duration::from_secs(i64::MAX as u64),
            Duration::from_secs(u64::MAX),
            Duration::new(u64::MAX, 999_999_999),
        ] {
            let later = saturating_add(t, d);
            assert!(
                later >= t + Duration::from_secs(50 * 365 * 24 * 3600),
                "{d:?}"
            );
            // Adding to the saturated instant again does not panic either.
            assert!(saturating_add(later, d) >= later);
        }
    }
}
