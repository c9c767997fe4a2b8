//! `history = { successful, failed }` in virtual time (issue 40 point 4; the CronJob
//! controller's `cleanupFinishedJobs`): the ended runs of a pod stay in its status, the
//! newest of each outcome up to its limit, across a reload and a crash of vigil.

use super::harness::*;
use crate::config::schedule::{CronPattern, Zone};
use crate::config::spec::*;
use crate::core::history::RunRecord;
use crate::core::*;

/// A pod `job` (restart policy Never, one container `run`) run every hour on the hour (UTC).
fn hourly(history: HistorySpec) -> PodSpec {
    let mut p = pod(
        "job",
        vec![with_policy(container("run"), RestartPolicy::Never)],
    );
    p.restart_policy = RestartPolicy::Never;
    p.schedule = Some(ScheduleSpec {
        cron: CronPattern::parse("0 * * * *").unwrap(),
        time_zone: Zone::get(Some("UTC")).unwrap(),
        concurrency: Concurrency::Forbid,
        starting_deadline: None,
        suspend: false,
    });
    p.history = history;
    p
}

/// Runs the hourly job `codes.len()` times from 00:30, each run ending with its exit code.
fn runs(p: PodSpec, codes: &[i32]) -> Harness {
    let mut h = Harness::new(config(vec![p]));
    h.wall("2026-05-01T00:30:00Z");
    for (i, &code) in codes.iter().enumerate() {
        h.advance_to(1800.0 + 3600.0 * i as f64);
        h.ack_spawns();
        assert!(h.is_running("job", "run"), "run {i} started");
        h.advance_to(1800.0 + 3600.0 * i as f64 + 60.0);
        h.exit("job", "run", code);
    }
    h
}

/// The kept runs: (the hour of the trigger, exit code of the failure or 0).
fn kept(h: &Harness) -> Vec<(i8, i32)> {
    let hour = |r: &RunRecord| {
        r.scheduled_for
            .map(|t| t.to_zoned(jiff::tz::TimeZone::UTC).hour())
            .unwrap_or(-1)
    };
    (h.pod("job").runs.iter())
        .map(|r| (hour(r), r.failure.as_ref().map_or(0, |f| f.exit_code)))
        .collect()
}

#[test]
fn a_scheduled_pod_keeps_its_newest_runs_of_each_outcome_up_to_its_limits() {
    let h = runs(
        hourly(HistorySpec {
            successful: 2,
            failed: 1,
        }),
        &[0, 3, 0, 0, 7, 0],
    );
    // Triggers at 01:00 … 06:00; failures at 02:00 (3) and 05:00 (7).
    assert_eq!(kept(&h), vec![(4, 0), (5, 7), (6, 0)]);
    let last = h.pod("job").runs.last().cloned().unwrap();
    assert_eq!(
        last.finished_at.duration_since(last.started_at),
        secs(60.0),
        "a run's start and end are its own"
    );
    let failed = &h.pod("job").runs[1];
    let f = failed.failure.as_ref().unwrap();
    assert_eq!(
        (f.container.as_str(), f.reason),
        ("run", TerminationReason::Error)
    );
}

#[test]
fn a_scheduled_pod_without_history_keeps_the_cronjob_defaults_and_others_keep_none() {
    // What config validation gives a scheduled pod that does not write `history`.
    let h = runs(hourly(HistorySpec::SCHEDULED), &[1, 0, 2, 0, 0, 0, 0]);
    assert_eq!(kept(&h), vec![(3, 2), (5, 0), (6, 0), (7, 0)]);

    let mut h = Harness::new(config(vec![pod(
        "once",
        vec![with_policy(container("run"), RestartPolicy::Never)],
    )]));
    h.ack_spawns();
    h.exit("once", "run", 0);
    assert_eq!(h.phase("once"), Phase::Succeeded);
    assert!(h.pod("once").runs.is_empty(), "no history unless asked");
}

