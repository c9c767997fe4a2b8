//! `vigil logs -f` and `vigil events -f` as an operator runs them: they go on across
//! `vigil upgrade` and a restart of vigil, with no line or event missing or printed twice
//! (issue 36); several pods' logs as one stream, each line prefixed (issue 38.5); messages
//! that say what to do (issue 38.6). docs/interface.md §1, §2.4.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{BIN, Vigil, patient, write_config};

const T: Duration = Duration::from_secs(30);

/// A CLI process whose stdout and stderr are collected as they come.
struct Cli {
    child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
}

impl Cli {
    fn spawn(socket: &Path, args: &[&str]) -> Cli {
        let mut child = Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(socket)
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the cli");
        let collect = |mut from: Box<dyn Read + Send>| {
            let into = Arc::new(Mutex::new(String::new()));
            let to = Arc::clone(&into);
            std::thread::spawn(move || {
                let mut r = BufReader::new(&mut from);
                loop {
                    let mut line = String::new();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => to.lock().unwrap().push_str(&line),
                    }
                }
            });
            into
        };
        let out = collect(Box::new(child.stdout.take().unwrap()));
        let err = collect(Box::new(child.stderr.take().unwrap()));
        Cli { child, out, err }
    }

    fn out(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    fn err(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    fn wait_out(&self, what: &str, mut cond: impl FnMut(&str) -> bool) {
        let deadline = Instant::now() + patient(T);
        while Instant::now() < deadline {
            if cond(&self.out()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "waiting for {what}: stdout:\n{}\nstderr:\n{}",
            self.out(),
            self.err()
        );
    }

    fn still_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The numbers of whole `n N` lines, in order.
fn numbers(text: &str) -> Vec<u64> {
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    whole
        .lines()
        .filter_map(|l| l.strip_prefix("n ")?.trim().parse().ok())
        .collect()
}

/// Asserts `ns` is consecutive: no gap, no duplicate.
fn assert_consecutive(ns: &[u64], what: &str) {
    for w in ns.windows(2) {
        assert_eq!(w[1], w[0] + 1, "{what}: {} then {} in {ns:?}", w[0], w[1]);
    }
}

/// A counter printing `n 1`, `n 2`, … every 20 ms, and a container crashing every 0.3 s
/// (events all the time).
const BUSY: &str = r#"
[pods.count]
[[pods.count.containers]]
name = "c"
command = ["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo \"n $i\"; sleep 0.02; done"]

[pods.crash]
backoff = { initial_seconds = 0.1, max_seconds = 0.2 }
[[pods.crash.containers]]
name = "c"
command = ["/bin/sh", "-c", "sleep 0.3; exit 3"]
"#;

/// Events printed by `events -f -o json`: `(seq, reason, object)`.
fn followed_events(text: &str) -> Vec<(u64, String, String)> {
    text.lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            (
                e["seq"].as_u64().unwrap(),
                e["reason"].as_str().unwrap().to_string(),
                e["object"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every event the supervisor holds now with a `seq` from `first` on was printed by the
/// follower with that `seq` (no gap), and no `seq` was printed twice or out of order.
fn assert_no_event_gap_or_duplicate(v: &Vigil, printed: &[(u64, String, String)], first: u64) {
    for w in printed.windows(2) {
        assert!(w[1].0 > w[0].0, "out of order or twice: {w:?}");
    }
    let all = v.request(r#"{"cmd":"events"}"#)["result"]["events"].clone();
    let last_printed = printed.last().map_or(0, |e| e.0);
    for e in all.as_array().unwrap() {
        let seq = e["seq"].as_u64().unwrap();
        if seq < first || seq > last_printed {
            continue;
        }
        assert!(
            printed.iter().any(|p| p.0 == seq
                && p.1 == e["reason"].as_str().unwrap()
                && p.2 == e["object"].as_str().unwrap()),
            "event {seq} ({e}) was not printed: {printed:?}"
        );
    }
}

fn copy_of_vigil() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("vigil-next");
    std::fs::copy(BIN, &copy).unwrap();
    (dir, copy)
}

#[test]
fn logs_and_events_followers_go_on_across_two_upgrades_without_a_gap_or_a_duplicate() {
    let (_keep, next) = copy_of_vigil();
    let v = Vigil::start(BUSY);
    let mut logs = Cli::spawn(&v.socket, &["logs", "-f", "count/c"]);
    let mut events = Cli::spawn(&v.socket, &["events", "-f", "-o", "json"]);
    logs.wait_out("the first lines", |o| numbers(o).len() >= 5);
    events.wait_out("the first events", |o| o.lines().count() >= 3);
    let first_seq = followed_events(&events.out())[0].0;
    for round in 0..2 {
        let (before_logs, before_events) = (numbers(&logs.out()).len(), events.out().len());
        let out = v.cli(&["upgrade", "--binary", next.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        logs.wait_out("lines after the upgrade", |o| {
            numbers(o).len() >= before_logs + 20
        });
        events.wait_out("events after the upgrade", |o| {
            o.len() > before_events + 200
        });
        assert!(logs.still_running() && events.still_running());
    }
    let printed = numbers(&logs.out());
    assert_consecutive(&printed, "logs -f");
    assert!(
        logs.err().contains("reconnecting") && logs.err().contains("vigil is back"),
        "{}",
        logs.err()
    );
    // Let the events follower catch up with what vigil holds, then compare.
    std::thread::sleep(patient(Duration::from_millis(500)));
    let events_out = events.out();
    let printed = followed_events(&events_out[..events_out.rfind('\n').unwrap() + 1]);
    assert_no_event_gap_or_duplicate(&v, &printed, first_seq);
    assert!(events.err().contains("reconnecting"), "{}", events.err());
}

const TWO_PODS: &str = r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo \"web $i\"; sleep 0.05; done"]

[pods.db]
[[pods.db.containers]]
name = "postgres"
command = ["/bin/sh", "-c", "echo ready; i=0; while :; do i=$((i+1)); echo \"db $i\"; sleep 0.05; done"]
[[pods.db.containers]]
name = "metrics"
command = ["/bin/sh", "-c", "echo exporter up; exec sleep 600"]

[pods.other]
[[pods.other.containers]]
name = "quiet"
command = ["/bin/sh", "-c", "echo other; exec sleep 600"]
"#;

/// The lines of `text` whose prefix is `name`, without it.
fn lines_of<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| {
            let (prefix, rest) = l.split_once(" | ")?;
            (prefix.trim_end() == name).then_some(rest)
        })
        .collect()
}

#[test]
fn logs_of_several_pods_are_one_stream_with_each_line_prefixed_by_its_container() {
    let v = Vigil::start(TWO_PODS);
    v.wait_for(T, "output of every container", |v| {
        ["web", "db", "other"]
            .iter()
            .all(|p| v.request(&format!(r#"{{"cmd":"logs","pod":"{p}","tail":1}}"#))["ok"] == true)
    });
    let mut follow = Cli::spawn(&v.socket, &["logs", "-f", "web", "db", "--tail", "1"]);
    follow.wait_out("lines of web and db", |o| {
        lines_of(o, "web/app").len() >= 3 && lines_of(o, "db/postgres").len() >= 3
    });
    let out = follow.out();
    let whole = &out[..out.rfind('\n').unwrap() + 1];
    // Padded to the longest name, no colour (stdout is not a terminal), whole lines only.
    assert!(whole.contains("db/metrics  | exporter up\n"), "{whole}");
    assert!(!whole.contains('\x1b'), "{whole:?}");
    assert!(!whole.contains("other"), "{whole}");
    for l in whole.lines() {
        assert!(
            l.starts_with("web/app     | web ")
                || l.starts_with("db/postgres | db ")
                || l == "db/metrics  | exporter up",
            "{l:?} in\n{whole}"
        );
    }
    // Each container's lines in order, without a gap; `--tail 1`: no more than one old line.
    for (name, word) in [("web/app", "web "), ("db/postgres", "db ")] {
        let ns: Vec<u64> = lines_of(whole, name)
            .iter()
            .map(|l| l.strip_prefix(word).unwrap().parse().unwrap())
            .collect();
        assert_consecutive(&ns, name);
    }
    assert!(follow.still_running());
    // `--all`, without -f: every container's held output, prefixed.
    let out = v.cli(&["logs", "--all", "--tail", "1"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["web/app", "db/postgres", "db/metrics", "other/quiet"] {
        assert_eq!(lines_of(&text, name).len(), 1, "{name} in\n{text}");
    }
    assert_eq!(lines_of(&text, "other/quiet"), ["other"], "{text}");
}

#[test]
fn events_of_one_pod_are_only_that_pods() {
    let v = Vigil::start(TWO_PODS);
    v.wait_for(T, "events of both pods", |v| {
        let all = v.request(r#"{"cmd":"events"}"#).to_string();
        all.contains("\"web/app\"") && all.contains("\"db/postgres\"")
    });
    let out = v.cli(&["events", "db", "-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let objects: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["object"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(!objects.is_empty());
    assert!(
        objects.iter().all(|o| o == "db" || o.starts_with("db/")),
        "{objects:?}"
    );
}

#[test]
fn an_unknown_pod_name_gets_the_closest_one_suggested() {
    let v = Vigil::start(TWO_PODS);
    for args in [
        &["logs", "wep"][..],
        &["describe", "wep"],
        &["restart", "wep"],
        &["events", "wep"],
        &["logs", "-f", "wep", "db"],
    ] {
        let out = v.cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "error: no pod named \"wep\" (did you mean \"web\"?)\n",
            "{args:?}"
        );
    }
    let out = v.cli(&["logs", "nothing-like-it"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: no pod named \"nothing-like-it\"\n"
    );
}

#[test]
fn a_restart_wait_that_times_out_says_what_it_was_waiting_for() {
    let v = Vigil::start(
        r#"
[pods.db]
[[pods.db.containers]]
name = "postgres"
command = ["sleep", "600"]
readiness_probe = { exec = { command = ["false"] }, period_seconds = 1 }
"#,
    );
    let out = v.cli(&["restart", "db", "--wait", "--timeout", "2s"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: timed out after 2s waiting for db/postgres to ")
            && (err.contains("to be ready") || err.contains("to start")),
        "{err}"
    );
}

/// A restart of vigil: `kill -9`, then a new vigil on the same config and socket.
#[test]
fn logs_and_events_followers_go_on_across_a_kill_9_and_a_new_vigil() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = write_config(dir.path(), &socket, "", BUSY);
    let mut a = Vigil::start_with(tempfile::tempdir().unwrap(), socket.clone(), config.clone());
    let logs = Cli::spawn(&socket, &["logs", "-f", "count/c"]);
    let events = Cli::spawn(&socket, &["events", "-f", "-o", "json"]);
    logs.wait_out("the first lines", |o| numbers(o).len() >= 5);
    events.wait_out("the first events", |o| o.lines().count() >= 3);
    let mut child = a.child.take().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let before = numbers(&logs.out()).len();
    std::thread::sleep(Duration::from_millis(500));
    let b = Vigil::start_with(tempfile::tempdir().unwrap(), socket.clone(), config);
    logs.wait_out("lines from the new vigil", |o| {
        numbers(o).len() >= before + 20
    });
    events.wait_out("events from the new vigil", |o| {
        events.err().contains("vigil is back") && o.lines().count() >= 3
    });
    // The adopted counter goes on: what the new vigil read follows what the old one sent;
    // only what the old vigil had read and not sent (its ring died with it) may be missing,
    // and then the follower says so. Never a line twice, never out of order.
    let ns = numbers(&logs.out());
    for w in ns.windows(2) {
        assert!(w[1] > w[0], "{} then {}: {ns:?}", w[0], w[1]);
    }
    assert!(logs.err().contains("reconnecting"), "{}", logs.err());
    // Events: the old vigil's record (written at most every 250 ms) may end before the last
    // events it sent; then the new vigil's own events take those numbers again, and the
    // follower said which ones it had seen were lost. Otherwise the numbers only grow.
    let out = events.out();
    let printed = followed_events(&out[..out.rfind('\n').unwrap() + 1]);
    let back = printed.windows(2).position(|w| w[1].0 <= w[0].0);
    if let Some(i) = back {
        assert!(
            events
                .err()
                .contains("are not in its record and cannot be shown again"),
            "{printed:?}\n{}",
            events.err()
        );
        let after = &printed[i + 1..];
        for w in after.windows(2) {
            assert!(w[1].0 > w[0].0, "out of order or twice: {w:?}");
        }
    }
    for w in printed.windows(2) {
        assert_ne!(w[0], w[1], "printed twice");
    }
    drop(b);
}

#[test]
fn followers_end_at_once_with_a_notice_and_exit_0_when_vigil_shuts_down_cleanly() {
    let mut v = Vigil::start(BUSY);
    let mut logs = Cli::spawn(&v.socket, &["logs", "-f", "count/c"]);
    let mut events = Cli::spawn(&v.socket, &["events", "-f"]);
    logs.wait_out("the first lines", |o| numbers(o).len() >= 3);
    events.wait_out("the first events", |o| o.lines().count() >= 3);
    let out = v.cli(&["shutdown"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v.wait_exit(patient(T)), 0, "{}", v.log());
    // A clean shutdown is not an upgrade: nothing comes back, so the followers do not wait
    // the 60 s they would give a vigil that went away (a generous margin for a loaded host).
    let deadline = Instant::now() + patient(Duration::from_secs(10));
    for (name, cli) in [("logs -f", &mut logs), ("events -f", &mut events)] {
        let code = loop {
            if let Some(status) = cli.child.try_wait().unwrap() {
                break status.code();
            }
            assert!(
                Instant::now() < deadline,
                "{name} still waits after vigil shut down; stderr:\n{}",
                cli.err()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // Give the collecting threads a moment to read the last bytes.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(code, Some(0), "{name}; stderr:\n{}", cli.err());
        assert!(
            cli.err().contains("vigil: vigil shut down"),
            "{name}; stderr:\n{}",
            cli.err()
        );
        assert!(
            !cli.err().contains("reconnecting"),
            "{name}; stderr:\n{}",
            cli.err()
        );
    }
}
