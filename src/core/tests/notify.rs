//! sd_notify from containers (`notify = true`; docs/behaviour.md §4.4; sd_notify(3),
//! systemd.service(5) `Type=notify`).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn notifying(f: impl FnOnce(&mut ContainerSpec)) -> Harness {
    let mut c = container("app");
    c.notify = true;
    f(&mut c);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    h
}

fn notify(h: &mut Harness, n: Notification) {
    let key = h.key("web", "app");
    let generation = h.generation(key);
    h.input(Input::Notified {
        key,
        generation,
        notification: n,
    });
}

fn ready() -> Notification {
    Notification {
        ready: true,
        ..Notification::default()
    }
}

#[test]
fn a_notify_container_is_not_ready_until_it_sends_ready() {
    let mut h = notifying(|_| {});
    assert!(h.is_running("web", "app"));
    let s = h.status("web", "app");
    assert!(s.started && !s.ready, "running but not READY=1 yet");
    assert!(!h.condition("web", ConditionType::Ready).status);
    notify(
        &mut h,
        Notification {
            status: Some("loading 3/10".into()),
            ..Notification::default()
        },
    );
    assert!(
        !h.status("web", "app").ready,
        "STATUS= alone is not READY=1"
    );
    notify(&mut h, ready());
    let s = h.status("web", "app");
    assert!(s.ready);
    assert!(h.condition("web", ConditionType::Ready).status);
    let n = s.notify.expect("notify status");
    assert!(n.ready);
    assert_eq!(n.status.as_deref(), Some("loading 3/10"));
    let e = h.event("Ready").expect("a Ready event");
    assert_eq!(e.object, "web/app");
}

#[test]
fn ready_needs_the_readiness_probe_too_when_one_is_set() {
    let mut h = notifying(|c| c.readiness_probe = Some(probe(1.0)));
    notify(&mut h, ready());
    assert!(!h.status("web", "app").ready, "the probe has not passed");
    h.step();
    let starts = h.probe_starts();
    h.probe_result("web", "app", ProbeKind::Readiness, starts[0].1, true);
    assert!(h.status("web", "app").ready);
}

#[test]
fn a_probe_that_passes_does_not_make_a_notify_container_ready_without_ready() {
    let mut h = notifying(|c| c.readiness_probe = Some(probe(1.0)));
    h.step();
    let starts = h.probe_starts();
    h.probe_result("web", "app", ProbeKind::Readiness, starts[0].1, true);
    assert!(!h.status("web", "app").ready);
}

#[test]
fn ready_is_forgotten_at_the_next_run() {
    let mut h = notifying(|c| c.restart_policy = RestartPolicy::Always);
    notify(&mut h, ready());
    assert!(h.status("web", "app").ready);
    let old = h.generation(h.key("web", "app"));
    h.exit("web", "app", 1);
    h.ack_spawns();
    let key = h.key("web", "app");
    assert!(h.generation(key) > old);
    assert!(h.is_running("web", "app"));
    assert!(
        !h.status("web", "app").ready,
        "a new run must say READY=1 again"
    );
    // A late READY=1 of the earlier run counts for nothing.
    h.input(Input::Notified {
        key,
        generation: old,
        notification: ready(),
    });
    assert!(!h.status("web", "app").ready);
    assert_eq!(h.status("web", "app").notify, Some(NotifyStatus::default()));
}

#[test]
fn stopping_is_recorded_and_ends_readiness() {
    let mut h = notifying(|_| {});
    notify(&mut h, ready());
    notify(
        &mut h,
        Notification {
            stopping: true,
            ..Notification::default()
        },
    );
    let s = h.status("web", "app");
    assert!(s.notify.expect("notify").stopping);
    assert!(!s.ready);
    assert!(h.event("Stopping").is_some());
}

