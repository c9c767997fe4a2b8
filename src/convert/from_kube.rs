//! Kubernetes manifests (a Pod, a Deployment's pod template, several YAML documents) → a vigil
//! config (TOML text), checked by `config::load_str` before it is returned.
//!
//! Owns the incoming mapping and the rejection of bad manifests with the path of the problem:
//! a kind other than Pod or Deployment (`kind`), a field the Kubernetes API does not know
//! (`spec.containers[0].imagePullPolcy` — found by comparing the input with what the typed
//! `k8s-openapi` object keeps), a wrongly typed value (its path from `serde_path_to_error`),
//! no containers (`spec.containers`), a container without `command` (vigil runs a host program,
//! not an image's entrypoint). Sidecars (init containers with `restartPolicy: Always`) stay
//! sidecars. What cannot run on a host (volumes, images, ports, service
//! accounts, scheduling…) is listed in warnings with the manifest path of each field.
//! Must not read anything but the text it is given.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, LifecycleHandler, Pod, PodSpec as KubePodSpec, Probe,
    SecurityContext, Service,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::{ANNOTATION_PREFIX, ConvertError, DEPENDS_ON_ANNOTATION, Warning};

/// What `--from kubernetes` produced.
#[derive(Debug, Clone)]
pub struct Converted {
    /// A complete vigil config (no `[supervisor]` table: the defaults apply).
    pub toml: String,
    pub warnings: Vec<Warning>,
    /// The pods it defines, in document order.
    pub pod_names: Vec<String>,
}

/// Convert `text` (read from `source`, named in the header comment and in messages).
pub fn convert(text: &str, source: &Path) -> Result<Converted, Vec<ConvertError>> {
    // Before the YAML parser, whose cost grows with the square of the nesting.
    if let Some((line, column)) = super::strict::too_deep(text) {
        return Err(vec![ConvertError::new(
            "",
            format!(
                "nested deeper than {} levels at line {line} column {column}; not read",
                super::strict::MAX_DEPTH
            ),
        )]);
    }
    let mut parsed = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = <super::strict::Strict as serde::Deserialize>::deserialize(doc)
            .map(|v| v.0)
            .map_err(|e| {
                vec![ConvertError {
                    document: Some(i + 1),
                    path: String::new(),
                    message: format!("not valid YAML: {}", e.to_string().trim_end()),
                }]
            })?;
        parsed.push(value);
    }
    let docs = parsed;
    let docs: Vec<(usize, &Value)> = docs
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.is_null())
        .map(|(i, d)| (i + 1, d))
        .collect();
    if docs.is_empty() {
        return Err(vec![ConvertError::new(
            "",
            format!("no Kubernetes object in the input: expected {KINDS}"),
        )]);
    }
    let multi = docs.len() > 1;
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut pods: Vec<PodOut> = Vec::new();
    for (n, doc) in docs {
        let mut ctx = Ctx {
            prefix: String::new(),
            doc_label: multi.then(|| format!("document {n}: ")),
            warnings: &mut warnings,
            errors: Vec::new(),
        };
        if let Some(pod) = read_doc(doc, &mut ctx) {
            if pods.iter().any(|p| p.name == pod.name) {
                ctx.error(
                    "metadata.name",
                    format!("pod {:?} is defined twice", pod.name),
                );
            } else {
                pods.push(pod);
            }
        }
        for mut e in ctx.errors {
            e.document = multi.then_some(n);
            errors.push(e);
        }
    }
    if errors.is_empty() && pods.is_empty() {
        errors.push(ConvertError::new(
            "",
            format!("no pod in the input: expected {KINDS}"),
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // depends_on may only name pods of this file.
    let names: BTreeSet<String> = pods.iter().map(|p| p.name.clone()).collect();
    for pod in &mut pods {
        pod.depends_on.retain(|(other, _)| {
            let known = names.contains(other);
            if !known {
                warnings.push(Warning::new(
                    format!("metadata.annotations.{DEPENDS_ON_ANNOTATION}"),
                    format!(
                        "pod {:?} depends on {other:?}, which this file does not define; dropped",
                        pod.name
                    ),
                ));
            }
            known
        });
    }
    let mut toml = format!(
        "# vigil config converted from {} by `vigil convert --from kubernetes`.\n",
        source.display()
    );
    for pod in &pods {
        pod.render(&mut toml);
    }
    if let Err(e) = crate::config::load_str(&toml, source) {
        return Err(e
            .iter()
            .map(|e| ConvertError::new(format!("converted config: {}", e.field), e.message.clone()))
            .collect());
    }
    Ok(Converted {
        toml,
        warnings,
        pod_names: pods.into_iter().map(|p| p.name).collect(),
    })
}

/// Per-document state: the path prefix of the pod spec (`spec` or `spec.template.spec`).
struct Ctx<'w> {
    prefix: String,
    doc_label: Option<String>,
    warnings: &'w mut Vec<Warning>,
    errors: Vec<ConvertError>,
}

impl Ctx<'_> {
    fn warn(&mut self, path: &str, message: impl Into<String>) {
        let path = match &self.doc_label {
            Some(d) => format!("{d}{path}"),
            None => path.to_string(),
        };
        self.warnings.push(Warning::new(path, message));
    }

    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(ConvertError::new(path, message));
    }

    /// `spec.containers[0]`-style path under the pod spec.
    fn at(&self, rest: &str) -> String {
        if rest.is_empty() {
            self.prefix.clone()
        } else if rest.starts_with('[') {
            format!("{}{rest}", self.prefix)
        } else {
            format!("{}.{rest}", self.prefix)
        }
    }
}

/// A pod as TOML keys, in the order they are written.
#[derive(Debug, Default)]
struct PodOut {
    name: String,
    keys: Vec<(String, String)>,
    depends_on: Vec<(String, String)>,
    init_containers: Vec<ContainerOut>,
    containers: Vec<ContainerOut>,
}

#[derive(Debug, Default)]
struct ContainerOut {
    keys: Vec<(String, String)>,
    resources: Vec<(String, String)>,
    probes: Vec<(&'static str, Vec<(String, String)>)>,
}

/// A TOML key, quoted unless bare.
fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        super::to_kube::quote(k)
    }
}

fn inline(pairs: &[(String, String)]) -> String {
    let items: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{} = {v}", key(k)))
        .collect();
    format!("{{ {} }}", items.join(", "))
}

fn str_array(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| super::to_kube::quote(s)).collect();
    format!("[{}]", items.join(", "))
}

