//! Metrics: what vigil knows about its pods, as a Prometheus / OpenMetrics exposition
//! (docs/metrics.md lists every family and the kubelet / kube-state-metrics name it maps to).
//!
//! Owns the families, their names, help texts and labels ([`Exposition`], built a pod at a time
//! so the shell can spread a scrape over several loop turns; [`render`] in one go), the text formats
//! ([`expo`]), probe counters ([`probes`]), vigil's own process figures ([`process`]) and the
//! pure side of serving `GET /metrics` ([`http`]). The figures are those `status` shows: the
//! core's snapshot and the cgroup figures read beside it (`control::render::Observed`), so the
//! two never disagree.
//!
//! Must not: read the core's state other than through its snapshot, touch sockets (the shell's
//! metrics component does), or read anything per container beyond what `status` reads.

pub mod expo;
pub mod health;
pub mod http;
pub mod probes;
pub mod process;

use std::time::Instant;

use crate::cgroup::Figures;
use crate::config::spec::ProbeKind;
use crate::control::render::Observed;
use crate::core::{ContainerKey, ContainerState, ContainerStatus, Phase, PodStatus};
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
    "vigil_pod_phase",
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
    "vigil_adopted_runs_total",
    "vigil_output_lost_runs_total",
    "vigil_log_lines_dropped_total",
    "vigil_config_last_reload_successful",
    "vigil_config_last_reload_success_timestamp_seconds",
    "vigil_event_hook_deliveries_total",
    "vigil_event_hook_dropped_total",
    "vigil_event_hook_queue_length",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
];

/// One `on_event` hook's figures (since this vigil started).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookFigures {
    pub hook: String,
    /// Events delivered (an exec hook exited 0, a webhook answered 200–399).
    pub delivered: u64,
    /// Events given up (after a webhook's retries).
    pub failed: u64,
    /// Events dropped because the hook's queue was full.
    pub dropped: u64,
    /// Events waiting (retries included).
    pub queued: u64,
}

/// vigil's own counters, not per pod (since this vigil started; an upgrade carries the first
/// two on).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Runs adopted from an earlier vigil that died (docs/behaviour.md §11).
    pub adopted_runs: u64,
    /// Of those, runs whose output pipes were lost in that crash.
    pub output_lost_runs: u64,
    /// Lines of vigil's own log dropped because its stderr did not take them
    /// (`runtime::stderr_log`).
    pub log_lines_dropped: u64,
    /// The last reload succeeded (true before any: the config vigil started with loaded).
    pub last_reload_successful: bool,
    /// When the config was last loaded successfully (start or reload), in milliseconds since
    /// the Unix epoch.
    pub last_reload_success_unix_ms: u64,
    /// The `on_event` hooks', in file order.
    pub event_hooks: Vec<HookFigures>,
}

/// What one exposition is built from, all at once (tests, and [`render`]).
pub struct Snapshot<'a> {
    pub pods: &'a [PodStatus],
    pub observed: &'a Observed,
    pub probes: &'a ProbeStats,
    pub process: &'a ProcessFigures,
    pub counters: Counters,
    /// The core's clock when `pods` was taken (for back-off remaining).
    pub now: Instant,
}

/// The exposition of `snap` in `format`, built in one go (the same bytes as [`Exposition`] fed
/// the same pods one by one).
pub fn render(format: Format, snap: &Snapshot<'_>) -> String {
    let mut e = Exposition::new(format, snap.pods.len());
    for p in snap.pods {
        e.add_pod(
            p,
            &|key| snap.observed.get(&key).map(|f| f.figures),
            snap.probes,
            snap.now,
        );
    }
    e.finish(snap.process, snap.counters.clone())
}

/// The families written per pod, in the order they appear (after `vigil_build_info`; vigil's
/// own `process_*` families close the exposition).
#[derive(Clone, Copy)]
enum Part {
    PodReady,
    PodPhase,
    Restarts,
    Ready,
    Started,
    State,
    WaitingReason,
    LastReason,
    LastExitCode,
    OomKills,
    MemoryCurrent,
    MemoryPeak,
    MemoryMax,
    Cpu,
    Pids,
    Pressure,
    Backoff,
    ProbeResults,
    ProbeDuration,
}

