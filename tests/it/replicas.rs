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

/// The replicas of the load tests: an HTTP server on a port every replica binds with
/// `SO_REUSEPORT`. Its start takes half a second before it binds (an application loading
/// itself), then it writes `ready-N` (its readiness probe looks for that file: a probe of the
/// shared port would be answered by any replica) and serves one request per connection
/// (HTTP/1.0, no keep-alive), each answered with its replica name and pid. At SIGTERM it
/// removes `ready-N` (so its next run is not Ready before it listens) and shuts down
/// gracefully: it stops accepting, closes its listener (connections queued on it move to
/// another listener of the group: `net.ipv4.tcp_migrate_req = 1`), and finishes the requests
/// in flight before it exits.
const REUSEPORT_APP: &str = r#"
import http.server, os, signal, socket, sys, threading, time
port, ready = int(sys.argv[1]), sys.argv[2]
try:
    os.unlink(ready)
except FileNotFoundError:
    pass
time.sleep(0.5)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        body = ("%s %d\n" % (os.environ["VIGIL_POD_NAME"], os.getpid())).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    def server_bind(self):
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()
srv = S(("127.0.0.1", port), H)
def term(*a):
    os.unlink(ready)
    threading.Thread(target=srv.shutdown).start()
signal.signal(signal.SIGTERM, term)
open(ready, "w").close()
srv.serve_forever()
srv.server_close()
"#;

/// One request as a real client without retries makes it: connect, send a GET, read the
/// whole answer to the server's close. `Ok` with the answer's body (`web-2 PID`) for a
/// complete `200`; anything else — refused, reset, a close before the whole answer, a timeout
/// — is `Err`, a failed request.
fn one_request(port: u16) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let limit = Some(Duration::from_secs(10));
    s.set_read_timeout(limit).map_err(|e| e.to_string())?;
    s.set_write_timeout(limit).map_err(|e| e.to_string())?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("incomplete answer {answer:?}"))?;
    if !head.starts_with("HTTP/1.0 200") || !body.ends_with('\n') {
        return Err(format!("bad answer {answer:?}"));
    }
    Ok(body.trim_end().to_string())
}

/// What a restart of `web` under load gave: requests sent, those that failed (with why),
/// the pids that answered after it, and the replicas' pids before and after.
struct UnderLoad {
    sent: usize,
    failed: Vec<String>,
    answered_after: std::collections::BTreeSet<u64>,
    before: Vec<u64>,
    after: Vec<u64>,
    cli: std::process::Output,
    log: String,
}

