//! A validated vigil config → `v1` Pods (or `apps/v1` Deployments), one per vigil pod.
//!
//! Owns the outgoing mapping. Kubernetes takes whole seconds, numeric ids and one grace period
//! and restart policy per pod; whatever does not fit is rounded up or kept in a `vigil/…`
//! annotation, and named in a [`Warning`] at its config path. `depends_on` becomes the pod
//! annotation `vigil/depends-on` (not an init container that waits: "ready" of another pod
//! has no address a waiting container could poll in a cluster — that is a Service's job).
//! Must not read files or the system.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvFromSource, EnvVar, ExecAction, GRPCAction, HTTPGetAction,
    HTTPHeader, Lifecycle, LifecycleHandler, Pod, PodSpec as KubePodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecretEnvSource, SecurityContext, SleepAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{ANNOTATION_PREFIX, ConvertError, DEPENDS_ON_ANNOTATION, NAME_LABEL, Warning};
use crate::config::schema_join as join;
use crate::config::spec::{
    Backoff, Config, ContainerSpec, DependencyCondition, Hook, HttpScheme, PodSpec, ProbeAction,
    ProbeKind, ProbeSpec, RestartPolicy, TerminationMessagePolicy,
};

/// `--kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    #[default]
    Pod,
    Deployment,
}

/// Options of `vigil convert --to kubernetes`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub kind: Kind,
    /// Image for containers without an `image` key.
    pub image: Option<String>,
}

/// One emitted object.
#[derive(Debug, Clone)]
pub enum Manifest {
    Pod(Box<Pod>),
    Deployment(Box<Deployment>),
}

impl Manifest {
    pub fn to_value(&self) -> Result<serde_json::Value, String> {
        match self {
            Manifest::Pod(p) => serde_json::to_value(p),
            Manifest::Deployment(d) => serde_json::to_value(d),
        }
        .map_err(|e| format!("cannot serialize manifest: {e}"))
    }
}

/// YAML, one document per object, every string quoted where a YAML 1.1 or 1.2 parser could
/// read it as anything else ([`super::yaml`]).
pub fn to_yaml(manifests: &[Manifest]) -> Result<String, String> {
    let mut out = String::new();
    for (i, m) in manifests.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&super::yaml::document(&m.to_value()?));
    }
    Ok(out)
}

/// JSON: the object itself when there is one, else a `v1` `List` of them (as `kubectl get
/// -o json` prints several).
pub fn to_json(manifests: &[Manifest]) -> Result<String, String> {
    let mut items = manifests
        .iter()
        .map(Manifest::to_value)
        .collect::<Result<Vec<_>, _>>()?;
    let value = if items.len() == 1 {
        items.remove(0)
    } else {
        serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items })
    };
    let mut text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// Convert every pod of `config`. Errors (a container without an image) are all collected.
