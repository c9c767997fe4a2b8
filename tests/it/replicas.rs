//! Pods with `replicas` (docs/behaviour.md §14): each replica a pod of its own, with its
//! name and index in its environment and `${replica}` in its strings.

use std::time::Duration;

use crate::common::{Vigil, patient};

const T: Duration = Duration::from_secs(20);

#[test]
fn each_replica_runs_as_its_own_pod_with_its_name_and_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_path_buf();
    let pods = format!(
        r#"
[pods.web]
replicas = 3
[[pods.web.containers]]
name = "app"
command = ["sh", "-c", "echo $VIGIL_POD_NAME $VIGIL_REPLICA ${{replica}} '$$HOME' > {out}/out-${{replica}}; exec sleep 600"]

[pods.front]
depends_on = {{ web = "started" }}
[[pods.front.containers]]
name = "app"
command = ["sleep", "600"]
"#,
        out = out.display()
    );
    let v = Vigil::start_in(dir, "", &pods);
    v.wait_for(patient(T), "front to run after every replica", |v| {
        v.container("front", "app")["state"]["running"].is_object()
    });
    for i in 0..3 {
        let pod = v.pod(&format!("web-{i}"));
        assert_eq!(pod["phase"], "Running", "{pod}");
        let text = std::fs::read_to_string(out.join(format!("out-{i}"))).expect("written");
        assert_eq!(text, format!("web-{i} {i} {i} $HOME\n"));
    }
    let names: Vec<String> = v.status()["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .map(|p| p["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(names, ["front", "web-0", "web-1", "web-2"]);
}

fn names(v: &Vigil) -> Vec<String> {
    v.status()["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .map(|p| p["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn pid(v: &Vigil, pod: &str) -> u64 {
    let c = v.container(pod, "app");
    if c["state"]["running"].is_object() {
        c["pid"].as_u64().unwrap_or(0)
    } else {
        0
    }
}

#[test]
fn scale_starts_new_replicas_stops_the_highest_and_leaves_the_rest_and_a_reload_keeps_it() {
    let pods = r#"
[pods.web]
replicas = 2
termination_grace_period_seconds = 2
[[pods.web.containers]]
name = "app"
command = ["sleep", "600"]
"#;
    let v = Vigil::start(pods);
    v.wait_for(patient(T), "both replicas running", |v| {
        pid(v, "web-0") > 0 && pid(v, "web-1") > 0
    });
    let first = pid(&v, "web-0");
    let out = v.cli(&["scale", "web", "4"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "scaled pod web from 2 to 4 replicas: starting web-2, web-3\n"
    );
    v.wait_for(patient(T), "four replicas running", |v| {
        (0..4).all(|i| pid(v, &format!("web-{i}")) > 0)
    });
    let out = v.cli(&["scale", "web", "1"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "scaled pod web from 4 to 1 replicas: stopping web-1, web-2, web-3\n"
    );
    v.wait_for(patient(T), "one replica left", |v| names(v) == ["web-0"]);
    assert_eq!(pid(&v, "web-0"), first, "the replica kept was not touched");
    // A reload of the same file keeps the scale …
    let out = v.cli(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(names(&v), ["web-0"]);
    // … and one that changes the file's count applies it.
    let text = std::fs::read_to_string(&v.config).expect("config");
    std::fs::write(&v.config, text.replace("replicas = 2", "replicas = 3")).expect("write");
    let out = v.cli(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    v.wait_for(patient(T), "three replicas running", |v| {
        (0..3).all(|i| pid(v, &format!("web-{i}")) > 0)
    });
    assert_eq!(pid(&v, "web-0"), first);
    // Refusals: no such pod, a pod without replicas, a count out of range.
    let out = v.cli(&["scale", "nope", "2"]);
    assert!(!out.status.success());
    let out = v.cli(&["scale", "web", "0"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("replicas must be between 1 and 1000, got 0"),
        "{out:?}"
    );
}
