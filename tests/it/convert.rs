//! `vigil convert` and `vigil run -f` as a user meets them: every shipped config out to
//! Kubernetes and checked against the Kubernetes OpenAPI schema by a third-party validator
//! (`kubernetes-validate` from PyPI, installed by tests/run-all.sh), and real manifests from
//! the seeds (tests/data/kubernetes/) converted back and run.
#![cfg(feature = "kubernetes")]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{BIN, Vigil, require_root, state_reason, supervisor_header, write_config};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/kubernetes")
        .join(name)
}

fn shipped_configs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut files = vec![root.join("default.toml")];
    for e in std::fs::read_dir(root.join("examples")).unwrap() {
        files.push(e.unwrap().path());
    }
    files.sort();
    // …and a config with every key the converter maps.
    files.push(data("every-key.toml"));
    // …and one pod of every kind (Deployment, StatefulSet, Job, CronJob, Services, waits).
    files.push(data("kinds.toml"));
    files
}

fn vigil(args: &[&OsStr]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env_remove("VIGIL_CONFIG")
        .output()
        .expect("run vigil")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A free loopback port (bound and released; the tests that use it start at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
#[ignore = "needs kubernetes-validate (pip; tests/run-all.sh installs it)"]
fn every_emitted_manifest_passes_the_kubernetes_openapi_schema() {
    let have = Command::new("kubernetes-validate")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have,
        "kubernetes-validate is not installed: `python3 -m pip install kubernetes-validate` \
         (tests/run-all.sh does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    for file in shipped_configs() {
        for (kind, output) in [
            ("", "yaml"),
            ("Pod", "yaml"),
            ("Deployment", "yaml"),
            ("StatefulSet", "yaml"),
            ("", "json"),
        ] {
            let mut args: Vec<&OsStr> = vec![
                "convert".as_ref(),
                "--to".as_ref(),
                "kubernetes".as_ref(),
                "-c".as_ref(),
                file.as_os_str(),
                "--image".as_ref(),
                "registry.example/app:1".as_ref(),
                "-o".as_ref(),
                output.as_ref(),
            ];
            if !kind.is_empty() {
                args.extend([OsStr::new("--kind"), OsStr::new(kind)]);
            }
            let out = vigil(&args);
            assert!(
                out.status.success(),
                "{}: {}",
                file.display(),
                text(&out.stderr)
            );
            n += 1;
            let manifest = dir.path().join(format!("m{n}.{output}"));
            std::fs::write(&manifest, &out.stdout).unwrap();
            // --strict: additional properties (a misspelt field) are errors too.
            let v = Command::new("kubernetes-validate")
                .args(["--strict", "--kubernetes-version", "1.37.0"])
                .arg(&manifest)
                .output()
                .unwrap();
            assert!(
                v.status.success(),
                "{} as {kind} ({output}) fails the schema:\n{}{}\n{}",
                file.display(),
                text(&v.stdout),
                text(&v.stderr),
                text(&out.stdout)
            );
        }
    }
}

#[test]
fn seed_manifests_without_a_command_are_rejected_at_the_container() {
    for (file, path) in [
        ("liveness-pod.yaml", "spec.containers[0].command"),
        (
            "multi-container-deployment.yaml",
            "spec.template.spec.containers[0].command",
        ),
    ] {
        let f = data(file);
        let out = vigil(&[
            "convert".as_ref(),
            "--from".as_ref(),
            "kubernetes".as_ref(),
            f.as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(err.contains(&format!("{path}: container")), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_converted_seed_is_a_config_vigil_check_accepts() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["liveness-pod-host.yaml", "multi-container-host.yaml"] {
        let f = data(file);
        let out = vigil(&[
            "convert".as_ref(),
            "--from".as_ref(),
            "kubernetes".as_ref(),
            f.as_os_str(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let warnings = text(&out.stderr);
        assert!(
            warnings.contains("spec.containers[0].image")
                || warnings.contains("spec.template.spec.containers[0].image"),
            "{warnings}"
        );
        // No cgroup controllers needed to check it: cgroup_root = "none".
        let config = dir.path().join(format!("{file}.toml"));
        std::fs::write(
            &config,
            format!(
                "[supervisor]\ncgroup_root = \"none\"\n{}",
                text(&out.stdout)
            ),
        )
        .unwrap();
        let check = vigil(&["check".as_ref(), "-c".as_ref(), config.as_os_str()]);
        assert!(
            check.status.success(),
            "{}\n{}",
            text(&check.stderr),
            text(&out.stdout)
        );
    }
}

/// `vigil run -c header.toml -f manifest` with the manifest's port and directory replaced.
fn run_manifest(file: &str, port: u16, docroot: &Path) -> Vigil {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    std::fs::write(&config, supervisor_header(&socket)).unwrap();
    let manifest = dir.path().join(file);
    let yaml = std::fs::read_to_string(data(file))
        .unwrap()
        .replace("port: 80\n", &format!("port: {port}\n"))
        .replace("\"80\"", &format!("\"{port}\""))
        .replace("/usr/share/nginx/html", &docroot.display().to_string());
    std::fs::write(&manifest, yaml).unwrap();
    Vigil::start_with_args(dir, socket, config, &["-f".as_ref(), manifest.as_os_str()])
}

/// The seed's experiment: nginx serves /index.html, a liveness probe fetches it every 5 s;
/// deleting the file makes the probe fail once (failureThreshold 1) and the container is
/// restarted (reason LivenessProbeFailed) although restartPolicy is OnFailure.
#[test]
fn the_liveness_seed_runs_under_vigil_and_a_failed_probe_restarts_it() {
    let docroot = tempfile::tempdir().unwrap();
    let index = docroot.path().join("index.html");
    std::fs::write(&index, "hello\n").unwrap();
    let v = run_manifest("liveness-pod-host.yaml", free_port(), docroot.path());
    v.wait_for(Duration::from_secs(20), "the server to run", |v| {
        state_reason(&v.container("test", "test")) == "Running"
    });
    // Let the first probes pass (initialDelaySeconds 5, periodSeconds 5).
    v.wait_for(Duration::from_secs(20), "a passed liveness probe", |v| {
        v.container("test", "test")["probes"][0]["result"] == "success"
    });
    assert_eq!(v.container("test", "test")["restart_count"], 0);
    std::fs::remove_file(&index).unwrap();
    v.wait_for(
        Duration::from_secs(30),
        "a restart after the failed probe",
        |v| v.container("test", "test")["restart_count"].as_u64() >= Some(1),
    );
    let c = v.container("test", "test");
    assert!(
        c.to_string().contains("LivenessProbeFailed"),
        "last state is not a liveness kill: {c}"
    );
}

/// The two-container seed: both run; the second never listens on 8080, so the pod is 1/2 ready.
#[test]
fn the_multi_container_seed_runs_both_containers() {
    let docroot = tempfile::tempdir().unwrap();
    let v = run_manifest("multi-container-host.yaml", free_port(), docroot.path());
    v.wait_for(Duration::from_secs(20), "both containers to run", |v| {
        state_reason(&v.container("nginx-deployment", "nginx")) == "Running"
            && state_reason(&v.container("nginx-deployment", "memory-demo-ctr")) == "Running"
    });
    let pod = v.pod("nginx-deployment");
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(2), "{pod}");
    assert_eq!(v.shutdown(), 0);
}

/// A root vigil trusts a manifest no more than a config file: one others can write is refused,
/// naming it, before anything starts.
#[test]
#[ignore = "needs root (the check is a root vigil's)"]
fn root_vigil_refuses_a_manifest_writable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    require_root("the check applies to a root vigil only");
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    std::fs::write(&config, supervisor_header(&socket)).unwrap();
    let manifest = dir.path().join("pod.yaml");
    std::fs::copy(data("liveness-pod-host.yaml"), &manifest).unwrap();
    std::fs::set_permissions(&manifest, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = vigil(&[
        "run".as_ref(),
        "-c".as_ref(),
        config.as_os_str(),
        "-f".as_ref(),
        manifest.as_os_str(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "not refused:\n{err}");
    assert!(err.contains(&manifest.display().to_string()), "{err}");
    assert!(err.contains("writable by others"), "{err}");
    assert!(!socket.exists(), "the socket was created before refusing");
}

const SLEEPER: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  containers:\n  - name: main\n    command: [\"/bin/sh\", \"-c\", \"while true; do sleep 1; done\"]\n";

/// `run -f -` reads the manifest from standard input, once (also as root: there is no path to
/// trust); a reload cannot read it again and says so, changing nothing.
#[test]
fn run_f_from_standard_input_runs_and_a_reload_says_it_cannot_read_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = write_config(dir.path(), &socket, "", "");
    let manifest = dir.path().join("pods.yaml");
    std::fs::write(&manifest, SLEEPER.replace("NAME", "one")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "-c"])
        .arg(&config)
        .args(["-f", "-"])
        .env("VIGIL_LOG", "debug")
        .stdin(std::fs::File::open(&manifest).unwrap());
    let v = Vigil::launch(cmd, dir, socket, config);
    v.wait_for(Duration::from_secs(20), "pod one to run", |v| {
        state_reason(&v.container("one", "main")) == "Running"
    });
    let reply = v.request(r#"{"cmd":"reload"}"#);
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(reply["error"]["kind"], "invalid_config", "{reply}");
    let msg = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("standard input (`vigil run -f -`), which cannot be read again")
            && msg.contains("nothing changed"),
        "{msg}"
    );
    assert_eq!(state_reason(&v.container("one", "main")), "Running");
    assert_eq!(v.container("one", "main")["restart_count"], 0);
    assert_eq!(v.shutdown(), 0);
}

/// `run -f` is the static-pod use: the manifest is converted again on reload, so a pod added
/// to the file starts, and a pod also defined by `-c` is refused, naming it.
#[test]
fn run_f_rereads_the_manifest_on_reload_and_refuses_a_pod_defined_twice() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    std::fs::write(&config, supervisor_header(&socket)).unwrap();
    let manifest = dir.path().join("pods.yaml");
    std::fs::write(&manifest, SLEEPER.replace("NAME", "one")).unwrap();
    let v = Vigil::start_with_args(
        dir,
        socket,
        config.clone(),
        &["-f".as_ref(), manifest.as_os_str()],
    );
    v.wait_for(Duration::from_secs(20), "pod one to run", |v| {
        state_reason(&v.container("one", "main")) == "Running"
    });
    std::fs::write(
        &manifest,
        format!(
            "{}---\n{}",
            SLEEPER.replace("NAME", "one"),
            SLEEPER.replace("NAME", "two")
        ),
    )
    .unwrap();
    let reply = v.request(r#"{"cmd":"reload"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    v.wait_for(Duration::from_secs(20), "pod two to run", |v| {
        state_reason(&v.container("two", "main")) == "Running"
    });

    // The same pod in the -c file and in the manifest: an error naming both, nothing changes.
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[pods.two]\n[[pods.two.containers]]\nname = \"x\"\ncommand = [\"/bin/true\"]\n");
    std::fs::write(&config, text).unwrap();
    let reply = v.request(r#"{"cmd":"reload"}"#);
    assert_eq!(reply["ok"], false, "{reply}");
    let msg = reply["error"]["message"].to_string();
    assert!(
        msg.contains("\\\"two\\\" is defined both here and in"),
        "{msg}"
    );
    assert_eq!(state_reason(&v.container("two", "main")), "Running");
    assert_eq!(v.shutdown(), 0);
}

/// `--appendonly no` and `FLAG = "no"` came out unquoted, which YAML 1.1 readers (go-yaml v2
/// under kubectl, PyYAML) take for a boolean: every string that any YAML version could read as
/// something else is quoted, so the manifest passes the schema and PyYAML reads each string
/// back as itself.
#[test]
#[ignore = "needs kubernetes-validate and PyYAML (pip / python3-yaml; tests/run-all.sh installs them)"]
fn strings_yaml_would_read_as_booleans_dates_or_numbers_stay_strings_for_kubernetes() {
    let tricky = [
        "no",
        "yes",
        "on",
        "off",
        "y",
        "n",
        "NO",
        "~",
        "null",
        "2026-01-01",
        "1_000",
        "0x1F",
        "0o17",
        ".inf",
        "1e3",
        " lead",
        "trail ",
        "a: b",
        "a #b",
        "#x",
        "12:30",
        "-",
        "",
        "line\nbreak",
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut toml = String::from(
        "[pods.redis]\n[[pods.redis.containers]]\nname = \"redis\"\nimage = \"redis:7\"\n\
         command = [\"redis-server\", \"--appendonly\", \"no\"]\n[pods.redis.containers.env]\n",
    );
    for (i, v) in tricky.iter().enumerate() {
        toml.push_str(&format!("V{i} = {}\n", serde_json::to_string(v).unwrap()));
    }
    let config = dir.path().join("tricky.toml");
    std::fs::write(&config, toml).unwrap();
    let out = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        config.as_os_str(),
        "--kind".as_ref(),
        "Pod".as_ref(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifest = dir.path().join("tricky.yaml");
    std::fs::write(&manifest, &out.stdout).unwrap();
    let v = Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", "1.37.0"])
        .arg(&manifest)
        .output()
        .expect("kubernetes-validate (pip install kubernetes-validate)");
    assert!(
        v.status.success(),
        "{}{}\n{}",
        text(&v.stdout),
        text(&v.stderr),
        text(&out.stdout)
    );
    let read = Command::new("python3")
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(&manifest)
        .output()
        .expect("python3 with PyYAML (apt-get install python3-yaml)");
    assert!(read.status.success(), "{}", text(&read.stderr));
    let back: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    let c = &back["spec"]["containers"][0];
    assert_eq!(
        c["command"],
        serde_json::json!(["redis-server", "--appendonly", "no"]),
        "{}",
        text(&out.stdout)
    );
    for (i, want) in tricky.iter().enumerate() {
        let got = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == format!("V{i}"))
            .unwrap_or_else(|| panic!("V{i} missing"));
        // Kubernetes leaves out an empty value; PyYAML then has no key.
        let value = got["value"].as_str().unwrap_or("");
        assert_eq!(value, *want, "{}", text(&out.stdout));
    }
}

/// A manifest's shell `$$`, `${VAR}` and `$(VAR)` survive `convert --from` into a file that
/// vigil reads with config variables: `vigil config` shows the command as the manifest wrote it.
#[test]
fn dollars_in_a_converted_manifest_reach_the_container_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("pod.yaml");
    let command = r#"echo pid $$ home ${HOME} arg $(ARG) cost $5"#;
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  \
             - name: app\n    image: x\n    command: [\"sh\", \"-c\", {:?}]\n",
            command
        ),
    )
    .unwrap();
    let out = vigil(&[
        "convert".as_ref(),
        "--from".as_ref(),
        "kubernetes".as_ref(),
        manifest.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let config = dir.path().join("vigil.toml");
    std::fs::write(
        &config,
        format!(
            "[supervisor]\ncgroup_root = \"none\"\n{}",
            text(&out.stdout)
        ),
    )
    .unwrap();
    let shown = vigil(&[
        "config".as_ref(),
        "-c".as_ref(),
        config.as_os_str(),
        "-o".as_ref(),
        "json".as_ref(),
    ]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let json: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let argv = json["pods"]["web"]["containers"][0]["command"].clone();
    assert_eq!(argv, serde_json::json!(["sh", "-c", command]), "{json}");
}

/// `kubectl` is on the machine (tests/run-all.sh installs Debian's `kubernetes-client`).
fn require_kubectl() {
    let have = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have,
        "kubectl is not installed: `apt-get install kubernetes-client` (tests/run-all.sh does)"
    );
}

/// (kind, metadata.name) of every object of a YAML stream.
fn objects_of(yaml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(yaml) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("a YAML document");
        if v.is_null() {
            continue;
        }
        out.push((
            v["kind"].as_str().expect("kind").to_string(),
            v["metadata"]["name"].as_str().expect("name").to_string(),
        ));
    }
    out.sort();
    out
}

#[test]
#[ignore = "needs kubectl and kubernetes-validate (apt kubernetes-client, pip; tests/run-all.sh installs them)"]
fn output_dir_is_a_kustomize_directory_kubectl_builds_with_every_object() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("k8s");
    let kinds = data("kinds.toml");
    let out = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        kinds.as_os_str(),
        "--output-dir".as_ref(),
        out_dir.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {}",
        text(&out.stdout)
    );
    // The same objects as the stream --to prints.
    let printed = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        kinds.as_os_str(),
    ]);
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let want = objects_of(&text(&printed.stdout));
    // One file per object, each holding that one object, and the kustomization.
    let mut files: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), want.len() + 1, "{files:?}");
    assert!(
        files.contains(&"kustomization.yaml".to_string()),
        "{files:?}"
    );
    for f in files.iter().filter(|f| *f != "kustomization.yaml") {
        let objs = objects_of(&std::fs::read_to_string(out_dir.join(f)).unwrap());
        assert_eq!(objs.len(), 1, "{f}: {objs:?}");
    }
    assert!(
        files.contains(&"web-deployment.yaml".to_string()),
        "{files:?}"
    );
    assert!(files.contains(&"web-service.yaml".to_string()), "{files:?}");
    // The real Kustomize builds it, and the build holds every object.
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "kubectl kustomize: {}",
        text(&built.stderr)
    );
    let built_text = text(&built.stdout);
    assert_eq!(objects_of(&built_text), want, "{built_text}");
    // …and what it built passes the Kubernetes schema, strictly.
    let stream = dir.path().join("built.yaml");
    std::fs::write(&stream, &built.stdout).unwrap();
    let v = Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", "1.37.0"])
        .arg(&stream)
        .output()
        .expect("kubernetes-validate (pip install kubernetes-validate)");
    assert!(
        v.status.success(),
        "the kustomize build fails the schema:\n{}{}\n{built_text}",
        text(&v.stdout),
        text(&v.stderr)
    );
}