/// A `depends_on` value from the annotation's `condition[+restart][+stop]`: the condition
/// alone, or the table form when the dependent follows its dependency.
fn dependency_value(annotated: &str) -> String {
    let mut parts = annotated.split('+').map(str::trim);
    let condition = super::to_kube::quote(parts.next().unwrap_or_default());
    let flags: Vec<&str> = parts.filter(|f| matches!(*f, "restart" | "stop")).collect();
    if flags.is_empty() {
        return condition;
    }
    let mut out = format!("{{ condition = {condition}");
    for f in flags {
        out.push_str(&format!(", {f} = true"));
    }
    out.push_str(" }");
    out
}

impl PodOut {
    fn render(&self, out: &mut String) {
        let table = format!("pods.{}", key(&self.name));
        out.push_str(&format!("\n[{table}]\n"));
        for (k, v) in &self.keys {
            out.push_str(&format!("{k} = {v}\n"));
        }
        if !self.depends_on.is_empty() {
            let pairs: Vec<(String, String)> = self
                .depends_on
                .iter()
                .map(|(p, c)| (p.clone(), dependency_value(c)))
                .collect();
            out.push_str(&format!("depends_on = {}\n", inline(&pairs)));
        }
        for (list, field) in [
            (&self.init_containers, "init_containers"),
            (&self.containers, "containers"),
        ] {
            for c in list {
                out.push_str(&format!("\n[[{table}.{field}]]\n"));
                for (k, v) in &c.keys {
                    out.push_str(&format!("{k} = {v}\n"));
                }
                if !c.resources.is_empty() {
                    out.push_str(&format!("[{table}.{field}.resources]\n"));
                    for (k, v) in &c.resources {
                        out.push_str(&format!("{k} = {v}\n"));
                    }
                }
                for (kind, keys) in &c.probes {
                    out.push_str(&format!("[{table}.{field}.{kind}]\n"));
                    for (k, v) in keys {
                        out.push_str(&format!("{k} = {v}\n"));
                    }
                }
            }
        }
    }
}

/// Whether `s` holds a `$(NAME)` reference, which the kubelet expands in commands and vigil
/// does not (`$$(` escapes it; `$(date)` or `$((n+1))` are left alone by both).
pub(crate) fn has_var_ref(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'$' && b[i + 1] == b'$' {
            i += 2;
            continue;
        }
        if b[i] == b'$' && b[i + 1] == b'(' {
            let rest = &s[i + 2..];
            if let Some(end) = rest.find(')') {
                let name = &rest[..end];
                let ident = name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if ident {
                    return true;
                }
            }
        }
        i += 1;
    }
    false
}

/// Path of a `serde_path_to_error` failure, empty for the root.
fn serde_path(p: &serde_path_to_error::Path) -> String {
    let s = p.to_string();
    if s == "." { String::new() } else { s }
}

