//! Sidecar containers (an init container with `restart_policy = "Always"`) with real
//! processes: a log shipper that outlives a batch job's main container and is stopped after
//! it, and the stop order of a whole pod; lifecycle hooks with real processes.

use std::path::Path;
use std::time::Duration;

use crate::common::{Vigil, state_reason};

const T: Duration = Duration::from_secs(15);

fn marks(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A shell sidecar that writes `<name>-up` when it starts and `<name>-down` when SIGTERM
/// reaches it, then exits 0.
fn shipper(name: &str, marks: &Path) -> String {
    format!(
        r#"[[pods.batch.init_containers]]
name = "{name}"
restart_policy = "Always"
command = ["sh", "-c", "trap 'echo {name}-down >> {m}; exit 0' TERM; echo {name}-up >> {m}; while :; do sleep 0.05; done"]
"#,
        m = marks.display()
    )
}

#[test]
fn sidecar_log_shipper_outlives_the_batch_job_and_is_stopped_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("marks");
    let v = Vigil::start(&format!(
        r#"
[pods.batch]
restart_policy = "Never"
{}
[[pods.batch.containers]]
name = "job"
command = ["sh", "-c", "until grep -q shipper-up {m}; do sleep 0.02; done; echo job-done >> {m}"]
"#,
        shipper("shipper", &m),
        m = m.display()
    ));
    v.wait_for(T, "the pod to succeed and the shipper to stop", |v| {
        v.pod("batch")["phase"] == "Succeeded"
            && v.container("batch", "shipper")["state"]["terminated"].is_object()
    });
    assert_eq!(marks(&m), ["shipper-up", "job-done", "shipper-down"]);
    let job = v.container("batch", "job");
    assert_eq!(job["state"]["terminated"]["reason"], "Completed");
    let shipper = v.container("batch", "shipper");
    let t = &shipper["state"]["terminated"];
    assert_eq!(t["reason"], "Stopped", "{shipper}");
    assert_eq!(t["message"], "the pod's containers have finished");
    assert_eq!(shipper["restart_count"], 0, "stopped, not restarted");
    let job_end = job["state"]["terminated"]["finished_at"].as_str();
    let shipper_end = t["finished_at"].as_str();
    assert!(
        job_end.is_some() && shipper_end >= job_end,
        "the shipper stopped after the job: {shipper} {job}"
    );
}

#[test]
fn stopping_a_pod_stops_its_containers_then_its_sidecars_last_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("marks");
    let v = Vigil::start(&format!(
        r#"
[pods.batch]
{}{}
[[pods.batch.containers]]
name = "app"
command = ["sh", "-c", "trap 'echo app-down >> {m}; exit 0' TERM; echo app-up >> {m}; while :; do sleep 0.05; done"]
"#,
        shipper("s1", &m),
        shipper("s2", &m),
        m = m.display()
    ));
    v.wait_for(T, "all three running", |v| {
        ["s1", "s2", "app"]
            .iter()
            .all(|c| state_reason(&v.container("batch", c)) == "Running")
            && marks(&m).len() == 3
    });
    let mut up = marks(&m);
    up.sort();
    assert_eq!(up, ["app-up", "s1-up", "s2-up"]);
    let reply = v.request(r#"{"cmd":"stop","pod":"batch"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    v.wait_for(T, "everything to stop", |v| {
        ["s1", "s2", "app"]
            .iter()
            .all(|c| v.container("batch", c)["state"]["terminated"].is_object())
    });
    assert_eq!(
        marks(&m)[3..],
        ["app-down", "s2-down", "s1-down"],
        "regular containers first, then the sidecars in reverse order"
    );
}

#[test]
fn lifecycle_hooks_run_after_the_start_and_before_the_stop_signal() {
    // post_start runs right after the start (the container is started once it returned);
    // pre_stop runs before SIGTERM reaches the container.
    let dir = tempfile::tempdir().expect("tempdir");
    let m = dir.path().join("marks");
    let v = Vigil::start(&format!(
        r#"
[pods.hooks]
[[pods.hooks.containers]]
name = "app"
command = ["sh", "-c", "trap 'echo term >> {m}; exit 0' TERM; while :; do sleep 0.05; done"]
[pods.hooks.containers.lifecycle]
post_start = {{ exec = {{ command = ["sh", "-c", "echo post-start >> {m}"] }} }}
pre_stop = {{ exec = {{ command = ["sh", "-c", "echo pre-stop >> {m}; sleep 0.3"] }} }}
"#,
        m = m.display()
    ));
    v.wait_for(T, "started after post_start", |v| {
        v.container("hooks", "app")["started"] == true
    });
    assert_eq!(marks(&m), ["post-start"]);
    let reply = v.request(r#"{"cmd":"stop","pod":"hooks"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    v.wait_for(T, "the stop", |v| {
        v.container("hooks", "app")["state"]["terminated"].is_object()
    });
    assert_eq!(marks(&m), ["post-start", "pre-stop", "term"]);
}