#[test]
fn strict_turns_warnings_into_an_error_that_counts_them_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("k8s");
    let kinds = data("kinds.toml");
    let base = [
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        kinds.as_os_str(),
    ];
    // Without --strict the same config converts, with warnings.
    let loose = vigil(&base);
    assert!(loose.status.success(), "{}", text(&loose.stderr));
    let n = text(&loose.stderr)
        .lines()
        .filter(|l| l.contains(": warning: "))
        .count();
    assert!(n > 0, "kinds.toml gives warnings: {}", text(&loose.stderr));
    let mut args: Vec<&OsStr> = base.to_vec();
    args.push("--strict".as_ref());
    let strict = vigil(&args);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict.stderr));
    assert!(strict.stdout.is_empty(), "{}", text(&strict.stdout));
    let err = text(&strict.stderr);
    assert!(
        err.contains(&format!(
            "error: {n} warnings and --strict: nothing printed"
        )),
        "{err}"
    );
    args.extend(["--output-dir".as_ref(), out_dir.as_os_str()]);
    let strict_dir = vigil(&args);
    assert_eq!(strict_dir.status.code(), Some(1));
    assert!(
        text(&strict_dir.stderr).contains("--strict: nothing written"),
        "{}",
        text(&strict_dir.stderr)
    );
    assert!(!out_dir.exists(), "--strict wrote {}", out_dir.display());
    // A config without warnings passes --strict.
    let clean = dir.path().join("clean.toml");
    std::fs::write(
        &clean,
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/usr/bin/app\"]\n\
         image = \"registry.example/app:1\"\n",
    )
    .unwrap();
    let ok = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        clean.as_os_str(),
        "--strict".as_ref(),
    ]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("kind: Deployment"));
}

