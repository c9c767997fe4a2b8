//! Startup, liveness and readiness probes end to end: real HTTP servers (`python3 -m
//! http.server`), exec probes that hang, TCP probes against closed ports — observed through
//! status, describe, events and /proc.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::common::{Vigil, processes_with_cmdline, state_reason};

const T: Duration = Duration::from_secs(30);

/// A TCP port nobody listens on right now: bind port 0, read it, let it go.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// Panics unless `python3` runs here (it serves the test HTTP endpoints).
fn require_python() {
    crate::common::require_program("python3", "--version", "python3");
}

/// A directory served over HTTP, with a `healthz` file (GET /healthz is 200 until it goes).
struct WebRoot {
    dir: tempfile::TempDir,
}

impl WebRoot {
    fn new() -> WebRoot {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = WebRoot { dir };
        w.set_healthy(true);
        w
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn healthz(&self) -> PathBuf {
        self.path().join("healthz")
    }

    fn set_healthy(&self, healthy: bool) {
        if healthy {
            std::fs::write(self.healthz(), "ok\n").expect("write healthz");
        } else {
            std::fs::remove_file(self.healthz()).expect("remove healthz");
        }
    }

    /// The `python3 -m http.server` argv serving this directory on `port`, as TOML.
    fn server_command(&self, port: u16) -> String {
        format!(
            r#"["python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1", "--directory", "{}"]"#,
            self.path().display()
        )
    }

    /// The same server wrapped in a shell that exits 0 on SIGTERM (the kubelet pain point:
    /// a liveness kill that looks like a clean exit).
    fn server_command_exiting_zero_on_term(&self, port: u16) -> String {
        format!(
            r#"["sh", "-c", "trap 'exit 0' TERM; python3 -m http.server {port} --bind 127.0.0.1 --directory {} & wait"]"#,
            self.path().display()
        )
    }
}

fn events(v: &Vigil) -> Vec<Value> {
    v.request(r#"{"cmd":"events"}"#)["result"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn find_event(v: &Vigil, reason: &str, prefix: &str) -> Option<Value> {
    events(v).into_iter().find(|e| {
        e["reason"] == reason && e["message"].as_str().is_some_and(|m| m.starts_with(prefix))
    })
}

/// The container's probe status of `kind` (`startup`, `liveness`, `readiness`).
fn probe(c: &Value, kind: &str) -> Value {
    c["probes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["kind"] == kind).cloned())
        .unwrap_or(Value::Null)
}

fn recent(c: &Value, kind: &str) -> Vec<Value> {
    probe(c, kind)["recent"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn restarts(c: &Value) -> u64 {
    c["restart_count"].as_u64().unwrap_or(0)
}

fn time(v: &Value) -> SystemTime {
    v.as_str()
        .and_then(vigil::control::time::parse_rfc3339)
        .unwrap_or_else(|| panic!("not an RFC 3339 time: {v}"))
}

fn condition(pod: &Value, kind: &str) -> Value {
    pod["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or(Value::Null)
}

/// Whether /proc still has an entry for `pid` (a zombie still has one).
fn proc_entry_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn http_liveness_pod(port: u16, command: &str, policy: &str) -> String {
    format!(
        r#"
[pods.web]
restart_policy = "{policy}"
backoff = {{ initial_seconds = 0.1, max_seconds = 0.1 }}
[[pods.web.containers]]
name = "app"
command = {command}
[pods.web.containers.startup_probe]
http_get = {{ port = {port}, path = "/" }}
period_seconds = 0.2
timeout_seconds = 1
failure_threshold = 150
[pods.web.containers.liveness_probe]
http_get = {{ port = {port}, path = "/healthz" }}
period_seconds = 0.2
timeout_seconds = 1
failure_threshold = 3
"#,
    )
}

/// Removes the health file of a running server, waits for the liveness restart, restores the
/// file, and checks what every liveness kill must show. Returns the container after the kill.
fn kill_by_liveness_and_check(v: &Vigil, web: &WebRoot) -> Value {
    v.wait_for(T, "the server to start and pass liveness", |v| {
        let c = v.container("web", "app");
        c["started"] == true && recent(&c, "liveness").iter().any(|r| r["success"] == true)
    });
    let first_pid = v.container("web", "app")["pid"].clone();
    assert_eq!(restarts(&v.container("web", "app")), 0);

    web.set_healthy(false);
    v.wait_for(T, "the liveness restart", |v| {
        restarts(&v.container("web", "app")) >= 1
    });
    web.set_healthy(true);

    let c = v.container("web", "app");
    let last = &c["last_state"]["terminated"];
    assert_eq!(last["reason"], "LivenessProbeFailed", "{c}");
    let message = last["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("Liveness probe failed: HTTP probe failed with statuscode: 404"),
        "termination message carries the last probe output: {message}"
    );
    assert_ne!(c["pid"], first_pid, "a new process runs");

    // Exactly failure_threshold failed attempts led to the kill, a period apart.
    let finished = time(&last["finished_at"]);
    let failures: Vec<SystemTime> = recent(&c, "liveness")
        .iter()
        .filter(|r| r["success"] == false && time(&r["time"]) <= finished)
        .map(|r| {
            assert!(
                r["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("HTTP probe failed with statuscode: 404")),
                "{r}"
            );
            time(&r["time"])
        })
        .collect();
    assert_eq!(failures.len(), 3, "failure_threshold failures: {c}");
    let span = failures[2]
        .duration_since(failures[0])
        .expect("records in order");
    assert!(
        span >= Duration::from_millis(300),
        "three attempts span at least two periods (less scheduling slack), got {span:?}"
    );

    let killing =
        find_event(v, "Killing", "Container app failed liveness probe").expect("a Killing event");
    assert_eq!(killing["object"], "web/app");
    let unhealthy = find_event(
        v,
        "Unhealthy",
        "Liveness probe failed: HTTP probe failed with statuscode: 404",
    )
    .expect("an Unhealthy event");
    assert_eq!(unhealthy["type"], "Warning");
    assert!(unhealthy["count"].as_u64().unwrap_or(0) >= 3, "{unhealthy}");
    c
}

#[test]
fn liveness_failure_restarts_http_server_with_liveness_probe_failed() {
    require_python();
    let web = WebRoot::new();
    let port = free_port();
    let v = Vigil::start(&http_liveness_pod(
        port,
        &web.server_command(port),
        "Always",
    ));
    let c = kill_by_liveness_and_check(&v, &web);
    let last = &c["last_state"]["terminated"];
    // python dies of the SIGTERM vigil sent; the real signal is kept.
    assert_eq!(last["signal"], 15, "{c}");
    assert_eq!(last["exit_code"], 143, "{c}");
    // The new run serves on the same port and passes its probes again.
    v.wait_for(T, "the new run to be started and live", |v| {
        let c = v.container("web", "app");
        state_reason(&c) == "Running" && c["started"] == true
    });
}

#[test]
fn liveness_kill_of_server_exiting_zero_on_sigterm_is_a_failure_under_on_failure() {
    require_python();
    let web = WebRoot::new();
    let port = free_port();
    let v = Vigil::start(&http_liveness_pod(
        port,
        &web.server_command_exiting_zero_on_term(port),
        "OnFailure",
    ));
    let c = kill_by_liveness_and_check(&v, &web);
    let last = &c["last_state"]["terminated"];
    assert_eq!(last["exit_code"], 0, "the real exit code is kept: {c}");
    assert!(last["signal"].is_null(), "{c}");
    assert_ne!(
        v.pod("web")["phase"],
        "Succeeded",
        "a probe kill is a failure, so OnFailure restarts it"
    );
    // The restarted wrapper binds the same port again: the old server did not survive.
    v.wait_for(T, "the new run to be started", |v| {
        let c = v.container("web", "app");
        state_reason(&c) == "Running" && c["started"] == true
    });
    assert_eq!(v.pod("web")["phase"], "Running");
}

#[test]
fn never_ready_container_makes_pod_not_ready_while_its_mate_keeps_running() {
    let v = Vigil::start(
        r#"
[pods.duo]
[[pods.duo.containers]]
name = "good"
command = ["sleep", "300"]
[pods.duo.containers.readiness_probe]
exec = { command = ["true"] }
period_seconds = 0.2
[[pods.duo.containers]]
name = "lazy"
command = ["sleep", "300"]
[pods.duo.containers.readiness_probe]
exec = { command = ["sh", "-c", "echo not yet; exit 1"] }
period_seconds = 0.2
failure_threshold = 1
"#,
    );
    v.wait_for(T, "good ready and lazy failing repeatedly", |v| {
        let good = v.container("duo", "good");
        let lazy = v.container("duo", "lazy");
        good["ready"] == true
            && recent(&lazy, "readiness")
                .iter()
                .filter(|r| r["success"] == false)
                .count()
                >= 5
    });
    let pod = v.pod("duo");
    for kind in ["ContainersReady", "Ready"] {
        let cond = condition(&pod, kind);
        assert_eq!(cond["status"], "False", "{kind}: {pod}");
        assert_eq!(cond["reason"], "ContainersNotReady", "{kind}: {pod}");
        assert_eq!(
            cond["message"], "containers with unready status: [lazy]",
            "{kind}: {pod}"
        );
    }
    assert_eq!(pod["phase"], "Running");
    let good = v.container("duo", "good");
    let lazy = v.container("duo", "lazy");
    assert_eq!(state_reason(&good), "Running");
    assert_eq!(restarts(&good), 0, "{good}");
    assert_eq!(lazy["ready"], false);
    assert_eq!(state_reason(&lazy), "Running", "readiness never kills");
    assert_eq!(restarts(&lazy), 0, "{lazy}");
    let r = recent(&lazy, "readiness");
    assert_eq!(
        r.last().expect("a record")["message"],
        "command exited with code 1: not yet"
    );
    let unhealthy = find_event(&v, "Unhealthy", "Readiness probe failed: command exited")
        .expect("an Unhealthy event");
    assert_eq!(unhealthy["object"], "duo/lazy");
}

#[test]
fn startup_probe_that_never_succeeds_kills_with_startup_probe_failed() {
    let v = Vigil::start(
        r#"
[pods.slow]
restart_policy = "Never"
[[pods.slow.containers]]
name = "c"
command = ["sleep", "300"]
[pods.slow.containers.startup_probe]
exec = { command = ["false"] }
period_seconds = 0.2
failure_threshold = 3
[pods.slow.containers.liveness_probe]
exec = { command = ["true"] }
period_seconds = 0.2
"#,
    );
    v.wait_for(T, "the startup probe kill", |v| {
        v.container("slow", "c")["state"]["terminated"].is_object()
    });
    let c = v.container("slow", "c");
    let term = &c["state"]["terminated"];
    assert_eq!(term["reason"], "StartupProbeFailed", "{c}");
    assert_eq!(
        term["message"],
        "Startup probe failed: command exited with code 1"
    );
    assert_eq!(term["signal"], 15, "sleep dies of the stop signal: {c}");
    assert_eq!(c["started"], false);
    assert_eq!(
        recent(&c, "startup")
            .iter()
            .filter(|r| r["success"] == false)
            .count(),
        3
    );
    assert!(
        recent(&c, "liveness").is_empty(),
        "liveness waits for the startup probe: {c}"
    );
    assert_eq!(
        v.pod("slow")["phase"],
        "Failed",
        "a probe kill is a failure"
    );
    assert!(find_event(&v, "Killing", "Container c failed startup probe").is_some());
}

#[test]
fn timed_out_exec_probe_fails_and_its_process_tree_is_killed_and_reaped() {
    let v = timed_out_exec_probe_vigil("none");
    check_timed_out_exec_probe(&v);
}

/// The same with cgroups: the probe runs in its own child cgroup, killed with `cgroup.kill`.
#[test]
#[ignore = "needs root and cgroup v2"]
fn timed_out_exec_probe_in_its_own_cgroup_is_killed_and_reaped() {
    let root = scratch_cgroup_root();
    let v = timed_out_exec_probe_vigil(&root.display().to_string());
    let cg = v.container("hang", "c")["cgroup"].clone();
    assert!(
        !cg.is_null(),
        "vigil runs without cgroups here\n{}",
        v.log()
    );
    check_timed_out_exec_probe(&v);
    assert_eq!(v.shutdown(), 0);
    assert!(!root.exists(), "vigil removes the cgroup root it created");
}

/// A cgroup root of our own on the cgroup2 mount (vigil creates and removes it); panics
/// when not root or there is no cgroup2 mount.
fn scratch_cgroup_root() -> PathBuf {
    crate::common::require_root("to create cgroups");
    crate::common::require_cgroup2_mount().join(format!("vigil-it-probes-{}", std::process::id()))
}

/// A vigil whose readiness probe hangs (timeout 0.3 s); its pid file is in the vigil's dir.
fn timed_out_exec_probe_vigil(cgroup_root: &str) -> Vigil {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let pids = dir.path().join("probe-pids");
    let header = crate::common::supervisor_header(&socket).replace(
        "cgroup_root = \"none\"",
        &format!("cgroup_root = \"{cgroup_root}\""),
    );
    // The probe's shell starts `sleep 4242` in the background and waits: a tree of two.
    let pods = format!(
        r#"
[pods.hang]
[[pods.hang.containers]]
name = "c"
command = ["sleep", "300"]
[pods.hang.containers.readiness_probe]
exec = {{ command = ["sh", "-c", "sleep 4242 & echo $$$$ $! >> {}; wait"] }}
period_seconds = 0.4
timeout_seconds = 0.3
failure_threshold = 1
"#,
        pids.display()
    );
    std::fs::write(&config, header + &pods).expect("write config");
    Vigil::start_with(dir, socket, config)
}

fn check_timed_out_exec_probe(v: &Vigil) {
    let pids = v.dir.path().join("probe-pids");
    v.wait_for(T, "two timed-out attempts", |v| {
        recent(&v.container("hang", "c"), "readiness").len() >= 2
    });
    let c = v.container("hang", "c");
    for r in recent(&c, "readiness") {
        assert_eq!(r["success"], false, "{r}");
        assert_eq!(r["message"], "probe timed out after 300ms", "{r}");
    }
    assert_eq!(c["ready"], false);
    assert!(
        find_event(v, "Unhealthy", "Readiness probe failed: probe timed out").is_some(),
        "a visible Unhealthy event"
    );
    // Timed-out attempts release what they held (pipes, probe cgroups).
    let vigil_pid = v.child.as_ref().expect("running").id();
    let baseline = open_fds(vigil_pid);
    v.wait_for(T, "eight more timed-out attempts", |v| {
        find_event(v, "Unhealthy", "Readiness probe failed: probe timed out")
            .is_some_and(|e| e["count"].as_u64() >= Some(10))
    });
    let after = open_fds(vigil_pid);
    assert!(
        after <= baseline + 3,
        "no descriptor leak per attempt: {baseline} fds before, {after} after"
    );

    // Every attempt but possibly the one in flight now is gone: no survivor, no zombie.
    let attempts: Vec<(u32, u32)> = std::fs::read_to_string(&pids)
        .expect("pid file")
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace().map(|p| p.parse::<u32>().expect("pid"));
            (it.next().expect("sh pid"), it.next().expect("sleep pid"))
        })
        .collect();
    assert!(attempts.len() >= 2, "{attempts:?}");
    let finished = &attempts[..2];
    v.wait_for(T, "timed-out probe trees to vanish from /proc", |_| {
        finished
            .iter()
            .all(|&(sh, sleep)| !proc_entry_exists(sh) && !proc_entry_exists(sleep))
    });

    // Stopping the container cancels the attempt in flight too: no `sleep 4242` is left.
    let reply = v.request(r#"{"cmd":"stop","pod":"hang","container":"c"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    v.wait_for(T, "the container to stop", |v| {
        state_reason(&v.container("hang", "c")) == "Stopped"
    });
    v.wait_for(T, "no sleep 4242 left", |_| {
        processes_with_cmdline("sleep\x004242\0").is_empty()
    });
    let all: Vec<(u32, u32)> = std::fs::read_to_string(&pids)
        .expect("pid file")
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace().filter_map(|p| p.parse::<u32>().ok());
            Some((it.next()?, it.next()?))
        })
        .collect();
    v.wait_for(T, "every probe process reaped", |_| {
        all.iter()
            .all(|&(sh, sleep)| !proc_entry_exists(sh) && !proc_entry_exists(sleep))
    });
}

#[test]
fn tcp_readiness_probe_on_closed_port_records_aggregated_unhealthy_event() {
    let port = free_port();
    let v = Vigil::start(&format!(
        r#"
[pods.tcp]
[[pods.tcp.containers]]
name = "c"
command = ["sleep", "300"]
[pods.tcp.containers.readiness_probe]
tcp_socket = {{ port = {port} }}
period_seconds = 0.2
"#
    ));
    let expected =
        format!("Readiness probe failed: dial tcp 127.0.0.1:{port}: connect: connection refused");
    v.wait_for(T, "the Unhealthy event to repeat", |v| {
        find_event(v, "Unhealthy", &expected).is_some_and(|e| e["count"].as_u64() >= Some(3))
    });
    let matching: Vec<Value> = events(&v)
        .into_iter()
        .filter(|e| e["reason"] == "Unhealthy")
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "repeats aggregate into one event: {matching:?}"
    );
    let e = &matching[0];
    assert_eq!(e["message"], expected.as_str());
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["object"], "tcp/c");
    assert!(
        time(&e["last_timestamp"]) > time(&e["first_timestamp"]),
        "{e}"
    );
    let c = v.container("tcp", "c");
    assert_eq!(c["ready"], false);
    assert_eq!(restarts(&c), 0);
    // The CLI shows the aggregation kubectl-style.
    let out = v.cli(&["describe", "tcp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("connection refused"), "{text}");
    assert!(text.contains("(x"), "count shown as (xN over …): {text}");
}

#[test]
fn readiness_probe_makes_pod_ready_once_the_server_is_up_and_describe_shows_results() {
    require_python();
    let web = WebRoot::new();
    let port = free_port();
    // The server comes up only after a second: the first attempts are refused.
    let v = Vigil::start(&format!(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sh", "-c", "sleep 1; exec python3 -m http.server {port} --bind 127.0.0.1 --directory {dir}"]
[pods.web.containers.readiness_probe]
http_get = {{ port = {port}, path = "/healthz" }}
period_seconds = 0.2
"#,
        dir = web.path().display()
    ));
    v.wait_for(T, "a refused readiness attempt", |v| {
        !recent(&v.container("web", "app"), "readiness").is_empty()
    });
    let first = v.container("web", "app");
    assert_eq!(first["ready"], false);
    assert_eq!(condition(&v.pod("web"), "Ready")["status"], "False");

    v.wait_for(T, "the pod to become Ready", |v| {
        condition(&v.pod("web"), "Ready")["status"] == "True"
    });
    let pod = v.pod("web");
    assert_eq!(condition(&pod, "ContainersReady")["status"], "True");
    assert_eq!(v.container("web", "app")["ready"], true);

    // describe -o json (through the CLI) carries the recorded results.
    let out = v.cli(&["describe", "web", "-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    let d: Value = serde_json::from_slice(&out.stdout).expect("describe json");
    let c = d["pod"]["containers"]
        .as_array()
        .and_then(|cs| cs.first().cloned())
        .expect("a container");
    let p = probe(&c, "readiness");
    assert_eq!(p["result"], "success", "{p}");
    let rs = recent(&c, "readiness");
    let refused = format!("dial tcp 127.0.0.1:{port}: connect: connection refused");
    assert!(
        rs.iter()
            .any(|r| r["success"] == false && r["message"] == refused.as_str()),
        "{rs:?}"
    );
    let ok = rs.last().expect("a record");
    assert_eq!(ok["success"], true, "{ok}");
    assert_eq!(ok["message"], "HTTP 200 OK, body: \"ok\"", "{ok}");
    assert!(ok["duration_ms"].as_f64().is_some(), "{ok}");
    assert_eq!(
        c["spec"]["readiness_probe"]["action"],
        format!("http-get http://127.0.0.1:{port}/healthz")
    );
}

#[test]
fn probe_termination_grace_period_is_honoured_on_liveness_kill() {
    // Ignores SIGTERM; the pod's grace (60 s) would outlast the test deadline, the probe's
    // (0.5 s) does not. The probe fails only once the shell has set its trap (it wrote the
    // marker file after `trap`), so the kill never beats the trap.
    let marks = tempfile::tempdir().expect("tempdir");
    let trap_set = marks.path().join("trap-set");
    let v = Vigil::start(&format!(
        r#"
[pods.stubborn]
restart_policy = "Never"
termination_grace_period_seconds = 60
[[pods.stubborn.containers]]
name = "c"
command = ["sh", "-c", "trap '' TERM; touch {m}; while :; do sleep 0.1; done"]
[pods.stubborn.containers.liveness_probe]
exec = {{ command = ["sh", "-c", "! test -e {m}"] }}
period_seconds = 0.2
failure_threshold = 1
termination_grace_period_seconds = 0.5
"#,
        m = trap_set.display()
    ));
    v.wait_for(T, "the liveness kill to finish", |v| {
        v.container("stubborn", "c")["state"]["terminated"].is_object()
    });
    let c = v.container("stubborn", "c");
    let term = &c["state"]["terminated"];
    assert_eq!(term["reason"], "LivenessProbeFailed", "{c}");
    assert_eq!(term["signal"], 9, "SIGKILL after the probe's grace: {c}");
    assert_eq!(term["exit_code"], 137);
    let killing =
        find_event(&v, "Killing", "Container c failed liveness probe").expect("a Killing event");
    let waited = time(&term["finished_at"])
        .duration_since(time(&killing["first_timestamp"]))
        .unwrap_or_default();
    assert!(
        waited >= Duration::from_millis(450),
        "the grace period is given before SIGKILL: {waited:?}"
    );
}

#[test]
fn liveness_probe_holds_after_a_kill_until_the_next_run() {
    let marks = tempfile::tempdir().expect("tempdir");
    let attempts = marks.path().join("attempts");
    // The container ignores SIGTERM and gets 1.5 s of grace: at a 0.1 s period a probe that
    // kept running would make many more attempts meanwhile.
    let v = Vigil::start(&format!(
        r#"
[pods.hold]
restart_policy = "Never"
termination_grace_period_seconds = 1
[[pods.hold.containers]]
name = "c"
command = ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"]
[pods.hold.containers.liveness_probe]
exec = {{ command = ["sh", "-c", "echo x >> {}; exit 1"] }}
period_seconds = 0.1
failure_threshold = 2
termination_grace_period_seconds = 1.5
"#,
        attempts.display()
    ));
    v.wait_for(T, "the liveness kill to finish", |v| {
        v.container("hold", "c")["state"]["terminated"].is_object()
    });
    let c = v.container("hold", "c");
    assert_eq!(c["state"]["terminated"]["reason"], "LivenessProbeFailed");
    assert_eq!(
        recent(&c, "liveness").len(),
        2,
        "no attempt recorded after the kill began: {c}"
    );
    let lines = std::fs::read_to_string(&attempts)
        .unwrap_or_default()
        .lines()
        .count();
    assert!(
        (2..=3).contains(&lines),
        "at most the attempt in flight at the kill ran after it, got {lines} attempts"
    );

    // The next run probes again.
    let reply = v.request(r#"{"cmd":"start","pod":"hold","container":"c"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    v.wait_for(T, "probes to resume in the new run", |v| {
        recent(&v.container("hold", "c"), "liveness").len() > 2
    });
}

#[test]
fn slow_exec_probe_is_never_started_twice() {
    let marks = tempfile::tempdir().expect("tempdir");
    let log = marks.path().join("runs");
    // Each attempt takes 0.5 s, the period is 0.1 s and the timeout 5 s: attempts that are due
    // while one runs are skipped, so starts and ends strictly alternate.
    let v = Vigil::start(&format!(
        r#"
[pods.slowprobe]
[[pods.slowprobe.containers]]
name = "c"
command = ["sleep", "300"]
[pods.slowprobe.containers.readiness_probe]
exec = {{ command = ["sh", "-c", "echo start >> {log}; sleep 0.5; echo end >> {log}"] }}
period_seconds = 0.1
timeout_seconds = 5
"#,
        log = log.display()
    ));
    v.wait_for(T, "three finished attempts", |v| {
        recent(&v.container("slowprobe", "c"), "readiness").len() >= 3
    });
    let text = std::fs::read_to_string(&log).expect("runs log");
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let want = if i % 2 == 0 { "start" } else { "end" };
        assert_eq!(*l, want, "attempt overlap at line {i}: {lines:?}");
    }
    let c = v.container("slowprobe", "c");
    assert_eq!(c["ready"], true);
    for r in recent(&c, "readiness") {
        assert_eq!(r["success"], true, "{r}");
        assert!(
            r["duration_ms"].as_f64().unwrap_or(0.0) >= 450.0,
            "the recorded duration is the attempt's: {r}"
        );
    }
}

#[test]
fn readiness_is_published_only_after_success_threshold_successes_in_a_row() {
    let v = Vigil::start(
        r#"
[pods.gate]
[[pods.gate.containers]]
name = "c"
command = ["sleep", "300"]
[pods.gate.containers.readiness_probe]
exec = { command = ["true"] }
period_seconds = 0.2
success_threshold = 3
"#,
    );
    // Every snapshot: ready exactly when three successes have been recorded.
    v.wait_for(T, "the container to become ready", |v| {
        let c = v.container("gate", "c");
        let successes = recent(&c, "readiness")
            .iter()
            .filter(|r| r["success"] == true)
            .count();
        let ready = c["ready"] == true;
        assert_eq!(ready, successes >= 3, "{successes} successes: {c}");
        ready
    });
    let c = v.container("gate", "c");
    assert_eq!(probe(&c, "readiness")["result"], "success");
}

/// The fewest descriptors `pid` holds over half a second of samples: a probe attempt in
/// flight holds a few for a moment (pipes, pidfd, cgroup), a leak holds them for good, so the
/// minimum separates the two without depending on when a sample happens to land.
fn open_fds(pid: u32) -> usize {
    (0..10)
        .map(|i| {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| d.count())
                .unwrap_or(0)
        })
        .min()
        .unwrap_or(0)
}

#[test]
fn http_probe_against_a_silent_server_times_out_without_leaking_sockets() {
    // Listens (so connect succeeds through the backlog) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let v = Vigil::start(&format!(
        r#"
[pods.mute]
[[pods.mute.containers]]
name = "c"
command = ["sleep", "300"]
[pods.mute.containers.readiness_probe]
http_get = {{ port = {port}, path = "/healthz" }}
period_seconds = 0.1
timeout_seconds = 0.05
"#
    ));
    let vigil_pid = v.child.as_ref().expect("running").id();
    v.wait_for(T, "a first timed-out attempt", |v| {
        !recent(&v.container("mute", "c"), "readiness").is_empty()
    });
    let baseline = open_fds(vigil_pid);
    v.wait_for(T, "twenty more timed-out attempts", |v| {
        let c = v.container("mute", "c");
        let n = probe(&c, "readiness")["recent"]
            .as_array()
            .map_or(0, Vec::len);
        n >= 10 && {
            let u = find_event(v, "Unhealthy", "Readiness probe failed: probe timed out");
            u.is_some_and(|e| e["count"].as_u64() >= Some(20))
        }
    });
    for r in recent(&v.container("mute", "c"), "readiness") {
        assert_eq!(r["success"], false, "{r}");
        assert_eq!(r["message"], "probe timed out after 50ms", "{r}");
    }
    let after = open_fds(vigil_pid);
    assert!(
        after <= baseline + 2,
        "timed-out attempts close their sockets: {baseline} fds before, {after} after"
    );
    drop(silent);
}

