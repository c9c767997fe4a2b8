//! A slot's deadlines and its probes' effects (kubelet `prober/`): the back-off's end, the kill
//! at a grace period's end, a hook's end, the probe schedule and timeouts, and what a
//! published probe result does (started, ready, a liveness or startup failure stops the run).
//!
//! Owns turning due times and probe results into transitions. Must not count probe results
//! toward thresholds (`core/probes.rs`) nor carry out the stop (`stop.rs`).

use super::*;
use crate::config::on_event::EventReason;

impl Slot {
    /// After `vigil upgrade`: probe attempts that were in flight run again.
    pub(in crate::core) fn requeue_probes(&mut self) {
        for p in &mut self.probes {
            p.requeue_in_flight();
        }
    }

    pub(in crate::core) fn next_deadline(&self) -> Option<Time> {
        let sleep = self.hook.as_ref().and_then(|h| h.done_at);
        let own = match &self.state {
            SlotState::BackOff { until, .. } => Some(*until),
            SlotState::Running {
                stopping: Some(s), ..
            } => (!s.killed).then_some(s.kill_at),
            SlotState::Running { stopping: None, .. } => (self.probes.iter())
                .filter_map(|p| p.next_deadline())
                .chain(self.watchdog_at)
                .chain(self.start_deadline)
                .min(),
            _ => None,
        };
        match (own, sleep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Act on every deadline of this slot at or before `out.now`. Returns whether the slot
    /// may have changed beyond its probes' bookkeeping: `false` when the deadlines were only
    /// probe attempts starting, or timing out without publishing a new result (the common
    /// case at a high probe rate), which move no condition, dependency or stop.
    pub(in crate::core) fn on_timeout(&mut self, pod: &str, out: &mut Out) -> bool {
        let mut changed = false;
        if self
            .hook
            .as_ref()
            .and_then(|h| h.done_at)
            .is_some_and(|t| t <= out.now)
        {
            self.hook_done(None, pod, out);
            changed = true;
        }
        match &mut self.state {
            SlotState::BackOff { until, .. } if *until <= out.now => {
                if out.shutting_down {
                    self.state = SlotState::Done(stopped(MSG_SHUTDOWN, out.now));
                } else {
                    self.restart_now(pod, out);
                }
                true
            }
            SlotState::Running {
                stopping: Some(s), ..
            } if !s.killed && s.kill_at <= out.now => {
                // SIGKILL after the grace period is the normal end of a stop (docs/behaviour.md §6.1):
                // it does not make a shutdown unclean; only the global deadline or a forced
                // shutdown does (see `kill_now`).
                s.killed = true;
                s.grace_expired = true;
                let grace = s.grace;
                out.actions.push_back(Action::Kill {
                    key: self.key,
                    generation: self.generation,
                });
                let name = self.spec.name.clone();
                out.event(
                    EventType::Warning,
                    EventReason::Killing,
                    pod,
                    &name,
                    format!(
                        "Container {name} did not stop within {}, sending SIGKILL",
                        go_duration(grace)
                    ),
                );
                // A pre-stop hook still running at the end of the grace is killed too.
                self.cancel_hook(out);
                true
            }
            SlotState::Running { stopping: None, .. }
                if self.watchdog_at.is_some_and(|t| t <= out.now) =>
            {
                self.watchdog_ran_out(None, pod, out);
                true
            }
            SlotState::Running { stopping: None, .. }
                if self.start_deadline.is_some_and(|t| t <= out.now) =>
            {
                self.start_timed_out(pod, out);
                true
            }
            SlotState::Running { stopping: None, .. } => self.tick_probes(pod, out) || changed,
            _ => changed,
        }
    }

    pub(super) fn stopping(&self) -> bool {
        !matches!(self.state, SlotState::Running { stopping: None, .. })
    }

    /// Time out and start this slot's due probe attempts; `true` if a timed-out attempt
    /// published a new result (which may start a stop or change readiness).
    pub(super) fn tick_probes(&mut self, pod: &str, out: &mut Out) -> bool {
        let mut published = false;
        for i in 0..self.probes.len() {
            if self.stopping() {
                return true;
            }
            let kind = self.probes[i].kind;
            if let Some(seq) = self.probes[i].timed_out(out.now) {
                out.actions.push_back(Action::CancelProbe {
                    key: self.key,
                    generation: self.generation,
                    kind,
                    seq,
                });
                if let Some(rec) = self.probes[i].record_timeout() {
                    published |= rec.published.is_some();
                    self.apply_recorded(kind, rec, pod, out);
                }
            }
            if self.stopping() {
                return true;
            }
            if let Some(seq) = self.probes[i].try_start(out.now, out.probe_seq) {
                out.actions.push_back(Action::StartProbe {
                    key: self.key,
                    generation: self.generation,
                    pod: pod.to_string(),
                    container: self.spec.clone(),
                    kind,
                    seq,
                    probe: self.probes[i].spec.clone(),
                });
            }
        }
        published
    }

    pub(in crate::core) fn on_probe_result(
        &mut self,
        kind: ProbeKind,
        seq: u64,
        outcome: ProbeOutcome,
        duration: Duration,
        pod: &str,
        out: &mut Out,
    ) -> bool {
        if kind == ProbeKind::Hook {
            if self.hook.as_ref().and_then(|h| h.seq) == Some(seq) {
                let failure = match outcome {
                    ProbeOutcome::Failure(m) => Some(m),
                    ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => None,
                };
                self.hook_done(failure, pod, out);
            }
            return true;
        }
        if self.stopping() {
            return false;
        }
        let Some(probe) = self.probes.iter_mut().find(|p| p.kind == kind) else {
            return false;
        };
        match probe.on_result(seq, outcome, duration) {
            Some(rec) => {
                let published = rec.published.is_some();
                self.apply_recorded(kind, rec, pod, out);
                published
            }
            None => false,
        }
    }

    pub(super) fn apply_recorded(
        &mut self,
        kind: ProbeKind,
        rec: Recorded,
        pod: &str,
        out: &mut Out,
    ) {
        let name = self.spec.name.clone();
        if let Some(msg) = &rec.warning {
            out.event(
                EventType::Warning,
                EventReason::ProbeWarning,
                pod,
                &name,
                format!("{} probe warning: {msg}", kind.title()),
            );
        }
        if let Some(msg) = &rec.failure {
            out.event(
                EventType::Warning,
                EventReason::Unhealthy,
                pod,
                &name,
                format!("{} probe failed: {msg}", kind.title()),
            );
        }
        match (kind, rec.published) {
            (ProbeKind::Startup, Some(ProbeResultState::Success)) => {
                self.started = true;
                if let Some(p) = self.probes.iter_mut().find(|p| p.kind == kind) {
                    p.hold();
                }
                self.activate_probes(&[ProbeKind::Liveness, ProbeKind::Readiness], out);
            }
            (ProbeKind::Startup | ProbeKind::Liveness, Some(ProbeResultState::Failure)) => {
                let last = self
                    .probes
                    .iter()
                    .find(|p| p.kind == kind)
                    .map(|p| p.last_failure.clone())
                    .unwrap_or_default();
                let message = format!("{} probe failed: {last}", kind.title());
                self.begin_stop(StopCause::Probe { kind, message }, pod, out);
            }
            _ => {}
        }
    }
}
