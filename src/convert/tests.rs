//! Conversion on strings: the kubelet's CPU arithmetic, vigil → Kubernetes → vigil for every
//! shipped config, and bad manifests rejected with the path of the problem.
#![cfg(feature = "kubernetes")]

use std::path::Path;
use std::time::Duration;

use super::to_kube::{self, Kind, Options};
use super::*;
use crate::config::spec::{Config, UpdateStrategy};

fn opts(kind: Kind) -> Options {
    Options {
        kind: Some(kind),
        ..auto()
    }
}

/// Each pod the kind that fits it.
fn auto() -> Options {
    Options {
        image: Some("registry.example/app:1".into()),
        ..Options::default()
    }
}

/// vigil → manifests (YAML text) → vigil, with the warnings of both directions.
fn round_trip(config: &Config, kind: Kind) -> (Config, Vec<Warning>) {
    round_trip_with(config, &opts(kind))
}

fn round_trip_with(config: &Config, opts: &Options) -> (Config, Vec<Warning>) {
    let mut warnings = Vec::new();
    let manifests = to_kube::convert(config, opts, &mut warnings).expect("to kubernetes");
    let yaml = to_kube::to_yaml(&manifests).expect("yaml");
    let back = from_kube::convert(&yaml, Path::new("rt.yaml"))
        .unwrap_or_else(|e| panic!("from kubernetes: {e:?}\n{yaml}"));
    warnings.extend(back.warnings);
    let config = crate::config::load_str(&back.toml, Path::new("rt.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", back.toml));
    (config, warnings)
}

/// Pods with the image every container got from `--image` taken off again.
fn pods_without_images(c: &Config) -> Vec<crate::config::spec::PodSpec> {
    let mut pods = c.pods.clone();
    for p in &mut pods {
        for c in p.init_containers.iter_mut().chain(p.containers.iter_mut()) {
            std::sync::Arc::make_mut(c).image = None;
        }
    }
    pods
}

fn shipped_configs() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut files = vec![root.join("default.toml")];
    for e in std::fs::read_dir(root.join("examples")).expect("config/examples") {
        files.push(e.expect("entry").path());
    }
    files.sort();
    files
}

#[test]
fn cpu_weight_round_trips_through_the_kubelets_conversion_for_every_weight() {
    for w in 1..=10_000 {
        let milli = cpu_weight_to_milli(w);
        assert_eq!(milli_cpu_to_weight(milli), w, "weight {w} → {milli}m");
        assert!(
            milli == 1 || milli_cpu_to_weight(milli - 1) < w,
            "{milli}m is not the smallest"
        );
    }
}

#[test]
fn cpu_requests_map_to_the_weights_the_kubelet_writes() {
    // MilliCPUToShares then CpuSharesToCpuWeight, worked by hand.
    assert_eq!(milli_cpu_to_shares(1000), 1024);
    assert_eq!(milli_cpu_to_weight(1000), 39);
    assert_eq!(milli_cpu_to_weight(100), 4);
    assert_eq!(milli_cpu_to_weight(0), 1);
    assert_eq!(milli_cpu_to_weight(256_000), 10_000);
    assert_eq!(milli_cpu_to_weight(10_000_000), 10_000);
}

#[test]
fn quantities_convert_both_ways() {
    assert_eq!(bytes_quantity(256 << 20), "256Mi");
    assert_eq!(bytes_quantity(1 << 30), "1Gi");
    assert_eq!(bytes_quantity(1000), "1000");
    assert_eq!(parse_cpu_milli("500m"), Ok(500));
    assert_eq!(parse_cpu_milli("1.5"), Ok(1500));
    assert_eq!(parse_cpu_milli("2"), Ok(2000));
    assert!(parse_cpu_milli("lots").is_err());
    assert_eq!(parse_memory_bytes("20Mi"), Ok(20 << 20));
    assert_eq!(parse_memory_bytes("1e3"), Ok(1000));
    assert_eq!(parse_memory_bytes("128974848"), Ok(128_974_848));
    assert!(parse_memory_bytes("12Qi").is_err());
}

#[test]
fn every_shipped_config_round_trips_through_pods_and_deployments() {
    // A Pod or a Deployment cannot hold a schedule (a warning says so): compared without it.
    let unscheduled = |c: &Config| {
        let mut pods = pods_without_images(c);
        for p in &mut pods {
            p.schedule = None;
            p.history = Default::default();
        }
        pods
    };
    for file in shipped_configs() {
        let config = crate::config::load(&file).expect("shipped config is valid");
        for kind in [Kind::Pod, Kind::Deployment] {
            let (back, _) = round_trip(&config, kind);
            assert_eq!(
                unscheduled(&back),
                unscheduled(&config),
                "{} ({kind:?}) did not round-trip",
                file.display()
            );
        }
        // Each pod as the kind that fits it (a CronJob for a schedule): whole.
        let (back, _) = round_trip_with(&config, &auto());
        assert_eq!(
            pods_without_images(&back),
            pods_without_images(&config),
            "{} (automatic kinds) did not round-trip",
            file.display()
        );
    }
}

#[test]
fn a_config_with_every_key_round_trips() {
    let text = include_str!("../../tests/data/kubernetes/every-key.toml");
    let config = crate::config::load_str(text, Path::new("all.toml")).expect("valid");
    let (back, warnings) = round_trip(&config, Kind::Pod);
    assert_eq!(pods_without_images(&back), pods_without_images(&config));
    let hooks = back
        .pods
        .iter()
        .flat_map(|p| &p.containers)
        .map(|c| &c.lifecycle);
    assert_eq!(
        hooks
            .map(|l| l.post_start.iter().count() + l.pre_stop.iter().count())
            .sum::<usize>(),
        3,
        "the fixture's hooks did not come back"
    );
    let paths: Vec<&str> = warnings.iter().map(|w| w.path.as_str()).collect();
    for expected in [
        "pods.web.containers[0].restart_policy",
        "pods.web.containers[0].termination_grace_period_seconds",
        "pods.web.containers[0].group",
        "pods.web.containers[0].env_file",
        "pods.web.containers[0].stop_signal",
        "pods.web.containers[0].rlimits",
        "pods.web.containers[0].resources.memory_high",
        "pods.web.init_containers[0].restart_policy",
    ] {
        assert!(
            paths.contains(&expected),
            "no warning at {expected}: {paths:#?}"
        );
    }
}

