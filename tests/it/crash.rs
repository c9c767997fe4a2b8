//! Issue 36.2 and 43.12: a `kill -9` of vigil loses nothing that an upgrade keeps. The next
//! vigil (`on_restart = "adopt"`) shows what the earlier one showed — restart counts, last
//! states, the rest of a back-off, a completed job (which does not run again), events and
//! pods' ages; an adopted run is not given an earlier run's termination message; and a state
//! file vigil cannot trust (another user's, writable by others) is refused.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Vigil, alive, metric, state_reason, write_config};

const T: Duration = Duration::from_secs(30);

/// A sleep length unique to this test process and `offset` (< 20): processes are told apart
/// machine-wide by their command line.
fn unique(offset: u32) -> u32 {
    assert!(offset < 20);
    3_000_000 + (std::process::id() % 100_000) * 20 + offset
}

/// A config and socket in a directory of their own, for vigils started one after another.
struct Site {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    config: PathBuf,
}

impl Site {
    fn new(supervisor: &str, pods: &str) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("vigil.sock");
        let config = write_config(dir.path(), &socket, supervisor, pods);
        Site {
            _dir: dir,
            socket,
            config,
        }
    }

    fn state_path(&self) -> PathBuf {
        let mut p = self.socket.as_os_str().to_os_string();
        p.push(".state");
        PathBuf::from(p)
    }

    fn state_file(&self) -> String {
        std::fs::read_to_string(self.state_path()).unwrap_or_default()
    }

    fn start(&self) -> Vigil {
        Vigil::start_with(
            tempfile::tempdir().unwrap(),
            self.socket.clone(),
            self.config.clone(),
        )
    }
}

/// `kill -9` of the vigil `v` runs: no clean-up by vigil.
fn kill_9(v: &mut Vigil) {
    let mut child = v.child.take().unwrap();
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
}