/// Every [`Part`] with its name, type and help, in exposition order.
const PARTS: [(Part, &str, Kind, &str); 19] = [
    (
        Part::PodReady,
        "vigil_pod_ready",
        Kind::Gauge,
        "Whether the pod's Ready condition is true (1) or not (0).",
    ),
    (
        Part::PodPhase,
        "vigil_pod_phase",
        Kind::Gauge,
        "The pod's phase: 1 for the phase it is in, 0 for the others \
         (kube_pod_status_phase).",
    ),
    (
        Part::Restarts,
        "vigil_container_restarts_total",
        Kind::Counter,
        "Times the container was restarted (its restart count).",
    ),
    (
        Part::Ready,
        "vigil_container_ready",
        Kind::Gauge,
        "Whether the container is ready (1) or not (0).",
    ),
    (
        Part::Started,
        "vigil_container_started",
        Kind::Gauge,
        "Whether the container has started (its startup probe, if any, succeeded).",
    ),
    (
        Part::State,
        "vigil_container_state",
        Kind::Gauge,
        "The container's state: 1 for the state it is in, 0 for the others.",
    ),
    (
        Part::WaitingReason,
        "vigil_container_waiting_reason",
        Kind::Gauge,
        "Why a waiting container waits (1; absent when not waiting).",
    ),
    (
        Part::LastReason,
        "vigil_container_last_terminated_reason",
        Kind::Gauge,
        "Why the container's most recent run ended (1; absent before the first end).",
    ),
    (
        Part::LastExitCode,
        "vigil_container_last_terminated_exit_code",
        Kind::Gauge,
        "Exit code of the container's most recent run (128+signal when killed).",
    ),
    (
        Part::OomKills,
        "vigil_container_oom_kills_total",
        Kind::Counter,
        "OOM kills in the container's cgroup (memory.events oom_kill), over its life.",
    ),
    (
        Part::MemoryCurrent,
        "vigil_container_memory_current_bytes",
        Kind::Gauge,
        "Memory charged to the running container's cgroup (memory.current).",
    ),
    (
        Part::MemoryPeak,
        "vigil_container_memory_peak_bytes",
        Kind::Gauge,
        "Peak memory of the current run's cgroup (memory.peak, Linux 5.19+).",
    ),
    (
        Part::MemoryMax,
        "vigil_container_memory_max_bytes",
        Kind::Gauge,
        "The cgroup's memory limit (memory.max); absent when unlimited.",
    ),
    (
        Part::Cpu,
        "vigil_container_cpu_seconds_total",
        Kind::Counter,
        "CPU time used by the current run's cgroup (cpu.stat usage_usec).",
    ),
    (
        Part::Pids,
        "vigil_container_pids",
        Kind::Gauge,
        "Tasks in the running container's cgroup (pids.current).",
    ),
    (
        Part::Pressure,
        "vigil_container_memory_pressure_some_avg10_ratio",
        Kind::Gauge,
        "Share of the last 10 s in which some task of the cgroup stalled on memory \
         (memory.pressure some avg10 / 100).",
    ),
    (
        Part::Backoff,
        "vigil_container_backoff_remaining_seconds",
        Kind::Gauge,
        "Seconds until the container's next run while it waits out the restart back-off; \
         0 otherwise.",
    ),
    (
        Part::ProbeResults,
        "vigil_probe_results_total",
        Kind::Counter,
        "Probe attempts by result (a warning counts as a success, as the kubelet counts it).",
    ),
    (
        Part::ProbeDuration,
        "vigil_probe_duration_seconds",
        Kind::Histogram,
        "How long probe attempts took.",
    ),
];

/// An exposition built a pod at a time: each family's samples go to that family's own buffer,
/// so pods can be added in separate loop turns (each from its own reading) and the families
/// still come out contiguous, in the order of [`FAMILIES`]. [`Exposition::finish`] joins them.
pub struct Exposition {
    format: Format,
    /// `vigil_build_info`, then the rest is appended at the end.
    head: Writer,
    /// One writer per [`Part`], its header already written.
    parts: Vec<Writer>,
}

