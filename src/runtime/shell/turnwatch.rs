//! The self-watchdog: how long each loop turn took, and which part of it took the most, so
//! that a turn longer than [`SLOW_TURN`] is logged at `WARN` with what it was doing (`loop
//! turn took 412 ms; slowest: executor: start of web/app (380 ms)`). It works wherever vigil
//! runs (a shell, PID 1, systemd), unlike systemd's `WatchdogSec`, which only kills.
//!
//! Cost: one clock read per phase (an event dispatched, an action run, a chore of the turn)
//! and one at the end of the turn; the turn's start is the clock read the loop makes anyway.
//!
//! Owns: the current turn's start, the last mark and the slowest phase so far. Must not: log
//! anything but the one line of a slow turn, or hold names (a phase is a type; the router
//! turns a container key into `pod/container` only for that line).

use std::time::{Duration, Instant};

use super::tokens::Owner;
use crate::config::spec::ProbeKind;
use crate::core::{Action, ContainerKey};

/// A turn longer than this is logged.
pub const SLOW_TURN: Duration = Duration::from_millis(100);

/// A part of a loop turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// An event handed to its owner.
    Dispatch(Owner),
    /// One of the core's actions, for a container.
    Action(ActionKind, Option<ContainerKey>),
    /// A chore of the turn after the events.
    Chore(Chore),
}

/// What an action does (without its data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    Start,
    Signal,
    Kill,
    Probe(ProbeKind),
    CancelProbe,
    Forget,
    Exit,
}

impl ActionKind {
    pub fn of(action: &Action) -> (ActionKind, Option<ContainerKey>) {
        match action {
            Action::Spawn { key, .. } => (ActionKind::Start, Some(*key)),
            Action::Signal { key, .. } => (ActionKind::Signal, Some(*key)),
            Action::Kill { key, .. } => (ActionKind::Kill, Some(*key)),
            Action::StartProbe { key, kind, .. } => (ActionKind::Probe(*kind), Some(*key)),
            Action::CancelProbe { key, .. } => (ActionKind::CancelProbe, Some(*key)),
            Action::Forget { key } => (ActionKind::Forget, Some(*key)),
            Action::Exit { .. } => (ActionKind::Exit, None),
        }
    }
}

/// The turn's chores, in the order the router runs them ([`Chore::TURN`], then `Startup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chore {
    ProbeExpiry,
    CoreTimeouts,
    DeferredStarts,
    Janitor,
    Actions,
    GonePods,
    Control,
    Metrics,
    Capture,
    Journal,
    EventHooks,
    StateFile,
    Status,
    Startup,
}

impl Chore {
    /// The chores of a turn after its events, in order (`Startup` comes after them).
    pub const TURN: [Chore; 13] = [
        Chore::ProbeExpiry,
        Chore::CoreTimeouts,
        Chore::DeferredStarts,
        Chore::Janitor,
        Chore::Actions,
        Chore::GonePods,
        Chore::Control,
        Chore::Metrics,
        Chore::Capture,
        Chore::Journal,
        Chore::EventHooks,
        Chore::StateFile,
        Chore::Status,
    ];

    fn name(self) -> &'static str {
        match self {
            Chore::ProbeExpiry => "probes: expiring attempts",
            Chore::CoreTimeouts => "core: timeouts",
            Chore::DeferredStarts => "executor: deferred starts",
            Chore::Janitor => "janitor: cgroup removal",
            Chore::Actions => "executor: actions",
            Chore::GonePods => "janitor: removed pods' cgroups",
            Chore::Control => "control: requests and streams",
            Chore::Metrics => "metrics: expositions",
            Chore::Capture => "capture: container output",
            Chore::Journal => "journal: forwarding",
            Chore::EventHooks => "on_event hooks",
            Chore::StateFile => "state file",
            Chore::Status => "notifier: status",
            Chore::Startup => "start-up and trim",
        }
    }
}

/// Says what a phase was, given the `pod/container` of a key.
pub fn describe(phase: Phase, name_of: impl Fn(ContainerKey) -> Option<String>) -> String {
    match phase {
        Phase::Dispatch(owner) => format!("dispatch of {}", owner_name(owner)),
        Phase::Chore(c) => c.name().to_string(),
        Phase::Action(kind, key) => {
            let what = match kind {
                ActionKind::Start => "start",
                ActionKind::Signal => "signal",
                ActionKind::Kill => "kill",
                ActionKind::Probe(ProbeKind::Hook) => "hook",
                ActionKind::Probe(k) => k.as_str(),
                ActionKind::CancelProbe => "probe cancel",
                ActionKind::Forget => "removal",
                ActionKind::Exit => "exit",
            };
            let probe = matches!(kind, ActionKind::Probe(k) if k != ProbeKind::Hook);
            let whose = key
                .and_then(name_of)
                .map(|n| format!(" of {n}"))
                .unwrap_or_default();
            if probe {
                format!("executor: {what} probe{whose}")
            } else {
                format!("executor: {what}{whose}")
            }
        }
    }
}