#[test]
fn fractional_seconds_round_up_with_a_warning() {
    let text = "[pods.a]\ntermination_grace_period_seconds = 2.5\n[[pods.a.containers]]\n\
                name = \"x\"\ncommand = [\"/bin/x\"]\n\
                liveness_probe = { exec = { command = [\"/bin/true\"] }, period_seconds = 0.25, timeout_seconds = 0.1 }\n";
    let config = crate::config::load_str(text, Path::new("f.toml")).expect("valid");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("converts");
    let v = m[0].to_value().expect("json");
    assert_eq!(v["spec"]["terminationGracePeriodSeconds"], 3);
    assert_eq!(
        v["spec"]["containers"][0]["livenessProbe"]["periodSeconds"],
        1
    );
    assert_eq!(
        v["spec"]["containers"][0]["livenessProbe"]["timeoutSeconds"],
        1
    );
    let paths: Vec<&str> = warnings.iter().map(|w| w.path.as_str()).collect();
    assert!(
        paths.contains(&"pods.a.termination_grace_period_seconds"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"pods.a.containers[0].liveness_probe.period_seconds"),
        "{paths:?}"
    );
    assert!(warnings.iter().any(|w| w.message.contains("rounded up")));
}

#[test]
fn a_container_without_image_is_an_error_naming_it_unless_image_is_given() {
    let text = "[pods.a]\n[[pods.a.containers]]\nname = \"x\"\ncommand = [\"/bin/x\"]\n";
    let config = crate::config::load_str(text, Path::new("i.toml")).expect("valid");
    let errors =
        to_kube::convert(&config, &Options::default(), &mut Vec::new()).expect_err("no image");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "pods.a.containers[0].image");
    assert!(errors[0].message.contains("--image"), "{}", errors[0]);
    assert!(to_kube::convert(&config, &opts(Kind::Pod), &mut Vec::new()).is_ok());
}

#[test]
fn a_deployment_asked_of_a_pod_that_does_not_always_restart_is_emitted_as_a_job() {
    let text = "[pods.job]\nrestart_policy = \"Never\"\n[[pods.job.containers]]\nname = \"x\"\ncommand = [\"/bin/x\"]\n";
    let config = crate::config::load_str(text, Path::new("d.toml")).expect("valid");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, &opts(Kind::Deployment), &mut warnings).expect("ok");
    assert!(matches!(m[0], to_kube::Manifest::Job(_)));
    assert_eq!(warnings[0].path, "pods.job.restart_policy");
    assert!(
        warnings[0].message.contains("emitted as a Job"),
        "{warnings:?}"
    );
}

fn from(text: &str) -> Result<from_kube::Converted, Vec<ConvertError>> {
    from_kube::convert(text, Path::new("pod.yaml"))
}