impl Exposition {
    /// An empty exposition sized for about `pods` single-container pods.
    pub fn new(format: Format, pods: usize) -> Exposition {
        let mut head = Writer::new(format, 256);
        head.family(
            "vigil_build_info",
            Kind::Gauge,
            "vigil's version; always 1.",
        );
        head.sample(
            "vigil_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1.0,
        );
        let parts = PARTS
            .iter()
            .map(|&(part, name, kind, help)| {
                // About one 64-byte sample line per pod; three for the state family; probe
                // families grow as probed containers come.
                let lines = match part {
                    Part::State => 3,
                    Part::PodPhase => 4,
                    Part::ProbeResults | Part::ProbeDuration => 0,
                    _ => 1,
                };
                let mut w = Writer::new(format, 256 + pods * lines * 64);
                w.family(name, kind, help);
                w
            })
            .collect();
        Exposition {
            format,
            head,
            parts,
        }
    }

    /// The exposition's bytes so far (for bounding what is held).
    pub fn len(&self) -> usize {
        self.head.len() + self.parts.iter().map(Writer::len).sum::<usize>()
    }

    /// Whether nothing is written yet (never: the headers are).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds one pod's series: its `Ready` condition and every container's (init containers
    /// first), with `figures` giving a running container's cgroup figures, `probes` the probe
    /// counters and `now` the core's clock when `pod` was taken.
    pub fn add_pod(
        &mut self,
        pod: &PodStatus,
        figures: &dyn Fn(ContainerKey) -> Option<Figures>,
        probes: &ProbeStats,
        now: Instant,
    ) {
        let ready = pod
            .conditions
            .iter()
            .any(|c| c.kind == crate::core::ConditionType::Ready && c.status);
        self.parts[Part::PodReady as usize].sample(
            "vigil_pod_ready",
            &[("pod", &pod.name)],
            bool_value(ready),
        );
        // One series per phase, as kube-state-metrics' kube_pod_status_phase: an alert on
        // `vigil_pod_phase{phase="Failed"} == 1` needs no knowledge of the others.
        for phase in [
            Phase::Pending,
            Phase::Running,
            Phase::Succeeded,
            Phase::Failed,
        ] {
            self.parts[Part::PodPhase as usize].sample(
                "vigil_pod_phase",
                &[("pod", &pod.name), ("phase", phase.as_str())],
                bool_value(pod.phase == phase),
            );
        }
        for c in pod.init_containers.iter().chain(pod.containers.iter()) {
            self.add_container(&pod.name, c, figures(c.key), probes, now);
        }
    }

    fn add_container(
        &mut self,
        pod: &str,
        c: &ContainerStatus,
        figures: Option<Figures>,
        probes: &ProbeStats,
        now: Instant,
    ) {
        let labels = [("pod", pod), ("container", c.name.as_str())];
        let mut one = |part: Part, v: Option<f64>| {
            if let Some(v) = v {
                self.parts[part as usize].sample(PARTS[part as usize].1, &labels, v);
            }
        };
        one(Part::Restarts, Some(f64::from(c.restart_count)));
        one(Part::Ready, Some(bool_value(c.ready)));
        one(Part::Started, Some(bool_value(c.started)));
        let last = last_termination(c);
        one(Part::LastExitCode, last.map(|t| f64::from(t.exit_code)));
        one(Part::OomKills, Some(c.oom_kills as f64));
        let f = figures.unwrap_or_default();
        one(Part::MemoryCurrent, f.memory_current.map(|v| v as f64));
        one(Part::MemoryPeak, f.memory_peak.map(|v| v as f64));
        one(Part::MemoryMax, f.memory_max.map(|v| v as f64));
        one(Part::Cpu, f.cpu_usage_usec.map(|v| v as f64 / 1e6));
        one(Part::Pids, f.pids_current.map(|v| v as f64));
        one(
            Part::Pressure,
            f.memory_pressure_some_avg10.map(|v| v / 100.0),
        );
        one(
            Part::Backoff,
            Some(
                c.backoff_until
                    .map_or(0.0, |t| t.saturating_duration_since(now).as_secs_f64()),
            ),
        );

        let current = state_name(&c.state);
        for state in ["waiting", "running", "terminated"] {
            self.parts[Part::State as usize].sample(
                "vigil_container_state",
                &[labels[0], labels[1], ("state", state)],
                bool_value(state == current),
            );
        }
        if let ContainerState::Waiting { reason, .. } = &c.state {
            self.parts[Part::WaitingReason as usize].sample(
                "vigil_container_waiting_reason",
                &[labels[0], labels[1], ("reason", reason.as_str())],
                1.0,
            );
        }
        if let Some(t) = last {
            self.parts[Part::LastReason as usize].sample(
                "vigil_container_last_terminated_reason",
                &[labels[0], labels[1], ("reason", t.reason.as_str())],
                1.0,
            );
        }

        let mut kinds: Vec<ProbeKind> = c.probes.iter().map(|p| p.kind).collect();
        kinds.sort();
        kinds.dedup();
        for kind in kinds {
            let p = probes.get(c.key, kind).cloned().unwrap_or_default();
            let labels = [labels[0], labels[1], ("probe", kind.as_str())];
            let results = &mut self.parts[Part::ProbeResults as usize];
            for (result, n) in [("success", p.successes), ("failure", p.failures)] {
                results.sample(
                    "vigil_probe_results_total",
                    &[labels[0], labels[1], labels[2], ("result", result)],
                    n as f64,
                );
            }
            let durations = &mut self.parts[Part::ProbeDuration as usize];
            let mut cumulative = 0;
            for (i, le) in LE.iter().enumerate() {
                cumulative += p.buckets.get(i).copied().unwrap_or(0);
                let n = if i == BUCKETS.len() {
                    p.count
                } else {
                    cumulative
                };
                durations.sample(
                    "vigil_probe_duration_seconds_bucket",
                    &[labels[0], labels[1], labels[2], ("le", le)],
                    n as f64,
                );
            }
            durations.sample("vigil_probe_duration_seconds_sum", &labels, p.sum_seconds);
            durations.sample(
                "vigil_probe_duration_seconds_count",
                &labels,
                p.count as f64,
            );
        }
    }

