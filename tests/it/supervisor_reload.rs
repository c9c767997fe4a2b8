//! Reload of `[supervisor]`: live keys are applied and named in the answer; restart-only keys
//! refuse the whole reload, naming the key, and nothing changes.

use std::time::Duration;

use crate::common::{
    Vigil, sh_pod as pod, state_reason, supervisor_header, supervisor_header_with,
};

const T: Duration = Duration::from_secs(15);

/// Starts vigil on `web` alone and waits until it runs.
fn start_web() -> Vigil {
    let v = Vigil::start(&pod("web", "exec sleep 60"));
    v.wait_for(T, "web running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
    v
}

/// Rewrites `v`'s config (`supervisor` lines set in `[supervisor]`, `pods`) and asks for a
/// reload, which must be refused; returns the refusal's message.
fn refused_reload(v: &Vigil, supervisor: &str, pods: &str) -> String {
    std::fs::write(
        &v.config,
        format!("{}{pods}", supervisor_header_with(&v.socket, supervisor)),
    )
    .unwrap();
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], false, "{r}");
    r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const TICKER: &str = "while true; do echo tick; sleep 0.1; done";

#[test]
fn a_reload_changing_restart_only_keys_is_refused_naming_them_and_changes_nothing() {
    let v = start_web();
    let other = v.dir.path().join("other.sock");
    let msg = refused_reload(
        &v,
        &format!("socket = \"{}\"\ncgroup_root = \"auto\"", other.display()),
        &format!(
            "{}{}",
            pod("web", "exec sleep 60"),
            pod("added", "exec sleep 60")
        ),
    );
    assert!(
        msg.contains("[supervisor] socket, cgroup_root changed: needs a restart"),
        "{msg}"
    );
    assert!(v.pod("added").is_null(), "nothing changed: {}", v.status());
    assert!(!other.exists(), "no socket at the new path");
}

#[test]
fn a_reload_applies_live_supervisor_keys_and_names_them() {
    let v = Vigil::start(&pod("talk", TICKER));
    v.wait_for(T, "talk running", |v| {
        state_reason(&v.container("talk", "c")) == "Running"
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !v.log().contains("talk/c | tick"),
        "log_forward = false forwards nothing"
    );
    let header = supervisor_header(&v.socket)
        .replace(
            "log_forward = false",
            "log_forward = true\nlog_buffer_bytes = 4096",
        )
        .replace(
            "shutdown_timeout_seconds = 10",
            "shutdown_timeout_seconds = 7",
        );
    std::fs::write(&v.config, format!("{header}{}", pod("talk", TICKER))).unwrap();
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(
            "[supervisor] log_buffer_bytes, log_forward, shutdown_timeout_seconds applied"
        ),
        "{msg}"
    );
    v.wait_for(T, "output forwarded after the reload", |v| {
        v.log().contains("talk/c | tick")
    });
    // The pod itself did not change: not restarted.
    assert_eq!(v.container("talk", "c")["restart_count"], 0);
}

/// A reload with another `sched_slice_microseconds` is applied to vigil at once and named; the
/// running container keeps the kernel's default slice.
#[test]
fn a_reload_changes_vigils_time_slice_at_once() {
    let v = start_web();
    let vigil_pid = u64::from(v.child.as_ref().expect("running").id());
    let web = v.container("web", "c")["pid"].as_u64().expect("pid");
    let (child_before, _) = crate::common::slice_and_nice(web);
    std::fs::write(
        &v.config,
        format!(
            "{}{}",
            supervisor_header_with(&v.socket, "sched_slice_microseconds = 3000"),
            pod("web", "exec sleep 60")
        ),
    )
    .unwrap();
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("[supervisor] sched_slice_microseconds applied"),
        "{msg}"
    );
    let (vigil_slice, _) = crate::common::slice_and_nice(vigil_pid);
    if crate::common::kernel_has_custom_slices() {
        assert_eq!(vigil_slice, 3_000_000, "{}", v.log());
    }
    assert_eq!(crate::common::slice_and_nice(web).0, child_before);
    assert_eq!(v.container("web", "c")["restart_count"], 0);
}

