//! Snapshot → wire: the core's pod and event snapshots as the reply types of [`super::wire`].
//!
//! Owns what of a snapshot goes out and how monotonic times become wall-clock times. Pure
//! functions: the wall-clock anchor is an argument. It must not query the core or the socket,
//! and it must not format text for people: the client does that from the same wire types
//! (`super::text`), so what `-o json` shows is exactly what the tables are built from.
//!
//! Secrets: environment values go out only to admins ([`Secrets::Shown`]); everyone else gets
//! the names with [`wire::REDACTED`] as the value (docs/bad-input.md, "Control socket").

use std::collections::HashMap;
use std::path::PathBuf;

use super::time::WallClock;
use super::wire::{self, Timestamp};
use crate::cgroup;
use crate::config::spec::{ContainerSpec, ProbeAction, ProbeSpec, Resources};
use crate::core::{
    Condition, ContainerKey, ContainerState, ContainerStatus, Event, PodStatus, ProbeStatus,
    Terminated,
};

/// Whether the peer may see environment values (it is an admin: root, vigil's own uid,
/// `admin_uids`/`admin_gids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secrets {
    Shown,
    Redacted,
}

/// What the runtime knows of a container's current run and the core does not: its cgroup and
/// the figures read from it. Kept beside the core's snapshot, not in it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFacts {
    pub cgroup: PathBuf,
    pub figures: cgroup::Figures,
}

/// [`RunFacts`] of the containers that have them (running, with a cgroup).
pub type Observed = HashMap<ContainerKey, RunFacts>;

fn at(clock: &WallClock, t: crate::core::Time) -> Timestamp {
    Timestamp(clock.to_system(t))
}

/// `status`: every pod given, in order.
pub fn status(
    pods: &[PodStatus],
    observed: &Observed,
    clock: &WallClock,
    secrets: Secrets,
) -> wire::StatusReply {
    wire::StatusReply {
        pods: pods
            .iter()
            .map(|p| pod(p, observed, clock, secrets))
            .collect(),
    }
}

/// One pod.
pub fn pod(pod: &PodStatus, observed: &Observed, clock: &WallClock, secrets: Secrets) -> wire::Pod {
    let containers = |cs: &[ContainerStatus]| -> Vec<wire::Container> {
        cs.iter()
            .map(|c| container(c, observed.get(&c.key), clock, secrets))
            .collect()
    };
    wire::Pod {
        name: pod.name.clone(),
        phase: pod.phase,
        restart_policy: pod.restart_policy,
        created_at: at(clock, pod.created_at),
        conditions: pod.conditions.iter().map(|c| condition(c, clock)).collect(),
        init_containers: containers(&pod.init_containers),
        containers: containers(&pod.containers),
        schedule: pod.schedule.as_ref().map(|s| wire::Schedule {
            cron: s.cron.clone(),
            time_zone: s.time_zone.clone(),
            concurrency: s.concurrency.as_str().to_string(),
            suspended: s.suspended,
            last_schedule: s.last_schedule.map(Timestamp),
            next_run: s.next_run.map(Timestamp),
            active: s.active,
        }),
        runs: (pod.runs.iter())
            .map(|r| wire::Run {
                started_at: at(clock, r.started_at),
                finished_at: at(clock, r.finished_at),
                scheduled_for: r.scheduled_for.map(|t| Timestamp(t.into())),
                phase: if r.succeeded() {
                    crate::core::Phase::Succeeded
                } else {
                    crate::core::Phase::Failed
                },
                failure: r.failure.as_ref().map(|f| wire::RunFailure {
                    container: f.container.clone(),
                    reason: f.reason,
                    exit_code: f.exit_code,
                }),
            })
            .collect(),
        rollout: pod.rollout.as_ref().map(rollout),
    }
}

/// A replica's rollout.
fn rollout(r: &crate::core::RolloutStatus) -> wire::Rollout {
    use crate::core::RolloutState;
    let (state, reason, message) = match &r.state {
        RolloutState::Progressing => ("Progressing", None, None),
        RolloutState::Complete => ("Complete", None, None),
        RolloutState::Halted { reason, message } => (
            "Halted",
            Some(reason.as_str().to_string()),
            Some(message.clone()),
        ),
    };
    wire::Rollout {
        pod: r.pod.clone(),
        kind: r.kind.as_str().to_string(),
        state: state.to_string(),
        reason,
        message,
        replaced: r.replaced,
        total: r.total,
        waiting_for: r.waiting_for.clone(),
    }
}