    /// The whole exposition: the families in order, then vigil's own [`Counters`] and
    /// `process_*` figures (those it could read) and, in OpenMetrics, `# EOF`.
    pub fn finish(self, own: &ProcessFigures, counters: Counters) -> String {
        let Exposition {
            format,
            head,
            parts,
        } = self;
        let total = head.len() + parts.iter().map(Writer::len).sum::<usize>() + 1024;
        let mut w = Writer::new(format, total);
        w.append(&head.finish_part());
        for part in parts {
            w.append(&part.finish_part());
        }
        for (name, help, v) in [
            (
                "vigil_adopted_runs_total",
                "Container runs adopted from an earlier vigil that died.",
                counters.adopted_runs,
            ),
            (
                "vigil_output_lost_runs_total",
                "Adopted runs whose output pipes were lost in the crash of the earlier vigil.",
                counters.output_lost_runs,
            ),
            (
                "vigil_log_lines_dropped_total",
                "Lines of vigil's own log dropped because its stderr did not take them.",
                counters.log_lines_dropped,
            ),
        ] {
            w.family(name, Kind::Counter, help);
            w.sample(name, &[], v as f64);
        }
        // Prometheus' own prometheus_config_last_reload_successful and
        // …_success_timestamp_seconds, for the same alert.
        for (name, help, v) in [
            (
                "vigil_config_last_reload_successful",
                "Whether the last reload succeeded (1) or was refused (0); 1 before any reload.",
                if counters.last_reload_successful {
                    1.0
                } else {
                    0.0
                },
            ),
            (
                "vigil_config_last_reload_success_timestamp_seconds",
                "When the config was last loaded successfully (start or reload), Unix seconds.",
                counters.last_reload_success_unix_ms as f64 / 1000.0,
            ),
        ] {
            w.family(name, Kind::Gauge, help);
            w.sample(name, &[], v);
        }
        if !counters.event_hooks.is_empty() {
            let name = "vigil_event_hook_deliveries_total";
            w.family(
                name,
                Kind::Counter,
                "Events an on_event hook delivered or gave up on, by result.",
            );
            for h in &counters.event_hooks {
                for (result, v) in [("delivered", h.delivered), ("failed", h.failed)] {
                    w.sample(name, &[("hook", &h.hook), ("result", result)], v as f64);
                }
            }
            let name = "vigil_event_hook_dropped_total";
            w.family(
                name,
                Kind::Counter,
                "Events an on_event hook dropped because its queue was full.",
            );
            for h in &counters.event_hooks {
                w.sample(name, &[("hook", &h.hook)], h.dropped as f64);
            }
            let name = "vigil_event_hook_queue_length";
            w.family(
                name,
                Kind::Gauge,
                "Events waiting for an on_event hook (retries included).",
            );
            for h in &counters.event_hooks {
                w.sample(name, &[("hook", &h.hook)], h.queued as f64);
            }
        }
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