pub fn convert(
    config: &Config,
    opts: &Options,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Manifest>, Vec<ConvertError>> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for pod in &config.pods {
        let path = join("pods", &pod.name);
        let mut annotations = BTreeMap::new();
        let spec = pod_spec(pod, &path, opts, &mut annotations, warnings, &mut errors);
        if !is_dns_subdomain(&pod.name) {
            warnings.push(Warning::new(
                &path,
                format!(
                    "{:?} is not a valid Kubernetes object name (lower-case letters, digits, \
                     '-' and '.')",
                    pod.name
                ),
            ));
        }
        let labels = BTreeMap::from([(NAME_LABEL.to_string(), pod.name.clone())]);
        let meta = ObjectMeta {
            name: Some(pod.name.clone()),
            labels: Some(labels.clone()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        };
        let kind = if opts.kind == Kind::Deployment && pod.restart_policy != RestartPolicy::Always {
            warnings.push(Warning::new(
                join(&path, "restart_policy"),
                format!(
                    "a Deployment's pods must restart Always, not {}; emitted as a Pod",
                    pod.restart_policy.as_str()
                ),
            ));
            Kind::Pod
        } else {
            opts.kind
        };
        out.push(match kind {
            Kind::Pod => Manifest::Pod(Box::new(Pod {
                metadata: meta,
                spec: Some(spec),
                status: None,
            })),
            Kind::Deployment => Manifest::Deployment(Box::new(Deployment {
                metadata: ObjectMeta {
                    name: Some(pod.name.clone()),
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                },
                spec: DeploymentSpec {
                    replicas: Some(1),
                    selector: LabelSelector {
                        match_labels: Some(labels),
                        match_expressions: None,
                    },
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta { name: None, ..meta }),
                        spec: Some(spec),
                    },
                    ..DeploymentSpec::default()
                },
                status: None,
            })),
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Kubernetes object names (RFC 1123 subdomain): what `metadata.name` takes.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// Container names (RFC 1123 label).
fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && is_dns_subdomain(s)
}

/// Whole seconds for an integer field, rounded up, with a warning when that changed it.
fn whole_seconds(d: Duration, path: &str, warnings: &mut Vec<Warning>) -> i64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    if d.subsec_nanos() > 0 {
        warnings.push(Warning::new(
            path,
            format!(
                "{} s rounded up to {secs} s: Kubernetes takes whole seconds",
                d.as_secs_f64()
            ),
        ));
    }
    i64::try_from(secs).unwrap_or(i64::MAX)
}

fn whole_seconds_i32(d: Duration, path: &str, warnings: &mut Vec<Warning>) -> i32 {
    i32::try_from(whole_seconds(d, path, warnings)).unwrap_or(i32::MAX)
}

/// Seconds as TOML (`2`, `0.5`).
fn seconds_toml(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        d.as_secs_f64().to_string()
    }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn backoff_toml(b: &Backoff) -> String {
    format!(
        "{{ initial_seconds = {}, max_seconds = {}, reset_after_seconds = {} }}",
        seconds_toml(b.initial),
        seconds_toml(b.max),
        seconds_toml(b.reset_after)
    )
}

/// A back-off that every container of the pod shares (the pod's own `backoff`, which the config
/// gives each container) is said once, at the pod, instead of once per container; each
/// container still keeps its annotation.
fn one_backoff_warning(pod: &PodSpec, path: &str, from: usize, warnings: &mut Vec<Warning>) {
    let all: Vec<&Arc<ContainerSpec>> = pod
        .init_containers
        .iter()
        .chain(pod.containers.iter())
        .collect();
    let shared = all.len() > 1
        && all[0].backoff != Backoff::default()
        && all.iter().all(|c| c.backoff == all[0].backoff);
    if !shared {
        return;
    }
    let is_backoff = |w: &Warning| {
        w.path.starts_with(path) && w.path.ends_with("].backoff") && w.path.contains("containers[")
    };
    let mut i = from;
    while i < warnings.len() {
        if is_backoff(&warnings[i]) {
            warnings.remove(i);
        } else {
            i += 1;
        }
    }
    warnings.push(Warning::new(
        join(path, "backoff"),
        format!(
            "the kubelet's back-off is fixed (10 s doubling to 300 s); kept as annotations \
             {ANNOTATION_PREFIX}CONTAINER.backoff, one for each of the pod's {} containers",
            all.len()
        ),
    ));
}

/// Adds `vigil/<container>.<key>` annotations and says why each one is needed.
struct Annotator<'a> {
    pod: &'a str,
    container: &'a str,
    path: &'a str,
    annotations: &'a mut BTreeMap<String, String>,
    warnings: &'a mut Vec<Warning>,
}

impl Annotator<'_> {
    fn keep(&mut self, key: &str, value: String, why: &str) {
        let name = format!("{}.{key}", self.container);
        let annotation = format!("{ANNOTATION_PREFIX}{name}");
        let mut message = format!("{why}; kept as annotation {annotation}");
        if name.len() > 63 {
            message.push_str(" (longer than the 63 characters Kubernetes allows in a key name)");
        }
        self.warnings
            .push(Warning::new(join(self.path, key), message));
        self.annotations.insert(annotation, value);
    }
}