#[test]
fn https_probe_stalling_in_the_handshake_times_out_naming_the_handshake_without_leaking() {
    // Accepts through the backlog, never answers the ClientHello.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let v = Vigil::start(&format!(
        r#"
[pods.mute]
[[pods.mute.containers]]
name = "c"
command = ["sleep", "300"]
[pods.mute.containers.readiness_probe]
http_get = {{ port = {port}, scheme = "HTTPS" }}
period_seconds = 0.1
timeout_seconds = 0.05
"#
    ));
    let vigil_pid = v.child.as_ref().expect("running").id();
    v.wait_for(T, "a first timed-out handshake", |v| {
        !recent(&v.container("mute", "c"), "readiness").is_empty()
    });
    let baseline = open_fds(vigil_pid);
    v.wait_for(T, "ten more timed-out handshakes", |v| {
        find_event(
            v,
            "Unhealthy",
            "Readiness probe failed: tls: handshake timed out",
        )
        .is_some_and(|e| e["count"].as_u64() >= Some(10))
    });
    for r in recent(&v.container("mute", "c"), "readiness") {
        assert_eq!(r["success"], false, "{r}");
        assert_eq!(r["message"], "tls: handshake timed out after 50ms", "{r}");
    }
    let after = open_fds(vigil_pid);
    assert!(
        after <= baseline + 2,
        "timed-out handshakes close their sockets: {baseline} fds before, {after} after"
    );
    drop(silent);
}