#[track_caller]
fn rejected_at(text: &str, path: &str, message: &str) {
    let errors = from(text).expect_err("accepted a bad manifest");
    assert!(
        errors
            .iter()
            .any(|e| e.path == path && e.message.contains(message)),
        "no error at {path:?} containing {message:?}: {errors:#?}"
    );
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    command: [\"/bin/true\"]\n";

#[test]
fn bad_manifests_are_rejected_with_the_path_of_the_problem() {
    rejected_at(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
        "kind",
        "unsupported kind \"Secret\"",
    );
    rejected_at(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n",
        "",
        "no pod in the input",
    );
    rejected_at("apiVersion: v1\nmetadata:\n  name: s\n", "kind", "missing");
    rejected_at(
        &POD.replace("apiVersion: v1", "apiVersion: v2"),
        "apiVersion",
        "\"v1\"",
    );
    rejected_at(
        &format!("{POD}    imagePullPolcy: Always\n"),
        "spec.containers[0].imagePullPolcy",
        "unknown field",
    );
    rejected_at(
        &format!("{POD}    livenessProbe:\n      exec:\n        comand: [x]\n"),
        "spec.containers[0].livenessProbe.exec.comand",
        "unknown field",
    );
    rejected_at(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: []\n",
        "spec.containers",
        "at least one container",
    );
    rejected_at(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  restartPolicy: Always\n",
        "spec.containers",
        "at least one container",
    );
    rejected_at(
        &format!("{POD}    livenessProbe:\n      periodSeconds: often\n"),
        "spec.containers[0].livenessProbe.periodSeconds",
        "",
    );
    rejected_at(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: nginx\n",
        "spec.containers[0].command",
        "no command",
    );
    rejected_at(
        &format!("{POD}    livenessProbe:\n      httpGet:\n        port: http\n"),
        "spec.containers[0].livenessProbe.httpGet.port",
        "no container port named \"http\"",
    );
    let errors = from("- just\n- a list\n").expect_err("not an object");
    assert!(
        errors[0].message.contains("Kubernetes object"),
        "{errors:?}"
    );
    let errors = from("a: [unclosed\n").expect_err("bad YAML");
    assert!(errors[0].message.contains("YAML"), "{errors:?}");
}

#[test]
fn errors_in_a_multi_document_file_name_the_document() {
    let text = format!("{POD}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n");
    let errors = from(&text).expect_err("ConfigMap");
    assert_eq!(errors[0].document, Some(2));
    assert_eq!(
        errors[0].to_string(),
        "document 2: kind: unsupported kind \"ConfigMap\": expected Pod, Deployment, StatefulSet, \
         Job, CronJob (or a Service, skipped)"
    );
}

#[test]
fn host_incompatible_fields_are_warnings_with_their_manifest_paths() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  serviceAccountName: robot\n  nodeSelector:\n    disk: ssd\n  volumes:\n  - name: data\n    emptyDir: {}\n  containers:\n  - name: c\n    image: busybox\n    command: [\"/bin/sleep\", \"60\"]\n    ports:\n    - containerPort: 80\n      name: http\n    volumeMounts:\n    - name: data\n      mountPath: /data\n    env:\n    - name: NODE\n      valueFrom:\n        fieldRef:\n          fieldPath: spec.nodeName\n    - name: A\n      value: b\n    livenessProbe:\n      httpGet:\n        port: http\n        path: /\n";
    let out = from(text).expect("converts");
    let paths: Vec<&str> = out.warnings.iter().map(|w| w.path.as_str()).collect();
    for p in [
        "spec.serviceAccountName",
        "spec.nodeSelector",
        "spec.volumes",
        "spec.containers[0].image",
        "spec.containers[0].volumeMounts",
        "spec.containers[0].env[0].valueFrom",
    ] {
        assert!(paths.contains(&p), "no warning at {p}: {paths:#?}");
    }
    // The named port resolved, the plain variable kept.
    assert!(
        out.toml.contains("http_get = { port = 80, path = \"/\" }"),
        "{}",
        out.toml
    );
    assert!(out.toml.contains("env = { A = \"b\" }"), "{}", out.toml);
    // A named port is kept as `ports`, not a warning.
    assert!(
        out.toml
            .contains("ports = [{ name = \"http\", port = 80 }]"),
        "{}",
        out.toml
    );
    assert!(!paths.iter().any(|p| p.contains("ports")), "{paths:#?}");
}

#[test]
fn a_deployment_template_and_several_documents_become_one_config() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n      annotations:\n        vigil/depends-on: p=ready\n    spec:\n      containers:\n      - name: app\n        command: [\"/bin/sleep\", \"60\"]\n        args: [\"--flag\"]\n        resources:\n          limits:\n            cpu: 500m\n            memory: 64Mi\n          requests:\n            cpu: \"1\"\n";
    let out = from(&format!("{POD}---\n{deployment}")).expect("converts");
    assert_eq!(out.pod_names, vec!["p".to_string(), "web".to_string()]);
    let config = crate::config::load_str(&out.toml, Path::new("m.toml")).expect("valid");
    let web = &config.pods[1];
    assert_eq!(web.depends_on.len(), 1);
    let app = &web.containers[0];
    assert_eq!(app.command, ["/bin/sleep", "60", "--flag"]);
    assert_eq!(app.resources.cpu_max, Some(0.5));
    assert_eq!(app.resources.memory_max, Some(64 << 20));
    assert_eq!(app.resources.cpu_weight, Some(39));
    // replicas: 3 is the pod's `replicas`: web-0, web-1, web-2.
    assert_eq!(config.replica_set("web").map(|s| s.replicas), Some(3));
    assert_eq!(web.name, "web-0");
    assert!(!out.warnings.iter().any(|w| w.path.contains("replicas")));
}

#[test]
fn env_file_becomes_a_referenced_secret_never_its_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = dir.path().join("app.env");
    std::fs::write(&env, "TOKEN=hunter2\n").expect("write");
    let text = format!(
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/app\"]\n\
         env_file = \"{}\"\n",
        env.display()
    );
    let config = crate::config::load_str(&text, Path::new("e.toml")).expect("valid");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("converts");
    let yaml = to_kube::to_yaml(&m).expect("yaml");
    assert!(!yaml.contains("hunter2"), "{yaml}");
    let v = m[0].to_value().expect("json");
    assert_eq!(
        v["spec"]["containers"][0]["envFrom"][0]["secretRef"]["name"],
        "web-app-env"
    );
    let w = warnings
        .iter()
        .find(|w| w.path == "pods.web.containers[0].env_file")
        .expect("a warning about env_file");
    assert!(
        w.message
            .contains("kubectl create secret generic web-app-env"),
        "{w}"
    );
}

#[test]
fn a_sidecar_is_a_restartable_init_container_both_ways() {
    let text = "[pods.web]\nrestart_policy = \"Never\"\n[[pods.web.init_containers]]\nname = \"proxy\"\n\
                command = [\"/bin/proxy\"]\nrestart_policy = \"Always\"\n\
                readiness_probe = { tcp_socket = { port = 15000 } }\n\
                [[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/app\"]\n";
    let config = crate::config::load_str(text, Path::new("s.toml")).expect("valid");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("converts");
    let v = m[0].to_value().expect("json");
    assert_eq!(v["spec"]["initContainers"][0]["restartPolicy"], "Always");
    assert!(v["spec"]["initContainers"][0]["readinessProbe"].is_object());
    assert!(
        !warnings.iter().any(|w| w.path.contains("restart_policy")),
        "{warnings:?}"
    );
    let (back, _) = round_trip(&config, Kind::Pod);
    assert_eq!(pods_without_images(&back), pods_without_images(&config));
}

#[test]
fn lifecycle_hooks_map_both_ways_with_named_ports_and_whole_seconds() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    command: [\"/bin/sleep\", \"60\"]\n    ports:\n    - containerPort: 8080\n      name: http\n    lifecycle:\n      postStart:\n        httpGet:\n          port: http\n          path: /warm\n      preStop:\n        sleep:\n          seconds: 3\n  - name: d\n    command: [\"/bin/sleep\", \"60\"]\n    lifecycle:\n      preStop:\n        tcpSocket:\n          port: 9\n";
    let out = from(text).expect("converts");
    assert!(
        out.toml.contains(
            "lifecycle = { post_start = { http_get = { port = 8080, path = \"/warm\" } }, \
             pre_stop = { sleep = { seconds = 3 } } }"
        ),
        "{}",
        out.toml
    );
    let paths: Vec<&str> = out.warnings.iter().map(|w| w.path.as_str()).collect();
    assert!(
        paths.contains(&"spec.containers[1].lifecycle.preStop.tcpSocket"),
        "{paths:#?}"
    );
    assert!(
        !out.warnings
            .iter()
            .any(|w| w.message.contains("not supported by vigil yet")),
        "{paths:#?}"
    );
    // The other way: a fractional sleep is rounded up, like a probe's seconds.
    let config = "[pods.a]\n[[pods.a.containers]]\nname = \"x\"\ncommand = [\"/bin/x\"]\n\
                  lifecycle = { pre_stop = { sleep = { seconds = 1.5 } }, post_start = { exec = { command = [\"/bin/true\"] } } }\n";
    let config = crate::config::load_str(config, Path::new("h.toml")).expect("valid");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("converts");
    let v = m[0].to_value().expect("json");
    let lc = &v["spec"]["containers"][0]["lifecycle"];
    assert_eq!(lc["preStop"]["sleep"]["seconds"], 2);
    assert_eq!(lc["postStart"]["exec"]["command"][0], "/bin/true");
    assert!(
        warnings.iter().any(
            |w| w.path == "pods.a.containers[0].lifecycle.pre_stop.sleep.seconds"
                && w.message.contains("rounded up")
        ),
        "{warnings:#?}"
    );
}

#[test]
fn the_pods_grace_budget_is_exported_and_a_longer_container_grace_round_trips() {
    let config = crate::config::load_str(
        r#"
[pods.web]
termination_grace_period_seconds = 5
[[pods.web.containers]]
name = "app"
command = ["/bin/true"]
termination_grace_period_seconds = 20
"#,
        Path::new("grace.toml"),
    )
    .expect("config");
    let mut warnings = Vec::new();
    let manifests = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("convert");
    let yaml = to_kube::to_yaml(&manifests).expect("yaml");
    assert!(
        yaml.contains("terminationGracePeriodSeconds: 5"),
        "the pod's own budget, which vigil gives a whole-pod stop: {yaml}"
    );
    let (back, _) = round_trip(&config, Kind::Pod);
    assert_eq!(back.pods[0].termination_grace, Duration::from_secs(5));
    assert_eq!(
        back.pods[0].containers[0].termination_grace,
        Duration::from_secs(20)
    );
}

#[test]
fn hooks_of_a_plain_init_container_are_left_out_with_a_warning() {
    let config = crate::config::load_str(
        r#"
[pods.web]
[[pods.web.init_containers]]
name = "migrate"
command = ["/bin/true"]
lifecycle = { post_start = { sleep = { seconds = 1 } } }
[[pods.web.containers]]
name = "app"
command = ["/bin/true"]
"#,
        Path::new("hooks.toml"),
    )
    .expect("config");
    let mut warnings = Vec::new();
    let manifests = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("convert");
    let yaml = to_kube::to_yaml(&manifests).expect("yaml");
    assert!(!yaml.contains("postStart"), "{yaml}");
    assert!(
        warnings
            .iter()
            .any(|w| w.path.ends_with("init_containers[0].lifecycle")
                && w.message.contains("only when it is a sidecar")),
        "{warnings:?}"
    );
}

/// `terminationGracePeriodSeconds: 9223372036854775807` is valid Kubernetes; vigil clamps
/// every duration beyond 10 years to 10 years (its config bound) with a warning at the
/// manifest path, so such a manifest runs and its stop never overflows a deadline.
#[test]
fn durations_beyond_ten_years_are_clamped_with_a_warning() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  \
         terminationGracePeriodSeconds: 9223372036854775807\n  containers:\n  - name: c\n    \
         command: [\"/bin/true\"]\n    livenessProbe:\n      exec:\n        command: [x]\n      \
         periodSeconds: 2147483647\n      terminationGracePeriodSeconds: 9223372036854775807\n    \
         lifecycle:\n      preStop:\n        sleep:\n          seconds: 9223372036854775807\n";
    let out = from(text).expect("converts");
    for path in [
        "spec.terminationGracePeriodSeconds",
        "spec.containers[0].livenessProbe.periodSeconds",
        "spec.containers[0].livenessProbe.terminationGracePeriodSeconds",
        "spec.containers[0].lifecycle.preStop.sleep.seconds",
    ] {
        assert!(
            out.warnings
                .iter()
                .any(|w| w.path == path && w.message.contains("clamped to 315360000")),
            "no warning at {path}: {:#?}",
            out.warnings
        );
    }
    let config = crate::config::load_str(&out.toml, Path::new("m.toml")).expect("valid");
    let ten_years = Duration::from_secs(crate::config::MAX_SECONDS);
    assert_eq!(config.pods[0].termination_grace, ten_years);
    let c = &config.pods[0].containers[0];
    assert_eq!(c.liveness_probe.as_ref().map(|p| p.period), Some(ten_years));
}

/// kubectl's strict decoding refuses a key written twice (`duplicate field "runAsUser"`); a
/// last-wins reading would run `runAsUser: 1000` then `runAsUser: 0` as root.
#[test]
fn a_duplicate_key_at_any_level_is_refused_at_its_line() {
    for (text, key, line) in [
        (
            format!("{POD}    securityContext:\n      runAsUser: 1000\n      runAsUser: 0\n"),
            "runAsUser",
            11,
        ),
        (format!("{POD}    command: [\"/bin/sh\"]\n"), "command", 9),
        (
            POD.replace("  name: p\n", "  name: p\n  name: q\n"),
            "name",
            5,
        ),
    ] {
        let errors = from(&text).expect_err("a duplicate key");
        let e = errors[0].to_string();
        assert!(
            e.contains(&format!("duplicate field \"{key}\""))
                && e.contains(&format!("line {line} ")),
            "{e}"
        );
    }
}

/// A manifest nested deeper than 64 levels is refused from a linear scan, before the YAML
/// parser (whose cost grows with the square of the depth) reads it.
#[test]
fn nesting_deeper_than_sixty_four_levels_is_refused_with_its_line_and_column() {
    let text = format!("{POD}    args: {}\n", "[".repeat(100));
    let errors = from(&text).expect_err("too deep");
    assert_eq!(
        errors[0].to_string(),
        "nested deeper than 64 levels at line 9 column 75; not read"
    );
}

/// The kubelet's verifyRunAsNonRoot (pkg/kubelet/kuberuntime/security_context_others.go):
/// `runAsNonRoot: true` with `runAsUser: 0`, or with no user at all (vigil would run the
/// container as itself, root when it runs as root), is refused; with a uid it converts.
#[test]
fn run_as_non_root_without_a_non_root_user_is_refused_as_the_kubelet_does() {
    rejected_at(
        &format!("{POD}    securityContext:\n      runAsNonRoot: true\n      runAsUser: 0\n"),
        "spec.containers[0].securityContext.runAsUser",
        "runAsUser 0 breaks runAsNonRoot",
    );
    rejected_at(
        &format!("{POD}    securityContext:\n      runAsNonRoot: true\n"),
        "spec.containers[0].securityContext.runAsNonRoot",
        "without runAsUser",
    );
    rejected_at(
        &POD.replace(
            "spec:\n",
            "spec:\n  securityContext:\n    runAsNonRoot: true\n    runAsUser: 0\n",
        ),
        "spec.securityContext.runAsUser",
        "runAsUser 0 breaks runAsNonRoot",
    );
    rejected_at(
        &format!(
            "{}    securityContext:\n      runAsNonRoot: true\n      runAsUser: 1000\n",
            POD.replace(
                "  name: p\n",
                "  name: p\n  annotations:\n    vigil/c.user: root\n"
            )
        ),
        "metadata.annotations.vigil/c.user",
        "breaks runAsNonRoot",
    );
    let out = from(&format!(
        "{POD}    securityContext:\n      runAsNonRoot: true\n      runAsUser: 1000\n"
    ))
    .expect("a non-root uid converts");
    assert!(out.toml.contains("user = 1000"), "{}", out.toml);
    assert!(
        !out.warnings.iter().any(|w| w.path.contains("runAsNonRoot")),
        "{:?}",
        out.warnings
    );
}

/// `hostNetwork`, `hostPID`, `hostIPC` are said, true or false: vigil never isolates.
#[test]
fn host_namespaces_are_a_warning_whatever_their_value() {
    let text = POD.replace(
        "spec:\n",
        "spec:\n  hostNetwork: true\n  hostPID: false\n  hostIPC: true\n",
    );
    let out = from(&text).expect("converts");
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(
            out.warnings
                .iter()
                .any(|w| w.path == format!("spec.{field}")
                    && w.message.contains("shares the host's network, PID, IPC")),
            "{field}: {:?}",
            out.warnings
        );
    }
}