/// Every key of `input` that the typed object dropped: a field Kubernetes does not know.
fn unknown_fields(input: &Value, known: &Value, path: &str, out: &mut Vec<ConvertError>) {
    match (input, known) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                if v.is_null() {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get(k) {
                    Some(bv) => unknown_fields(v, bv, &p, out),
                    None => out.push(ConvertError::new(
                        p,
                        format!("unknown field {k:?} (not in the Kubernetes API)"),
                    )),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                unknown_fields(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Deserialize a typed object, rejecting type errors and unknown fields with their paths.
fn typed<T>(doc: &Value, ctx: &mut Ctx<'_>) -> Option<T>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let obj: T = match serde_path_to_error::deserialize(doc) {
        Ok(o) => o,
        Err(e) => {
            let path = serde_path(e.path());
            ctx.error(&path, e.inner().to_string());
            return None;
        }
    };
    match serde_json::to_value(&obj) {
        Ok(known) => {
            let before = ctx.errors.len();
            unknown_fields(doc, &known, "", &mut ctx.errors);
            (ctx.errors.len() == before).then_some(obj)
        }
        Err(e) => {
            ctx.error("", format!("cannot re-read the object: {e}"));
            None
        }
    }
}

/// The kinds `--from kubernetes` reads, for messages.
const KINDS: &str = "Pod, Deployment, StatefulSet, Job, CronJob (or a Service, skipped)";

/// What a workload around the pod template adds to the pod: its copies and its pod keys.
#[derive(Default)]
struct Workload {
    replicas: Option<i32>,
    keys: Vec<(String, String)>,
    /// The Job's `activeDeadlineSeconds`, with its path.
    deadline: Option<(i64, String)>,
}

/// A Deployment's `strategy` and `progressDeadlineSeconds` as the keys of the pod with
/// replicas it becomes (docs/kubernetes.md): `RollingUpdate` — the type a Deployment has when
/// it names none — is `update = "rolling"` with `max_unavailable` its `maxUnavailable` (a
/// percentage of the replicas rounded down, as the Deployment controller rounds it, at least
/// 1; 25% when unset), `Recreate` vigil's default; a `maxSurge` other than 0 is a warning
/// (vigil stops a replica before it starts the new one).
fn deployment_rollout(spec: &DeploymentSpec, ctx: &mut Ctx<'_>) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    let replicas = i64::from(spec.replicas.unwrap_or(1));
    let strategy = spec.strategy.as_ref();
    match strategy.and_then(|s| s.type_.as_deref()) {
        Some("Recreate") => {}
        None | Some("RollingUpdate") => {
            keys.push(("update".into(), "\"rolling\"".into()));
            let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
            let of_replicas = |percent: i64| replicas * percent / 100;
            let at = "spec.strategy.rollingUpdate.maxUnavailable";
            let n = match rolling.and_then(|r| r.max_unavailable.as_ref()) {
                None => of_replicas(25),
                Some(IntOrString::Int(n)) => i64::from(*n),
                Some(IntOrString::String(p)) => {
                    match p.strip_suffix('%').and_then(|n| n.parse::<i64>().ok()) {
                        Some(percent) => of_replicas(percent),
                        None => {
                            ctx.warn(at, format!("{p:?} is not a number or a percentage; 1"));
                            1
                        }
                    }
                }
            };
            if n < 1 && rolling.is_some_and(|r| r.max_unavailable.is_some()) {
                ctx.warn(
                    at,
                    "vigil replaces at least one replica at a time (it starts none beyond the \
                     count); 1",
                );
            }
            let n = n.clamp(1, i64::from(crate::config::spec::MAX_REPLICAS));
            if n != 1 {
                keys.push(("max_unavailable".into(), n.to_string()));
            }
            let surge = rolling.and_then(|r| r.max_surge.as_ref());
            if surge.is_some_and(|s| {
                !matches!(s, IntOrString::Int(0)) && s != &IntOrString::String("0%".into())
            }) {
                ctx.warn(
                    "spec.strategy.rollingUpdate.maxSurge",
                    "vigil starts no replica beyond the count: each is stopped before its new \
                     run starts; ignored",
                );
            }
        }
        Some(other) => ctx.warn(
            "spec.strategy.type",
            format!(
                "unknown strategy {other:?} (RollingUpdate or Recreate); converted as Recreate"
            ),
        ),
    }
    if let Some(s) = spec.progress_deadline_seconds
        && s != 600
    {
        if s > 0 {
            keys.push(("progress_deadline_seconds".into(), s.to_string()));
        } else {
            ctx.warn(
                "spec.progressDeadlineSeconds",
                format!("{s} is not a duration > 0; ignored"),
            );
        }
    }
    keys
}

/// Check `apiVersion` against the one a kind has.
fn api_is(api: &str, want: &str, kind: &str, ctx: &mut Ctx<'_>) -> bool {
    if api == want {
        return true;
    }
    ctx.error(
        "apiVersion",
        format!("expected {want:?} for a {kind}, found {api:?}"),
    );
    false
}

fn read_doc(doc: &Value, ctx: &mut Ctx<'_>) -> Option<PodOut> {
    let Some(obj) = doc.as_object() else {
        ctx.error(
            "",
            "expected a Kubernetes object (a mapping with apiVersion and kind)",
        );
        return None;
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let api = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let mut work = Workload::default();
    let (meta, template_annotations, spec) = match kind {
        "Pod" => {
            if !api_is(api, "v1", kind, ctx) {
                return None;
            }
            let pod: Pod = typed(doc, ctx)?;
            ctx.prefix = "spec".to_string();
            let annotations = pod.metadata.annotations.clone();
            (pod.metadata, annotations, pod.spec)
        }
        "Deployment" => {
            if !api_is(api, "apps/v1", kind, ctx) {
                return None;
            }
            let d: Deployment = typed(doc, ctx)?;
            ctx.prefix = "spec.template.spec".to_string();
            work.replicas = d.spec.replicas;
            if d.spec.replicas.is_some_and(|r| r > 1) {
                work.keys.extend(deployment_rollout(&d.spec, ctx));
            }
            let t = d.spec.template;
            (d.metadata, t.metadata.and_then(|m| m.annotations), t.spec)
        }
        "StatefulSet" => {
            if !api_is(api, "apps/v1", kind, ctx) {
                return None;
            }
            let d: StatefulSet = typed(doc, ctx)?;
            ctx.prefix = "spec.template.spec".to_string();
            work.replicas = d.spec.replicas;
            work.keys.push(("stable_identity".into(), "true".into()));
            if let Ok(v) = serde_json::to_value(&d.spec) {
                warn_rest(
                    &v,
                    &["replicas", "selector", "template", "serviceName"],
                    "spec",
                    |_| "a StatefulSet's rollout and storage settings have no meaning on one host; ignored",
                    ctx,
                );
            }
            let t = d.spec.template;
            (d.metadata, t.metadata.and_then(|m| m.annotations), t.spec)
        }
        "Job" => {
            if !api_is(api, "batch/v1", kind, ctx) {
                return None;
            }
            let j: Job = typed(doc, ctx)?;
            ctx.prefix = "spec.template.spec".to_string();
            let Some(spec) = j.spec else {
                ctx.error("spec", "missing: the Job needs a spec with a pod template");
                return None;
            };
            job(&spec, "spec", &mut work, ctx);
            let t = spec.template;
            (j.metadata, t.metadata.and_then(|m| m.annotations), t.spec)
        }
        "CronJob" => {
            if !api_is(api, "batch/v1", kind, ctx) {
                return None;
            }
            let c: CronJob = typed(doc, ctx)?;
            ctx.prefix = "spec.jobTemplate.spec.template.spec".to_string();
            cron_job(&c.spec, &mut work, ctx);
            let Some(spec) = c.spec.job_template.spec else {
                ctx.error(
                    "spec.jobTemplate.spec",
                    "missing: the CronJob needs a Job spec with a pod template",
                );
                return None;
            };
            job(&spec, "spec.jobTemplate.spec", &mut work, ctx);
            let t = spec.template;
            (c.metadata, t.metadata.and_then(|m| m.annotations), t.spec)
        }
        // The Service `--to kubernetes` writes beside a pod: its ports are the containers'
        // named `ports`, read with them; on the host every port is the host's.
        "Service" => {
            if api_is(api, "v1", kind, ctx) {
                let _: Service = typed(doc, ctx)?;
            }
            return None;
        }
        "" => {
            ctx.error("kind", format!("missing: expected {KINDS}"));
            return None;
        }
        other => {
            ctx.error(
                "kind",
                format!("unsupported kind {other:?}: expected {KINDS}"),
            );
            return None;
        }
    };
    warn_namespace(meta.namespace.as_deref(), ctx);
    // `replicas = N`: the pods NAME-0 … NAME-{N-1} (behaviour.md §14).
    match work.replicas {
        Some(0) => ctx.warn(
            "spec.replicas",
            "0 replicas: vigil runs at least one; converted as one (stop it with `vigil stop`)",
        ),
        Some(r) if r > 1 => work.keys.push(("replicas".into(), r.to_string())),
        _ => {}
    }
    let name = if kind == "Pod" {
        meta.name.or(meta.generate_name)
    } else {
        meta.name
    };
    let Some(name) = name.map(|n| n.trim_end_matches('-').to_string()) else {
        ctx.error("metadata.name", "missing: the pod needs a name");
        return None;
    };
    let Some(spec) = spec else {
        ctx.error(&ctx.at(""), "missing: the pod needs a spec with containers");
        return None;
    };
    let mut out = pod(name, &spec, template_annotations.unwrap_or_default(), ctx)?;
    if let Some((d, path)) = work.deadline {
        let d = seconds(d, &path, ctx);
        match out
            .keys
            .iter_mut()
            .find(|(k, _)| k == "active_deadline_seconds")
        {
            Some(slot) => {
                ctx.warn(
                    &path,
                    "both the Job and its pod template have activeDeadlineSeconds; the shorter \
                     is kept",
                );
                let shorter = match (slot.1.parse::<u64>(), d.parse::<u64>()) {
                    (Ok(a), Ok(b)) => a.min(b).to_string(),
                    _ => d,
                };
                slot.1 = shorter;
            }
            None => out.keys.push(("active_deadline_seconds".into(), d)),
        }
    }
    out.keys.extend(work.keys);
    Some(out)
}

/// A Job's fields (at `path`): `backoffLimit` → the pod's `max_restarts`, for `OnFailure`
/// (the controller's default, 6, when unwritten; the largest int32, which `--to` writes for
/// "no limit", is none); for `Never` vigil runs the pod once, so a limit above 0 is a warning.
/// `activeDeadlineSeconds` → `active_deadline_seconds`.
fn job(spec: &JobSpec, path: &str, work: &mut Workload, ctx: &mut Ctx<'_>) {
    let policy = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let limit_path = format!("{path}.backoffLimit");
    match (policy, spec.backoff_limit) {
        ("Never", Some(0)) => {}
        ("Never", n) => ctx.warn(
            &limit_path,
            format!(
                "the Job makes up to {} new pods after a failure, and vigil runs a Never pod \
                 once; for retries set restart_policy = \"OnFailure\" and max_restarts",
                n.unwrap_or(6)
            ),
        ),
        (_, Some(i32::MAX)) => {}
        (_, n) => work
            .keys
            .push(("max_restarts".into(), n.unwrap_or(6).to_string())),
    }
    if let Some(d) = spec.active_deadline_seconds {
        work.deadline = Some((d, format!("{path}.activeDeadlineSeconds")));
    }
    for (field, v) in [
        ("parallelism", spec.parallelism),
        ("completions", spec.completions),
    ] {
        if let Some(n) = v.filter(|n| *n != 1) {
            ctx.warn(
                &format!("{path}.{field}"),
                format!("vigil runs one copy of a pod at a time, not {n}"),
            );
        }
    }
    if let Ok(v) = serde_json::to_value(spec) {
        warn_rest(
            &v,
            &[
                "template",
                "backoffLimit",
                "activeDeadlineSeconds",
                "parallelism",
                "completions",
                "selector",
                "manualSelector",
            ],
            path,
            |_| "a Job setting vigil has no use for on one host; ignored",
            ctx,
        );
    }
}

/// A CronJob's schedule → the pod's `schedule`. `concurrencyPolicy: Allow` (also the
/// default) becomes `Forbid`, with a warning: vigil has one set of containers per pod.
fn cron_job(spec: &CronJobSpec, work: &mut Workload, ctx: &mut Ctx<'_>) {
    let q = super::to_kube::quote;
    let mut s = vec![("cron".to_string(), q(&spec.schedule))];
    if let Some(z) = &spec.time_zone {
        s.push(("time_zone".into(), q(z)));
    }
    let concurrency = match spec.concurrency_policy.as_deref() {
        Some(c @ ("Forbid" | "Replace")) => c.to_string(),
        other => {
            ctx.warn(
                "spec.concurrencyPolicy",
                format!(
                    "{} runs two runs at once, and a vigil pod has one set of containers: \
                     \"Forbid\" instead (set \"Replace\" to stop the old run)",
                    other.map_or("unwritten, the default Allow".to_string(), |o| format!(
                        "{o:?}"
                    ))
                ),
            );
            "Forbid".to_string()
        }
    };
    s.push(("concurrency".into(), q(&concurrency)));
    if let Some(d) = spec.starting_deadline_seconds {
        let d = seconds(d, "spec.startingDeadlineSeconds", ctx);
        s.push(("starting_deadline_seconds".into(), d));
    }
    if spec.suspend == Some(true) {
        s.push(("suspend".into(), "true".into()));
    }
    work.keys.push(("schedule".into(), inline(&s)));
    // The history limits: vigil's `history`, whose counts are 0–100 (unwritten, the same 3
    // and 1 as a CronJob's).
    let limits = [
        (
            "successful",
            "spec.successfulJobsHistoryLimit",
            spec.successful_jobs_history_limit,
        ),
        (
            "failed",
            "spec.failedJobsHistoryLimit",
            spec.failed_jobs_history_limit,
        ),
    ];
    let mut h = Vec::new();
    for (key, path, limit) in limits {
        let Some(n) = limit else {
            continue;
        };
        let max = i32::try_from(crate::config::spec::HistorySpec::MAX).unwrap_or(i32::MAX);
        let kept = n.clamp(0, max);
        if kept != n {
            ctx.warn(
                path,
                format!("{n} is outside what vigil keeps (0 to {max}): {kept} instead"),
            );
        }
        h.push((key.to_string(), kept.to_string()));
    }
    if !h.is_empty() {
        // A limit the manifest leaves out is the CronJob's default, written out.
        if !h.iter().any(|(k, _)| k == "successful") {
            h.insert(0, ("successful".into(), "3".into()));
        }
        if !h.iter().any(|(k, _)| k == "failed") {
            h.push(("failed".into(), "1".into()));
        }
        work.keys.push(("history".into(), inline(&h)));
    }
    if let Ok(v) = serde_json::to_value(spec) {
        warn_rest(
            &v,
            &[
                "schedule",
                "timeZone",
                "concurrencyPolicy",
                "startingDeadlineSeconds",
                "suspend",
                "successfulJobsHistoryLimit",
                "failedJobsHistoryLimit",
                "jobTemplate",
            ],
            "spec",
            |_| "not carried to vigil; ignored",
            ctx,
        );
    }
}

/// `metadata.namespace` is not kept (vigil has one flat set of pod names): said, so that two
/// manifests of one name in two namespaces are not a surprise.
fn warn_namespace(namespace: Option<&str>, ctx: &mut Ctx<'_>) {
    if let Some(ns) = namespace.filter(|ns| !ns.is_empty()) {
        ctx.warn(
            "metadata.namespace",
            format!(
                "{ns:?} is left out: vigil has no namespaces, every pod name is one of the \
                 host's (a pod of the same name from another namespace would clash)"
            ),
        );
    }
}

/// Why a pod-spec field has no meaning on a host.
fn pod_field_note(field: &str) -> &'static str {
    match field {
        "volumes" => "volumes are not created: containers see the host's file system",
        "serviceAccountName" | "serviceAccount" | "automountServiceAccountToken" => {
            "no service account: a host has no API credentials to mount"
        }
        "nodeSelector"
        | "nodeName"
        | "affinity"
        | "tolerations"
        | "topologySpreadConstraints"
        | "schedulerName"
        | "priority"
        | "priorityClassName"
        | "preemptionPolicy"
        | "schedulingGates" => "scheduling does not apply: vigil runs on this host",
        "imagePullSecrets" => "images are not pulled",
        "hostNetwork" | "hostPID" | "hostIPC" | "hostUsers" => {
            "vigil does not isolate: every container shares the host's network, PID, IPC and \
             user namespaces with every process of the host, whatever this says"
        }
        "dnsPolicy" | "dnsConfig" | "hostAliases" | "hostname" | "subdomain" => {
            "containers use the host's name resolution"
        }
        _ => "has no meaning on a host; ignored",
    }
}

/// Why a container field has no meaning on a host.
fn container_field_note(field: &str) -> &'static str {
    match field {
        "image" => "images are not pulled or run: `command` runs on the host (kept as `image`)",
        "ports" => "ports are not published: the process binds on the host directly",
        "volumeMounts" | "volumeDevices" => "volumes are not mounted",
        "envFrom" => "ConfigMaps and Secrets are not read; set the variables in `env`",
        "imagePullPolicy" => "images are not pulled",
        "stdin" | "stdinOnce" | "tty" => "containers get no terminal or standard input",
        _ => "has no meaning on a host; ignored",
    }
}

/// Warn about every present field of `value` (an object) not in `handled`.
fn warn_rest(
    value: &Value,
    handled: &[&str],
    path: &str,
    note: fn(&str) -> &'static str,
    ctx: &mut Ctx<'_>,
) {
    let Some(obj) = value.as_object() else { return };
    for (k, v) in obj {
        let empty = v.is_null()
            || v.as_array().is_some_and(Vec::is_empty)
            || v.as_object().is_some_and(serde_json::Map::is_empty);
        if empty || handled.contains(&k.as_str()) {
            continue;
        }
        ctx.warn(&format!("{path}.{k}"), note(k));
    }
}

fn pod(
    name: String,
    spec: &KubePodSpec,
    annotations: BTreeMap<String, String>,
    ctx: &mut Ctx<'_>,
) -> Option<PodOut> {
    if spec.containers.is_empty() {
        ctx.error(&ctx.at("containers"), "a pod needs at least one container");
        return None;
    }
    if let Ok(v) = serde_json::to_value(spec) {
        warn_rest(
            &v,
            &[
                "containers",
                "initContainers",
                "restartPolicy",
                "terminationGracePeriodSeconds",
                "activeDeadlineSeconds",
                "securityContext",
            ],
            &ctx.at(""),
            pod_field_note,
            ctx,
        );
    }
    let mut out = PodOut {
        name,
        ..PodOut::default()
    };
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    out.keys
        .push(("restart_policy".into(), super::to_kube::quote(policy)));
    if let Some(g) = spec.termination_grace_period_seconds {
        let g = seconds(g, &ctx.at("terminationGracePeriodSeconds"), ctx);
        out.keys
            .push(("termination_grace_period_seconds".into(), g));
    }
    if let Some(d) = spec.active_deadline_seconds {
        let d = seconds(d, &ctx.at("activeDeadlineSeconds"), ctx);
        out.keys.push(("active_deadline_seconds".into(), d));
    }
    // Pod-level identity is every container's default.
    let mut pod_ids = PodIds::default();
    if let Some(psc) = &spec.security_context {
        pod_ids = PodIds {
            user: psc.run_as_user,
            group: psc.run_as_group,
            non_root: psc.run_as_non_root,
        };
        if let Ok(v) = serde_json::to_value(psc) {
            warn_rest(
                &v,
                &["runAsUser", "runAsGroup", "runAsNonRoot"],
                &ctx.at("securityContext"),
                |_| "not supported by vigil; ignored",
                ctx,
            );
        }
    }
    // vigil/… annotations: depends_on and per-container settings.
    let mut per_container: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (k, v) in &annotations {
        let Some(rest) = k.strip_prefix(ANNOTATION_PREFIX) else {
            continue;
        };
        if k == super::to_kube::MIN_READY_ANNOTATION {
            match v.trim().parse::<u32>() {
                Ok(n) => out.keys.push(("min_ready".into(), n.to_string())),
                Err(_) => ctx.warn(
                    &format!("metadata.annotations.{k}"),
                    format!("{v:?} is not a number of replicas; ignored"),
                ),
            }
            continue;
        }
        if k == DEPENDS_ON_ANNOTATION {
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match item.split_once('=') {
                    Some((p, c)) => out.depends_on.push((p.trim().into(), c.trim().into())),
                    None => ctx.warn(
                        &format!("metadata.annotations.{k}"),
                        format!("{item:?} is not `pod=condition`; ignored"),
                    ),
                }
            }
            continue;
        }
        match rest.split_once('.') {
            Some((c, setting)) => per_container
                .entry(c.to_string())
                .or_default()
                .push((setting.to_string(), v.clone())),
            None => ctx.warn(
                &format!("metadata.annotations.{k}"),
                "unknown vigil annotation; ignored",
            ),
        }
    }
    let mut names = BTreeSet::new();
    for (list, field, init) in [
        (
            spec.init_containers.as_deref().unwrap_or(&[]),
            "initContainers",
            true,
        ),
        (spec.containers.as_slice(), "containers", false),
    ] {
        for (i, c) in list.iter().enumerate() {
            let path = ctx.at(&format!("{field}[{i}]"));
            // The init container `--to kubernetes` adds to wait for a dependency's Service:
            // `depends_on` is that wait on the host.
            if init
                && out
                    .depends_on
                    .iter()
                    .any(|(dep, _)| c.name == super::to_kube::wait_container_name(dep))
            {
                continue;
            }
            names.insert(c.name.clone());
            let extra = per_container.get(&c.name).map(Vec::as_slice).unwrap_or(&[]);
            // A sidecar (Kubernetes 1.29 restartable init container) is one in vigil too:
            // an init container with restart_policy = "Always", probes allowed.
            let sidecar = init && c.restart_policy.as_deref() == Some("Always");
            if let Some(mut co) = container(c, &path, init && !sidecar, pod_ids, extra, ctx) {
                if sidecar {
                    set(
                        &mut co.keys,
                        "restart_policy",
                        super::to_kube::quote("Always"),
                    );
                }
                if init {
                    out.init_containers.push(co);
                } else {
                    out.containers.push(co);
                }
            }
        }
    }
    for c in per_container.keys() {
        if !names.contains(c) {
            ctx.warn(
                &format!("metadata.annotations.{ANNOTATION_PREFIX}{c}.*"),
                format!("no container {c:?} in this pod; ignored"),
            );
        }
    }
    ctx.errors.is_empty().then_some(out)
}

/// The pod's `securityContext` identity, every container's default.
#[derive(Debug, Clone, Copy, Default)]
struct PodIds {
    user: Option<i64>,
    group: Option<i64>,
    non_root: Option<bool>,
}

/// Annotation settings vigil takes back, and whether the value is TOML (else a string).
const ANNOTATED: &[(&str, bool)] = &[
    ("user", false),
    ("env_file", false),
    ("group", false),
    ("restart_policy", false),
    ("stop_signal", false),
    ("termination_grace_period_seconds", true),
    ("backoff", true),
    ("max_restarts", true),
    ("success_exit_codes", true),
    ("rlimits", true),
    ("memory_high", false),
    ("swap_max", false),
    ("pids_max", true),
    ("oom_group", true),
];
const RESOURCE_KEYS: &[&str] = &["memory_high", "swap_max", "pids_max", "oom_group"];

/// The kubelet's default `terminationMessagePath` (`v1.TerminationMessagePathDefault`): a file
/// it creates and mounts into the container. On the host it is the host's own /dev.
const KUBERNETES_TERMINATION_LOG: &str = "/dev/termination-log";

fn set(keys: &mut Vec<(String, String)>, k: &str, v: String) {
    match keys.iter_mut().find(|(key, _)| key == k) {
        Some(slot) => slot.1 = v,
        None => keys.push((k.to_string(), v)),
    }
}

fn container(
    c: &Container,
    path: &str,
    init: bool,
    pod_ids: PodIds,
    annotated: &[(String, String)],
    ctx: &mut Ctx<'_>,
) -> Option<ContainerOut> {
    let q = super::to_kube::quote;
    let mut out = ContainerOut::default();
    out.keys.push(("name".into(), q(&c.name)));
    // With env_file kept in an annotation, envFrom is that file's Secret: nothing is lost.
    let has_env_file = annotated.iter().any(|(k, _)| k == "env_file");
    if let Ok(mut v) = serde_json::to_value(c) {
        if has_env_file && let Some(o) = v.as_object_mut() {
            o.remove("envFrom");
        }
        warn_rest(
            &v,
            &[
                "terminationMessagePath",
                "terminationMessagePolicy",
                "name",
                "command",
                "args",
                "env",
                "workingDir",
                "securityContext",
                "resources",
                "startupProbe",
                "livenessProbe",
                "readinessProbe",
                "lifecycle",
                "restartPolicy",
                "ports",
            ],
            path,
            container_field_note,
            ctx,
        );
    }
    container_ports(c.ports.as_deref().unwrap_or(&[]), path, &mut out, ctx);
    let Some(command) = c.command.as_ref().filter(|c| !c.is_empty()) else {
        let has_args = c.args.as_ref().is_some_and(|a| !a.is_empty());
        let fix = if has_args {
            "move args to command, with the program the image's entrypoint would run in front \
             (command: [PROGRAM, ...args])"
        } else {
            "add `command`"
        };
        ctx.error(
            &format!("{path}.command"),
            format!(
                "container {:?} has no command: vigil runs a program on the host, not the \
                 image's entrypoint; {fix}",
                c.name
            ),
        );
        return None;
    };
    let mut argv = command.clone();
    argv.extend(c.args.iter().flatten().cloned());
    if argv.iter().any(|a| has_var_ref(a)) {
        ctx.warn(
            &format!("{path}.command"),
            "$(VAR) references are not expanded by vigil",
        );
    }
    out.keys.push(("command".into(), str_array(&argv)));
    if let Some(image) = &c.image {
        out.keys.push(("image".into(), q(image)));
    }
    let mut env = Vec::new();
    for (i, e) in c.env.iter().flatten().enumerate() {
        match (&e.value, &e.value_from) {
            (_, Some(_)) => ctx.warn(
                &format!("{path}.env[{i}].valueFrom"),
                format!(
                    "{}: values from the API (fields, ConfigMaps, Secrets) are not available; \
                     left out",
                    e.name
                ),
            ),
            (v, None) => env.push((e.name.clone(), q(v.as_deref().unwrap_or("")))),
        }
    }
    if !env.is_empty() {
        out.keys.push(("env".into(), inline(&env)));
    }
    if let Some(wd) = &c.working_dir {
        out.keys.push(("working_dir".into(), q(wd)));
    }
    match c.termination_message_path.as_deref() {
        Some(KUBERNETES_TERMINATION_LOG) => ctx.warn(
            &format!("{path}.terminationMessagePath"),
            format!(
                "{KUBERNETES_TERMINATION_LOG} (Kubernetes' default) is left out: on the host \
                 it names the host's /dev, where vigil makes no file; no termination message is \
                 read unless termination_message_path names a file the program writes (e.g. \
                 under /run), or FallbackToLogsOnError takes the last lines of its output"
            ),
        ),
        Some(p) => out.keys.push(("termination_message_path".into(), q(p))),
        None => {}
    }
    if let Some(p) = &c.termination_message_policy {
        out.keys.push(("termination_message_policy".into(), q(p)));
    }
    let annotated_user = annotated
        .iter()
        .find(|(k, _)| k == "user")
        .map(|(_, v)| v.as_str());
    security(
        c.security_context.as_ref(),
        (path, &c.name),
        pod_ids,
        annotated_user,
        &mut out,
        ctx,
    );
    if init {
        // The pod's policy folds to OnFailure for init containers; an explicit one is kept.
    } else if let Some(p) = c.restart_policy.as_deref().filter(|p| *p != "Always") {
        ctx.warn(
            &format!("{path}.restartPolicy"),
            format!("{p:?} is only allowed on init containers; ignored"),
        );
    }
    if let Some(lc) = &c.lifecycle {
        if let Some(sig) = &lc.stop_signal {
            out.keys.push(("stop_signal".into(), q(sig)));
        }
        let ports = c.ports.as_deref().unwrap_or(&[]);
        let mut hooks = Vec::new();
        for (key, field, h) in [
            ("post_start", "postStart", &lc.post_start),
            ("pre_stop", "preStop", &lc.pre_stop),
        ] {
            let Some(h) = h else { continue };
            if let Some(v) = hook(h, &format!("{path}.lifecycle.{field}"), ports, ctx) {
                hooks.push((key.to_string(), v));
            }
        }
        if !hooks.is_empty() {
            out.keys.push(("lifecycle".into(), inline(&hooks)));
        }
    }
    resources(c, path, &mut out, ctx);
    let ports = c.ports.as_deref().unwrap_or(&[]);
    for (kind, probe_field, p) in [
        ("startup_probe", "startupProbe", &c.startup_probe),
        ("liveness_probe", "livenessProbe", &c.liveness_probe),
        ("readiness_probe", "readinessProbe", &c.readiness_probe),
    ] {
        let Some(p) = p else { continue };
        let ppath = format!("{path}.{probe_field}");
        if init {
            ctx.warn(
                &ppath,
                "probes on init containers are not supported; ignored",
            );
            continue;
        }
        if let Some(keys) = probe(p, &ppath, ports, ctx) {
            out.probes.push((kind, keys));
        }
    }
    for (setting, value) in annotated {
        let Some((_, toml_value)) = ANNOTATED.iter().find(|(k, _)| k == setting) else {
            ctx.warn(
                &format!(
                    "metadata.annotations.{ANNOTATION_PREFIX}{}.{setting}",
                    c.name
                ),
                "unknown vigil setting; ignored",
            );
            continue;
        };
        let rendered = if *toml_value {
            let parses = toml::from_str::<toml::Table>(&format!("v = {value}")).is_ok();
            if !parses {
                ctx.error(
                    &format!(
                        "metadata.annotations.{ANNOTATION_PREFIX}{}.{setting}",
                        c.name
                    ),
                    format!("{value:?} is not a TOML value"),
                );
                continue;
            }
            value.clone()
        } else {
            q(value)
        };
        if RESOURCE_KEYS.contains(&setting.as_str()) {
            set(&mut out.resources, setting, rendered);
        } else {
            set(&mut out.keys, setting, rendered);
        }
    }
    Some(out)
}

/// Named TCP ports → `ports` (what `--to kubernetes` makes the Service of); a port without a
/// name, of another protocol, or published on the node (`hostPort`) is a warning.
fn container_ports(ports: &[ContainerPort], path: &str, out: &mut ContainerOut, ctx: &mut Ctx<'_>) {
    let mut kept = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let at = format!("{path}.ports[{i}]");
        let tcp = p.protocol.as_deref().is_none_or(|pr| pr == "TCP");
        match (&p.name, tcp) {
            (Some(name), true) => kept.push(format!(
                "{{ name = {}, port = {} }}",
                super::to_kube::quote(name),
                p.container_port
            )),
            (None, _) => ctx.warn(
                &at,
                "a port without a name is not kept: the process binds on the host directly \
                 (name it to keep it as `ports`)",
            ),
            (Some(_), false) => ctx.warn(
                &at,
                "only TCP ports are kept as `ports`; the process binds on the host directly",
            ),
        }
        if p.host_port.is_some() || p.host_ip.is_some() {
            ctx.warn(
                &format!("{at}.hostPort"),
                "ports are not published: the process binds on the host directly",
            );
        }
    }
    if !kept.is_empty() {
        out.keys
            .push(("ports".into(), format!("[{}]", kept.join(", "))));
    }
}