#[test]
fn a_run_started_by_trigger_or_restart_is_kept_without_a_schedule_time() {
    let mut p = pod(
        "once",
        vec![with_policy(container("run"), RestartPolicy::Never)],
    );
    p.restart_policy = RestartPolicy::Never;
    p.history = HistorySpec {
        successful: 5,
        failed: 5,
    };
    let mut h = Harness::new(config(vec![p]));
    h.ack_spawns();
    h.exit("once", "run", 0);
    assert_eq!(h.pod("once").runs.len(), 1);
    h.cmd(Command::Trigger {
        pod: "once".to_string(),
    })
    .unwrap();
    h.ack_spawns();
    assert!(h.is_running("once", "run"));
    assert_eq!(
        h.pod("once").runs.len(),
        1,
        "the run under way is not kept yet"
    );
    h.exit("once", "run", 4);
    let runs = h.pod("once").runs;
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.scheduled_for.is_none()));
    assert_eq!(runs[1].failure.as_ref().map(|f| f.exit_code), Some(4));
}

#[test]
fn a_replaced_run_is_kept_with_its_own_trigger_not_the_one_that_replaced_it() {
    let mut p = hourly(HistorySpec {
        successful: 3,
        failed: 3,
    });
    if let Some(s) = p.schedule.as_mut() {
        s.concurrency = Concurrency::Replace;
    }
    let mut h = Harness::new(config(vec![p]));
    h.wall("2026-05-01T00:30:00Z");
    h.advance_to(1800.0);
    h.ack_spawns();
    assert!(h.is_running("job", "run"));
    // Still running at the 02:00 trigger: stopped, and a new run begins.
    h.advance_to(1800.0 + 3600.0);
    let key = h.key("job", "run");
    assert!(has_signal(&h.take(), key), "the 01:00 run is stopped");
    h.killed_by("job", "run", 15);
    h.ack_spawns();
    assert!(h.is_running("job", "run"), "the 02:00 run");
    assert_eq!(kept(&h).len(), 1);
    assert_eq!(kept(&h)[0].0, 1, "the stopped run is the 01:00 one");
    h.exit("job", "run", 0);
    assert_eq!(kept(&h).iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2]);
}

#[test]
fn a_reload_that_lowers_the_limits_trims_at_once_without_stopping_the_pod() {
    let limits = HistorySpec {
        successful: 3,
        failed: 3,
    };
    let mut h = runs(hourly(limits), &[0, 0, 0]);
    h.advance_to(1800.0 + 3600.0 * 3.0);
    h.ack_spawns();
    assert!(h.is_running("job", "run"));
    let fewer = hourly(HistorySpec {
        successful: 1,
        failed: 0,
    });
    h.cmd(Command::Reload(Box::new(config(vec![fewer]))))
        .unwrap();
    let key = h.key("job", "run");
    assert!(
        !has_signal(&h.take(), key),
        "history alone does not restart"
    );
    assert!(h.is_running("job", "run"));
    assert_eq!(kept(&h), vec![(3, 0)]);
}

#[test]
fn a_crash_of_vigil_keeps_the_runs_and_records_the_run_it_took_over() {
    let p = hourly(HistorySpec {
        successful: 3,
        failed: 3,
    });
    let mut h = runs(p.clone(), &[0, 5]);
    let before = kept(&h);
    assert_eq!(before, vec![(1, 0), (2, 5)]);
    // The third run is under way when vigil dies.
    h.advance_to(1800.0 + 3600.0 * 2.0);
    h.ack_spawns();
    let pid = match h.status("job", "run").pid {
        Some(pid) => pid,
        None => panic!("running: {:?}", h.status("job", "run")),
    };
    let cfg = config(vec![p]);
    let (mut h, _) = h.after_crash(&cfg, 5.0, &[("job", "run", pid)]);
    h.wall("2026-05-01T03:00:05Z");
    assert_eq!(kept(&h), before, "the kept runs survive the crash");
    h.exit("job", "run", 0);
    assert_eq!(
        kept(&h).len(),
        3,
        "the adopted run's end is recorded: {:?}",
        h.pod("job").runs
    );
}