#[test]
fn https_readiness_probe_against_openssl_s_server_in_the_container_becomes_ready() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the openssl CLI is needed (tests/run-all.sh installs it)");
    assert!(made.status.success(), "{made:?}");
    let port = free_port();
    let v = Vigil::start(&format!(
        r#"
[pods.tls]
[[pods.tls.containers]]
name = "web"
command = ["openssl", "s_server", "-quiet", "-www", "-accept", "127.0.0.1:{port}", "-cert", "{}", "-key", "{}"]
[pods.tls.containers.readiness_probe]
http_get = {{ host = "localhost", port = {port}, scheme = "HTTPS" }}
period_seconds = 0.2
"#,
        cert.display(),
        key.display()
    ));
    v.wait_for(T, "the HTTPS readiness probe to pass", |v| {
        v.container("tls", "web")["ready"] == true
    });
    let ok = recent(&v.container("tls", "web"), "readiness");
    let last = ok.last().expect("a result");
    assert_eq!(last["success"], true, "{last}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("HTTP 200")),
        "{last}"
    );
}

#[test]
#[ignore = "needs python3 with grpcio and grpcio-health-checking (tests/run-all.sh installs them)"]
fn grpc_server_readiness_follows_the_health_service_status() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/servers/grpc_health_server.py"
    );
    // The server's port is ephemeral: start it here, then point vigil at it.
    let mut server = Command::new("python3")
        .arg(script)
        .arg("db=NOT_SERVING")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.as_mut().expect("stdout")),
        &mut line,
    )
    .expect("read port");
    let port: u16 = line
        .trim()
        .strip_prefix("PORT ")
        .unwrap_or_else(|| {
            panic!("server did not start: {line:?}; pip install grpcio grpcio-health-checking")
        })
        .parse()
        .expect("port");
    let v = Vigil::start(&format!(
        r#"
[pods.rpc]
[[pods.rpc.containers]]
name = "app"
command = ["sleep", "300"]
[pods.rpc.containers.readiness_probe]
grpc = {{ port = {port} }}
period_seconds = 0.2
[pods.rpc.containers.liveness_probe]
grpc = {{ port = {port}, service = "db" }}
period_seconds = 0.2
failure_threshold = 1000
"#
    ));
    v.wait_for(T, "the gRPC readiness probe to pass", |v| {
        v.container("rpc", "app")["ready"] == true
    });
    v.wait_for(T, "a NOT_SERVING liveness result", |v| {
        recent(&v.container("rpc", "app"), "liveness")
            .iter()
            .any(|r| r["message"] == "service unhealthy (responded with \"NOT_SERVING\")")
    });
    let _ = server.kill();
    let _ = server.wait();
}

