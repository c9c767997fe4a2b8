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

fn names(v: &Vigil) -> Vec<String> {
    v.status()["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .map(|p| p["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn pid(v: &Vigil, pod: &str) -> u64 {
    let c = v.container(pod, "app");
    if c["state"]["running"].is_object() {
        c["pid"].as_u64().unwrap_or(0)
    } else {
        0
    }
}

#[test]
fn scale_starts_new_replicas_stops_the_highest_and_leaves_the_rest_and_a_reload_keeps_it() {
    let pods = r#"
[pods.web]
replicas = 2
termination_grace_period_seconds = 2
[[pods.web.containers]]
name = "app"
command = ["sleep", "600"]
"#;
    let v = Vigil::start(pods);
    v.wait_for(patient(T), "both replicas running", |v| {
        pid(v, "web-0") > 0 && pid(v, "web-1") > 0
    });
    let first = pid(&v, "web-0");
    let out = v.cli(&["scale", "web", "4"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "scaled pod web from 2 to 4 replicas: starting web-2, web-3\n"
    );
    v.wait_for(patient(T), "four replicas running", |v| {
        (0..4).all(|i| pid(v, &format!("web-{i}")) > 0)
    });
    let out = v.cli(&["scale", "web", "1"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "scaled pod web from 4 to 1 replicas: stopping web-1, web-2, web-3\n"
    );
    v.wait_for(patient(T), "one replica left", |v| names(v) == ["web-0"]);
    assert_eq!(pid(&v, "web-0"), first, "the replica kept was not touched");
    // A reload of the same file keeps the scale …
    let out = v.cli(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(names(&v), ["web-0"]);
    // … and one that changes the file's count applies it.
    let text = std::fs::read_to_string(&v.config).expect("config");
    std::fs::write(&v.config, text.replace("replicas = 2", "replicas = 3")).expect("write");
    let out = v.cli(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    v.wait_for(patient(T), "three replicas running", |v| {
        (0..3).all(|i| pid(v, &format!("web-{i}")) > 0)
    });
    assert_eq!(pid(&v, "web-0"), first);
    // Refusals: no such pod, a pod without replicas, a count out of range.
    let out = v.cli(&["scale", "nope", "2"]);
    assert!(!out.status.success());
    let out = v.cli(&["scale", "web", "0"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("replicas must be between 1 and 1000, got 0"),
        "{out:?}"
    );
}

/// `vigil restart web --rolling --wait` against a real supervisor (docs/behaviour.md §14.2):
/// the replicas are replaced one at a time, highest index first, each only after the one before
/// is Ready on its new run — so, sampled throughout, never more than one replica is not Ready —
/// and `--wait` returns once every replica runs anew, with the rollout's status line `Complete`.
#[test]
fn a_rolling_restart_replaces_one_ready_replica_at_a_time_and_wait_returns_when_done() {
    let pods = r#"
[pods.web]
replicas = 3
[[pods.web.containers]]
name = "app"
command = ["sleep", "600"]
[pods.web.containers.readiness_probe]
exec = { command = ["true"] }
initial_delay_seconds = 1
period_seconds = 1
"#;
    let v = Vigil::start(pods);
    let ready = |v: &Vigil, i: usize| {
        let pod = v.pod(&format!("web-{i}"));
        (pod["conditions"].as_array().into_iter().flatten())
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    v.wait_for(patient(T), "every replica Ready", |v| {
        (0..3).all(|i| ready(v, i))
    });
    let before: Vec<u64> = (0..3).map(|i| pid(&v, &format!("web-{i}"))).collect();
    // Sample the replicas from another thread while the CLI waits for the rollout.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let samples = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut samples: Vec<(usize, Vec<u64>)> = Vec::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let not_ready = (0..3).filter(|&i| !ready(&v, i)).count();
                let pids = (0..3).map(|i| pid(&v, &format!("web-{i}"))).collect();
                samples.push((not_ready, pids));
                std::thread::sleep(Duration::from_millis(20));
            }
            samples
        });
        let out = v.cli(&["restart", "web", "--rolling", "--wait", "--timeout", "120s"]);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            v.log()
        );
        assert!(stdout.contains("rolling restart of pod web"), "{stdout}");
        watcher.join().expect("watcher")
    });
    let after: Vec<u64> = (0..3).map(|i| pid(&v, &format!("web-{i}"))).collect();
    for i in 0..3 {
        assert_ne!(
            after[i], before[i],
            "web-{i} runs anew: {before:?} -> {after:?}"
        );
    }
    assert!(samples.len() > 10, "sampled the rollout: {}", samples.len());
    let worst = samples.iter().map(|s| s.0).max().unwrap_or(0);
    assert!(
        worst <= 1,
        "at most one replica not Ready at a time: {samples:?}"
    );
    // The order: the sample where each replica's pid first changed.
    let first_new = |i: usize| {
        samples
            .iter()
            .position(|(_, pids)| pids[i] != before[i])
            .unwrap_or(usize::MAX)
    };
    assert!(
        first_new(2) <= first_new(1) && first_new(1) <= first_new(0),
        "highest index first: web-2 at {}, web-1 at {}, web-0 at {}",
        first_new(2),
        first_new(1),
        first_new(0)
    );
    let status = String::from_utf8_lossy(&v.cli(&["status"]).stdout).into_owned();
    assert!(
        status.contains("rolling restart of pod web: Complete"),
        "{status}"
    );
}

/// `vigil stop web`, `start web` and `restart web` name the set: each acts on every replica
/// (and `--wait` waits for all of them); `vigil stop web-1` on that replica only
/// (docs/interface.md §1, docs/behaviour.md §14).
#[test]
fn stop_start_and_restart_of_the_set_act_on_every_replica_and_of_one_replica_on_it_alone() {
    let pods = r#"
[pods.web]
replicas = 3
termination_grace_period_seconds = 2
[[pods.web.containers]]
name = "app"
command = ["sleep", "600"]
"#;
    let v = Vigil::start(pods);
    let all = |v: &Vigil| {
        (0..3)
            .map(|i| pid(v, &format!("web-{i}")))
            .collect::<Vec<_>>()
    };
    v.wait_for(patient(T), "every replica running", |v| {
        all(v).iter().all(|&p| p > 0)
    });
    let first = all(&v);
    // One replica by its name.
    let out = v.cli(&["stop", "web-1", "--wait"]);
    assert!(out.status.success(), "{out:?}");
    let now = all(&v);
    assert_eq!((now[0], now[1], now[2]), (first[0], 0, first[2]), "{now:?}");
    // The set: every replica, and --wait returns once all are stopped.
    let out = v.cli(&["stop", "web", "--wait"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{out:?}");
    assert!(stdout.contains("stopping pod web-0"), "{stdout}");
    assert!(stdout.contains("stopping pod web-2"), "{stdout}");
    assert_eq!(all(&v), [0, 0, 0]);
    let out = v.cli(&["start", "web", "--wait"]);
    assert!(out.status.success(), "{out:?}");
    let started = all(&v);
    assert!(started.iter().all(|&p| p > 0), "{started:?}");
    // A restart of the set gives every replica a new run.
    let out = v.cli(&["restart", "web", "--wait"]);
    assert!(out.status.success(), "{out:?}");
    let restarted = all(&v);
    for i in 0..3 {
        assert!(
            restarted[i] > 0 && restarted[i] != started[i],
            "web-{i}: {started:?} -> {restarted:?}"
        );
    }
    // A name that is neither a pod nor a set is still refused.
    let out = v.cli(&["stop", "webb"]);
    assert!(!out.status.success(), "{out:?}");
}
