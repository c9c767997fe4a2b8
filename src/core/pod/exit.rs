//! The end of a run and its termination reason (docs/behaviour.md §3; kubelet
//! `kuberuntime_container.go` getTerminationMessage, `kuberuntime_container_termination.go`):
//! exit code, signal, OOM kills, `success_exit_codes`, the termination message, a spawn that
//! failed.
//!
//! Owns what a run's end is called and the events that say so. Must not decide whether the
//! container runs again (`restart.rs`).

use super::*;
use crate::config::on_event::EventReason;

pub(super) fn exit_desc(code: i32, signal: Option<i32>) -> String {
    match signal {
        Some(s) => format!("signal {s}"),
        None => format!("exit code {code}"),
    }
}

pub(super) fn stopped(message: &str, now: Time) -> Terminated {
    Terminated {
        exit_code: 0,
        signal: None,
        reason: TerminationReason::Stopped,
        message: message.to_string(),
        started_at: None,
        finished_at: now,
    }
}

/// A slot not running (backing off, not started) when its pod's `active_deadline_seconds`
/// ran out: it ends `DeadlineExceeded` without a run.
pub(super) fn deadline_exceeded(message: &str, now: Time) -> Terminated {
    Terminated {
        reason: TerminationReason::DeadlineExceeded,
        ..stopped(message, now)
    }
}

/// What a main process that exited 0 left in its cgroup, and the likely cause: a service that
/// daemonized (forked into the background and let its first process exit), which a
/// supervisor must run in the foreground instead. `None` when it left nothing.
pub(super) fn left_behind(n: u32) -> Option<String> {
    (n > 0).then(|| {
        format!(
            "left {n} process{} in its cgroup (did it daemonize? run it in the foreground: \
             daemon off;, --daemonize no)",
            if n == 1 { "" } else { "es" }
        )
    })
}

