//! Optional pods and profiles (docs/interface.md §4.2): which pods `vigil run` starts —
//! `autostart = false`, `profiles` with `--profile` or `$VIGIL_PROFILES`, `vigil run POD…` with
//! or without `--no-deps` — shown `Pending` with reason `NotStarted` until `vigil start`; a
//! reload and an upgrade keep the choice; `vigil check` reports it.

use std::ffi::OsStr;
use std::process::Command;
use std::time::Duration;

use crate::common::{BIN, Vigil, state_reason, write_config};

const T: Duration = Duration::from_secs(20);

fn pod(name: &str, extra: &str) -> String {
    format!(
        "[pods.{name}]\n{extra}\n[[pods.{name}.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"600\"]\n"
    )
}

/// `web` always; `debug` and `tools` under profile debug; `perf` under perf; `migrate` only
/// when asked for, after `db`.
fn stack() -> String {
    [
        pod("web", "depends_on = { db = \"started\" }"),
        pod("db", ""),
        pod("debug", "profiles = [\"debug\"]"),
        pod("tools", "profiles = [\"perf\", \"debug\"]"),
        pod("perf", "profiles = [\"perf\"]"),
        pod(
            "migrate",
            "autostart = false\ndepends_on = { db = \"started\" }",
        ),
    ]
    .concat()
}

fn start(extra: &[&str], env: Option<&str>) -> Vigil {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = write_config(dir.path(), &socket, "", &stack());
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "-c"])
        .arg(&config)
        .args(extra.iter().map(OsStr::new))
        .env("VIGIL_LOG", "debug")
        .env_remove("VIGIL_PROFILES")
        .stdin(std::process::Stdio::null());
    if let Some(profiles) = env {
        cmd.env("VIGIL_PROFILES", profiles);
    }
    Vigil::launch(cmd, dir, socket, config)
}

fn reason(v: &Vigil, pod: &str) -> String {
    state_reason(&v.container(pod, "c"))
}

/// Waits until exactly `running` run and the rest of `all` show `NotStarted`, `Pending`.
fn wait_choice(v: &Vigil, running: &[&str], waiting: &[&str]) {
    v.wait_for(
        T,
        &format!("{running:?} running, {waiting:?} not started"),
        |v| {
            running.iter().all(|p| reason(v, p) == "Running")
                && waiting
                    .iter()
                    .all(|p| reason(v, p) == "NotStarted" && v.pod(p)["phase"] == "Pending")
        },
    );
}

fn ok(v: &Vigil, args: &[&str]) -> String {
    let out = v.cli(args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "vigil {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn a_profile_starts_its_pods_the_rest_wait_not_started_and_a_reload_keeps_the_choice() {
    let v = start(&["--profile", "debug"], None);
    wait_choice(&v, &["web", "db", "debug", "tools"], &["perf", "migrate"]);
    let table = ok(&v, &["status"]);
    let perf = table.lines().find(|l| l.starts_with("perf ")).unwrap_or("");
    assert!(perf.contains("NotStarted"), "{table}");
    let waiting = &v.container("migrate", "c")["state"]["waiting"];
    assert!(
        waiting["message"]
            .as_str()
            .unwrap_or("")
            .contains("vigil start"),
        "{waiting}"
    );

    let web = v.container("web", "c")["pid"].clone();
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    std::thread::sleep(Duration::from_millis(300));
    wait_choice(&v, &["web", "db", "debug", "tools"], &["perf", "migrate"]);
    assert_eq!(
        v.container("web", "c")["pid"],
        web,
        "unchanged pods untouched"
    );

    // An operator start; a reload keeps it running.
    let said = ok(&v, &["start", "perf"]);
    assert!(said.contains("starting pod perf"), "{said}");
    v.wait_for(T, "perf running", |v| reason(v, "perf") == "Running");
    let perf_pid = v.container("perf", "c")["pid"].clone();
    let r = v.request(r#"{"id":2,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(v.container("perf", "c")["pid"], perf_pid);
    assert_eq!(reason(&v, "migrate"), "NotStarted");
}

#[test]
fn the_selection_from_the_environment_survives_an_upgrade_and_applies_to_pods_a_reload_adds() {
    let v = start(&[], Some("perf, nothing"));
    wait_choice(&v, &["web", "db", "perf", "tools"], &["debug", "migrate"]);
    assert!(
        v.log()
            .contains("profile \"nothing\" is active but no pod lists it"),
        "{}",
        v.log()
    );
    let said = ok(&v, &["upgrade"]);
    assert!(said.contains("upgraded"), "{said}");
    std::fs::write(
        &v.config,
        format!(
            "{}{}{}{}",
            crate::common::supervisor_header(&v.socket),
            stack(),
            pod("perf2", "profiles = [\"perf\"]"),
            pod("debug2", "profiles = [\"debug\"]"),
        ),
    )
    .expect("rewrite config");
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    wait_choice(
        &v,
        &["web", "db", "perf", "tools", "perf2"],
        &["debug", "migrate", "debug2"],
    );
}

#[test]
fn naming_pods_starts_them_and_their_dependencies_and_no_deps_only_them() {
    let v = start(&["migrate"], None);
    wait_choice(&v, &["migrate", "db"], &["web", "debug", "tools", "perf"]);
    drop(v);
    let v = start(&["web", "--no-deps"], None);
    wait_choice(&v, &["web"], &["db", "migrate", "debug", "tools", "perf"]);
    // Starting a pod starts what it depends on that was left out.
    let said = ok(&v, &["start", "migrate"]);
    assert!(said.contains("and pod db, which it depends on"), "{said}");
    v.wait_for(T, "db and migrate running", |v| {
        reason(v, "db") == "Running" && reason(v, "migrate") == "Running"
    });
}

#[test]
fn an_unknown_pod_named_at_run_is_refused_naming_the_pods() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = write_config(dir.path(), &socket, "", &stack());
    let out = Command::new(BIN)
        .args(["run", "-c"])
        .arg(&config)
        .arg("wbe")
        .output()
        .expect("run vigil");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no pod \"wbe\""), "{err}");
    assert!(err.contains("web"), "{err}");
    assert!(!socket.exists(), "nothing started");
}

#[test]
fn check_reports_which_pods_run_would_start_and_why_the_others_would_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = write_config(dir.path(), &socket, "", &stack());
    let out = Command::new(BIN)
        .args(["check", "--no-host", "-c"])
        .arg(&config)
        .args(["--profile", "perf", "--profile", "typo"])
        .env_remove("VIGIL_PROFILES")
        .output()
        .expect("run vigil check");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}{err}");
    assert!(
        text.contains("starts: db, perf (profile perf), tools (profile perf), web\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "not started: debug (profiles debug not active), migrate (autostart = false)\n"
        ),
        "{text}"
    );
    assert!(
        err.contains("warning: profile \"typo\" is active but no pod lists it"),
        "{err}"
    );
}