#[test]
fn a_container_without_notify_ignores_notifications_and_has_no_notify_status() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    assert!(h.status("web", "app").ready);
    notify(
        &mut h,
        Notification {
            stopping: true,
            ..Notification::default()
        },
    );
    let s = h.status("web", "app");
    assert!(s.ready && s.notify.is_none());
}

fn printing() -> Harness {
    let mut c = container("app");
    c.ready_log_line = Some(LinePattern::new("listening on").expect("pattern"));
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    h
}

fn line_matched() -> Notification {
    Notification {
        via: ReadyWord::LogLine,
        ready: true,
        ..Notification::default()
    }
}

#[test]
fn a_ready_log_line_container_is_ready_only_once_its_line_matched() {
    let mut h = printing();
    assert!(h.is_running("web", "app"));
    assert!(
        !h.status("web", "app").ready,
        "running, no line matched yet"
    );
    assert!(!h.condition("web", ConditionType::Ready).status);
    notify(&mut h, line_matched());
    assert!(h.status("web", "app").ready);
    assert!(h.condition("web", ConditionType::Ready).status);
    let e = h.event("Ready").expect("a Ready event");
    assert!(e.message.contains("ready_log_line"), "{}", e.message);
}

#[test]
fn a_ready_log_line_container_is_not_made_ready_over_sd_notify_nor_the_other_way() {
    let mut h = printing();
    notify(&mut h, ready());
    assert!(!h.status("web", "app").ready, "READY=1 is not its way");
    let mut h = notifying(|_| {});
    notify(&mut h, line_matched());
    assert!(
        !h.status("web", "app").ready,
        "a log line is not a notify run's way"
    );
}

#[test]
fn a_ready_log_line_run_must_match_again_after_a_restart() {
    let mut h = printing();
    notify(&mut h, line_matched());
    let old = h.generation(h.key("web", "app"));
    h.exit("web", "app", 1);
    h.ack_spawns();
    let key = h.key("web", "app");
    assert!(h.generation(key) > old);
    assert!(
        !h.status("web", "app").ready,
        "a new run must print its line again"
    );
    h.input(Input::Notified {
        key,
        generation: old,
        notification: line_matched(),
    });
    assert!(
        !h.status("web", "app").ready,
        "the earlier run's line counts for nothing"
    );
}

fn ping() -> Notification {
    Notification {
        watchdog: true,
        ..Notification::default()
    }
}

#[test]
fn watchdog_pings_keep_a_run_alive_and_their_end_kills_it_as_watchdog_timeout_then_restarts() {
    let mut h = notifying(|c| {
        c.watchdog = Some(secs(2.0));
        c.restart_policy = RestartPolicy::Always;
    });
    // Not armed before READY=1 (systemd arms it when the start-up is complete).
    assert_eq!(h.sup.poll_timeout(), None, "no watchdog before READY=1");
    notify(&mut h, ready());
    // Pings every second for ten seconds: never killed.
    for t in 1..=10 {
        h.advance_to(f64::from(t));
        notify(&mut h, ping());
    }
    assert!(h.event("WatchdogTimeout").is_none());
    assert!(!has_signal(&h.take(), h.key("web", "app")));
    // Silence: the deadline is the last ping + 2 s.
    assert_eq!(h.step(), 12.0);
    let e = h.event("WatchdogTimeout").expect("a WatchdogTimeout event");
    assert_eq!(e.kind, EventType::Warning);
    assert!(
        e.message.contains("no WATCHDOG=1 within 2s"),
        "{}",
        e.message
    );
    let key = h.key("web", "app");
    assert!(has_signal(&h.take(), key), "the stop signal");
    assert!(
        !h.status("web", "app").ready,
        "not ready once it is stopping"
    );
    h.killed_by("web", "app", 15);
    let last = h.status("web", "app").last_state.expect("the run's end");
    assert_eq!(last.reason, TerminationReason::WatchdogTimeout);
    assert!(last.message.contains("no WATCHDOG=1"), "{}", last.message);
    // Restarted as the policy says, after its back-off; the next run's watchdog waits for
    // its own READY=1.
    h.advance_to(60.0);
    h.ack_spawns();
    assert!(h.is_running("web", "app"));
    assert_eq!(h.status("web", "app").restart_count, 1);
}