fn security(
    sc: Option<&SecurityContext>,
    (path, name): (&str, &str),
    pod: PodIds,
    annotated_user: Option<&str>,
    out: &mut ContainerOut,
    ctx: &mut Ctx<'_>,
) {
    let user = sc.and_then(|s| s.run_as_user).or(pod.user);
    let group = sc.and_then(|s| s.run_as_group).or(pod.group);
    // Where a setting is written: the container's securityContext, else the pod's.
    let at = |ctx: &Ctx<'_>, field: &str, own: bool| {
        if own {
            format!("{path}.securityContext.{field}")
        } else {
            ctx.at(&format!("securityContext.{field}"))
        }
    };
    let own_non_root = sc.and_then(|s| s.run_as_non_root);
    if own_non_root.or(pod.non_root) == Some(true) {
        let own_user = sc.is_some_and(|s| s.run_as_user.is_some());
        let problem = match (annotated_user.map(str::trim), user) {
            (Some(root @ ("0" | "root")), _) => Some((
                format!("metadata.annotations.{ANNOTATION_PREFIX}{name}.user"),
                format!("user {root:?} breaks runAsNonRoot: true"),
            )),
            // A user name, resolved when the container starts.
            (Some(_), _) => None,
            (None, Some(0)) => Some((
                at(ctx, "runAsUser", own_user),
                "runAsUser 0 breaks runAsNonRoot: true (the kubelet refuses to start the \
                 container)"
                    .to_string(),
            )),
            (None, Some(_)) => None,
            (None, None) => Some((
                at(ctx, "runAsNonRoot", own_non_root.is_some()),
                "runAsNonRoot: true without runAsUser: vigil would run the container as its own \
                 user, root when vigil runs as root (the kubelet refuses a user it cannot \
                 verify as non-root); set runAsUser to a uid other than 0"
                    .to_string(),
            )),
        };
        match problem {
            Some((p, m)) => ctx.error(&p, m),
            // Checked again at every start (a user name resolves then).
            None => out.keys.push(("run_as_non_root".into(), "true".into())),
        }
    }
    if let Some(u) = user {
        out.keys.push(("user".into(), u.to_string()));
    }
    if let Some(g) = group {
        out.keys.push(("group".into(), g.to_string()));
    }
    // The Kubernetes default allows privilege escalation; so does vigil's no_new_privs = false.
    let escalate = sc
        .and_then(|s| s.allow_privilege_escalation)
        .unwrap_or(true);
    out.keys
        .push(("no_new_privs".into(), (!escalate).to_string()));
    let Some(sc) = sc else { return };
    if let Some(caps) = &sc.capabilities {
        let drops_all = caps
            .drop
            .iter()
            .flatten()
            .any(|d| d.eq_ignore_ascii_case("ALL"));
        let add: Vec<String> = caps
            .add
            .iter()
            .flatten()
            .map(|a| {
                let up = a.to_ascii_uppercase();
                if up.starts_with("CAP_") {
                    up
                } else {
                    format!("CAP_{up}")
                }
            })
            .collect();
        if !drops_all && (caps.drop.as_ref().is_some_and(|d| !d.is_empty()) || !add.is_empty()) {
            ctx.warn(
                &format!("{path}.securityContext.capabilities"),
                "vigil keeps only the listed capabilities (as with drop: [ALL]), not the \
                 runtime's default set plus these",
            );
        }
        if !add.is_empty() {
            out.keys.push(("capabilities".into(), str_array(&add)));
        }
    }
    if let Ok(v) = serde_json::to_value(sc) {
        warn_rest(
            &v,
            &[
                "runAsUser",
                "runAsGroup",
                "runAsNonRoot",
                "allowPrivilegeEscalation",
                "capabilities",
            ],
            &format!("{path}.securityContext"),
            |_| "not supported by vigil; ignored",
            ctx,
        );
    }
}