fn condition(c: &Condition, clock: &WallClock) -> wire::Condition {
    wire::Condition {
        kind: c.kind,
        status: c.status,
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_transition_time: at(clock, c.last_transition),
    }
}

fn terminated(t: &Terminated, clock: &WallClock) -> wire::Terminated {
    wire::Terminated {
        exit_code: t.exit_code,
        signal: t.signal,
        reason: t.reason,
        message: t.message.clone(),
        started_at: t.started_at.map(|s| at(clock, s)),
        finished_at: at(clock, t.finished_at),
    }
}

/// One container: state, last state, cgroup figures, probe results and a spec summary.
pub fn container(
    c: &ContainerStatus,
    facts: Option<&RunFacts>,
    clock: &WallClock,
    secrets: Secrets,
) -> wire::Container {
    let state = match &c.state {
        ContainerState::Waiting { reason, message } => wire::State::Waiting(wire::Waiting {
            reason: *reason,
            message: message.clone(),
        }),
        ContainerState::Running {
            started_at,
            terminating,
        } => wire::State::Running(wire::Running {
            started_at: at(clock, *started_at),
            terminating: terminating.as_ref().map(|t| wire::Terminating {
                since: at(clock, t.since),
                grace_period_seconds: t.grace.as_secs_f64(),
                message: t.message.clone(),
                killed: t.killed,
            }),
        }),
        ContainerState::Terminated(t) => wire::State::Terminated(terminated(t, clock)),
    };
    let figures = facts.map(|f| f.figures).unwrap_or_default();
    wire::Container {
        name: c.name.clone(),
        ready: c.ready,
        started: c.started,
        restart_count: c.restart_count,
        pid: c.pid,
        state,
        last_state: wire::LastState {
            terminated: c.last_state.as_ref().map(|t| terminated(t, clock)),
        },
        cgroup: facts.map(|f| f.cgroup.display().to_string()),
        resources: wire::Figures {
            memory_current: figures.memory_current,
            memory_peak: figures.memory_peak,
            memory_max: figures.memory_max.or(c.spec.resources.memory_max),
            oom_kills: c.oom_kills,
            cpu_usage_usec: figures.cpu_usage_usec,
            pids_current: figures.pids_current,
            memory_pressure_some_avg10: figures.memory_pressure_some_avg10,
        },
        probes: c.probes.iter().map(|p| probe_status(p, clock)).collect(),
        spec: spec(&c.spec, secrets),
        output_lost: c.output_lost,
        notify: c.notify.as_ref().map(|n| wire::Notify {
            ready: n.ready,
            status: n.status.clone(),
            stopping: n.stopping,
        }),
    }
}

fn probe_status(p: &ProbeStatus, clock: &WallClock) -> wire::ProbeStatus {
    wire::ProbeStatus {
        kind: p.kind,
        result: p.result,
        phase_ms: p.phase.as_secs_f64() * 1000.0,
        recent: p
            .recent
            .iter()
            .map(|r| wire::ProbeAttempt {
                time: at(clock, r.at),
                late_ms: r.late.as_secs_f64() * 1000.0,
                duration_ms: r.duration.as_secs_f64() * 1000.0,
                success: r.success,
                message: r.message.clone(),
                run: r.run,
            })
            .collect(),
    }
}

/// What `describe` shows of the configuration (vigil has no images: the command is the thing).
fn spec(s: &ContainerSpec, secrets: Secrets) -> wire::Spec {
    wire::Spec {
        command: s.command.clone(),
        restart_policy: s.restart_policy,
        working_dir: s.working_dir.as_ref().map(|p| p.display().to_string()),
        user: s.user.clone(),
        group: s.group.clone(),
        env: s
            .env
            .iter()
            .map(|(k, v)| {
                let v = match secrets {
                    Secrets::Shown => v.clone(),
                    Secrets::Redacted => wire::REDACTED.to_string(),
                };
                (k.clone(), v)
            })
            .collect(),
        env_file: s.env_file.as_ref().map(|p| p.display().to_string()),
        stop_signal: s.stop_signal_name.clone(),
        termination_grace_period_seconds: s.termination_grace.as_secs_f64(),
        max_restarts: s.max_restarts,
        limits: limits(&s.resources),
        startup_probe: s.startup_probe.as_ref().map(probe_spec),
        liveness_probe: s.liveness_probe.as_ref().map(probe_spec),
        readiness_probe: s.readiness_probe.as_ref().map(probe_spec),
    }
}