/// A pod's own `backoff` reaches every container: the converter says it once, at the pod, and
/// still keeps it on each container for the way back.
#[test]
fn a_pod_level_backoff_is_one_warning_at_the_pod() {
    let config = crate::config::load_str(
        r#"
[pods.web]
backoff = { initial_seconds = 2 }
[[pods.web.containers]]
name = "app"
command = ["/bin/true"]
[[pods.web.containers]]
name = "side"
command = ["/bin/true"]
"#,
        Path::new("b.toml"),
    )
    .expect("config");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("convert");
    let backoff: Vec<&Warning> = warnings
        .iter()
        .filter(|w| w.path.ends_with("backoff"))
        .collect();
    assert_eq!(backoff.len(), 1, "{warnings:?}");
    assert_eq!(backoff[0].path, "pods.web.backoff");
    let v = m[0].to_value().expect("json");
    for c in ["app", "side"] {
        assert!(
            v["metadata"]["annotations"][format!("vigil/{c}.backoff")].is_string(),
            "{v}"
        );
    }
    let (back, _) = round_trip(&config, Kind::Pod);
    assert_eq!(
        back.pods[0].containers[1].backoff,
        config.pods[0].containers[1].backoff
    );
}

const ONE_CONTAINER: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n";

#[test]
fn a_dropped_namespace_is_a_warning() {
    let text = format!(
        "{ONE_CONTAINER}  namespace: shop\nspec:\n  containers:\n  - name: app\n    command: [/bin/true]\n"
    );
    let out = from(&text).expect("converts");
    let w = out
        .warnings
        .iter()
        .find(|w| w.path == "metadata.namespace")
        .expect("a warning about the namespace");
    assert!(w.message.contains("\"shop\" is left out"), "{w:?}");
}

