//! Hooks on events (`[[supervisor.on_event]]`, docs/interface.md §4): the validated shape of a
//! hook, and [`EventReason`], every reason the core records an event with.
//!
//! Owns the event reasons as a type: the core records events only through it, so a hook's
//! `reasons = [...]` filter is checked against exactly what can happen. Pure data: the hooks are
//! run by the runtime (`runtime::shell::event_hooks`), which must never let an event of its own
//! machinery ([`EventReason::is_hook_machinery`]) feed a hook.

use std::path::PathBuf;
use std::time::Duration;

use super::spec::TlsSpec;

/// Defines [`EventReason`] from one list: the variant, its name on the wire, and its type.
macro_rules! reasons {
    ($( $(#[$doc:meta])* $v:ident => $warning:literal ),* $(,)?) => {
        /// Why an event was recorded: the `reason` of docs/behaviour.md §5.4.
        #[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventReason {
            $( $(#[$doc])* $v, )*
        }

        impl EventReason {
            /// Every reason, in the order of docs/behaviour.md §5.4.
            pub const ALL: &'static [EventReason] = &[$( EventReason::$v, )*];

            /// The name events carry (`BackOff`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( EventReason::$v => stringify!($v), )*
                }
            }

            /// Whether events of this reason can be Warnings (else always Normal); some are
            /// either (`Exited`, `Killing`).
            pub fn can_warn(self) -> bool {
                match self {
                    $( EventReason::$v => $warning, )*
                }
            }
        }
    };
}

reasons! {
    Started => false,
    Adopted => false,
    /// An adopted run whose output pipes were lost in a crash of vigil (behaviour.md §11.5).
    OutputLost => true,
    /// Normal for a stop asked for, Warning for a SIGKILL.
    Killing => true,
    /// Normal for `Completed` and `Stopped`, Warning otherwise.
    Exited => true,
    Unhealthy => true,
    ProbeWarning => true,
    BackOff => true,
    OOMKilling => true,
    Failed => true,
    FailedCreatePodContainer => true,
    DependencyFailed => true,
    FailedPostStartHook => true,
    FailedPreStopHook => true,
    RestartLimitExceeded => true,
    DeadlineExceeded => true,
    /// A schedule's run began (Normal).
    Triggered => false,
    JobAlreadyActive => false,
    MissSchedule => true,
    TooManyMissedTimes => true,
    /// A pod's `shutdown_on` ended vigil.
    ShutdownOn => true,
    /// A pod restarts or stops because it follows a dependency (behaviour.md §8.2).
    DependencyChanged => false,
    /// A rollout of a pod with replicas began, replaced a batch, or completed (Normal;
    /// behaviour.md §14.2).
    RollingUpdate => false,
    /// A rollout made no progress within `progress_deadline_seconds` and stopped.
    ProgressDeadlineExceeded => true,
    /// A rollout stopped because a replica failed on its new run.
    ReplicaFailed => true,
    /// An `on_event` hook failed to deliver an event (its own machinery: never fed to hooks).
    EventHookFailed => true,
    /// A `notify = true` container said `READY=1`, or a `ready_log_line` container printed
    /// its line (behaviour.md §4.4, §4.5).
    Ready => false,
    /// A `notify = true` container said `STOPPING=1` (behaviour.md §4.4).
    Stopping => false,
    /// A reload refused a file of `pod_dir` (its pods as they were; behaviour.md §7).
    PodFileRefused => true,
    /// A `notify = true` container's watchdog ran out (`watchdog_seconds`, behaviour.md §4.4).
    WatchdogTimeout => true,
    /// A `notify = true` container sent no `READY=1` within its `start_timeout_seconds`
    /// (behaviour.md §4.4).
    StartTimeout => true,
}

impl EventReason {
    /// The reason named `name`, exactly as events carry it.
    pub fn parse(name: &str) -> Option<EventReason> {
        Self::ALL.iter().copied().find(|r| r.as_str() == name)
    }

    /// Events the hooks themselves cause: a hook never sees them, whatever its filter.
    pub fn is_hook_machinery(self) -> bool {
        self == EventReason::EventHookFailed
    }
}

/// `type` of an event, as a hook's filter names it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Normal,
    Warning,
}

/// One `[[supervisor.on_event]]`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct OnEventSpec {
    /// For logs and metrics (`on_event[0]` when not written).
    pub name: String,
    /// Which events; empty lists match everything.
    pub reasons: Vec<EventReason>,
    /// Pods by name; the name of a pod with `replicas` means each of its replicas
    /// (`web`: `web-0`, `web-1` …), a replica's own name only that replica.
    pub pods: Vec<String>,
    pub kind: Option<EventKind>,
    pub action: OnEventAction,
    /// An exec hook runs this long, a webhook attempt takes this long, before it is given up.
    pub timeout: Duration,
    /// Deliveries of this hook at once.
    pub max_concurrent: u32,
    /// Events waiting for a free delivery (retries included); past it an event is dropped.
    pub queue_size: u32,
    /// A webhook's further attempts after a failed one (exec hooks are not retried).
    pub retries: u32,
}

/// What a hook does with an event.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub enum OnEventAction {
    /// Runs `command` as `user` (and `group`), the event as JSON on stdin and in
    /// `VIGIL_EVENT_*` variables.
    Exec {
        command: Vec<String>,
        user: Option<String>,
        group: Option<String>,
    },
    /// POSTs the event as JSON.
    Webhook(Webhook),
}

/// `webhook = { url, headers, tls }`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Webhook {
    /// As written, for messages.
    pub url: String,
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// Path and query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub tls: TlsSpec,
}

