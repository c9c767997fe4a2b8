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
                "Started" => status_detail(core, &e.object, Detail::Pid),
                "BackOff" => status_detail(core, &e.object, Detail::Wait),
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

    /// `shutdown: waiting for worker/loop: SIGKILL in 5s` (or `… for 2 containers: web/app
    /// (SIGKILL in 30s), db/pg`) each time the set of running containers, or which of them have
    /// been signalled or killed, changes; then `shutdown: every container has stopped`. A
    /// container not signalled yet (it waits for the pods that depend on it) has no note.
    fn shutdown_progress(&mut self, core: &Supervisor, now: Instant) {
        let mut running: Vec<String> = Vec::new();
        let mut notes: Vec<Option<String>> = Vec::new();
        for p in core.pods().iter() {
            for c in p.init_containers.iter().chain(p.containers.iter()) {
                if c.pid.is_none() {
                    continue;
                }
                let note = match &c.state {
                    ContainerState::Running {
                        terminating: Some(t),
                        ..
                    } => Some(match t.since.checked_add(t.grace) {
                        _ if t.killed => "SIGKILL sent".to_string(),
                        Some(at) => {
                            format!("SIGKILL in {}", seconds(at.saturating_duration_since(now)))
                        }
                        None => "stopping".to_string(),
                    }),
                    _ => None,
                };
                running.push(format!(
                    "{}/{}{}",
                    p.name,
                    c.name,
                    match &note {
                        Some(_) => " (stopping)",
                        None => "",
                    }
                ));
                notes.push(note.map(|n| format!("{}/{}: {n}", p.name, c.name)));
            }
        }
        // Only a change of who is running or being stopped is news, not the passing seconds.
        if self.shutdown_waiting.as_ref() == Some(&running) {
            return;
        }
        if running.is_empty() {
            info!("shutdown: every container has stopped");
        } else {
            let names: Vec<String> = running
                .iter()
                .map(|r| r.trim_end_matches(" (stopping)").to_string())
                .collect();
            let shown: Vec<String> = names
                .iter()
                .zip(&notes)
                .map(|(name, note)| match note {
                    Some(n) => n.clone(),
                    None => name.clone(),
                })
                .collect();
            if shown.len() == 1 {
                info!("shutdown: waiting for {}", shown[0]);
            } else {
                info!(
                    "shutdown: waiting for {} containers: {}",
                    shown.len(),
                    shown.join(", ")
                );
            }
        }
        self.shutdown_waiting = Some(running);
    }
}

/// Whole seconds, rounded up (`5s`; `0s` once the deadline has passed).
fn seconds(d: std::time::Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    format!("{s}s")
}

enum Detail {
    Pid,
    Wait,
}

/// `pid N` of a container that just started, or `waiting 20s` of one in back-off.
fn status_detail(core: &Supervisor, object: &str, what: Detail) -> Option<String> {
    let (pod, container) = object.split_once('/')?;
    let status = core.pod(pod)?;
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
