//! Raw (spanned) config → validated [`spec::Config`], defaults applied, with every problem
//! collected rather than stopping at the first.
//!
//! Owns value rules (ranges, names, references between pods) and defaulting/folding: a
//! container inherits its pod's `restart_policy`, `termination_grace_period_seconds`,
//! `backoff` (field by field) and `max_restarts` unless it sets them. Init containers run to
//! completion, so a pod policy of `Always` becomes `OnFailure` for them (the kubelet retries
//! failed init containers of an `Always` pod and moves on after a success) and they take no
//! probes — unless their own `restart_policy = "Always"` makes them sidecars. Must not touch the system: user names and cgroup controllers are checked at start.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::Problem;
use super::raw::{
    NumOrStr, RawBackoff, RawConfig, RawContainer, RawPod, RawProbe, RawResources, RawRlimit,
    RawSupervisor, RawTls, S, StrMap, StrOrInt,
};
use super::schema::join;
use super::spec::{
    Backoff, CgroupRoot, Config, ContainerSpec, Dependency, DependencyCondition, Hook, HttpScheme,
    Lifecycle, OnRestart, PodSpec, ProbeAction, ProbeKind, ProbeSpec, Resources, RestartPolicy,
    Rlimit, SupervisorSpec, TerminationMessagePolicy, TlsSpec,
};
use super::values;

/// Kubelet default: `terminationGracePeriodSeconds` 30.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// Largest uid/gid: `(uid_t)-1` is reserved (setresuid(2) "unchanged").
const MAX_ID: i64 = u32::MAX as i64 - 1;

/// Validate `raw`; problems go to `out`. Returns a config only when `out` stayed empty.
pub(crate) fn validate(raw: &RawConfig, source: &Path, out: &mut Vec<Problem>) -> Option<Config> {
    let before = out.len();
    let mut v = V { out };
    let supervisor = match &raw.supervisor {
        Some(s) => v.supervisor(s.get_ref()),
        None => SupervisorSpec::default(),
    };
    let mut pods = Vec::new();
    for (name, pod) in &raw.pods {
        pods.push(v.pod(name, pod));
    }
    v.dependencies(&raw.pods, &mut pods);
    if v.out.len() > before {
        return None;
    }
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    Some(Config {
        source: source.to_path_buf(),
        supervisor,
        pods,
    })
}

struct V<'o> {
    out: &'o mut Vec<Problem>,
}

/// Pod-level values a container falls back to.
struct PodDefaults {
    restart_policy: RestartPolicy,
    grace: Duration,
    backoff: Backoff,
    max_restarts: Option<u32>,
}

fn span<T>(v: &S<T>) -> Range<usize> {
    v.span()
}

fn has_nul(s: &str) -> bool {
    s.contains('\0')
}

