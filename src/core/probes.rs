//! Probe bookkeeping for one probe of one container (docs/behaviour.md §4).
//!
//! Owns the schedule (the k-th attempt of a run is due at `base + k × period`, `base` being the
//! moment the probe was activated plus its initial delay — monotonic deadlines, no drift), the
//! one attempt in flight and its timeout deadline, the success/failure run that gates
//! publishing (kubelet `prober/worker.go`: a result is published after `success_threshold` /
//! `failure_threshold` identical results in a row), and the last few attempts for `describe`.
//! It does not decide what a published result means for the container (that is the slot's
//! job) and never runs a probe itself: it hands out sequence numbers for `StartProbe`.
//!
//! Phase spreading ([`PhaseSpread`]): containers whose probes begin within a millisecond of
//! each other (pipelined starts at boot, adoption after a restart of vigil, a reload adding
//! many pods) would otherwise be probed in the same loop turns forever. The kubelet's prober
//! worker (`pkg/kubelet/prober/worker.go`, `run()`) waits a random part of the period before its
//! first probe when the kubelet started recently, for the same reason. Here the core stays
//! deterministic: the first container of a group keeps its schedule, the m-th is shifted by the
//! fractional part of m × the golden ratio's conjugate times min(period, 1 s) — a low-discrepancy
//! sequence, so any number of them lie evenly over that window. Never earlier than start +
//! initial delay.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::{ProbeOutcome, ProbeRecord, ProbeResultState, ProbeStatus, Time};
use crate::config::spec::{ProbeKind, ProbeSpec};
use crate::format::go_duration;
// A deadline beyond what `Instant` can hold is as good as never: it saturates far ahead.
use crate::instant::saturating_add as add;

/// Attempts kept per probe for diagnosis.
pub(super) const PROBE_HISTORY: usize = 10;

/// The widest shift phase spreading gives a probe (its period, if shorter): the first attempt
/// of a container started among others is at most this much later than start + initial delay.
pub(super) const PHASE_SPREAD_MAX: Duration = Duration::from_secs(1);

/// Activations this close to the first of their group form one group: the loop's poll waits
/// in whole milliseconds, so attempts due within one millisecond run one after another in
/// the same loop turn.
pub(super) const PHASE_GROUP_WINDOW: Duration = Duration::from_millis(1);

/// Counts the containers whose probes began within [`PHASE_GROUP_WINDOW`] of the first of
/// the current group. Transient: not handed over.
#[derive(Debug, Default)]
pub(super) struct PhaseSpread {
    group: Option<Time>,
    members: u32,
}

impl PhaseSpread {
    /// The index of the next container whose probes begin at `now` in its group (0 for the
    /// first, whose schedule is not shifted).
    pub(super) fn member(&mut self, now: Time) -> u32 {
        let same = self
            .group
            .is_some_and(|g| now >= g && now.duration_since(g) < PHASE_GROUP_WINDOW);
        if !same {
            self.group = Some(now);
            self.members = 0;
        }
        let m = self.members;
        self.members = self.members.saturating_add(1);
        m
    }
}

/// The shift of the `member`-th container's schedule in its group: frac(member × (√5 − 1)/2)
/// × min(period, [`PHASE_SPREAD_MAX`]), in 2^-32 fixed point (0 for the first member).
pub(super) fn phase(member: u32, period: Duration) -> Duration {
    // 2^32 × (√5 − 1)/2, rounded: Knuth's multiplicative-hash constant.
    const GOLDEN: u64 = 2_654_435_769;
    let frac = (u64::from(member).wrapping_mul(GOLDEN)) & 0xffff_ffff;
    let window = period.min(PHASE_SPREAD_MAX).as_nanos();
    // window < 2^30 ns and frac < 2^32: the product fits in u128 trivially.
    let ns = (window * u128::from(frac)) >> 32;
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy)]
struct InFlight {
    seq: u64,
    #[serde(with = "crate::monotime")]
    started: Time,
    #[serde(with = "crate::monotime")]
    deadline: Time,
    /// How long after its due time the attempt started.
    #[serde(default)]
    late: Duration,
}

