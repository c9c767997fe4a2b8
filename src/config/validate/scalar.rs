//! Scalar value rules shared by every table: durations in seconds, integer ranges, strings
//! that go to the kernel, absolute paths, byte quantities, user/group ids, restart policies.
//! Each reports its problem naming the field and returns `None`.

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::{Checker, MAX_ID, has_nul, span};
use crate::config::MAX_SECONDS;
use crate::config::error::Problem;
use crate::config::raw::StrOrInt;
use crate::config::spec::RestartPolicy;
use crate::config::values;

impl Checker<'_> {
    pub(super) fn err(&mut self, span: Range<usize>, field: &str, message: impl Into<String>) {
        self.out.push(Problem::new(span, field, message));
    }

    // ---- scalar helpers -------------------------------------------------------------------

    /// A duration in seconds (integer or fraction). `positive`: must be > 0, else >= 0.
    pub(super) fn seconds(
        &mut self,
        v: &Spanned<f64>,
        field: &str,
        positive: bool,
    ) -> Option<Duration> {
        let x = *v.get_ref();
        if !x.is_finite() {
            self.err(
                span(v),
                field,
                format!("must be a finite number of seconds, got {x}"),
            );
            return None;
        }
        if positive && x <= 0.0 {
            self.err(span(v), field, format!("must be > 0 seconds, got {x}"));
            return None;
        }
        if x < 0.0 {
            self.err(span(v), field, format!("must be >= 0 seconds, got {x}"));
            return None;
        }
        // Larger values are valid in Kubernetes (an int64) but mean "never" on a host; they
        // would only overflow deadlines (`crate::instant`).
        if x > MAX_SECONDS as f64 {
            self.err(
                span(v),
                field,
                format!("must be at most {MAX_SECONDS} seconds (10 years)"),
            );
            return None;
        }
        match Duration::try_from_secs_f64(x) {
            Ok(d) => Some(d),
            Err(_) => {
                self.err(span(v), field, format!("{x} seconds is too large"));
                None
            }
        }
    }

    pub(super) fn opt_seconds(
        &mut self,
        v: &Option<Spanned<f64>>,
        field: &str,
        positive: bool,
        default: Duration,
    ) -> Duration {
        match v {
            Some(v) => self.seconds(v, field, positive).unwrap_or(default),
            None => default,
        }
    }

    /// An integer in `lo..=hi`.
    pub(super) fn int(&mut self, v: &Spanned<i64>, field: &str, lo: i64, hi: i64) -> Option<i64> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            // With a huge upper bound (u32 ids, counts) only the violated side is worth saying.
            let msg = if hi >= MAX_ID && x < lo {
                format!("must be >= {lo}, got {x}")
            } else if hi >= MAX_ID {
                format!("must be <= {hi}, got {x}")
            } else {
                format!("must be between {lo} and {hi}, got {x}")
            };
            self.err(span(v), field, msg);
            return None;
        }
        Some(x)
    }

    pub(super) fn u32_count(&mut self, v: &Spanned<i64>, field: &str, lo: i64) -> Option<u32> {
        self.int(v, field, lo, u32::MAX as i64).map(|x| x as u32)
    }

    /// A string that will be passed to the kernel (argv, env, paths): no NUL bytes.
    pub(super) fn no_nul(&mut self, v: &Spanned<String>, field: &str) -> bool {
        if has_nul(v.get_ref()) {
            self.err(span(v), field, "must not contain a NUL character");
            false
        } else {
            true
        }
    }

    pub(super) fn abs_path(&mut self, v: &Spanned<String>, field: &str) -> Option<PathBuf> {
        let s = v.get_ref();
        if s.is_empty() {
            self.err(span(v), field, "must not be empty");
            return None;
        }
        if !self.no_nul(v, field) {
            return None;
        }
        if !s.starts_with('/') {
            self.err(
                span(v),
                field,
                format!("must be an absolute path, got {s:?}"),
            );
            return None;
        }
        Some(PathBuf::from(s))
    }

    /// A byte quantity; `Ok(None)` for `"max"` when `allow_max`.
    pub(super) fn quantity(
        &mut self,
        v: &Spanned<StrOrInt>,
        field: &str,
        allow_max: bool,
    ) -> Option<Option<u64>> {
        match v.get_ref() {
            StrOrInt::Int(n) if *n < 0 => {
                self.err(span(v), field, format!("must be >= 0 bytes, got {n}"));
                None
            }
            StrOrInt::Int(n) => Some(Some(*n as u64)),
            StrOrInt::Str(s) if s.trim() == "max" => {
                if allow_max {
                    Some(None)
                } else {
                    self.err(span(v), field, "\"max\" is not allowed here; give a size");
                    None
                }
            }
            StrOrInt::Str(s) => match values::parse_quantity(s) {
                Ok(n) => Some(Some(n)),
                Err(m) => {
                    self.err(span(v), field, m);
                    None
                }
            },
        }
    }

    /// A user or group: a name or a numeric id, kept as a string (resolved at spawn time).
    pub(super) fn id_or_name(&mut self, v: &Spanned<StrOrInt>, field: &str) -> Option<String> {
        match v.get_ref() {
            StrOrInt::Int(n) if *n < 0 || *n > MAX_ID => {
                self.err(
                    span(v),
                    field,
                    format!("must be between 0 and {MAX_ID}, got {n}"),
                );
                None
            }
            StrOrInt::Int(n) => Some(n.to_string()),
            StrOrInt::Str(s) if s.trim().is_empty() => {
                self.err(span(v), field, "must not be empty");
                None
            }
            StrOrInt::Str(s) if has_nul(s) || s.contains(':') => {
                self.err(span(v), field, format!("invalid name {s:?}"));
                None
            }
            StrOrInt::Str(s) => Some(s.trim().to_string()),
        }
    }

    pub(super) fn restart_policy(
        &mut self,
        v: &Spanned<String>,
        field: &str,
    ) -> Option<RestartPolicy> {
        match v.get_ref().as_str() {
            "Always" => Some(RestartPolicy::Always),
            "OnFailure" => Some(RestartPolicy::OnFailure),
            "Never" => Some(RestartPolicy::Never),
            other => {
                self.err(
                    span(v),
                    field,
                    format!(
                        "invalid restart_policy {other:?}; expected Always, OnFailure or Never"
                    ),
                );
                None
            }
        }
    }
}
