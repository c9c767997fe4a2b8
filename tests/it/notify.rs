//! Readiness from the process. sd_notify from containers (`notify = true`; docs/behaviour.md
//! §4.4) with real clients: systemd's `systemd-notify` (Debian package systemd), Python's
//! `sdnotify` (PyPI) and a real daemon, redis-server (Debian package redis-server), and
//! senders that must not be heard: another container's process, another uid. And
//! `ready_log_line` (§4.5): a program that only prints.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

const T: Duration = Duration::from_secs(20);

/// A container that waits for the file `go` in its working directory, then runs `then`.
fn gated(dir: &Path, pod: &str, then: &str, extra: &str) -> String {
    format!(
        r#"
[pods.{pod}]
[[pods.{pod}.containers]]
name = "app"
notify = true
working_dir = "{}"
command = ["sh", "-c", "while [ ! -e go-{pod} ]; do sleep 0.05; done; {then}"]
{extra}
"#,
        dir.display()
    )
}

fn notify_of(v: &Vigil, pod: &str) -> serde_json::Value {
    v.container(pod, "app")["notify"].clone()
}

/// The `NOTIFY_SOCKET` a running container was given (from its environment).
fn notify_socket_of(v: &Vigil, pod: &str) -> PathBuf {
    let pid = v.container(pod, "app")["pid"].as_u64().expect("a pid");
    let env = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"NOTIFY_SOCKET="))
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .expect("NOTIFY_SOCKET in the container's environment")
}

fn running_not_ready(v: &Vigil, pod: &str) {
    v.wait_for(T, "the container running", |v| {
        state_reason(&v.container(pod, "app")) == "Running"
    });
    let c = v.container(pod, "app");
    assert_eq!(c["ready"], false, "{c}");
    assert_eq!(c["notify"]["ready"], false, "{c}");
}

fn go(v: &Vigil, pod: &str) {
    std::fs::write(v.dir.path().join(format!("go-{pod}")), "").expect("go file");
}

fn systemd_notify_becomes_ready(v: &Vigil) {
    running_not_ready(v, "web");
    assert!(notify_socket_of(v, "web").exists());
    go(v, "web");
    v.wait_for(T, "READY=1 from systemd-notify", |v| {
        v.container("web", "app")["ready"] == true
    });
    let n = notify_of(v, "web");
    assert_eq!(n["status"], "serving", "{n}");
    let pod = v.pod("web");
    assert!(
        pod["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "{pod}"
    );
}

#[test]
fn systemd_notify_ready_makes_a_container_ready_without_cgroups() {
    require_program("systemd-notify", "--version", "systemd");
    let dir = tempfile::tempdir().unwrap();
    let pods = gated(
        dir.path(),
        "web",
        "systemd-notify --ready --status=serving; exec sleep 300",
        "",
    );
    let v = Vigil::start_in(dir, "", &pods);
    systemd_notify_becomes_ready(&v);
}

#[test]
#[ignore = "needs root"]
fn systemd_notify_ready_makes_a_container_ready_with_cgroups() {
    require_program("systemd-notify", "--version", "systemd");
    let cg = ScratchCgroup::new();
    let dir = tempfile::tempdir().unwrap();
    let pods = gated(
        dir.path(),
        "web",
        "systemd-notify --ready --status=serving; exec sleep 300",
        "",
    );
    let v = Vigil::start_in(dir, &cg.root_line(), &pods);
    systemd_notify_becomes_ready(&v);
}

#[test]
fn python_sdnotify_status_and_ready_show_in_status_and_describe() {
    // The python3 of the test's PATH, which tests/run-all.sh installed sdnotify for (the
    // container's PATH may find another).
    let probe = Command::new("python3")
        .args(["-c", "import sdnotify, sys; print(sys.executable)"])
        .output()
        .expect("python3");
    assert!(
        probe.status.success(),
        "this test needs Python's sdnotify (pip install sdnotify; tests/run-all.sh installs it)"
    );
    let python = String::from_utf8_lossy(&probe.stdout).trim().to_string();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("app.py");
    std::fs::write(
        &script,
        "import sdnotify, time, os\n\
         n = sdnotify.SystemdNotifier()\n\
         n.notify('STATUS=warming up')\n\
         while not os.path.exists('go-web'): time.sleep(0.05)\n\
         n.notify('READY=1\\nSTATUS=up: 3 workers')\n\
         time.sleep(300)\n",
    )
    .unwrap();
    let pods = format!(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
notify = true
working_dir = "{}"
command = ["{python}", "{}"]
"#,
        dir.path().display(),
        script.display()
    );
    let v = Vigil::start_in(dir, "", &pods);
    v.wait_for(T, "STATUS=warming up", |v| {
        notify_of(v, "web")["status"] == "warming up"
    });
    assert_eq!(v.container("web", "app")["ready"], false);
    go(&v, "web");
    v.wait_for(T, "READY=1 from sdnotify", |v| {
        v.container("web", "app")["ready"] == true
    });
    assert_eq!(notify_of(&v, "web")["status"], "up: 3 workers");
    let out = v.cli(&["describe", "web"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("up: 3 workers"), "{text}");
}

/// Sends `READY=1` to `socket` from a process of its own (python3), as `uid` when given.
fn send_ready(socket: &Path, uid: Option<u32>) -> std::process::Output {
    let script = format!(
        "import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); \
         s.sendto(b'READY=1', {:?}); print('sent')",
        socket.display().to_string()
    );
    let mut cmd = match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "python3",
                "-c",
                &script,
            ]);
            c
        }
        None => {
            let mut c = Command::new("python3");
            c.args(["-c", &script]);
            c
        }
    };
    cmd.output().expect("python3")
}