#[test]
fn an_output_dir_that_cannot_be_made_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let in_the_way = dir.path().join("k8s");
    std::fs::write(&in_the_way, "a file, not a directory").unwrap();
    let kinds = data("kinds.toml");
    let out = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        kinds.as_os_str(),
        "--output-dir".as_ref(),
        in_the_way.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}: cannot create the directory",
            in_the_way.display()
        )),
        "{err}"
    );
    // -o json and --output-dir: a usage error, naming both.
    let both = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        kinds.as_os_str(),
        "-o".as_ref(),
        "json".as_ref(),
        "--output-dir".as_ref(),
        dir.path().as_os_str(),
    ]);
    assert_eq!(both.status.code(), Some(1), "{}", text(&both.stderr));
    assert!(
        text(&both.stderr).contains("--output-dir"),
        "{}",
        text(&both.stderr)
    );
}

/// The objects of a YAML stream, as JSON values.
fn documents(yaml: &str) -> Vec<serde_json::Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("a YAML document"))
        .filter(|v: &serde_json::Value| !v.is_null())
        .collect()
}

const EMBEDDED: &str = r#"
[pods.db]
backoff = { initial_seconds = 0.5, max_seconds = 4 }
[[pods.db.containers]]
name = "postgres"
command = ["/usr/bin/postgres", "-c", "shared_buffers=$$PGBUF"]
image = "registry.example/app:1"
max_restarts = 5
ports = [{ name = "postgres", port = 5432 }]
env_file = "db.env"

