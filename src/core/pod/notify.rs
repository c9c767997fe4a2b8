//! What a run says over sd_notify (`notify = true`; sd_notify(3), systemd.service(5)
//! `Type=notify`): `READY=1` makes it ready (with its readiness probe, if it has one),
//! `STATUS=` is shown, `STOPPING=1` is recorded. docs/behaviour.md §4.4.
//!
//! Owns the slot's notification state and its effect on readiness. Must not parse datagrams
//! or judge who sent them (the runtime does, and feeds only a run's own messages).

use super::*;

impl Slot {
    /// Whether the run's own word allows it to be ready: always without `notify`; with it,
    /// once `READY=1` came in this run (systemd.service(5): a `Type=notify` service's start-up
    /// is complete when it sends `READY=1`), and not after `STOPPING=1` (it is going down).
    pub(super) fn notified_ready(&self) -> bool {
        !self.spec.notify || (self.notify.ready && !self.notify.stopping)
    }

    /// A notification of this run's (already matched to its generation). Returns whether the
    /// slot's readiness may have changed.
    pub(in crate::core) fn on_notified(
        &mut self,
        n: Notification,
        pod: &str,
        out: &mut Out,
    ) -> bool {
        if !self.spec.notify || !matches!(self.state, SlotState::Running { .. }) {
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
        if n.ready && !self.notify.ready {
            self.notify.ready = true;
            out.event(
                EventType::Normal,
                EventReason::Ready,
                pod,
                &name,
                format!("Container {name} said it is ready (READY=1)"),
            );
            changed = true;
        }
        changed
    }
}