fn others_cannot_make_it_ready(v: &Vigil) {
    running_not_ready(v, "web");
    let socket = notify_socket_of(v, "web");
    // Another container, as root like the victim, in its own cgroup (or session): it names
    // the victim's socket and claims READY=1.
    go(v, "evil");
    v.wait_for(T, "the other container to have sent READY=1", |v| {
        v.dir.path().join("evil-sent").exists()
    });
    // Another uid, from outside any container.
    let out = send_ready(&socket, Some(65534));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("sent"),
        "uid 65534 could send to the socket: {out:?}"
    );
    // And vigil's own uid from outside the container (not in its cgroup or session).
    let out = send_ready(&socket, None);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sent"),
        "{out:?}"
    );
    std::thread::sleep(patient(Duration::from_millis(1500)));
    let c = v.container("web", "app");
    assert_eq!(
        c["ready"], false,
        "a datagram of someone else's counted: {c}"
    );
    assert_eq!(c["notify"]["ready"], false, "{c}");
    // The container itself still can.
    go(v, "web");
    v.wait_for(T, "READY=1 from the container itself", |v| {
        v.container("web", "app")["ready"] == true
    });
}

fn hostile_pods(dir: &Path) -> String {
    // The evil container finds the victim's socket (the only other file in the directory)
    // and sends READY=1 to it.
    let evil = format!(
        r#"
[pods.evil]
[[pods.evil.containers]]
name = "app"
working_dir = "{d}"
command = ["sh", "-c", "while [ ! -e go-evil ]; do sleep 0.05; done; for s in $(ls -d {d}/vigil.sock.notify/*); do python3 -c \"import socket,sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'READY=1', sys.argv[1])\" $s; done; touch evil-sent; exec sleep 300"]
"#,
        d = dir.display()
    );
    format!(
        "{}{evil}",
        gated(dir, "web", "systemd-notify --ready; exec sleep 300", "")
    )
}

#[test]
#[ignore = "needs root"]
fn another_containers_process_or_another_uid_cannot_make_a_container_ready() {
    require_root("a sender as uid 65534");
    require_program("setpriv", "--version", "util-linux");
    let cg = ScratchCgroup::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let pods = hostile_pods(dir.path());
    let v = Vigil::start_in(dir, &cg.root_line(), &pods);
    others_cannot_make_it_ready(&v);
}