#[test]
fn args_without_command_are_told_to_move_to_command_with_the_entrypoint_s_program() {
    rejected_at(
        &format!(
            "{ONE_CONTAINER}spec:\n  containers:\n  - name: redis\n    args: [--appendonly, \"no\"]\n"
        ),
        "spec.containers[0].command",
        "move args to command, with the program the image's entrypoint would run",
    );
}

/// `kubectl get -o yaml` writes the kubelet's default `/dev/termination-log`: on the host that
/// is the host's /dev, so it is left out, and the warning says what happens instead.
#[test]
fn the_kubernetes_default_termination_log_is_left_out_with_a_warning() {
    let text = format!(
        "{ONE_CONTAINER}spec:\n  containers:\n  - name: app\n    command: [/bin/true]\n    \
         terminationMessagePath: /dev/termination-log\n    terminationMessagePolicy: File\n"
    );
    let out = from(&text).expect("converts");
    assert!(!out.toml.contains("/dev/termination-log"), "{}", out.toml);
    let w = out
        .warnings
        .iter()
        .find(|w| w.path == "spec.containers[0].terminationMessagePath")
        .expect("a warning");
    assert!(
        w.message.contains("the host's /dev") && w.message.contains("no termination message"),
        "{w:?}"
    );
    let own = text.replace("/dev/termination-log", "/run/app/termination");
    let out = from(&own).expect("converts");
    assert!(
        out.toml
            .contains("termination_message_path = \"/run/app/termination\""),
        "{}",
        out.toml
    );
}

/// `run_as_non_root` is Kubernetes' `runAsNonRoot` both ways.
#[test]
fn run_as_non_root_maps_to_run_as_non_root_and_back() {
    let config = crate::config::load_str(
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/true\"]\n\
         user = \"1000\"\nrun_as_non_root = true\n",
        Path::new("n.toml"),
    )
    .expect("config");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("convert");
    let v = m[0].to_value().expect("json");
    assert_eq!(
        v["spec"]["containers"][0]["securityContext"]["runAsNonRoot"],
        true
    );
    let (back, _) = round_trip(&config, Kind::Pod);
    assert!(back.pods[0].containers[0].run_as_non_root);
}

#[test]
fn a_dependent_that_follows_its_dependency_round_trips_and_is_warned_about() {
    let text = r#"
[pods.db]
containers = [{ name = "db", command = ["/bin/db"] }]

[pods.web]
depends_on = { db = { condition = "ready", restart = true, stop = true } }
containers = [{ name = "web", command = ["/bin/web"] }]
"#;
    let config = crate::config::load_str(text, Path::new("follow.toml")).expect("valid");
    let (back, warnings) = round_trip(&config, Kind::Pod);
    assert_eq!(back.pods[1].depends_on, config.pods[1].depends_on);
    assert!(back.pods[1].depends_on[0].restart && back.pods[1].depends_on[0].stop);
    let lost = warnings
        .iter()
        .find(|w| w.path == "pods.web.depends_on.db")
        .unwrap_or_else(|| panic!("no warning about following: {warnings:#?}"));
    assert!(
        lost.message.contains("restart`/`stop` are lost"),
        "{}",
        lost.message
    );
}

const KINDS: &str = include_str!("../../tests/data/kubernetes/kinds.toml");

fn convert_text(text: &str, opts: &Options) -> (Vec<to_kube::Manifest>, Vec<Warning>) {
    let config = crate::config::load_str(text, Path::new("k.toml")).expect("valid");
    let mut warnings = Vec::new();
    let m = to_kube::convert(&config, opts, &mut warnings).expect("converts");
    (m, warnings)
}

/// (kind, name) of every object, in order.
fn kinds_of(m: &[to_kube::Manifest]) -> Vec<(&'static str, String)> {
    m.iter().map(|m| (m.kind(), m.name().to_string())).collect()
}

