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

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment, StatefulSet,
    StatefulSetSpec,
};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, Container, ContainerPort, EnvFromSource, EnvVar, ExecAction,
    GRPCAction, HTTPGetAction, HTTPHeader, Lifecycle, LifecycleHandler, Pod,
    PodSpec as KubePodSpec, PodTemplateSpec, Probe, ResourceRequirements, SecretEnvSource,
    SecurityContext, Service, ServicePort, ServiceSpec, SleepAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{ANNOTATION_PREFIX, ConvertError, DEPENDS_ON_ANNOTATION, NAME_LABEL, Warning};
use crate::config::schema_join as join;
use crate::config::spec::{
    Backoff, Config, ContainerSpec, DependencyCondition, Hook, HttpScheme, PodSpec, ProbeAction,
    ProbeKind, ProbeSpec, Replica, RestartPolicy, ScheduleSpec, TerminationMessagePolicy,
    UpdateStrategy,
};

/// The kind of object a vigil pod becomes (`--kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pod,
    Deployment,
    StatefulSet,
    Job,
    CronJob,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
            Kind::CronJob => "CronJob",
        }
    }

    /// `Pod`, `deployment`, … (any case).
    pub fn parse(text: &str) -> Option<Kind> {
        [
            Kind::Pod,
            Kind::Deployment,
            Kind::StatefulSet,
            Kind::Job,
            Kind::CronJob,
        ]
        .into_iter()
        .find(|k| k.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// Whether this kind's pods run to completion (a Job's) rather than restart `Always`.
    fn runs_to_completion(self) -> bool {
        matches!(self, Kind::Job | Kind::CronJob)
    }
}

/// The kind a pod becomes without `--kind`: a scheduled pod is a CronJob, another pod that
/// runs to completion (`OnFailure`, `Never`) a Job, a pod that restarts `Always` a Deployment,
/// or a StatefulSet when it asks for `stable_identity`.
pub fn automatic_kind(pod: &PodSpec) -> Kind {
    match (pod.restart_policy, &pod.schedule) {
        (RestartPolicy::Always, _) if pod.stable_identity => Kind::StatefulSet,
        (RestartPolicy::Always, _) => Kind::Deployment,
        (_, Some(_)) => Kind::CronJob,
        (_, None) => Kind::Job,
    }
}

/// A pod as Kubernetes sees it: a pod of the config, or a set of replicas as one pod with a
/// count (`replicas = N` is a Deployment's or StatefulSet's `replicas`).
struct Unit {
    pod: PodSpec,
    replicas: u32,
    min_ready: Option<u32>,
    /// A set's keys of its rollouts (`update`, `max_unavailable`, `progress_deadline_seconds`).
    rollout: Option<Replica>,
}

/// The config's pods with each replica set folded back into one pod: replica 0 under the
/// set's name, without the `VIGIL_POD_NAME`/`VIGIL_REPLICA` variables each replica gets. A
/// template that uses `${replica}` is a warning: every Kubernetes replica gets replica 0's
/// values.
fn units(config: &Config, warnings: &mut Vec<Warning>) -> Vec<Unit> {
    use crate::config::replicas::{ENV_POD_NAME, ENV_REPLICA};
    let mut out = Vec::new();
    for pod in &config.pods {
        let Some(r) = &pod.replica else {
            out.push(Unit {
                pod: pod.clone(),
                replicas: 1,
                min_ready: None,
                rollout: None,
            });
            continue;
        };
        if r.index != 0 {
            continue;
        }
        let Some(set) = config.replica_set(&r.set) else {
            continue;
        };
        let mut one = pod.clone();
        one.name = set.name.clone();
        one.replica = None;
        let strip = |c: &mut Arc<ContainerSpec>, template: Option<&Arc<ContainerSpec>>| {
            let own = |k: &str| template.is_some_and(|t| t.env.iter().any(|(n, _)| n == k));
            Arc::make_mut(c)
                .env
                .retain(|(k, _)| !((k == ENV_POD_NAME || k == ENV_REPLICA) && !own(k)));
        };
        for (i, c) in one.init_containers.iter_mut().enumerate() {
            strip(c, set.template.init_containers.get(i));
        }
        for (i, c) in one.containers.iter_mut().enumerate() {
            strip(c, set.template.containers.get(i));
        }
        let uses_index =
            serde_json::to_string(&set.template).is_ok_and(|t| t.contains("${replica}"));
        if uses_index {
            warnings.push(Warning::new(
                join("pods", &set.name),
                "the pod's strings use ${replica}, and every Kubernetes replica gets the same \
                 pod template (written here with replica 0's values): derive per-replica values \
                 from the pod's name in the program (a StatefulSet's pods are NAME-0, NAME-1, …)",
            ));
        }
        out.push(Unit {
            pod: one,
            replicas: set.replicas,
            min_ready: r.min_ready,
            rollout: Some(r.clone()),
        });
    }
    out
}

/// Annotation holding a replica set's `min_ready`.
pub const MIN_READY_ANNOTATION: &str = "vigil/min-ready";

/// Options of `vigil convert --to kubernetes`.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--kind KIND`: the kind of every pod (`None`: [`automatic_kind`] per pod).
    pub kind: Option<Kind>,
    /// `--kind POD=KIND`: the kind of one pod, over `kind`.
    pub kinds: BTreeMap<String, Kind>,
    /// Image for containers without an `image` key.
    pub image: Option<String>,
    /// Image of the init containers that wait for a dependency's Service (`--wait-image`).
    pub wait_image: String,
    /// How long such a wait lasts before the init container gives up and fails.
    pub wait_timeout_seconds: u32,
}

