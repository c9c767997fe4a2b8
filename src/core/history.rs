//! The ended runs of a pod that status keeps (`history = { successful = N, failed = M }`,
//! issue 40 point 4): a scheduled pod's earlier runs, or a run-to-completion pod's earlier
//! runs started again by `vigil trigger`, `restart` or `start`, stay visible after the next
//! run began.
//!
//! Owns [`RunHistory`]: the records and which run was recorded last. The rules are the
//! CronJob controller's (`pkg/controller/cronjob/cronjob_controllerv2.go`
//! `cleanupFinishedJobs`, `successfulJobsHistoryLimit`/`failedJobsHistoryLimit`): the runs of
//! each outcome are kept up to their limit, the oldest of that outcome dropped first; the
//! limits apply at once when a reload changes them. Must not read the clock (the supervisor
//! records at its `now`) or decide when a run ends (the pod's phase does).

use std::collections::VecDeque;

use super::Time;
use super::status::TerminationReason;
use crate::config::spec::HistorySpec;

/// One ended run of a pod, as status shows it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// When the run began (the pod started, or an operator or a trigger started it again).
    #[serde(with = "crate::monotime")]
    pub started_at: Time,
    /// When the supervisor saw it end (its phase became `Succeeded` or `Failed`).
    #[serde(with = "crate::monotime")]
    pub finished_at: Time,
    /// The schedule's trigger that started it; `None` for a run not started by the schedule.
    pub scheduled_for: Option<jiff::Timestamp>,
    /// Why it failed; `None`: it succeeded.
    pub failure: Option<RunFailure>,
}

impl RunRecord {
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }
}

/// The container that made a run fail, and how it ended.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct RunFailure {
    pub container: String,
    pub reason: TerminationReason,
    pub exit_code: i32,
}

/// A pod's kept runs, oldest first, and the run being watched for its end.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq)]
pub struct RunHistory {
    runs: VecDeque<RunRecord>,
    /// The run under way (or ended and not yet started again).
    #[serde(default)]
    current: Option<CurrentRun>,
    /// The number of the run whose end was recorded last: a run is recorded once.
    #[serde(default)]
    recorded: u64,
    /// The trigger of the run that begins next (a `Replace` stops the active run first).
    #[serde(default)]
    next_trigger: Option<jiff::Timestamp>,
}

/// The pod's latest run.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct CurrentRun {
    /// Counts the pod's runs from 1.
    number: u64,
    #[serde(with = "crate::monotime")]
    started: Time,
    /// The schedule's trigger that started it.
    trigger: Option<jiff::Timestamp>,
}

impl RunHistory {
    /// The kept runs, oldest first.
    pub fn runs(&self) -> impl Iterator<Item = &RunRecord> {
        self.runs.iter()
    }

    /// The next run to begin is started by the schedule's trigger at `at` (`None`: by
    /// anything else).
    pub(super) fn starts_next(&mut self, trigger: Option<jiff::Timestamp>) {
        self.next_trigger = trigger;
    }

    /// A run begins at `now` (the pod's `active_since`): it carries the trigger that started
    /// it.
    pub(super) fn begun(&mut self, now: Time) {
        let number = self.current.as_ref().map_or(1, |c| c.number + 1);
        self.current = Some(CurrentRun {
            number,
            started: now,
            trigger: self.next_trigger.take(),
        });
    }