fn pod_spec(
    pod: &PodSpec,
    path: &str,
    opts: &Options,
    annotations: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
    errors: &mut Vec<ConvertError>,
) -> KubePodSpec {
    if !pod.depends_on.is_empty() {
        let value: Vec<String> = pod
            .depends_on
            .iter()
            .map(|d| {
                let cond = match d.condition {
                    DependencyCondition::Started => "started",
                    DependencyCondition::Ready => "ready",
                    DependencyCondition::Completed => "completed",
                };
                let restart = if d.restart { "+restart" } else { "" };
                let stop = if d.stop { "+stop" } else { "" };
                format!("{}={cond}{restart}{stop}", d.pod)
            })
            .collect();
        for d in pod.depends_on.iter().filter(|d| d.restart || d.stop) {
            warnings.push(Warning::new(
                join(&join(path, "depends_on"), &d.pod),
                "Kubernetes has no pod that follows another: `restart`/`stop` are lost (kept in \
                 the annotation for the way back); restart the dependent yourself when its \
                 dependency is replaced"
                    .to_string(),
            ));
        }
        warnings.push(Warning::new(
            join(path, "depends_on"),
            format!(
                "Kubernetes does not order pods; kept as annotation {DEPENDS_ON_ANNOTATION} \
                 (gate the start yourself, e.g. on a Service)"
            ),
        ));
        annotations.insert(DEPENDS_ON_ANNOTATION.to_string(), value.join(","));
    }
    if let Some(on) = pod.shutdown_on {
        warnings.push(Warning::new(
            join(path, "shutdown_on"),
            format!(
                "Kubernetes has no pod whose end stops the others; shutdown_on = \"{}\" is \
                 dropped (a Job's pod ends by itself)",
                on.as_str()
            ),
        ));
    }
    if let Some(s) = &pod.schedule {
        warnings.push(Warning::new(
            join(path, "schedule"),
            format!(
                "the schedule {:?} is dropped: this converter emits the pod itself, not a \
                 CronJob around it",
                s.cron.as_str()
            ),
        ));
    }
    // One grace period per pod: the budget vigil itself gives a whole-pod stop (the pod's key
    // when written, else the longest container grace), so both stop the pod alike.
    let first_warning = warnings.len();
    let grace = pod.termination_grace;
    let grace_secs = whole_seconds(
        grace,
        &join(path, "termination_grace_period_seconds"),
        warnings,
    );
    let mut convert_list = |list: &[Arc<ContainerSpec>],
                            field: &str,
                            init: bool|
     -> Vec<Container> {
        let expected = if init && pod.restart_policy == RestartPolicy::Always {
            RestartPolicy::OnFailure
        } else {
            pod.restart_policy
        };
        list.iter()
            .enumerate()
            .map(|(i, c)| {
                let cpath = format!("{}[{i}]", join(path, field));
                let mut a = Annotator {
                    pod: &pod.name,
                    container: &c.name,
                    path: &cpath,
                    annotations,
                    warnings,
                };
                // A sidecar: Kubernetes says it with the init container's own restartPolicy.
                let sidecar = init && c.restart_policy == RestartPolicy::Always;
                if c.restart_policy != expected && !sidecar {
                    a.keep(
                        "restart_policy",
                        c.restart_policy.as_str().to_string(),
                        &format!(
                            "Kubernetes has one restart policy per pod ({}); this container's {} \
                             cannot be expressed",
                            pod.restart_policy.as_str(),
                            c.restart_policy.as_str()
                        ),
                    );
                }
                if c.termination_grace != grace {
                    a.keep(
                        "termination_grace_period_seconds",
                        seconds_toml(c.termination_grace),
                        &format!(
                            "Kubernetes has one grace period per pod ({grace_secs} s, the pod's stop budget)"
                        ),
                    );
                }
                let mut k = container(c, &cpath, opts, &mut a, errors);
                if sidecar {
                    k.restart_policy = Some("Always".to_string());
                } else if init && k.lifecycle.take().is_some() {
                    // The API server refuses `lifecycle` on an init container that is not a
                    // sidecar (validation of Pod, not the OpenAPI schema).
                    a.warnings.push(Warning::new(
                        join(&cpath, "lifecycle"),
                        "Kubernetes allows lifecycle hooks on an init container only when it is \
                         a sidecar (restartPolicy: Always); left out",
                    ));
                }
                k
            })
            .collect()
    };
    let init_containers = convert_list(&pod.init_containers, "init_containers", true);
    let containers = convert_list(&pod.containers, "containers", false);
    one_backoff_warning(pod, path, first_warning, warnings);
    KubePodSpec {
        restart_policy: Some(pod.restart_policy.as_str().to_string()),
        termination_grace_period_seconds: Some(grace_secs),
        active_deadline_seconds: pod
            .active_deadline
            .map(|d| whole_seconds(d, &join(path, "active_deadline_seconds"), warnings).max(1)),
        init_containers: (!init_containers.is_empty()).then_some(init_containers),
        containers,
        ..KubePodSpec::default()
    }
}