fn value_of(m: &[to_kube::Manifest], kind: &str, name: &str) -> serde_json::Value {
    m.iter()
        .find(|m| m.kind() == kind && m.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
        .to_value()
        .expect("value")
}

#[test]
fn each_pod_becomes_the_kind_that_fits_it_and_every_kind_round_trips() {
    let (m, _) = convert_text(KINDS, &auto());
    assert_eq!(
        kinds_of(&m),
        [
            ("Deployment", "api"),
            ("Service", "api"),
            ("Deployment", "cache"),
            ("Service", "cache"),
            ("StatefulSet", "db"),
            ("Service", "db"),
            ("Job", "migrate"),
            ("CronJob", "nightly"),
            ("Deployment", "web"),
            ("Service", "web"),
        ]
        .map(|(k, n)| (k, n.to_string()))
    );
    let job = value_of(&m, "Job", "migrate");
    assert_eq!(job["spec"]["backoffLimit"], 3);
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 600);
    assert!(job["spec"]["template"]["spec"]["activeDeadlineSeconds"].is_null());
    let cron = value_of(&m, "CronJob", "nightly");
    assert_eq!(cron["spec"]["schedule"], "0 2 * * *");
    assert_eq!(cron["spec"]["timeZone"], "Europe/Berlin");
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Replace");
    assert_eq!(cron["spec"]["startingDeadlineSeconds"], 300);
    assert_eq!(cron["spec"]["suspend"], true);
    // `history = { successful = 5 }`: its failed count, 0, is not the CronJob's default.
    assert_eq!(cron["spec"]["successfulJobsHistoryLimit"], 5);
    assert_eq!(cron["spec"]["failedJobsHistoryLimit"], 0);
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
        "Never"
    );
    assert_eq!(cron["spec"]["jobTemplate"]["spec"]["backoffLimit"], 0);
    let sts = value_of(&m, "StatefulSet", "db");
    assert_eq!(sts["spec"]["serviceName"], "db");
    assert_eq!(value_of(&m, "Deployment", "web")["spec"]["replicas"], 1);
    let api = value_of(&m, "Deployment", "api");
    assert_eq!(api["spec"]["replicas"], 3);
    assert_eq!(
        api["spec"]["template"]["metadata"]["annotations"][to_kube::MIN_READY_ANNOTATION],
        "2"
    );
    assert_eq!(api["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        api["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        2
    );
    assert_eq!(api["spec"]["strategy"]["rollingUpdate"]["maxSurge"], 0);
    assert_eq!(api["spec"]["progressDeadlineSeconds"], 120);
    // A pod without replicas keeps the Deployment's defaults.
    let web = value_of(&m, "Deployment", "web");
    assert!(web["spec"]["strategy"].is_null(), "{web}");
    assert!(web["spec"]["progressDeadlineSeconds"].is_null(), "{web}");
    // One object for the set, none per replica, and no replica's own variables.
    assert!(!kinds_of(&m).iter().any(|(_, n)| n.starts_with("api-")));
    assert!(
        api["spec"]["template"]["spec"]["containers"][0]["env"].is_null(),
        "{api}"
    );
    // And back: the same config.
    let config = crate::config::load_str(KINDS, Path::new("k.toml")).expect("valid");
    let (back, _) = round_trip_with(&config, &auto());
    assert_eq!(pods_without_images(&back), pods_without_images(&config));
}

/// `update = "recreate"` (the default) is a `Recreate` Deployment and comes back as it;
/// `"rolling"` is a `RollingUpdate` and comes back with its `max_unavailable` and
/// `progress_deadline_seconds` (docs/kubernetes.md).
#[test]
fn a_sets_update_strategy_and_progress_deadline_round_trip_through_a_deployment() {
    for keys in [
        "",
        "update = \"recreate\"\nprogress_deadline_seconds = 30\n",
        "update = \"rolling\"\n",
        "update = \"rolling\"\nmax_unavailable = 3\nprogress_deadline_seconds = 1200\n",
    ] {
        let text = format!(
            "[pods.w]\nreplicas = 4\n{keys}[[pods.w.containers]]\nname = \"a\"\n\
             command = [\"/bin/a\"]\n"
        );
        let config = crate::config::load_str(&text, Path::new("r.toml")).expect("valid");
        let (m, _) = convert_text(&text, &auto());
        let d = value_of(&m, "Deployment", "w");
        let rolling = keys.contains("rolling");
        assert_eq!(
            d["spec"]["strategy"]["type"],
            if rolling { "RollingUpdate" } else { "Recreate" },
            "{keys}"
        );
        let (back, warnings) = round_trip_with(&config, &auto());
        assert_eq!(
            pods_without_images(&back),
            pods_without_images(&config),
            "{keys}"
        );
        assert!(
            warnings.iter().all(|w| w.path.ends_with(".image")),
            "{keys}: {warnings:?}"
        );
    }
}

/// A Deployment written for a cluster: no `strategy` is the Deployment's default, a
/// RollingUpdate of 25% (rounded down, at least one); a percentage is of the replicas; a
/// `maxSurge` is a warning (vigil starts no replica beyond the count).
#[test]
fn a_foreign_deployments_strategy_becomes_the_sets_update() {
    let deployment = |strategy: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  \
             replicas: 8\n  progressDeadlineSeconds: 90\n{strategy}  selector:\n    matchLabels:\n      \
             app: web\n  template:\n    spec:\n      containers:\n      - name: app\n        \
             image: x\n        command: [\"/bin/sleep\", \"60\"]\n"
        )
    };
    let keys = |strategy: &str| {
        let out = from(&deployment(strategy)).expect("converts");
        let config = crate::config::load_str(&out.toml, Path::new("m.toml")).expect("valid");
        let r = config.pods[0].replica.clone().expect("a set");
        let warned: Vec<String> = out.warnings.iter().map(|w| w.path.clone()).collect();
        (
            r.update,
            r.max_unavailable,
            r.progress_deadline.as_secs(),
            warned,
        )
    };
    let (update, n, deadline, _) = keys("");
    assert_eq!((update, n, deadline), (UpdateStrategy::Rolling, 2, 90));
    let (update, n, _, _) = keys("  strategy:\n    type: Recreate\n");
    assert_eq!((update, n), (UpdateStrategy::Recreate, 1));
    let (update, n, _, warned) = keys(
        "  strategy:\n    type: RollingUpdate\n    rollingUpdate:\n      maxUnavailable: 50%\n      \
         maxSurge: 1\n",
    );
    assert_eq!((update, n), (UpdateStrategy::Rolling, 4));
    assert!(
        warned
            .iter()
            .any(|p| p.ends_with("spec.strategy.rollingUpdate.maxSurge")),
        "{warned:?}"
    );
}

#[test]
fn every_shipped_config_round_trips_with_the_kinds_chosen_for_it() {
    for file in shipped_configs() {
        let config = crate::config::load(&file).expect("shipped config is valid");
        let (back, _) = round_trip_with(&config, &auto());
        assert_eq!(
            pods_without_images(&back),
            pods_without_images(&config),
            "{} did not round-trip",
            file.display()
        );
    }
}