fn container(status: &Value, pod: &str, name: &str) -> Value {
    let p = status["pods"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == pod))
        .cloned()
        .unwrap_or(Value::Null);
    p["init_containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(p["containers"].as_array().into_iter().flatten())
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

fn pod_created(status: &Value, pod: &str) -> String {
    status["pods"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == pod))
        .and_then(|p| p["created_at"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Milliseconds of an RFC 3339 time since the epoch's day start (enough to compare two times
/// of the same minute or so).
fn millis(rfc3339: &str) -> i64 {
    let time = rfc3339.split('T').nth(1).unwrap_or("");
    let t = time.trim_end_matches('Z');
    let mut parts = t.split(':');
    let h: i64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let m: i64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let s: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
    (h * 3600 + m * 60) * 1000 + (s * 1000.0).round() as i64
}

/// A service, a job that waits for it and appends a line to `ran` once, a container that
/// fails at once (a long back-off after its first restart), a pod with a sidecar.
fn mix(site_dir: &Path, db: u32, side: u32, app: u32) -> String {
    format!(
        r#"
[pods.db]
[[pods.db.containers]]
name = "db"
command = ["sleep", "{db}"]

[pods.jobs]
restart_policy = "OnFailure"
depends_on = {{ db = "started" }}
[[pods.jobs.containers]]
name = "job"
command = ["sh", "-c", "echo ran >> {ran}"]

[pods.crashy]
backoff = {{ initial_seconds = 60, max_seconds = 120 }}
[[pods.crashy.containers]]
name = "c"
command = ["sh", "-c", "exit 3"]

[pods.side]
[[pods.side.init_containers]]
name = "tail"
restart_policy = "Always"
command = ["sleep", "{side}"]
[[pods.side.containers]]
name = "app"
command = ["sleep", "{app}"]
"#,
        ran = site_dir.join("ran").display()
    )
}

fn settled(v: &Vigil) -> bool {
    let s = v.status();
    state_reason(&container(&s, "db", "db")) == "Running"
        && state_reason(&container(&s, "jobs", "job")) == "Completed"
        && state_reason(&container(&s, "crashy", "c")) == "CrashLoopBackOff"
        && container(&s, "crashy", "c")["restart_count"] == 1
        && state_reason(&container(&s, "side", "tail")) == "Running"
        && state_reason(&container(&s, "side", "app")) == "Running"
}

/// What must read the same before and after the crash, per container.
fn summary(status: &Value, pod: &str, name: &str) -> Value {
    let c = container(status, pod, name);
    serde_json::json!({
        "restart_count": c["restart_count"],
        "state": state_reason(&c),
        "last_state": c["last_state"],
        "terminated": c["state"]["terminated"],
        "pid": c["pid"],
    })
}

const ALL: [(&str, &str); 5] = [
    ("db", "db"),
    ("jobs", "job"),
    ("crashy", "c"),
    ("side", "tail"),
    ("side", "app"),
];

fn status_survives_a_kill_9(supervisor: &str) {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::new(
        supervisor,
        &mix(dir.path(), unique(0), unique(1), unique(2)),
    );
    // The job writes next to the config (the site's directory).
    let ran = dir.path().join("ran");
    let mut a = site.start();
    a.wait_for(T, "the mix settled", settled);
    // The record is written within 250 ms of the last change; give it ample time.
    let before = a.status();
    let events_before = a.request(r#"{"cmd":"events"}"#);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        site.state_file().lines().any(|l| l.starts_with("record ")),
        "the state file has the core's record:\n{}",
        site.state_file()
    );
    kill_9(&mut a);
    let b = site.start();
    b.wait_for(T, "the next vigil settled", settled);
    let after = b.status();
    for (pod, name) in ALL {
        assert_eq!(
            summary(&after, pod, name),
            summary(&before, pod, name),
            "{pod}/{name} before and after the crash\nvigil log:\n{}",
            b.log()
        );
    }
    for pod in ["db", "jobs", "crashy", "side"] {
        let (x, y) = (pod_created(&before, pod), pod_created(&after, pod));
        assert!(
            (millis(&x) - millis(&y)).abs() <= 1000,
            "{pod}'s age goes on: created {x} before, {y} after"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "ran\n",
        "the completed job did not run again"
    );
    // The earlier events are still there, the adoption after them.
    let events_after = b.request(r#"{"cmd":"events"}"#).to_string();
    for e in events_before["events"].as_array().into_iter().flatten() {
        let msg = e["message"].as_str().unwrap_or("");
        assert!(
            events_after.contains(msg),
            "event {msg:?} kept\n{events_after}"
        );
    }
    assert!(events_after.contains("Adopted"), "{events_after}");
    // The crash-looping container waits out the back-off the earlier vigil began (60 s):
    // still waiting a few seconds later.
    std::thread::sleep(Duration::from_secs(3));
    let c = b.container("crashy", "c");
    assert_eq!(state_reason(&c), "CrashLoopBackOff", "{c}");
    assert_eq!(c["restart_count"], 1, "{c}");
    assert_eq!(b.shutdown(), 0);
}

#[test]
fn without_cgroups_a_kill_9_keeps_restart_counts_last_states_back_off_ages_events_and_completed_jobs()
 {
    status_survives_a_kill_9("");
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn with_cgroups_a_kill_9_keeps_restart_counts_last_states_back_off_ages_events_and_completed_jobs()
{
    let cg = crate::common::ScratchCgroup::new();
    status_survives_a_kill_9(&cg.root_line());
}

#[test]
fn an_adopted_run_is_not_given_a_termination_message_older_than_itself() {
    let dir = tempfile::tempdir().unwrap();
    let msg = dir.path().join("message");
    std::fs::write(&msg, "an earlier run's message").unwrap();
    // Written long before this run started.
    let status = Command::new("touch")
        .args(["-d", "1 hour ago"])
        .arg(&msg)
        .status()
        .unwrap();
    assert!(status.success());
    let secs = unique(5);
    let site = Site::new(
        "",
        &format!(
            "[pods.web]\n[[pods.web.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"{secs}\"]\n\
             termination_message_path = \"{}\"\n",
            msg.display()
        ),
    );
    let mut a = site.start();
    a.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
    let pid = a.container("web", "c")["pid"].as_u64().unwrap();
    a.wait_for(T, "its main process recorded", |_| {
        site.state_file()
            .lines()
            .any(|l| l.starts_with(&format!("{pid} ")))
    });
    kill_9(&mut a);
    let b = site.start();
    b.wait_for(T, "adopted", |v| v.container("web", "c")["pid"] == pid);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::SIGKILL,
    )
    .unwrap();
    b.wait_for(T, "its end noticed", |v| {
        v.container("web", "c")["last_state"]["terminated"].is_object()
    });
    let c = b.container("web", "c");
    let message = c["last_state"]["terminated"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        !message.contains("an earlier run's message"),
        "the stale file is not this run's message: {c}"
    );
    assert_eq!(b.shutdown(), 0);
}

#[test]
#[ignore = "needs root"]
fn a_forged_state_file_owned_by_another_user_is_refused_and_kills_nothing() {
    crate::common::require_root("the forged file is another user's");
    // A root process that has nothing to do with vigil.
    let mut victim = Command::new("sleep")
        .arg(unique(7).to_string())
        .spawn()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", victim.id())).unwrap();
    let start: u64 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let site = Site::new(
        "",
        &crate::common::sh_pod("web", &format!("exec sleep {}", unique(8))),
    );
    // uid 65534 writes a state file naming it as vigil's (the directory was open to it).
    std::fs::write(
        site.state_path(),
        format!(
            "{} {start} orphan\n{} {start} web/c 0000000000000001 0\n",
            victim.id(),
            victim.id()
        ),
    )
    .unwrap();
    std::os::unix::fs::chown(site.state_path(), Some(65534), Some(65534)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(site.state_path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let v = site.start();
    v.wait_for(T, "web running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        alive(u64::from(victim.id())),
        "the unrelated process lives\n{}",
        v.log()
    );
    assert!(
        v.log().contains("refused: owned by uid 65534"),
        "said why\n{}",
        v.log()
    );
    assert_eq!(v.shutdown(), 0);
    let _ = (victim.kill(), victim.wait());
}

/// A Python app that prints a line per request to its stdout (and flushes it): with its pipe's
/// read end gone, `print` raises BrokenPipeError and the request fails.
const APP: &str = r#"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("request " + self.path, flush=True)
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// One GET of `path`; whether a 200 came back.
fn get(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200")
}

#[test]
fn a_kill_9_under_http_load_fails_no_request_and_keeps_every_output_line() {
    crate::common::require_program("python3", "--version", "python3");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app.py");
    std::fs::write(&app, APP).unwrap();
    let logs = dir.path().join("logs");
    let site = Site::new(
        &format!("log_dir = \"{}\"", logs.display()),
        &format!(
            "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\n\
             command = [\"python3\", \"{}\", \"{port}\"]\n\
             readiness_probe = {{ tcp_socket = {{ port = {port} }}, period_seconds = 1 }}\n",
            app.display()
        ),
    );
    let mut a = site.start();
    a.wait_for(T, "the app ready", |v| {
        v.container("web", "app")["ready"] == true
    });
    let pid = a.container("web", "app")["pid"].as_u64().unwrap();
    // Load from a client thread throughout: before, during and after the crash.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut n, mut failed) = (0u32, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                if !get(port, &format!("/r{n}")) {
                    failed.push(n);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            (n, failed)
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    a.wait_for(T, "its main process recorded", |_| {
        site.state_file()
            .lines()
            .any(|l| l.starts_with(&format!("{pid} ")))
    });
    kill_9(&mut a);
    // Requests go on while no vigil runs.
    std::thread::sleep(Duration::from_secs(1));
    let b = site.start();
    b.wait_for(T, "the app adopted", |v| {
        v.container("web", "app")["pid"] == pid
    });
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (n, failed) = load.join().unwrap();
    assert!(n > 50, "{n} requests only");
    assert!(
        failed.is_empty(),
        "{} of {n} requests failed: {failed:?}\nvigil log:\n{}",
        failed.len(),
        b.log()
    );
    // Every request's line reached the log file, and the new vigil's `vigil logs` has those
    // written while no vigil ran (they waited in the pipe) and after.
    let file = logs.join("web").join("app.log");
    b.wait_for(T, "every line in the log file", |_| {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        (1..=n).all(|i| text.contains(&format!("request /r{i}\n")))
    });
    let shown = b.request(r#"{"cmd":"logs","pod":"web","container":"app"}"#)["result"]["log"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(shown.contains(&format!("request /r{n}\n")), "{shown}");
    assert_eq!(b.shutdown(), 0);
}

/// vigil's output holder (a child of the vigil `v` runs, named `vigil-output-holder`).
fn holder_of(v: &Vigil) -> Option<u32> {
    let pid = v.child.as_ref()?.id();
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .unwrap_or_default()
                .starts_with(b"vigil-output-holder\0")
        })
}

/// One container that says which process it is (`$$$$`: a shell's `$$` in the config), then
/// sleeps; `supervisor` goes into
/// `[supervisor]`. Started, recorded, then vigil and its output holder are both killed with
/// SIGKILL: its output pipes are gone for good. Returns the site, the old pid and the next
/// vigil.
fn crash_losing_output(supervisor: &str, offset: u32) -> (Site, u64, Vigil) {
    let secs = unique(offset);
    let site = Site::new(
        supervisor,
        &format!(
            "[pods.web]\n[[pods.web.containers]]\nname = \"c\"\n\
             command = [\"sh\", \"-c\", \"echo run $$$$; exec sleep {secs}\"]\n"
        ),
    );
    let mut a = site.start();
    a.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
    let pid = a.container("web", "c")["pid"].as_u64().unwrap();
    a.wait_for(T, "its main process recorded", |_| {
        site.state_file()
            .lines()
            .any(|l| l.starts_with(&format!("{pid} ")))
    });
    let holder = holder_of(&a).expect("vigil runs an output holder");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder as i32),
        nix::sys::signal::SIGKILL,
    )
    .unwrap();
    kill_9(&mut a);
    let b = site.start();
    (site, pid, b)
}

#[test]
fn a_run_whose_output_was_lost_in_the_crash_is_told_and_restarted_and_its_new_output_is_read() {
    // Outcome (issue 36.2): vigil and its output holder die by SIGKILL; the next vigil finds
    // the container running but no pipe to read it by. It says so — an `OutputLost` Warning
    // event, a warning in its log — and restarts it (`on_output_lost = "restart"`, the
    // default) instead of showing it Ready; the new run's output is in `vigil logs`, and the
    // metrics count one adopted run and one whose output was lost.
    let (_site, old, b) = crash_losing_output("", 10);
    b.wait_for(T, "a new run, running", |v| {
        let c = v.container("web", "c");
        state_reason(&c) == "Running" && c["pid"].as_u64().is_some_and(|p| p != old)
    });
    let c = b.container("web", "c");
    let new = c["pid"].as_u64().unwrap();
    assert_eq!(c["restart_count"], 1, "{c}");
    assert_eq!(c["output_lost"], false, "{c}");
    let last = c["last_state"]["terminated"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(last.contains("output pipes were lost"), "{c}");
    b.wait_for(T, "the adopted run killed", |_| !alive(old));
    let events = b.request(r#"{"cmd":"events"}"#).to_string();
    assert!(
        events.contains("OutputLost") && events.contains(&format!("pid {old}")),
        "{events}"
    );
    assert!(
        b.log().contains("its output is lost; restarting it"),
        "{}",
        b.log()
    );
    b.wait_for(T, "the new run's output in vigil logs", |v| {
        v.request(r#"{"cmd":"logs","pod":"web","container":"c"}"#)["result"]["log"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("run {new}\n"))
    });
    assert_eq!(metric(&b, "vigil_adopted_runs_total"), 1.0);
    assert_eq!(metric(&b, "vigil_output_lost_runs_total"), 1.0);
    assert_eq!(metric(&b, "vigil_log_lines_dropped_total"), 0.0);
    assert_eq!(b.shutdown(), 0);
}

#[test]
fn with_on_output_lost_keep_a_run_whose_output_was_lost_runs_on_marked_in_status_and_describe() {
    let (_site, old, b) = crash_losing_output("on_output_lost = \"keep\"", 11);
    b.wait_for(T, "adopted", |v| v.container("web", "c")["pid"] == old);
    b.wait_for(T, "marked", |v| {
        v.container("web", "c")["output_lost"] == true
    });
    let events = b.request(r#"{"cmd":"events"}"#).to_string();
    assert!(
        events.contains("OutputLost") && events.contains("on_output_lost = \\\"keep\\\""),
        "{events}"
    );
    let out = b.cli(&["describe", "web"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Output:") && text.contains("lost in a crash of vigil"),
        "{text}"
    );
    std::thread::sleep(Duration::from_secs(1));
    let c = b.container("web", "c");
    assert_eq!(c["pid"], old, "not restarted: {c}");
    assert_eq!(c["restart_count"], 0, "{c}");
    assert_eq!(b.shutdown(), 0);
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// A vigil running `command` as `web/c` (without cgroups: its own process group), and its
/// output holder's pid.
fn with_holder(command: &str) -> (Site, Vigil, u32, u64) {
    let site = Site::new(
        "",
        &format!("[pods.web]\n[[pods.web.containers]]\nname = \"c\"\ncommand = {command}\n"),
    );
    let v = site.start();
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
    let pid = v.container("web", "c")["pid"].as_u64().unwrap();
    let holder = holder_of(&v).expect("vigil runs an output holder");
    (site, v, holder, pid)
}

#[test]
fn an_orphaned_output_holder_exits_once_the_containers_it_held_pipes_of_have_ended() {
    // Outcome (issue 36.2): vigil dies and no vigil comes back. The holder keeps the pipes
    // while the container lives (its writes do not fail), then, once the container has ended,
    // exits — even though the pipe still holds lines nobody read.
    let (_site, mut v, holder, pid) =
        with_holder(r#"["sh", "-c", "while :; do echo tick; sleep 0.1; done"]"#);
    kill_9(&mut v);
    std::thread::sleep(Duration::from_millis(700));
    assert!(alive(u64::from(holder)), "it holds the pipes meanwhile");
    assert!(alive(pid), "the container's writes did not fail");
    signal(-(pid as i32), nix::sys::signal::Signal::SIGKILL);
    let deadline = std::time::Instant::now() + T;
    while alive(u64::from(holder)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(u64::from(holder)), "the holder exited");
}

#[test]
fn an_orphaned_output_holder_still_holding_pipes_exits_on_sigterm() {
    let secs = unique(12);
    let (_site, mut v, holder, pid) = with_holder(&format!(r#"["sleep", "{secs}"]"#));
    kill_9(&mut v);
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(u64::from(holder)), "it waits for the next vigil");
    signal(holder as i32, nix::sys::signal::Signal::SIGTERM);
    let deadline = std::time::Instant::now() + T;
    while alive(u64::from(holder)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let gone = !alive(u64::from(holder));
    signal(-(pid as i32), nix::sys::signal::Signal::SIGKILL);
    assert!(gone, "the holder exited on SIGTERM");
}

#[test]
fn a_holder_serving_vigil_ignores_sigterm_while_it_holds_pipes_and_exits_on_it_once_it_holds_none()
{
    let secs = unique(13);
    let (_site, v, holder, _pid) = with_holder(&format!(r#"["sleep", "{secs}"]"#));
    signal(holder as i32, nix::sys::signal::Signal::SIGTERM);
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        alive(u64::from(holder)),
        "a SIGTERM for the whole group is not the holder's while it serves"
    );
    let r = v.request(r#"{"cmd":"stop","pod":"web"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "stopped", |v| {
        state_reason(&v.container("web", "c")) == "Stopped"
    });
    // Its pipes hung up when the container ended: it holds none now.
    std::thread::sleep(Duration::from_millis(300));
    signal(holder as i32, nix::sys::signal::Signal::SIGTERM);
    let deadline = std::time::Instant::now() + T;
    while alive(u64::from(holder)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(u64::from(holder)), "the holder exited on SIGTERM");
    assert_eq!(v.shutdown(), 0, "vigil does without it");
}

// ---- under systemd: the service manager's file-descriptor store ------------------------------

/// A fake service manager: a datagram socket of the test's as `NOTIFY_SOCKET`, which keeps
/// every message vigil sends with the descriptors it carries (`SCM_RIGHTS`), as systemd's
/// store does with `FDSTORE=1` (sd_notify(3)).
struct Manager {
    _dir: tempfile::TempDir,
    path: PathBuf,
    sock: std::os::unix::net::UnixDatagram,
    /// Every message so far, each with its descriptors.
    got: Vec<(String, Vec<std::os::fd::OwnedFd>)>,
}

impl Manager {
    fn new() -> Manager {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        sock.set_nonblocking(true).unwrap();
        Manager {
            _dir: dir,
            path,
            sock,
            got: Vec::new(),
        }
    }

    /// Takes what has arrived.
    #[allow(unsafe_code)]
    fn receive(&mut self) {
        use std::os::fd::{AsRawFd, FromRawFd};
        loop {
            let mut buf = [0u8; 4096];
            let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 8]);
            let mut iov = [std::io::IoSliceMut::new(&mut buf)];
            let Ok(msg) = nix::sys::socket::recvmsg::<()>(
                self.sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
            ) else {
                return;
            };
            let mut fds = Vec::new();
            for c in msg.cmsgs().unwrap() {
                if let nix::sys::socket::ControlMessageOwned::ScmRights(raw) = c {
                    // SAFETY: SCM_RIGHTS installed these descriptors in this process.
                    fds.extend(
                        raw.into_iter()
                            .map(|r| unsafe { std::os::fd::OwnedFd::from_raw_fd(r) }),
                    );
                }
            }
            let n = msg.bytes;
            self.got
                .push((String::from_utf8_lossy(&buf[..n]).into_owned(), fds));
        }
    }

    /// Waits until a message has every one of `lines`.
    fn wait_for(&mut self, lines: &[&str]) {
        let deadline = std::time::Instant::now() + crate::common::patient(T);
        loop {
            self.receive();
            if self
                .got
                .iter()
                .any(|(m, _)| lines.iter().all(|l| m.lines().any(|x| x == *l)))
            {
                return;
            }
            let texts: Vec<&str> = self.got.iter().map(|(m, _)| m.as_str()).collect();
            assert!(
                std::time::Instant::now() < deadline,
                "no message with {lines:?}; got {texts:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The descriptor stored under `name` (taken out of the message that carried it).
    fn stored(&mut self, name: &str) -> std::os::fd::OwnedFd {
        let line = format!("FDNAME={name}");
        self.got
            .iter_mut()
            .find(|(m, f)| {
                m.lines().any(|l| l == "FDSTORE=1") && m.contains(&line) && !f.is_empty()
            })
            .map(|(_, f)| f.remove(0))
            .unwrap_or_else(|| panic!("{name} was not stored"))
    }
}

/// `vigil run` on `site` with `NOTIFY_SOCKET`, and — as systemd starts a unit again — the
/// descriptors `fds` at 3, 4, … with `LISTEN_FDS`, `LISTEN_FDNAMES` and `LISTEN_PID` (the pid
/// is vigil's own: a shell sets it to `$$` and executes vigil).
#[allow(unsafe_code)]
fn start_as_systemd_would(
    site: &Site,
    manager: &Manager,
    fds: &[(&str, std::os::fd::OwnedFd)],
) -> Vigil {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "LISTEN_PID=$$ exec \"$0\" \"$@\""])
        .arg(crate::common::BIN)
        .args(["run", "-c"])
        .arg(&site.config)
        .env("VIGIL_LOG", "debug")
        .env("NOTIFY_SOCKET", &manager.path)
        .env_remove("LISTEN_PID")
        .stdin(std::process::Stdio::null());
    if !fds.is_empty() {
        let names: Vec<&str> = fds.iter().map(|(n, _)| *n).collect();
        cmd.env("LISTEN_FDS", fds.len().to_string())
            .env("LISTEN_FDNAMES", names.join(":"));
        let raw: Vec<i32> = fds.iter().map(|(_, f)| f.as_raw_fd()).collect();
        // SAFETY: only fcntl(2), dup2(2) and close(2) between fork and exec, on numbers this
        // process owns: each source is first moved above 100 (a source may sit at 3…), then
        // placed at 3 + i without close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                let mut high = [0i32; 16];
                for (i, fd) in raw.iter().enumerate() {
                    high[i] = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 100);
                    if high[i] < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                for (i, fd) in high.iter().take(raw.len()).enumerate() {
                    if libc::dup2(*fd, 3 + i as i32) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(*fd);
                }
                Ok(())
            });
        }
    }
    Vigil::launch(
        cmd,
        tempfile::tempdir().unwrap(),
        site.socket.clone(),
        site.config.clone(),
    )
}

#[test]
fn under_systemd_a_kill_9_loses_no_output_of_an_adopted_run_through_the_fd_store_alone() {
    // Outcome (issue 36.2, under systemd): vigil keeps each pipe's read end in the service
    // manager's file-descriptor store (FDSTORE=1, FDNAME=vigil.out|err.PID.P.POD.C.NAME). Its
    // output holder is killed, then vigil (kill -9): only the store has the pipes. The next
    // vigil, given them back as LISTEN_FDS, adopts the run and reads on — every line the
    // container wrote before, during and after the crash is in log_dir, those after it in
    // `vigil logs`, and none of its writes failed; it removes from the store the pipes of a
    // run it did not adopt (FDSTOREREMOVE=1), closes a descriptor that is not a pipe of its
    // own, keeps LISTEN_* from what it starts, and removes a run's entries when its pipes
    // close.
    let mut manager = Manager::new();
    let dir = tempfile::tempdir().unwrap();
    let failed = dir.path().join("failed");
    let logs = dir.path().join("logs");
    // Writes that fail leave a mark (SIGPIPE ignored: a failed write is EPIPE, not death).
    let script = format!(
        "trap '' PIPE; i=0; while :; do i=$$((i+1)); echo tick $$i || echo $$i >> {f}; \
         echo etick $$i >&2 || echo e$$i >> {f}; sleep 0.05; done",
        f = failed.display()
    );
    let site = Site::new(
        &format!("log_dir = \"{}\"", logs.display()),
        &format!(
            "[pods.web]\n[[pods.web.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"{script}\"]\n\
             [[pods.web.containers]]\nname = \"env\"\ncommand = [\"sh\", \"-c\", \"env; exec sleep {}\"]\n",
            unique(12)
        ),
    );
    let mut a = start_as_systemd_would(&site, &manager, &[]);
    a.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
    let pid = a.container("web", "c")["pid"].as_u64().unwrap();
    let out = format!("vigil.out.{pid}.P.web.C.c");
    let err = format!("vigil.err.{pid}.P.web.C.c");
    manager.wait_for(&["FDSTORE=1", &format!("FDNAME={out}")]);
    manager.wait_for(&["FDSTORE=1", &format!("FDNAME={err}")]);
    a.wait_for(T, "its main process recorded", |_| {
        site.state_file()
            .lines()
            .any(|l| l.starts_with(&format!("{pid} ")))
    });
    a.wait_for(T, "some output read", |v| {
        v.request(r#"{"cmd":"logs","pod":"web","container":"c"}"#)["result"]["log"]
            .as_str()
            .unwrap_or_default()
            .contains("tick 5\n")
    });
    let holder = holder_of(&a).expect("vigil runs an output holder");
    signal(holder as i32, nix::sys::signal::Signal::SIGKILL);
    kill_9(&mut a);
    // The container writes on while no vigil runs: its lines wait in the pipe.
    std::thread::sleep(Duration::from_secs(1));
    let (gone_r, gone_w) = nix::unistd::pipe().unwrap();
    let gone = "vigil.out.999999.P.web.C.gone";
    let not_a_pipe: std::os::fd::OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let stored_out = manager.stored(&out);
    let stored_err = manager.stored(&err);
    let b = start_as_systemd_would(
        &site,
        &manager,
        &[
            (out.as_str(), stored_out),
            (err.as_str(), stored_err),
            (gone, gone_r),
            ("junk", not_a_pipe),
        ],
    );
    b.wait_for(T, "the run adopted", |v| {
        v.container("web", "c")["pid"] == pid
    });
    let c = b.container("web", "c");
    assert_eq!(c["output_lost"], false, "{c}\n{}", b.log());
    assert_eq!(c["restart_count"], 0, "{c}");
    // After the crash: more lines than the old vigil could have read, in `vigil logs`.
    let logged = |v: &Vigil| {
        v.request(r#"{"cmd":"logs","pod":"web","container":"c"}"#)["result"]["log"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let first_after = logged(&b)
        .lines()
        .find_map(|l| l.strip_prefix("tick ")?.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    b.wait_for(T, "output written after the crash in vigil logs", |v| {
        logged(v).contains(&format!("tick {}\n", first_after.saturating_add(20)))
    });
    // Every line, before, during and after the crash, once in the log file, none failed.
    let file = logs.join("web").join("c.log");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let ticks: Vec<u64> = text
        .lines()
        .filter_map(|l| l.rsplit_once("tick ").filter(|(p, _)| !p.ends_with('e')))
        .filter_map(|(_, n)| n.parse().ok())
        .collect();
    let last = ticks.iter().copied().max().unwrap_or(0);
    assert!(last > first_after, "{text}");
    for i in 1..=last {
        assert!(
            ticks.contains(&i),
            "tick {i} missing from {}:\n{text}",
            file.display()
        );
    }
    assert!(
        !failed.exists(),
        "writes failed: {}",
        std::fs::read_to_string(&failed).unwrap_or_default()
    );
    // The run not adopted leaves the store; the descriptor that was no pipe of vigil's is
    // said and closed; nothing vigil starts sees LISTEN_*.
    manager.wait_for(&["FDSTOREREMOVE=1", &format!("FDNAME={gone}")]);
    drop(gone_w);
    assert!(b.log().contains("junk (fd 6)"), "{}", b.log());
    let new_holder = holder_of(&b).expect("the new vigil runs an output holder");
    let environ = std::fs::read(format!("/proc/{new_holder}/environ")).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&environ).contains("LISTEN_"),
        "LISTEN_* reached the holder"
    );
    b.wait_for(T, "the env container's output", |v| {
        v.request(r#"{"cmd":"logs","pod":"web","container":"env"}"#)["result"]["log"]
            .as_str()
            .unwrap_or_default()
            .contains("PATH=")
    });
    let env = b
        .request(r#"{"cmd":"logs","pod":"web","container":"env"}"#)
        .to_string();
    assert!(!env.contains("LISTEN_"), "{env}");
    // A restart: the old run's entries leave the store once its pipes close, the new run's
    // are stored.
    let out = b.cli(&["restart", "web/c"]);
    assert!(out.status.success(), "{out:?}");
    b.wait_for(T, "a new run", |v| {
        let c = v.container("web", "c");
        state_reason(&c) == "Running" && c["pid"].as_u64().is_some_and(|p| p != pid)
    });
    let new = b.container("web", "c")["pid"].as_u64().unwrap();
    manager.wait_for(&[
        "FDSTOREREMOVE=1",
        &format!("FDNAME=vigil.out.{pid}.P.web.C.c"),
    ]);
    manager.wait_for(&[
        "FDSTOREREMOVE=1",
        &format!("FDNAME=vigil.err.{pid}.P.web.C.c"),
    ]);
    manager.wait_for(&["FDSTORE=1", &format!("FDNAME=vigil.out.{new}.P.web.C.c")]);
    assert_eq!(b.shutdown(), 0);
}

#[test]
fn under_systemd_an_upgrade_stores_no_pipe_twice_and_the_new_instance_removes_what_closes() {
    // Outcome (issue 36.2): `vigil upgrade` keeps the process, so systemd's store keeps every
    // pipe under its name; the new instance sends none of them again (no duplicates) and, when
    // a run's pipes close after the upgrade, removes their entries (FDSTOREREMOVE=1).
    let mut manager = Manager::new();
    let site = Site::new(
        "",
        &format!(
            "[pods.web]\n[[pods.web.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"{}\"]\n",
            unique(13)
        ),
    );
    let v = start_as_systemd_would(&site, &manager, &[]);
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
    let pid = v.container("web", "c")["pid"].as_u64().unwrap();
    let out_name = format!("FDNAME=vigil.out.{pid}.P.web.C.c");
    let err_name = format!("FDNAME=vigil.err.{pid}.P.web.C.c");
    manager.wait_for(&["FDSTORE=1", &out_name]);
    manager.wait_for(&["FDSTORE=1", &err_name]);
    let up = v.cli(&["upgrade"]);
    assert!(up.status.success(), "{up:?}\n{}", v.log());
    v.wait_for(T, "the same run after the upgrade", |v| {
        v.container("web", "c")["pid"] == pid
    });
    let out = v.cli(&["restart", "web/c"]);
    assert!(out.status.success(), "{out:?}");
    v.wait_for(T, "a new run", |v| {
        let c = v.container("web", "c");
        state_reason(&c) == "Running" && c["pid"].as_u64().is_some_and(|p| p != pid)
    });
    let new = v.container("web", "c")["pid"].as_u64().unwrap();
    manager.wait_for(&["FDSTOREREMOVE=1", &out_name]);
    manager.wait_for(&["FDSTOREREMOVE=1", &err_name]);
    manager.wait_for(&["FDSTORE=1", &format!("FDNAME=vigil.out.{new}.P.web.C.c")]);
    for name in [&out_name, &err_name] {
        let stored = manager
            .got
            .iter()
            .filter(|(m, _)| m.lines().any(|l| l == "FDSTORE=1") && m.lines().any(|l| l == name))
            .count();
        assert_eq!(stored, 1, "{name} stored {stored} times");
    }
    assert_eq!(v.shutdown(), 0);
}

/// `history` (docs/behaviour.md §6.7) against a real supervisor: the ended runs of a pod are in
/// `status` and `describe`, the failure with its container and exit code, and they outlive a
/// `kill -9` of vigil.
#[test]
fn the_runs_a_pod_keeps_are_shown_and_outlive_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let fail = dir.path().join("fail");
    let pods = format!(
        r#"
[pods.once]
restart_policy = "Never"
history = {{ successful = 3, failed = 2 }}
[[pods.once.containers]]
name = "run"
command = ["sh", "-c", "test -e {} && exit 3; echo done"]
"#,
        fail.display()
    );
    let site = Site::new("", &pods);
    let runs = |v: &Vigil| {
        v.pod("once")["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let mut a = site.start();
    a.wait_for(T, "the first run to succeed", |v| runs(v).len() == 1);
    std::fs::write(&fail, "").unwrap();
    let out = a.cli(&["trigger", "once"]);
    assert!(out.status.success(), "{out:?}");
    a.wait_for(T, "the second run to fail", |v| runs(v).len() == 2);
    let kept = runs(&a);
    assert_eq!(kept[0]["phase"], "Succeeded", "{kept:?}");
    assert!(kept[0].get("failure").is_none(), "{kept:?}");
    assert_eq!(kept[1]["phase"], "Failed", "{kept:?}");
    assert_eq!(kept[1]["failure"]["container"], "run", "{kept:?}");
    assert_eq!(kept[1]["failure"]["reason"], "Error", "{kept:?}");
    assert_eq!(kept[1]["failure"]["exit_code"], 3, "{kept:?}");
    assert!(
        kept[1]["scheduled_for"].is_null(),
        "not started by a schedule"
    );
    let describe = String::from_utf8_lossy(&a.cli(&["describe", "once"]).stdout).into_owned();
    let table: Vec<&str> = describe
        .lines()
        .skip_while(|l| *l != "Runs:")
        .take(4)
        .collect();
    assert_eq!(table.len(), 4, "{describe}");
    assert!(
        table[1].contains("Scheduled For") && table[1].ends_with("Result"),
        "{describe}"
    );
    assert!(
        table[2].ends_with("Failed: run Error (exit code 3)"),
        "newest first:\n{describe}"
    );
    assert!(describe.contains("  Succeeded\n"), "{describe}");
    // The record is written within 250 ms of the last change; give it ample time.
    std::thread::sleep(Duration::from_secs(2));
    kill_9(&mut a);
    let b = site.start();
    b.wait_for(T, "the next vigil to answer", |v| {
        v.try_request(r#"{"cmd":"status"}"#).is_some()
    });
    assert_eq!(
        runs(&b),
        kept,
        "the kept runs survive the crash\n{}",
        b.log()
    );
    // And the next run is added to them.
    std::fs::remove_file(&fail).unwrap();
    let out = b.cli(&["trigger", "once"]);
    assert!(out.status.success(), "{out:?}");
    b.wait_for(T, "a third run", |v| runs(v).len() == 3);
    assert_eq!(runs(&b)[2]["phase"], "Succeeded");
    assert_eq!(b.shutdown(), 0);
}

/// `vigil scale` outlives a `kill -9` of vigil (docs/behaviour.md §14): the next vigil runs
/// the scaled count (its extra replicas adopted, not killed), and a reload of the unchanged
/// file keeps it, as it does for the vigil that was scaled.
#[test]
fn a_scaled_count_outlives_a_kill_9_and_the_reload_after_it() {
    let pods = format!(
        r#"
[pods.web]
replicas = 2
termination_grace_period_seconds = 2
[[pods.web.containers]]
name = "app"
command = ["sleep", "{}"]
"#,
        unique(7)
    );
    let site = Site::new("", &pods);
    let names = |v: &Vigil| -> Vec<String> {
        (v.status()["pods"].as_array().into_iter().flatten())
            .map(|p| p["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let pids = |v: &Vigil| -> Vec<u64> {
        (0..4)
            .map(|i| {
                let c = v.container(&format!("web-{i}"), "app");
                if c["state"]["running"].is_object() {
                    c["pid"].as_u64().unwrap_or(0)
                } else {
                    0
                }
            })
            .collect()
    };
    let mut a = site.start();
    let out = a.cli(&["scale", "web", "4"]);
    assert!(out.status.success(), "{out:?}");
    a.wait_for(T, "four replicas running", |v| {
        pids(v).iter().all(|&p| p > 0)
    });
    let before = pids(&a);
    assert!(
        site.state_file().lines().any(|l| l == "scaled web 4 2"),
        "{}",
        site.state_file()
    );
    // The record is written within 250 ms of the last change; give it ample time.
    std::thread::sleep(Duration::from_secs(2));
    kill_9(&mut a);
    let b = site.start();
    b.wait_for(T, "the next vigil to answer", |v| {
        v.try_request(r#"{"cmd":"status"}"#).is_some()
    });
    assert_eq!(
        names(&b),
        ["web-0", "web-1", "web-2", "web-3"],
        "{}",
        b.log()
    );
    assert_eq!(pids(&b), before, "every replica adopted\n{}", b.log());
    assert!(
        b.log()
            .contains("pod web: 4 replicas, as `vigil scale` left it before vigil restarted"),
        "{}",
        b.log()
    );
    // A reload of the unchanged file keeps the scale …
    let out = b.cli(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(pids(&b), before);
    // … and a scale back to the file's count leaves no scale to keep.
    let out = b.cli(&["scale", "web", "2"]);
    assert!(out.status.success(), "{out:?}");
    b.wait_for(T, "two replicas left", |v| names(v).len() == 2);
    b.wait_for(T, "the state file to drop the scale", |_| {
        !site.state_file().lines().any(|l| l.starts_with("scaled "))
    });
    assert_eq!(b.shutdown(), 0);
    for pid in before {
        assert!(!alive(pid), "pid {pid} outlived the shutdown");
    }
}
