//! The typed wire seen from outside: what a non-admin peer may see, and the CLI reading real
//! replies.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::common::{BIN, Vigil, state_reason};

const T: Duration = Duration::from_secs(15);

const WITH_SECRET: &str = r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sh", "-c", "echo started; exec sleep 60"]
env = { DB_PASSWORD = "hunter2", EMPTY = "" }
"#;

/// Runs the CLI as uid/gid 65534 with no supplementary groups.
fn as_nobody(socket: &Path, args: &[&str]) -> Output {
    Command::new("setpriv")
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
        .arg(socket)
        .output()
        .expect("setpriv")
}

fn stdout_ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

#[test]
#[ignore = "needs root"]
fn a_non_admin_sees_env_names_with_values_redacted_and_an_admin_sees_values() {
    let v = Vigil::start_shared("", WITH_SECRET);
    let socket = v.socket.clone();
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "app")) == "Running"
    });

    let json = stdout_ok(&as_nobody(&socket, &["status", "-o", "json"]));
    assert!(!json.contains("hunter2"), "{json}");
    let status: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        status["pods"][0]["containers"][0]["spec"]["env"],
        serde_json::json!({"DB_PASSWORD": "***", "EMPTY": "***"})
    );
    let describe = stdout_ok(&as_nobody(&socket, &["describe", "web"]));
    assert!(!describe.contains("hunter2"), "{describe}");
    assert!(describe.contains("DB_PASSWORD:  ***"), "{describe}");
    let raw = stdout_ok(&as_nobody(&socket, &["describe", "web", "-o", "json"]));
    assert!(!raw.contains("hunter2"), "{raw}");

    // Root is an admin: it sees the values (an empty one as "").
    assert_eq!(
        v.container("web", "app")["spec"]["env"]["DB_PASSWORD"],
        "hunter2"
    );
    let describe = stdout_ok(&v.cli(&["describe", "web"]));
    assert!(describe.contains("DB_PASSWORD:  hunter2"), "{describe}");
    assert!(describe.contains("EMPTY:        \"\""), "{describe}");
}

#[test]
fn the_cli_reads_every_reply_of_a_real_supervisor() {
    let v = Vigil::start(WITH_SECRET);
    v.wait_for(T, "first output", |v| {
        v.request(r#"{"cmd":"logs","pod":"web"}"#)["result"]["log"]
            .as_str()
            .is_some_and(|l| l.contains("started"))
    });
    for args in [
        &["status"][..],
        &["status", "-o", "wide"],
        &["status", "-o", "json"],
        &["describe", "web"],
        &["describe", "web", "-o", "json"],
        &["events"],
        &["events", "-o", "json"],
        &["logs", "web"],
        &["version"],
    ] {
        let out = stdout_ok(&v.cli(args));
        assert!(!out.is_empty(), "{args:?} printed nothing");
    }
    let events = stdout_ok(&v.cli(&["events", "-o", "json"]));
    for line in events.lines() {
        let e: Value = serde_json::from_str(line).expect("one event object a line");
        assert!(e["reason"].is_string(), "{line}");
    }
}

#[test]
fn stop_start_and_restart_wait_for_the_state_and_a_second_stop_says_so() {
    let v = Vigil::start(WITH_SECRET);
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "app")) == "Running"
    });
    let out = stdout_ok(&v.cli(&["stop", "web", "--wait", "--timeout", "20s"]));
    assert!(out.contains("stop: done"), "{out}");
    // Returned only once the state was reached: no polling needed here.
    assert_eq!(state_reason(&v.container("web", "app")), "Stopped");
    let again = stdout_ok(&v.cli(&["stop", "web"]));
    assert_eq!(again, "pod web is already stopped\n");
    let again = stdout_ok(&v.cli(&["stop", "web/app"]));
    assert_eq!(again, "web/app is already stopped\n");

    let out = stdout_ok(&v.cli(&["start", "web", "--wait"]));
    assert!(out.contains("start: done"), "{out}");
    let app = v.container("web", "app");
    assert_eq!(state_reason(&app), "Running");
    assert_eq!(app["ready"], true);
    let pid = app["pid"].as_u64().expect("pid");

    let out = stdout_ok(&v.cli(&["restart", "web/app", "--wait", "--timeout", "20s"]));
    assert!(out.contains("restart: done"), "{out}");
    let app = v.container("web", "app");
    assert_eq!(state_reason(&app), "Running");
    assert_ne!(app["pid"].as_u64(), Some(pid), "a new run");
}

