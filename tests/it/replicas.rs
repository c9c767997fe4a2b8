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
