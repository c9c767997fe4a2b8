//! vigil's own log at info level is a journal of the lifecycle (docs/behaviour.md §5.5): what an
//! operator reads on stderr (or `journalctl -u vigil`), one line each, `pod/container` first.

use std::time::Duration;

use crate::common::*;

const T: Duration = Duration::from_secs(15);

fn lines_with<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

fn has(log: &str, parts: &[&str]) -> bool {
    log.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}

#[test]
fn info_log_journals_starts_exits_backoff_requests_kills_reload_and_shutdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let pods = r#"
[pods.crash]
backoff = { initial_seconds = 30, max_seconds = 30 }
[[pods.crash.containers]]
name = "c"
command = ["sh", "-c", "sleep 0.2; exit 3"]

[pods.stubborn]
[[pods.stubborn.containers]]
name = "app"
command = ["sh", "-c", "trap '' TERM; echo trap-set; while :; do sleep 0.1; done"]
termination_grace_period_seconds = 0.5

[pods.calm]
[[pods.calm.containers]]
name = "app"
command = ["sleep", "600"]
"#;
    std::fs::write(&config, format!("{}{pods}", supervisor_header(&socket))).expect("config");
    let mut v = Vigil::start_logging_at(dir, socket, config, &[], "info");

    // A crash: exit with its code, an immediate restart, then the back-off wait.
    v.wait_for(T, "the back-off line", |v| {
        has(&v.log(), &["crash/c: BackOff:", "(waiting 30s)"])
    });
    let log = v.log();
    assert!(
        has(&log, &["crash/c: Started:", "(pid "]),
        "a start with its pid:\n{log}"
    );
    assert!(
        has(
            &log,
            &["crash/c: Exited: Container c exited: Error, exit code 3"]
        ),
        "an exit with reason and code:\n{log}"
    );
    assert!(
        lines_with(&log, "crash/c: Exited:")
            .iter()
            .all(|l| l.contains(" WARN ")),
        "a failed exit is a warning:\n{log}"
    );

    // A stop over the socket, with the requester's uid; the SIGKILL at the end of the grace.
    // Stop only once the shell ignores SIGTERM, or the stop could beat the trap.
    v.wait_for(T, "the trap to be set", |v| {
        v.request(r#"{"cmd":"logs","pod":"stubborn"}"#)["result"]["log"]
            .as_str()
            .is_some_and(|l| l.contains("trap-set"))
    });
    let uid = nix::unistd::getuid().as_raw();
    let r = v.request(r#"{"cmd":"stop","pod":"stubborn"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "the SIGKILL line", |v| {
        has(
            &v.log(),
            &["stubborn/app: Killing: Container app did not stop within 500ms, sending SIGKILL"],
        )
    });
    v.wait_for(T, "the exit after SIGKILL", |v| {
        has(&v.log(), &["stubborn/app: Exited:", "signal 9"])
    });
    let log = v.log();
    assert!(
        has(
            &log,
            &[&format!(
                "stubborn: stop requested over the control socket by uid {uid} (pid "
            )]
        ),
        "{log}"
    );
    assert!(
        has(
            &log,
            &["stubborn/app: Killing: Stopping container app: stopped by request"]
        ),
        "{log}"
    );

    // A reload over the socket: requested, then its outcome.
    let r = v.request(r#"{"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "the reload outcome", |v| {
        has(&v.log(), &["control socket: reload: reloaded:"])
    });
    assert!(has(
        &v.log(),
        &[&format!(
            "reload requested over the control socket by uid {uid}"
        )]
    ));

    // Shutdown: progress naming what is still running, then the end.
    let _ = v.try_request(r#"{"cmd":"shutdown"}"#);
    let code = v.wait_exit(T);
    assert_eq!(code, 0);
    let log = v.log();
    assert!(
        has(&log, &["shutdown: waiting for", "calm/app"]),
        "shutdown progress names what runs:\n{log}"
    );
    assert!(
        has(&log, &["shutdown: every container has stopped"]),
        "{log}"
    );
    assert!(
        has(&log, &["calm/app: Exited: Container app exited: Stopped"]),
        "{log}"
    );
    assert!(
        !log.contains(" DEBUG "),
        "info level shows no debug lines:\n{log}"
    );
}
