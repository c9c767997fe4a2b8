//! Metrics: what vigil knows about its pods, as a Prometheus / OpenMetrics exposition
//! (docs/metrics.md lists every family and the kubelet / kube-state-metrics name it maps to).
//!
//! Owns the families, their names, help texts and labels ([`render`]), the text formats
//! ([`expo`]), probe counters ([`probes`]), vigil's own process figures ([`process`]) and the
//! pure side of serving `GET /metrics` ([`http`]). The figures are those `status` shows: the
//! core's snapshot and the cgroup figures read beside it (`control::render::Observed`), so the
//! two never disagree.
//!
//! Must not: read the core's state other than through its snapshot, touch sockets (the shell's
//! metrics component does), or read anything per container beyond what `status` reads.

pub mod expo;
pub mod http;
pub mod probes;
pub mod process;

use std::time::Instant;

use crate::config::spec::ProbeKind;
use crate::control::render::Observed;
use crate::core::{ContainerState, ContainerStatus, PodStatus};
pub use expo::Format;
use expo::{Kind, Writer};
use probes::{BUCKETS, ProbeStats};
use process::ProcessFigures;

/// `le` of each bucket of [`probes::BUCKETS`], then `+Inf`, as the formats spell floats.
const LE: [&str; BUCKETS.len() + 1] = [
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf",
];

/// Every family vigil exports, by the name it carries (the sample name of gauges, `…_total` of
/// counters, the base of histograms). docs/metrics.md and the Grafana dashboard are checked
/// against this list.
pub const FAMILIES: &[&str] = &[
    "vigil_build_info",
    "vigil_pod_ready",
    "vigil_container_restarts_total",
    "vigil_container_ready",
    "vigil_container_started",
    "vigil_container_state",
    "vigil_container_waiting_reason",
    "vigil_container_last_terminated_reason",
    "vigil_container_last_terminated_exit_code",
    "vigil_container_oom_kills_total",
    "vigil_container_memory_current_bytes",
    "vigil_container_memory_peak_bytes",
    "vigil_container_memory_max_bytes",
    "vigil_container_cpu_seconds_total",
    "vigil_container_pids",
    "vigil_container_memory_pressure_some_avg10_ratio",
    "vigil_container_backoff_remaining_seconds",
    "vigil_probe_results_total",
    "vigil_probe_duration_seconds",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
];

/// What one exposition is built from.
pub struct Snapshot<'a> {
    pub pods: &'a [PodStatus],
    pub observed: &'a Observed,
    pub probes: &'a ProbeStats,
    pub process: &'a ProcessFigures,
    /// The core's clock when `pods` was taken (for back-off remaining).
    pub now: Instant,
}

/// One container with its pod's name.
struct Row<'a> {
    pod: &'a str,
    c: &'a ContainerStatus,
}