/// What recording one attempt produced.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(super) struct Recorded {
    /// The failure message, if the attempt failed (for the `Unhealthy` event).
    pub failure: Option<String>,
    /// The newly published result, if the published result changed.
    pub published: Option<ProbeResultState>,
    /// The warning of a successful attempt (for the `ProbeWarning` event).
    pub warning: Option<String>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub(super) struct Probe {
    pub kind: ProbeKind,
    pub spec: Arc<ProbeSpec>,
    pub result: ProbeResultState,
    /// `(base, k)`: the next attempt is due at `base + k × period`. `None`: not running
    /// (gated by the startup probe, held after a kill, or the container is not running).
    #[serde(with = "crate::monotime::opt_pair")]
    schedule: Option<(Time, u64)>,
    /// The current run's shift after start + initial delay (phase spreading).
    #[serde(default)]
    phase: Duration,
    in_flight: Option<InFlight>,
    /// The current run of identical results.
    last: Option<bool>,
    run_len: u32,
    recent: VecDeque<ProbeRecord>,
    /// The container's current run (restart count + 1), stamped on each record.
    #[serde(default)]
    run: u32,
    /// Message of the most recent failed attempt (for the probe-kill termination message).
    pub last_failure: String,
}

/// The published result before any attempt (kubelet's initial values).
pub(super) fn initial_result(kind: ProbeKind) -> ProbeResultState {
    match kind {
        ProbeKind::Readiness => ProbeResultState::Failure,
        ProbeKind::Liveness => ProbeResultState::Success,
        ProbeKind::Startup | ProbeKind::Hook => ProbeResultState::Unknown,
    }
}

impl Probe {
    pub(super) fn new(kind: ProbeKind, spec: Arc<ProbeSpec>) -> Probe {
        Probe {
            kind,
            spec,
            result: initial_result(kind),
            schedule: None,
            phase: Duration::ZERO,
            in_flight: None,
            last: None,
            run_len: 0,
            recent: VecDeque::new(),
            run: 0,
            last_failure: String::new(),
        }
    }

    /// A new run (`run`: the restart count + 1): initial result, nothing scheduled; the
    /// history of attempts is kept, each record marked with its run.
    pub(super) fn reset_for_run(&mut self, run: u32) {
        self.run = run;
        self.result = initial_result(self.kind);
        self.schedule = None;
        self.phase = Duration::ZERO;
        self.in_flight = None;
        self.last = None;
        self.run_len = 0;
    }

    /// Start the schedule: the first attempt is due at `now + initial_delay + phase`, the
    /// phase being that of the `member`-th container of its group ([`PhaseSpread`]).
    pub(super) fn activate(&mut self, now: Time, member: u32) {
        self.phase = phase(member, self.period());
        self.schedule = Some((add(add(now, self.spec.initial_delay), self.phase), 0));
    }

    /// After `vigil upgrade`: the attempt in flight was abandoned with the old process; the
    /// schedule goes back one step so it is run again at once (its result never came).
    pub(super) fn requeue_in_flight(&mut self) {
        if self.in_flight.take().is_some() {
            self.schedule = self.schedule.map(|(base, k)| (base, k.saturating_sub(1)));
        }
    }

    /// Stop scheduling; returns the sequence number of an attempt to cancel.
    pub(super) fn hold(&mut self) -> Option<u64> {
        self.schedule = None;
        self.in_flight.take().map(|f| f.seq)
    }

    fn period(&self) -> Duration {
        // Validation forbids a zero period; guard anyway so a schedule can never spin.
        self.spec.period.max(Duration::from_millis(1))
    }

    fn due_at(&self) -> Option<Time> {
        let (base, k) = self.schedule?;
        let k = u32::try_from(k).unwrap_or(u32::MAX);
        Some(add(
            base,
            self.period().checked_mul(k).unwrap_or(Duration::MAX),
        ))
    }

