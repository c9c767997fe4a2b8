//! Raw (spanned) config → validated [`spec::Config`], defaults applied, with every problem
//! collected rather than stopping at the first.
//!
//! Owns value rules (ranges, names, references between pods) and defaulting/folding: a
//! container inherits its pod's `restart_policy`, `termination_grace_period_seconds`,
//! `backoff` (field by field) and `max_restarts` unless it sets them. Init containers run to
//! completion, so a pod policy of `Always` becomes `OnFailure` for them (the kubelet retries
//! failed init containers of an `Always` pod and moves on after a success) and they take no
//! probes — unless their own `restart_policy = "Always"` makes them sidecars. Must not touch the
//! system: user names and cgroup controllers are checked at start.
//!
//! One [`Checker`] collects the problems; its parts, each an `impl Checker` by job:
//! - `scalar`: seconds, integer ranges, paths, quantities, ids, restart policies;
//! - `supervisor`: the `[supervisor]` table; `on_event`: its hooks on events;
//! - `pod`: pods and their containers (defaults folded in), rlimits, resources;
//! - `probe`: probes, lifecycle hooks and their actions (exec, HTTP, TCP, gRPC);
//! - `deps`: `depends_on` between pods (unknown pods, conditions that cannot hold, cycles).

mod deps;
mod on_event;
mod pod;
mod probe;
mod replicas;
mod scalar;
mod supervisor;

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::error::Problem;
use super::keys::RawConfig;
use super::spec::{Backoff, Config, RestartPolicy, SupervisorSpec};

/// Kubelet default: `terminationGracePeriodSeconds` 30.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// Largest uid/gid: `(uid_t)-1` is reserved (setresuid(2) "unchanged").
const MAX_ID: i64 = u32::MAX as i64 - 1;

/// Validate `raw`; problems go to `out`. Returns a config only when `out` stayed empty.
pub(crate) fn validate(raw: &RawConfig, source: &Path, out: &mut Vec<Problem>) -> Option<Config> {
    let before = out.len();
    let mut v = Checker { out };
    let supervisor = match &raw.supervisor {
        Some(s) => v.supervisor(s.get_ref()),
        None => SupervisorSpec::default(),
    };
    let mut pods = Vec::new();
    let mut counts = Vec::new();
    let mut spans = Vec::new();
    for (name, pod) in &raw.pods {
        let mut spec = v.pod(name, pod);
        counts.push(v.replica_keys(name, pod.get_ref(), &mut spec));
        spans.push(span(pod));
        pods.push(spec);
    }
    v.replica_names(&raw.pods);
    v.dependencies(&raw.pods, &mut pods);
    if v.out.len() > before {
        return None;
    }
    let (mut pods, replica_sets) = v.split_replicas(pods, &counts, &spans);
    if v.out.len() > before {
        return None;
    }
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    Some(Config {
        source: source.to_path_buf(),
        supervisor,
        pods,
        replica_sets,
        pod_files: Vec::new(),
    })
}

/// Collects the problems of one file while the raw tree is turned into a [`Config`].
struct Checker<'o> {
    out: &'o mut Vec<Problem>,
}

/// Pod-level values a container falls back to.
struct PodDefaults {
    restart_policy: RestartPolicy,
    grace: Duration,
    backoff: Backoff,
    max_restarts: Option<u32>,
}

fn span<T>(v: &Spanned<T>) -> Range<usize> {
    v.span()
}

fn has_nul(s: &str) -> bool {
    s.contains('\0')
}