fn owner_name(owner: Owner) -> &'static str {
    match owner {
        Owner::Signals => "signals",
        Owner::Control => "control socket",
        Owner::Stdout => "stdout",
        Owner::Stderr => "stderr",
        Owner::Capture => "container output",
        Owner::Oom => "memory.events",
        Owner::Janitor => "cgroup removal",
        Owner::Probes => "probe",
        Owner::Adopted => "adopted run",
        Owner::Metrics => "metrics listener",
        Owner::Exec => "exec report",
        Owner::EventHooks => "on_event hook",
        Owner::Notify => "sd_notify socket",
        Owner::PodDir => "pod_dir watch",
    }
}

/// The running measurement of one turn.
#[derive(Debug)]
pub struct TurnWatch {
    start: Instant,
    last: Instant,
    slowest: Option<(Duration, Phase)>,
}

impl TurnWatch {
    pub fn new(now: Instant) -> TurnWatch {
        TurnWatch {
            start: now,
            last: now,
            slowest: None,
        }
    }

    /// A turn begins at `now` (the loop's own clock read).
    pub fn begin(&mut self, now: Instant) {
        *self = TurnWatch::new(now);
    }

    /// `phase` has just ended.
    pub fn mark(&mut self, phase: Phase) {
        self.mark_at(phase, Instant::now());
    }

    fn mark_at(&mut self, phase: Phase, at: Instant) {
        let took = at.saturating_duration_since(self.last);
        self.last = at;
        if self.slowest.is_none_or(|(d, _)| took > d) {
            self.slowest = Some((took, phase));
        }
    }

    /// The turn has ended (at the last mark): its length and slowest phase if it was slow.
    pub fn slow(&self) -> Option<(Duration, Option<(Duration, Phase)>)> {
        let total = self.last.saturating_duration_since(self.start);
        (total > SLOW_TURN).then_some((total, self.slowest))
    }

    /// A turn longer than [`SLOW_TURN`]: one `WARN` line with its slowest phase (`name_of`
    /// names a container `pod/container`).
    pub fn report_if_slow(&self, name_of: impl Fn(ContainerKey) -> Option<String>) {
        let Some((total, slowest)) = self.slow() else {
            return;
        };
        let what = slowest.map_or_else(String::new, |(took, phase)| {
            let name = describe(phase, name_of);
            format!("; slowest: {name} ({} ms)", took.as_millis())
        });
        log::warn!(
            "loop turn took {} ms{what} (everything else waited meanwhile)",
            total.as_millis()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_turn_names_its_slowest_phase_and_a_quick_one_nothing() {
        let t0 = Instant::now();
        let mut w = TurnWatch::new(t0);
        w.mark_at(
            Phase::Dispatch(Owner::Control),
            t0 + Duration::from_millis(5),
        );
        assert_eq!(w.slow(), None);
        w.mark_at(
            Phase::Action(ActionKind::Start, Some(ContainerKey(3))),
            t0 + Duration::from_millis(385),
        );
        w.mark_at(
            Phase::Chore(Chore::Control),
            t0 + Duration::from_millis(412),
        );
        let (total, slowest) = w.slow().expect("slow");
        assert_eq!(total, Duration::from_millis(412));
        let (took, phase) = slowest.expect("a phase");
        assert_eq!(took, Duration::from_millis(380));
        let name = |k: ContainerKey| (k.0 == 3).then(|| "web/app".to_string());
        assert_eq!(describe(phase, name), "executor: start of web/app");
        w.begin(t0 + Duration::from_secs(1));
        assert_eq!(w.slow(), None, "a new turn starts afresh");
    }

    #[test]
    fn phases_read_as_an_operator_would_say_them() {
        let none = |_| None;
        assert_eq!(
            describe(Phase::Dispatch(Owner::Control), none),
            "dispatch of control socket"
        );
        assert_eq!(
            describe(
                Phase::Action(
                    ActionKind::Probe(ProbeKind::Readiness),
                    Some(ContainerKey(1))
                ),
                |_| Some("db/pg".into())
            ),
            "executor: readiness probe of db/pg"
        );
        assert_eq!(
            describe(Phase::Chore(Chore::Janitor), none),
            "janitor: cgroup removal"
        );
    }
}