fn resources(c: &Container, path: &str, out: &mut ContainerOut, ctx: &mut Ctx<'_>) {
    let Some(r) = &c.resources else { return };
    let rpath = format!("{path}.resources");
    for (name, q) in r.limits.iter().flatten() {
        let p = format!("{rpath}.limits.{name}");
        match name.as_str() {
            "memory" => match super::parse_memory_bytes(&q.0) {
                Ok(b) => {
                    let q = super::bytes_quantity(b);
                    let v = if q.ends_with('i') {
                        super::to_kube::quote(&q)
                    } else {
                        q
                    };
                    out.resources.push(("memory_max".into(), v));
                }
                Err(m) => ctx.error(&p, m),
            },
            "cpu" => match super::parse_cpu_milli(&q.0) {
                Ok(m) => out
                    .resources
                    .push(("cpu_max".into(), (m as f64 / 1000.0).to_string())),
                Err(m) => ctx.error(&p, m),
            },
            _ => ctx.warn(&p, "vigil limits memory and CPU only; ignored"),
        }
    }
    for (name, q) in r.requests.iter().flatten() {
        let p = format!("{rpath}.requests.{name}");
        match name.as_str() {
            "cpu" => match super::parse_cpu_milli(&q.0) {
                Ok(m) => out.resources.push((
                    "cpu_weight".into(),
                    super::milli_cpu_to_weight(m).to_string(),
                )),
                Err(m) => ctx.error(&p, m),
            },
            "memory" => ctx.warn(
                &p,
                "a memory request only guides the scheduler; nothing to do on a host",
            ),
            _ => ctx.warn(&p, "ignored"),
        }
    }
    if r.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        ctx.warn(
            &format!("{rpath}.claims"),
            "resource claims are not supported; ignored",
        );
    }
}

