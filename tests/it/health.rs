//! One health answer for outside checkers (docs/behaviour.md §5.6, docs/interface.md §1):
//! `vigil health [POD…]` exits 0 when every pod judged is Ready or Completed and 1 naming
//! each other pod and why; the pods judged by default are those expected to run.

use std::time::Duration;

use crate::common::{BIN, Vigil};

const T: Duration = Duration::from_secs(20);

/// `web` is ready once `DIR/ready` exists; `job` runs to completion; `later` is left out
/// (`autostart = false`); `crash` exits 1 at once and backs off for a long time.
fn pods(dir: &std::path::Path, crash: bool) -> String {
    let ready = dir.join("ready");
    let mut pods = format!(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sleep", "600"]
readiness_probe = {{ exec = {{ command = ["test", "-f", "{ready}"] }}, period_seconds = 0.2 }}

[pods.job]
restart_policy = "OnFailure"
[[pods.job.containers]]
name = "once"
command = ["true"]

[pods.later]
autostart = false
[[pods.later.containers]]
name = "c"
command = ["sleep", "600"]
"#,
        ready = ready.display()
    );
    if crash {
        pods.push_str(
            r#"
[pods.crash]
backoff = { initial_seconds = 300, max_seconds = 300 }
[[pods.crash.containers]]
name = "boom"
command = ["sh", "-c", "exit 1"]
"#,
        );
    }
    pods
}

fn start(crash: bool) -> Vigil {
    let dir = tempfile::tempdir().expect("tempdir");
    let pods = pods(dir.path(), crash);
    Vigil::start_in(dir, "", &pods)
}

