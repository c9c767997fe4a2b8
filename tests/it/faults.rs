//! Fault injection: vigil facing misbehaving containers, probe targets, a deleted socket,
//! cgroups tampered with, file-descriptor exhaustion and its own SIGKILL. Each test states
//! the outcome it checks; docs/bad-input.md lists them with the other bad inputs.
//!
//! Cgroup faults run natively with `cgroup_root` pointing at a scratch directory this test
//! creates on the cgroup2 mount (`<mount>/vigil-it-<pid>-<n>`, [`ScratchCgroup`]) and removes afterwards.
//! They need root and a cgroup2 mount with `cgroup.kill` (Linux 5.14), so they are
//! `#[ignore]`d for a plain `cargo test` and fail, naming the need, under `--include-ignored`
//! when it is not met.
//!
//! A container that ignores SIGTERM is covered in lifecycle.rs
//! (`stop_kills_a_process_that_ignores_sigterm_after_the_grace_period`): SIGKILL after the
//! grace period, reason `Stopped`, signal 9.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::{Vigil, alive, require_program, state_reason, supervisor_header};

const T: Duration = Duration::from_secs(20);

pub use crate::common::{ScratchCgroup, start_with_cgroup_root};

/// A sleep duration unique to this test process, so leftover processes can be found by
/// their command line without confusing them with anyone else's.
fn unique_sleep(salt: u32) -> String {
    format!("{}", 1_000_000 + std::process::id() * 10 + salt)
}

/// A pod `pod` of one container `c` running `command` (a TOML array), given `grace` seconds
/// to stop.
fn one_container(pod: &str, grace: &str, command: &str) -> String {
    format!(
        "[pods.{pod}]\ntermination_grace_period_seconds = {grace}\n[[pods.{pod}.containers]]\nname = \"c\"\ncommand = {command}\n"
    )
}

/// Waits until `pod/c` runs.
fn wait_running(v: &Vigil, pod: &str) {
    v.wait_for(T, &format!("{pod}/c running"), |v| {
        state_reason(&v.container(pod, "c")) == "Running"
    });
}