[pods.web]
depends_on = { db = "ready" }
[[pods.web.containers]]
name = "app"
command = ["/usr/bin/app", "--db", "127.0.0.1:5432"]
image = "registry.example/app:1"
success_exit_codes = [3]
readiness_probe = { http_get = { port = 8080, path = "/ready" } }
"#;

#[test]
fn embed_puts_the_config_as_vigil_reads_it_in_a_config_map_and_runs_vigil_as_pid_1() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shop.toml");
    std::fs::write(&config, EMBEDDED).unwrap();
    std::fs::write(dir.path().join("db.env"), "PGPASSWORD=hunter2\n").unwrap();
    let out = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        config.as_os_str(),
        "--embed".as_ref(),
        "--vigil-image".as_ref(),
        "registry.example/vigil:1".as_ref(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    assert!(
        !yaml.contains("hunter2"),
        "an env_file's values are never copied: {yaml}"
    );
    let docs = documents(&yaml);
    let kinds: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("ConfigMap", "shop-config"),
            ("Deployment", "shop"),
            ("Service", "shop")
        ]
    );
    // The ConfigMap's file is the config vigil reads here: `vigil config` of both is the same
    // (back-off, max_restarts, exit codes, depends_on and `$$` kept as they are).
    let embedded = dir.path().join("embedded.toml");
    std::fs::write(&embedded, docs[0]["data"]["vigil.toml"].as_str().unwrap()).unwrap();
    let show = |c: &Path| {
        let o = vigil(&["config".as_ref(), "-c".as_ref(), c.as_os_str()]);
        assert!(o.status.success(), "{}: {}", c.display(), text(&o.stderr));
        text(&o.stdout)
    };
    let here = show(&config);
    assert!(here.contains("$PGBUF"), "{here}");
    assert_eq!(show(&embedded), here);
    // vigil is the container's PID 1 (no arguments: /etc/vigil/vigil.toml), copied from the
    // vigil image by an init container; `vigil health` is its readiness.
    let pod = &docs[1]["spec"]["template"]["spec"];
    let init = &pod["initContainers"][0];
    assert_eq!(init["image"], "registry.example/vigil:1");
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example/app:1");
    assert_eq!(c["command"], serde_json::json!(["/opt/vigil/vigil"]));
    assert_eq!(
        c["readinessProbe"]["exec"]["command"],
        serde_json::json!(["/opt/vigil/vigil", "health", "-c", "/etc/vigil/vigil.toml"])
    );
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert!(
        mounts.iter().any(|m| m["mountPath"] == "/etc/vigil"),
        "{mounts:?}"
    );
    // The env_file is mounted where the config names it, from a Secret the warning says how
    // to create.
    let env_path = dir.path().join("db.env").display().to_string();
    assert!(
        mounts
            .iter()
            .any(|m| m["mountPath"] == env_path.as_str() && m["subPath"] == "env"),
        "{mounts:?}"
    );
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "kubectl create secret generic db-postgres-env --from-file=env={env_path}"
        )),
        "{err}"
    );
    // What Kubernetes cannot express is kept, so none of the plain conversion's warnings
    // about back-off, restart limits or exit codes; the Service has every named or probed
    // port.
    for lost in ["back-off", "restarts without a limit", "exit code 0"] {
        assert!(!err.contains(lost), "{lost}: {err}");
    }
    let ports: Vec<i64> = docs[2]["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["port"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, [5432, 8080]);
}