// ---- Hostile probe and hook targets (issue 43): bounded by bytes and time, whoever the peer -

/// A pod that crash-loops every 0.1 s: its restarts show that the loop keeps turning.
const BYSTANDER: &str = r#"
[pods.bystander]
restart_policy = "Always"
backoff = { initial_seconds = 0.1, max_seconds = 0.1 }
[[pods.bystander.containers]]
name = "c"
command = ["sh", "-c", "exit 1"]
"#;

/// A loopback listener whose every connection is handed to `serve` on a thread of its own;
/// `serve` writes until the write fails (vigil hung up, or the test ended). Returns the port.
fn hostile_server(serve: fn(std::net::TcpStream)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve(conn));
        }
    });
    port
}

/// `HTTP/1.1 100 Continue\r\n\r\n` without end, after reading the request's first bytes.
fn endless_continue(mut conn: std::net::TcpStream) {
    use std::io::{Read, Write};
    let mut req = [0u8; 1024];
    let _ = conn.read(&mut req);
    let burst = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(1024);
    while conn.write_all(&burst).is_ok() {}
}

/// vigil's resident set in KiB (`VmRSS` of /proc/PID/status).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Samples vigil's RSS every 20 ms while alive, keeping the largest; above `kill_above_kib`
/// it kills vigil, so that a regression fails the test instead of taking the machine down.
struct RssWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl RssWatch {
    fn start(pid: u32, kill_above_kib: u64) -> RssWatch {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                let now = rss_kib(pid);
                peak = peak.max(now);
                if now > kill_above_kib {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        });
        RssWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// The largest RSS seen, in KiB.
    fn peak(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or(u64::MAX)
    }
}

