//! `vigil upgrade`: vigil re-executes itself (a copy of the binary at another path) and
//! nothing is lost — same PIDs, restart counts and back-off, probes going on, logs
//! contiguous, a stopped pod still stopped, the socket accepting throughout, a child that
//! exits during the exec reaped with its real exit code; and a binary that cannot take over
//! changes nothing (docs/behaviour.md §12, docs/bad-input.md).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::common::{BIN, Vigil, alive, patient, state_reason};
use crate::faults::{ScratchCgroup, start_with_cgroup_root};

const T: Duration = Duration::from_secs(20);

/// A copy of the vigil binary at another path (what an operator installs as the new
/// version), in its own directory.
fn copy_of_vigil() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("vigil-next");
    std::fs::copy(BIN, &copy).unwrap();
    (dir, copy)
}

/// Asserts `a` and `b` are the same status, except that a time (an RFC 3339 string) may differ
/// by up to 1 ms: status shows a core instant through a wall-clock anchor read again for every
/// snapshot (`control::time::WallClock`), so two snapshots, with or without an upgrade between
/// them, can put the same instant on either side of a millisecond.
fn assert_same_status(a: &Value, b: &Value, what: &str) {
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
            }
            (Value::String(x), Value::String(y)) if x != y => {
                match (x.parse::<jiff::Timestamp>(), y.parse::<jiff::Timestamp>()) {
                    (Ok(p), Ok(q)) => {
                        p.duration_since(q).abs() <= jiff::SignedDuration::from_millis(1)
                    }
                    _ => false,
                }
            }
            _ => a == b,
        }
    }
    assert!(same(a, b), "{what}:\n{a}\n!=\n{b}");
}

fn vigil_pid(v: &Vigil) -> u32 {
    v.child.as_ref().unwrap().id()
}

fn exe_of(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
}

fn pid_of(c: &Value) -> Option<u64> {
    c["pid"].as_u64()
}