#[test]
fn watchdog_trigger_kills_at_once_and_never_without_watchdog_seconds() {
    let trigger = Notification {
        watchdog_trigger: true,
        ..Notification::default()
    };
    let mut h = notifying(|c| {
        c.watchdog = Some(secs(30.0));
        c.restart_policy = RestartPolicy::Never;
    });
    notify(&mut h, ready());
    notify(&mut h, trigger.clone());
    assert!(has_signal(&h.take(), h.key("web", "app")));
    h.killed_by("web", "app", 15);
    let t = h.terminated("web", "app").expect("ended");
    assert_eq!(t.reason, TerminationReason::WatchdogTimeout);
    assert!(t.message.contains("WATCHDOG=trigger"), "{}", t.message);
    // Without watchdog_seconds the keep-alives and the trigger mean nothing.
    let mut h = notifying(|_| {});
    notify(&mut h, ready());
    notify(&mut h, trigger);
    notify(&mut h, ping());
    assert!(h.event("WatchdogTimeout").is_none());
    assert!(!has_signal(&h.take(), h.key("web", "app")));
    assert_eq!(h.sup.poll_timeout(), None);
}

fn extend(secs: f64) -> Notification {
    Notification {
        extend_timeout: Some(std::time::Duration::from_secs_f64(secs)),
        ..Notification::default()
    }
}

#[test]
fn a_notify_run_without_ready_within_start_timeout_is_stopped_as_start_timeout_and_restarted() {
    let mut h = notifying(|c| {
        c.start_timeout = Some(secs(5.0));
        c.restart_policy = RestartPolicy::Always;
    });
    assert_eq!(h.step(), 5.0, "the budget runs from the start");
    let e = h.event("StartTimeout").expect("a StartTimeout event");
    assert_eq!(e.kind, EventType::Warning);
    assert!(e.message.contains("no READY=1 within 5s"), "{}", e.message);
    assert!(
        has_signal(&h.take(), h.key("web", "app")),
        "the stop signal"
    );
    h.killed_by("web", "app", 15);
    let last = h.status("web", "app").last_state.expect("the run's end");
    assert_eq!(last.reason, TerminationReason::StartTimeout);
    h.advance_to(60.0);
    h.ack_spawns();
    assert!(h.is_running("web", "app"));
    assert_eq!(h.status("web", "app").restart_count, 1);
}

#[test]
fn extend_timeout_usec_moves_the_start_budget_from_its_receipt_and_ready_ends_it() {
    let mut h = notifying(|c| c.start_timeout = Some(secs(5.0)));
    // At 4 s: 3 s more from now (7 s); an extension that would end earlier shortens nothing.
    h.advance_to(4.0);
    notify(&mut h, extend(3.0));
    h.advance_to(4.5);
    notify(&mut h, extend(0.1));
    h.advance_to(6.5);
    assert!(h.event("StartTimeout").is_none(), "extended past 5 s");
    notify(&mut h, extend(3.0));
    assert_eq!(h.step(), 9.5, "each extension counts from its receipt");
    assert!(h.event("StartTimeout").is_some());
    // READY=1 ends the start-up: no budget, and a late extension starts none.
    let mut h = notifying(|c| c.start_timeout = Some(secs(5.0)));
    notify(&mut h, ready());
    notify(&mut h, extend(1.0));
    assert_eq!(h.sup.poll_timeout(), None);
    h.advance_to(30.0);
    assert!(h.event("StartTimeout").is_none());
    // Without start_timeout_seconds, EXTEND_TIMEOUT_USEC= sets no budget (systemd: no timer).
    let mut h = notifying(|_| {});
    notify(&mut h, extend(1.0));
    assert_eq!(h.sup.poll_timeout(), None);
}