/// The exposition of `snap` in `format`.
pub fn render(format: Format, snap: &Snapshot<'_>) -> String {
    let rows: Vec<Row<'_>> = snap
        .pods
        .iter()
        .flat_map(|p| {
            p.init_containers
                .iter()
                .chain(p.containers.iter())
                .map(move |c| Row { pod: &p.name, c })
        })
        .collect();
    let mut w = Writer::new(format, 4096 + rows.len() * 3072);

    w.family(
        "vigil_build_info",
        Kind::Gauge,
        "vigil's version; always 1.",
    );
    w.sample(
        "vigil_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );

    w.family(
        "vigil_pod_ready",
        Kind::Gauge,
        "Whether the pod's Ready condition is true (1) or not (0).",
    );
    for p in snap.pods {
        let ready = p
            .conditions
            .iter()
            .any(|c| c.kind == crate::core::ConditionType::Ready && c.status);
        w.sample("vigil_pod_ready", &[("pod", &p.name)], bool_value(ready));
    }

    let per_container = |w: &mut Writer,
                         name: &str,
                         kind: Kind,
                         help: &str,
                         value: &dyn Fn(&Row) -> Option<f64>| {
        w.family(name, kind, help);
        for r in &rows {
            if let Some(v) = value(r) {
                w.sample(name, &[("pod", r.pod), ("container", &r.c.name)], v);
            }
        }
    };
    per_container(
        &mut w,
        "vigil_container_restarts_total",
        Kind::Counter,
        "Times the container was restarted (its restart count).",
        &|r| Some(f64::from(r.c.restart_count)),
    );
    per_container(
        &mut w,
        "vigil_container_ready",
        Kind::Gauge,
        "Whether the container is ready (1) or not (0).",
        &|r| Some(bool_value(r.c.ready)),
    );
    per_container(
        &mut w,
        "vigil_container_started",
        Kind::Gauge,
        "Whether the container has started (its startup probe, if any, succeeded).",
        &|r| Some(bool_value(r.c.started)),
    );

    w.family(
        "vigil_container_state",
        Kind::Gauge,
        "The container's state: 1 for the state it is in, 0 for the others.",
    );
    for r in &rows {
        let now = state_name(&r.c.state);
        for state in ["waiting", "running", "terminated"] {
            w.sample(
                "vigil_container_state",
                &[("pod", r.pod), ("container", &r.c.name), ("state", state)],
                bool_value(state == now),
            );
        }
    }

    w.family(
        "vigil_container_waiting_reason",
        Kind::Gauge,
        "Why a waiting container waits (1; absent when not waiting).",
    );
    for r in &rows {
        if let ContainerState::Waiting { reason, .. } = &r.c.state {
            w.sample(
                "vigil_container_waiting_reason",
                &[
                    ("pod", r.pod),
                    ("container", &r.c.name),
                    ("reason", reason.as_str()),
                ],
                1.0,
            );
        }
    }

    w.family(
        "vigil_container_last_terminated_reason",
        Kind::Gauge,
        "Why the container's most recent run ended (1; absent before the first end).",
    );
    for r in &rows {
        if let Some(t) = last_termination(r.c) {
            w.sample(
                "vigil_container_last_terminated_reason",
                &[
                    ("pod", r.pod),
                    ("container", &r.c.name),
                    ("reason", t.reason.as_str()),
                ],
                1.0,
            );
        }
    }
    per_container(
        &mut w,
        "vigil_container_last_terminated_exit_code",
        Kind::Gauge,
        "Exit code of the container's most recent run (128+signal when killed).",
        &|r| last_termination(r.c).map(|t| f64::from(t.exit_code)),
    );
    per_container(
        &mut w,
        "vigil_container_oom_kills_total",
        Kind::Counter,
        "OOM kills in the container's cgroup (memory.events oom_kill), over its life.",
        &|r| Some(r.c.oom_kills as f64),
    );

    let figures = |r: &Row| snap.observed.get(&r.c.key).map(|f| &f.figures);
    per_container(
        &mut w,
        "vigil_container_memory_current_bytes",
        Kind::Gauge,
        "Memory charged to the running container's cgroup (memory.current).",
        &|r| figures(r).and_then(|f| f.memory_current).map(|v| v as f64),
    );
    per_container(
        &mut w,
        "vigil_container_memory_peak_bytes",
        Kind::Gauge,
        "Peak memory of the current run's cgroup (memory.peak, Linux 5.19+).",
        &|r| figures(r).and_then(|f| f.memory_peak).map(|v| v as f64),
    );
    per_container(
        &mut w,
        "vigil_container_memory_max_bytes",
        Kind::Gauge,
        "The cgroup's memory limit (memory.max); absent when unlimited.",
        &|r| figures(r).and_then(|f| f.memory_max).map(|v| v as f64),
    );
    per_container(
        &mut w,
        "vigil_container_cpu_seconds_total",
        Kind::Counter,
        "CPU time used by the current run's cgroup (cpu.stat usage_usec).",
        &|r| {
            figures(r)
                .and_then(|f| f.cpu_usage_usec)
                .map(|v| v as f64 / 1e6)
        },
    );
    per_container(
        &mut w,
        "vigil_container_pids",
        Kind::Gauge,
        "Tasks in the running container's cgroup (pids.current).",
        &|r| figures(r).and_then(|f| f.pids_current).map(|v| v as f64),
    );
    per_container(
        &mut w,
        "vigil_container_memory_pressure_some_avg10_ratio",
        Kind::Gauge,
        "Share of the last 10 s in which some task of the cgroup stalled on memory \
         (memory.pressure some avg10 / 100).",
        &|r| {
            figures(r)
                .and_then(|f| f.memory_pressure_some_avg10)
                .map(|v| v / 100.0)
        },
    );
    per_container(
        &mut w,
        "vigil_container_backoff_remaining_seconds",
        Kind::Gauge,
        "Seconds until the container's next run while it waits out the restart back-off; \
         0 otherwise.",
        &|r| {
            Some(
                r.c.backoff_until
                    .map_or(0.0, |t| t.saturating_duration_since(snap.now).as_secs_f64()),
            )
        },
    );

    let probes = |r: &'_ Row<'_>| {
        let mut kinds: Vec<ProbeKind> = r.c.probes.iter().map(|p| p.kind).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    };
    w.family(
        "vigil_probe_results_total",
        Kind::Counter,
        "Probe attempts by result (a warning counts as a success, as the kubelet counts it).",
    );
    for r in &rows {
        for kind in probes(r) {
            let c = snap.probes.get(r.c.key, kind).cloned().unwrap_or_default();
            for (result, n) in [("success", c.successes), ("failure", c.failures)] {
                w.sample(
                    "vigil_probe_results_total",
                    &[
                        ("pod", r.pod),
                        ("container", &r.c.name),
                        ("probe", kind.as_str()),
                        ("result", result),
                    ],
                    n as f64,
                );
            }
        }
    }
    w.family(
        "vigil_probe_duration_seconds",
        Kind::Histogram,
        "How long probe attempts took.",
    );
    for r in &rows {
        for kind in probes(r) {
            let c = snap.probes.get(r.c.key, kind).cloned().unwrap_or_default();
            let labels = [
                ("pod", r.pod),
                ("container", r.c.name.as_str()),
                ("probe", kind.as_str()),
            ];
            let mut cumulative = 0;
            for (i, le) in LE.iter().enumerate() {
                cumulative += c.buckets.get(i).copied().unwrap_or(0);
                let n = if i == BUCKETS.len() {
                    c.count
                } else {
                    cumulative
                };
                w.sample(
                    "vigil_probe_duration_seconds_bucket",
                    &[labels[0], labels[1], labels[2], ("le", le)],
                    n as f64,
                );
            }
            w.sample("vigil_probe_duration_seconds_sum", &labels, c.sum_seconds);
            w.sample(
                "vigil_probe_duration_seconds_count",
                &labels,
                c.count as f64,
            );
        }
    }

    let own = snap.process;
    let mut process = |name: &str, kind: Kind, help: &str, v: Option<f64>| {
        if let Some(v) = v {
            w.family(name, kind, help);
            w.sample(name, &[], v);
        }
    };
    process(
        "process_resident_memory_bytes",
        Kind::Gauge,
        "vigil's resident memory size in bytes.",
        own.resident_memory_bytes.map(|v| v as f64),
    );
    process(
        "process_virtual_memory_bytes",
        Kind::Gauge,
        "vigil's virtual memory size in bytes.",
        own.virtual_memory_bytes.map(|v| v as f64),
    );
    process(
        "process_cpu_seconds_total",
        Kind::Counter,
        "vigil's user and system CPU time in seconds.",
        own.cpu_seconds,
    );
    process(
        "process_open_fds",
        Kind::Gauge,
        "vigil's open file descriptors.",
        own.open_fds.map(|v| v as f64),
    );
    process(
        "process_max_fds",
        Kind::Gauge,
        "vigil's limit of open file descriptors (RLIMIT_NOFILE, soft).",
        own.max_fds.map(|v| v as f64),
    );
    process(
        "process_start_time_seconds",
        Kind::Gauge,
        "When vigil started, in seconds since the Unix epoch.",
        own.start_time_seconds,
    );
    w.finish()
}

fn bool_value(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn state_name(s: &ContainerState) -> &'static str {
    match s {
        ContainerState::Waiting { .. } => "waiting",
        ContainerState::Running { .. } => "running",
        ContainerState::Terminated(_) => "terminated",
    }
}

/// The most recent end of a run: the current state if the container is terminated now, else
/// its last state.
fn last_termination(c: &ContainerStatus) -> Option<&crate::core::Terminated> {
    match &c.state {
        ContainerState::Terminated(t) => Some(t),
        _ => c.last_state.as_ref(),
    }
}

#[cfg(test)]
mod tests;