fn container(
    c: &ContainerSpec,
    path: &str,
    opts: &Options,
    a: &mut Annotator<'_>,
    errors: &mut Vec<ConvertError>,
) -> Container {
    if !is_dns_label(&c.name) {
        a.warnings.push(Warning::new(
            join(path, "name"),
            format!(
                "{:?} is not a valid Kubernetes container name (lower-case letters, digits and \
                 '-')",
                c.name
            ),
        ));
    }
    if c.command.iter().any(|a| super::from_kube::has_var_ref(a)) {
        a.warnings.push(Warning::new(
            join(path, "command"),
            "Kubernetes expands $(NAME) in commands and vigil does not; write $$(NAME) to keep \
             it as it is",
        ));
    }
    let image = c.image.clone().or_else(|| opts.image.clone());
    if image.is_none() {
        errors.push(ConvertError::new(
            join(path, "image"),
            format!(
                "container {:?} has no image: set `image = \"…\"` in the config or pass --image",
                c.name
            ),
        ));
    }
    // Identity and privileges.
    let mut sc = SecurityContext {
        allow_privilege_escalation: Some(!c.no_new_privs),
        run_as_non_root: c.run_as_non_root.then_some(true),
        ..SecurityContext::default()
    };
    for (field, value, numeric) in [
        ("user", &c.user, &mut sc.run_as_user),
        ("group", &c.group, &mut sc.run_as_group),
    ] {
        let Some(v) = value else { continue };
        match v.parse::<i64>() {
            Ok(id) => *numeric = Some(id),
            Err(_) => {
                let k8s = if field == "user" {
                    "runAsUser"
                } else {
                    "runAsGroup"
                };
                a.keep(
                    field,
                    v.clone(),
                    &format!("Kubernetes takes a numeric {k8s}, not the name {v:?}"),
                );
            }
        }
    }
    if !c.capabilities.is_empty() {
        let add = c
            .capabilities
            .iter()
            .map(|cap| cap.strip_prefix("CAP_").unwrap_or(cap).to_string())
            .collect();
        sc.capabilities = Some(Capabilities {
            add: Some(add),
            drop: Some(vec!["ALL".to_string()]),
        });
    }
    if c.stop_signal_name != "SIGTERM" {
        a.keep(
            "stop_signal",
            c.stop_signal_name.clone(),
            "the stop signal is the image's STOPSIGNAL in Kubernetes (lifecycle.stopSignal is \
             not generally available)",
        );
    }
    if c.backoff != Backoff::default() {
        a.keep(
            "backoff",
            backoff_toml(&c.backoff),
            "the kubelet's back-off is fixed (10 s doubling to 300 s)",
        );
    }
    if let Some(n) = c.max_restarts {
        a.keep(
            "max_restarts",
            n.to_string(),
            "Kubernetes restarts without a limit",
        );
    }
    if !c.success_exit_codes.is_empty() {
        let codes: Vec<String> = c.success_exit_codes.iter().map(i32::to_string).collect();
        a.keep(
            "success_exit_codes",
            format!("[{}]", codes.join(", ")),
            "Kubernetes counts only exit code 0 as a success",
        );
    }
    if !c.rlimits.is_empty() {
        let items: Vec<String> = c
            .rlimits
            .iter()
            .map(|r| {
                let v = |x: u64| {
                    if x == libc::RLIM_INFINITY {
                        "\"unlimited\"".to_string()
                    } else {
                        x.to_string()
                    }
                };
                format!(
                    "{} = {{ soft = {}, hard = {} }}",
                    r.name,
                    v(r.soft),
                    v(r.hard)
                )
            })
            .collect();
        a.keep(
            "rlimits",
            format!("{{ {} }}", items.join(", ")),
            "Kubernetes has no per-container rlimits",
        );
    }
    // env_file: a Secret the cluster must hold, referenced, never the values.
    let env_from = c.env_file.as_ref().map(|file| {
        let secret = format!("{}-{}-env", a.pod, c.name);
        a.keep(
            "env_file",
            file.to_string_lossy().into_owned(),
            &format!(
                "its values are not copied: the pod reads Secret {secret:?}; create it with \
                 `kubectl create secret generic {secret} --from-env-file={}`",
                file.display()
            ),
        );
        vec![EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: secret,
                optional: None,
            }),
            ..EnvFromSource::default()
        }]
    });
    // Resources.
    let r = &c.resources;
    let rpath = join(path, "resources");
    let mut limits = BTreeMap::new();
    let mut requests = BTreeMap::new();
    if let Some(m) = r.memory_max {
        limits.insert("memory".to_string(), Quantity(super::bytes_quantity(m)));
    }
    if let Some(cores) = r.cpu_max {
        let milli = (cores * 1000.0).ceil();
        if milli != cores * 1000.0 {
            a.warnings.push(Warning::new(
                join(&rpath, "cpu_max"),
                format!("{cores} cores rounded up to {milli}m: Kubernetes counts millicores"),
            ));
        }
        let milli = milli as u64;
        let q = if milli % 1000 == 0 {
            (milli / 1000).to_string()
        } else {
            format!("{milli}m")
        };
        limits.insert("cpu".to_string(), Quantity(q));
    }
    if let Some(w) = r.cpu_weight {
        let milli = super::cpu_weight_to_milli(w);
        requests.insert("cpu".to_string(), Quantity(format!("{milli}m")));
    }
    let mut ra = Annotator {
        pod: a.pod,
        container: a.container,
        path: &rpath,
        annotations: &mut *a.annotations,
        warnings: &mut *a.warnings,
    };
    if let Some(h) = r.memory_high {
        ra.keep(
            "memory_high",
            super::bytes_quantity(h),
            "memory.high has no Kubernetes field (only the alpha MemoryQoS sets it)",
        );
    }
    if let Some(s) = r.swap_max {
        ra.keep(
            "swap_max",
            super::bytes_quantity(s),
            "swap is a node setting in Kubernetes",
        );
    }
    if let Some(p) = r.pids_max {
        ra.keep(
            "pids_max",
            p.to_string(),
            "the pid limit is a node setting in Kubernetes (podPidsLimit)",
        );
    }
    if r.oom_group {
        ra.keep(
            "oom_group",
            "true".to_string(),
            "memory.oom.group is a kubelet setting (singleProcessOOMKill)",
        );
    }
    let resources = (!limits.is_empty() || !requests.is_empty()).then(|| ResourceRequirements {
        limits: (!limits.is_empty()).then_some(limits),
        requests: (!requests.is_empty()).then_some(requests),
        claims: None,
    });
    let probe_of = |kind: ProbeKind, a: &mut Annotator<'_>| {
        let spec = match kind {
            ProbeKind::Startup => c.startup_probe.as_ref(),
            ProbeKind::Liveness => c.liveness_probe.as_ref(),
            ProbeKind::Readiness => c.readiness_probe.as_ref(),
            ProbeKind::Hook => None,
        }?;
        Some(probe(
            spec,
            &join(path, &format!("{}_probe", kind.as_str())),
            a.warnings,
        ))
    };
    let startup_probe = probe_of(ProbeKind::Startup, a);
    let liveness_probe = probe_of(ProbeKind::Liveness, a);
    let readiness_probe = probe_of(ProbeKind::Readiness, a);
    let lifecycle = lifecycle(&c.lifecycle, &join(path, "lifecycle"), a.warnings);
    Container {
        name: c.name.clone(),
        image,
        command: Some(c.command.clone()),
        env: (!c.env.is_empty()).then(|| {
            c.env
                .iter()
                .map(|(k, v)| EnvVar {
                    name: k.clone(),
                    value: Some(v.clone()),
                    value_from: None,
                })
                .collect()
        }),
        env_from,
        termination_message_path: c
            .termination_message_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        termination_message_policy: (c.termination_message_policy
            == TerminationMessagePolicy::FallbackToLogsOnError)
            .then(|| "FallbackToLogsOnError".to_string()),
        working_dir: c
            .working_dir
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        security_context: Some(sc),
        resources,
        startup_probe,
        liveness_probe,
        readiness_probe,
        lifecycle,
        ..Container::default()
    }
}