/// The image of the waiting init containers unless `--wait-image` names another: it needs a
/// POSIX shell and `nc -z` (BusyBox has both).
pub const DEFAULT_WAIT_IMAGE: &str = "busybox:1.37";

impl Default for Options {
    fn default() -> Options {
        Options {
            kind: None,
            kinds: BTreeMap::new(),
            image: None,
            wait_image: DEFAULT_WAIT_IMAGE.to_string(),
            wait_timeout_seconds: 300,
        }
    }
}

/// One emitted object.
#[derive(Debug, Clone)]
pub enum Manifest {
    Pod(Box<Pod>),
    Deployment(Box<Deployment>),
    StatefulSet(Box<StatefulSet>),
    Job(Box<Job>),
    CronJob(Box<CronJob>),
    Service(Box<Service>),
    /// `--embed`'s config files.
    ConfigMap(Box<ConfigMap>),
}

impl Manifest {
    pub fn to_value(&self) -> Result<serde_json::Value, String> {
        match self {
            Manifest::Pod(p) => serde_json::to_value(p),
            Manifest::Deployment(d) => serde_json::to_value(d),
            Manifest::StatefulSet(d) => serde_json::to_value(d),
            Manifest::Job(d) => serde_json::to_value(d),
            Manifest::CronJob(d) => serde_json::to_value(d),
            Manifest::Service(d) => serde_json::to_value(d),
            Manifest::ConfigMap(d) => serde_json::to_value(d),
        }
        .map_err(|e| format!("cannot serialize manifest: {e}"))
    }