/// While a hostile target is being probed: the bystander keeps restarting and root's
/// `vigil version` is answered within a few seconds.
fn assert_loop_keeps_turning(v: &Vigil) {
    let before = restarts(&v.container("bystander", "c"));
    let asked = std::time::Instant::now();
    let out = v.cli(&["version"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "vigil version: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        v.log()
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "vigil version took {:?}",
        asked.elapsed()
    );
    v.wait_for(T, "three more restarts of the bystander", |v| {
        restarts(&v.container("bystander", "c")) >= before + 3
    });
}

/// The pod `hostile` whose readiness probe (`timeout_seconds = 1`) is `action`, beside the
/// bystander.
fn hostile_probe_pods(action: &str) -> String {
    format!(
        r#"
[pods.hostile]
[[pods.hostile.containers]]
name = "c"
command = ["sleep", "300"]
[pods.hostile.containers.readiness_probe]
{action}
period_seconds = 1
timeout_seconds = 1
{BYSTANDER}"#
    )
}

/// Waits for a readiness result of pod `hostile` and returns it.
fn first_hostile_result(v: &Vigil) -> Value {
    v.wait_for(T, "a readiness result against the hostile target", |v| {
        !recent(&v.container("hostile", "c"), "readiness").is_empty()
    });
    recent(&v.container("hostile", "c"), "readiness")
        .first()
        .cloned()
        .unwrap_or(Value::Null)
}

/// Fails within the timeout, naming the cap: `duration_ms` well under a generous bound.
fn assert_failed_naming(result: &Value, message: &str) {
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["message"], message, "{result}");
    let took = result["duration_ms"].as_f64().unwrap_or(f64::MAX);
    assert!(took < 5000.0, "the attempt took {took} ms: {result}");
}