/// A termination message as one line of an event: trailing line breaks dropped, inner ones
/// written `\n` (a message file usually ends in a newline; vigil's log is one line per event).
pub(super) fn one_line(message: &str) -> String {
    message
        .trim_end_matches(['\n', '\r'])
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

/// Why the main process ended (docs/behaviour.md §3), given what vigil was doing to it.
pub(super) fn termination(
    exit: &ExitInfo,
    cause: Option<&StopCause>,
    success_codes: &[i32],
    started_at: Option<Time>,
    now: Time,
) -> Terminated {
    let exit_code = match (exit.code, exit.signal) {
        _ if exit.status_unknown => EXIT_CODE_UNKNOWN,
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => -1,
    };
    let oom = exit.oom_group_kill_delta > 0 || (exit.signal == Some(9) && exit.oom_kill_delta > 0);
    let (reason, message) = match cause {
        Some(StopCause::Probe { kind, message }) => (
            match kind {
                ProbeKind::Startup => TerminationReason::StartupProbeFailed,
                _ => TerminationReason::LivenessProbeFailed,
            },
            message.clone(),
        ),
        Some(StopCause::Request { message, .. }) => (TerminationReason::Stopped, message.clone()),
        Some(StopCause::Shutdown) => (TerminationReason::Stopped, MSG_SHUTDOWN.to_string()),
        Some(StopCause::PostStartHook { message }) => {
            (TerminationReason::FailedPostStartHook, message.clone())
        }
        Some(StopCause::Deadline { message }) => {
            (TerminationReason::DeadlineExceeded, message.clone())
        }
        Some(StopCause::Watchdog { message }) => {
            (TerminationReason::WatchdogTimeout, message.clone())
        }
        Some(StopCause::StartTimeout { message }) => {
            (TerminationReason::StartTimeout, message.clone())
        }
        None if exit.status_unknown => (
            TerminationReason::ContainerStatusUnknown,
            MSG_STATUS_UNKNOWN.to_string(),
        ),
        None if oom => {
            let message = match (exit.memory_max, exit.memory_peak) {
                (Some(max), Some(peak)) => format!(
                    "memory.max={} reached (peak {})",
                    quantity(max),
                    quantity(peak)
                ),
                (Some(max), None) => format!("memory.max={} reached", quantity(max)),
                _ if exit.oom_group_kill_delta > 0 => {
                    "the container was OOM-killed as a group".to_string()
                }
                _ => "the main process was OOM-killed".to_string(),
            };
            (TerminationReason::OomKilled, message)
        }
        None if exit.code == Some(0) => (
            TerminationReason::Completed,
            left_behind(exit.left_behind).unwrap_or_default(),
        ),
        // `success_exit_codes` (systemd's SuccessExitStatus=): a success the program spells
        // otherwise.
        None if exit.code.is_some_and(|c| success_codes.contains(&c)) => (
            TerminationReason::Completed,
            format!("exited with code {exit_code}, a success (success_exit_codes)"),
        ),
        None => (
            TerminationReason::Error,
            match exit.signal {
                Some(s) => format!("killed by signal {s}"),
                None => format!("exited with code {exit_code}"),
            },
        ),
    };
    let message = match &exit.termination_message {
        Some(m) if !m.is_empty() => m.clone(),
        _ if exit.status_unknown && cause.is_some() => {
            format!("{message}; its exit status is unknown (adopted from an earlier vigil)")
        }
        _ => message,
    };
    Terminated {
        exit_code,
        signal: exit.signal,
        reason,
        message,
        started_at,
        finished_at: now,
    }
}

impl Slot {
    pub(in crate::core) fn on_spawn_failed(&mut self, message: String, pod: &str, out: &mut Out) {
        let SlotState::Creating { pending, .. } = &mut self.state else {
            return;
        };
        let cause = pending.take();
        let name = self.spec.name.clone();
        out.event(
            EventType::Warning,
            EventReason::Failed,
            pod,
            &name,
            format!("Error: failed to start container {name}: {message}"),
        );
        let term = Terminated {
            exit_code: 128,
            signal: None,
            reason: TerminationReason::StartError,
            message,
            started_at: None,
            finished_at: out.now,
        };
        self.conclude(term, cause, pod, out);
    }

    pub(in crate::core) fn on_exited(&mut self, exit: &ExitInfo, pod: &str, out: &mut Out) {
        let (started_at, cause) = match &mut self.state {
            SlotState::Running {
                started_at,
                stopping,
                ..
            } => (
                Some(*started_at),
                stopping.take().map(|s| s.cause_after_exit()),
            ),
            SlotState::Creating { pending, .. } => (None, pending.take()),
            _ => return,
        };
        let term = termination(
            exit,
            cause.as_ref(),
            &self.spec.success_exit_codes,
            started_at,
            out.now,
        );
        // The reap-time counter covers the whole run; count only what `OomKills` did not.
        let mut extra = exit.oom_kill_delta.saturating_sub(self.run_oom_seen);
        if term.reason == TerminationReason::OomKilled && self.run_oom_seen + extra == 0 {
            extra = 1;
        }
        self.oom_kills += extra;
        self.run_oom_seen += extra;
        let left = (term.reason == TerminationReason::Completed)
            .then(|| left_behind(exit.left_behind))
            .flatten();
        self.conclude_with(term, cause, left, pod, out);
    }

    pub(in crate::core) fn on_oom_kills(
        &mut self,
        delta: u64,
        memory_max: Option<u64>,
        pod: &str,
        out: &mut Out,
    ) {
        if !matches!(self.state, SlotState::Running { .. }) || delta == 0 {
            return;
        }
        self.oom_kills += delta;
        self.run_oom_seen += delta;
        let procs = if delta == 1 { "process" } else { "processes" };
        let limit = memory_max
            .map(|m| format!(", memory.max={}", quantity(m)))
            .unwrap_or_default();
        let name = self.spec.name.clone();
        out.event(
            EventType::Warning,
            EventReason::OOMKilling,
            pod,
            &name,
            format!("{delta} {procs} OOM-killed in container={name} pod={pod}{limit}"),
        );
    }
}