    /// The object's kind, as `kind:` says it.
    pub fn kind(&self) -> &'static str {
        match self {
            Manifest::Pod(_) => "Pod",
            Manifest::Deployment(_) => "Deployment",
            Manifest::StatefulSet(_) => "StatefulSet",
            Manifest::Job(_) => "Job",
            Manifest::CronJob(_) => "CronJob",
            Manifest::Service(_) => "Service",
            Manifest::ConfigMap(_) => "ConfigMap",
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        let meta = match self {
            Manifest::Pod(p) => &p.metadata,
            Manifest::Deployment(d) => &d.metadata,
            Manifest::StatefulSet(d) => &d.metadata,
            Manifest::Job(d) => &d.metadata,
            Manifest::CronJob(d) => &d.metadata,
            Manifest::Service(d) => &d.metadata,
            Manifest::ConfigMap(d) => &d.metadata,
        };
        meta.name.as_deref().unwrap_or("")
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

/// The name of a Kustomize directory's own file (`kubectl kustomize DIR` reads it).
pub const KUSTOMIZATION: &str = "kustomization.yaml";

/// `--output-dir`: one YAML file per object, `NAME-KIND.yaml` (`web-deployment.yaml`,
/// `web-service.yaml`), then [`KUSTOMIZATION`] listing them as `resources` in the order they
/// were made. Returns (file name, content) pairs. Object names are vigil pod names (lower-case
/// letters, digits, `-`, `_`, `.`), so a file name never leaves the directory; any other
/// character would become `_`.
pub fn kustomize_files(manifests: &[Manifest]) -> Result<Vec<(String, String)>, String> {
    let mut files = Vec::new();
    for m in manifests {
        let safe: String = m
            .name()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name = format!(
            "{}-{}.yaml",
            safe.trim_start_matches('.'),
            m.kind().to_ascii_lowercase()
        );
        files.push((name, super::yaml::document(&m.to_value()?)));
    }
    let resources: Vec<serde_json::Value> = files
        .iter()
        .map(|(n, _)| serde_json::Value::String(n.clone()))
        .collect();
    let kustomization = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    });
    files.push((
        KUSTOMIZATION.to_string(),
        super::yaml::document(&kustomization),
    ));
    Ok(files)
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

/// The kind `pod` becomes: `--kind POD=KIND`, else `--kind KIND`, else [`automatic_kind`]. A
/// kind that cannot hold the pod (a Deployment of a pod that does not restart `Always`, a Job
/// of one that does, a CronJob without a schedule) is a warning, and the automatic kind is
/// used instead; a Pod holds any pod.
fn choose_kind(pod: &PodSpec, opts: &Options, path: &str, warnings: &mut Vec<Warning>) -> Kind {
    let auto = automatic_kind(pod);
    let Some(asked) = opts.kinds.get(&pod.name).copied().or(opts.kind) else {
        return auto;
    };
    let always = pod.restart_policy == RestartPolicy::Always;
    let problem = match asked {
        Kind::Pod => None,
        Kind::Deployment | Kind::StatefulSet if !always => Some(format!(
            "a {}'s pods must restart Always, not {}",
            asked.as_str(),
            pod.restart_policy.as_str()
        )),
        Kind::Job | Kind::CronJob if always => Some(format!(
            "a {}'s pods run to completion (OnFailure or Never), not Always",
            asked.as_str()
        )),
        Kind::CronJob if pod.schedule.is_none() => {
            Some("a CronJob needs the pod's schedule, and it has none".to_string())
        }
        _ => None,
    };
    match problem {
        Some(why) => {
            warnings.push(Warning::new(
                join(path, "restart_policy"),
                format!(
                    "{why}; emitted as a {} (give another --kind {}=KIND)",
                    auto.as_str(),
                    pod.name
                ),
            ));
            auto
        }
        None => asked,
    }
}

/// A pod's Service ports: its containers' named `ports`, then the ports its probes reach on
/// its own address (`127.0.0.1`, `localhost`) that no `ports` entry names, as
/// `http-PORT`, `tcp-PORT`, `grpc-PORT`.
pub fn service_ports(pod: &PodSpec) -> Vec<(String, u16)> {
    let mut out: Vec<(String, u16)> = Vec::new();
    let all = || pod.init_containers.iter().chain(pod.containers.iter());
    for c in all() {
        for p in &c.ports {
            if !out.iter().any(|(_, port)| *port == p.port) {
                out.push((p.name.clone(), p.port));
            }
        }
    }
    for c in all() {
        let probes = [&c.startup_probe, &c.liveness_probe, &c.readiness_probe];
        for p in probes.into_iter().flatten() {
            let (scheme, host, port) = match &p.action {
                ProbeAction::HttpGet { host, port, .. } => ("http", host, *port),
                ProbeAction::TcpSocket { host, port } => ("tcp", host, *port),
                ProbeAction::Grpc { host, port, .. } => ("grpc", host, *port),
                ProbeAction::Exec { .. } => continue,
            };
            if is_loopback(host) && !out.iter().any(|(_, q)| *q == port) {
                out.push((format!("{scheme}-{port}"), port));
            }
        }
    }
    out
}

fn is_loopback(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

/// Convert every pod of `config`. Errors (a container without an image) are all collected.
pub fn convert(
    config: &Config,
    opts: &Options,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Manifest>, Vec<ConvertError>> {
    let mut errors = Vec::new();
    for name in opts.kinds.keys() {
        if !config.pods.iter().any(|p| &p.name == name) && config.replica_set(name).is_none() {
            errors.push(ConvertError::new(
                "--kind",
                format!("no pod {name:?} in the config"),
            ));
        }
    }
    let units = units(config, warnings);
    let pods: Vec<&PodSpec> = units.iter().map(|u| &u.pod).collect();
    let kinds: BTreeMap<&str, Kind> = pods
        .iter()
        .map(|p| {
            let kind = choose_kind(p, opts, &join("pods", &p.name), warnings);
            (p.name.as_str(), kind)
        })
        .collect();
    // The Services, by pod: what a dependent waits on and what a loopback address becomes.
    let services: BTreeMap<&str, Vec<(String, u16)>> = pods
        .iter()
        .filter(|p| !kinds[p.name.as_str()].runs_to_completion())
        .map(|p| (p.name.as_str(), service_ports(p)))
        .filter(|(_, ports)| !ports.is_empty())
        .collect();
    let mut out = Vec::new();
    for unit in &units {
        let pod = &unit.pod;
        let path = join("pods", &pod.name);
        let kind = kinds[pod.name.as_str()];
        let mut annotations = BTreeMap::new();
        if let Some(k) = unit.min_ready {
            annotations.insert(MIN_READY_ANNOTATION.to_string(), k.to_string());
        }
        if unit.replicas != 1 && !matches!(kind, Kind::Deployment | Kind::StatefulSet) {
            warnings.push(Warning::new(
                join(&path, "replicas"),
                format!(
                    "a {} runs one copy, not {}: use a Deployment or StatefulSet",
                    kind.as_str(),
                    unit.replicas
                ),
            ));
        }
        let replicas = i32::try_from(unit.replicas).unwrap_or(i32::MAX);
        let ctx = PodCtx {
            kind,
            kinds: &kinds,
            services: &services,
        };
        let mut spec = pod_spec(
            pod,
            &path,
            opts,
            &ctx,
            &mut annotations,
            warnings,
            &mut errors,
        );
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
        let object_meta = ObjectMeta {
            name: Some(pod.name.clone()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        };
        let template = |spec: KubePodSpec| PodTemplateSpec {
            metadata: Some(ObjectMeta {
                name: None,
                ..meta.clone()
            }),
            spec: Some(spec),
        };
        let selector = LabelSelector {
            match_labels: Some(labels.clone()),
            match_expressions: None,
        };
        if kind != Kind::Pod && kind != Kind::CronJob && pod.schedule.is_some() {
            warnings.push(Warning::new(
                join(&path, "schedule"),
                format!(
                    "a {} has no schedule: the pod runs once; drop --kind {}={} for a CronJob",
                    kind.as_str(),
                    pod.name,
                    kind.as_str()
                ),
            ));
        }
        out.push(match kind {
            Kind::Pod => {
                if let Some(s) = &pod.schedule {
                    warnings.push(Warning::new(
                        join(&path, "schedule"),
                        format!(
                            "the schedule {:?} is dropped: a Pod runs once; drop --kind {}=Pod \
                             for a CronJob",
                            s.cron.as_str(),
                            pod.name
                        ),
                    ));
                }
                Manifest::Pod(Box::new(Pod {
                    metadata: meta.clone(),
                    spec: Some(spec),
                    status: None,
                }))
            }
            Kind::Deployment => Manifest::Deployment(Box::new(Deployment {
                metadata: object_meta,
                spec: DeploymentSpec {
                    replicas: Some(replicas),
                    selector,
                    template: template(spec),
                    strategy: unit.rollout.as_ref().map(deployment_strategy),
                    progress_deadline_seconds: unit.rollout.as_ref().map(|r| {
                        let at = join(&path, "progress_deadline_seconds");
                        whole_seconds_i32(r.progress_deadline, &at, warnings)
                    }),
                    ..DeploymentSpec::default()
                },
                status: None,
            })),
            Kind::StatefulSet => Manifest::StatefulSet(Box::new(StatefulSet {
                metadata: object_meta,
                spec: StatefulSetSpec {
                    replicas: Some(replicas),
                    selector,
                    service_name: services
                        .contains_key(pod.name.as_str())
                        .then(|| pod.name.clone()),
                    template: template(spec),
                    ..StatefulSetSpec::default()
                },
                status: None,
            })),
            Kind::Job | Kind::CronJob => {
                let mut template_annotations = meta.annotations.clone().unwrap_or_default();
                let job = job_spec(pod, &path, &mut spec, &mut template_annotations, warnings);
                let job = JobSpec {
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            name: None,
                            annotations: (!template_annotations.is_empty())
                                .then_some(template_annotations),
                            ..meta.clone()
                        }),
                        spec: Some(spec),
                    },
                    ..job
                };
                match (kind, &pod.schedule) {
                    (Kind::CronJob, Some(s)) => Manifest::CronJob(Box::new(CronJob {
                        metadata: object_meta,
                        spec: cron_job_spec(s, pod.history, &path, job, &labels, warnings),
                        status: None,
                    })),
                    _ => Manifest::Job(Box::new(Job {
                        metadata: object_meta,
                        spec: Some(job),
                        status: None,
                    })),
                }
            }
        });
        if let Some(ports) = services.get(pod.name.as_str()) {
            out.push(Manifest::Service(Box::new(service(
                &pod.name, ports, &labels,
            ))));
        }
    }
    loopback_addresses(&pods, &services, warnings);
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// What a pod's conversion needs to know of the others.
struct PodCtx<'a> {
    kind: Kind,
    kinds: &'a BTreeMap<&'a str, Kind>,
    services: &'a BTreeMap<&'a str, Vec<(String, u16)>>,
}

/// The ClusterIP Service in front of a pod: one named port per entry, to the same port of
/// the pod.
pub(crate) fn service(
    name: &str,
    ports: &[(String, u16)],
    labels: &BTreeMap<String, String>,
) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(labels.clone()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| ServicePort {
                        name: Some(n.clone()),
                        port: i32::from(*p),
                        target_port: Some(IntOrString::Int(i32::from(*p))),
                        protocol: Some("TCP".to_string()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// A Job's own fields. `backoffLimit`: for `OnFailure`, the containers' `max_restarts` when
/// they all have the same (unlimited: the largest int32; the Job controller's default would be
/// 6), and the per-container annotations of it are dropped; for `Never`, 0 (vigil runs such a
/// pod once; the controller would make new pods). The pod's `active_deadline_seconds` becomes
/// the Job's `activeDeadlineSeconds` (it bounds every retry, as vigil's bounds one run with
/// its restarts). Returns the spec without its template.
fn job_spec(
    pod: &PodSpec,
    path: &str,
    spec: &mut KubePodSpec,
    annotations: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
) -> JobSpec {
    let all: Vec<&Arc<ContainerSpec>> = pod
        .init_containers
        .iter()
        .chain(pod.containers.iter())
        .collect();
    let backoff_limit = match pod.restart_policy {
        RestartPolicy::Never => 0,
        _ => {
            let first = all.first().and_then(|c| c.max_restarts);
            if all.iter().all(|c| c.max_restarts == first) {
                for c in &all {
                    annotations.remove(&format!("{ANNOTATION_PREFIX}{}.max_restarts", c.name));
                }
                warnings.retain(|w| {
                    !(w.path.starts_with(&format!("{path}.")) && w.path.ends_with("].max_restarts"))
                });
                if all.len() > 1 && first.is_some() {
                    warnings.push(Warning::new(
                        join(path, "max_restarts"),
                        format!(
                            "the Job's backoffLimit counts the restarts of all {} containers \
                             together, vigil's max_restarts each container's; raise it if one \
                             container's restarts should not end the others",
                            all.len()
                        ),
                    ));
                }
                first.map_or(i32::MAX, |n| i32::try_from(n).unwrap_or(i32::MAX))
            } else {
                warnings.push(Warning::new(
                    join(path, "max_restarts"),
                    "the containers' max_restarts differ and a Job has one backoffLimit (the \
                     largest); each is kept as an annotation",
                ));
                all.iter()
                    .map(|c| {
                        c.max_restarts
                            .map_or(i32::MAX, |n| i32::try_from(n).unwrap_or(i32::MAX))
                    })
                    .max()
                    .unwrap_or(i32::MAX)
            }
        }
    };
    let active_deadline_seconds = spec.active_deadline_seconds.take();
    JobSpec {
        backoff_limit: Some(backoff_limit),
        active_deadline_seconds,
        ..JobSpec::default()
    }
}

/// A CronJob around `job`: the schedule's pattern, zone, concurrency, starting deadline and
/// suspension.
fn cron_job_spec(
    s: &ScheduleSpec,
    history: crate::config::spec::HistorySpec,
    path: &str,
    job: JobSpec,
    labels: &BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
) -> CronJobSpec {
    let spath = join(path, "schedule");
    if s.time_zone.name().is_none() {
        warnings.push(Warning::new(
            join(&spath, "time_zone"),
            "unwritten, vigil uses the host's local zone, a CronJob the zone of the cluster's \
             kube-controller-manager (usually UTC): set time_zone to say which",
        ));
    }
    CronJobSpec {
        schedule: s.cron.as_str().to_string(),
        time_zone: s.time_zone.name().map(str::to_string),
        concurrency_policy: Some(s.concurrency.as_str().to_string()),
        starting_deadline_seconds: s
            .starting_deadline
            .map(|d| whole_seconds(d, &join(&spath, "starting_deadline_seconds"), warnings)),
        suspend: s.suspend.then_some(true),
        // `history`: written when it is not the CronJob's defaults (3 and 1), which are also
        // what a scheduled pod keeps when it does not write the key.
        successful_jobs_history_limit: (history.successful != 3)
            .then(|| i32::try_from(history.successful).unwrap_or(i32::MAX)),
        failed_jobs_history_limit: (history.failed != 1)
            .then(|| i32::try_from(history.failed).unwrap_or(i32::MAX)),
        job_template: JobTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels.clone()),
                ..ObjectMeta::default()
            }),
            spec: Some(job),
        },
    }
}