impl V<'_> {
    fn err(&mut self, span: Range<usize>, field: &str, message: impl Into<String>) {
        self.out.push(Problem::new(span, field, message));
    }

    // ---- scalar helpers -------------------------------------------------------------------

    /// A duration in seconds (integer or fraction). `positive`: must be > 0, else >= 0.
    fn seconds(&mut self, v: &S<f64>, field: &str, positive: bool) -> Option<Duration> {
        let x = *v.get_ref();
        if !x.is_finite() {
            self.err(
                span(v),
                field,
                format!("must be a finite number of seconds, got {x}"),
            );
            return None;
        }
        if positive && x <= 0.0 {
            self.err(span(v), field, format!("must be > 0 seconds, got {x}"));
            return None;
        }
        if x < 0.0 {
            self.err(span(v), field, format!("must be >= 0 seconds, got {x}"));
            return None;
        }
        match Duration::try_from_secs_f64(x) {
            Ok(d) => Some(d),
            Err(_) => {
                self.err(span(v), field, format!("{x} seconds is too large"));
                None
            }
        }
    }

    fn opt_seconds(
        &mut self,
        v: &Option<S<f64>>,
        field: &str,
        positive: bool,
        default: Duration,
    ) -> Duration {
        match v {
            Some(v) => self.seconds(v, field, positive).unwrap_or(default),
            None => default,
        }
    }

    /// An integer in `lo..=hi`.
    fn int(&mut self, v: &S<i64>, field: &str, lo: i64, hi: i64) -> Option<i64> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            // With a huge upper bound (u32 ids, counts) only the violated side is worth saying.
            let msg = if hi >= MAX_ID && x < lo {
                format!("must be >= {lo}, got {x}")
            } else if hi >= MAX_ID {
                format!("must be <= {hi}, got {x}")
            } else {
                format!("must be between {lo} and {hi}, got {x}")
            };
            self.err(span(v), field, msg);
            return None;
        }
        Some(x)
    }

    fn u32_count(&mut self, v: &S<i64>, field: &str, lo: i64) -> Option<u32> {
        self.int(v, field, lo, u32::MAX as i64).map(|x| x as u32)
    }

    /// A string that will be passed to the kernel (argv, env, paths): no NUL bytes.
    fn no_nul(&mut self, v: &S<String>, field: &str) -> bool {
        if has_nul(v.get_ref()) {
            self.err(span(v), field, "must not contain a NUL character");
            false
        } else {
            true
        }
    }

    fn abs_path(&mut self, v: &S<String>, field: &str) -> Option<PathBuf> {
        let s = v.get_ref();
        if s.is_empty() {
            self.err(span(v), field, "must not be empty");
            return None;
        }
        if !self.no_nul(v, field) {
            return None;
        }
        if !s.starts_with('/') {
            self.err(
                span(v),
                field,
                format!("must be an absolute path, got {s:?}"),
            );
            return None;
        }
        Some(PathBuf::from(s))
    }

    /// A byte quantity; `Ok(None)` for `"max"` when `allow_max`.
    fn quantity(&mut self, v: &S<StrOrInt>, field: &str, allow_max: bool) -> Option<Option<u64>> {
        match v.get_ref() {
            StrOrInt::Int(n) if *n < 0 => {
                self.err(span(v), field, format!("must be >= 0 bytes, got {n}"));
                None
            }
            StrOrInt::Int(n) => Some(Some(*n as u64)),
            StrOrInt::Str(s) if s.trim() == "max" => {
                if allow_max {
                    Some(None)
                } else {
                    self.err(span(v), field, "\"max\" is not allowed here; give a size");
                    None
                }
            }
            StrOrInt::Str(s) => match values::parse_quantity(s) {
                Ok(n) => Some(Some(n)),
                Err(m) => {
                    self.err(span(v), field, m);
                    None
                }
            },
        }
    }

    /// A user or group: a name or a numeric id, kept as a string (resolved at spawn time).
    fn id_or_name(&mut self, v: &S<StrOrInt>, field: &str) -> Option<String> {
        match v.get_ref() {
            StrOrInt::Int(n) if *n < 0 || *n > MAX_ID => {
                self.err(
                    span(v),
                    field,
                    format!("must be between 0 and {MAX_ID}, got {n}"),
                );
                None
            }
            StrOrInt::Int(n) => Some(n.to_string()),
            StrOrInt::Str(s) if s.trim().is_empty() => {
                self.err(span(v), field, "must not be empty");
                None
            }
            StrOrInt::Str(s) if has_nul(s) || s.contains(':') => {
                self.err(span(v), field, format!("invalid name {s:?}"));
                None
            }
            StrOrInt::Str(s) => Some(s.trim().to_string()),
        }
    }

    fn restart_policy(&mut self, v: &S<String>, field: &str) -> Option<RestartPolicy> {
        match v.get_ref().as_str() {
            "Always" => Some(RestartPolicy::Always),
            "OnFailure" => Some(RestartPolicy::OnFailure),
            "Never" => Some(RestartPolicy::Never),
            other => {
                self.err(
                    span(v),
                    field,
                    format!(
                        "invalid restart_policy {other:?}; expected Always, OnFailure or Never"
                    ),
                );
                None
            }
        }
    }

    // ---- supervisor -----------------------------------------------------------------------

    fn supervisor(&mut self, s: &RawSupervisor) -> SupervisorSpec {
        let mut spec = SupervisorSpec::default();
        let p = "supervisor";
        if let Some(v) = &s.socket {
            spec.socket = self.abs_path(v, &join(p, "socket"));
        }
        if let Some(v) = &s.socket_mode {
            let field = join(p, "socket_mode");
            let mode =
                match v.get_ref() {
                    StrOrInt::Str(t) => values::parse_octal_mode(t),
                    // `socket_mode = 660` is decimal 660 = 0o1224: almost certainly meant octal.
                    StrOrInt::Int(n) => u32::try_from(*n).ok().filter(|m| *m <= 0o777).ok_or_else(
                        || {
                            format!(
                                "{n} is out of range (integers are decimal); write the mode as an \
                             octal string like \"0{n}\" or as 0o{n}"
                            )
                        },
                    ),
                };
            match mode {
                Ok(m) => spec.socket_mode = m,
                Err(m) => self.err(span(v), &field, m),
            }
        }
        if let Some(v) = &s.socket_group {
            spec.socket_group = self.id_or_name(v, &join(p, "socket_group"));
        }
        for (key, list) in [("admin_uids", &s.admin_uids), ("admin_gids", &s.admin_gids)] {
            let Some(list) = list else { continue };
            let mut ids = Vec::new();
            for (i, v) in list.iter().enumerate() {
                let field = format!("{}[{i}]", join(p, key));
                if let Some(id) = self.int(v, &field, 0, MAX_ID) {
                    ids.push(id as u32);
                }
            }
            if key == "admin_uids" {
                spec.admin_uids = ids;
            } else {
                spec.admin_gids = ids;
            }
        }
        if let Some(v) = &s.cgroup_root {
            let field = join(p, "cgroup_root");
            match v.get_ref().as_str() {
                "auto" => spec.cgroup_root = CgroupRoot::Auto,
                "none" => spec.cgroup_root = CgroupRoot::None,
                path if path.starts_with('/') && !has_nul(path) => {
                    spec.cgroup_root = CgroupRoot::Path(PathBuf::from(path));
                }
                other => self.err(
                    span(v),
                    &field,
                    format!("invalid cgroup_root {other:?}; expected \"auto\", \"none\" or an absolute path"),
                ),
            }
        }
        if let Some(v) = &s.cgroup_name {
            match values::check_name(v.get_ref(), "cgroup") {
                Ok(()) => spec.cgroup_name = v.get_ref().clone(),
                Err(m) => self.err(span(v), &join(p, "cgroup_name"), m),
            }
        }
        if let Some(v) = &s.log_dir {
            spec.log_dir = self.abs_path(v, &join(p, "log_dir"));
        }
        if let Some(v) = &s.log_max_file_bytes {
            let field = join(p, "log_max_file_bytes");
            match self.quantity(v, &field, false) {
                Some(Some(0)) => self.err(span(v), &field, "must be > 0 bytes"),
                Some(Some(n)) => spec.log_max_file_bytes = n,
                _ => {}
            }
        }
        if let Some(v) = &s.log_max_files
            && let Some(n) = self.u32_count(v, &join(p, "log_max_files"), 0)
        {
            spec.log_max_files = n;
        }
        if let Some(v) = &s.log_buffer_bytes {
            let field = join(p, "log_buffer_bytes");
            match self.quantity(v, &field, false) {
                Some(Some(0)) => self.err(span(v), &field, "must be > 0 bytes"),
                Some(Some(n)) => match usize::try_from(n) {
                    Ok(n) => spec.log_buffer_bytes = n,
                    Err(_) => self.err(span(v), &field, "is too large"),
                },
                _ => {}
            }
        }
        if let Some(v) = &s.log_forward {
            spec.log_forward = *v.get_ref();
        }
        spec.shutdown_timeout = self.opt_seconds(
            &s.shutdown_timeout_seconds,
            &join(p, "shutdown_timeout_seconds"),
            false,
            spec.shutdown_timeout,
        );
        if let Some(v) = &s.max_connections_per_uid
            && let Some(n) = self.int(v, &join(p, "max_connections_per_uid"), 1, 1 << 20)
        {
            spec.max_connections_per_uid = n as usize;
        }
        spec.client_idle_timeout = self.opt_seconds(
            &s.client_idle_timeout_seconds,
            &join(p, "client_idle_timeout_seconds"),
            true,
            spec.client_idle_timeout,
        );
        if let Some(v) = &s.client_fd_percent
            && let Some(n) = self.int(v, &join(p, "client_fd_percent"), 1, 90)
        {
            spec.client_fd_percent = n as u32;
        }
        if let Some(v) = &s.on_restart {
            match v.get_ref().as_str() {
                "adopt" => spec.on_restart = OnRestart::Adopt,
                "replace" => spec.on_restart = OnRestart::Replace,
                other => self.err(
                    span(v),
                    &join(p, "on_restart"),
                    format!("invalid on_restart {other:?}; expected \"adopt\" or \"replace\""),
                ),
            }
        }
        if let Some(v) = &s.oom_score_adj {
            let field = join(p, "oom_score_adj");
            match v.get_ref() {
                StrOrInt::Int(n) if (-1000..=1000).contains(n) => {
                    spec.oom_score_adj = Some(*n as i32);
                }
                StrOrInt::Str(t) if t == "inherit" => spec.oom_score_adj = None,
                StrOrInt::Int(n) => self.err(
                    span(v),
                    &field,
                    format!("must be between -1000 and 1000, got {n}"),
                ),
                StrOrInt::Str(t) => self.err(
                    span(v),
                    &field,
                    format!("invalid value {t:?}; expected -1000..1000 or \"inherit\""),
                ),
            }
        }
        spec
    }

    // ---- pods -----------------------------------------------------------------------------

    /// Fold a `backoff` table over `base`; check `max >= initial` if the table set anything.
    fn backoff(&mut self, base: Backoff, raw: Option<&S<RawBackoff>>, path: &str) -> Backoff {
        let Some(raw_s) = raw else { return base };
        let raw = raw_s.get_ref();
        let p = join(path, "backoff");
        let b = Backoff {
            initial: self.opt_seconds(
                &raw.initial_seconds,
                &join(&p, "initial_seconds"),
                false,
                base.initial,
            ),
            max: self.opt_seconds(&raw.max_seconds, &join(&p, "max_seconds"), false, base.max),
            reset_after: self.opt_seconds(
                &raw.reset_after_seconds,
                &join(&p, "reset_after_seconds"),
                true,
                base.reset_after,
            ),
        };
        if b.max < b.initial {
            let (sp, field) = match (&raw.max_seconds, &raw.initial_seconds) {
                (Some(m), _) => (span(m), join(&p, "max_seconds")),
                (None, Some(i)) => (span(i), join(&p, "initial_seconds")),
                (None, None) => (span(raw_s), p.clone()),
            };
            self.err(
                sp,
                &field,
                format!(
                    "max_seconds ({}) must be >= initial_seconds ({})",
                    b.max.as_secs_f64(),
                    b.initial.as_secs_f64()
                ),
            );
        }
        b
    }

    fn pod(&mut self, name: &S<String>, raw_s: &S<RawPod>) -> PodSpec {
        let raw = raw_s.get_ref();
        let pod_name = name.get_ref().clone();
        let path = join("pods", &pod_name);
        if let Err(m) = values::check_name(&pod_name, "pod") {
            self.err(span(name), &path, m);
        }
        let restart_policy = raw
            .restart_policy
            .as_ref()
            .and_then(|v| self.restart_policy(v, &join(&path, "restart_policy")))
            .unwrap_or_default();
        let defaults = PodDefaults {
            restart_policy,
            grace: self.opt_seconds(
                &raw.termination_grace_period_seconds,
                &join(&path, "termination_grace_period_seconds"),
                false,
                DEFAULT_GRACE,
            ),
            backoff: self.backoff(Backoff::default(), raw.backoff.as_ref(), &path),
            max_restarts: raw
                .max_restarts
                .as_ref()
                .and_then(|v| self.u32_count(v, &join(&path, "max_restarts"), 0)),
        };

        let no_containers = raw.containers.as_ref().is_none_or(|c| c.is_empty());
        if no_containers {
            self.err(
                span(raw_s),
                &join(&path, "containers"),
                format!("pod has no containers; add at least one [[{path}.containers]] table"),
            );
        }

        let mut seen: BTreeMap<String, ()> = BTreeMap::new();
        let mut build = |v: &mut Self,
                         list: &Option<Vec<S<RawContainer>>>,
                         key: &str,
                         init: bool| {
            let mut out = Vec::new();
            for (i, c) in list.iter().flatten().enumerate() {
                let cpath = format!("{}[{i}]", join(&path, key));
                if let Some(n) = &c.get_ref().name
                    && seen.insert(n.get_ref().clone(), ()).is_some()
                {
                    v.err(
                        span(n),
                        &join(&cpath, "name"),
                        format!(
                            "duplicate container name {:?} in pod {pod_name:?} (init_containers and containers share one namespace)",
                            n.get_ref()
                        ),
                    );
                }
                out.push(v.container(c, &cpath, &defaults, init));
            }
            out
        };
        let init_containers = build(self, &raw.init_containers, "init_containers", true);
        let containers = build(self, &raw.containers, "containers", false);
        // A whole-pod stop's budget: the pod's key when written, else the longest container
        // grace (the unwritten pod key is only the containers' default).
        let termination_grace = match raw.termination_grace_period_seconds {
            Some(_) => defaults.grace,
            None => init_containers
                .iter()
                .chain(&containers)
                .map(|c| c.termination_grace)
                .max()
                .unwrap_or(defaults.grace),
        };
        PodSpec {
            name: pod_name,
            restart_policy,
            depends_on: Vec::new(),
            init_containers,
            containers,
            termination_grace,
        }
    }

    fn container(
        &mut self,
        raw_s: &S<RawContainer>,
        path: &str,
        pod: &PodDefaults,
        init: bool,
    ) -> ContainerSpec {
        let raw = raw_s.get_ref();
        let what = if init { "init container" } else { "container" };
        let name = match &raw.name {
            Some(n) => {
                if let Err(m) = values::check_name(n.get_ref(), "container") {
                    self.err(span(n), &join(path, "name"), m);
                }
                n.get_ref().clone()
            }
            None => {
                self.err(
                    span(raw_s),
                    &join(path, "name"),
                    format!("missing required key \"name\" in {what}"),
                );
                String::new()
            }
        };
        let command = match &raw.command {
            Some(c) => self.argv(c, &join(path, "command")),
            None => {
                self.err(
                    span(raw_s),
                    &join(path, "command"),
                    format!("missing required key \"command\" in {what}"),
                );
                Vec::new()
            }
        };
        let image = match &raw.image {
            Some(v)
                if v.get_ref().trim().is_empty() || v.get_ref().contains(char::is_whitespace) =>
            {
                self.err(
                    span(v),
                    &join(path, "image"),
                    format!(
                        "invalid image {:?}: expected a reference like \"registry/app:1.2\"",
                        v.get_ref()
                    ),
                );
                None
            }
            Some(v) => Some(v.get_ref().clone()),
            None => None,
        };
        let mut env = Vec::new();
        for (k, val) in raw.env.iter().flatten() {
            let field = join(&join(path, "env"), k.get_ref());
            let key = k.get_ref();
            if key.is_empty() || key.contains('=') || has_nul(key) {
                self.err(
                    span(k),
                    &field,
                    format!(
                        "invalid environment variable name {key:?} (must be non-empty, without '=')"
                    ),
                );
            } else if self.no_nul(val, &field) {
                env.push((key.clone(), val.get_ref().clone()));
            }
        }
        let working_dir = raw
            .working_dir
            .as_ref()
            .and_then(|v| self.abs_path(v, &join(path, "working_dir")));
        let env_file = raw
            .env_file
            .as_ref()
            .and_then(|v| self.abs_path(v, &join(path, "env_file")));
        let user = raw
            .user
            .as_ref()
            .and_then(|v| self.id_or_name(v, &join(path, "user")));
        let group = raw
            .group
            .as_ref()
            .and_then(|v| self.id_or_name(v, &join(path, "group")));
        let (stop_signal, stop_signal_name) = match &raw.stop_signal {
            None => (libc::SIGTERM, "SIGTERM".to_string()),
            Some(v) => {
                let r = match v.get_ref() {
                    StrOrInt::Str(s) => values::parse_signal_name(s),
                    StrOrInt::Int(n) => values::signal_number(*n),
                };
                r.unwrap_or_else(|m| {
                    self.err(span(v), &join(path, "stop_signal"), m);
                    (libc::SIGTERM, "SIGTERM".to_string())
                })
            }
        };
        let restart_policy = match &raw.restart_policy {
            Some(v) => {
                let field = join(path, "restart_policy");
                // On an init container, `Always` written out makes it a sidecar (Kubernetes
                // 1.29 restartable init container); the pod's `Always` never does (below).
                self.restart_policy(v, &field).unwrap_or(pod.restart_policy)
            }
            None if init && pod.restart_policy == RestartPolicy::Always => RestartPolicy::OnFailure,
            None => pod.restart_policy,
        };
        let termination_grace = self.opt_seconds(
            &raw.termination_grace_period_seconds,
            &join(path, "termination_grace_period_seconds"),
            false,
            pod.grace,
        );
        let backoff = self.backoff(pod.backoff, raw.backoff.as_ref(), path);
        let max_restarts = match &raw.max_restarts {
            Some(v) => self.u32_count(v, &join(path, "max_restarts"), 0),
            None => pod.max_restarts,
        };
        let mut capabilities: Vec<String> = Vec::new();
        for (i, c) in raw.capabilities.iter().flatten().enumerate() {
            match values::parse_capability(c.get_ref()) {
                Ok(cap) if !capabilities.contains(&cap) => capabilities.push(cap),
                Ok(_) => {}
                Err(m) => self.err(span(c), &format!("{}[{i}]", join(path, "capabilities")), m),
            }
        }
        let no_new_privs = raw.no_new_privs.as_ref().is_none_or(|v| *v.get_ref());
        let rlimits = self.rlimits(raw.rlimits.as_ref(), path);
        let resources = match &raw.resources {
            Some(r) => self.resources(r.get_ref(), &join(path, "resources")),
            None => Resources::default(),
        };
        let sidecar = init && restart_policy == RestartPolicy::Always;
        let probe = |v: &mut Self, p: &Option<S<RawProbe>>, kind: ProbeKind| {
            let p = p.as_ref()?;
            let field = join(path, &format!("{}_probe", kind.as_str()));
            if init && !sidecar {
                v.err(
                    span(p),
                    &field,
                    "probes are not supported on init containers that run to completion (only on sidecars: restart_policy = \"Always\")",
                );
                return None;
            }
            v.probe(p, &field, kind)
        };
        let startup_probe = probe(self, &raw.startup_probe, ProbeKind::Startup);
        let liveness_probe = probe(self, &raw.liveness_probe, ProbeKind::Liveness);
        let readiness_probe = probe(self, &raw.readiness_probe, ProbeKind::Readiness);
        let lifecycle = match &raw.lifecycle {
            None => Lifecycle::default(),
            Some(l) => {
                let lp = join(path, "lifecycle");
                let l = l.get_ref();
                Lifecycle {
                    post_start: l
                        .post_start
                        .as_ref()
                        .and_then(|h| self.hook(h, &join(&lp, "post_start"))),
                    pre_stop: l
                        .pre_stop
                        .as_ref()
                        .and_then(|h| self.hook(h, &join(&lp, "pre_stop"))),
                }
            }
        };
        let termination_message_path = raw
            .termination_message_path
            .as_ref()
            .and_then(|v| self.abs_path(v, &join(path, "termination_message_path")));
        let termination_message_policy = match &raw.termination_message_policy {
            None => TerminationMessagePolicy::File,
            Some(v) => match v.get_ref().as_str() {
                "File" => TerminationMessagePolicy::File,
                "FallbackToLogsOnError" => TerminationMessagePolicy::FallbackToLogsOnError,
                other => {
                    self.err(
                        span(v),
                        &join(path, "termination_message_policy"),
                        format!(
                            "invalid termination_message_policy {other:?}; expected File or FallbackToLogsOnError"
                        ),
                    );
                    TerminationMessagePolicy::File
                }
            },
        };
        ContainerSpec {
            name,
            command,
            image,
            env,
            env_file,
            working_dir,
            user,
            group,
            stop_signal,
            stop_signal_name,
            restart_policy,
            termination_grace,
            backoff,
            max_restarts,
            capabilities,
            no_new_privs,
            rlimits,
            resources,
            startup_probe,
            liveness_probe,
            readiness_probe,
            termination_message_path,
            termination_message_policy,
            lifecycle,
        }
    }

    /// A command line: non-empty, `argv[0]` non-empty, no NULs.
    fn argv(&mut self, v: &S<Vec<S<String>>>, field: &str) -> Vec<String> {
        let items = v.get_ref();
        if items.is_empty() {
            self.err(
                span(v),
                field,
                "must not be empty: give at least the program to run",
            );
            return Vec::new();
        }
        if items[0].get_ref().trim().is_empty() {
            self.err(
                span(&items[0]),
                &format!("{field}[0]"),
                "must not be empty: it is the program to run",
            );
        }
        for (i, a) in items.iter().enumerate() {
            self.no_nul(a, &format!("{field}[{i}]"));
        }
        items.iter().map(|a| a.get_ref().clone()).collect()
    }

    fn rlimits(
        &mut self,
        raw: Option<&BTreeMap<S<String>, S<RawRlimit>>>,
        path: &str,
    ) -> Vec<Rlimit> {
        let mut out = Vec::new();
        for (k, v) in raw.into_iter().flatten() {
            let field = join(&join(path, "rlimits"), k.get_ref());
            let (name, resource) = match values::parse_rlimit_name(k.get_ref()) {
                Ok(r) => r,
                Err(m) => {
                    self.err(span(k), &field, m);
                    continue;
                }
            };
            let one = |x: &StrOrInt| match x {
                StrOrInt::Int(n) if *n < 0 => Err(format!("must be >= 0, got {n}")),
                StrOrInt::Int(n) => Ok(*n as u64),
                StrOrInt::Str(s) => values::parse_rlimit_str(s),
            };
            let pair = match v.get_ref() {
                RawRlimit::Both(x) => one(x).map(|n| (n, n)),
                RawRlimit::Pair {
                    soft: Some(s),
                    hard: Some(h),
                } => one(s).and_then(|s| Ok((s, one(h)?))),
                RawRlimit::Pair { .. } => Err("needs both soft and hard".to_string()),
            };
            match pair {
                Ok((soft, hard)) if soft > hard => self.err(
                    span(v),
                    &field,
                    format!("soft limit ({soft}) must be <= hard limit ({hard})"),
                ),
                Ok((soft, hard)) => out.push(Rlimit {
                    resource,
                    name,
                    soft,
                    hard,
                }),
                Err(m) => self.err(span(v), &field, m),
            }
        }
        out
    }

    fn resources(&mut self, r: &RawResources, path: &str) -> Resources {
        let mut out = Resources::default();
        for (key, raw, slot, zero_ok) in [
            ("memory_max", &r.memory_max, &mut out.memory_max, false),
            ("memory_high", &r.memory_high, &mut out.memory_high, false),
            ("swap_max", &r.swap_max, &mut out.swap_max, true),
        ] {
            let Some(v) = raw else { continue };
            let field = join(path, key);
            match self.quantity(v, &field, true) {
                Some(Some(0)) if !zero_ok => self.err(
                    span(v),
                    &field,
                    "must be > 0 (a zero limit would OOM-kill at once); use \"max\" for no limit",
                ),
                Some(q) => *slot = q,
                None => {}
            }
        }
        if let Some(v) = &r.pids_max {
            let field = join(path, "pids_max");
            match v.get_ref() {
                StrOrInt::Int(n) if *n >= 1 => out.pids_max = Some(*n as u64),
                StrOrInt::Int(n) => self.err(span(v), &field, format!("must be >= 1, got {n}")),
                StrOrInt::Str(s) if s.trim() == "max" => out.pids_max = None,
                StrOrInt::Str(s) => self.err(
                    span(v),
                    &field,
                    format!("invalid value {s:?}; expected an integer >= 1 or \"max\""),
                ),
            }
        }
        if let Some(v) = &r.cpu_max {
            let field = join(path, "cpu_max");
            // cpu.max quota is at least 1 ms per 100 ms period (kernel/sched/core.c,
            // min_cfs_quota_period), i.e. 0.01 cores.
            match v.get_ref() {
                NumOrStr::Num(x) if x.is_finite() && *x >= 0.01 && *x <= 1e6 => {
                    out.cpu_max = Some(*x);
                }
                NumOrStr::Num(x) if x.is_finite() && *x > 1e6 => {
                    self.err(span(v), &field, format!("{x} cores is too large"));
                }
                NumOrStr::Num(x) => self.err(
                    span(v),
                    &field,
                    format!("must be > 0 cores (at least 0.01), got {x}"),
                ),
                NumOrStr::Str(s) if s.trim() == "max" => out.cpu_max = None,
                NumOrStr::Str(s) => self.err(
                    span(v),
                    &field,
                    format!("invalid value {s:?}; expected a number of cores like 1.5 or \"max\""),
                ),
            }
        }
        if let Some(v) = &r.cpu_weight {
            // cgroup-v2.rst: cpu.weight range [1, 10000], default 100.
            out.cpu_weight = self
                .int(v, &join(path, "cpu_weight"), 1, 10000)
                .map(|x| x as u32);
        }
        if let Some(v) = &r.oom_group {
            out.oom_group = *v.get_ref();
        }
        out
    }

    /// A lifecycle hook: exactly one of `exec`, `http_get` (checked as a probe's) or `sleep`.
    fn hook(&mut self, raw_s: &S<RawProbe>, path: &str) -> Option<Hook> {
        let raw = raw_s.get_ref();
        let present: Vec<&str> = [
            raw.exec.as_ref().map(|_| "exec"),
            raw.http_get.as_ref().map(|_| "http_get"),
            raw.sleep.as_ref().map(|_| "sleep"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if present.len() != 1 {
            let message = if present.is_empty() {
                "hook needs exactly one action: exec, http_get or sleep".to_string()
            } else {
                format!(
                    "hook has more than one action ({}); keep exactly one",
                    present.join(", ")
                )
            };
            self.err(span(raw_s), path, message);
            return None;
        }
        if let Some(s) = &raw.sleep {
            let field = join(&join(path, "sleep"), "seconds");
            return match &s.get_ref().seconds {
                Some(v) => self.seconds(v, &field, false).map(Hook::Sleep),
                None => {
                    self.err(span(s), &field, "missing required key \"seconds\" in sleep");
                    None
                }
            };
        }
        self.probe(raw_s, path, ProbeKind::Liveness)
            .map(|p| Hook::Action(p.action))
    }

    fn probe(&mut self, raw_s: &S<RawProbe>, path: &str, kind: ProbeKind) -> Option<ProbeSpec> {
        let raw = raw_s.get_ref();
        let mut actions: Vec<(&str, Range<usize>)> = Vec::new();
        if let Some(e) = &raw.exec {
            actions.push(("exec", span(e)));
        }
        if let Some(h) = &raw.http_get {
            actions.push(("http_get", span(h)));
        }
        if let Some(t) = &raw.tcp_socket {
            actions.push(("tcp_socket", span(t)));
        }
        if let Some(g) = &raw.grpc {
            actions.push(("grpc", span(g)));
        }
        if actions.is_empty() {
            self.err(
                span(raw_s),
                path,
                "probe needs exactly one action: exec, http_get, tcp_socket or grpc",
            );
        }
        if actions.len() > 1 {
            let names: Vec<&str> = actions.iter().map(|a| a.0).collect();
            let (second, sp) = actions[1].clone();
            self.err(
                sp,
                &join(path, second),
                format!(
                    "probe has more than one action ({}); keep exactly one",
                    names.join(", ")
                ),
            );
        }
        // Every action present is checked, so a second problem is not hidden by the first.
        let exec = raw.exec.as_ref().and_then(|e| {
            let field = join(&join(path, "exec"), "command");
            match &e.get_ref().command {
                Some(c) => Some(ProbeAction::Exec {
                    command: self.argv(c, &field),
                }),
                None => {
                    self.err(span(e), &field, "missing required key \"command\" in exec");
                    None
                }
            }
        });
        let http = raw.http_get.as_ref().map(|h| {
            let p = join(path, "http_get");
            let hr = h.get_ref();
            let port = self.port(hr.port.as_ref(), span(h), &p);
            let host = self.host(hr.host.as_ref(), &p);
            let path_s = match &hr.path {
                Some(v) if v.get_ref().starts_with('/') => v.get_ref().clone(),
                Some(v) => {
                    self.err(
                        span(v),
                        &join(&p, "path"),
                        format!("must start with '/', got {:?}", v.get_ref()),
                    );
                    String::new()
                }
                None => "/".to_string(),
            };
            let scheme = match &hr.scheme {
                None => HttpScheme::Http,
                Some(v) => match v.get_ref().as_str() {
                    "http" | "HTTP" => HttpScheme::Http,
                    "https" | "HTTPS" => HttpScheme::Https,
                    other => {
                        self.err(
                            span(v),
                            &join(&p, "scheme"),
                            format!("unsupported scheme {other:?}; use \"HTTP\" or \"HTTPS\""),
                        );
                        HttpScheme::Http
                    }
                },
            };
            let tls = self.tls(hr.tls.as_ref(), scheme, &join(&p, "tls"));
            let headers = self.headers(hr.headers.as_ref(), &join(&p, "headers"));
            ProbeAction::HttpGet {
                host,
                port: port.unwrap_or(0),
                path: path_s,
                headers,
                scheme,
                tls,
            }
        });
        let tcp = raw.tcp_socket.as_ref().map(|t| {
            let p = join(path, "tcp_socket");
            let tr = t.get_ref();
            let port = self.port(tr.port.as_ref(), span(t), &p);
            let host = self.host(tr.host.as_ref(), &p);
            ProbeAction::TcpSocket {
                host,
                port: port.unwrap_or(0),
            }
        });
        let grpc = raw.grpc.as_ref().map(|g| {
            let p = join(path, "grpc");
            let gr = g.get_ref();
            let port = self.port(gr.port.as_ref(), span(g), &p);
            let host = self.host(gr.host.as_ref(), &p);
            let service = match &gr.service {
                Some(v) if self.no_nul(v, &join(&p, "service")) => v.get_ref().clone(),
                _ => String::new(),
            };
            ProbeAction::Grpc {
                host,
                port: port.unwrap_or(0),
                service,
            }
        });
        let action = exec.or(http).or(tcp).or(grpc);
        let initial_delay = self.opt_seconds(
            &raw.initial_delay_seconds,
            &join(path, "initial_delay_seconds"),
            false,
            Duration::ZERO,
        );
        let period = self.opt_seconds(
            &raw.period_seconds,
            &join(path, "period_seconds"),
            true,
            Duration::from_secs(10),
        );
        let timeout = self.opt_seconds(
            &raw.timeout_seconds,
            &join(path, "timeout_seconds"),
            true,
            Duration::from_secs(1),
        );
        let success_threshold = match &raw.success_threshold {
            Some(v) => {
                let field = join(path, "success_threshold");
                let n = self.u32_count(v, &field, 1);
                if kind != ProbeKind::Readiness && n.is_some_and(|n| n != 1) {
                    self.err(
                        span(v),
                        &field,
                        format!(
                            "must be 1 for {} probes, got {}",
                            kind.as_str(),
                            v.get_ref()
                        ),
                    );
                }
                n.unwrap_or(1)
            }
            None => 1,
        };
        let failure_threshold = raw
            .failure_threshold
            .as_ref()
            .and_then(|v| self.u32_count(v, &join(path, "failure_threshold"), 1))
            .unwrap_or(3);
        let termination_grace = raw
            .termination_grace_period_seconds
            .as_ref()
            .and_then(|v| self.seconds(v, &join(path, "termination_grace_period_seconds"), false));
        Some(ProbeSpec {
            action: action?,
            initial_delay,
            period,
            timeout,
            success_threshold,
            failure_threshold,
            termination_grace,
        })
    }

    fn port(&mut self, v: Option<&S<i64>>, table: Range<usize>, path: &str) -> Option<u16> {
        match v {
            Some(v) => self.int(v, &join(path, "port"), 1, 65535).map(|p| p as u16),
            None => {
                self.err(table, &join(path, "port"), "missing required key \"port\"");
                None
            }
        }
    }

    /// `http_get.tls`: only for HTTPS; `ca_file` absolute; `server_name` a DNS name or an
    /// IP address (the forms rustls accepts as a server name).
    fn tls(&mut self, raw: Option<&S<RawTls>>, scheme: HttpScheme, path: &str) -> TlsSpec {
        let Some(raw) = raw else {
            return TlsSpec::default();
        };
        if scheme != HttpScheme::Https {
            self.err(
                span(raw),
                path,
                "tls applies to scheme = \"HTTPS\" only; remove it or set the scheme",
            );
        }
        let r = raw.get_ref();
        let ca_file = r
            .ca_file
            .as_ref()
            .and_then(|v| self.abs_path(v, &join(path, "ca_file")));
        let server_name = r.server_name.as_ref().and_then(|v| {
            let name = v.get_ref().trim();
            if rustls::pki_types::ServerName::try_from(name).is_err() {
                self.err(
                    span(v),
                    &join(path, "server_name"),
                    format!("must be a DNS name or an IP address, got {:?}", v.get_ref()),
                );
                return None;
            }
            Some(name.to_string())
        });
        TlsSpec {
            ca_file,
            server_name,
        }
    }

    fn host(&mut self, v: Option<&S<String>>, path: &str) -> String {
        match v {
            Some(h) if h.get_ref().trim().is_empty() || has_nul(h.get_ref()) => {
                self.err(
                    span(h),
                    &join(path, "host"),
                    "must be a non-empty host name or address",
                );
                String::new()
            }
            Some(h) => h.get_ref().trim().to_string(),
            None => "127.0.0.1".to_string(),
        }
    }

    /// Header names are RFC 9110 tokens; values must not smuggle line breaks.
    fn headers(&mut self, raw: Option<&StrMap>, path: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v) in raw.into_iter().flatten() {
            let field = join(path, k.get_ref());
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if k.get_ref().is_empty() || !k.get_ref().chars().all(token) {
                self.err(
                    span(k),
                    &field,
                    format!("invalid header name {:?}", k.get_ref()),
                );
            } else if v.get_ref().contains(['\r', '\n', '\0']) {
                self.err(
                    span(v),
                    &field,
                    "header value must not contain line breaks or NUL",
                );
            } else {
                out.push((k.get_ref().clone(), v.get_ref().clone()));
            }
        }
        out
    }

    // ---- depends_on -----------------------------------------------------------------------

    fn dependencies(&mut self, raw: &BTreeMap<S<String>, S<RawPod>>, pods: &mut [PodSpec]) {
        let names: BTreeSet<&str> = raw.keys().map(|k| k.get_ref().as_str()).collect();
        // Valid edges, for cycle detection: pod → [(target, span of the key naming it)].
        let mut edges: BTreeMap<&str, Vec<(&str, Range<usize>)>> = BTreeMap::new();
        for ((name, pod), spec) in raw.iter().zip(pods.iter_mut()) {
            let me = name.get_ref().as_str();
            let path = join(&join("pods", me), "depends_on");
            for (target, cond) in pod.get_ref().depends_on.iter().flatten() {
                let t = target.get_ref().as_str();
                let field = join(&path, t);
                let condition = match cond.get_ref().as_str() {
                    "started" => Some(DependencyCondition::Started),
                    "ready" => Some(DependencyCondition::Ready),
                    "completed" => Some(DependencyCondition::Completed),
                    other => {
                        self.err(
                            span(cond),
                            &field,
                            format!(
                                "invalid condition {other:?}; expected started, ready or completed"
                            ),
                        );
                        None
                    }
                };
                if t == me {
                    self.err(span(target), &field, "a pod cannot depend on itself");
                    continue;
                }
                if !names.contains(t) {
                    let hint = names
                        .iter()
                        .map(|n| (values::edit_distance(t, n), *n))
                        .min()
                        .filter(|(d, _)| *d <= 2)
                        .map(|(_, n)| format!("; did you mean {n:?}?"))
                        .unwrap_or_default();
                    self.err(
                        span(target),
                        &field,
                        format!("depends on unknown pod {t:?}{hint}"),
                    );
                    continue;
                }
                edges.entry(me).or_default().push((t, span(target)));
                let Some(condition) = condition else { continue };
                if condition == DependencyCondition::Completed
                    && let Some(forever) = self.never_completes(raw, t)
                {
                    self.err(span(cond), &field, forever);
                }
                spec.depends_on.push(Dependency {
                    pod: t.to_string(),
                    condition,
                });
            }
        }
        self.cycles(&names, &edges);
    }

    /// Why pod `name` can never reach Succeeded (a container restarts on success), if so.
    fn never_completes(&self, raw: &BTreeMap<S<String>, S<RawPod>>, name: &str) -> Option<String> {
        let (_, pod) = raw.iter().find(|(k, _)| k.get_ref() == name)?;
        let pod = pod.get_ref();
        let pod_policy = pod.restart_policy.as_ref().map(|p| p.get_ref().as_str());
        for c in pod.containers.iter().flatten() {
            let c = c.get_ref();
            let policy = c
                .restart_policy
                .as_ref()
                .map(|p| p.get_ref().as_str())
                .or(pod_policy)
                .unwrap_or("Always");
            if policy == "Always" {
                let cname = c.name.as_ref().map_or("?", |n| n.get_ref().as_str());
                return Some(format!(
                    "pod {name:?} can never complete: its container {cname:?} has restart_policy Always"
                ));
            }
        }
        None
    }

    /// Report each dependency cycle once, as `a -> b -> a`, at the edge that closes it.
    fn cycles(
        &mut self,
        names: &BTreeSet<&str>,
        edges: &BTreeMap<&str, Vec<(&str, Range<usize>)>>,
    ) {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnStack,
            Done,
        }
        let mut marks: BTreeMap<&str, Mark> = names.iter().map(|n| (*n, Mark::New)).collect();
        let mut found: Vec<Problem> = Vec::new();
        fn visit<'a>(
            n: &'a str,
            edges: &BTreeMap<&'a str, Vec<(&'a str, Range<usize>)>>,
            marks: &mut BTreeMap<&'a str, Mark>,
            stack: &mut Vec<&'a str>,
            found: &mut Vec<Problem>,
        ) {
            marks.insert(n, Mark::OnStack);
            stack.push(n);
            for (t, sp) in edges.get(n).into_iter().flatten() {
                match marks.get(t).copied().unwrap_or(Mark::Done) {
                    Mark::New => visit(t, edges, marks, stack, found),
                    Mark::OnStack => {
                        let start = stack.iter().position(|s| s == t).unwrap_or(0);
                        let mut cycle: Vec<&str> = stack[start..].to_vec();
                        cycle.push(t);
                        found.push(Problem::new(
                            sp.clone(),
                            join(&join(&join("pods", n), "depends_on"), t),
                            format!("dependency cycle: {}", cycle.join(" -> ")),
                        ));
                    }
                    Mark::Done => {}
                }
            }
            stack.pop();
            marks.insert(n, Mark::Done);
        }
        for n in names {
            if marks.get(n) == Some(&Mark::New) {
                visit(n, edges, &mut marks, &mut Vec::new(), &mut found);
            }
        }
        self.out.extend(found);
    }
}
