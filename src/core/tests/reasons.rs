//! Termination reasons (docs/behaviour.md §3).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn never(name: &str) -> Harness {
    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![with_policy(container(name), RestartPolicy::Never)],
    )]));
    h.ack_spawns();
    h
}

#[test]
fn exit_zero_is_completed() {
    let mut h = never("app");
    h.advance_to(2.0);
    h.exit("web", "app", 0);
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::Completed);
    assert_eq!(t.exit_code, 0);
    assert_eq!(t.started_at, Some(h.t0));
    assert_eq!(t.finished_at, h.t0 + secs(2.0));
}

/// A service that daemonized exits 0 from its first process and leaves its real work in the
/// cgroup, which vigil then kills: `Completed` is not what happened, so the event says so.
#[test]
fn exit_zero_that_left_processes_in_the_cgroup_asks_whether_it_daemonized() {
    let mut h = never("nginx");
    h.exit_info(
        "web",
        "nginx",
        ExitInfo {
            code: Some(0),
            left_behind: 3,
            ..ExitInfo::default()
        },
    );
    let t = h.terminated("web", "nginx").unwrap();
    assert_eq!(t.reason, TerminationReason::Completed);
    assert_eq!(
        t.message,
        "left 3 processes in its cgroup (did it daemonize? run it in the foreground: daemon \
         off;, --daemonize no)"
    );
    let ev = h.event("Exited").unwrap();
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(
        ev.message,
        "Container nginx exited: Completed, but left 3 processes in its cgroup (did it \
         daemonize? run it in the foreground: daemon off;, --daemonize no)"
    );
}

/// A termination message file usually ends in a newline, and may hold several lines: the
/// `Exited` event stays one line (vigil's log writes one event a line); the message itself is
/// kept as written.
#[test]
fn a_termination_message_with_newlines_is_one_line_in_the_exited_event() {
    let mut h = never("app");
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            code: Some(1),
            termination_message: Some("config missing\nsee /etc/app\n".to_string()),
            ..ExitInfo::default()
        },
    );
    assert_eq!(
        h.terminated("web", "app").unwrap().message,
        "config missing\nsee /etc/app\n"
    );
    let ev = h.event("Exited").unwrap();
    assert_eq!(
        ev.message,
        "Container app exited: Error, exit code 1 (config missing\\nsee /etc/app)"
    );
}

#[test]
fn nonzero_exit_and_foreign_signal_are_error() {
    let mut h = never("app");
    h.exit("web", "app", 3);
    assert_eq!(
        h.terminated("web", "app").unwrap().reason,
        TerminationReason::Error
    );

    let mut h = never("app");
    h.killed_by("web", "app", 11);
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::Error);
    assert_eq!(t.exit_code, 139);
    assert_eq!(t.signal, Some(11));
}

#[test]
fn main_process_oom_kill_is_oomkilled_with_limit_message() {
    let mut h = never("app");
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            signal: Some(9),
            oom_kill_delta: 1,
            memory_max: Some(20 << 20),
            memory_peak: Some(20 << 20),
            ..ExitInfo::default()
        },
    );
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::OomKilled);
    assert_eq!(t.exit_code, 137);
    assert_eq!(t.message, "memory.max=20Mi reached (peak 20Mi)");
    assert_eq!(h.status("web", "app").oom_kills, 1);
    assert_eq!(h.phase("web"), Phase::Failed);
}

#[test]
fn group_oom_kill_is_oomkilled() {
    let mut h = never("app");
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            signal: Some(9),
            oom_kill_delta: 2,
            oom_group_kill_delta: 1,
            ..ExitInfo::default()
        },
    );
    assert_eq!(
        h.terminated("web", "app").unwrap().reason,
        TerminationReason::OomKilled
    );
    assert_eq!(h.status("web", "app").oom_kills, 2);
}