/// `127.0.0.1:PORT` and `localhost:PORT` in one pod that reach another pod's Service port on
/// this host (probes, hooks, env values, command arguments): in a cluster each pod has its
/// own address. Each is reported with the Service name to use; nothing is rewritten.
fn loopback_addresses(
    pods: &[&PodSpec],
    services: &BTreeMap<&str, Vec<(String, u16)>>,
    warnings: &mut Vec<Warning>,
) {
    // The pod whose Service has `port`, other than `me`.
    let owner = |me: &str, port: u16| -> Option<(String, String)> {
        if services
            .get(me)
            .is_some_and(|ps| ps.iter().any(|(_, p)| *p == port))
        {
            return None;
        }
        services.iter().find_map(|(pod, ps)| {
            ps.iter()
                .find(|(_, p)| *p == port)
                .map(|(name, _)| (pod.to_string(), name.clone()))
        })
    };
    let advice = |host: &str, port: u16, (pod, name): (String, String)| {
        format!(
            "{host}:{port} reaches pod {pod:?} on this host, but in a cluster every pod has its \
             own address: use {pod}:{port} (Service {pod}, port {name}; \
             {pod}.NAMESPACE.svc.cluster.local from another namespace); not rewritten"
        )
    };
    for pod in pods {
        let path = join("pods", &pod.name);
        for (field, list) in [
            ("init_containers", &pod.init_containers),
            ("containers", &pod.containers),
        ] {
            for (i, c) in list.iter().enumerate() {
                let cpath = format!("{}[{i}]", join(&path, field));
                let probes = [
                    ("startup_probe", c.startup_probe.as_ref().map(|p| &p.action)),
                    (
                        "liveness_probe",
                        c.liveness_probe.as_ref().map(|p| &p.action),
                    ),
                    (
                        "readiness_probe",
                        c.readiness_probe.as_ref().map(|p| &p.action),
                    ),
                ];
                let hooks = [
                    ("lifecycle.post_start", hook_action(&c.lifecycle.post_start)),
                    ("lifecycle.pre_stop", hook_action(&c.lifecycle.pre_stop)),
                ];
                for (key, action) in probes.into_iter().chain(hooks) {
                    let (host, port) = match action {
                        Some(ProbeAction::HttpGet { host, port, .. })
                        | Some(ProbeAction::TcpSocket { host, port })
                        | Some(ProbeAction::Grpc { host, port, .. }) => (host, *port),
                        _ => continue,
                    };
                    if let Some(o) = owner(&pod.name, port).filter(|_| is_loopback(host)) {
                        warnings.push(Warning::new(
                            format!("{cpath}.{key}"),
                            format!(
                                "{}; a probe or hook only ever reaches its own pod in \
                                 Kubernetes: check the other pod from a command (exec) instead",
                                advice(host, port, o)
                            ),
                        ));
                    }
                }
                let mut texts: Vec<(String, &str)> = c
                    .env
                    .iter()
                    .map(|(k, v)| (format!("{cpath}.env.{k}"), v.as_str()))
                    .collect();
                texts.extend(
                    c.command
                        .iter()
                        .enumerate()
                        .map(|(j, a)| (format!("{cpath}.command[{j}]"), a.as_str())),
                );
                for (at, text) in texts {
                    for (host, port) in loopback_ports(text) {
                        if let Some(o) = owner(&pod.name, port) {
                            warnings.push(Warning::new(at.clone(), advice(host, port, o)));
                        }
                    }
                }
            }
        }
    }
}