#[test]
#[ignore = "needs root"]
fn without_cgroups_only_the_containers_session_is_heard() {
    require_root("a sender as uid 65534");
    require_program("setpriv", "--version", "util-linux");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let pods = hostile_pods(dir.path());
    let v = Vigil::start_in(dir, "", &pods);
    others_cannot_make_it_ready(&v);
}

#[test]
fn after_an_upgrade_the_container_is_still_ready_and_heard() {
    let probe = Command::new("python3")
        .args(["-c", "import sdnotify, sys; print(sys.executable)"])
        .output()
        .expect("python3");
    assert!(probe.status.success(), "this test needs Python's sdnotify");
    let python = String::from_utf8_lossy(&probe.stdout).trim().to_string();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("app.py");
    std::fs::write(
        &script,
        "import sdnotify, time, os\n\
         n = sdnotify.SystemdNotifier()\n\
         n.notify('READY=1\\nSTATUS=before')\n\
         while not os.path.exists('go-web'): time.sleep(0.05)\n\
         n.notify('STATUS=after the upgrade')\n\
         time.sleep(300)\n",
    )
    .unwrap();
    let pods = format!(
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\nnotify = true\n\
         working_dir = \"{}\"\ncommand = [\"{python}\", \"{}\"]\n",
        dir.path().display(),
        script.display()
    );
    let v = Vigil::start_in(dir, "", &pods);
    v.wait_for(T, "READY=1", |v| v.container("web", "app")["ready"] == true);
    let pid = v.container("web", "app")["pid"].clone();
    let out = v.cli(&["upgrade"]);
    assert!(out.status.success(), "{out:?}\n{}", v.log());
    let c = v.container("web", "app");
    assert_eq!(c["pid"], pid, "the same run");
    assert_eq!(c["ready"], true, "READY=1 carried over: {c}");
    assert_eq!(c["notify"]["status"], "before", "{c}");
    go(&v, "web");
    v.wait_for(T, "STATUS= sent after the upgrade", |v| {
        notify_of(v, "web")["status"] == "after the upgrade"
    });
}

/// `ready_log_line` (behaviour.md §4.5): a program that only prints is ready once its line
/// is printed whole, not at the line's first half, and the event says why.
#[test]
fn a_ready_log_line_container_is_ready_only_once_its_whole_line_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    let pods = format!(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
ready_log_line = '^listening on :[0-9]+$'
working_dir = "{}"
command = ["sh", "-c", "echo booting; echo 'listening on :soon' >&2; printf 'listening '; while [ ! -e go-web ]; do sleep 0.05; done; echo 'on :8080'; exec sleep 300"]
"#,
        dir.path().display()
    );
    let v = Vigil::start_in(dir, "", &pods);
    v.wait_for(T, "the first half of the line in the log", |v| {
        let out = v.cli(&["logs", "web"]);
        String::from_utf8_lossy(&out.stdout).contains("listening ")
    });
    let c = v.container("web", "app");
    assert_eq!(state_reason(&c), "Running", "{c}");
    assert_eq!(c["ready"], false, "half a line is not the line: {c}");
    go(&v, "web");
    v.wait_for(T, "the line to make it ready", |v| {
        v.container("web", "app")["ready"] == true
    });
    let out = v.cli(&["describe", "web"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("matching its ready_log_line"), "{text}");
}