#[test]
fn a_reload_naming_an_unknown_socket_group_is_refused_before_anything_changes() {
    let v = start_web();
    let msg = refused_reload(
        &v,
        "socket_group = \"vigil-no-such-group\"",
        &format!(
            "{}{}",
            pod("web", "exec sleep 60"),
            pod("added", "exec sleep 60")
        ),
    );
    assert!(msg.contains("vigil-no-such-group"), "{msg}");
    assert!(v.pod("added").is_null(), "nothing changed: {}", v.status());
}

#[test]
fn without_cgroups_a_reload_that_adds_limits_is_refused_naming_them_and_changes_nothing() {
    let v = start_web();
    let msg = refused_reload(
        &v,
        "",
        &format!(
            "{}[pods.web.containers.resources]\nmemory_max = \"64Mi\"\n{}",
            pod("web", "exec sleep 61"),
            pod("added", "exec sleep 60")
        ),
    );
    assert!(
        msg.contains("web/c sets resources.memory_max"),
        "the refusal names the container and key: {msg}"
    );
    let status = v.request(r#"{"id":2,"cmd":"status"}"#);
    let pods = status["result"]["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 1, "no pod was added: {status}");
    assert_eq!(
        v.container("web", "c")["restart_count"],
        0,
        "web was not restarted with the new definition"
    );
}

#[test]
fn a_reload_shrinking_log_buffer_bytes_gives_the_next_run_a_smaller_ring() {
    // Outcome (docs/behaviour.md §7: `log_buffer_bytes` applies at the next run): the run going on
    // keeps its ring; the next run's ring holds at most the new size. A reload whose new size
    // were ignored would leave the next run with 64 KiB of its ~160 KB flood.
    const FLOOD: &str = "i=0; while [ $i -lt 3000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done; echo flood-done; exec sleep 60";
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let header = |size: &str| {
        supervisor_header(&socket).replace(
            "[supervisor]\n",
            &format!("[supervisor]\nlog_buffer_bytes = \"{size}\"\n"),
        )
    };
    std::fs::write(
        &config,
        format!("{}{}", header("64Ki"), pod("flood", FLOOD)),
    )
    .unwrap();
    let v = Vigil::start_with(dir, socket.clone(), config.clone());
    let held = |v: &Vigil| {
        let r = v.request(r#"{"cmd":"logs","pod":"flood"}"#);
        r["result"]["log"].as_str().unwrap_or_default().to_string()
    };
    v.wait_for(T, "first flood done", |v| held(v).contains("flood-done"));
    let first = held(&v).len();
    assert!(
        first > 32 * 1024 && first <= 64 * 1024,
        "a 64 KiB ring after a ~160 KB flood holds: {first}"
    );
    std::fs::write(&config, format!("{}{}", header("8Ki"), pod("flood", FLOOD))).unwrap();
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("log_buffer_bytes"), "{msg}");
    assert_eq!(held(&v).len(), first, "the run going on keeps its ring");
    let r = v.request(r#"{"cmd":"restart","pod":"flood","container":"c"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "second flood done", |v| {
        v.container("flood", "c")["restart_count"] == 1 && held(v).contains("flood-done")
    });
    let second = held(&v);
    assert!(
        second.len() <= 8 * 1024 && second.len() > 4 * 1024,
        "the next run's ring is the new 8 KiB: {} bytes held",
        second.len()
    );
    assert!(
        second.ends_with("flood-done\n"),
        "the newest output is kept"
    );
    // The previous run's output is what the old ring held (it is not cut by the reload).
    let r = v.request(r#"{"cmd":"logs","pod":"flood","previous":true}"#);
    let previous = r["result"]["log"].as_str().unwrap_or_default();
    assert!(previous.contains("flood-done"), "{r}");
}