/// A lifecycle handler as a vigil hook (`exec`, `http_get` as a probe's, or `sleep`); `None`
/// when it has no action vigil runs (`tcpSocket`, deprecated in Kubernetes, is a warning).
fn hook(
    h: &LifecycleHandler,
    path: &str,
    ports: &[ContainerPort],
    ctx: &mut Ctx<'_>,
) -> Option<String> {
    if h.tcp_socket.is_some() {
        ctx.warn(
            &format!("{path}.tcpSocket"),
            "a tcpSocket hook is deprecated in Kubernetes and not supported by vigil; ignored",
        );
    }
    if let Some(s) = &h.sleep {
        let secs = seconds(s.seconds, &format!("{path}.sleep.seconds"), ctx);
        return Some(format!("{{ sleep = {{ seconds = {secs} }} }}"));
    }
    let as_probe = Probe {
        exec: h.exec.clone(),
        http_get: h.http_get.clone(),
        ..Probe::default()
    };
    let keys = probe(&as_probe, path, ports, ctx)?;
    if keys.is_empty() && h.tcp_socket.is_none() {
        ctx.warn(path, "a hook without an action; ignored");
    }
    (!keys.is_empty()).then(|| inline(&keys))
}

/// A duration in seconds as the config writes it. Kubernetes allows up to an int64; beyond
/// vigil's bound ([`crate::config::MAX_SECONDS`], 10 years: "never" on a host) it is clamped,
/// with a warning, rather than refused. Negative values go through, for the config's own
/// located refusal.
fn seconds(v: i64, path: &str, ctx: &mut Ctx<'_>) -> String {
    let max = crate::config::MAX_SECONDS;
    if u64::try_from(v).is_ok_and(|v| v > max) {
        ctx.warn(
            path,
            format!("{v} seconds is more than vigil waits; clamped to {max} (10 years)"),
        );
        return max.to_string();
    }
    v.to_string()
}