/// `lifecycle.postStart`/`preStop`: `exec` and `httpGet` as a probe's, `sleep` in whole
/// seconds (rounded up, with a warning).
fn lifecycle(
    l: &crate::config::spec::Lifecycle,
    path: &str,
    warnings: &mut Vec<Warning>,
) -> Option<Lifecycle> {
    let mut handler = |hook: &Option<Hook>, key: &str| {
        let hpath = join(path, key);
        Some(match hook.as_ref()? {
            Hook::Sleep(d) => LifecycleHandler {
                sleep: Some(SleepAction {
                    seconds: whole_seconds(*d, &join(&join(&hpath, "sleep"), "seconds"), warnings),
                }),
                ..LifecycleHandler::default()
            },
            Hook::Action(action) => {
                let mut p = Probe::default();
                set_action(&mut p, action, &hpath, warnings);
                // A hook's schema allows only `exec` and `http_get` (config::schema::HOOK).
                LifecycleHandler {
                    exec: p.exec,
                    http_get: p.http_get,
                    ..LifecycleHandler::default()
                }
            }
        })
    };
    let post_start = handler(&l.post_start, "post_start");
    let pre_stop = handler(&l.pre_stop, "pre_stop");
    (post_start.is_some() || pre_stop.is_some()).then_some(Lifecycle {
        post_start,
        pre_stop,
        stop_signal: None,
    })
}

