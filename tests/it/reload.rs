//! `vigil reload` / SIGHUP: an invalid file changes nothing; changed pods restart, new ones
//! start, removed ones stop, unchanged ones are untouched.

use std::time::Duration;

use crate::common::{Vigil, metric, state_reason, supervisor_header};

const T: Duration = Duration::from_secs(15);

fn pod(name: &str, cmd: &str) -> String {
    format!(
        "[pods.{name}]\nbackoff = {{ initial_seconds = 0.1, max_seconds = 0.2 }}\n[[pods.{name}.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"{cmd}\"]\n"
    )
}

#[test]
fn reload_restarts_changed_starts_new_stops_removed_and_keeps_unchanged() {
    let v = Vigil::start(&format!(
        "{}{}{}",
        pod("keep", "exec sleep 60"),
        pod("change", "exec sleep 60"),
        pod("remove", "exec sleep 60")
    ));
    v.wait_for(T, "all running", |v| {
        ["keep", "change", "remove"]
            .iter()
            .all(|p| state_reason(&v.container(p, "c")) == "Running")
    });
    let keep_pid = v.container("keep", "c")["pid"].clone();
    let change_pid = v.container("change", "c")["pid"].clone();
    std::fs::write(
        &v.config,
        format!(
            "{}{}{}{}",
            supervisor_header(&v.socket),
            pod("keep", "exec sleep 60"),
            pod("change", "exec sleep 61"),
            pod("added", "exec sleep 60")
        ),
    )
    .expect("rewrite config");
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "changed and added running, removed gone", |v| {
        state_reason(&v.container("change", "c")) == "Running"
            && v.container("change", "c")["pid"] != change_pid
            && state_reason(&v.container("added", "c")) == "Running"
            && v.pod("remove").is_null()
    });
    assert_eq!(
        v.container("keep", "c")["pid"],
        keep_pid,
        "unchanged pod untouched"
    );
}