#[test]
fn failing_post_start_hook_kills_the_container() {
    let v = Vigil::start(
        r#"
[pods.bad]
restart_policy = "Never"
[[pods.bad.containers]]
name = "app"
command = ["sleep", "60"]
termination_grace_period_seconds = 0.2
[pods.bad.containers.lifecycle]
post_start = { exec = { command = ["sh", "-c", "echo cannot warm up; exit 3"] } }
"#,
    );
    v.wait_for(T, "the kill", |v| {
        v.container("bad", "app")["state"]["terminated"].is_object()
    });
    let t = v.container("bad", "app")["state"]["terminated"].clone();
    assert_eq!(t["reason"], "FailedPostStartHook", "{t}");
    assert_eq!(v.pod("bad")["phase"], "Failed");
}

/// `vigil status` prints a pod with a started sidecar as kubectl 1.29+ prints it: Running,
/// the sidecar counted in READY, and its restart in RESTARTS (it showed `1/1 Init:0/1 0`).
#[test]
fn status_prints_a_pod_with_a_restarted_sidecar_as_kubectl_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let once = dir.path().join("once");
    let v = Vigil::start(&format!(
        r#"
[pods.web]
backoff = {{ initial_seconds = 0.1, max_seconds = 0.1 }}
[[pods.web.init_containers]]
name = "shipper"
restart_policy = "Always"
command = ["sh", "-c", "if [ -e {o} ]; then exec sleep 300; fi; touch {o}; exit 1"]
[[pods.web.containers]]
name = "app"
command = ["sleep", "300"]
"#,
        o = once.display()
    ));
    v.wait_for(T, "the sidecar restarted once and both running", |v| {
        v.container("web", "shipper")["restart_count"] == 1
            && state_reason(&v.container("web", "shipper")) == "Running"
            && state_reason(&v.container("web", "app")) == "Running"
            && v.container("web", "app")["ready"] == true
    });
    let out = v.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("web "))
        .unwrap_or_else(|| panic!("no row for web: {text}"))
        .split_whitespace()
        .collect();
    assert_eq!(&row[1..4], ["2/2", "Running", "1"], "{text}");
}

/// A pod `hooked` whose container runs as `nobody` with a `post_start` exec hook that starts
/// `sleep 300` in the background and writes its pid to `dir/daemon` (world-writable `dir`);
/// `supervisor` lines as in [`Vigil::start_in`]. Returns vigil and the daemon's pid once the
/// container counts as started.
fn hook_daemon_pod(supervisor: &str) -> (Vigil, u64) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let pidfile = shared.join("daemon");
    let v = Vigil::start_in(
        dir,
        supervisor,
        &format!(
            r#"
[pods.hooked]
restart_policy = "Never"
[[pods.hooked.containers]]
name = "app"
command = ["sleep", "300"]
user = 65534
termination_grace_period_seconds = 2
[pods.hooked.containers.lifecycle]
post_start = {{ exec = {{ command = ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $! > {p}"] }} }}
"#,
            p = pidfile.display()
        ),
    );
    v.wait_for(T, "started after post_start", |v| {
        v.container("hooked", "app")["started"] == true
    });
    let pid: u64 = std::fs::read_to_string(&pidfile)
        .expect("the hook wrote its daemon's pid")
        .trim()
        .parse()
        .expect("a pid");
    (v, pid)
}

/// The kubelet runs an exec hook inside its container (pkg/kubelet/lifecycle/handlers.go,
/// `HandlerRunner.Run` → `ExecSync`): what it leaves running lives until the container stops,
/// and dies then.
fn check_hook_daemon_lives_until_the_container_stops(v: &Vigil, daemon: u64) {
    // The hook has returned (the container counts as started): its daemon goes on.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        crate::common::alive(daemon),
        "the post_start hook's daemon {daemon} died when the hook ended"
    );
    let reply = v.request(r#"{"cmd":"stop","pod":"hooked"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    v.wait_for(T, "the stop", |v| {
        v.container("hooked", "app")["state"]["terminated"].is_object()
    });
    let deadline = std::time::Instant::now() + T;
    while crate::common::alive(daemon) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !crate::common::alive(daemon),
        "the post_start hook's daemon {daemon} outlived its container"
    );
}

#[test]
#[ignore = "needs root (a container running as nobody)"]
fn a_post_start_hooks_daemon_lives_until_its_container_stops_without_cgroups() {
    crate::common::require_root("to run a container as nobody");
    let (v, daemon) = hook_daemon_pod("");
    check_hook_daemon_lives_until_the_container_stops(&v, daemon);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn a_post_start_hooks_daemon_lives_until_its_container_stops_in_its_cgroup() {
    let cg = crate::common::ScratchCgroup::new();
    let (v, daemon) = hook_daemon_pod(&cg.root_line());
    check_hook_daemon_lives_until_the_container_stops(&v, daemon);
    // Its cgroup went with the container's.
    v.wait_for(T, "the container's cgroups removed", |_| {
        cg.container_dirs().is_empty()
    });
}