#[test]
fn http_probe_against_an_endless_100_continue_fails_and_the_loop_keeps_turning() {
    let port = hostile_server(endless_continue);
    let v = Vigil::start(&hostile_probe_pods(&format!(
        "http_get = {{ port = {port} }}"
    )));
    let result = first_hostile_result(&v);
    assert_failed_naming(
        &result,
        "HTTP probe failed: too many 1xx informational responses (more than 5)",
    );
    assert_loop_keeps_turning(&v);
}

#[test]
fn http_post_start_hook_against_an_endless_100_continue_fails_and_the_loop_keeps_turning() {
    let port = hostile_server(endless_continue);
    let v = Vigil::start(&format!(
        r#"
[pods.hooked]
restart_policy = "Never"
[[pods.hooked.containers]]
name = "c"
command = ["sleep", "300"]
lifecycle = {{ post_start = {{ http_get = {{ port = {port} }} }} }}
{BYSTANDER}"#
    ));
    v.wait_for(T, "the FailedPostStartHook event", |v| {
        find_event(
            v,
            "FailedPostStartHook",
            "HTTP probe failed: too many 1xx informational responses",
        )
        .is_some()
    });
    assert_loop_keeps_turning(&v);
}

/// A self-signed certificate and key from `openssl req -x509 -subj /CN=localhost`, as a user
/// makes one: basicConstraints CA:TRUE (OpenSSL's default) and no subject alternative name.
fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the openssl CLI is needed (tests/run-all.sh installs it)");
    assert!(made.status.success(), "{made:?}");
    (cert, key)
}

