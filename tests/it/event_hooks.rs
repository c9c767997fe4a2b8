//! Hooks on events (`[[supervisor.on_event]]`, docs/behaviour.md §5.7): exec hooks and
//! webhooks against a real HTTP receiver, the hooks' own failures, and an event storm.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A directory anyone may write to (hooks run as another uid write there).
fn open_dir(parent: &Path, name: &str) -> PathBuf {
    let d = parent.join(name);
    std::fs::create_dir(&d).expect("mkdir");
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    d
}

/// A real HTTP receiver (python3's http.server) that appends each POST's body, one a line, to
/// `DIR/posts`, and answers 503 to the first `fail_first` of them, 200 after.
struct Receiver {
    child: Child,
    port: u16,
    posts: PathBuf,
}

impl Receiver {
    fn start(dir: &Path, fail_first: u32) -> Receiver {
        let script = r#"
import http.server, sys, os
posts, portfile, fail_first = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n)
        with open(posts, 'ab') as f:
            f.write(self.headers.get('Content-Type', '').encode() + b' ' + self.headers.get('X-Token', '').encode() + b' ' + body + b'\n')
        seen[0] += 1
        code = 503 if seen[0] <= fail_first else 200
        self.send_response(code)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
with open(portfile + '.tmp', 'w') as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + '.tmp', portfile)
s.serve_forever()
"#;
        let posts = dir.join("posts");
        let portfile = dir.join("port");
        let child = Command::new("python3")
            .args(["-c", script])
            .arg(&posts)
            .arg(&portfile)
            .arg(fail_first.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let deadline = Instant::now() + patient(Duration::from_secs(10));
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&portfile)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the receiver did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        Receiver { child, port, posts }
    }

    /// Each POST: (content type, X-Token, the body as JSON).
    fn posts(&self) -> Vec<(String, String, Value)> {
        std::fs::read_to_string(&self.posts)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (ct, rest) = l.split_once(' ')?;
                let (token, body) = rest.split_once(' ')?;
                Some((
                    ct.to_string(),
                    token.to_string(),
                    serde_json::from_str(body).ok()?,
                ))
            })
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn events(v: &Vigil) -> Vec<Value> {
    v.request(r#"{"cmd":"events"}"#)["result"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root"]
fn an_exec_hook_runs_as_its_user_with_the_event_as_json_on_stdin_and_in_vigil_event_variables() {
    require_root("the hook runs as uid 65534");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = open_dir(dir.path(), "out");
    let hook = format!(
        "[[supervisor.on_event]]\nname = \"record\"\nreasons = [\"Exited\"]\npods = [\"job\"]\n\
         type = \"Warning\"\nuser = 65534\n\
         exec = [\"/bin/sh\", \"-c\", \"cat > {0}/event.json; env | grep ^VIGIL_EVENT_ | sort > {0}/env; id -u > {0}/uid\"]\n\n",
        out.display()
    );
    let pods = format!(
        "{hook}[pods.job]\nrestart_policy = \"Never\"\n[[pods.job.containers]]\nname = \"run\"\n\
         command = [\"sh\", \"-c\", \"exit 3\"]\n\n{}",
        sh_pod("quiet", "exit 0")
    );
    let v = Vigil::start_in(dir, "", &pods);
    let uid_file = out.join("uid");
    v.wait_for(Duration::from_secs(10), "the hook to run", |_| {
        std::fs::read_to_string(&uid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let event: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("event.json")).expect("event.json"))
            .expect("the hook's stdin is one JSON event");
    assert_eq!(event["reason"], "Exited", "{event}");
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(event["object"], "job/run", "{event}");
    assert!(
        event["message"]
            .as_str()
            .unwrap_or("")
            .contains("exit code 3"),
        "{event}"
    );
    let env = std::fs::read_to_string(out.join("env")).expect("env");
    for line in [
        "VIGIL_EVENT_REASON=Exited",
        "VIGIL_EVENT_TYPE=Warning",
        "VIGIL_EVENT_OBJECT=job/run",
        "VIGIL_EVENT_POD=job",
        "VIGIL_EVENT_CONTAINER=run",
        "VIGIL_EVENT_COUNT=1",
        &format!("VIGIL_EVENT_SEQ={}", event["seq"]),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} not in\n{env}");
    }
    assert!(
        env.contains("VIGIL_EVENT_MESSAGE=Container run exited: Error, exit code 3"),
        "{env}"
    );
    assert_eq!(
        std::fs::read_to_string(&uid_file).expect("uid").trim(),
        "65534"
    );
    // Only the one matching event went to it: quiet's Completed exits are Normal, another pod.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        metric(
            &v,
            r#"vigil_event_hook_deliveries_total{hook="record",result="delivered"}"#
        ),
        1.0
    );
}

