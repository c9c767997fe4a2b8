//! Nothing a container controls stalls vigil's loop: a container whose cgroup is frozen while
//! exec probes and an exec hook start in it, vigil's own stderr left undrained, and an idle
//! vigil under a service manager. Each test watches a bystander (a crash-looping pod restarted
//! every 0.1 s) and the control socket while the fault lasts. docs/bad-input.md lists the cases.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{ScratchCgroup, Vigil, patient, start_with_cgroup_root, state_reason};

const T: Duration = Duration::from_secs(20);

/// A pod `crash` whose container exits at once, restarted after 0.1 s each time.
const CRASH_LOOP: &str = r#"
[pods.crash]
backoff = { initial_seconds = 0.1, max_seconds = 0.1 }
[[pods.crash.containers]]
name = "c"
command = ["sh", "-c", "exit 1"]
"#;

fn restarts(v: &Vigil) -> u64 {
    v.container("crash", "c")["restart_count"]
        .as_u64()
        .unwrap_or(0)
}

/// One status request on a fresh connection: how long it took (it must be answered).
fn status_round_trip(v: &Vigil) -> Duration {
    let t = Instant::now();
    let reply = v.try_request(r#"{"cmd":"status"}"#);
    let took = t.elapsed();
    assert!(
        reply.is_some(),
        "status not answered (after {took:?})\nvigil log:\n{}",
        v.log()
    );
    took
}

/// For `span`, every 100 ms: the socket answers within `bound` and the bystander's restart
/// count keeps growing (at least `min_restarts` in all).
fn bystander_keeps_going(v: &Vigil, span: Duration, bound: Duration, min_restarts: u64) {
    let start_count = restarts(v);
    let until = Instant::now() + span;
    let mut slowest = Duration::ZERO;
    while Instant::now() < until {
        slowest = slowest.max(status_round_trip(v));
        assert!(
            slowest < bound,
            "a status request took {slowest:?} (bound {bound:?})\nvigil log:\n{}",
            v.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let grown = restarts(v).saturating_sub(start_count);
    assert!(
        grown >= min_restarts,
        "the bystander restarted {grown} times in {span:?} (expected at least {min_restarts})\n\
         vigil log:\n{}",
        v.log()
    );
}

fn events_text(v: &Vigil) -> String {
    v.request(r#"{"cmd":"events"}"#).to_string()
}

/// The children of `pid` (zombies included: a child not reaped is still one).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn freeze(dir: &Path, on: bool) {
    std::fs::write(dir.join("cgroup.freeze"), if on { "1" } else { "0" })
        .unwrap_or_else(|e| panic!("cgroup.freeze of {}: {e}", dir.display()));
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn a_frozen_container_with_exec_probes_and_a_hook_stalls_neither_the_socket_nor_other_pods() {
    // Outcome: while `icy`'s cgroup is frozen, its exec probes' children cannot reach execve;
    // each attempt fails at its timeout with a message saying so (not ready), its child is
    // killed, and meanwhile the control socket answers and the crash-looping bystander is
    // restarted as usual. After the thaw the probes pass again. Frozen again, a stop runs the
    // pre_stop exec hook, which fails the same way at the grace period's end
    // (FailedPreStopHook), and the container is killed. Nothing is left: no cgroup, no child.
    let cg = ScratchCgroup::new();
    let pods = format!(
        r#"
[pods.icy]
termination_grace_period_seconds = 2
[[pods.icy.containers]]
name = "c"
command = ["sleep", "600"]
[pods.icy.containers.readiness_probe]
exec = {{ command = ["true"] }}
period_seconds = 0.5
timeout_seconds = 1
[pods.icy.containers.liveness_probe]
exec = {{ command = ["true"] }}
period_seconds = 0.5
timeout_seconds = 1
failure_threshold = 1000
[pods.icy.containers.lifecycle]
pre_stop = {{ exec = {{ command = ["true"] }} }}
{CRASH_LOOP}"#
    );
    let v = start_with_cgroup_root(&cg, &pods);
    let vigil_pid = v.child.as_ref().expect("running").id();
    v.wait_for(T, "icy ready", |v| v.container("icy", "c")["ready"] == true);
    let dir = PathBuf::from(
        v.container("icy", "c")["cgroup"]
            .as_str()
            .expect("cgroup path in status"),
    );

    freeze(&dir, true);
    // Unfrozen, a request takes milliseconds; the bound only has to tell an answer from a
    // loop stuck in a child's exec (the issue: no answer until the thaw).
    let bound = patient(Duration::from_secs(1));
    bystander_keeps_going(&v, Duration::from_secs(4), bound, 3);
    v.wait_for(T, "readiness failing for the frozen exec", |v| {
        let e = events_text(v);
        e.contains("Readiness probe failed") && e.contains("has not reached execve")
    });
    v.wait_for(T, "icy not ready", |v| {
        v.container("icy", "c")["ready"] == false
    });
    bystander_keeps_going(&v, Duration::from_secs(2), bound, 3);
    assert_eq!(
        state_reason(&v.container("icy", "c")),
        "Running",
        "liveness (failure_threshold 1000) has not killed it"
    );

    freeze(&dir, false);
    v.wait_for(T, "icy ready again after the thaw", |v| {
        v.container("icy", "c")["ready"] == true
    });

    freeze(&dir, true);
    let stop = v.request(r#"{"cmd":"stop","pod":"icy"}"#);
    assert_eq!(stop["ok"], true, "{stop}");
    bystander_keeps_going(&v, Duration::from_secs(2), bound, 3);
    v.wait_for(T, "the pre_stop hook failing for the frozen exec", |v| {
        let e = events_text(v);
        e.contains("FailedPreStopHook") && e.contains("has not reached execve")
    });
    v.wait_for(T, "icy stopped", |v| {
        v.container("icy", "c")["state"]["terminated"]["reason"] == "Stopped"
    });
    v.wait_for(T, "icy's cgroup removed (its probe cgroups first)", |_| {
        !dir.exists()
    });

    let stop = v.request(r#"{"cmd":"stop","pod":"crash"}"#);
    assert_eq!(stop["ok"], true, "{stop}");
    v.wait_for_showing(
        T,
        "every child of vigil reaped",
        |_| children_of(vigil_pid).is_empty(),
        |_| format!("children: {:?}", children_of(vigil_pid)),
    );
    assert_eq!(v.shutdown(), 0);
    assert!(
        cg.container_dirs().is_empty(),
        "left behind: {:?}",
        cg.container_dirs()
    );
}