/// A python3 TLS server with `cert`: each connection reads the request and gets `endless`
/// (`continue`: 100 Continue without end) or a plain `200` (`ok`). Killed on drop.
struct TlsServer {
    child: std::process::Child,
    port: u16,
}

impl TlsServer {
    fn start(cert: &Path, key: &Path, mode: &str) -> TlsServer {
        const SCRIPT: &str = r#"
import socket, ssl, sys, threading
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
mode = sys.argv[3]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print("PORT", s.getsockname()[1], flush=True)
def serve(c):
    try:
        t = ctx.wrap_socket(c, server_side=True)
        t.recv(4096)
        if mode == "continue":
            burst = b"HTTP/1.1 100 Continue\r\n\r\n" * 512
            while True:
                t.sendall(burst)
        t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        t.close()
    except Exception:
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
        require_python();
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(SCRIPT)
            .arg(cert)
            .arg(key)
            .arg(mode)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        let read = std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().expect("stdout")),
            &mut line,
        );
        let port = read
            .ok()
            .and_then(|_| line.trim().strip_prefix("PORT ")?.parse().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the TLS test server did not start: {line:?}");
        };
        TlsServer { child, port }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn https_probe_against_an_endless_100_continue_fails_and_the_loop_keeps_turning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(dir.path());
    let server = TlsServer::start(&cert, &key, "continue");
    let v = Vigil::start(&hostile_probe_pods(&format!(
        "http_get = {{ port = {}, scheme = \"HTTPS\" }}",
        server.port
    )));
    let result = first_hostile_result(&v);
    assert_failed_naming(
        &result,
        "HTTP probe failed: too many 1xx informational responses (more than 5)",
    );
    assert_loop_keeps_turning(&v);
}

/// HTTP/2 frames for the hostile gRPC servers.
mod h2_frames {
    pub const HEADERS: u8 = 0x1;
    pub const PING: u8 = 0x6;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const END_HEADERS: u8 = 0x4;

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }
}

/// PING frames without end, never reading what vigil sends (its acknowledgements).
fn ping_flood(mut conn: std::net::TcpStream) {
    use std::io::Write;
    let burst = h2_frames::frame(h2_frames::PING, 0, 0, b"pingpong").repeat(4096);
    while conn.write_all(&burst).is_ok() {}
}

/// One HEADERS block (stream 1, no END_STREAM) adding a 4000-byte entry to the HPACK
/// dynamic table, then blocks of 15 one-byte references to it without end, never reading:
/// each block decodes to 60 KB, under the cap of one block; together without bound.
fn hpack_flood(mut conn: std::net::TcpStream) {
    use h2_frames::{END_HEADERS, HEADERS, frame};
    use std::io::Write;
    // Literal with incremental indexing, new name "x", value of 4000 bytes (RFC 7541 §6.2.1;
    // 4000 = 127 + 3873, the integer's continuation bytes 0xa1 0x1e).
    let mut first = vec![0x40, 1, b'x', 0x7f, 0xa1, 0x1e];
    first.extend(std::iter::repeat_n(b'v', 4000));
    if conn
        .write_all(&frame(HEADERS, END_HEADERS, 1, &first))
        .is_err()
    {
        return;
    }
    let block = frame(HEADERS, END_HEADERS, 1, &[0x80 | 62; 15]);
    let burst = block.repeat(4096);
    while conn.write_all(&burst).is_ok() {}
}

/// WINDOW_UPDATE frames without end: nothing that decides the check, so only the timeout
/// ends the attempt.
fn window_update_stream(mut conn: std::net::TcpStream) {
    use std::io::Write;
    let burst = h2_frames::frame(h2_frames::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]).repeat(4096);
    while conn.write_all(&burst).is_ok() {}
}

/// A gRPC readiness probe against `serve`: the attempt fails with `message`, vigil's RSS
/// stays under 100 MiB throughout (it is killed above 512 MiB) and the loop keeps turning.
fn check_grpc_flood(serve: fn(std::net::TcpStream), message: &str) {
    let port = hostile_server(serve);
    let v = Vigil::start(&hostile_probe_pods(&format!("grpc = {{ port = {port} }}")));
    let pid = v.child.as_ref().expect("running").id();
    let watch = RssWatch::start(pid, 512 * 1024);
    let result = first_hostile_result(&v);
    assert_failed_naming(&result, message);
    assert_loop_keeps_turning(&v);
    // A few more attempts against the flood.
    v.wait_for(T, "three more attempts", |v| {
        recent(&v.container("hostile", "c"), "readiness").len() >= 4
    });
    let peak = watch.peak();
    assert!(peak < 100 * 1024, "vigil's RSS reached {peak} KiB");
}

#[test]
fn grpc_probe_against_a_ping_flood_that_never_reads_fails_and_memory_stays_bounded() {
    check_grpc_flood(
        ping_flood,
        "gRPC probe failed: server sent more than 256 SETTINGS and PING frames (each needs an \
         acknowledgement)",
    );
}

#[test]
fn grpc_probe_against_an_hpack_header_flood_fails_and_memory_stays_bounded() {
    check_grpc_flood(
        hpack_flood,
        "gRPC probe failed: response headers too large (64 KiB decoded in all)",
    );
}