#[test]
fn invalid_reload_changes_nothing_and_reports_the_error() {
    let v = Vigil::start(&pod("keep", "exec sleep 60"));
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("keep", "c")) == "Running"
    });
    let pid = v.container("keep", "c")["pid"].clone();
    std::fs::write(
        &v.config,
        format!(
            "{}[pods.keep]\nrestart_policy = \"Sometimes\"\n",
            supervisor_header(&v.socket)
        ),
    )
    .expect("rewrite");
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"]["kind"], "invalid_config");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("restart_policy"), "{msg}");
    assert!(
        msg.contains(&v.config.display().to_string()),
        "names the file: {msg}"
    );
    assert_eq!(v.container("keep", "c")["pid"], pid);
    // The alert's figures: the refusal shows, the last good load is the start.
    assert_eq!(metric(&v, "vigil_config_last_reload_successful"), 0.0);
    let loaded = metric(&v, "vigil_config_last_reload_success_timestamp_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(loaded > now - 600.0 && loaded <= now, "{loaded} vs {now}");
    std::fs::write(
        &v.config,
        format!(
            "{}{}",
            supervisor_header(&v.socket),
            pod("keep", "exec sleep 60")
        ),
    )
    .expect("rewrite");
    let r = v.request(r#"{"id":2,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(metric(&v, "vigil_config_last_reload_successful"), 1.0);
    assert!(metric(&v, "vigil_config_last_reload_success_timestamp_seconds") >= loaded);
}

/// The back-off delay in a CrashLoopBackOff message (`back-off 800ms restarting failed
/// container=c pod=crash`), in seconds; `None` when the container is not in back-off.
fn backoff_delay(c: &serde_json::Value) -> Option<f64> {
    let msg = c["state"]["waiting"]["message"].as_str()?;
    let word = msg.strip_prefix("back-off ")?.split(' ').next()?;
    if let Some(ms) = word.strip_suffix("ms") {
        return ms.parse::<f64>().ok().map(|v| v / 1000.0);
    }
    word.strip_suffix('s')?.parse().ok()
}

#[test]
fn reload_during_backoff_keeps_the_crash_loop_history() {
    // Doubling from 0.2 s: a history kept after the reload shows in the next delay, which is
    // at least twice the last one; a reset history would start again at 0.2 s.
    let crash = "[pods.crash]\nbackoff = { initial_seconds = 0.2, max_seconds = 60 }\n\
                 [[pods.crash.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"exit 1\"]\n";
    let v = Vigil::start(&format!("{crash}{}", pod("other", "exec sleep 60")));
    let mut last = 0.0;
    v.wait_for(T, "three restarts, then in back-off", |v| {
        let c = v.container("crash", "c");
        match backoff_delay(&c) {
            Some(d) if c["restart_count"].as_u64().unwrap_or(0) >= 3 => {
                last = d;
                true
            }
            _ => false,
        }
    });
    assert!(last >= 0.8, "the delay doubled three times: {last}");
    let before = v.container("crash", "c")["restart_count"]
        .as_u64()
        .unwrap_or(0);
    std::fs::write(
        &v.config,
        format!(
            "{}{crash}{}",
            supervisor_header(&v.socket),
            pod("other", "exec sleep 62")
        ),
    )
    .expect("rewrite");
    assert_eq!(v.request(r#"{"cmd":"reload"}"#)["ok"], true);
    let mut next = 0.0;
    v.wait_for(
        Duration::from_secs(30),
        "the next back-off after the reload",
        |v| {
            let c = v.container("crash", "c");
            match backoff_delay(&c) {
                Some(d) if c["restart_count"].as_u64().unwrap_or(0) > before => {
                    next = d;
                    true
                }
                _ => false,
            }
        },
    );
    assert!(
        next >= 2.0 * last - 0.01,
        "the back-off went on doubling ({last}s, then {next}s), not reset by the reload"
    );
}

#[test]
fn reload_that_only_changes_a_probe_restarts_that_pod_with_the_new_probe() {
    let with_probe = |period: &str| {
        format!(
            "{}[pods.web.containers.readiness_probe]\nexec = {{ command = [\"true\"] }}\nperiod_seconds = {period}\n",
            pod("web", "exec sleep 60")
        )
    };
    let v = Vigil::start(&format!(
        "{}{}",
        with_probe("0.2"),
        pod("other", "exec sleep 60")
    ));
    v.wait_for(T, "web ready", |v| v.container("web", "c")["ready"] == true);
    let web_pid = v.container("web", "c")["pid"].clone();
    let other_pid = v.container("other", "c")["pid"].clone();
    std::fs::write(
        &v.config,
        format!(
            "{}{}{}",
            supervisor_header(&v.socket),
            with_probe("0.3"),
            pod("other", "exec sleep 60")
        ),
    )
    .expect("rewrite");
    let r = v.request(r#"{"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "web restarted with the new probe and ready again", |v| {
        let c = v.container("web", "c");
        c["ready"] == true && c["pid"] != web_pid
    });
    assert_eq!(
        v.container("other", "c")["pid"],
        other_pid,
        "other pod untouched"
    );
    let d = v.request(r#"{"cmd":"describe","pod":"web"}"#);
    let text = d["result"].to_string();
    assert!(
        text.contains(r#""period_seconds":0.3"#),
        "new probe in effect: {text}"
    );
}

/// A reload reads the drop-ins and the `.env` again: one that breaks a key is refused, named
/// and located in the drop-in, and changes nothing; once fixed, the pod it adds starts with
/// the variable the new `.env` gives.
#[test]
fn reload_reads_drop_ins_and_dot_env_again_and_locates_a_broken_drop_in() {
    let v = Vigil::start(&pod("keep", "exec sleep 60"));
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("keep", "c")) == "Running"
    });
    let pid = v.container("keep", "c")["pid"].clone();
    let mut d = v.config.clone().into_os_string();
    d.push(".d");
    let d = std::path::PathBuf::from(d);
    std::fs::create_dir_all(&d).expect("mkdir .d");
    let env = v.config.parent().expect("dir").join(".env");
    std::fs::write(&env, "NAP=61\n").expect("write .env");
    let drop_in = d.join("10-added.toml");
    std::fs::write(
        &drop_in,
        format!(
            "{}restart_policy = \"Sometimes\"\n",
            pod("added", "exec sleep ${NAP}")
        ),
    )
    .expect("write drop-in");
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["error"]["kind"], "invalid_config", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains(&format!(
            "{}:6:18: pods.added.containers[0].restart_policy",
            drop_in.display()
        )),
        "{msg}"
    );
    assert!(v.pod("added").is_null());
    std::fs::write(&drop_in, pod("added", "exec sleep ${NAP}")).expect("rewrite drop-in");
    let r = v.request(r#"{"id":2,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "added running", |v| {
        state_reason(&v.container("added", "c")) == "Running"
    });
    let describe = String::from_utf8_lossy(&v.cli(&["describe", "added"]).stdout).into_owned();
    assert!(describe.contains("exec sleep 61"), "{describe}");
    assert_eq!(
        v.container("keep", "c")["pid"],
        pid,
        "unchanged pod untouched"
    );
}