#[test]
#[ignore = "needs root"]
fn an_exec_hook_run_as_root_must_name_a_trusted_program_by_its_absolute_path() {
    require_root("the trust checks apply to a root vigil");
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let pods = "[[supervisor.on_event]]\nexec = [\"sh\", \"-c\", \"true\"]\n\n[pods.a]\n[[pods.a.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n";
    let config = write_config(dir.path(), &socket, "", pods);
    let out = Command::new(BIN)
        .args(["run", "-c"])
        .arg(&config)
        .env_remove("VIGIL_SOCKET")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("on_event hook on_event-0") && err.contains("not an absolute path"),
        "{err}"
    );
    // A program others may write to is refused the same way.
    let prog = dir.path().join("hook.sh");
    std::fs::write(&prog, "#!/bin/sh\ntrue\n").expect("write");
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    let pods = format!(
        "[[supervisor.on_event]]\nexec = [\"{}\"]\n\n[pods.a]\n[[pods.a.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n",
        prog.display()
    );
    let config = write_config(dir.path(), &socket, "", &pods);
    let out = Command::new(BIN)
        .args(["run", "-c"])
        .arg(&config)
        .env_remove("VIGIL_SOCKET")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("on_event hook program") && err.contains("writable by"),
        "{err}"
    );
}