/// `(exit code, stdout, stderr)` of `vigil health ARGS…`.
fn health(v: &Vigil, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["health"];
    all.extend_from_slice(args);
    let out = v.cli(&all);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn health_exits_1_naming_each_pod_not_ready_and_0_once_every_expected_pod_is_ready_or_completed() {
    let v = start(false);
    v.wait_for(T, "job to complete", |v| {
        v.pod("job")["phase"] == "Succeeded"
    });
    // web runs, its readiness probe fails: unhealthy, and said why; `later` is left out.
    let (code, out, err) = health(&v, &[]);
    assert_eq!(code, 1, "stdout: {out}\nstderr: {err}");
    assert!(err.contains("web: NotReady (web/app)"), "{err}");
    assert!(
        !err.contains("later"),
        "a pod left out is not judged: {err}"
    );
    assert!(!err.contains("job"), "a completed pod is healthy: {err}");
    std::fs::write(v.dir.path().join("ready"), "").expect("ready file");
    v.wait_for(T, "health to pass", |v| health(v, &[]).0 == 0);
    let (_, out, _) = health(&v, &[]);
    assert_eq!(out, "healthy: 1 pod ready, 1 completed\n");
    // Named, a pod left out is judged, and is not healthy.
    let (code, _, err) = health(&v, &["web", "later"]);
    assert_eq!(code, 1);
    assert!(err.contains("later: NotStarted"), "{err}");
    assert!(!err.contains("web:"), "{err}");
    // JSON: the reply, and the same exit code.
    let (code, out, _) = health(&v, &["-o", "json", "later"]);
    assert_eq!(code, 1);
    let reply: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(reply["healthy"], false);
    assert_eq!(reply["unhealthy"][0]["state"], "NotStarted");
    // A pod stopped by the operator is not expected to run any more; named, it is Stopped.
    assert!(v.cli(&["stop", "web", "--wait"]).status.success());
    let (code, out, err) = health(&v, &[]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let (code, _, err) = health(&v, &["web"]);
    assert_eq!(code, 1);
    assert!(err.contains("web: Stopped"), "{err}");
    // A name that names no pod is an error, with a suggestion.
    let (code, _, err) = health(&v, &["wbe"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no pod named \"wbe\" (did you mean \"web\"?)"),
        "{err}"
    );
}

#[test]
fn a_crash_looping_pod_makes_health_fail_with_its_back_off() {
    let v = start(true);
    std::fs::write(v.dir.path().join("ready"), "").expect("ready file");
    v.wait_for(T, "crash to back off", |v| {
        v.container("crash", "boom")["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    });
    v.wait_for(T, "web to be ready", |v| {
        v.container("web", "app")["ready"] == true
    });
    let (code, _, err) = health(&v, &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "crash: CrashLoopBackOff (crash/boom): back-off 5m0s restarting failed container"
        ),
        "{err}"
    );
    assert!(err.contains("unhealthy: 1 of 3 pods"), "{err}");
    assert_eq!(health(&v, &["web", "job"]).0, 0);
}

#[test]
fn health_of_a_supervisor_that_is_not_there_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(BIN)
        .args(["health", "--socket"])
        .arg(dir.path().join("none.sock"))
        .output()
        .expect("vigil health");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
#[ignore = "needs root (the client runs as nobody)"]
fn health_and_wait_are_answered_to_a_peer_that_is_not_an_admin() {
    crate::common::require_root("the client runs as nobody");
    crate::common::require_program("setpriv", "--version", "util-linux");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let pods = pods(dir.path(), false);
    std::fs::write(dir.path().join("ready"), "").expect("ready file");
    let v = Vigil::start_in(dir, "socket_mode = \"0666\"", &pods);
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                BIN,
            ])
            .args(args)
            .arg("--socket")
            .arg(&v.socket)
            .output()
            .expect("setpriv")
    };
    v.wait_for(T, "health to pass for nobody", |_| {
        as_nobody(&["health"]).status.code() == Some(0)
    });
    let out = as_nobody(&["health", "later"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("later: NotStarted"));
    // `wait` is read access too.
    let out = as_nobody(&["wait", "--for=ready", "web", "--timeout", "30s"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same peer may not change anything.
    assert_eq!(as_nobody(&["stop", "web"]).status.code(), Some(1));
}

/// `(exit code, stdout, stderr)` of a finished `vigil …`.
fn outcome(out: std::process::Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn wait_for_ready_is_answered_by_the_server_once_the_pod_is_ready_and_times_out_saying_why() {
    let v = start(false);
    // Not ready within the timeout: exit 1, saying what it waited for and where the pod is.
    let (code, _, err) = outcome(v.cli(&["wait", "--for=ready", "web", "--timeout", "1s"]));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("timed out after 1s waiting for the condition (ready) on pods/web"),
        "{err}"
    );
    assert!(err.contains("web: NotReady (web/app)"), "{err}");
    // A waiter in flight: the server answers others meanwhile, and the waiter once the pod
    // becomes ready.
    let waiter = std::process::Command::new(BIN)
        .args([
            "wait",
            "--for=condition=Ready",
            "web",
            "--timeout",
            "120s",
            "--socket",
        ])
        .arg(&v.socket)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("vigil wait");
    assert!(v.cli(&["status"]).status.success());
    assert_eq!(v.cli(&["health", "web"]).status.code(), Some(1));
    std::fs::write(v.dir.path().join("ready"), "").expect("ready file");
    let (code, out, err) = outcome(waiter.wait_with_output().expect("wait"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "pod/web condition met\n");
    // Met already: answered at once, for several pods.
    let (code, out, _) = outcome(v.cli(&["wait", "--for", "ready", "web", "--timeout", "0"]));
    assert_eq!((code, out.as_str()), (0, "pod/web condition met\n"));
}

#[test]
fn wait_for_completed_and_stopped_and_an_unknown_pod() {
    let v = start(false);
    let (code, out, err) = outcome(v.cli(&["wait", "--for=completed", "job", "--timeout", "60s"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "pod/job condition met\n");
    // A running pod is not stopped; once stopped by request it is.
    let (code, _, err) = outcome(v.cli(&["wait", "--for=stopped", "web", "--timeout", "0"]));
    assert_eq!(code, 1);
    assert!(err.contains("(stopped) on pods/web"), "{err}");
    let stopper = std::thread::spawn({
        let socket = v.socket.clone();
        move || {
            std::thread::sleep(Duration::from_millis(300));
            std::process::Command::new(BIN)
                .args(["stop", "web", "--socket"])
                .arg(&socket)
                .status()
                .expect("vigil stop")
        }
    });
    let waiter = std::process::Command::new(BIN)
        .args([
            "wait",
            "--for=stopped",
            "web",
            "job",
            "--timeout",
            "120s",
            "-o",
            "json",
        ])
        .arg("--socket")
        .arg(&v.socket)
        .output();
    let (code, out, err) = outcome(waiter.expect("vigil wait"));
    assert!(stopper.join().expect("stopper").success());
    assert_eq!(code, 0, "{err}");
    let reply: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(reply["met"], true);
    assert_eq!(reply["for"], "stopped");
    assert_eq!(reply["pods"][0]["state"], "Stopped");
    // An unknown pod is refused at once.
    let (code, _, err) = outcome(v.cli(&["wait", "--for=ready", "wbe"]));
    assert_eq!(code, 1);
    assert!(err.contains("no pod named \"wbe\""), "{err}");
}

#[test]
fn a_wait_under_way_at_an_upgrade_is_answered_by_the_new_vigil() {
    let v = start(false);
    let waiter = std::process::Command::new(BIN)
        .args([
            "wait",
            "--for=ready",
            "web",
            "--timeout",
            "120s",
            "--socket",
        ])
        .arg(&v.socket)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("vigil wait");
    // Let the request reach the server (were it later, the new vigil would simply take it).
    std::thread::sleep(Duration::from_millis(500));
    let up = v.cli(&["upgrade"]);
    assert!(
        up.status.success(),
        "{}{}",
        String::from_utf8_lossy(&up.stderr),
        v.log()
    );
    std::fs::write(v.dir.path().join("ready"), "").expect("ready file");
    let (code, out, err) = outcome(waiter.wait_with_output().expect("wait"));
    assert_eq!(code, 0, "{err}\n{}", v.log());
    assert_eq!(out, "pod/web condition met\n");
}