    pub(super) fn next_deadline(&self) -> Option<Time> {
        match (self.due_at(), self.in_flight.map(|f| f.deadline)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The in-flight attempt whose timeout has passed, if any.
    pub(super) fn timed_out(&self, now: Time) -> Option<u64> {
        self.in_flight.filter(|f| f.deadline <= now).map(|f| f.seq)
    }

    /// Record the in-flight attempt as timed out (the caller cancels it).
    pub(super) fn record_timeout(&mut self) -> Option<Recorded> {
        let f = self.in_flight.take()?;
        let message = format!("probe timed out after {}", go_duration(self.spec.timeout));
        Some(self.record(f, self.spec.timeout, false, message))
    }

    /// If an attempt is due, advance the schedule past `now` and return the new attempt's
    /// sequence number — unless the previous attempt is still in flight, in which case this
    /// slot is skipped (never two at once).
    pub(super) fn try_start(&mut self, now: Time, next_seq: &mut u64) -> Option<u64> {
        let due = self.due_at()?;
        if due > now {
            return None;
        }
        let (base, _) = self.schedule?;
        let period = self.period().as_nanos();
        let elapsed = now.saturating_duration_since(base).as_nanos();
        // The latest slot at or before `now` is the one this attempt runs for.
        let late = Duration::from_nanos(u64::try_from(elapsed % period).unwrap_or(u64::MAX));
        let k = u64::try_from(elapsed / period + 1).unwrap_or(u64::MAX);
        self.schedule = Some((base, k));
        if self.in_flight.is_some() {
            return None;
        }
        *next_seq += 1;
        let seq = *next_seq;
        self.in_flight = Some(InFlight {
            seq,
            started: now,
            deadline: add(now, self.spec.timeout),
            late,
        });
        Some(seq)
    }

    /// A result arrived; `None` when it is not for the attempt in flight (late or unknown).
    pub(super) fn on_result(
        &mut self,
        seq: u64,
        outcome: ProbeOutcome,
        duration: Duration,
    ) -> Option<Recorded> {
        let f = self.in_flight.filter(|f| f.seq == seq)?;
        self.in_flight = None;
        let (success, message, warning) = match outcome {
            ProbeOutcome::Success(m) => (true, m, false),
            ProbeOutcome::Failure(m) => (false, m, false),
            ProbeOutcome::Warning(m) => (true, m, true),
        };
        let mut rec = self.record(f, duration, success, message);
        if warning {
            rec.warning = self.recent.back().map(|r| r.message.clone());
        }
        Some(rec)
    }

    fn record(
        &mut self,
        f: InFlight,
        duration: Duration,
        success: bool,
        message: String,
    ) -> Recorded {
        self.recent.push_back(ProbeRecord {
            at: f.started,
            late: f.late,
            duration,
            success,
            message: message.clone(),
            run: self.run,
        });
        while self.recent.len() > PROBE_HISTORY {
            self.recent.pop_front();
        }
        if self.last == Some(success) {
            self.run_len = self.run_len.saturating_add(1);
        } else {
            self.last = Some(success);
            self.run_len = 1;
        }
        let threshold = if success {
            self.spec.success_threshold
        } else {
            self.spec.failure_threshold
        }
        .max(1);
        let mut published = None;
        if self.run_len >= threshold {
            let new = if success {
                ProbeResultState::Success
            } else {
                ProbeResultState::Failure
            };
            if new != self.result {
                self.result = new;
                published = Some(new);
            }
        }
        let failure = if success {
            None
        } else {
            self.last_failure = message.clone();
            Some(message)
        };
        Recorded {
            failure,
            published,
            warning: None,
        }
    }

    pub(super) fn status(&self) -> ProbeStatus {
        ProbeStatus {
            kind: self.kind,
            result: self.result,
            phase: self.phase,
            recent: self.recent.iter().cloned().collect(),
        }
    }
}