#[test]
fn grpc_probe_against_a_peer_that_never_stops_sending_times_out_at_its_timeout() {
    let port = hostile_server(window_update_stream);
    let v = Vigil::start(&hostile_probe_pods(&format!("grpc = {{ port = {port} }}")));
    let result = first_hostile_result(&v);
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["message"], "probe timed out after 1s", "{result}");
    let took = result["duration_ms"].as_f64().unwrap_or(f64::MAX);
    assert!((900.0..5000.0).contains(&took), "{took} ms: {result}");
    assert_loop_keeps_turning(&v);
}

#[test]
fn https_probe_trusting_the_servers_own_self_signed_certificate_becomes_ready() {
    // Issue 38.2: `tls.ca_file` holding the server's own `openssl req -x509` certificate
    // (CA:TRUE), as `curl --cacert` accepts it.
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(dir.path());
    let server = TlsServer::start(&cert, &key, "ok");
    let v = Vigil::start(&format!(
        r#"
[pods.tls]
[[pods.tls.containers]]
name = "c"
command = ["sleep", "300"]
[pods.tls.containers.readiness_probe]
http_get = {{ port = {}, scheme = "HTTPS", tls = {{ ca_file = "{}" }} }}
period_seconds = 0.2
"#,
        server.port,
        cert.display()
    ));
    v.wait_for_showing(
        T,
        "the HTTPS readiness probe with the pinned certificate to pass",
        |v| v.container("tls", "c")["ready"] == true,
        |v| format!("{:?}", recent(&v.container("tls", "c"), "readiness")),
    );
}

/// A self-signed X.509 v3 certificate for CN=localhost, CA:TRUE as `openssl req -x509` makes
/// it, valid from `start` to `end` (`YYYYMMDDHHMMSSZ`), made by `openssl ca -selfsign` (the
/// 3.0 CLI's way to set both dates), and its key.
fn dated_self_signed(dir: &Path, start: &str, end: &str) -> (PathBuf, PathBuf) {
    let run = |what: &mut Command| {
        let made = what
            .current_dir(dir)
            .output()
            .expect("the openssl CLI is needed (tests/run-all.sh installs it)");
        assert!(made.status.success(), "{made:?}");
    };
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect(name);
    write(
        "ca.cnf",
        "[ca]\ndefault_ca = own\n[own]\ndatabase = index.txt\nnew_certs_dir = .\n\
         serial = serial\ndefault_md = sha256\npolicy = any\nx509_extensions = ext\n\
         [any]\ncommonName = supplied\n[ext]\nbasicConstraints = critical,CA:TRUE\n",
    );
    write("index.txt", "");
    write("serial", "01\n");
    run(Command::new("openssl")
        .args(["req", "-new", "-newkey", "ec", "-pkeyopt"])
        .args([
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-keyout", "key.pem", "-out", "req.csr"]));
    run(Command::new("openssl")
        .args(["ca", "-batch", "-config", "ca.cnf", "-selfsign"])
        .args(["-keyfile", "key.pem", "-in", "req.csr", "-notext"])
        .args(["-startdate", start, "-enddate", end, "-out", "cert.pem"]));
    (dir.join("cert.pem"), dir.join("key.pem"))
}

#[test]
fn https_probe_pinning_an_expired_or_not_yet_valid_certificate_fails_naming_the_date() {
    // Issue 43: a pinned certificate's dates were never looked at.
    for (start, end, message) in [
        (
            "20190101000000Z",
            "20200101000000Z",
            "tls: pinned certificate expired (not valid after 2020-01-01T00:00:00Z)",
        ),
        (
            "20990101000000Z",
            "21000101000000Z",
            "tls: pinned certificate not yet valid (not valid before 2099-01-01T00:00:00Z)",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = dated_self_signed(dir.path(), start, end);
        let server = TlsServer::start(&cert, &key, "ok");
        let v = Vigil::start(&hostile_probe_pods(&format!(
            "http_get = {{ port = {}, scheme = \"HTTPS\", tls = {{ ca_file = \"{}\" }} }}",
            server.port,
            cert.display()
        )));
        let result = first_hostile_result(&v);
        assert_failed_naming(&result, message);
        assert_eq!(v.container("hostile", "c")["ready"], false);
    }
}

#[test]
fn https_probe_whose_ca_file_becomes_a_fifo_or_a_link_to_dev_zero_fails_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = self_signed(dir.path());
    let server = TlsServer::start(&cert, &key, "ok");
    let ca = dir.path().join("ca.pem");
    std::fs::copy(&cert, &ca).expect("copy the certificate");
    let v = Vigil::start(&hostile_probe_pods(&format!(
        "http_get = {{ port = {}, scheme = \"HTTPS\", tls = {{ ca_file = \"{}\" }} }}",
        server.port,
        ca.display()
    )));
    let pid = v.child.as_ref().expect("running").id();
    let watch = RssWatch::start(pid, 512 * 1024);
    first_hostile_result(&v);
    let wait_for_message = |message: &str| {
        v.wait_for(T, message, |v| {
            recent(&v.container("hostile", "c"), "readiness")
                .iter()
                .any(|r| r["message"] == message)
        });
    };

    // Swapped for a FIFO: opened without blocking, refused by its type.
    std::fs::remove_file(&ca).expect("remove ca.pem");
    nix::unistd::mkfifo(&ca, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("mkfifo");
    wait_for_message(&format!(
        "tls: ca_file {}: not a regular file (a FIFO)",
        ca.display()
    ));
    assert_loop_keeps_turning(&v);

    // Swapped for a link to /dev/zero: not followed (a device anyone may write).
    std::fs::remove_file(&ca).expect("remove the FIFO");
    std::os::unix::fs::symlink("/dev/zero", &ca).expect("symlink");
    wait_for_message(&format!(
        "tls: ca_file {}: a symbolic link on the path is followed only where root alone could \
         have made it, and /dev/zero is writable by others (owner uid 0, mode 0666)",
        ca.display()
    ));
    assert_loop_keeps_turning(&v);
    let peak = watch.peak();
    assert!(peak < 100 * 1024, "vigil's RSS reached {peak} KiB");
}