#[test]
fn embed_needs_a_vigil_image_and_an_image_for_the_programs() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("vigil.toml");
    std::fs::write(
        &config,
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/usr/bin/app\"]\n",
    )
    .unwrap();
    let base = [
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        config.as_os_str(),
        "--embed".as_ref(),
    ];
    let no_vigil_image = vigil(&base);
    assert_eq!(no_vigil_image.status.code(), Some(1));
    assert!(
        text(&no_vigil_image.stderr).contains("--vigil-image"),
        "{}",
        text(&no_vigil_image.stderr)
    );
    let mut args: Vec<&OsStr> = base.to_vec();
    args.extend([
        OsStr::new("--vigil-image"),
        OsStr::new("registry.example/vigil:1"),
    ]);
    let no_image = vigil(&args);
    assert_eq!(no_image.status.code(), Some(1));
    assert!(
        text(&no_image.stderr).contains("no container has an image: pass --image"),
        "{}",
        text(&no_image.stderr)
    );
    assert!(no_image.stdout.is_empty());
    args.extend([OsStr::new("--image"), OsStr::new("registry.example/app:1")]);
    let ok = vigil(&args);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
}

#[test]
#[ignore = "needs kubectl and kubernetes-validate (apt kubernetes-client, pip; tests/run-all.sh installs them)"]
fn embed_output_builds_with_kustomize_and_passes_the_kubernetes_schema() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shop.toml");
    std::fs::write(&config, EMBEDDED).unwrap();
    std::fs::write(dir.path().join("db.env"), "PGPASSWORD=hunter2\n").unwrap();
    let out_dir = dir.path().join("k8s");
    let out = vigil(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kubernetes".as_ref(),
        "-c".as_ref(),
        config.as_os_str(),
        "--embed".as_ref(),
        "--vigil-image".as_ref(),
        "registry.example/vigil:1".as_ref(),
        "--output-dir".as_ref(),
        out_dir.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "kubectl kustomize: {}",
        text(&built.stderr)
    );
    let built_text = text(&built.stdout);
    assert_eq!(
        objects_of(&built_text),
        [
            ("ConfigMap".to_string(), "shop-config".to_string()),
            ("Deployment".to_string(), "shop".to_string()),
            ("Service".to_string(), "shop".to_string())
        ]
    );
    let stream = dir.path().join("built.yaml");
    std::fs::write(&stream, &built.stdout).unwrap();
    let v = Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", "1.37.0"])
        .arg(&stream)
        .output()
        .expect("kubernetes-validate (pip install kubernetes-validate)");
    assert!(
        v.status.success(),
        "--embed fails the schema:\n{}{}\n{built_text}",
        text(&v.stdout),
        text(&v.stderr)
    );
}
