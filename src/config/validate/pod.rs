//! Pods and their containers: names, commands, the pod's defaults folded into each container
//! (restart policy, grace, back-off, max restarts), users, signals, capabilities, rlimits,
//! resources, and which containers may have probes.

use std::collections::BTreeMap;
use std::sync::Arc;

use toml::Spanned;

use super::{Checker, DEFAULT_GRACE, PodDefaults, has_nul, span};
use crate::config::keys::{
    RawBackoff, RawContainer, RawHistory, RawPod, RawPort, RawProbe, RawResources, RawRlimitPair,
    RawSchedule,
};
use crate::config::raw::{NumOrStr, RawRlimit, StrOrInt};
use crate::config::schedule::{CronPattern, Zone};
use crate::config::schema::join;
use crate::config::spec::{
    Backoff, Concurrency, ContainerSpec, HistorySpec, Lifecycle, LinePattern, PodSpec, PortSpec,
    ProbeKind, Resources, RestartPolicy, Rlimit, ScheduleSpec, ShutdownOn,
    TerminationMessagePolicy,
};
use crate::config::values;

impl Checker<'_> {
    /// Fold a `backoff` table over `base`; check `max >= initial` if the table set anything.
    pub(super) fn backoff(
        &mut self,
        base: Backoff,
        raw: Option<&Spanned<RawBackoff>>,
        path: &str,
    ) -> Backoff {
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

    pub(super) fn pod(&mut self, name: &Spanned<String>, raw_s: &Spanned<RawPod>) -> PodSpec {
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
                         list: &Option<Vec<Spanned<RawContainer>>>,
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
                out.push(Arc::new(v.container(c, &cpath, &defaults, init)));
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
        let shutdown_on = raw.shutdown_on.as_ref().and_then(|v| {
            let on = match v.get_ref().as_str() {
                "completed" => ShutdownOn::Completed,
                "failed" => ShutdownOn::Failed,
                "ended" => ShutdownOn::Ended,
                "dependency_failed" => ShutdownOn::DependencyFailed,
                other => {
                    self.err(
                        span(v),
                        &join(&path, "shutdown_on"),
                        format!(
                            "invalid shutdown_on {other:?}; expected completed, failed, ended or dependency_failed"
                        ),
                    );
                    return None;
                }
            };
            Some(on)
        });
        let active_deadline = raw
            .active_deadline_seconds
            .as_ref()
            .and_then(|v| self.seconds(v, &join(&path, "active_deadline_seconds"), true));
        let schedule = raw
            .schedule
            .as_ref()
            .and_then(|s| self.schedule(s, &join(&path, "schedule"), restart_policy));
        let history = match &raw.history {
            Some(h) => self.history(h, &join(&path, "history"), restart_policy),
            None if raw.schedule.is_some() => HistorySpec::SCHEDULED,
            None => HistorySpec::default(),
        };
        PodSpec {
            name: pod_name,
            restart_policy,
            depends_on: Vec::new(),
            init_containers,
            containers,
            termination_grace,
            shutdown_on,
            active_deadline,
            schedule,
            history,
            autostart: raw.autostart.as_ref().is_none_or(|v| *v.get_ref()),
            profiles: self.profiles(raw.profiles.as_deref(), &path),
            replica: None,
            stable_identity: raw.stable_identity.as_ref().is_some_and(|v| *v.get_ref()),
        }
    }

    /// `history = { successful = N, failed = M }`: each in `0..=100`, unwritten 0. Only for a
    /// pod whose runs end (an `Always` pod's run never does).
    fn history(
        &mut self,
        raw_h: &Spanned<RawHistory>,
        path: &str,
        policy: RestartPolicy,
    ) -> HistorySpec {
        if policy == RestartPolicy::Always {
            self.err(
                span(raw_h),
                path,
                "history keeps the ended runs of a pod, and with restart_policy = \"Always\" a \
                 run never ends: set the pod's restart_policy to \"OnFailure\" or \"Never\"",
            );
        }
        let raw = raw_h.get_ref();
        let mut count = |v: &Option<Spanned<i64>>, key: &str| {
            v.as_ref()
                .and_then(|v| self.int(v, &join(path, key), 0, i64::from(HistorySpec::MAX)))
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0)
        };
        HistorySpec {
            successful: count(&raw.successful, "successful"),
            failed: count(&raw.failed, "failed"),
        }
    }

    /// `schedule = { … }`: a cron pattern, its zone and the CronJob's policies. Only for a pod
    /// that runs to completion: a trigger starts a run, and an `Always` pod's run never ends.
    fn schedule(
        &mut self,
        raw_s: &Spanned<RawSchedule>,
        path: &str,
        policy: RestartPolicy,
    ) -> Option<ScheduleSpec> {
        let raw = raw_s.get_ref();
        if policy == RestartPolicy::Always {
            self.err(
                span(raw_s),
                path,
                "a scheduled pod runs to completion: set the pod's restart_policy to \"OnFailure\" \
                 or \"Never\" (with \"Always\" its run would never end)",
            );
        }
        let cron = match &raw.cron {
            Some(c) => match CronPattern::parse(c.get_ref()) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.err(
                        span(c),
                        &join(path, "cron"),
                        format!(
                            "invalid cron pattern {:?}: {e}; expected five fields (minute hour \
                             day-of-month month day-of-week, as in crontab(5)) or @hourly, \
                             @daily, @weekly, @monthly, @yearly",
                            c.get_ref()
                        ),
                    );
                    None
                }
            },
            None => {
                self.err(
                    span(raw_s),
                    &join(path, "cron"),
                    "a schedule needs its cron pattern (cron = \"0 2 * * *\")",
                );
                None
            }
        };
        let zone = match &raw.time_zone {
            Some(z) => match Zone::get(Some(z.get_ref())) {
                Ok(z) => Some(z),
                Err(e) => {
                    self.err(span(z), &join(path, "time_zone"), e);
                    None
                }
            },
            None => Zone::get(None).ok(),
        };
        let concurrency = match raw.concurrency.as_ref() {
            None => Some(Concurrency::Forbid),
            Some(v) => match v.get_ref().as_str() {
                "Forbid" => Some(Concurrency::Forbid),
                "Replace" => Some(Concurrency::Replace),
                "Allow" => {
                    self.err(
                        span(v),
                        &join(path, "concurrency"),
                        "concurrency = \"Allow\" would run two runs of one pod at once, and a \
                         vigil pod has one set of containers (one cgroup, log and status each); \
                         use \"Forbid\" (a trigger waits while a run is active) or \"Replace\" \
                         (it stops the active run)",
                    );
                    None
                }
                other => {
                    self.err(
                        span(v),
                        &join(path, "concurrency"),
                        format!("invalid concurrency {other:?}; expected Forbid or Replace"),
                    );
                    None
                }
            },
        };
        let starting_deadline = raw
            .starting_deadline_seconds
            .as_ref()
            .and_then(|v| self.seconds(v, &join(path, "starting_deadline_seconds"), true));
        Some(ScheduleSpec {
            cron: cron?,
            time_zone: zone?,
            concurrency: concurrency?,
            starting_deadline,
            suspend: raw.suspend.as_ref().is_some_and(|v| *v.get_ref()),
        })
    }

    /// A container's `ports`: each a Kubernetes port name (`IANA_SVC_NAME`, as
    /// `validation.IsValidPortName` checks it: at most 15 lower-case letters, digits and '-',
    /// at least one letter, no '-' at either end or twice in a row) and a port 1 to 65535,
    /// names and ports each once.
    fn ports(&mut self, raw: &[Spanned<RawPort>], path: &str) -> Vec<PortSpec> {
        let mut out: Vec<PortSpec> = Vec::new();
        for (i, p) in raw.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let r = p.get_ref();
            let name = match &r.name {
                Some(n) => {
                    let t = n.get_ref();
                    let valid = !t.is_empty()
                        && t.len() <= 15
                        && t.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && t.chars().any(|c| c.is_ascii_lowercase())
                        && !t.starts_with('-')
                        && !t.ends_with('-')
                        && !t.contains("--");
                    if !valid {
                        self.err(
                            span(n),
                            &join(&at, "name"),
                            format!(
                                "invalid port name {t:?}: at most 15 lower-case letters, digits \
                                 and '-', with at least one letter (a Kubernetes port name)"
                            ),
                        );
                    } else if out.iter().any(|o| &o.name == t) {
                        self.err(
                            span(n),
                            &join(&at, "name"),
                            format!("port name {t:?} is used twice"),
                        );
                    }
                    t.clone()
                }
                None => {
                    self.err(
                        span(p),
                        &join(&at, "name"),
                        "missing required key \"name\" in a port",
                    );
                    String::new()
                }
            };
            let port = match &r.port {
                Some(v) => match u16::try_from(*v.get_ref()) {
                    Ok(n) if n > 0 => {
                        if out.iter().any(|o| o.port == n) {
                            self.err(
                                span(v),
                                &join(&at, "port"),
                                format!("port {n} is named twice"),
                            );
                        }
                        n
                    }
                    _ => {
                        self.err(
                            span(v),
                            &join(&at, "port"),
                            format!("invalid port {}; expected 1 to 65535", v.get_ref()),
                        );
                        0
                    }
                },
                None => {
                    self.err(
                        span(p),
                        &join(&at, "port"),
                        "missing required key \"port\" in a port",
                    );
                    0
                }
            };
            out.push(PortSpec { name, port });
        }
        out
    }

    /// `profiles`: names as pods are named (they are typed on command lines and in
    /// `$VIGIL_PROFILES`, comma-separated), each once.
    fn profiles(&mut self, raw: Option<&[Spanned<String>]>, path: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (i, p) in raw.unwrap_or_default().iter().enumerate() {
            let field = format!("{}[{i}]", join(path, "profiles"));
            let name = p.get_ref();
            if let Err(m) = values::check_profile(name) {
                self.err(span(p), &field, m);
            } else if out.contains(name) {
                self.err(span(p), &field, format!("profile {name:?} is listed twice"));
            } else {
                out.push(name.clone());
            }
        }
        out
    }

    pub(super) fn container(
        &mut self,
        raw_s: &Spanned<RawContainer>,
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
        let run_as_non_root = raw.run_as_non_root.as_ref().is_some_and(|v| *v.get_ref());
        let rlimits = self.rlimits(raw.rlimits.as_ref(), path);
        let resources = match &raw.resources {
            Some(r) => self.resources(r.get_ref(), &join(path, "resources")),
            None => Resources::default(),
        };
        let sidecar = init && restart_policy == RestartPolicy::Always;
        let probe = |v: &mut Self, p: &Option<Spanned<RawProbe>>, kind: ProbeKind| {
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
        let mut success_exit_codes = Vec::new();
        for (i, v) in raw.success_exit_codes.iter().flatten().enumerate() {
            match i32::try_from(*v.get_ref()) {
                Ok(code @ 0..=255) => success_exit_codes.push(code),
                _ => self.err(
                    span(v),
                    &format!("{}[{i}]", join(path, "success_exit_codes")),
                    format!(
                        "invalid exit code {}; an exit code is 0 to 255 (a signal is not an exit code)",
                        v.get_ref()
                    ),
                ),
            }
        }
        let ports = self.ports(raw.ports.as_deref().unwrap_or(&[]), &join(path, "ports"));
        let notify = match &raw.notify {
            Some(v) if *v.get_ref() && init && !sidecar => {
                self.err(
                    span(v),
                    &join(path, "notify"),
                    "notify is not supported on init containers that run to completion (only on sidecars: restart_policy = \"Always\"): their readiness is their completion",
                );
                false
            }
            Some(v) => *v.get_ref(),
            None => false,
        };
        let ready_log_line = raw.ready_log_line.as_ref().and_then(|v| {
            let refused = if init && !sidecar {
                Err("ready_log_line is not supported on init containers that run to completion (only on sidecars: restart_policy = \"Always\"): their readiness is their completion".to_string())
            } else if notify {
                Err("ready_log_line and notify = true are two ways for a run to say it is ready; choose one".to_string())
            } else {
                LinePattern::new(v.get_ref())
            };
            refused
                .map_err(|message| self.err(span(v), &join(path, "ready_log_line"), message))
                .ok()
        });
        let watchdog = match &raw.watchdog_seconds {
            Some(v) if !notify => {
                self.err(
                    span(v),
                    &join(path, "watchdog_seconds"),
                    "watchdog_seconds needs notify = true: the WATCHDOG=1 keep-alives come over the container's NOTIFY_SOCKET",
                );
                None
            }
            Some(v) => self.seconds(v, &join(path, "watchdog_seconds"), true),
            None => None,
        };
        let start_timeout = match &raw.start_timeout_seconds {
            Some(v) if !notify => {
                self.err(
                    span(v),
                    &join(path, "start_timeout_seconds"),
                    "start_timeout_seconds needs notify = true: the start-up ends with the READY=1 that comes over the container's NOTIFY_SOCKET",
                );
                None
            }
            Some(v) => self.seconds(v, &join(path, "start_timeout_seconds"), true),
            None => None,
        };
        ContainerSpec {
            ports,
            success_exit_codes,
            notify,
            ready_log_line,
            watchdog,
            start_timeout,
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
            run_as_non_root,
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
    pub(super) fn argv(&mut self, v: &Spanned<Vec<Spanned<String>>>, field: &str) -> Vec<String> {
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

    pub(super) fn rlimits(
        &mut self,
        raw: Option<&BTreeMap<Spanned<String>, Spanned<RawRlimit>>>,
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
                RawRlimit::Pair(RawRlimitPair {
                    soft: Some(s),
                    hard: Some(h),
                }) => one(s).and_then(|s| Ok((s, one(h)?))),
                RawRlimit::Pair(_) => Err("needs both soft and hard".to_string()),
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

    pub(super) fn resources(&mut self, r: &RawResources, path: &str) -> Resources {
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
}