#[test]
fn kind_is_overridden_per_pod_and_a_kind_that_cannot_hold_the_pod_is_a_warning() {
    let mut o = auto();
    o.kinds.insert("web".into(), Kind::StatefulSet);
    o.kinds.insert("migrate".into(), Kind::Deployment);
    o.kinds.insert("nightly".into(), Kind::Pod);
    let (m, warnings) = convert_text(KINDS, &o);
    let kinds = kinds_of(&m);
    assert!(kinds.contains(&("StatefulSet", "web".into())), "{kinds:?}");
    assert!(kinds.contains(&("Job", "migrate".into())), "{kinds:?}");
    assert!(kinds.contains(&("Pod", "nightly".into())), "{kinds:?}");
    let w = warnings
        .iter()
        .find(|w| w.path == "pods.migrate.restart_policy")
        .expect("a warning for the Deployment of a Job's pod");
    assert!(w.message.contains("emitted as a Job"), "{w:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "pods.nightly.schedule" && w.message.contains("dropped")),
        "{warnings:?}"
    );
    // A pod the config does not have is an error.
    let mut o = auto();
    o.kinds.insert("nope".into(), Kind::Pod);
    let config = crate::config::load_str(KINDS, Path::new("k.toml")).expect("valid");
    let errors = to_kube::convert(&config, &o, &mut Vec::new()).expect_err("unknown pod");
    assert!(errors[0].message.contains("\"nope\""), "{errors:?}");
}

#[test]
fn a_job_without_a_restart_limit_gets_the_largest_backoff_limit_and_reads_back_as_none() {
    let text = "[pods.j]\nrestart_policy = \"OnFailure\"\n[[pods.j.containers]]\nname = \"x\"\ncommand = [\"/bin/x\"]\n";
    let (m, _) = convert_text(text, &auto());
    assert_eq!(value_of(&m, "Job", "j")["spec"]["backoffLimit"], i32::MAX);
    let config = crate::config::load_str(text, Path::new("j.toml")).expect("valid");
    let (back, _) = round_trip_with(&config, &auto());
    assert_eq!(back.pods[0].containers[0].max_restarts, None);
}

#[test]
fn a_foreign_job_and_cron_job_take_the_kubernetes_defaults_with_warnings() {
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  parallelism: 2\n  template:\n    spec:\n      restartPolicy: OnFailure\n      containers:\n      - name: c\n        command: [\"/bin/true\"]\n";
    let out = from(job).expect("converts");
    let config = crate::config::load_str(&out.toml, Path::new("j.toml")).expect("valid");
    // The Job controller's default backoffLimit.
    assert_eq!(config.pods[0].containers[0].max_restarts, Some(6));
    assert!(
        out.warnings.iter().any(|w| w.path == "spec.parallelism"),
        "{:?}",
        out.warnings
    );
    let never = job
        .replace("OnFailure", "Never")
        .replace("  parallelism: 2\n", "  backoffLimit: 3\n");
    let out = from(&never).expect("converts");
    assert!(
        out.warnings
            .iter()
            .any(|w| w.path == "spec.backoffLimit" && w.message.contains("up to 3 new pods")),
        "{:?}",
        out.warnings
    );
    let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: n\nspec:\n  schedule: \"@daily\"\n  successfulJobsHistoryLimit: 5\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: c\n            command: [\"/bin/true\"]\n";
    let out = from(cron).expect("converts");
    let config = crate::config::load_str(&out.toml, Path::new("n.toml")).expect("valid");
    let s = config.pods[0].schedule.as_ref().expect("a schedule");
    assert_eq!(s.cron.as_str(), "@daily");
    assert_eq!(s.concurrency, crate::config::spec::Concurrency::Forbid);
    assert_eq!(
        config.pods[0].history,
        crate::config::spec::HistorySpec {
            successful: 5,
            failed: 1
        },
        "successfulJobsHistoryLimit is history, the failed count the CronJob's default"
    );
    let paths: Vec<&str> = out.warnings.iter().map(|w| w.path.as_str()).collect();
    for p in [
        "spec.concurrencyPolicy",
        "spec.jobTemplate.spec.backoffLimit",
    ] {
        assert!(paths.contains(&p), "no warning at {p}: {paths:?}");
    }
    assert!(
        !paths.contains(&"spec.successfulJobsHistoryLimit"),
        "{paths:?}"
    );
    let huge = cron.replace(
        "successfulJobsHistoryLimit: 5",
        "failedJobsHistoryLimit: 500",
    );
    let out = from(&huge).expect("converts");
    let config = crate::config::load_str(&out.toml, Path::new("n.toml")).expect("valid");
    assert_eq!(
        config.pods[0].history,
        crate::config::spec::HistorySpec {
            successful: 3,
            failed: 100
        }
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.path == "spec.failedJobsHistoryLimit" && w.message.contains("100 instead")),
        "{:?}",
        out.warnings
    );
}

#[test]
fn named_ports_and_probe_ports_make_a_cluster_ip_service_with_named_ports() {
    let (m, _) = convert_text(KINDS, &auto());
    let svc = value_of(&m, "Service", "web");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(
        svc["spec"]["selector"],
        serde_json::json!({ NAME_LABEL: "web" })
    );
    let ports: Vec<(String, i64)> = svc["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["port"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [("http".to_string(), 8080), ("tcp-9901".to_string(), 9901)]
    );
    let app = &value_of(&m, "Deployment", "web")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(app["ports"][0]["name"], "http");
    assert_eq!(app["ports"][0]["containerPort"], 8080);
    // A Job gets no Service.
    assert!(!kinds_of(&m).contains(&("Service", "migrate".into())));
}

#[test]
fn loopback_addresses_of_other_pods_are_reported_with_the_service_name_and_never_rewritten() {
    let (m, warnings) = convert_text(KINDS, &auto());
    let find = |path: &str| {
        warnings
            .iter()
            .find(|w| w.path == path)
            .unwrap_or_else(|| panic!("no warning at {path}: {warnings:#?}"))
            .message
            .clone()
    };
    let m1 = find("pods.web.containers[0].command[4]");
    assert!(
        m1.contains("127.0.0.1:5432") && m1.contains("use db:5432"),
        "{m1}"
    );
    assert!(m1.contains("not rewritten"), "{m1}");
    let m2 = find("pods.web.containers[0].env.CACHE_URL");
    assert!(
        m2.contains("localhost:6379") && m2.contains("use cache:6379"),
        "{m2}"
    );
    find("pods.migrate.containers[0].command[2]");
    // A pod's own port is not reported.
    assert!(
        !warnings
            .iter()
            .any(|w| w.path.starts_with("pods.web") && w.message.contains(":8080")),
        "{warnings:#?}"
    );
    let app = &value_of(&m, "Deployment", "web")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(app["command"][4], "127.0.0.1:5432");
    assert_eq!(app["env"][0]["value"], "redis://localhost:6379/0");
}