/// `vigil upgrade ARGS` through the CLI: (success, stdout + stderr).
fn upgrade(v: &Vigil, args: &[&str]) -> (bool, String) {
    let mut all = vec!["upgrade"];
    all.extend_from_slice(args);
    let out = v.cli(&all);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `vigil upgrade --binary NEXT`, which must succeed (else the failure shows the CLI's output
/// and vigil's log); returns the CLI's output.
fn upgrade_to(v: &Vigil, next: &Path) -> String {
    let (ok, text) = upgrade(v, &["--binary", next.to_str().unwrap()]);
    assert!(
        ok,
        "upgrade to {} failed: {text}\n{}",
        next.display(),
        v.log()
    );
    text
}

/// Waits until `pod/c` runs (has a pid); returns the pid.
fn wait_running(v: &Vigil, pod: &str, c: &str) -> u64 {
    v.wait_for(T, &format!("{pod}/{c} running"), |v| {
        pid_of(&v.container(pod, c)).is_some()
    });
    pid_of(&v.container(pod, c)).unwrap()
}

/// Waits until `pod/c` has no process (stopped, or killed and not restarted).
fn wait_no_process(v: &Vigil, pod: &str, c: &str, what: &str) {
    v.wait_for(T, what, |v| pid_of(&v.container(pod, c)).is_none());
}

/// A vigil running one idle container `idle/c`; returns it and that container's pid.
fn start_idle() -> (Vigil, u64) {
    let v = Vigil::start(&format!(
        "[pods.idle]\n[[pods.idle.containers]]\nname = \"c\"\ncommand = {SLEEPING}\n"
    ));
    let pid = wait_running(&v, "idle", "c");
    (v, pid)
}

/// Connects over and over until stopped; counts refused connects (never expected: the
/// listening socket is inherited, so the kernel queues connections during the exec).
struct Poller {
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU32>,
    answered: Arc<AtomicU32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Poller {
    fn start(socket: &Path) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicU32::new(0));
        let answered = Arc::new(AtomicU32::new(0));
        let (s, r, a, path) = (
            stop.clone(),
            refused.clone(),
            answered.clone(),
            socket.to_path_buf(),
        );
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match UnixStream::connect(&path) {
                    Err(_) => {
                        r.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(mut c) => {
                        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                        let _ = c.write_all(b"{\"cmd\":\"version\"}\n");
                        let mut line = String::new();
                        // A connection open at the exec is told and closed: fine.
                        if BufReader::new(c).read_line(&mut line).is_ok()
                            && line.contains("\"ok\":true")
                        {
                            a.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Poller {
            stop,
            refused,
            answered,
            thread: Some(thread),
        }
    }

    /// (refused, answered)
    fn finish(mut self) -> (u32, u32) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        (
            self.refused.load(Ordering::Relaxed),
            self.answered.load(Ordering::Relaxed),
        )
    }
}

/// The numbered lines `chat` wrote, as numbers.
/// vigil's descriptors open on files of the cgroup whose path contains `part`: (number, path).
fn cgroup_fds(pid: u32, part: &str) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            let s = target.to_string_lossy();
            (s.contains(part) || s.ends_with(part.trim_end_matches('/')))
                .then(|| (e.file_name().to_string_lossy().into_owned(), target))
        })
        .collect();
    out.sort();
    out
}

fn chat_numbers(v: &Vigil) -> Vec<u64> {
    let out = v.cli(&["logs", "chat"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("n ")?.trim().parse().ok())
        .collect()
}

fn last_probe_time(c: &Value) -> String {
    c["probes"][0]["recent"]
        .as_array()
        .and_then(|r| r.last())
        .map(|a| a["time"].to_string())
        .unwrap_or_default()
}

const MIX: &str = r#"
[pods.crash]
[[pods.crash.containers]]
name = "loop"
command = ["/bin/sh", "-c", "sleep 0.2; exit 3"]

[pods.web]
[[pods.web.containers]]
name = "app"
command = ["/bin/sleep", "1000"]
[pods.web.containers.readiness_probe]
exec = { command = ["/bin/true"] }
period_seconds = 1

[pods.chat]
[[pods.chat.containers]]
name = "talk"
command = ["/bin/sh", "-c", "i=0; while true; do i=$((i+1)); echo \"n $i\"; sleep 0.01; done"]

[pods.held]
[[pods.held.containers]]
name = "idle"
command = ["/bin/sleep", "1000"]

[pods.late]
[[pods.late.containers]]
name = "idle"
command = ["/bin/sleep", "1001"]
"#;

#[test]
#[ignore = "needs root"]
fn an_upgrade_keeps_pids_restart_counts_back_off_probes_logs_and_the_stopped_pod() {
    let cg = ScratchCgroup::new();
    let v = start_with_cgroup_root(&cg, MIX);
    let (_keep, next) = copy_of_vigil();
    let me = vigil_pid(&v);

    // The crash loop in back-off after its second failure (the first restart is at once).
    v.wait_for(T, "crash/loop in back-off", |v| {
        let c = v.container("crash", "loop");
        c["restart_count"] == 1 && state_reason(&c) == "CrashLoopBackOff"
    });
    v.wait_for(T, "web/app ready", |v| {
        v.container("web", "app")["ready"] == true
    });
    v.wait_for(T, "chat/talk talking", |v| chat_numbers(v).len() > 20);
    assert!(v.cli(&["stop", "held"]).status.success());
    wait_no_process(&v, "held", "idle", "held stopped");
    assert!(v.cli(&["stop", "late"]).status.success());
    wait_no_process(&v, "late", "idle", "late stopped");

    let before = v.status();
    let crash = v.container("crash", "loop");
    let web = v.container("web", "app");
    let chat = v.container("chat", "talk");
    let probe_before = last_probe_time(&web);
    let fds_before = std::fs::read_dir(format!("/proc/{me}/fd")).unwrap().count();
    let cgroup_fds_before = cgroup_fds(me, "/web/app/");
    assert!(cgroup_fds_before.len() >= 3, "{cgroup_fds_before:?}");

    let poller = Poller::start(&v.socket);
    let text = upgrade_to(&v, &next);
    assert!(text.contains("upgraded"), "{text}");
    // The socket answered again after the exec, and never refused a connection.
    v.wait_for(T, "an answer after the upgrade", |v| {
        v.try_request(r#"{"cmd":"version"}"#).is_some()
    });
    std::thread::sleep(Duration::from_millis(100));
    let (refused, answered) = poller.finish();
    assert_eq!(refused, 0, "connections refused during the upgrade");
    assert!(answered > 0);

    // Same process, now running the new binary.
    assert_eq!(vigil_pid(&v), me);
    assert_eq!(exe_of(me), next);

    // Same containers, same counts; the crash loop still waits out the same back-off.
    let crash_after = v.container("crash", "loop");
    assert_eq!(crash_after["restart_count"], crash["restart_count"]);
    assert_same_status(&crash_after["state"], &crash["state"], "back-off position");
    assert_same_status(
        &crash_after["last_state"],
        &crash["last_state"],
        "crash last_state",
    );
    for (pod, c, was) in [("web", "app", &web), ("chat", "talk", &chat)] {
        let now = v.container(pod, c);
        assert_eq!(pid_of(&now), pid_of(was), "{pod}/{c} pid");
        assert!(pid_of(&now).is_some());
        assert_eq!(now["restart_count"], was["restart_count"], "{pod}/{c}");
        assert_same_status(&now["state"], &was["state"], &format!("{pod}/{c}"));
    }
    // The stopped pod stays stopped.
    let held = v.container("held", "idle");
    assert!(pid_of(&held).is_none(), "{held}");
    let held_before = before["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "held")
        .unwrap()["containers"][0]["state"]
        .clone();
    assert_same_status(&held["state"], &held_before, "the stopped pod");
    // Nothing leaked: the new instance holds no more descriptors than the old one did (an exec
    // probe in flight holds a pipe for a moment: a leak stays, that pipe goes).
    let fd_count = || std::fs::read_dir(format!("/proc/{me}/fd")).unwrap().count();
    v.wait_for(T, &format!("no more than {fds_before} descriptors"), |_| {
        fd_count() <= fds_before
    });

    // The running containers' cgroups were handed over as open descriptors (the same
    // numbers, the same files), not looked up again by path.
    assert_eq!(cgroup_fds(me, "/web/app/"), cgroup_fds_before);

    // Probes go on (a new attempt, still ready).
    v.wait_for(T, "a probe attempt after the upgrade", |v| {
        last_probe_time(&v.container("web", "app")) != probe_before
    });
    assert_eq!(v.container("web", "app")["ready"], true);

    // Logs contiguous: every number once, in order, across the exec.
    let n_at_upgrade = chat_numbers(&v).len();
    v.wait_for(T, "more chat after the upgrade", |v| {
        chat_numbers(v).len() > n_at_upgrade + 20
    });
    let numbers = chat_numbers(&v);
    for w in numbers.windows(2) {
        assert_eq!(w[1], w[0] + 1, "gap or repeat in chat/talk's log");
    }

    // The back-off deadline fires: the crash loop restarts (count goes up), by the new
    // instance's timers.
    v.wait_for(Duration::from_secs(40), "crash/loop restarted", |v| {
        v.container("crash", "loop")["restart_count"].as_u64() > crash["restart_count"].as_u64()
    });

    // A container started by the new instance inherits none of the handed-over descriptors.
    assert!(v.cli(&["start", "late"]).status.success());
    let late = wait_running(&v, "late", "idle");
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{late}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(fds.len(), 3, "late/idle holds {fds:?}");
    assert!(
        v.log().contains("upgrade: upgraded from vigil"),
        "{}",
        v.log()
    );
    drop(v);
}

#[test]
fn a_container_that_exits_during_the_exec_is_reaped_with_its_exit_code() {
    let (_keep, next) = copy_of_vigil();
    // Exits 7 as soon as its parent (vigil) runs the new binary: during the new instance's
    // start-up, before it has reaped anything.
    let pods = format!(
        r#"
[pods.exiter]
restart_policy = "Never"
[[pods.exiter.containers]]
name = "seven"
command = ["/bin/sh", "-c", "while [ \"$(readlink /proc/$PPID/exe)\" != \"{}\" ]; do sleep 0.005; done; exit 7"]
"#,
        next.display()
    );
    let v = Vigil::start(&pods);
    wait_running(&v, "exiter", "seven");
    upgrade_to(&v, &next);
    v.wait_for(T, "exiter terminated", |v| {
        !v.container("exiter", "seven")["state"]["terminated"].is_null()
    });
    let c = v.container("exiter", "seven");
    assert_eq!(c["state"]["terminated"]["exit_code"], 7, "{c}");
    assert_eq!(c["state"]["terminated"]["reason"], "Error", "{c}");
}

#[test]
fn sigusr2_re_executes_the_binary_vigil_was_started_from() {
    let (v, pid) = start_idle();
    let pid = Some(pid);
    let me = vigil_pid(&v);
    let st = std::process::Command::new("kill")
        .args(["-USR2", &me.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    v.wait_for(T, "the upgrade to be logged", |v| {
        v.log().contains("upgrade: upgraded from vigil")
    });
    assert_eq!(pid_of(&v.container("idle", "c")), pid);
    assert_eq!(exe_of(me), Path::new(BIN).canonicalize().unwrap());
}

/// 64 bytes of an ELF header for `machine` (elf(5)), nothing after.
fn elf_header(machine: u16) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2; // 64-bit
    h[5] = 1; // little-endian
    h[6] = 1;
    h[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    h[18..20].copy_from_slice(&machine.to_le_bytes());
    h
}

#[test]
fn a_binary_that_cannot_take_over_changes_nothing_and_says_why() {
    let (v, pid) = start_idle();
    let pid = Some(pid);
    let me = vigil_pid(&v);
    let exe = exe_of(me);
    let dir = tempfile::tempdir().unwrap();
    let write_exec = |name: &str, bytes: &[u8]| {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let ours_is_arm = cfg!(target_arch = "aarch64");
    let other_machine = if ours_is_arm { 62 } else { 183 };
    let cases: Vec<(PathBuf, &str)> = vec![
        (dir.path().join("missing"), "No such file"),
        (
            write_exec("text", b"just some text\n"),
            "not an ELF executable",
        ),
        (
            write_exec("script", b"#!/bin/sh\nexec vigil \"$@\"\n"),
            "not an ELF executable",
        ),
        (
            write_exec("other-arch", &elf_header(other_machine)),
            "built for another machine",
        ),
        (dir.path().to_path_buf(), "not a regular file"),
        // An ELF executable of this machine that is not a vigil.
        (PathBuf::from("/bin/true"), "--handoff-version"),
    ];
    for (binary, says) in &cases {
        for check in [false, true] {
            let mut args = vec!["--binary", binary.to_str().unwrap()];
            if check {
                args.push("--check");
            }
            let (ok, text) = upgrade(&v, &args);
            assert!(!ok, "{} was accepted: {text}", binary.display());
            assert!(text.contains(says), "{}: {text}", binary.display());
            assert!(
                text.contains(binary.to_str().unwrap()),
                "the error names the binary: {text}"
            );
        }
        assert_eq!(exe_of(me), exe, "vigil changed binary");
        assert_eq!(pid_of(&v.container("idle", "c")), pid);
    }
    // A non-executable copy of vigil itself.
    let (_keep, next) = copy_of_vigil();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (ok, text) = upgrade(&v, &["--binary", next.to_str().unwrap()]);
    assert!(!ok && text.contains("not executable"), "{text}");
    // `--check` on a good binary says so and does nothing.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (ok, text) = upgrade(&v, &["--check", "--binary", next.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("would keep every container"), "{text}");
    assert_eq!(exe_of(me), exe);
    assert_eq!(pid_of(&v.container("idle", "c")), pid);
    assert!(!v.log().contains("upgrade: executing"), "{}", v.log());
}

#[test]
fn a_new_vigil_answers_which_handoff_formats_it_reads() {
    let out = std::process::Command::new(BIN)
        .arg("--handoff-version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["writes"], 2);
    // The first format stays readable (an upgrade from a vigil that wrote it).
    let reads = v["reads"].as_array().unwrap();
    assert!(reads.contains(&Value::from(1)) && reads.contains(&Value::from(2)));
}

#[test]
fn an_upgrade_while_an_http_hook_request_is_in_flight_is_refused_until_it_is_done() {
    let (_keep, next) = copy_of_vigil();
    // Accepts the hook's connection and answers only when told: the request stays in flight.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let v = Vigil::start(&format!(
        r#"
[pods.hooked]
[[pods.hooked.containers]]
name = "c"
command = ["/bin/sleep", "1000"]
[pods.hooked.containers.lifecycle.post_start]
http_get = {{ port = {port}, path = "/" }}
"#
    ));
    let (mut conn, _) = listener.accept().unwrap();
    let me = vigil_pid(&v);
    let exe = exe_of(me);
    let (ok, text) = upgrade(&v, &["--binary", next.to_str().unwrap()]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("http_get lifecycle hook is in flight"),
        "{text}"
    );
    assert_eq!(exe_of(me), exe);
    // Once the hook is answered, the same upgrade goes through.
    conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .unwrap();
    drop(conn);
    v.wait_for(T, "the hook done", |v| {
        v.container("hooked", "c")["started"] == true
    });
    upgrade_to(&v, &next);
    assert_eq!(exe_of(me), next);
}

/// A container command that only waits.
const SLEEPING: &str = r#"["/bin/sleep", "1000"]"#;

/// A pod `hooked` (`extra` lines in its table) of one container `c` running `command` (a TOML
/// array) with an exec lifecycle hook of `kind` (`post_start`, `pre_stop`) running `script`
/// with `sh -c`.
fn hooked_pod(extra: &str, command: &str, kind: &str, script: &str) -> String {
    format!(
        "[pods.hooked]\n{extra}\n[[pods.hooked.containers]]\nname = \"c\"\ncommand = {command}\n\
         [pods.hooked.containers.lifecycle.{kind}]\nexec = {{ command = [\"/bin/sh\", \"-c\", {script:?}] }}\n"
    )
}

/// The files of a test whose hooks report and wait: `m`, the marks a hook or the container
/// appends, and `gate`, whose creation lets a waiting hook go on.
struct Marks {
    dir: tempfile::TempDir,
    m: PathBuf,
    gate: PathBuf,
}

impl Marks {
    fn new() -> Marks {
        let dir = tempfile::tempdir().unwrap();
        let (m, gate) = (dir.path().join("marks"), dir.path().join("gate"));
        Marks { dir, m, gate }
    }

    /// Another file in the same directory.
    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The lines written so far (none when the file is missing).
    fn read(&self) -> Vec<String> {
        std::fs::read_to_string(&self.m)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A hook script that marks `first`, waits for the gate, then runs `then`.
    fn gated(&self, first: &str, then: &str) -> String {
        format!(
            "echo {first} >> {m}; while [ ! -e {g} ]; do sleep 0.05; done; {then}",
            m = self.m.display(),
            g = self.gate.display()
        )
    }

    fn open_gate(&self) {
        std::fs::write(&self.gate, "").unwrap();
    }

    /// Waits until the marks are `want` (a hook reached that point).
    fn wait(&self, v: &Vigil, what: &str, want: &[&str]) {
        v.wait_for(T, what, |_| self.read() == want);
    }
}

/// The reasons of the events about `object` (`pod/container`).
fn event_reasons(v: &Vigil, object: &str) -> Vec<String> {
    v.request(r#"{"cmd":"events"}"#)["result"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|e| e["object"] == object)
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn an_exec_post_start_hook_running_at_the_upgrade_is_finished_once_by_the_new_vigil() {
    let (_keep, next) = copy_of_vigil();
    let marks = Marks::new();
    let hook = marks.gated(
        "start",
        &format!("echo end >> {}; echo hook done", marks.m.display()),
    );
    let v = Vigil::start(&hooked_pod("", SLEEPING, "post_start", &hook));
    marks.wait(&v, "the hook running", &["start"]);
    let pid = pid_of(&v.container("hooked", "c")).unwrap();
    assert_eq!(v.container("hooked", "c")["started"], false);
    let me = vigil_pid(&v);
    upgrade_to(&v, &next);
    assert_eq!(exe_of(me), next);
    // The hook still runs (the core waits for it): not started, not run again.
    assert_eq!(v.container("hooked", "c")["started"], false);
    assert_eq!(marks.read(), ["start"]);
    marks.open_gate();
    // The new instance reaps it and the run goes on as after any successful post-start hook.
    v.wait_for(T, "the hook done", |v| {
        v.container("hooked", "c")["started"] == true
    });
    let c = v.container("hooked", "c");
    assert_eq!(pid_of(&c), Some(pid));
    assert_eq!(c["restart_count"], 0);
    assert_eq!(marks.read(), ["start", "end"], "the hook ran once");
    assert!(
        !event_reasons(&v, "hooked/c").contains(&"FailedPostStartHook".to_string()),
        "{}",
        v.log()
    );
}

#[test]
fn an_exec_post_start_hook_that_fails_after_the_upgrade_kills_the_container_as_before() {
    let (_keep, next) = copy_of_vigil();
    let marks = Marks::new();
    let hook = marks.gated("start", "echo refused by the hook; exit 3");
    let v = Vigil::start(&hooked_pod(
        r#"restart_policy = "Never""#,
        SLEEPING,
        "post_start",
        &hook,
    ));
    marks.wait(&v, "the hook running", &["start"]);
    upgrade_to(&v, &next);
    marks.open_gate();
    v.wait_for(T, "the container killed for the failed hook", |v| {
        pid_of(&v.container("hooked", "c")).is_none()
            && event_reasons(v, "hooked/c").contains(&"FailedPostStartHook".to_string())
    });
    let events = v.request(r#"{"cmd":"events"}"#).to_string();
    // The output the hook wrote after the exec is in the message (read by the new instance).
    assert!(events.contains("refused by the hook"), "{events}");
    assert_eq!(marks.read(), ["start"], "the hook ran once");
}

#[test]
fn an_exec_pre_stop_hook_running_at_the_upgrade_is_finished_then_the_stop_signal_follows() {
    let (_keep, next) = copy_of_vigil();
    let marks = Marks::new();
    let m = marks.m.display();
    let v = Vigil::start(&hooked_pod(
        "termination_grace_period_seconds = 60",
        &format!(
            r#"["/bin/sh", "-c", "trap 'echo term >> {m}; exit 0' TERM; while :; do sleep 0.05; done"]"#
        ),
        "pre_stop",
        &marks.gated("pre-stop", &format!("echo pre-stop-end >> {m}")),
    ));
    let pid = wait_running(&v, "hooked", "c");
    assert!(v.cli(&["stop", "hooked"]).status.success());
    marks.wait(&v, "the pre-stop hook running", &["pre-stop"]);
    upgrade_to(&v, &next);
    // Still running, no stop signal yet: the hook is not done.
    assert_eq!(pid_of(&v.container("hooked", "c")), Some(pid));
    assert_eq!(marks.read(), ["pre-stop"]);
    marks.open_gate();
    wait_no_process(&v, "hooked", "c", "stopped");
    // The hook ran once, to its end, and the stop signal came after it.
    assert_eq!(marks.read(), ["pre-stop", "pre-stop-end", "term"]);
    let c = v.container("hooked", "c");
    assert_eq!(c["state"]["terminated"]["exit_code"], 0, "{c}");
}

#[test]
fn a_pre_stop_hook_carried_over_is_still_cut_off_at_the_grace_period_set_before_the_upgrade() {
    let (_keep, next) = copy_of_vigil();
    let marks = Marks::new();
    let (m, hook_pid) = (&marks.m, marks.file("hook.pid"));
    let v = Vigil::start(&hooked_pod(
        "termination_grace_period_seconds = 3",
        r#"["/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"]"#,
        "pre_stop",
        &format!(
            "echo $$$$ > {p}; echo pre-stop >> {m}; exec sleep 1000",
            m = m.display(),
            p = hook_pid.display()
        ),
    ));
    wait_running(&v, "hooked", "c");
    assert!(v.cli(&["stop", "hooked"]).status.success());
    marks.wait(&v, "the pre-stop hook running", &["pre-stop"]);
    let hook: u64 = std::fs::read_to_string(&hook_pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    upgrade_to(&v, &next);
    assert!(alive(hook), "the hook must run on across the exec");
    // The grace period's deadline came over with the core: the new instance cuts the hook off
    // and kills the container (which ignores SIGTERM) when it ends, as the old one would.
    wait_no_process(&v, "hooked", "c", "killed at the end of the grace period");
    let c = v.container("hooked", "c");
    assert_eq!(c["state"]["terminated"]["signal"], 9, "{c}");
    v.wait_for(T, "the hook's process gone", |_| !alive(hook));
    assert_eq!(marks.read(), ["pre-stop"]);
}

#[test]
fn an_upgrade_during_a_shutdown_is_refused() {
    let (_keep, next) = copy_of_vigil();
    let v = Vigil::start(
        r#"
[pods.slow]
termination_grace_period_seconds = 5
[[pods.slow.containers]]
name = "c"
command = ["/bin/sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"]
"#,
    );
    wait_running(&v, "slow", "c");
    let me = vigil_pid(&v);
    let exe = exe_of(me);
    let r = v.request(r#"{"cmd":"shutdown"}"#);
    assert_eq!(r["ok"], true, "{r}");
    let line = format!(
        r#"{{"cmd":"upgrade","binary":"{}"}}"#,
        next.to_str().unwrap()
    );
    let r = v.request(&line);
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"]["kind"], "shutting_down", "{r}");
    assert_eq!(exe_of(me), exe);
}

#[test]
fn a_logs_follower_across_an_upgrade_gets_whole_lines_then_the_notice_or_an_early_end() {
    let (_keep, next) = copy_of_vigil();
    // Long log lines, fast, and a follower that reads slowly: the stream is backed up, part
    // of a reply line unsent, when the upgrade comes; the follower goes on reading meanwhile,
    // so the new vigil's notice would land right after whatever the old one had sent.
    let v = Vigil::start(
        r#"
[pods.chatty]
[[pods.chatty.containers]]
name = "talk"
command = ["/bin/sh", "-c", "s=$(head -c 6000 /dev/zero | tr '\\0' x); while :; do echo \"$s\"; done"]
"#,
    );
    wait_running(&v, "chatty", "talk");
    for round in 0..3 {
        let follower = UnixStream::connect(&v.socket).unwrap();
        // A guard against a hang, not a figure.
        follower.set_read_timeout(Some(T)).unwrap();
        (&follower)
            .write_all(b"{\"cmd\":\"logs\",\"pod\":\"chatty\",\"container\":\"talk\",\"follow\":true,\"id\":5}\n")
            .unwrap();
        let reader = std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(512, &follower);
            let mut lines = Vec::new();
            loop {
                let mut line = String::new();
                let n = reader
                    .read_line(&mut line)
                    .unwrap_or_else(|e| panic!("round {round}: the follower's stream: {e}"));
                if n == 0 {
                    return lines;
                }
                lines.push(line);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let (ok, text) = upgrade(&v, &["--binary", next.to_str().unwrap()]);
        assert!(ok, "round {round}: {text}\n{}", v.log());
        let lines = reader.join().unwrap();
        assert!(!lines.is_empty(), "round {round}: the follower saw nothing");
        let mut last = Value::Null;
        for (i, line) in lines.iter().enumerate() {
            if !line.ends_with('\n') {
                // EOF within a line the old vigil could not finish sending: the last thing.
                assert_eq!(i + 1, lines.len(), "round {round}");
                break;
            }
            last = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!(
                    "round {round}: line {i} is not whole JSON: {e}: …{}",
                    &line[line.len().saturating_sub(300)..]
                )
            });
        }
        if last["ok"] == false {
            assert_eq!(last["error"]["kind"], "busy", "round {round}: {last}");
        }
    }
    // The new vigil still serves the log.
    let r = v.request(r#"{"cmd":"logs","pod":"chatty","container":"talk","tail":1}"#);
    assert_eq!(r["ok"], true, "{r}");
}

/// What a fake "new vigil" (a small ELF program, [`fake_vigil`]) does.
#[derive(Clone, Copy)]
enum Fake {
    /// Appends a line to its marker file, then becomes the real vigil (same arguments and
    /// environment): the whole upgrade works, and the marker shows the binary ran.
    Marks,
    /// As `Marks`, but given a handoff (`VIGIL_HANDOFF_FD`: taking over) it exits 1 ...
    ExitsTakingOver,
    /// ... aborts (SIGABRT) ...
    AbortsTakingOver,
    /// ... or hangs for good.
    HangsTakingOver,
    /// Answers `--handoff-version` and `--handoff-check` as the real vigil does (it passes the
    /// pre-flight), then, executed with the handoff to take over, aborts (SIGABRT) ...
    AbortsAfterTheExec,
    /// ... exits 0 ...
    ExitsZeroAfterTheExec,
    /// ... or hangs for good (holding the socket and every descriptor handed over).
    HangsAfterTheExec,
    /// Sleeps 4 s before answering `--handoff-version` (then answers as the real vigil does).
    SlowToAnswerItsVersion,
}

/// Compiles a fake new vigil into `dir` (scripts are refused as upgrade binaries, so it is
/// C, built with `cc`): it behaves as `fake` says; `marker` records each run with its uid.
fn fake_vigil(dir: &Path, name: &str, fake: Fake, marker: &Path) -> PathBuf {
    crate::common::require_program("cc", "--version", "gcc");
    let body = match fake {
        Fake::Marks => "",
        Fake::ExitsTakingOver => r#"if (getenv("VIGIL_HANDOFF_FD")) return 1;"#,
        Fake::AbortsTakingOver => r#"if (getenv("VIGIL_HANDOFF_FD")) abort();"#,
        Fake::HangsTakingOver => r#"if (getenv("VIGIL_HANDOFF_FD")) for (;;) pause();"#,
        Fake::AbortsAfterTheExec => r#"if (getenv("VIGIL_HANDOFF_FD") && !checking) abort();"#,
        Fake::ExitsZeroAfterTheExec => r#"if (getenv("VIGIL_HANDOFF_FD") && !checking) return 0;"#,
        Fake::SlowToAnswerItsVersion => {
            r#"if (argc > 1 && strcmp(argv[1], "--handoff-version") == 0) sleep(4);"#
        }
        Fake::HangsAfterTheExec => {
            r#"if (getenv("VIGIL_HANDOFF_FD") && !checking) for (;;) pause();"#
        }
    };
    let src = dir.join(format!("{name}.c"));
    std::fs::write(
        &src,
        format!(
            r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {{
    FILE *f = fopen("{marker}", "a");
    if (f) {{ fprintf(f, "ran as uid %d: %s\n", (int)geteuid(), argc > 1 ? argv[1] : ""); fclose(f); }}
    int checking = argc > 1 && strcmp(argv[1], "--handoff-check") == 0;
    (void)checking;
    {body}
    execv("{vigil}", argv);
    return 127;
}}
"#,
            marker = marker.display(),
            vigil = BIN,
        ),
    )
    .unwrap();
    let out_path = dir.join(name);
    let out = std::process::Command::new("cc")
        .arg("-O")
        .arg("-o")
        .arg(&out_path)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&src).unwrap();
    out_path
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// An admin uid of the test (listed in `admin_uids`, not root).
const ADMIN_UID: u32 = 60010;

#[test]
#[ignore = "needs root (acts as another uid)"]
fn an_admin_uid_cannot_make_vigil_run_a_binary_of_its_own_and_the_binary_never_runs() {
    crate::common::require_root("to act as another uid");
    crate::common::require_program("setpriv", "--version", "util-linux");
    let v = Vigil::start_shared(
        &format!("admin_uids = [{ADMIN_UID}]"),
        &format!("[pods.idle]\n[[pods.idle.containers]]\nname = \"c\"\ncommand = {SLEEPING}\n"),
    );
    let pid = wait_running(&v, "idle", "c");
    let me = vigil_pid(&v);
    let exe = exe_of(me);
    // The admin's own directory and its own ELF, which would take over as root.
    let home = tempfile::tempdir().unwrap();
    chmod(home.path(), 0o755);
    let marks = tempfile::tempdir().unwrap();
    chmod(marks.path(), 0o777);
    let marker = marks.path().join("ran");
    let theirs = fake_vigil(home.path(), "vigil-new", Fake::Marks, &marker);
    chown(home.path(), ADMIN_UID);
    chown(&theirs, ADMIN_UID);
    let as_admin = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid",
                &ADMIN_UID.to_string(),
                "--regid",
                &ADMIN_UID.to_string(),
                "--clear-groups",
                BIN,
            ])
            .args(args)
            .arg("--socket")
            .arg(&v.socket)
            .output()
            .unwrap()
    };
    // The admin may still stop and start (admin_uids works) ...
    let out = as_admin(&["version"]);
    assert!(out.status.success(), "{out:?}");
    for args in [
        vec!["upgrade", "--binary", theirs.to_str().unwrap()],
        vec!["upgrade", "--check", "--binary", theirs.to_str().unwrap()],
    ] {
        let out = as_admin(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted: {err}");
        assert!(err.contains("needs root or vigil's own uid"), "{err}");
    }
    assert!(
        !marker.exists(),
        "the admin's binary ran: {:?}",
        std::fs::read_to_string(&marker)
    );
    assert_eq!(exe_of(me), exe, "vigil changed binary");
    assert_eq!(pid_of(&v.container("idle", "c")), Some(pid));
    assert!(
        v.log().contains("refused upgrade --binary from pid"),
        "{}",
        v.log()
    );

    // Root asking for the same file is refused too: the admin owns it (and its directory).
    let (ok, text) = upgrade(&v, &["--check", "--binary", theirs.to_str().unwrap()]);
    assert!(
        !ok && text.contains("owned by a user other than root"),
        "{text}"
    );
    // A root-owned binary in the admin's directory: the admin could rename another in its place.
    let in_their_dir = fake_vigil(home.path(), "vigil-root", Fake::Marks, &marker);
    chown(&in_their_dir, 0);
    let (ok, text) = upgrade(&v, &["--check", "--binary", in_their_dir.to_str().unwrap()]);
    assert!(
        !ok && text.contains("owned by a user other than root"),
        "{text}"
    );
    // A root-owned binary anyone may write.
    let ours = tempfile::tempdir().unwrap();
    let open_to_all = fake_vigil(ours.path(), "vigil-0777", Fake::Marks, &marker);
    chmod(&open_to_all, 0o777);
    let (ok, text) = upgrade(&v, &["--check", "--binary", open_to_all.to_str().unwrap()]);
    assert!(!ok && text.contains("writable by others"), "{text}");
    assert!(
        !marker.exists(),
        "a refused binary ran: {:?}",
        std::fs::read_to_string(&marker)
    );
    assert_eq!(pid_of(&v.container("idle", "c")), Some(pid));

    // Root with a binary only root can change: the upgrade goes through it.
    let good = fake_vigil(ours.path(), "vigil-good", Fake::Marks, &marker);
    let text = upgrade_to(&v, &good);
    assert!(text.contains("1 containers kept"), "{text}");
    let ran = std::fs::read_to_string(&marker).unwrap();
    assert!(ran.lines().all(|l| l.starts_with("ran as uid 0")), "{ran}");
    assert_eq!(pid_of(&v.container("idle", "c")), Some(pid));
}

#[test]
fn a_new_binary_that_fails_or_hangs_taking_the_state_over_is_refused_before_the_exec_and_vigil_carries_on()
 {
    let (v, pid) = start_idle();
    let me = vigil_pid(&v);
    let exe = exe_of(me);
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for (name, fake, says) in [
        ("exits", Fake::ExitsTakingOver, "exited with code 1"),
        ("aborts", Fake::AbortsTakingOver, "killed by signal 6"),
        ("hangs", Fake::HangsTakingOver, "no answer within 10 s"),
    ] {
        let bin = fake_vigil(dir.path(), name, fake, &marker);
        let asked = {
            let socket = v.socket.clone();
            let bin = bin.clone();
            std::thread::spawn(move || {
                let out = std::process::Command::new(BIN)
                    .args(["upgrade", "--binary", bin.to_str().unwrap(), "--socket"])
                    .arg(&socket)
                    .output()
                    .unwrap();
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                (out.status.success(), text)
            })
        };
        if matches!(fake, Fake::HangsTakingOver) {
            // While the new binary is being waited for, vigil serves as ever.
            v.wait_for(T, "the pre-flight to begin", |v| {
                v.log().contains("/hangs (vigil")
            });
            let t = std::time::Instant::now();
            assert_eq!(pid_of(&v.container("idle", "c")), Some(pid));
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "status took {:?}",
                t.elapsed()
            );
        }
        let (ok, text) = asked.join().unwrap();
        assert!(!ok, "{name}: accepted: {text}\n{}", v.log());
        assert!(
            text.contains("cannot take this vigil's state over") && text.contains(says),
            "{name}: {text}"
        );
        assert!(text.contains(bin.to_str().unwrap()), "{name}: {text}");
        // The same vigil, the same container, still supervised.
        assert_eq!(exe_of(me), exe, "{name}: vigil changed binary");
        assert!(alive(u64::from(me)), "{name}: vigil is gone");
        assert_eq!(pid_of(&v.container("idle", "c")), Some(pid), "{name}");
        let ran = std::fs::read_to_string(&marker).unwrap();
        assert!(
            ran.lines().any(|l| l.ends_with("--handoff-check")),
            "{name}: the pre-flight never ran: {ran}"
        );
    }
    assert!(!v.log().contains("upgrade: executing"), "{}", v.log());
    // A supervised container still restarts when it exits.
    let r = v.request(r#"{"cmd":"restart","pod":"idle","container":"c"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "a new pid after the restart", |v| {
        pid_of(&v.container("idle", "c")).is_some_and(|p| p != pid)
    });
    // A good binary still upgrades.
    let (_keep, next) = copy_of_vigil();
    let text = upgrade_to(&v, &next);
    assert!(text.contains("1 containers kept"), "{text}");
}

#[test]
fn the_loop_goes_on_while_a_new_binary_takes_its_time_to_say_its_handoff_version() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let bin = fake_vigil(dir.path(), "slow", Fake::SlowToAnswerItsVersion, &marker);
    let v = Vigil::start(
        "[pods.flaky]\nbackoff = { initial_seconds = 0.2, max_seconds = 0.4 }\n\
         [[pods.flaky.containers]]\nname = \"c\"\n\
         command = [\"/bin/sh\", \"-c\", \"sleep 0.3; exit 3\"]\n",
    );
    v.wait_for(T, "flaky/c restarted once", |v| {
        restarts(v, "flaky", "c") >= 1
    });
    let asked = {
        let socket = v.socket.clone();
        let bin = bin.clone();
        std::thread::spawn(move || {
            std::process::Command::new(BIN)
                .args([
                    "upgrade",
                    "--check",
                    "--binary",
                    bin.to_str().unwrap(),
                    "--socket",
                ])
                .arg(&socket)
                .output()
                .unwrap()
        })
    };
    // The binary is asleep in `--handoff-version` (it marks before it sleeps).
    v.wait_for(T, "the binary to be asked its version", |_| {
        std::fs::read_to_string(&marker).is_ok_and(|m| m.contains("--handoff-version"))
    });
    let asked_at = std::time::Instant::now();
    let before = restarts(&v, "flaky", "c");
    let r = v.request(r#"{"cmd":"version"}"#);
    assert_eq!(r["ok"], true, "{r}");
    assert!(
        asked_at.elapsed() < Duration::from_secs(2),
        "the socket took {:?} to answer two requests while the binary was being asked",
        asked_at.elapsed()
    );
    v.wait_for(
        Duration::from_secs(3),
        "the crash-looping bystander restarted twice while the binary slept",
        |v| restarts(v, "flaky", "c") >= before + 2,
    );
    assert!(
        asked_at.elapsed() < Duration::from_secs(4),
        "the binary had answered already: the check proves nothing"
    );
    let out = asked.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{}", v.log());
    assert!(text.contains("would keep every container"), "{text}");
}

/// The restart count of `pod/c`.
fn restarts(v: &Vigil, pod: &str, c: &str) -> u64 {
    v.container(pod, c)["restart_count"].as_u64().unwrap_or(0)
}

/// The fakes that pass the pre-flight and then die or hang once executed, and what the
/// operator is told.
const AFTER_THE_EXEC: [(&str, Fake, &str); 3] = [
    (
        "aborts",
        Fake::AbortsAfterTheExec,
        "ended during its takeover",
    ),
    (
        "exits0",
        Fake::ExitsZeroAfterTheExec,
        "ended during its takeover",
    ),
    (
        "hangs",
        Fake::HangsAfterTheExec,
        "was not ready 10 s after the exec (killed)",
    ),
];

/// One upgrade to a fake that dies or hangs after the exec ([`AFTER_THE_EXEC`]), with
/// `cgroup_root` at `cg` when given: the client is told, vigil goes on from the previous binary
/// in another process, every container is still supervised (the same process, restarted when
/// it exits, a crash-looping bystander restarted), and a shutdown stops them (and removes the
/// cgroups).
fn upgrade_to_a_binary_that_fails_after_the_exec(
    name: &str,
    fake: Fake,
    says: &str,
    cg: Option<&crate::faults::ScratchCgroup>,
) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let bin = fake_vigil(dir.path(), name, fake, &marker);
    let pods = format!(
        "[pods.idle]\n[[pods.idle.containers]]\nname = \"c\"\ncommand = {SLEEPING}\n\
         [pods.flaky]\nbackoff = {{ initial_seconds = 0.2, max_seconds = 0.4 }}\n\
         [[pods.flaky.containers]]\nname = \"c\"\n\
         command = [\"/bin/sh\", \"-c\", \"sleep 0.3; exit 3\"]\n"
    );
    // A root vigil creates (and so removes at a clean shutdown).
    let mut v = match cg {
        Some(cg) => Vigil::start_in(
            tempfile::tempdir().unwrap(),
            &format!("cgroup_root = \"{}/vigil\"", cg.path.display()),
            &pods,
        ),
        None => Vigil::start(&pods),
    };
    let pid = wait_running(&v, "idle", "c");
    let old = vigil_pid(&v);
    let exe = exe_of(old);
    let (ok, text) = upgrade(&v, &["--binary", bin.to_str().unwrap()]);
    let log = v.log();
    assert!(!ok, "{name}: accepted: {text}\n{log}");
    assert!(
        text.contains(says) && text.contains("took the state back as pid"),
        "{name}: {text}\n{log}"
    );
    // The binary passed the pre-flight and was executed.
    assert!(log.contains("a guardian goes back to this binary"), "{log}");
    let ran = std::fs::read_to_string(&marker).unwrap();
    assert!(ran.contains("--handoff-check"), "{name}: {ran}");
    // vigil goes on from the previous binary, in the guardian's process.
    let new: u32 = text
        .split("took the state back as pid ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{name}: no pid in {text}"));
    assert_ne!(new, old, "{name}");
    assert_eq!(exe_of(new), exe, "{name}: not the previous binary");
    // The process the new binary ran in has ended (it aborted, exited, or was killed).
    v.wait_exit(T);
    // Every container is still supervised: the same process, and a restart on exit.
    let r = v.request(r#"{"cmd":"version"}"#);
    assert_eq!(r["ok"], true, "{name}: {r}");
    assert_eq!(pid_of(&v.container("idle", "c")), Some(pid), "{name}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    v.wait_for(
        T,
        &format!("{name}: idle/c restarted after its exit"),
        |v| pid_of(&v.container("idle", "c")).is_some_and(|p| p != pid),
    );
    let restarted = pid_of(&v.container("idle", "c")).unwrap();
    let flaky = restarts(&v, "flaky", "c");
    v.wait_for(
        T,
        &format!("{name}: the crash-looping bystander restarted"),
        |v| restarts(v, "flaky", "c") >= flaky + 2,
    );
    // And a clean shutdown by the fallback vigil stops them.
    let r = v.request(r#"{"cmd":"shutdown"}"#);
    assert_eq!(r["ok"], true, "{name}: {r}");
    let deadline = std::time::Instant::now() + T;
    while alive(u64::from(new)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(u64::from(new)),
        "{name}: the fallback vigil did not exit\n{}",
        v.log()
    );
    assert!(!alive(restarted), "{name}: idle/c outlived the shutdown");
    if let Some(cg) = cg {
        let left = cg.dirs();
        assert!(
            left == std::slice::from_ref(&cg.path),
            "{name}: cgroups left after the shutdown: {left:?}\n{}",
            v.log()
        );
    }
    let log = v.log();
    assert!(log.contains("executes the previous binary"), "{log}");
}

#[test]
fn a_new_binary_that_dies_or_hangs_after_the_exec_is_replaced_by_the_old_one_and_every_container_stays_supervised()
 {
    for (name, fake, says) in AFTER_THE_EXEC {
        upgrade_to_a_binary_that_fails_after_the_exec(name, fake, says, None);
    }
}

#[test]
#[ignore = "needs root"]
fn with_cgroups_a_new_binary_that_dies_or_hangs_after_the_exec_leaves_every_container_supervised() {
    for (name, fake, says) in AFTER_THE_EXEC {
        let cg = crate::faults::ScratchCgroup::new();
        upgrade_to_a_binary_that_fails_after_the_exec(name, fake, says, Some(&cg));
    }
}

#[test]
#[ignore = "needs root"]
fn an_upgraded_vigil_s_clean_shutdown_removes_its_cgroups() {
    let cg = crate::faults::ScratchCgroup::new();
    let root = cg.path.join("vigil");
    let v = Vigil::start_in(
        tempfile::tempdir().unwrap(),
        &format!("cgroup_root = \"{}\"", root.display()),
        &format!(
            "[pods.idle]\n[[pods.idle.containers]]\nname = \"c\"\ncommand = {SLEEPING}\n\
             [pods.other]\n[[pods.other.containers]]\nname = \"c\"\ncommand = {SLEEPING}\n"
        ),
    );
    let pid = wait_running(&v, "idle", "c");
    wait_running(&v, "other", "c");
    let (_keep, next) = copy_of_vigil();
    for _ in 0..2 {
        let text = upgrade_to(&v, &next);
        assert!(text.contains("2 containers kept"), "{text}");
    }
    assert_eq!(pid_of(&v.container("idle", "c")), Some(pid));
    assert!(root.join("supervisor").is_dir(), "{}", v.log());
    let code = v.shutdown();
    assert_eq!(code, 0);
    assert_eq!(
        cg.dirs(),
        std::slice::from_ref(&cg.path),
        "cgroups left after an upgraded vigil's shutdown"
    );
}

/// `vigil_probe_results_total` of `probe` (summed over results) in vigil's exposition.
fn probe_results_total(v: &Vigil, probe: &str) -> u64 {
    let r = v.request(r#"{"cmd":"metrics"}"#);
    let text = r["result"]["text"].as_str().unwrap_or_default().to_string();
    text.lines()
        .filter(|l| {
            l.starts_with("vigil_probe_results_total{") && l.contains(&format!("probe=\"{probe}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[test]
fn probe_result_counters_carry_across_an_upgrade() {
    let v = Vigil::start(&format!(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = {SLEEPING}
readiness_probe = {{ exec = {{ command = ["true"] }}, period_seconds = 0.2 }}
"#
    ));
    wait_running(&v, "web", "app");
    v.wait_for(T, "five readiness results counted", |v| {
        probe_results_total(v, "readiness") >= 5
    });
    let before = probe_results_total(&v, "readiness");
    let (_keep, next) = copy_of_vigil();
    upgrade_to(&v, &next);
    let after = probe_results_total(&v, "readiness");
    assert!(
        after >= before,
        "vigil_probe_results_total went {before} -> {after} across the upgrade"
    );
}

/// Clients asking `status` in a loop (`upgrade_clients.py`), as `uid`: their result line.
fn status_clients(
    v: &Vigil,
    uid: u32,
    threads: usize,
    fresh: bool,
    stop: &Path,
) -> std::process::Child {
    let script = v.dir.path().join("upgrade_clients.py");
    if !script.exists() {
        std::fs::write(&script, include_str!("upgrade_clients.py")).unwrap();
    }
    let id = uid.to_string();
    std::process::Command::new("setpriv")
        .args(["--reuid", &id, "--regid", &id, "--clear-groups", "python3"])
        // The system's python3, which every uid may run (not a per-user shim).
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .arg(&script)
        .arg(&v.socket)
        .arg(threads.to_string())
        .arg(if fresh { "1" } else { "0" })
        .arg(stop)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 under setpriv")
}

#[test]
#[ignore = "needs root (acts as another uid)"]
fn clients_asking_in_a_loop_across_several_upgrades_never_see_busy_or_an_error_and_get_one_answer_each()
 {
    crate::common::require_root("to act as another uid");
    crate::common::require_program("setpriv", "--version", "util-linux");
    crate::common::require_program("python3", "--version", "python3");
    let (_keep, next) = copy_of_vigil();
    let (_keep_too, other) = copy_of_vigil();
    let pods: String = (0..5)
        .map(|i| {
            format!("[pods.p{i}]\n[[pods.p{i}.containers]]\nname = \"c\"\ncommand = {SLEEPING}\n")
        })
        .collect();
    let v = Vigil::start_shared("", &pods);
    wait_running(&v, "p4", "c");
    let stop = v.dir.path().join("stop");
    // 176 of root's (an admin: one connection each, pipelined, or a fresh one per request)
    // and 24 of an unprivileged uid's (within its 32 connections).
    let clients = [
        status_clients(&v, 0, 176, true, &stop),
        status_clients(&v, 65534, 24, false, &stop),
    ];
    std::thread::sleep(patient(Duration::from_secs(2)));
    for round in 0..4 {
        upgrade_to(&v, if round % 2 == 0 { &next } else { &other });
        std::thread::sleep(patient(Duration::from_millis(700)));
    }
    std::fs::write(&stop, "").unwrap();
    for (who, client) in ["root", "uid 65534"].into_iter().zip(clients) {
        let out = client.wait_with_output().unwrap();
        let result: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{who}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(
            result["errors"],
            serde_json::json!([]),
            "{who}\n{}",
            v.log()
        );
        let per_thread = result["threads"].as_array().unwrap();
        assert!(
            per_thread.iter().all(|n| n.as_u64() > Some(0)),
            "{who}: a client got no answer at all: {per_thread:?}"
        );
    }
    // The connections open at each exec were taken over, not closed.
    let log = v.log();
    let taken: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("client connection(s) taken over"))
        .collect();
    assert_eq!(taken.len(), 4, "{log}");
    for line in taken {
        assert!(line.contains(", 0 closed"), "{line}");
        assert!(!line.contains("upgrade: 0 client"), "{line}");
    }
}

/// A `restart --wait` still waiting for its pod's readiness when vigil upgrades itself is
/// waited on and answered by the new vigil once the pod is ready (`restart: done`, exit 0; no
/// `busy`), and a request whose `wait_ms` runs out after the exec is answered `timed_out`.
#[test]
fn a_restart_waiting_for_readiness_at_an_upgrade_is_answered_by_the_new_vigil() {
    let flags = tempfile::tempdir().expect("tempdir");
    let ready = flags.path().join("ready");
    let v = Vigil::start(&format!(
        r#"
[pods.db]
[[pods.db.containers]]
name = "postgres"
command = {SLEEPING}
readiness_probe = {{ exec = {{ command = ["test", "-e", "{}"] }}, period_seconds = 1 }}

[pods.web]
[[pods.web.containers]]
name = "app"
command = {SLEEPING}
readiness_probe = {{ exec = {{ command = ["false"] }}, period_seconds = 1 }}
"#,
        ready.display()
    ));
    let first = wait_running(&v, "db", "postgres");
    wait_running(&v, "web", "app");
    let waiting = std::process::Command::new(BIN)
        .args(["restart", "db", "--wait", "--timeout", "90s", "--socket"])
        .arg(&v.socket)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("vigil restart --wait");
    let mut timing_out = UnixStream::connect(&v.socket).expect("connect");
    timing_out
        .write_all(b"{\"id\":9,\"cmd\":\"restart\",\"pod\":\"web\",\"wait_ms\":8000}\n")
        .unwrap();
    v.wait_for(T, "db's new run", |v| {
        pid_of(&v.container("db", "postgres")).is_some_and(|p| p != first)
    });
    let (ok, text) = upgrade(&v, &[]);
    assert!(ok, "{text}\n{}", v.log());
    // The wait for web runs out after the exec, at the deadline set before it.
    timing_out.set_read_timeout(Some(patient(T))).unwrap();
    let mut line = String::new();
    BufReader::new(&timing_out)
        .read_line(&mut line)
        .expect("web's reply");
    let reply: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(reply["id"], 9, "{reply}");
    assert_eq!(reply["result"]["wait"]["outcome"], "timed_out", "{reply}");
    assert!(
        reply["result"]["wait"]["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("timed out after 8s waiting for web/app")),
        "{reply}"
    );
    // db is still not ready: the CLI still waits, then is answered once it is.
    assert_eq!(v.container("db", "postgres")["ready"], false);
    std::fs::write(&ready, "").unwrap();
    let out = waiting.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}\n{}", v.log());
    assert!(stdout.contains("restart: done"), "{stdout}");
    assert!(!stderr.contains("re-executed"), "{stderr}");
    assert_eq!(v.container("db", "postgres")["ready"], true);
}

/// `vigil scale` outlives an upgrade (docs/behaviour.md §14): the new instance runs the
/// scaled count with the same processes, and a reload of the unchanged file after it keeps
/// the count (the handed-over config knows the file's count it was scaled from).
#[test]
fn a_scaled_count_outlives_an_upgrade_and_the_reload_after_it() {
    let v = Vigil::start(
        r#"
[pods.web]
replicas = 2
termination_grace_period_seconds = 2
[[pods.web.containers]]
name = "app"
command = ["sleep", "600"]
"#,
    );
    let out = v.cli(&["scale", "web", "3"]);
    assert!(out.status.success(), "{out:?}");
    let before: Vec<u64> = (0..3)
        .map(|i| wait_running(&v, &format!("web-{i}"), "app"))
        .collect();
    let (_dir, next) = copy_of_vigil();
    upgrade_to(&v, &next);
    let out = v.cli(&["reload"]);
    assert!(out.status.success(), "{out:?}");
    let after: Vec<Option<u64>> = (0..3)
        .map(|i| pid_of(&v.container(&format!("web-{i}"), "app")))
        .collect();
    assert_eq!(
        after,
        before.iter().map(|&p| Some(p)).collect::<Vec<_>>(),
        "{}",
        v.log()
    );
    let names: Vec<String> = (v.status()["pods"].as_array().into_iter().flatten())
        .map(|p| p["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(names, ["web-0", "web-1", "web-2"]);
}