/// A probe with every field written out (vigil's defaults are the kubelet's, so nothing
/// changes meaning).
fn probe(p: &ProbeSpec, path: &str, warnings: &mut Vec<Warning>) -> Probe {
    let mut out = Probe {
        initial_delay_seconds: Some(whole_seconds_i32(
            p.initial_delay,
            &join(path, "initial_delay_seconds"),
            warnings,
        )),
        period_seconds: Some(
            whole_seconds_i32(p.period, &join(path, "period_seconds"), warnings).max(1),
        ),
        timeout_seconds: Some(
            whole_seconds_i32(p.timeout, &join(path, "timeout_seconds"), warnings).max(1),
        ),
        success_threshold: Some(i32::try_from(p.success_threshold).unwrap_or(i32::MAX)),
        failure_threshold: Some(i32::try_from(p.failure_threshold).unwrap_or(i32::MAX)),
        termination_grace_period_seconds: p.termination_grace.map(|g| {
            whole_seconds(g, &join(path, "termination_grace_period_seconds"), warnings).max(1)
        }),
        ..Probe::default()
    };
    set_action(&mut out, &p.action, path, warnings);
    out
}

/// A probe's (or hook's) action into `out`.
fn set_action(out: &mut Probe, action: &ProbeAction, path: &str, warnings: &mut Vec<Warning>) {
    // vigil probes 127.0.0.1 by default; the kubelet the pod's IP. Both reach the container.
    let host = |h: &str| (h != "127.0.0.1").then(|| h.to_string());
    match action {
        ProbeAction::Exec { command } => {
            out.exec = Some(ExecAction {
                command: Some(command.clone()),
            });
        }
        ProbeAction::HttpGet {
            host: h,
            port,
            path: url_path,
            headers,
            scheme,
            tls,
        } => {
            if tls.ca_file.is_some() || tls.server_name.is_some() {
                warnings.push(Warning::new(
                    join(&join(path, "http_get"), "tls"),
                    "the kubelet never verifies an HTTPS probe's certificate; dropped",
                ));
            }
            out.http_get = Some(HTTPGetAction {
                host: host(h),
                port: IntOrString::Int(i32::from(*port)),
                path: Some(url_path.clone()),
                scheme: Some(
                    match scheme {
                        HttpScheme::Http => "HTTP",
                        HttpScheme::Https => "HTTPS",
                    }
                    .to_string(),
                ),
                http_headers: (!headers.is_empty()).then(|| {
                    headers
                        .iter()
                        .map(|(name, value)| HTTPHeader {
                            name: name.clone(),
                            value: value.clone(),
                        })
                        .collect()
                }),
                ..HTTPGetAction::default()
            });
        }
        ProbeAction::TcpSocket { host: h, port } => {
            out.tcp_socket = Some(TCPSocketAction {
                host: host(h),
                port: IntOrString::Int(i32::from(*port)),
            });
        }
        ProbeAction::Grpc {
            host: h,
            port,
            service,
        } => {
            if h != "127.0.0.1" {
                warnings.push(Warning::new(
                    join(&join(path, "grpc"), "host"),
                    format!("the kubelet's gRPC probe always dials the pod; host {h:?} dropped"),
                ));
            }
            out.grpc = Some(GRPCAction {
                port: i32::from(*port),
                service: (!service.is_empty()).then(|| service.clone()),
                ..GRPCAction::default()
            });
        }
    }
}

/// `toml_str` is used by tests and `from_kube` for quoting.
pub(crate) fn quote(s: &str) -> String {
    toml_str(s)
}