#[test]
fn waiting_for_a_container_that_cannot_start_fails_with_why() {
    let v = Vigil::start(
        r#"
[pods.bad]
[[pods.bad.containers]]
name = "app"
command = ["/nonexistent/vigil-test-binary"]
"#,
    );
    v.wait_for(T, "a first failure", |v| {
        v.container("bad", "app")["restart_count"].as_u64() >= Some(1)
    });
    let out = v.cli(&["restart", "bad", "--wait", "--timeout", "20s"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad/app") && (err.contains("StartError") || err.contains("CrashLoopBackOff")),
        "{err}"
    );
}

/// A request with `wait_ms` (what `--wait` sends) is answered by vigil once the state holds:
/// the reply carries the outcome, and meanwhile the loop answers everyone else.
#[test]
fn a_waiting_restart_is_answered_when_the_target_is_ready_and_other_requests_go_on_meanwhile() {
    use std::io::{BufRead as _, BufReader, ErrorKind, Write as _};
    use std::os::unix::net::UnixStream;

    let flags = tempfile::tempdir().expect("tempdir");
    let ready = flags.path().join("ready");
    let v = Vigil::start(&format!(
        r#"
[pods.db]
[[pods.db.containers]]
name = "postgres"
command = ["sleep", "600"]
readiness_probe = {{ exec = {{ command = ["test", "-e", "{}"] }}, period_seconds = 1 }}
"#,
        ready.display()
    ));
    v.wait_for(T, "db running", |v| {
        state_reason(&v.container("db", "postgres")) == "Running"
    });
    let mut waiting = UnixStream::connect(&v.socket).expect("connect");
    waiting
        .write_all(b"{\"id\":7,\"cmd\":\"restart\",\"pod\":\"db\",\"wait_ms\":60000}\n")
        .expect("send");
    let mut reader = BufReader::new(waiting.try_clone().expect("clone"));
    // Not ready, so no reply yet; other requests are answered meanwhile.
    waiting
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .expect("timeout");
    let mut line = String::new();
    let early = reader.read_line(&mut line);
    assert!(
        matches!(&early, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "{early:?} {line}"
    );
    v.wait_for(T, "the new run", |v| {
        state_reason(&v.container("db", "postgres")) == "Running"
    });
    assert_eq!(v.container("db", "postgres")["ready"], false);
    std::fs::write(&ready, "").expect("ready file");
    waiting
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    reader.read_line(&mut line).expect("the reply");
    let reply: Value = serde_json::from_str(&line).expect("a JSON reply");
    assert_eq!(reply["id"], 7, "{reply}");
    assert_eq!(
        reply["result"]["wait"],
        serde_json::json!({"outcome": "reached"}),
        "{reply}"
    );
    assert!(reply["result"]["message"].is_string(), "{reply}");
    // Answered only once it held.
    assert_eq!(v.container("db", "postgres")["ready"], true);

    // The same request with too short a wait: the reply says what it was still waiting for.
    std::fs::remove_file(&ready).expect("unready");
    let r = v.request(r#"{"cmd":"restart","pod":"db","wait_ms":1500}"#);
    assert_eq!(r["result"]["wait"]["outcome"], "timed_out", "{r}");
    let why = r["result"]["wait"]["why"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("timed out after 1.5s waiting for db/postgres to "),
        "{why}"
    );
}