/// Defaults of a hook's keys.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_MAX_CONCURRENT: u32 = 1;
pub const DEFAULT_QUEUE_SIZE: u32 = 100;
pub const DEFAULT_RETRIES: u32 = 3;
/// Upper bounds of `max_concurrent`, `queue_size` and `retries`.
pub const MAX_CONCURRENT: u32 = 64;
pub const MAX_QUEUE_SIZE: u32 = 10_000;
pub const MAX_RETRIES: u32 = 10;

impl OnEventSpec {
    /// Whether an event of `reason` (as recorded), `kind` and object (`pod/container` or `pod`)
    /// goes to this hook. Events of the hook machinery never do. `replica_of(pod, set)` says
    /// whether the pod `pod` is a replica of the pod with replicas `set`; it is asked only of
    /// a filter's name `set` that `pod` looks like a replica of (`web-2` and `web`), so a
    /// hook without `pods` costs nothing more.
    pub fn matches(
        &self,
        reason: &str,
        kind: EventKind,
        object: &str,
        replica_of: impl Fn(&str, &str) -> bool,
    ) -> bool {
        let Some(reason) = EventReason::parse(reason) else {
            return false;
        };
        if reason.is_hook_machinery() {
            return false;
        }
        if !self.reasons.is_empty() && !self.reasons.contains(&reason) {
            return false;
        }
        if self.kind.is_some_and(|k| k != kind) {
            return false;
        }
        let pod = object.split('/').next().unwrap_or(object);
        self.pods.is_empty()
            || self
                .pods
                .iter()
                .any(|p| p == pod || (super::replicas::collides(p, pod) && replica_of(pod, p)))
    }

    /// The program an exec hook runs as root (no `user`, or root named): trust-checked like
    /// the config file when vigil is root.
    pub fn program_run_as_root(&self) -> Option<PathBuf> {
        match &self.action {
            OnEventAction::Exec { command, user, .. }
                if user.as_deref().is_none_or(|u| u == "root" || u == "0") =>
            {
                command.first().map(PathBuf::from)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(reasons: Vec<EventReason>, pods: &[&str], kind: Option<EventKind>) -> OnEventSpec {
        OnEventSpec {
            name: "h".into(),
            reasons,
            pods: pods.iter().map(|p| p.to_string()).collect(),
            kind,
            action: OnEventAction::Exec {
                command: vec!["/bin/true".into()],
                user: None,
                group: None,
            },
            timeout: DEFAULT_TIMEOUT,
            max_concurrent: 1,
            queue_size: 1,
            retries: 0,
        }
    }

    #[test]
    fn every_reason_reads_back_from_its_name() {
        for r in EventReason::ALL {
            assert_eq!(EventReason::parse(r.as_str()), Some(*r));
        }
        assert_eq!(EventReason::parse("OOMKilled"), None);
    }

    #[test]
    fn a_filter_matches_reason_type_and_pod_and_an_empty_one_everything() {
        let h = hook(
            vec![EventReason::BackOff],
            &["web"],
            Some(EventKind::Warning),
        );
        assert!(h.matches("BackOff", EventKind::Warning, "web/app", plain));
        assert!(!h.matches("BackOff", EventKind::Warning, "db/pg", plain));
        assert!(!h.matches("Started", EventKind::Warning, "web/app", plain));
        assert!(!h.matches("BackOff", EventKind::Normal, "web/app", plain));
        let all = hook(vec![], &[], None);
        assert!(all.matches("Started", EventKind::Normal, "web/app", plain));
        assert!(all.matches("ShutdownOn", EventKind::Warning, "web", plain));
    }

    /// No pod is a replica.
    fn plain(_: &str, _: &str) -> bool {
        false
    }

    /// The pods with replicas are `web` and `api-v2`.
    fn sets(pod: &str, set: &str) -> bool {
        ["web", "api-v2"].contains(&set) && crate::config::replicas::collides(set, pod)
    }

    #[test]
    fn a_set_name_in_pods_matches_every_replica_and_a_replica_name_only_that_replica() {
        let by_set = hook(vec![], &["web", "api-v2"], None);
        for object in ["web-0/app", "web-1/app", "web-17", "api-v2-0/api"] {
            assert!(
                by_set.matches("BackOff", EventKind::Warning, object, sets),
                "{object}"
            );
        }
        for object in [
            "web-x/app",
            "web-/app",
            "webby-0/app",
            "api-0/api",
            "db-0/pg",
        ] {
            assert!(
                !by_set.matches("BackOff", EventKind::Warning, object, sets),
                "{object}"
            );
        }
        let one = hook(vec![], &["web-1"], None);
        assert!(one.matches("BackOff", EventKind::Warning, "web-1/app", sets));
        assert!(!one.matches("BackOff", EventKind::Warning, "web-0/app", sets));
        assert!(!one.matches("BackOff", EventKind::Warning, "web-10/app", sets));
    }

    #[test]
    fn a_plain_pod_name_does_not_match_other_pods_that_look_like_its_replicas() {
        // `web` has no replicas here; `web-2` is a pod of its own.
        let h = hook(vec![], &["web"], None);
        assert!(!h.matches("BackOff", EventKind::Warning, "web-2/app", plain));
        assert!(h.matches("BackOff", EventKind::Warning, "web/app", plain));
    }

    #[test]
    fn the_hooks_own_failures_never_match_any_hook() {
        let all = hook(vec![], &[], None);
        assert!(!all.matches("EventHookFailed", EventKind::Warning, "supervisor", plain));
        let named = hook(vec![EventReason::EventHookFailed], &[], None);
        assert!(!named.matches("EventHookFailed", EventKind::Warning, "supervisor", plain));
    }
}
