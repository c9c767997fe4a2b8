//! What a run says of itself: over sd_notify (`notify = true`; sd_notify(3), systemd.service(5)
//! `Type=notify`) `READY=1` makes it ready (with its readiness probe, if it has one),
//! `STATUS=` is shown, `STOPPING=1` is recorded, and with `watchdog_seconds` a run whose
//! `WATCHDOG=1` keep-alives stop is killed (`WatchdogTimeout`; systemd.service(5)
//! `WatchdogSec=`) (docs/behaviour.md §4.4); with `ready_log_line`, a matching line of its
//! output makes it ready the same way (§4.5).
//!
//! Owns the slot's notification state, its watchdog deadline, and their effect on readiness
//! and on the run. Must not parse datagrams or judge who sent them (the runtime does, and
//! feeds only a run's own messages).

use super::*;

impl Slot {
    /// Whether the run's own word allows it to be ready: always without `notify` or
    /// `ready_log_line`; with one, once `READY=1` (or a matching line) came in this run
    /// (systemd.service(5): a `Type=notify` service's start-up is complete when it sends
    /// `READY=1`), and not after `STOPPING=1` (it is going down).
    pub(super) fn notified_ready(&self) -> bool {
        !self.spec.says_ready() || (self.notify.ready && !self.notify.stopping)
    }

    /// Whether run `generation` is the current one and has a `ready_log_line` that has not
    /// matched yet.
    pub(in crate::core) fn awaits_ready_line(&self, generation: Generation) -> bool {
        self.spec.ready_log_line.is_some() && self.generation == generation && !self.notify.ready
    }

    /// A notification of this run's (already matched to its generation). Returns whether the
    /// slot's readiness may have changed.
    pub(in crate::core) fn on_notified(
        &mut self,
        n: Notification,
        pod: &str,
        out: &mut Out,
    ) -> bool {
        let heard = match n.via {
            ReadyWord::SdNotify => self.spec.notify,
            ReadyWord::LogLine => self.spec.ready_log_line.is_some(),
        };
        if !heard || !matches!(self.state, SlotState::Running { .. }) {
            return false;
        }
        let name = self.spec.name.clone();
        let mut changed = false;
        if let Some(status) = n.status {
            self.notify.status = Some(status);
        }
        if n.stopping && !self.notify.stopping {
            changed = true;
            self.notify.stopping = true;
            out.event(
                EventType::Normal,
                EventReason::Stopping,
                pod,
                &name,
                format!("Container {name} said it is stopping (STOPPING=1)"),
            );
        }
        // systemd arms the watchdog when the start-up is complete (`READY=1`,
        // service_enter_start_post → service_reset_watchdog), and every `WATCHDOG=1` moves it
        // on (service_notify_message).
        if let Some(period) = self.spec.watchdog
            && (n.watchdog || (n.ready && !self.notify.ready))
        {
            self.watchdog_at = Some(later(out.now, period));
        }
        // systemd honours `WATCHDOG=trigger` even without `WatchdogSec=`; vigil only when
        // `watchdog_seconds` turned the watchdog on.
        if n.watchdog_trigger && self.spec.watchdog.is_some() {
            self.watchdog_ran_out(Some("it sent WATCHDOG=trigger"), pod, out);
            return true;
        }
        // EXTEND_TIMEOUT_USEC= (sd_notify(3)): while the start-up runs, its budget runs to N
        // from now, unless it already runs later (systemd never shortens it).
        if let (Some(extend), Some(at)) = (n.extend_timeout, self.start_deadline)
            && !self.notify.ready
        {
            self.start_deadline = Some(at.max(later(out.now, extend)));
        }
        if n.ready && !self.notify.ready {
            self.notify.ready = true;
            self.start_deadline = None;
            out.event(
                EventType::Normal,
                EventReason::Ready,
                pod,
                &name,
                match n.via {
                    ReadyWord::SdNotify => format!("Container {name} said it is ready (READY=1)"),
                    ReadyWord::LogLine => {
                        format!("Container {name} printed a line matching its ready_log_line")
                    }
                },
            );
            changed = true;
        }
        changed
    }

    /// The run sent no `READY=1` within its start budget (`start_timeout_seconds`, moved on by
    /// `EXTEND_TIMEOUT_USEC=`; systemd's `TimeoutStartSec=`): a Warning `StartTimeout` event,
    /// and the run is stopped as a failed start (its grace period, then the restart policy).
    pub(super) fn start_timed_out(&mut self, pod: &str, out: &mut Out) {
        self.start_deadline = None;
        let name = self.spec.name.clone();
        let message = match self.spec.start_timeout {
            Some(t) => format!(
                "no READY=1 within {} (start_timeout_seconds, and any EXTEND_TIMEOUT_USEC=)",
                go_duration(t)
            ),
            None => "no READY=1 in time".to_string(),
        };
        out.event(
            EventType::Warning,
            EventReason::StartTimeout,
            pod,
            &name,
            format!("Container {name} {message}"),
        );
        self.begin_stop(StopCause::StartTimeout { message }, pod, out);
    }

    /// The run's watchdog ran out (`why`: the run asked for it): a Warning `WatchdogTimeout`
    /// event, and the run is stopped as a failed liveness probe stops it (its grace period,
    /// then the restart policy).
    pub(super) fn watchdog_ran_out(&mut self, why: Option<&str>, pod: &str, out: &mut Out) {
        self.watchdog_at = None;
        let name = self.spec.name.clone();
        let message = match (why, self.spec.watchdog) {
            (Some(why), _) => format!("watchdog: {why}"),
            (None, Some(p)) => format!(
                "watchdog: no WATCHDOG=1 within {} (watchdog_seconds)",
                go_duration(p)
            ),
            (None, None) => "watchdog".to_string(),
        };
        out.event(
            EventType::Warning,
            EventReason::WatchdogTimeout,
            pod,
            &name,
            format!("Container {name} {message}"),
        );
        self.begin_stop(StopCause::Watchdog { message }, pod, out);
    }
}