/// Runs `vigil ARGS` (a restart of `web`, which waits) against three replicas of
/// [`REUSEPORT_APP`] while two client threads send requests one after another throughout — from
/// before the restart until every replica is Ready again after it. All of it in a network
/// namespace of its own (a thread of this test moved into it with unshare(2); vigil, its
/// containers and the clients inherit it) with `lo` up and `net.ipv4.tcp_migrate_req = 1`
/// (per namespace: the host's setting is not touched). Needs root.
fn restart_under_load(args: &'static [&'static str]) -> UnderLoad {
    crate::common::require_program("python3", "--version", "python3");
    let joined = std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
        let up = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .expect("ip");
        assert!(up.success(), "ip link set lo up");
        std::fs::write("/proc/sys/net/ipv4/tcp_migrate_req", "1").expect("tcp_migrate_req");
        assert_eq!(
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_migrate_req")
                .expect("tcp_migrate_req")
                .trim(),
            "1"
        );
        under_load_in_this_namespace(args)
    })
    .join();
    match joined {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn under_load_in_this_namespace(args: &[&str]) -> UnderLoad {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    const PORT: u16 = 8080;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = dir.path().join("app.py");
    std::fs::write(&app, REUSEPORT_APP).expect("app");
    let pods = format!(
        r#"
[pods.web]
replicas = 3
termination_grace_period_seconds = 10
[[pods.web.containers]]
name = "app"
command = ["python3", "{app}", "{PORT}", "{dir}/ready-${{replica}}"]
[pods.web.containers.readiness_probe]
exec = {{ command = ["test", "-e", "{dir}/ready-${{replica}}"] }}
period_seconds = 0.5
"#,
        app = app.display(),
        dir = dir.path().display()
    );
    let v = Vigil::start_in(dir, "", &pods);
    let ready = |v: &Vigil| {
        (0..3).all(|i| {
            let pod = v.pod(&format!("web-{i}"));
            (pod["conditions"].as_array().into_iter().flatten())
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    };
    v.wait_for(patient(T), "every replica Ready", ready);
    let pids = |v: &Vigil| {
        (0..3)
            .map(|i| pid(v, &format!("web-{i}")))
            .collect::<Vec<_>>()
    };
    let before = pids(&v);
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (stop, failed) = (Arc::clone(&stop), Arc::clone(&failed));
            std::thread::spawn(move || {
                let mut sent = 0;
                while !stop.load(Ordering::SeqCst) {
                    sent += 1;
                    if let Err(e) = one_request(PORT) {
                        failed.lock().expect("lock").push(e);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                sent
            })
        })
        .collect();
    // Load before the restart …
    std::thread::sleep(Duration::from_millis(500));
    let cli = v.cli(args);
    // … during it, until every replica is Ready again, and a little after.
    v.wait_for(patient(T), "every replica Ready after the restart", ready);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    let sent = clients.into_iter().map(|c| c.join().expect("client")).sum();
    let after = pids(&v);
    // Which processes serve now (the port's connections are spread by a hash of each one's
    // addresses: 300 of them reach every listener).
    let answered_after = (0..300)
        .filter_map(|_| one_request(PORT).ok())
        .filter_map(|body| body.split(' ').nth(1)?.parse().ok())
        .collect();
    let failed = std::mem::take(&mut *failed.lock().expect("lock"));
    UnderLoad {
        sent,
        failed,
        answered_after,
        before,
        after,
        cli,
        log: v.log(),
    }
}

/// Issue 40 point 2, end to end: three replicas of an HTTP server sharing a port with
/// `SO_REUSEPORT`, under continuous load from clients that send one request per connection
/// and never retry; `vigil restart web --rolling --wait` replaces every replica and **not one
/// request fails** — no refused or reset connection, no answer cut short (docs/behaviour.md
/// §14.2, "Without downtime"). What makes it hold: one replica at a time is stopped, and the
/// next only once the new one is Ready (listening: its probe is its own, not the shared
/// port's), so a listener is always there; each replica closes its listener only at SIGTERM
/// and finishes what it accepted; and connections the kernel had queued on the closing
/// listener move to another one (`net.ipv4.tcp_migrate_req = 1`: without it they are reset).
/// The same restart with every replica in one batch fails requests
/// (`…_all_replicas_at_once_fails_requests`): the test sees a broken rollout.
#[test]
#[ignore = "needs root"]
fn a_rolling_restart_under_http_load_fails_no_request_and_every_replica_runs_anew() {
    crate::common::require_root("a network namespace of its own");
    let r = restart_under_load(&["restart", "web", "--rolling", "--wait", "--timeout", "120s"]);
    assert!(
        r.cli.status.success(),
        "{}{}\n{}",
        String::from_utf8_lossy(&r.cli.stdout),
        String::from_utf8_lossy(&r.cli.stderr),
        r.log
    );
    assert!(r.sent > 200, "the load ran: {} requests", r.sent);
    assert!(
        r.failed.is_empty(),
        "{} of {} requests failed: {:?}\n{}",
        r.failed.len(),
        r.sent,
        r.failed,
        r.log
    );
    for i in 0..3 {
        assert!(
            r.after[i] > 0 && r.after[i] != r.before[i],
            "web-{i} runs anew: {:?} -> {:?}",
            r.before,
            r.after
        );
    }
    let new: std::collections::BTreeSet<u64> = r.after.iter().copied().collect();
    assert_eq!(
        r.answered_after, new,
        "the new replicas, and only they, serve"
    );
}

/// The control for the test above: the same load and namespace, but every replica down at
/// once — a rollout in one batch (`--max-unavailable 3`, what a rollout that ignored its batch
/// size would do), and a plain `vigil restart web` (every replica restarted together): while
/// no replica listens, connections are refused, so requests fail. A rollout that broke its
/// batching would fail the test above the same way.
#[test]
#[ignore = "needs root"]
fn the_same_restart_under_http_load_with_all_replicas_at_once_fails_requests() {
    crate::common::require_root("a network namespace of its own");
    let at_once: [&'static [&'static str]; 2] = [
        &[
            "restart",
            "web",
            "--rolling",
            "--max-unavailable",
            "3",
            "--wait",
            "--timeout",
            "120s",
        ],
        &["restart", "web", "--wait", "--timeout", "120s"],
    ];
    for args in at_once {
        let r = restart_under_load(args);
        assert!(r.cli.status.success(), "{args:?}: {:?}\n{}", r.cli, r.log);
        assert!(
            r.after.iter().zip(&r.before).all(|(a, b)| *a > 0 && a != b),
            "{args:?}: {:?} -> {:?}",
            r.before,
            r.after
        );
        assert!(
            !r.failed.is_empty(),
            "{args:?}: with every replica down at once some of {} requests fail",
            r.sent
        );
    }
}