fn limits(r: &Resources) -> wire::Limits {
    wire::Limits {
        memory_max: r.memory_max,
        memory_high: r.memory_high,
        swap_max: r.swap_max,
        pids_max: r.pids_max,
        cpu_max: r.cpu_max,
        cpu_weight: r.cpu_weight,
        oom_group: r.oom_group,
    }
}

/// kubectl's probe handler text: `http-get http://127.0.0.1:8080/healthz`,
/// `tcp-socket 127.0.0.1:8080`, `exec [cat /tmp/healthy]`.
pub fn probe_action_text(a: &ProbeAction) -> String {
    match a {
        ProbeAction::Exec { command } => format!("exec [{}]", command.join(" ")),
        ProbeAction::HttpGet {
            host,
            port,
            path,
            scheme,
            ..
        } => format!("http-get {}://{host}:{port}{path}", scheme.as_str()),
        ProbeAction::TcpSocket { host, port } => format!("tcp-socket {host}:{port}"),
        ProbeAction::Grpc {
            host,
            port,
            service,
        } => format!("grpc {host}:{port} {service}")
            .trim_end()
            .to_string(),
    }
}

fn probe_spec(p: &ProbeSpec) -> wire::ProbeSpec {
    wire::ProbeSpec {
        action: probe_action_text(&p.action),
        initial_delay_seconds: p.initial_delay.as_secs_f64(),
        timeout_seconds: p.timeout.as_secs_f64(),
        period_seconds: p.period.as_secs_f64(),
        success_threshold: p.success_threshold,
        failure_threshold: p.failure_threshold,
    }
}

/// One event, with `seq` so a follower can resume after the last one it saw.
pub fn event(e: &Event, clock: &WallClock) -> wire::Event {
    wire::Event {
        seq: e.seq,
        kind: e.kind,
        reason: e.reason.clone(),
        object: e.object.clone(),
        message: e.message.clone(),
        count: e.count,
        first_timestamp: at(clock, e.first),
        last_timestamp: at(clock, e.last),
    }
}

/// `events`, in the order given (oldest first).
pub fn events<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    clock: &WallClock,
) -> wire::EventsReply {
    wire::EventsReply {
        events: events.into_iter().map(|e| event(e, clock)).collect(),
    }
}

/// Whether an event concerns pod `pod` (object `pod` or `pod/container`).
pub fn event_is_for_pod(e: &Event, pod: &str) -> bool {
    e.object == pod
        || e.object
            .strip_prefix(pod)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `describe`: the pod and only its own events.
pub fn describe<'a>(
    p: &PodStatus,
    observed: &Observed,
    events: impl IntoIterator<Item = &'a Event>,
    clock: &WallClock,
    secrets: Secrets,
) -> wire::DescribeReply {
    wire::DescribeReply {
        pod: pod(p, observed, clock, secrets),
        events: events
            .into_iter()
            .filter(|e| event_is_for_pod(e, &p.name))
            .map(|e| event(e, clock))
            .collect(),
    }
}

/// `version`: this build's version.
/// `version`, for a peer that is (`admin`) or is not an admin.
/// The `health` reply for the pods judged.
pub fn health(judged: &[crate::core::PodHealth]) -> wire::HealthReply {
    use crate::core::HealthState;
    let count = |st: HealthState| judged.iter().filter(|h| h.state == st).count();
    let unhealthy: Vec<wire::PodHealth> = judged
        .iter()
        .filter(|h| !h.state.healthy())
        .map(|h| wire::PodHealth {
            pod: h.name.clone(),
            state: h.state,
            object: h.object.clone(),
            message: h.message.clone(),
        })
        .collect();
    wire::HealthReply {
        healthy: unhealthy.is_empty(),
        ready: count(HealthState::Ready),
        completed: count(HealthState::Completed),
        unhealthy,
    }
}

