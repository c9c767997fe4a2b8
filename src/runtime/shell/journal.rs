//! vigil's own log as a journal of the lifecycle (docs/behaviour.md §5.5): every event the core
//! records becomes one line, `pod/container: Reason: message`, as soon as the turn that
//! recorded it ends — starts (with the pid), exits (reason and exit code or signal), kills
//! (why), back-off waits, probe failures. Normal events are logged at info, Warning events at
//! warn. When vigil forwards to the systemd journal (`log_forward_to`), each event goes there
//! instead as one structured entry (`logs::journal`: `VIGIL_POD=`, `VIGIL_CONTAINER=`,
//! `VIGIL_REASON=`, `PRIORITY=` 3 for Warning); the stderr line would only repeat it, since
//! vigil's stderr is the journal there too. The lines the shell writes itself (socket requests with the peer's uid, reload
//! outcome, shutdown progress) are in `mod.rs`, with the same `pod/container` first.
//!
//! Owns only the sequence number of the last event it logged. Must not change state or block:
//! it reads the core's event list and, for two reasons, one pod's status.

use std::time::Instant;

use log::{info, warn};

use crate::core::{ContainerState, EventType, Supervisor};
use crate::logs::JournalSink;

#[derive(Debug, Default)]
pub(super) struct Journal {
    last_seq: u64,
    /// During a shutdown: the containers still running when last logged.
    shutdown_waiting: Option<Vec<String>>,
}

impl Journal {
    /// The last event logged (carried across `vigil upgrade`).
    pub(super) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Continue after `seq` (the previous instance logged up to it).
    pub(super) fn resume_after(seq: u64) -> Journal {
        Journal {
            last_seq: seq,
            shutdown_waiting: None,
        }
    }

    /// Logs every event recorded since the last call (to `sink`, the journal, when given).
    pub(super) fn drain(
        &mut self,
        core: &Supervisor,
        now: Instant,
        mut sink: Option<&mut JournalSink>,
    ) {
        if core.last_event_seq() == self.last_seq {
            return;
        }
        for e in core.events_since(self.last_seq) {
            self.last_seq = e.seq;
            let extra = match e.reason.as_str() {
                "Started" => status_detail(core, &e.object, now, Detail::Pid),
                "BackOff" => status_detail(core, &e.object, now, Detail::Wait),
                _ => None,
            };
            let extra = extra.map(|x| format!(" ({x})")).unwrap_or_default();
            if let Some(sink) = sink.as_deref_mut() {
                let line = format!("{}: {}: {}{extra}", e.object, e.reason, e.message);
                sink.event(
                    &e.object,
                    e.reason.as_str(),
                    e.kind == EventType::Warning,
                    &line,
                );
                continue;
            }
            match e.kind {
                EventType::Normal => info!("{}: {}: {}{extra}", e.object, e.reason, e.message),
                EventType::Warning => warn!("{}: {}: {}{extra}", e.object, e.reason, e.message),
            }
        }
        if core.is_shutting_down() {
            self.shutdown_progress(core, now);
        }
    }

    /// `shutdown: waiting for 2 containers: web/app, db/pg` each time that set changes, then
    /// `shutdown: every container has stopped`.
    fn shutdown_progress(&mut self, core: &Supervisor, now: Instant) {
        let running: Vec<String> = core
            .pods(now)
            .iter()
            .flat_map(|p| {
                p.init_containers
                    .iter()
                    .chain(p.containers.iter())
                    .filter(|c| c.pid.is_some())
                    .map(move |c| format!("{}/{}", p.name, c.name))
            })
            .collect();
        if self.shutdown_waiting.as_ref() == Some(&running) {
            return;
        }
        if running.is_empty() {
            info!("shutdown: every container has stopped");
        } else {
            info!(
                "shutdown: waiting for {} container{}: {}",
                running.len(),
                if running.len() == 1 { "" } else { "s" },
                running.join(", ")
            );
        }
        self.shutdown_waiting = Some(running);
    }
}

enum Detail {
    Pid,
    Wait,
}

/// `pid N` of a container that just started, or `waiting 20s` of one in back-off.
fn status_detail(core: &Supervisor, object: &str, now: Instant, what: Detail) -> Option<String> {
    let (pod, container) = object.split_once('/')?;
    let status = core.pod(pod, now)?;
    let c = status
        .init_containers
        .iter()
        .chain(status.containers.iter())
        .find(|c| c.name == container)?;
    match what {
        Detail::Pid => c.pid.map(|p| format!("pid {p}")),
        Detail::Wait => match &c.state {
            ContainerState::Waiting { message, .. } => message
                .strip_prefix("back-off ")
                .and_then(|m| m.split_once(' '))
                .map(|(d, _)| format!("waiting {d}")),
            _ => None,
        },
    }
}