/// Stops `pod` over the socket and waits until its container has ended as Stopped.
fn stop_and_wait(v: &Vigil, pod: &str) {
    let r = v.request(&format!(r#"{{"cmd":"stop","pod":"{pod}"}}"#));
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, &format!("{pod}/c Stopped"), |v| {
        v.container(pod, "c")["state"]["terminated"]["reason"] == "Stopped"
    });
}

fn pids_of_sleep(arg: &str) -> Vec<u32> {
    crate::common::processes_with_cmdline(&format!("sleep\0{arg}\0"))
}

#[test]
fn container_that_closes_its_stdout_keeps_running_and_stops_cleanly() {
    // Outcome: closing stdout/stderr is not a termination; the container runs on, vigil
    // answers, and stop ends it with reason Stopped.
    let v = Vigil::start(&one_container(
        "mute",
        "2",
        r#"["sh", "-c", "echo before; exec >&- 2>&-; exec sleep 60"]"#,
    ));
    wait_running(&v, "mute");
    v.wait_for(T, "output captured", |v| {
        let r = v.request(r#"{"cmd":"logs","pod":"mute","container":"c"}"#);
        r.to_string().contains("before")
    });
    // Well after the pipes closed it is still the same run.
    std::thread::sleep(Duration::from_millis(300));
    let c = v.container("mute", "c");
    assert_eq!(state_reason(&c), "Running", "{c}");
    assert_eq!(c["restart_count"], 0, "{c}");
    let pid = c["pid"].as_u64().expect("pid");
    stop_and_wait(&v, "mute");
    assert!(!alive(pid));
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn fork_loop_is_stopped_with_nothing_left_in_its_cgroup() {
    // Outcome: a container forking as fast as it can is ended by one cgroup.kill; no process
    // survives, the container cgroup is removed.
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(1);
    let v = start_with_cgroup_root(
        &cg,
        &one_container(
            "forky",
            "0.2",
            &format!(r#"["sh", "-c", "trap '' TERM; while :; do sleep {arg} & done"]"#),
        ),
    );
    v.wait_for(T, "forking", |v| {
        state_reason(&v.container("forky", "c")) == "Running" && pids_of_sleep(&arg).len() > 20
    });
    stop_and_wait(&v, "forky");
    v.wait_for(T, "every forked process gone", |_| {
        pids_of_sleep(&arg).is_empty()
    });
    v.wait_for(T, "container cgroup removed", |_| {
        cg.container_dirs().is_empty()
    });
    assert_eq!(v.shutdown(), 0);
}

/// A service that daemonizes: its first process exits 0 and three processes stay in the
/// cgroup (killed with it). The `Exited` event asks whether it daemonized and how to keep it
/// in the foreground, instead of a plain `Completed`.
#[test]
#[ignore = "needs root and cgroup v2"]
fn a_main_process_that_exits_0_leaving_processes_behind_is_asked_whether_it_daemonized() {
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(6);
    let v = start_with_cgroup_root(
        &cg,
        &format!(
            "[pods.web]\nrestart_policy = \"Never\"\n[[pods.web.containers]]\nname = \"c\"\n\
             command = [\"sh\", \"-c\", \"for i in 1 2 3; do sleep {arg} & done; exit 0\"]\n"
        ),
    );
    v.wait_for(T, "Completed", |v| {
        v.container("web", "c")["state"]["terminated"]["reason"] == "Completed"
    });
    let c = v.container("web", "c");
    assert_eq!(
        c["state"]["terminated"]["message"],
        "left 3 processes in its cgroup (did it daemonize? run it in the foreground: daemon \
         off;, --daemonize no)",
        "{c}"
    );
    let events = v.request(r#"{"cmd":"events"}"#).to_string();
    assert!(
        events.contains(
            "Container c exited: Completed, but left 3 processes in its cgroup (did it \
             daemonize? run it in the foreground: daemon off;, --daemonize no)"
        ),
        "{events}"
    );
    v.wait_for(T, "what it left is killed", |_| {
        pids_of_sleep(&arg).is_empty()
    });
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn frozen_cgroup_is_still_stopped() {
    // Outcome: a container whose cgroup was frozen behind vigil's back (cgroup.freeze = 1)
    // cannot act on SIGTERM, but cgroup.kill kills frozen tasks: the stop ends after the
    // grace period with SIGKILL and reason Stopped, and the cgroup goes.
    let cg = ScratchCgroup::new();
    let v = start_with_cgroup_root(&cg, &one_container("icy", "0.3", r#"["sleep", "60"]"#));
    wait_running(&v, "icy");
    let c = v.container("icy", "c");
    let pid = c["pid"].as_u64().expect("pid");
    let dir = PathBuf::from(c["cgroup"].as_str().expect("cgroup path in status"));
    std::fs::write(dir.join("cgroup.freeze"), "1").expect("freeze");
    stop_and_wait(&v, "icy");
    assert!(!alive(pid));
    v.wait_for(T, "frozen cgroup removed", |_| !dir.exists());
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn removing_a_live_container_cgroup_is_refused_by_the_kernel_and_changes_nothing() {
    // Outcome: rmdir of a populated cgroup fails with EBUSY, so a container's cgroup cannot
    // be removed behind vigil's back while it runs; the container keeps running and stops
    // normally.
    let cg = ScratchCgroup::new();
    let v = start_with_cgroup_root(&cg, &one_container("p", "1", r#"["sleep", "60"]"#));
    wait_running(&v, "p");
    let dir = PathBuf::from(v.container("p", "c")["cgroup"].as_str().expect("cgroup"));
    let err = std::fs::remove_dir(&dir).expect_err("populated cgroup cannot be removed");
    assert_eq!(err.raw_os_error(), Some(libc::EBUSY), "{err}");
    assert_eq!(state_reason(&v.container("p", "c")), "Running");
    assert_eq!(v.shutdown(), 0);
}

#[test]
fn probe_target_that_accepts_and_hangs_times_out_and_vigil_stays_responsive() {
    // Outcome: an HTTP probe against a server that accepts and never answers fails with a
    // timeout message; meanwhile status requests are answered at once.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener
        .set_nonblocking(true)
        .expect("nonblocking listener");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_flag = stop.clone();
    // Accepts every connection and holds it open without a byte of reply.
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        while !stop_flag.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((conn, _)) => conns.push(conn),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        conns.len()
    });
    let v = Vigil::start(&format!(
        r#"
[pods.web]
[[pods.web.containers]]
name = "c"
command = ["sleep", "60"]
[pods.web.containers.readiness_probe]
http_get = {{ port = {port}, path = "/" }}
period_seconds = 0.5
timeout_seconds = 0.3
"#
    ));
    v.wait_for(T, "Unhealthy event naming the timeout", |v| {
        let r = v.request(r#"{"cmd":"events"}"#);
        r.to_string().contains("Readiness probe failed") && r.to_string().contains("timed out")
    });
    // Responsive: several status round trips while probes hang.
    for _ in 0..20 {
        let started = Instant::now();
        let c = v.container("web", "c");
        assert_eq!(c["ready"], false, "{c}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "status answered"
        );
    }
    assert_eq!(v.shutdown(), 0);
    stop.store(true, Ordering::Relaxed);
    assert!(held.join().expect("acceptor") > 0, "probes connected");
}

#[test]
fn deleted_control_socket_is_recreated_on_sighup() {
    // Outcome: deleting the socket file makes vigil unreachable until SIGHUP (or its next
    // periodic check): then it binds a fresh socket at the same path and logs a warning.
    let v = Vigil::start(
        r#"
[pods.p]
[[pods.p.containers]]
name = "c"
command = ["sleep", "60"]
"#,
    );
    std::fs::remove_file(&v.socket).expect("delete socket");
    assert!(v.try_request(r#"{"cmd":"version"}"#).is_none());
    let pid = v.child.as_ref().expect("running").id();
    let st = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    v.wait_for(T, "socket answers again", |v| {
        v.try_request(r#"{"cmd":"version"}"#).is_some()
    });
    assert!(v.log().contains("re-created"), "{}", v.log());
    assert_eq!(state_reason(&v.container("p", "c")), "Running");
    assert_eq!(v.shutdown(), 0);
}

/// Number of open descriptors of `pid`.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn set_nofile(pid: u32, limit: &str) {
    let st = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={limit}"))
        .status();
    assert!(
        matches!(st, Ok(s) if s.success()),
        "prlimit --nofile={limit} failed"
    );
}

#[test]
fn emfile_at_spawn_is_a_start_error_and_vigil_recovers() {
    // Outcome: with no descriptor left, spawns fail as StartError carrying the OS error
    // (EMFILE, "Too many open files"); vigil keeps running, and once descriptors are
    // available again the container starts.
    require_program("prlimit", "--version", "util-linux");
    let v = Vigil::start(
        r#"
[pods.loop]
backoff = { initial_seconds = 0.1, max_seconds = 0.2 }
[[pods.loop.containers]]
name = "c"
command = ["sh", "-c", "sleep 0.2; exit 1"]
"#,
    );
    let pid = v.child.as_ref().expect("running").id();
    v.wait_for(T, "first restart", |v| {
        v.container("loop", "c")["restart_count"].as_u64() >= Some(1)
    });
    // A connection opened beforehand keeps working while no new one can be accepted.
    let conn = UnixStream::connect(&v.socket).expect("connect");
    conn.set_read_timeout(Some(T)).expect("timeout");
    let mut reader = BufReader::new(conn.try_clone().expect("dup"));
    let mut writer = conn;
    let mut events = || {
        writer.write_all(b"{\"cmd\":\"events\"}\n").expect("send");
        let mut line = String::new();
        reader.read_line(&mut line).expect("reply");
        line
    };
    // No descriptor left: the soft limit at what is open when nothing is being spawned (the
    // smallest of a few counts: a count taken mid-spawn would leave free slots).
    let open = (0..10)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(15));
            fd_count(pid)
        })
        .min()
        .unwrap_or(0);
    set_nofile(pid, &format!("{open}:{}", open + 1024));
    let deadline = Instant::now() + T;
    loop {
        let line = events();
        if line.contains("Too many open files") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no EMFILE reported: {line}\n{}",
            v.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    set_nofile(pid, &format!("{0}:{0}", open + 1024));
    v.wait_for(T, "socket answers again", |v| {
        v.try_request(r#"{"cmd":"version"}"#).is_some()
    });
    let r = v.request(r#"{"cmd":"events"}"#).to_string();
    assert!(r.contains("Too many open files"), "StartError event: {r}");
    let before = v.container("loop", "c")["restart_count"].as_u64();
    v.wait_for(T, "restarts resume", |v| {
        v.container("loop", "c")["restart_count"].as_u64() > before
            && state_reason(&v.container("loop", "c")) == "Running"
    });
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn restart_after_sigkill_of_vigil_cleans_up_the_old_cgroups() {
    // Outcome: after `kill -9` of vigil its containers live on in their cgroups; the next
    // vigil on the same cgroup_root with `on_restart = "replace"` finds them, kills them,
    // removes their cgroups, logs "cleaned up cgroup left by an earlier vigil", and starts
    // anew (adoption, the default, is tests/it/adopt.rs).
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(2);
    let pods = format!(
        r#"
[pods.orphan]
[[pods.orphan.containers]]
name = "c"
command = ["sleep", "{arg}"]
"#
    );
    let mut first = start_with_cgroup_root(&cg, &pods);
    first.wait_for(T, "running", |v| {
        state_reason(&v.container("orphan", "c")) == "Running"
    });
    let old_pid = first.container("orphan", "c")["pid"].as_u64().expect("pid");
    let mut child = first.child.take().expect("running");
    child.kill().expect("SIGKILL vigil");
    let _ = child.wait();
    assert!(alive(old_pid), "the container outlives a SIGKILLed vigil");
    // The socket file is left behind; the next vigil must replace it (stale, ECONNREFUSED).
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = first.socket.clone();
    let config = first.config.clone();
    let text = std::fs::read_to_string(&config).expect("read config");
    std::fs::write(
        &config,
        text.replacen(
            "[supervisor]\n",
            "[supervisor]\non_restart = \"replace\"\n",
            1,
        ),
    )
    .expect("write config");
    std::fs::copy(&config, dir.path().join("vigil.toml")).expect("copy config");
    let second = Vigil::start_with(dir, socket, config);
    second.wait_for(T, "old container killed", |_| !alive(old_pid));
    assert!(
        second
            .log()
            .contains("cleaned up cgroup left by an earlier vigil"),
        "{}",
        second.log()
    );
    second.wait_for(T, "new run", |v| {
        let c = v.container("orphan", "c");
        state_reason(&c) == "Running" && c["pid"].as_u64() != Some(old_pid)
    });
    assert_eq!(pids_of_sleep(&arg).len(), 1, "only the new run is alive");
    assert_eq!(second.shutdown(), 0);
    drop(first);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn a_pod_removed_by_reload_has_its_cgroup_directory_removed_then_not_at_shutdown() {
    // Outcome: after a reload drops pod `gone`, `<root>/gone` disappears while vigil runs on;
    // the pod that stays keeps its directory.
    let cg = ScratchCgroup::new();
    let pods = |with_gone: bool| {
        let mut p = String::from(
            "[pods.stays]\n[[pods.stays.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"600\"]\n",
        );
        if with_gone {
            p.push_str(
                "\n[pods.gone]\ntermination_grace_period_seconds = 0.2\n[[pods.gone.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"600\"]\n",
            );
        }
        p
    };
    let v = start_with_cgroup_root(&cg, &pods(true));
    v.wait_for(T, "both running", |v| {
        state_reason(&v.container("stays", "c")) == "Running"
            && state_reason(&v.container("gone", "c")) == "Running"
    });
    assert!(cg.path.join("gone").is_dir());
    let text = std::fs::read_to_string(&v.config).expect("config");
    let cut = text.find("[pods.stays]").expect("pods");
    std::fs::write(&v.config, format!("{}{}", &text[..cut], pods(false))).expect("config");
    let r = v.request(r#"{"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "the removed pod's cgroup directory gone", |_| {
        !cg.path.join("gone").exists()
    });
    assert!(
        cg.path.join("stays").is_dir(),
        "the other pod keeps its directory"
    );
    assert!(v.log().contains("gone: pod cgroup removed"), "{}", v.log());
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn a_cgroup_without_memory_cpu_pids_controllers_is_said_at_start() {
    // Outcome: on a hybrid host (controllers bound to v1) vigil says at start that limits and
    // usage figures are unavailable; where the controllers exist it says nothing of the kind.
    let cg = ScratchCgroup::new();
    let available = std::fs::read_to_string(cg.path.join("cgroup.controllers")).unwrap_or_default();
    let none = !available
        .split_whitespace()
        .any(|c| matches!(c, "memory" | "cpu" | "pids"));
    let v = start_with_cgroup_root(
        &cg,
        "[pods.p]\n[[pods.p.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n",
    );
    let said = v.log().contains(
        "no memory/cpu/pids controllers on this cgroup2 mount: limits and usage figures unavailable",
    );
    assert_eq!(said, none, "controllers here: {available:?}\n{}", v.log());
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn a_pod_with_limits_the_host_cannot_give_is_refused_alone_when_allowed() {
    // Outcome (issue 14.10): on a host whose cgroup2 lacks the memory controller (hybrid), a
    // pod with `memory_max` stops the whole start, naming the pod and the switch; with
    // `allow_missing_controllers` only that pod is refused (Failed, StartError, a Warning
    // event) and the other runs. Where the controller exists, both run either way.
    let cg = ScratchCgroup::new();
    let available = std::fs::read_to_string(cg.path.join("cgroup.controllers")).unwrap_or_default();
    let has_memory = available.split_whitespace().any(|c| c == "memory");
    let pods = "[pods.big]\n[[pods.big.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n\
                resources = { memory_max = \"100Mi\" }\n\
                [pods.small]\n[[pods.small.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n";
    if !has_memory {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("vigil.toml");
        let header = supervisor_header(&dir.path().join("s.sock")).replace(
            "cgroup_root = \"none\"",
            &format!("cgroup_root = \"{}\"", cg.path.display()),
        );
        std::fs::write(&config, format!("{header}{pods}")).expect("write config");
        let out = std::process::Command::new(crate::common::BIN)
            .args(["run", "-c"])
            .arg(&config)
            .output()
            .expect("run vigil");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot start: pod big: memory controller not available")
                && err.contains("--allow-missing-controllers"),
            "{err}"
        );
    }
    let v = {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("vigil.sock");
        let config = dir.path().join("vigil.toml");
        let header = supervisor_header(&socket)
            .replace(
                "cgroup_root = \"none\"",
                &format!("cgroup_root = \"{}\"", cg.path.display()),
            )
            .replace(
                "[supervisor]\n",
                "[supervisor]\nallow_missing_controllers = true\n",
            );
        std::fs::write(&config, format!("{header}{pods}")).expect("write config");
        Vigil::start_with(dir, socket, config)
    };
    v.wait_for(T, "small running", |v| {
        state_reason(&v.container("small", "c")) == "Running"
    });
    if has_memory {
        v.wait_for(T, "big running", |v| {
            state_reason(&v.container("big", "c")) == "Running"
        });
    } else {
        let big = v.pod("big");
        assert_eq!(big["phase"], "Failed", "{big}");
        let c = v.container("big", "c");
        assert_eq!(state_reason(&c), "StartError", "{c}");
        assert!(
            c["state"]["terminated"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("memory controller not available")),
            "{c}"
        );
        let events = v.request(r#"{"cmd":"events"}"#);
        assert!(
            events.to_string().contains("FailedCreatePodContainer"),
            "{events}"
        );
        let r = v.request(r#"{"cmd":"start","pod":"big"}"#);
        assert_eq!(r["error"]["kind"], "bad_argument", "{r}");
    }
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn a_pod_depending_on_a_refused_pod_says_why_it_waits_and_starts_once_a_reload_fixes_it() {
    // Outcome (behaviour.md §8): with `--allow-missing-controllers`, `after` (depends_on big
    // started) waits while `big` is refused, and says so — DependencyFailed naming big and
    // why, in its status, its Ready condition, a Warning event and `vigil status` — and it
    // starts by itself once a reload drops big's limit. Where the memory controller exists
    // nothing is refused and both run from the start.
    let cg = ScratchCgroup::new();
    let available = std::fs::read_to_string(cg.path.join("cgroup.controllers")).unwrap_or_default();
    let has_memory = available.split_whitespace().any(|c| c == "memory");
    let big = "[pods.big]\n[[pods.big.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n";
    let limit = "resources = { memory_max = \"100Mi\" }\n";
    let after = "[pods.after]\ndepends_on = { big = \"started\" }\n\
                 [[pods.after.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n";
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    // The switch on the command line, not in the file: the reload below must not read the
    // file's silence as a change of it.
    let header = supervisor_header(&socket).replace(
        "cgroup_root = \"none\"",
        &format!("cgroup_root = \"{}\"", cg.path.display()),
    );
    std::fs::write(&config, format!("{header}{big}{limit}{after}")).expect("write config");
    let v = Vigil::start_with_args(
        dir,
        socket,
        config.clone(),
        &["--allow-missing-controllers".as_ref()],
    );
    if !has_memory {
        v.wait_for(T, "after DependencyFailed", |v| {
            state_reason(&v.container("after", "c")) == "DependencyFailed"
        });
        let c = v.container("after", "c");
        let message = c["state"]["waiting"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains("pod big to be started: pod big was refused at start")
                && message.contains("memory controller not available"),
            "{c}"
        );
        let pod = v.pod("after");
        assert_eq!(pod["phase"], "Pending", "{pod}");
        let ready = pod["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(ready["reason"], "DependencyFailed", "{pod}");
        let events = v.request(r#"{"cmd":"events"}"#).to_string();
        assert!(
            events.contains("DependencyFailed") && events.contains("after/c"),
            "{events}"
        );
        let out = v.cli(&["status"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.lines()
                .any(|l| l.starts_with("after") && l.contains("DependencyFailed")),
            "{text}"
        );
        let out = v.cli(&["describe", "after"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("pod big was refused at start"), "{text}");
        // `start --wait` does not sit out its timeout: it fails at once, saying why.
        let out = v.cli(&["start", "after", "--wait", "--timeout", "60s"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("after/c is in DependencyFailed") && err.contains("pod big"),
            "{err}"
        );
        // The fix: big without the limit this host cannot give.
        std::fs::write(&config, format!("{header}{big}{after}")).expect("rewrite config");
        let r = v.request(r#"{"cmd":"reload"}"#);
        assert_eq!(r["ok"], true, "{r}");
    }
    v.wait_for(T, "big and after running", |v| {
        state_reason(&v.container("big", "c")) == "Running"
            && state_reason(&v.container("after", "c")) == "Running"
    });
    assert_eq!(v.shutdown(), 0);
}