#[test]
fn child_oom_kill_is_not_oomkilled_but_counted_and_evented() {
    let mut h = never("app");
    let key = h.key("web", "app");
    h.input(Input::OomKills {
        key,
        generation: 1,
        delta: 1,
        memory_max: Some(20 << 20),
    });
    assert!(h.is_running("web", "app"));
    assert_eq!(h.status("web", "app").oom_kills, 1);
    let ev = h.event("OOMKilling").unwrap();
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(
        ev.message,
        "1 process OOM-killed in container=app pod=web, memory.max=20Mi"
    );
    h.input(Input::OomKills {
        key,
        generation: 1,
        delta: 2,
        memory_max: Some(20 << 20),
    });
    assert!(
        h.events().iter().any(
            |e| e.message == "2 processes OOM-killed in container=app pod=web, memory.max=20Mi"
        )
    );
    // The main process later exits 0: Completed, and the reap-time counter (3) is not
    // double-counted.
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            code: Some(0),
            oom_kill_delta: 3,
            ..ExitInfo::default()
        },
    );
    assert_eq!(
        h.terminated("web", "app").unwrap().reason,
        TerminationReason::Completed
    );
    assert_eq!(h.status("web", "app").oom_kills, 3);
    assert_eq!(h.phase("web"), Phase::Succeeded);
}

#[test]
fn child_oom_then_main_exits_nonzero_without_sigkill_is_error() {
    let mut h = never("app");
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            code: Some(1),
            oom_kill_delta: 1,
            ..ExitInfo::default()
        },
    );
    assert_eq!(
        h.terminated("web", "app").unwrap().reason,
        TerminationReason::Error
    );
    assert_eq!(h.status("web", "app").oom_kills, 1);
}

#[test]
fn spawn_failure_is_start_error_and_backs_off() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    let key = h.key("web", "app");
    h.input(Input::SpawnFailed {
        key,
        generation: 1,
        message: "No such file or directory (os error 2)".to_string(),
    });
    // First restart is immediate; fail again to see the terminated record in last_state.
    assert!(has_spawn(&h.take(), key));
    h.input(Input::SpawnFailed {
        key,
        generation: 2,
        message: "No such file or directory (os error 2)".to_string(),
    });
    assert_eq!(
        h.waiting("web", "app").unwrap().0,
        WaitingReason::CrashLoopBackOff
    );
    let last = h.status("web", "app").last_state.unwrap();
    assert_eq!(last.reason, TerminationReason::StartError);
    assert_eq!(last.exit_code, 128);
    assert_eq!(last.message, "No such file or directory (os error 2)");
    assert_eq!(last.started_at, None);
    let ev = h.event("Failed").unwrap();
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(ev.count, 2);
}

#[test]
fn start_error_under_on_failure_is_a_failure() {
    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![with_policy(container("app"), RestartPolicy::OnFailure)],
    )]));
    let key = h.key("web", "app");
    h.input(Input::SpawnFailed {
        key,
        generation: 1,
        message: "Permission denied (os error 13)".to_string(),
    });
    assert!(has_spawn(&h.take(), key));
}

#[test]
fn stop_request_is_stopped_and_not_restarted() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    let r = h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: Some("app".to_string()),
    });
    assert!(r.is_ok());
    let acts = h.take();
    assert!(acts.contains(&Action::Signal {
        key,
        generation: 1,
        signal: 15
    }));
    let ev = h.event("Killing").unwrap();
    assert_eq!(ev.message, "Stopping container app: stopped by request");
    assert_eq!(ev.kind, EventType::Normal);
    h.killed_by("web", "app", 15);
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::Stopped);
    assert_eq!(t.message, "stopped by request");
    assert_eq!(t.exit_code, 143);
    assert!(h.take().is_empty());
    assert_eq!(h.sup.poll_timeout(), None);
}

#[test]
fn liveness_kill_of_app_exiting_zero_is_a_failure_under_on_failure() {
    let mut c = with_policy(container("app"), RestartPolicy::OnFailure);
    c.liveness_probe = Some(probe(10.0));
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    for _ in 0..3 {
        h.step();
        let (_, seq) = h.probe_starts()[0];
        h.probe_result("web", "app", ProbeKind::Liveness, seq, false);
    }
    assert!(has_signal(&h.take(), key));
    h.exit("web", "app", 0);
    assert!(
        has_spawn(&h.take(), key),
        "probe kill is a failure: restarted"
    );
    let last = h.status("web", "app").last_state.unwrap();
    assert_eq!(last.reason, TerminationReason::LivenessProbeFailed);
    assert_eq!(last.exit_code, 0);
    assert_eq!(
        last.message,
        "Liveness probe failed: HTTP probe failed with statuscode: 503"
    );
}