#[test]
fn depends_on_waits_in_an_init_container_for_the_dependencys_service_with_a_bound() {
    let (m, warnings) = convert_text(KINDS, &auto());
    let init = &value_of(&m, "Deployment", "cache")["spec"]["template"]["spec"]["initContainers"];
    assert_eq!(init.as_array().map(Vec::len), Some(1), "{init}");
    assert_eq!(init[0]["name"], "vigil-wait-db");
    assert_eq!(init[0]["image"], to_kube::DEFAULT_WAIT_IMAGE);
    let script = init[0]["command"][2].as_str().expect("script");
    assert!(script.contains("nc -z -w 2 db 5432"), "{script}");
    assert!(
        script.contains("waiting up to 300 s for pod db (ready)"),
        "{script}"
    );
    assert!(script.contains("exit 1"), "{script}");
    // The Job waits too, before its own init containers.
    let job = value_of(&m, "Job", "migrate");
    assert_eq!(
        job["spec"]["template"]["spec"]["initContainers"][0]["name"],
        "vigil-wait-db"
    );
    // "completed" cannot be waited for from inside a pod: said, with what to do.
    let w = warnings
        .iter()
        .find(|w| w.path == "pods.nightly.depends_on.migrate")
        .expect("a warning for the completed dependency");
    assert!(
        w.message
            .contains("kubectl wait --for=condition=complete job/migrate"),
        "{w:?}"
    );
    // A dependency with no Service: the dependent starts without waiting, said.
    let text = "[pods.a]\n[[pods.a.containers]]\nname = \"x\"\ncommand = [\"/bin/x\"]\n[pods.b]\ndepends_on = { a = \"ready\" }\n[[pods.b.containers]]\nname = \"y\"\ncommand = [\"/bin/y\"]\n";
    let (_, warnings) = convert_text(text, &auto());
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "pods.b.depends_on.a" && w.message.contains("no Service")),
        "{warnings:?}"
    );
}

#[test]
fn notify_is_a_warning_that_says_it_is_lost() {
    let config = crate::config::load_str(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
image = "app:1"
command = ["/bin/app"]
notify = true
"#,
        Path::new("notify.toml"),
    )
    .expect("config");
    let mut warnings = Vec::new();
    let manifests = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("convert");
    let yaml = to_kube::to_yaml(&manifests).expect("yaml");
    assert!(!yaml.contains("NOTIFY"), "{yaml}");
    assert!(
        warnings
            .iter()
            .any(|w| w.path.ends_with("containers[0].notify") && w.message.contains("lost")),
        "{warnings:?}"
    );
}

#[test]
fn ready_log_line_is_a_warning_that_says_it_is_lost_and_suggests_a_probe() {
    let config = crate::config::load_str(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
image = "app:1"
command = ["/bin/app"]
ready_log_line = "listening on"
"#,
        Path::new("ready.toml"),
    )
    .expect("config");
    let mut warnings = Vec::new();
    let manifests = to_kube::convert(&config, &opts(Kind::Pod), &mut warnings).expect("convert");
    let yaml = to_kube::to_yaml(&manifests).expect("yaml");
    assert!(!yaml.contains("listening on"), "{yaml}");
    assert!(
        warnings
            .iter()
            .any(|w| w.path.ends_with("containers[0].ready_log_line")
                && w.message.contains("lost")
                && w.message.contains("readinessProbe")),
        "{warnings:?}"
    );
}

#[test]
fn the_checklist_names_host_directories_user_names_and_cpu_reservations_with_what_to_do() {
    let text = "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/app\"]\n\
                working_dir = \"/srv/app\"\nuser = \"www-data\"\n\
                resources = { cpu_weight = 100 }\nrlimits = { nofile = 4096 }\n";
    let (m, warnings) = convert_text(text, &auto());
    let at = |path: &str| -> &Warning {
        warnings
            .iter()
            .find(|w| w.path == path)
            .unwrap_or_else(|| panic!("no warning at {path}: {warnings:?}"))
    };
    let w = at("pods.web.containers[0].working_dir");
    assert!(
        w.message.contains("/srv/app is a directory of this host"),
        "{w}"
    );
    assert!(w.message.contains("check that the image has it"), "{w}");
    let w = at("pods.web.containers[0].user");
    assert!(w.message.contains("need not exist in the image"), "{w}");
    assert!(w.message.contains("`id -u`"), "{w}");
    // Weight 100 (the cgroup default) is a request of about 2.5 cores, which the scheduler
    // reserves.
    let milli = cpu_weight_to_milli(100);
    assert!(milli > 2000, "{milli}");
    let w = at("pods.web.containers[0].resources.cpu_weight");
    assert!(
        w.message.contains(&format!(
            "requests.cpu {milli}m is what gives cpu.weight 100"
        )),
        "{w}"
    );
    assert!(w.message.contains("the scheduler also reserves"), "{w}");
    let v = value_of(&m, "Deployment", "web");
    let c = &v["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["resources"]["requests"]["cpu"], format!("{milli}m"));
    assert_eq!(c["workingDir"], "/srv/app");
    let w = at("pods.web.containers[0].rlimits");
    assert!(w.message.contains("`ulimit`"), "{w}");
}

#[test]
fn a_scheduled_pod_s_schedule_is_warned_about_only_where_it_is_dropped() {
    let text = "[pods.nightly]\nrestart_policy = \"Never\"\n\
                schedule = { cron = \"0 2 * * *\", time_zone = \"UTC\" }\n\
                [[pods.nightly.containers]]\nname = \"import\"\ncommand = [\"/bin/import\"]\n";
    let schedule_warnings = |o: &Options| -> Vec<String> {
        let (_, warnings) = convert_text(text, o);
        warnings
            .into_iter()
            .filter(|w| w.path == "pods.nightly.schedule")
            .map(|w| w.message)
            .collect()
    };
    // As a CronJob the schedule is carried: nothing on the checklist.
    assert_eq!(schedule_warnings(&auto()), Vec::<String>::new());
    // As a Pod or a Job it is lost: one line, saying so.
    for kind in [Kind::Pod, Kind::Job] {
        let w = schedule_warnings(&opts(kind));
        assert_eq!(w.len(), 1, "{kind:?}: {w:?}");
        assert!(w[0].contains("runs once"), "{kind:?}: {w:?}");
    }
}