/// The `wait` reply: each pod as it stands, and whether all meet `condition`.
pub fn wait(
    condition: crate::control::wire::wait::WaitFor,
    judged: &[crate::core::PodHealth],
) -> wire::WaitReply {
    let pods: Vec<wire::WaitPod> = judged
        .iter()
        .map(|h| wire::WaitPod {
            pod: h.name.clone(),
            met: condition.met(h),
            state: h.state,
            object: h.object.clone(),
            message: h.message.clone(),
        })
        .collect();
    wire::WaitReply {
        met: pods.iter().all(|p| p.met),
        condition,
        pods,
    }
}

pub fn version(admin: bool) -> wire::VersionReply {
    wire::VersionReply {
        version: env!("CARGO_PKG_VERSION").to_string(),
        admin: Some(admin),
    }
}

/// Snapshots shared by the renderer's and the text formatter's tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::{Duration, Instant, UNIX_EPOCH};

    use super::*;
    use crate::config::spec::{ProbeKind, RestartPolicy};
    use crate::core::{
        ConditionType, EventType, Phase, ProbeRecord, ProbeResultState, TerminationReason,
    };

    pub fn spec(name: &str) -> Arc<ContainerSpec> {
        Arc::new(ContainerSpec {
            env: vec![("RUST_LOG".into(), "info".into())],
            no_new_privs: true,
            resources: Resources {
                memory_max: Some(20 * 1024 * 1024),
                cpu_max: Some(1.5),
                ..Resources::default()
            },
            startup_probe: None,
            liveness_probe: Some(ProbeSpec {
                action: ProbeAction::HttpGet {
                    host: "127.0.0.1".into(),
                    port: 8080,
                    path: "/healthz".into(),
                    headers: vec![],
                    scheme: crate::config::spec::HttpScheme::Http,
                    tls: Default::default(),
                },
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
                termination_grace: None,
            }),
            ..ContainerSpec::new(name, &["/usr/bin/app", "--port", "8080"])
        })
    }

    /// The runtime's facts for the sample pod: `app` has a cgroup, `sidecar` runs without one.
    pub fn observed() -> Observed {
        let mut o = Observed::new();
        o.insert(
            ContainerKey(1),
            RunFacts {
                cgroup: PathBuf::from("/sys/fs/cgroup/vigil/web/app"),
                figures: cgroup::Figures {
                    memory_current: Some(0),
                    memory_peak: Some(20 * 1024 * 1024),
                    memory_max: None,
                    cpu_usage_usec: Some(1234),
                    pids_current: Some(0),
                    memory_pressure_some_avg10: None,
                },
            },
        );
        o
    }

    /// Anchor: monotonic `mono` is wall time 1_000_000 s after the epoch.
    pub fn clock(mono: Instant) -> WallClock {
        WallClock::new(mono, UNIX_EPOCH + Duration::from_secs(1_000_000))
    }

    pub fn sample_pod(mono: Instant) -> PodStatus {
        let ago = |s: u64| mono - Duration::from_secs(s);
        let app = ContainerStatus {
            key: ContainerKey(1),
            name: "app".into(),
            ready: false,
            started: true,
            restart_count: 3,
            pid: None,
            state: ContainerState::Waiting {
                reason: crate::core::WaitingReason::CrashLoopBackOff,
                message: "back-off 40s restarting failed container=app pod=web".into(),
            },
            last_state: Some(Terminated {
                exit_code: 137,
                signal: Some(9),
                reason: TerminationReason::OomKilled,
                message: "memory limit 20Mi reached".into(),
                started_at: Some(ago(300)),
                finished_at: ago(240),
            }),
            probes: vec![ProbeStatus {
                kind: ProbeKind::Liveness,
                result: ProbeResultState::Failure,
                phase: Duration::from_micros(2500),
                recent: vec![ProbeRecord {
                    at: ago(250),
                    late: Duration::from_micros(1500),
                    duration: Duration::from_millis(3),
                    success: false,
                    message: "HTTP probe failed with statuscode: 500".into(),
                    run: 2,
                }],
            }],
            oom_kills: 1,
            backoff_until: Some(mono + Duration::from_secs(40)),
            spec: spec("app"),
            output_lost: false,
            notify: None,
        };
        let sidecar = ContainerStatus {
            key: ContainerKey(2),
            name: "sidecar".into(),
            ready: true,
            started: true,
            restart_count: 0,
            pid: Some(4242),
            state: ContainerState::Running {
                started_at: ago(600),
                terminating: None,
            },
            last_state: None,
            probes: vec![],
            oom_kills: 0,
            backoff_until: None,
            spec: spec("sidecar"),
            output_lost: false,
            notify: Some(crate::core::NotifyStatus {
                ready: true,
                status: Some("serving 3 clients".into()),
                stopping: false,
            }),
        };
        PodStatus {
            name: "web".into(),
            phase: Phase::Running,
            restart_policy: RestartPolicy::Always,
            conditions: vec![Condition {
                kind: ConditionType::ContainersReady,
                status: false,
                reason: "ContainersNotReady".into(),
                message: "containers with unready status: [app]".into(),
                last_transition: ago(240),
            }],
            init_containers: vec![],
            containers: vec![app, sidecar],
            created_at: ago(3600),
            schedule: None,
            runs: vec![],
            rollout: None,
        }
    }
    pub fn sample_event(mono: Instant) -> Event {
        Event {
            seq: 17,
            kind: EventType::Warning,
            reason: "BackOff".into(),
            object: "web/app".into(),
            message: "Back-off restarting failed container app in pod web".into(),
            count: 79,
            first: mono - Duration::from_secs(28 * 60),
            last: mono - Duration::from_secs(292),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::{Value, json};

    use super::fixtures::*;
    use super::*;

    fn json_of<T: serde::Serialize>(v: &T) -> Value {
        wire::to_json(v).unwrap()
    }

    #[test]
    fn status_json_matches_the_interface_shape() {
        let mono = Instant::now();
        let v = json_of(&status(
            &[sample_pod(mono)],
            &observed(),
            &clock(mono),
            Secrets::Shown,
        ));
        let pod = &v["pods"][0];
        assert_eq!(pod["name"], "web");
        assert_eq!(pod["phase"], "Running");
        assert_eq!(pod["restart_policy"], "Always");
        assert_eq!(pod["created_at"], "1970-01-12T12:46:40.000Z");
        assert_eq!(
            pod["conditions"][0],
            json!({"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
                   "message": "containers with unready status: [app]",
                   "last_transition_time": "1970-01-12T13:42:40.000Z"})
        );
        let app = &pod["containers"][0];
        assert_eq!(app["ready"], false);
        assert_eq!(app["restart_count"], 3);
        assert_eq!(app["pid"], Value::Null);
        assert_eq!(
            app["state"],
            json!({"waiting": {"reason": "CrashLoopBackOff",
                               "message": "back-off 40s restarting failed container=app pod=web"}})
        );
        assert_eq!(
            app["last_state"],
            json!({"terminated": {"exit_code": 137, "signal": 9, "reason": "OOMKilled",
                                  "message": "memory limit 20Mi reached",
                                  "started_at": "1970-01-12T13:41:40.000Z",
                                  "finished_at": "1970-01-12T13:42:40.000Z"}})
        );
        assert_eq!(app["cgroup"], "/sys/fs/cgroup/vigil/web/app");
        assert_eq!(
            app["resources"],
            json!({"memory_current": 0, "memory_peak": 20971520, "memory_max": 20971520,
                   "oom_kills": 1, "cpu_usage_usec": 1234, "pids_current": 0,
                   "memory_pressure_some_avg10": null})
        );
        assert_eq!(app["probes"][0]["kind"], "liveness");
        assert_eq!(app["probes"][0]["result"], "failure");
        assert_eq!(app["probes"][0]["recent"][0]["duration_ms"], 3.0);
        assert_eq!(
            app["spec"]["liveness_probe"]["action"],
            "http-get http://127.0.0.1:8080/healthz"
        );
        let sidecar = &pod["containers"][1];
        assert_eq!(sidecar["last_state"], json!({}));
        assert_eq!(
            sidecar["state"],
            json!({"running": {"started_at": "1970-01-12T13:36:40.000Z", "terminating": null}})
        );
        assert_eq!(sidecar["resources"]["memory_current"], Value::Null);
        // Exactly one state key, always.
        for c in pod["containers"].as_array().unwrap() {
            assert_eq!(c["state"].as_object().unwrap().len(), 1);
        }
        // The complete key sets (docs/interface.md §3): a field renamed or dropped here
        // changes what scripts read.
        let keys = |v: &Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(pod),
            [
                "conditions",
                "containers",
                "created_at",
                "init_containers",
                "name",
                "phase",
                "restart_policy"
            ]
        );
        assert_eq!(
            keys(app),
            [
                "cgroup",
                "last_state",
                "name",
                "notify",
                "output_lost",
                "pid",
                "probes",
                "ready",
                "resources",
                "restart_count",
                "spec",
                "started",
                "state"
            ]
        );
        assert_eq!(
            keys(&app["spec"]),
            [
                "command",
                "env",
                "env_file",
                "group",
                "limits",
                "liveness_probe",
                "max_restarts",
                "readiness_probe",
                "restart_policy",
                "startup_probe",
                "stop_signal",
                "termination_grace_period_seconds",
                "user",
                "working_dir"
            ]
        );
        assert_eq!(
            app["spec"]["limits"],
            json!({"memory_max": 20971520, "memory_high": null, "swap_max": null,
                   "pids_max": null, "cpu_max": 1.5, "cpu_weight": null, "oom_group": false})
        );
        assert_eq!(
            app["spec"]["liveness_probe"],
            json!({"action": "http-get http://127.0.0.1:8080/healthz",
                   "initial_delay_seconds": 0.0, "timeout_seconds": 1.0,
                   "period_seconds": 10.0, "success_threshold": 1, "failure_threshold": 3})
        );
        assert_eq!(
            keys(&app["probes"][0]["recent"][0]),
            [
                "duration_ms",
                "late_ms",
                "message",
                "run",
                "success",
                "time"
            ]
        );
        assert_eq!(app["probes"][0]["recent"][0]["run"], 2);
        assert_eq!(app["probes"][0]["phase_ms"], 2.5);
        assert_eq!(app["probes"][0]["recent"][0]["late_ms"], 1.5);
        assert_eq!(app["spec"]["env"], json!({"RUST_LOG": "info"}));
    }

    #[test]
    fn env_values_are_redacted_unless_the_peer_is_an_admin() {
        let mono = Instant::now();
        let v = json_of(&status(
            &[sample_pod(mono)],
            &observed(),
            &clock(mono),
            Secrets::Redacted,
        ));
        assert_eq!(
            v["pods"][0]["containers"][0]["spec"]["env"],
            json!({"RUST_LOG": "***"})
        );
        let d = json_of(&describe(
            &sample_pod(mono),
            &observed(),
            &[],
            &clock(mono),
            Secrets::Redacted,
        ));
        assert_eq!(
            d["pod"]["containers"][1]["spec"]["env"],
            json!({"RUST_LOG": "***"})
        );
    }

    #[test]
    fn event_json_has_kubectl_fields_and_seq() {
        let mono = Instant::now();
        let v = json_of(&event(&sample_event(mono), &clock(mono)));
        assert_eq!(
            v,
            json!({"seq": 17, "type": "Warning", "reason": "BackOff", "object": "web/app",
                   "message": "Back-off restarting failed container app in pod web",
                   "count": 79, "first_timestamp": "1970-01-12T13:18:40.000Z",
                   "last_timestamp": "1970-01-12T13:41:48.000Z"})
        );
    }

    #[test]
    fn describe_json_keeps_only_the_pods_events() {
        let mono = Instant::now();
        let mut other = sample_event(mono);
        other.object = "webby/app".into();
        let mut pod_level = sample_event(mono);
        pod_level.object = "web".into();
        let events = [sample_event(mono), other, pod_level];
        let v = describe(
            &sample_pod(mono),
            &observed(),
            &events,
            &clock(mono),
            Secrets::Shown,
        );
        assert_eq!(v.pod.name, "web");
        let objects: Vec<&str> = v.events.iter().map(|e| e.object.as_str()).collect();
        assert_eq!(objects, vec!["web/app", "web"]);
    }
}