/// A real Debian daemon that speaks sd_notify: redis-server (built with libsystemd) with
/// `--supervised systemd` sends `STATUS=Redis is loading...`, `STATUS=Ready to accept
/// connections` and `READY=1` once it serves. Gated by a file so that the container is seen
/// running and not ready before redis starts; after `READY=1` redis answers `PING` on its
/// socket, its `STATUS=` is in `describe`, and the `Ready` event quotes `READY=1`.
#[test]
#[ignore = "needs root"]
fn redis_server_supervised_by_systemd_protocol_is_ready_only_after_its_ready_1() {
    require_program("redis-server", "--version", "redis-server");
    let cg = ScratchCgroup::new();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("redis.sock");
    let then = format!(
        "exec redis-server --supervised systemd --daemonize no --port 0 --unixsocket {} \
         --save '' --appendonly no --dir {}",
        sock.display(),
        dir.path().display()
    );
    let pods = gated(dir.path(), "web", &then, "");
    let v = Vigil::start_in(dir, &cg.root_line(), &pods);
    running_not_ready(&v, "web");
    assert!(!sock.exists(), "redis has not started yet");
    go(&v, "web");
    v.wait_for(T, "READY=1 from redis-server", |v| {
        v.container("web", "app")["ready"] == true
    });
    assert_eq!(
        notify_of(&v, "web")["status"],
        "Ready to accept connections",
        "{}",
        v.container("web", "app")
    );
    // What made it ready is a redis that serves.
    let mut conn = std::os::unix::net::UnixStream::connect(&sock).expect("redis socket");
    conn.set_read_timeout(Some(T)).unwrap();
    std::io::Write::write_all(&mut conn, b"PING\r\n").unwrap();
    let mut answer = [0u8; 7];
    std::io::Read::read_exact(&mut conn, &mut answer).unwrap();
    assert_eq!(&answer, b"+PONG\r\n");
    let out = v.cli(&["describe", "web"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Ready to accept connections"), "{text}");
    assert!(text.contains("said it is ready (READY=1)"), "{text}");
}

/// `vigil upgrade` (behaviour.md §4.5): a run whose line matched stays ready, and a run that
/// has not printed its line yet is matched on by the new instance.
#[test]
fn after_an_upgrade_a_ready_log_line_run_stays_ready_and_one_not_ready_yet_is_still_matched() {
    let dir = tempfile::tempdir().unwrap();
    let pod = |name: &str, script: &str| {
        format!(
            r#"
[pods.{name}]
[[pods.{name}.containers]]
name = "app"
ready_log_line = '^ready$'
working_dir = "{}"
command = ["sh", "-c", "{script}"]
"#,
            dir.path().display()
        )
    };
    let pods = pod("early", "echo ready; exec sleep 300")
        + &pod(
            "web",
            "echo starting; while [ ! -e go-web ]; do sleep 0.05; done; echo ready; exec sleep 300",
        );
    let v = Vigil::start_in(dir, "", &pods);
    v.wait_for(T, "the early line", |v| {
        v.container("early", "app")["ready"] == true
    });
    running_not_ready_plain(&v, "web");
    let out = v.cli(&["upgrade"]);
    assert!(out.status.success(), "{out:?}\n{}", v.log());
    assert_eq!(v.container("early", "app")["ready"], true, "carried over");
    assert_eq!(v.container("web", "app")["ready"], false);
    go(&v, "web");
    v.wait_for(T, "the line printed after the upgrade", |v| {
        v.container("web", "app")["ready"] == true
    });
}

/// Running and not ready (a container without `notify`).
fn running_not_ready_plain(v: &Vigil, pod: &str) {
    v.wait_for(T, "the container running", |v| {
        state_reason(&v.container(pod, "app")) == "Running"
    });
    let c = v.container(pod, "app");
    assert_eq!(c["ready"], false, "{c}");
}

/// `watchdog_seconds`: a real sd_notify client (`systemd-notify`) that pings `WATCHDOG=1`
/// every 0.5 s for 10 s, past the 8 s period, then stops: killed as `WatchdogTimeout` only
/// after it stopped, restarted by its policy; `WATCHDOG_USEC` and `WATCHDOG_PID` (its own pid)
/// in its environment as sd_watchdog_enabled(3) reads them. Each run writes its own files
/// (`env1`, `quiet1`, …): the restarted run must not erase what the first one left.
#[test]
fn a_container_that_stops_sending_watchdog_pings_is_killed_as_watchdog_timeout_and_restarted() {
    require_program("systemd-notify", "--version", "systemd");
    let dir = tempfile::tempdir().unwrap();
    let pods = format!(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
notify = true
watchdog_seconds = 8
working_dir = "{}"
command = ["sh", "-c", "n=$(($(cat runs 2>/dev/null || echo 0) + 1)); echo $n > runs; echo \"$WATCHDOG_USEC $WATCHDOG_PID\" > env$n; systemd-notify --ready; i=0; while [ $i -lt 20 ]; do systemd-notify WATCHDOG=1; echo \"run $n ping $(date +%T.%N)\" >> log; sleep 0.5; i=$((i+1)); done; echo \"run $n quiet $(date +%T.%N)\" >> log; touch quiet$n; exec sleep 300"]
"#,
        dir.path().display()
    );
    let v = Vigil::start_in(dir, "", &pods);
    let mut first = serde_json::Value::Null;
    v.wait_for(T, "READY=1", |v| {
        first = v.container("web", "app");
        first["ready"] == true
    });
    let log = || std::fs::read_to_string(v.dir.path().join("log")).unwrap_or_default();
    assert_eq!(first["restart_count"], 0, "{first}\n{}\n{}", log(), v.log());
    let env = std::fs::read_to_string(v.dir.path().join("env1")).expect("env1 file");
    let f: Vec<&str> = env.split_whitespace().collect();
    assert_eq!(f.len(), 2, "{env:?}");
    assert_eq!(f[0], "8000000", "WATCHDOG_USEC: {env:?}");
    assert_eq!(
        f[1],
        first["pid"].to_string(),
        "WATCHDOG_PID is the main process's own pid: {env:?}"
    );
    v.wait_for(
        Duration::from_secs(60),
        "the watchdog kill and a restart",
        |v| v.container("web", "app")["restart_count"].as_u64() >= Some(1),
    );
    let events = v.request(r#"{"cmd":"events"}"#).to_string();
    assert!(
        v.dir.path().join("quiet1").exists(),
        "killed while it still pinged:\n{}\n{events}",
        log()
    );
    let c = v.container("web", "app");
    let last = &c["last_state"]["terminated"];
    assert_eq!(last["reason"], "WatchdogTimeout", "{c}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("no WATCHDOG=1 within 8s")),
        "{c}"
    );
    assert!(events.contains("WatchdogTimeout"), "{events}");
}

/// `start_timeout_seconds` with a real client (`systemd-notify`): a slow starter that sends
/// `EXTEND_TIMEOUT_USEC=` (8 s each) every second outlives its 3 s budget and becomes ready
/// after about 8 s, never stopped; one that never says `READY=1` is stopped at its budget's
/// end as `StartTimeout` and restarted.
#[test]
fn a_slow_starter_that_extends_its_timeout_outlives_start_timeout_seconds_and_one_that_does_not_is_stopped()
 {
    require_program("systemd-notify", "--version", "systemd");
    let pods = r#"
[pods.slow]
[[pods.slow.containers]]
name = "app"
notify = true
start_timeout_seconds = 3
command = ["sh", "-c", "i=0; while [ $i -lt 8 ]; do systemd-notify EXTEND_TIMEOUT_USEC=8000000; sleep 1; i=$((i+1)); done; systemd-notify --ready; exec sleep 300"]

[pods.hung]
[[pods.hung.containers]]
name = "app"
notify = true
start_timeout_seconds = 3
command = ["sleep", "300"]
"#;
    let v = Vigil::start(pods);
    v.wait_for(
        Duration::from_secs(60),
        "the slow starter ready and the hung one restarted",
        |v| {
            v.container("slow", "app")["ready"] == true
                && v.container("hung", "app")["restart_count"].as_u64() >= Some(1)
        },
    );
    let slow = v.container("slow", "app");
    assert_eq!(slow["restart_count"], 0, "never stopped: {slow}");
    let hung = v.container("hung", "app");
    let last = &hung["last_state"]["terminated"];
    assert_eq!(last["reason"], "StartTimeout", "{hung}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("no READY=1 within 3s")),
        "{hung}"
    );
    let events = v.request(r#"{"cmd":"events"}"#).to_string();
    assert!(events.contains("StartTimeout"), "{events}");
    assert!(
        !events.contains(r#""object":"slow/app","reason":"StartTimeout""#),
        "{events}"
    );
}