    /// Whether a run has begun whose end is still to be recorded.
    pub(super) fn wants(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|c| c.number != self.recorded)
    }

    /// Records the end, at `finished`, of the run under way, then keeps what `limits` allow.
    pub(super) fn record(
        &mut self,
        finished: Time,
        failure: Option<RunFailure>,
        limits: HistorySpec,
    ) {
        let Some(run) = self.current.as_ref().filter(|c| c.number != self.recorded) else {
            return;
        };
        self.recorded = run.number;
        self.runs.push_back(RunRecord {
            started_at: run.started,
            finished_at: finished.max(run.started),
            scheduled_for: run.trigger,
            failure,
        });
        self.trim(limits);
    }

    /// Drops the oldest runs of each outcome beyond its limit.
    pub(super) fn trim(&mut self, limits: HistorySpec) {
        let mut keep_ok = limits.successful as usize;
        let mut keep_failed = limits.failed as usize;
        let total_ok = self.runs.iter().filter(|r| r.succeeded()).count();
        let total_failed = self.runs.len() - total_ok;
        let mut drop_ok = total_ok.saturating_sub(keep_ok);
        let mut drop_failed = total_failed.saturating_sub(keep_failed);
        self.runs.retain(|r| {
            let (drop, keep) = if r.succeeded() {
                (&mut drop_ok, &mut keep_ok)
            } else {
                (&mut drop_failed, &mut keep_failed)
            };
            if *drop > 0 {
                *drop -= 1;
                false
            } else {
                *keep = keep.saturating_sub(1);
                true
            }
        });
    }

    /// Takes back the runs an earlier vigil kept (after a crash of vigil), within `limits`.
    pub(super) fn recall(&mut self, kept: &RunHistory, limits: HistorySpec) {
        *self = kept.clone();
        self.trim(limits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn failure() -> Option<RunFailure> {
        Some(RunFailure {
            container: "job".to_string(),
            reason: TerminationReason::Error,
            exit_code: 1,
        })
    }

    #[test]
    fn each_outcome_keeps_its_newest_runs_up_to_its_own_limit() {
        let t0 = Time::now();
        let limits = HistorySpec {
            successful: 2,
            failed: 1,
        };
        let mut h = RunHistory::default();
        assert!(!h.wants(), "nothing has begun");
        for i in 0..6u64 {
            let start = t0 + Duration::from_secs(10 * i);
            h.begun(start);
            assert!(h.wants());
            let failed = i % 2 == 1;
            h.record(
                start + Duration::from_secs(1),
                if failed { failure() } else { None },
                limits,
            );
            assert!(!h.wants(), "a run is recorded once");
            h.record(start + Duration::from_secs(2), None, limits);
        }
        let kept: Vec<(u64, bool)> = h
            .runs()
            .map(|r| (r.started_at.duration_since(t0).as_secs(), r.succeeded()))
            .collect();
        // Runs 0..6: successes at 0, 20, 40 and failures at 10, 30, 50.
        assert_eq!(kept, vec![(20, true), (40, true), (50, false)]);
    }

    #[test]
    fn zero_limits_keep_nothing_and_a_lower_limit_trims_at_once() {
        let t0 = Time::now();
        let mut h = RunHistory::default();
        let all = HistorySpec {
            successful: 5,
            failed: 5,
        };
        for i in 0..4u64 {
            let start = t0 + Duration::from_secs(i);
            h.begun(start);
            h.record(start, None, all);
        }
        assert_eq!(h.runs().count(), 4);
        h.trim(HistorySpec {
            successful: 1,
            failed: 0,
        });
        assert_eq!(h.runs().count(), 1);
        assert_eq!(
            h.runs().next().map(|r| r.started_at),
            Some(t0 + Duration::from_secs(3))
        );
        h.trim(HistorySpec::default());
        assert_eq!(h.runs().count(), 0);
    }

    #[test]
    fn the_trigger_that_started_a_run_goes_with_its_record_and_only_with_it() {
        let t0 = Time::now();
        let at: jiff::Timestamp = "2026-05-01T02:00:00Z".parse().expect("a timestamp");
        let mut h = RunHistory::default();
        h.begun(t0);
        // A Replace: the next run's trigger is known before the run under way ends.
        h.starts_next(Some(at));
        h.record(t0, None, HistorySpec::SCHEDULED);
        h.begun(t0);
        h.record(t0, None, HistorySpec::SCHEDULED);
        let triggers: Vec<_> = h.runs().map(|r| r.scheduled_for).collect();
        assert_eq!(triggers, vec![None, Some(at)]);
    }
}