/// A probe port: a number, or the name of one of the container's ports.
fn port(p: &IntOrString, ports: &[ContainerPort], path: &str, ctx: &mut Ctx<'_>) -> Option<String> {
    match p {
        IntOrString::Int(n) => Some(n.to_string()),
        IntOrString::String(name) => {
            match ports
                .iter()
                .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            {
                Some(cp) => Some(cp.container_port.to_string()),
                None => match name.parse::<u16>() {
                    Ok(n) => Some(n.to_string()),
                    Err(_) => {
                        ctx.error(
                            &format!("{path}.port"),
                            format!("no container port named {name:?}"),
                        );
                        None
                    }
                },
            }
        }
    }
}

fn probe(
    p: &Probe,
    path: &str,
    ports: &[ContainerPort],
    ctx: &mut Ctx<'_>,
) -> Option<Vec<(String, String)>> {
    let q = super::to_kube::quote;
    let mut keys = Vec::new();
    if let Some(e) = &p.exec {
        keys.push((
            "exec".to_string(),
            format!(
                "{{ command = {} }}",
                str_array(e.command.as_deref().unwrap_or(&[]))
            ),
        ));
    }
    if let Some(h) = &p.http_get {
        let mut t = Vec::new();
        if let Some(host) = &h.host {
            t.push(("host".to_string(), q(host)));
        }
        t.push((
            "port".to_string(),
            port(&h.port, ports, &format!("{path}.httpGet"), ctx)?,
        ));
        t.push(("path".to_string(), q(h.path.as_deref().unwrap_or("/"))));
        if let Some(s) = &h.scheme {
            t.push(("scheme".to_string(), q(s)));
        }
        let headers: Vec<(String, String)> = h
            .http_headers
            .iter()
            .flatten()
            .map(|hd| (hd.name.clone(), q(&hd.value)))
            .collect();
        if !headers.is_empty() {
            t.push(("headers".to_string(), inline(&headers)));
        }
        keys.push(("http_get".to_string(), inline(&t)));
    }
    if let Some(t) = &p.tcp_socket {
        let mut pairs = Vec::new();
        if let Some(host) = &t.host {
            pairs.push(("host".to_string(), q(host)));
        }
        pairs.push((
            "port".to_string(),
            port(&t.port, ports, &format!("{path}.tcpSocket"), ctx)?,
        ));
        keys.push(("tcp_socket".to_string(), inline(&pairs)));
    }
    if let Some(g) = &p.grpc {
        let mut pairs = vec![("port".to_string(), g.port.to_string())];
        if let Some(s) = &g.service {
            pairs.push(("service".to_string(), q(s)));
        }
        keys.push(("grpc".to_string(), inline(&pairs)));
    }
    for (k, field, v) in [
        (
            "initial_delay_seconds",
            "initialDelaySeconds",
            p.initial_delay_seconds.map(i64::from),
        ),
        (
            "period_seconds",
            "periodSeconds",
            p.period_seconds.map(i64::from),
        ),
        (
            "timeout_seconds",
            "timeoutSeconds",
            p.timeout_seconds.map(i64::from),
        ),
        (
            "termination_grace_period_seconds",
            "terminationGracePeriodSeconds",
            p.termination_grace_period_seconds,
        ),
    ] {
        if let Some(v) = v {
            keys.push((k.to_string(), seconds(v, &format!("{path}.{field}"), ctx)));
        }
    }
    for (k, v) in [
        ("success_threshold", p.success_threshold),
        ("failure_threshold", p.failure_threshold),
    ] {
        if let Some(v) = v {
            keys.push((k.to_string(), v.to_string()));
        }
    }
    Some(keys)
}