#[test]
fn a_webhook_posts_the_event_json_to_a_real_receiver_and_retries_after_a_5xx() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recv = Receiver::start(dir.path(), 1);
    let pods = format!(
        "[[supervisor.on_event]]\nname = \"chat\"\nreasons = [\"Exited\"]\n\
         webhook = {{ url = \"http://127.0.0.1:{}/vigil?x=1\", headers = {{ X-Token = \"s3cret\" }} }}\n\
         retries = 2\n\n[pods.job]\nrestart_policy = \"Never\"\n[[pods.job.containers]]\nname = \"run\"\n\
         command = [\"sh\", \"-c\", \"exit 4\"]\n",
        recv.port
    );
    let v = Vigil::start_in(dir, "", &pods);
    v.wait_for_showing(
        Duration::from_secs(15),
        "the event to be POSTed twice (503, then 200 after the 1 s back-off)",
        |_| recv.posts().len() >= 2,
        |_| format!("posts: {:?}", recv.posts()),
    );
    let posts = recv.posts();
    for (ct, token, body) in &posts {
        assert_eq!(ct, "application/json");
        assert_eq!(token, "s3cret");
        assert_eq!(body["reason"], "Exited", "{body}");
        assert_eq!(body["object"], "job/run", "{body}");
    }
    assert_eq!(
        posts[0].2["seq"], posts[1].2["seq"],
        "the retry carries the same event"
    );
    v.wait_for(Duration::from_secs(5), "the delivery to be counted", |v| {
        metric(
            v,
            r#"vigil_event_hook_deliveries_total{hook="chat",result="delivered"}"#,
        ) == 1.0
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(recv.posts().len(), 2, "delivered once: no further retry");
    assert!(
        !events(&v).iter().any(|e| e["reason"] == "EventHookFailed"),
        "a delivery that succeeded on a retry is no failure"
    );
}

#[test]
#[ignore = "needs root"]
fn a_webhook_that_cannot_deliver_records_event_hook_failed_which_no_hook_receives() {
    require_root("the catch-all hook runs as uid 65534");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = open_dir(dir.path(), "out");
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let pods = format!(
        "[[supervisor.on_event]]\nname = \"down\"\nreasons = [\"Exited\"]\n\
         webhook = {{ url = \"http://127.0.0.1:{port}/\" }}\nretries = 1\n\n\
         [[supervisor.on_event]]\nname = \"everything\"\nuser = 65534\n\
         exec = [\"/bin/sh\", \"-c\", \"echo $VIGIL_EVENT_REASON >> {}/reasons\"]\nmax_concurrent = 4\n\n\
         [pods.job]\nrestart_policy = \"Never\"\n[[pods.job.containers]]\nname = \"run\"\n\
         command = [\"sh\", \"-c\", \"exit 5\"]\n",
        out.display()
    );
    let v = Vigil::start_in(dir, "", &pods);
    v.wait_for(Duration::from_secs(15), "an EventHookFailed event", |v| {
        events(v).iter().any(|e| e["reason"] == "EventHookFailed")
    });
    let failed = events(&v)
        .into_iter()
        .find(|e| e["reason"] == "EventHookFailed")
        .expect("event");
    assert_eq!(failed["type"], "Warning");
    assert_eq!(failed["object"], "supervisor");
    let msg = failed["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("on_event hook down failed for Exited job/run (after 2 attempts)")
            && msg.contains("connection refused"),
        "{msg}"
    );
    assert!(v.log().contains("on_event hook down failed"), "logged too");
    assert_eq!(
        metric(
            &v,
            r#"vigil_event_hook_deliveries_total{hook="down",result="failed"}"#
        ),
        1.0
    );
    // The catch-all hook got the pod's events, never the hooks' own.
    std::thread::sleep(Duration::from_secs(1));
    let reasons = std::fs::read_to_string(out.join("reasons")).unwrap_or_default();
    assert!(reasons.lines().any(|r| r == "Exited"), "{reasons}");
    assert!(!reasons.contains("EventHookFailed"), "{reasons}");
}

#[test]
fn an_event_storm_fills_the_bounded_queue_drops_are_counted_and_the_loop_keeps_working() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pods = "[[supervisor.on_event]]\nname = \"slow\"\npods = [\"storm\"]\n\
         exec = [\"/bin/sleep\", \"2\"]\nqueue_size = 5\nmax_concurrent = 1\n\n\
         [pods.storm]\nbackoff = { initial_seconds = 0.1, max_seconds = 0.1 }\n\
         [[pods.storm.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"exit 1\"]\n\n\
         [pods.bystander]\nbackoff = { initial_seconds = 1, max_seconds = 1 }\n\
         [[pods.bystander.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"sleep 0.5; exit 0\"]\n";
    let v = Vigil::start_in(dir, "", pods);
    let restarts = |v: &Vigil| {
        v.container("bystander", "c")["restart_count"]
            .as_u64()
            .unwrap_or(0)
    };
    let began = restarts(&v);
    let storm_began = v.container("storm", "c")["restart_count"]
        .as_u64()
        .unwrap_or(0);
    let t0 = Instant::now();
    let mut slowest = Duration::ZERO;
    while t0.elapsed() < Duration::from_secs(20) {
        let asked = Instant::now();
        let reply = v.request(r#"{"cmd":"status"}"#);
        slowest = slowest.max(asked.elapsed());
        assert!(reply["ok"].as_bool().unwrap_or(false), "{reply}");
        let queued = metric(&v, r#"vigil_event_hook_queue_length{hook="slow"}"#);
        assert!(
            queued <= 5.0,
            "the queue holds at most queue_size: {queued}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let storm = v.container("storm", "c")["restart_count"]
        .as_u64()
        .unwrap_or(0)
        - storm_began;
    // 0.1 s back-off: dozens of restarts, three events each, against a hook that takes 2 s.
    assert!(storm >= 20, "the storm ran: {storm} restarts");
    let dropped = metric(&v, r#"vigil_event_hook_dropped_total{hook="slow"}"#);
    let delivered = metric(
        &v,
        r#"vigil_event_hook_deliveries_total{hook="slow",result="delivered"}"#,
    );
    assert!(dropped >= 20.0, "drops counted: {dropped}");
    assert!(
        delivered <= 12.0,
        "one 2 s hook at a time: {delivered} in 20 s"
    );
    assert!(
        v.log().contains("on_event slow:") && v.log().contains("events dropped"),
        "drops logged"
    );
    // The loop was not held up: the bystander restarted on its 1 s back-off all along and
    // the control socket answered.
    let bystander = restarts(&v) - began;
    assert!(
        bystander >= 5,
        "the bystander restarted {bystander} times in 20 s"
    );
    assert!(
        slowest < patient(Duration::from_secs(2)),
        "status took {slowest:?}"
    );
}