fn hook_action(h: &Option<Hook>) -> Option<&ProbeAction> {
    match h {
        Some(Hook::Action(a)) => Some(a),
        _ => None,
    }
}

/// Every `127.0.0.1:PORT` and `localhost:PORT` written in `text`.
pub(crate) fn loopback_ports(text: &str) -> Vec<(&'static str, u16)> {
    let mut out = Vec::new();
    for host in ["127.0.0.1", "localhost"] {
        let pattern = format!("{host}:");
        let mut rest = text;
        while let Some(at) = rest.find(&pattern) {
            let before_ok = rest[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'));
            let after = &rest[at + pattern.len()..];
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            if before_ok && let Ok(port) = digits.parse::<u16>() {
                out.push((host, port));
            }
            rest = after;
        }
    }
    out
}

/// Name of the init container that waits for pod `dep` (`--from kubernetes` leaves it out).
pub fn wait_container_name(dep: &str) -> String {
    format!("vigil-wait-{dep}")
}

/// An init container that waits until `dep`'s Service accepts connections on `port`, at most
/// `opts.wait_timeout_seconds`, saying so in its log; past that it fails, and the kubelet
/// tries it again with its back-off (or, for a pod that never restarts, the pod fails). A
/// Service sends connections only to Ready pods, so this waits for `ready`; `started` waits
/// the same (Kubernetes has no address for a started, not yet ready pod).
fn wait_container(
    dep: &str,
    port_name: &str,
    port: u16,
    condition: DependencyCondition,
    opts: &Options,
) -> Container {
    let limit = opts.wait_timeout_seconds;
    let cond = match condition {
        DependencyCondition::Started => "started",
        DependencyCondition::Ready => "ready",
        DependencyCondition::Completed => "completed",
    };
    let script = format!(
        "echo \"vigil: waiting up to {limit} s for pod {dep} ({cond}): Service {dep} port \
         {port_name} ({dep}:{port}) to accept connections\"; \
         waited=0; \
         until nc -z -w 2 {dep} {port}; do \
         if [ \"$waited\" -ge {limit} ]; then \
         echo \"vigil: {dep}:{port} did not accept connections within {limit} s; giving up\" >&2; \
         exit 1; fi; \
         sleep 2; waited=$((waited + 2)); done; \
         echo \"vigil: {dep}:{port} accepts connections after $waited s\""
    );
    Container {
        name: wait_container_name(dep),
        image: Some(opts.wait_image.clone()),
        command: Some(vec!["sh".to_string(), "-c".to_string(), script]),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            run_as_non_root: Some(true),
            run_as_user: Some(65534),
            ..SecurityContext::default()
        }),
        ..Container::default()
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

/// A set's `update` as a Deployment's `strategy`: `"rolling"` is a `RollingUpdate` of
/// `max_unavailable` replicas at a time that starts no replica beyond the count
/// (`maxSurge: 0`: vigil stops a replica before it starts its new run); `"recreate"` is
/// `Recreate` (every replica stopped, then the new ones started: what a reload does).
fn deployment_strategy(r: &Replica) -> DeploymentStrategy {
    match r.update {
        UpdateStrategy::Rolling => DeploymentStrategy {
            type_: Some("RollingUpdate".to_string()),
            rolling_update: Some(RollingUpdateDeployment {
                max_unavailable: Some(IntOrString::Int(
                    i32::try_from(r.max_unavailable).unwrap_or(i32::MAX),
                )),
                max_surge: Some(IntOrString::Int(0)),
            }),
        },
        UpdateStrategy::Recreate => DeploymentStrategy {
            type_: Some("Recreate".to_string()),
            rolling_update: None,
        },
    }
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
    ctx: &PodCtx<'_>,
    annotations: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
    errors: &mut Vec<ConvertError>,
) -> KubePodSpec {
    let mut waits = Vec::new();
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
        annotations.insert(DEPENDS_ON_ANNOTATION.to_string(), value.join(","));
        for d in &pod.depends_on {
            let dpath = join(&join(path, "depends_on"), &d.pod);
            let dep_kind = ctx.kinds.get(d.pod.as_str()).copied();
            match (d.condition, ctx.services.get(d.pod.as_str())) {
                (DependencyCondition::Completed, _) => warnings.push(Warning::new(
                    dpath,
                    format!(
                        "Kubernetes cannot start a pod after another one's Job completes without \
                         access to the API from inside the pod: the order is lost (kept as \
                         annotation {DEPENDS_ON_ANNOTATION}); run `kubectl wait \
                         --for=condition=complete job/{}` before applying {}, or use --embed",
                        d.pod, pod.name
                    ),
                )),
                (_, Some(ports)) => {
                    let Some((port_name, port)) = ports.first() else {
                        continue;
                    };
                    waits.push(wait_container(&d.pod, port_name, *port, d.condition, opts));
                }
                (_, None) => warnings.push(Warning::new(
                    dpath,
                    format!(
                        "pod {:?} has no Service to wait for ({}): {} starts without waiting \
                         (kept as annotation {DEPENDS_ON_ANNOTATION}); name its port with \
                         `ports = [{{ name = \"…\", port = … }}]` or give it a readiness probe",
                        d.pod,
                        match dep_kind {
                            Some(k) if k.runs_to_completion() => "it is a Job",
                            _ => "no ports and no probe on a port",
                        },
                        pod.name
                    ),
                )),
            }
        }
        let _ = ctx.kind;
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
    // A schedule is the CronJob's (`convert` warns when the kind chosen has none).
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
                             cannot be expressed: move it to a pod of its own, or use --embed",
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
                            "Kubernetes has one grace period per pod ({grace_secs} s, the pod's stop budget): check that this container stops within it"
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
    let mut init_containers = waits;
    init_containers.extend(convert_list(&pod.init_containers, "init_containers", true));
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
    if c.notify {
        a.warnings.push(Warning::new(
            join(path, "notify"),
            "Kubernetes has no sd_notify (NOTIFY_SOCKET): the container's READY=1, STATUS= and \
             STOPPING=1 are lost, and it counts as ready once it runs (add a readinessProbe)",
        ));
    }
    if let Some(p) = &c.ready_log_line {
        a.warnings.push(Warning::new(
            join(path, "ready_log_line"),
            format!(
                "Kubernetes has no readiness from a log line: ready_log_line {:?} is lost, and \
                 the container counts as ready once it runs (add a readinessProbe that checks \
                 what the line announces)",
                p.as_str()
            ),
        ));
    }
    if c.watchdog.is_some() {
        a.warnings.push(Warning::new(
            join(path, "watchdog_seconds"),
            "Kubernetes has no sd_notify watchdog: WATCHDOG=1 is lost and a hung container is \
             not killed for it (add a livenessProbe)",
        ));
    }
    if c.start_timeout.is_some() {
        a.warnings.push(Warning::new(
            join(path, "start_timeout_seconds"),
            "Kubernetes has no sd_notify start budget: start_timeout_seconds and \
             EXTEND_TIMEOUT_USEC= are lost (a startupProbe bounds a start)",
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
                    &format!(
                        "Kubernetes takes a numeric {k8s}, not the name {v:?}, and the name \
                         need not exist in the image: write the id it has in the image \
                         (`id -u`/`id -g` there)"
                    ),
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
             not generally available): set STOPSIGNAL in the image",
        );
    }
    if c.backoff != Backoff::default() {
        a.keep(
            "backoff",
            backoff_toml(&c.backoff),
            "the kubelet's back-off is fixed (10 s doubling to 300 s): accept it, or use --embed",
        );
    }
    if let Some(n) = c.max_restarts {
        a.keep(
            "max_restarts",
            n.to_string(),
            "Kubernetes restarts without a limit: accept it, make the pod a Job (its \
             backoffLimit), or use --embed",
        );
    }
    if !c.success_exit_codes.is_empty() {
        let codes: Vec<String> = c.success_exit_codes.iter().map(i32::to_string).collect();
        a.keep(
            "success_exit_codes",
            format!("[{}]", codes.join(", ")),
            "Kubernetes counts only exit code 0 as a success: make the program exit 0 (a \
             wrapper script), or use --embed",
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
            "Kubernetes has no per-container rlimits: set them in the image's entrypoint \
             (`ulimit`) or the node's container runtime",
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
    if let Some(dir) = &c.working_dir {
        a.warnings.push(Warning::new(
            join(path, "working_dir"),
            format!(
                "{} is a directory of this host, and the container sees only its image and \
                 volumes: check that the image has it (or mount a volume there)",
                dir.display()
            ),
        ));
    }
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
        // cpu.weight is only a share among siblings; a request is also what the scheduler
        // reserves on a node (kube-scheduler's NodeResourcesFit).
        a.warnings.push(Warning::new(
            join(&rpath, "cpu_weight"),
            format!(
                "requests.cpu {milli}m is what gives cpu.weight {w}, and the scheduler also \
                 reserves that much CPU on a node for it (cpu_weight reserves nothing): lower \
                 the request if no node has {milli}m to spare"
            ),
        ));
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
            "memory.high has no Kubernetes field (only the alpha MemoryQoS sets it): rely on \
             limits.memory, or use --embed",
        );
    }
    if let Some(s) = r.swap_max {
        ra.keep(
            "swap_max",
            super::bytes_quantity(s),
            "swap is a node setting in Kubernetes (the kubelet's memorySwap.swapBehavior): \
             check the nodes'",
        );
    }
    if let Some(p) = r.pids_max {
        ra.keep(
            "pids_max",
            p.to_string(),
            "the pid limit is a node setting in Kubernetes: check the kubelet's podPidsLimit",
        );
    }
    if r.oom_group {
        ra.keep(
            "oom_group",
            "true".to_string(),
            "memory.oom.group is a kubelet setting: check that the kubelet's \
             singleProcessOOMKill is false (the default on cgroup v2)",
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
        ports: (!c.ports.is_empty()).then(|| {
            c.ports
                .iter()
                .map(|p| ContainerPort {
                    name: Some(p.name.clone()),
                    container_port: i32::from(p.port),
                    protocol: Some("TCP".to_string()),
                    ..ContainerPort::default()
                })
                .collect()
        }),
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
