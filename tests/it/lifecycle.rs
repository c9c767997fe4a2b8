//! Restart policies, back-off, init containers, stop/grace/kill, start errors — with real
//! children and short back-off.

use std::time::Duration;

use crate::common::{Vigil, alive, state_reason, supervisor_header};

const T: Duration = Duration::from_secs(15);

#[test]
fn crash_loop_restarts_with_backoff_and_records_error_exit() {
    let v = Vigil::start(
        r#"
[pods.crash]
backoff = { initial_seconds = 0.1, max_seconds = 0.4 }
[[pods.crash.containers]]
name = "c"
command = ["sh", "-c", "exit 3"]
"#,
    );
    v.wait_for(T, "three restarts", |v| {
        v.container("crash", "c")["restart_count"]
            .as_u64()
            .unwrap_or(0)
            >= 3
    });
    let c = v.container("crash", "c");
    let last = &c["last_state"]["terminated"];
    assert_eq!(last["exit_code"], 3);
    assert_eq!(last["reason"], "Error");
    assert_eq!(
        v.pod("crash")["phase"],
        "Running",
        "a crash-looping Always pod stays Running"
    );
    let events = v.request(r#"{"cmd":"events"}"#);
    let backoff = events["result"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["reason"] == "BackOff")
        .cloned()
        .expect("a BackOff event");
    assert_eq!(backoff["type"], "Warning");
    assert!(backoff["count"].as_u64().unwrap_or(0) >= 1);
}

#[test]
fn crash_loop_shows_crashloopbackoff_while_waiting() {
    let v = Vigil::start(
        r#"
[pods.crash]
backoff = { initial_seconds = 5, max_seconds = 5 }
[[pods.crash.containers]]
name = "c"
command = ["sh", "-c", "exit 1"]
"#,
    );
    // First restart is immediate, the second waits 5 s in CrashLoopBackOff.
    v.wait_for(T, "CrashLoopBackOff", |v| {
        state_reason(&v.container("crash", "c")) == "CrashLoopBackOff"
    });
    let c = v.container("crash", "c");
    assert_eq!(
        c["state"]["waiting"]["message"],
        "back-off 5s restarting failed container=c pod=crash"
    );
}

#[test]
fn never_policy_failure_leaves_pod_failed_without_restart() {
    let v = Vigil::start(
        r#"
[pods.once]
restart_policy = "Never"
[[pods.once.containers]]
name = "c"
command = ["sh", "-c", "exit 7"]
"#,
    );
    v.wait_for(T, "Failed phase", |v| v.pod("once")["phase"] == "Failed");
    let c = v.container("once", "c");
    assert_eq!(c["restart_count"], 0);
    assert_eq!(c["state"]["terminated"]["exit_code"], 7);
    assert_eq!(c["state"]["terminated"]["reason"], "Error");
}

#[test]
fn onfailure_success_completes_without_restart() {
    let v = Vigil::start(
        r#"
[pods.job]
restart_policy = "OnFailure"
[[pods.job.containers]]
name = "c"
command = ["sh", "-c", "echo done"]
"#,
    );
    v.wait_for(T, "Succeeded phase", |v| {
        v.pod("job")["phase"] == "Succeeded"
    });
    let c = v.container("job", "c");
    assert_eq!(c["restart_count"], 0);
    assert_eq!(c["state"]["terminated"]["reason"], "Completed");
    assert_eq!(c["state"]["terminated"]["exit_code"], 0);
}

#[test]
fn init_container_runs_first_and_its_failure_blocks_the_pod() {
    let v = Vigil::start(
        r#"
[pods.good]
[[pods.good.init_containers]]
name = "init"
command = ["sh", "-c", "exit 0"]
[[pods.good.containers]]
name = "app"
command = ["sleep", "60"]

[pods.bad]
restart_policy = "Never"
[[pods.bad.init_containers]]
name = "init"
command = ["sh", "-c", "exit 2"]
[[pods.bad.containers]]
name = "app"
command = ["sleep", "60"]
"#,
    );
    v.wait_for(T, "good app running", |v| {
        state_reason(&v.container("good", "app")) == "Running"
    });
    assert_eq!(
        v.container("good", "init")["state"]["terminated"]["reason"],
        "Completed"
    );
    v.wait_for(T, "bad pod Failed", |v| v.pod("bad")["phase"] == "Failed");
    assert!(
        v.container("bad", "app")["state"]["running"].is_null(),
        "the app of a pod whose init container failed never starts"
    );
}

#[test]
fn stop_kills_a_process_that_ignores_sigterm_after_the_grace_period() {
    let v = Vigil::start(
        r#"
[pods.stubborn]
termination_grace_period_seconds = 0.5
[[pods.stubborn.containers]]
name = "c"
command = ["sh", "-c", "trap '' TERM; echo trap-set; while true; do sleep 0.05; done"]
"#,
    );
    // Stop only once the shell ignores SIGTERM, or the stop could beat the trap.
    v.wait_for(T, "the trap to be set", |v| {
        v.request(r#"{"cmd":"logs","pod":"stubborn"}"#)["result"]["log"]
            .as_str()
            .is_some_and(|l| l.contains("trap-set"))
    });
    let pid = v.container("stubborn", "c")["pid"].as_u64().expect("pid");
    let r = v.request(r#"{"id":1,"cmd":"stop","pod":"stubborn"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "Stopped", |v| {
        v.container("stubborn", "c")["state"]["terminated"]["reason"] == "Stopped"
    });
    let t = v.container("stubborn", "c")["state"]["terminated"].clone();
    assert_eq!(
        t["signal"], 9,
        "killed by SIGKILL after the grace period: {t}"
    );
    assert!(!alive(pid));
    // Stopped containers are not restarted.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(v.container("stubborn", "c")["restart_count"], 0);
}

#[test]
fn a_container_being_stopped_shows_terminating_is_not_ready_and_its_sigkill_is_a_warning() {
    let v = Vigil::start(
        r#"
[pods.pg]
termination_grace_period_seconds = 3
[[pods.pg.containers]]
name = "db"
command = ["sh", "-c", "trap '' TERM; echo trap-set; while true; do sleep 0.05; done"]
"#,
    );
    v.wait_for(T, "the trap to be set", |v| {
        v.request(r#"{"cmd":"logs","pod":"pg"}"#)["result"]["log"]
            .as_str()
            .is_some_and(|l| l.contains("trap-set"))
    });
    assert_eq!(v.container("pg", "db")["ready"], true);
    let r = v.request(r#"{"id":1,"cmd":"stop","pod":"pg"}"#);
    assert_eq!(r["ok"], true, "{r}");
    // The grace period is 3 s; what follows is read well within it on any sane machine, and
    // if not, the SIGKILL assertions below still hold.
    let c = v.container("pg", "db");
    if c["state"]["running"].is_object() {
        let t = &c["state"]["running"]["terminating"];
        assert_eq!(t["message"], "stopped by request", "{c}");
        assert_eq!(t["grace_period_seconds"], 3.0, "{c}");
        assert_eq!(c["ready"], false, "not ready once the stop began: {c}");
        let out = v.cli(&["status"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Terminating"), "{text}");
        let out = v.cli(&["describe", "pg"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Terminating:"), "{text}");
    }
    v.wait_for(T, "Stopped", |v| {
        v.container("pg", "db")["state"]["terminated"]["reason"] == "Stopped"
    });
    let t = v.container("pg", "db")["state"]["terminated"].clone();
    assert_eq!(t["signal"], 9, "{t}");
    assert_eq!(
        t["message"], "stopped by request; did not stop within 3s, killed with SIGKILL",
        "{t}"
    );
    let events = v.request(r#"{"cmd":"events"}"#);
    let kill = events["result"]["events"]
        .as_array()
        .and_then(|es| {
            es.iter()
                .find(|e| e["reason"] == "Killing" && e["type"] == "Warning")
                .cloned()
        })
        .unwrap_or_else(|| panic!("a Warning Killing event: {events}"));
    assert_eq!(
        kill["message"],
        "Container db did not stop within 3s, sending SIGKILL"
    );
}

/// `exec …: Permission denied` names what was denied: the directory the container's user may
/// not enter on the way to the symlink's target, not the symlink configured.
#[test]
#[ignore = "needs root"]
fn permission_denied_names_the_directory_the_user_may_not_enter_not_the_symlink() {
    use std::os::unix::fs::PermissionsExt;
    crate::common::require_root("a container run as uid 65534");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    let prog = private.join("tool");
    std::fs::write(&prog, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = dir.path().join("tool");
    std::os::unix::fs::symlink(&prog, &link).unwrap();
    let v = Vigil::start(&format!(
        "[pods.p]\nrestart_policy = \"Never\"\n[[pods.p.containers]]\nname = \"c\"\n\
         command = [\"{}\"]\nuser = \"65534\"\n",
        link.display()
    ));
    v.wait_for(T, "StartError recorded", |v| {
        v.container("p", "c")["state"]["terminated"]["reason"] == "StartError"
    });
    let c = v.container("p", "c");
    let msg = c["state"]["terminated"]["message"].as_str().unwrap_or("");
    assert_eq!(
        msg,
        format!(
            "exec \"{}\": Permission denied (os error 13): uid 65534 may not enter {} (mode \
             0700, owner uid 0, group 0)",
            link.display(),
            private.display()
        ),
        "{c}"
    );
}

#[test]
fn missing_binary_is_start_error_and_other_pods_keep_running() {
    let v = Vigil::start(
        r#"
[pods.broken]
backoff = { initial_seconds = 0.2 }
[[pods.broken.containers]]
name = "c"
command = ["/nonexistent/binary"]

[pods.fine]
[[pods.fine.containers]]
name = "c"
command = ["sleep", "60"]
"#,
    );
    v.wait_for(T, "StartError recorded", |v| {
        let c = v.container("broken", "c");
        c["last_state"]["terminated"]["reason"] == "StartError"
            || c["state"]["terminated"]["reason"] == "StartError"
    });
    let c = v.container("broken", "c");
    let t = if c["last_state"]["terminated"].is_object() {
        &c["last_state"]["terminated"]
    } else {
        &c["state"]["terminated"]
    };
    let msg = t["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("/nonexistent/binary"),
        "message names the binary: {msg}"
    );
    assert!(
        msg.contains("No such file"),
        "message carries the OS error: {msg}"
    );
    assert_eq!(state_reason(&v.container("fine", "c")), "Running");
}

#[test]
fn shutdown_stops_everything_and_exits_zero() {
    let v = Vigil::start(
        r#"
[pods.a]
[[pods.a.containers]]
name = "c"
command = ["sleep", "60"]
[pods.b]
[[pods.b.containers]]
name = "c"
command = ["sleep", "60"]
"#,
    );
    v.wait_for(T, "both running", |v| {
        state_reason(&v.container("a", "c")) == "Running"
            && state_reason(&v.container("b", "c")) == "Running"
    });
    let pids: Vec<u64> = ["a", "b"]
        .iter()
        .map(|p| v.container(p, "c")["pid"].as_u64().expect("pid"))
        .collect();
    let socket = v.socket.clone();
    assert_eq!(v.shutdown(), 0);
    for pid in pids {
        assert!(!alive(pid), "pid {pid} survived shutdown");
    }
    assert!(!socket.exists(), "socket file removed on exit");
}

#[test]
fn grandchild_in_the_same_session_dies_with_its_container() {
    let v = Vigil::start(
        r#"
[pods.tree]
restart_policy = "Never"
[[pods.tree.containers]]
name = "c"
command = ["sh", "-c", "sleep 987 & sleep 0.3; exit 0"]
"#,
    );
    v.wait_for(T, "Succeeded", |v| v.pod("tree")["phase"] == "Succeeded");
    // The background `sleep 987` (a number no other test uses) must not outlive its container.
    let deadline = std::time::Instant::now() + T;
    loop {
        let survivors = crate::common::processes_with_cmdline("sleep\0987\0");
        if survivors.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sleep 987 survived: {survivors:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whatever vigil's own oom_score_adj, its containers start at the neutral 0. Checked with a
/// raised value (raising needs no privilege, proc(5)) everywhere, and with vigil's protective
/// default -900 where lowering is allowed (CAP_SYS_RESOURCE).
#[test]
fn containers_do_not_inherit_vigils_oom_score_adj() {
    let values = crate::common::oom_score_adj_values(500, -900);
    let read = crate::common::oom_score_adj_of;
    for adj in values {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("vigil.sock");
        let config = dir.path().join("vigil.toml");
        let header = crate::common::supervisor_header(&socket).replace(
            "log_forward = false\n",
            &format!("log_forward = false\noom_score_adj = {adj}\n"),
        );
        std::fs::write(
            &config,
            format!(
                "{header}[pods.p]\n[[pods.p.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n"
            ),
        )
        .expect("write config");
        let v = Vigil::start_with(dir, socket, config);
        v.wait_for(T, "running", |v| {
            state_reason(&v.container("p", "c")) == "Running"
        });
        let pid = v.container("p", "c")["pid"].as_u64().expect("pid");
        let vigil_pid = v.child.as_ref().expect("running").id();
        assert_eq!(read(u64::from(vigil_pid)), adj.to_string(), "{}", v.log());
        assert_eq!(
            read(pid),
            "0",
            "the container is back to the neutral oom_score_adj"
        );
    }
}

/// vigil runs with the short time slice it asks for (100 µs by default, 2 ms when set), and
/// its containers start with the kernel's default slice and vigil's nice: the slice is not
/// passed on. With `"inherit"` vigil keeps the slice it was started with. On a kernel before
/// 6.12, which has no per-task slices, nothing changes at all and vigil says so in its log.
#[test]
fn vigil_runs_with_a_short_time_slice_and_its_containers_with_the_default() {
    let mut default_slice = None;
    for (setting, want) in [
        ("", Some(100_000)),
        ("sched_slice_microseconds = 2000\n", Some(2_000_000)),
        ("sched_slice_microseconds = \"inherit\"\n", None),
    ] {
        let v = Vigil::start_in(
            tempfile::tempdir().expect("tempdir"),
            setting,
            "[pods.p]\n[[pods.p.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n",
        );
        v.wait_for(T, "running", |v| {
            state_reason(&v.container("p", "c")) == "Running"
        });
        let pid = v.container("p", "c")["pid"].as_u64().expect("pid");
        let vigil_pid = u64::from(v.child.as_ref().expect("running").id());
        let (vigil_slice, vigil_nice) = crate::common::slice_and_nice(vigil_pid);
        let (child_slice, child_nice) = crate::common::slice_and_nice(pid);
        assert_eq!(child_nice, vigil_nice, "the container keeps vigil's nice");
        // The container's is the kernel's default slice, whatever vigil asked for.
        let default = *default_slice.get_or_insert(child_slice);
        assert_eq!(child_slice, default, "{setting:?}");
        match want {
            Some(ns) if crate::common::kernel_has_custom_slices() => {
                assert_eq!(vigil_slice, ns, "{setting:?}\n{}", v.log());
                assert_ne!(child_slice, ns, "the slice is not passed on");
            }
            Some(_) => {
                assert_eq!(vigil_slice, default, "{setting:?}");
                assert!(v.log().contains("no per-task time slices"), "{}", v.log());
            }
            None => assert_eq!(vigil_slice, default, "inherit: {}", v.log()),
        }
    }
}

/// Runs `vigil run` through `wrapper` (e.g. `nice -n 5`, `setpriv --reuid …`) in a fresh
/// directory owned by `owner`, with `supervisor` lines and one `sleep` container; returns
/// vigil, the container's pid, and the (slice, nice) of vigil and of the container.
fn slices_under(wrapper: &[&str], owner: u32, supervisor: &str) -> (Vigil, (u64, i64), (u64, i64)) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::chown(dir.path(), Some(owner), Some(owner)).expect("chown");
    let socket = dir.path().join("vigil.sock");
    let config = crate::common::write_config(
        dir.path(),
        &socket,
        supervisor,
        "[pods.p]\n[[pods.p.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n",
    );
    let mut cmd = std::process::Command::new(wrapper[0]);
    cmd.args(&wrapper[1..])
        .arg(crate::common::BIN)
        .arg("run")
        .arg("-c")
        .arg(&config)
        .env("VIGIL_LOG", "debug");
    let v = Vigil::launch(cmd, dir, socket, config);
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("p", "c")) == "Running"
    });
    let pid = v.container("p", "c")["pid"].as_u64().expect("pid");
    let vigil_pid = u64::from(v.child.as_ref().expect("running").id());
    let (mine, child) = (
        crate::common::slice_and_nice(vigil_pid),
        crate::common::slice_and_nice(pid),
    );
    (v, mine, child)
}

/// The time slice as an outsider would run vigil: as an unprivileged user (no privilege is
/// needed to ask), with cgroups (the container is cloned sharing vigil's memory until it
/// execs, and still starts with the default slice), under `nice -n 5` (the containers keep
/// nice 5) and under `nice -n -5` (vigil leaves its slice alone, so the containers keep the
/// nice -5 they have always inherited, and says why in its log).
#[test]
#[ignore = "needs root (runs vigil as another uid, at a negative nice, with cgroups)"]
fn the_time_slice_needs_no_privilege_survives_cgroups_and_never_changes_a_containers_nice() {
    crate::common::require_root("to run vigil as another uid and at a negative nice");
    crate::common::require_program("setpriv", "--version", "util-linux");
    let custom = crate::common::kernel_has_custom_slices();
    let want = |slice: u64, default: u64| {
        if custom {
            assert_eq!(slice, 100_000);
        } else {
            assert_eq!(slice, default);
        }
    };
    let nobody = [
        "setpriv",
        "--reuid",
        "65534",
        "--regid",
        "65534",
        "--clear-groups",
    ];
    let (v, mine, child) = slices_under(&nobody, 65534, "");
    let status = std::fs::read_to_string(format!(
        "/proc/{}/status",
        v.child.as_ref().expect("running").id()
    ))
    .expect("status");
    assert!(
        status.contains("Uid:\t65534\t"),
        "vigil runs as uid 65534: {status}"
    );
    want(mine.0, child.0);
    assert_ne!(child.0, 100_000, "{}", v.log());
    drop(v);

    let cg = crate::common::ScratchCgroup::new();
    let (v, mine, child) = slices_under(&["env"], 0, &cg.root_line());
    want(mine.0, child.0);
    assert_ne!(child.0, 100_000, "{}", v.log());
    drop(v);

    let (v, mine, child) = slices_under(&["nice", "-n", "5"], 0, "");
    assert_eq!((mine.1, child.1), (5, 5), "{}", v.log());
    want(mine.0, child.0);
    drop(v);

    let (v, mine, child) = slices_under(&["nice", "-n", "-5"], 0, "");
    assert_eq!((mine.1, child.1), (-5, -5), "{}", v.log());
    assert_eq!(mine.0, child.0, "vigil left as started: {}", v.log());
    assert!(v.log().contains("vigil runs at nice -5"), "{}", v.log());
}

/// Starts vigil on one container that takes `exit_after` seconds to exit on SIGTERM, sends
/// vigil SIGTERM, waits until vigil has logged it, sleeps `gap` and sends SIGTERM again;
/// returns vigil's exit code and log.
fn two_sigterms(exit_after: &str, gap: Duration) -> (i32, String) {
    let mut v = Vigil::start(&crate::common::sh_pod(
        "p",
        &format!(
            "trap 'sleep {exit_after}; exit 0' TERM; echo trap-set; while :; do sleep 0.05; done"
        ),
    ));
    // The shell must have set its trap before it is signalled.
    v.wait_for(T, "the trap to be set", |v| {
        v.request(r#"{"cmd":"logs","pod":"p"}"#)["result"]["log"]
            .as_str()
            .is_some_and(|l| l.contains("trap-set"))
    });
    let pid = nix::unistd::Pid::from_raw(v.child.as_ref().expect("running").id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    v.wait_for(T, "the first SIGTERM handled", |v| {
        v.log().contains("received SIGTERM: shutting down")
    });
    std::thread::sleep(gap);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    let code = v.wait_exit(T);
    (code, v.log())
}

/// SIGTERM twice in a row, as timeout(1) sends it (to its child and to the child's process
/// group), is one request: the shutdown goes on gracefully and vigil exits 0. A second SIGTERM
/// a moment later is an operator forcing it: everything is killed at once, exit code 1.
#[test]
fn a_repeated_sigterm_at_once_is_one_request_and_a_later_one_forces_the_shutdown() {
    let (code, log) = two_sigterms("0.5", Duration::ZERO);
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("again within 250 ms"), "{log}");
    assert!(!log.contains("forcing shutdown"), "{log}");
    assert!(log.contains("exited: Stopped, exit code 0"), "{log}");

    let (code, log) = two_sigterms("30", Duration::from_millis(600));
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("received SIGTERM: forcing shutdown"), "{log}");
    assert!(log.contains("signal 9"), "{log}");
}

#[test]
fn limits_without_cgroups_refuse_to_start_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("vigil.toml");
    std::fs::write(
        &config,
        format!(
            "{}[pods.p]\n[[pods.p.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n[pods.p.containers.resources]\nmemory_max = \"20Mi\"\n",
            crate::common::supervisor_header(&dir.path().join("s.sock"))
        ),
    )
    .expect("write");
    let out = std::process::Command::new(crate::common::BIN)
        .args(["run", "-c"])
        .arg(&config)
        .output()
        .expect("run vigil");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cgroup_root = \"none\"") && err.contains("memory"),
        "{err}"
    );
}

#[test]
fn termination_message_file_becomes_the_terminated_message() {
    // Kubelet getTerminationMessage: the file the container wrote before exiting is the
    // message; under FallbackToLogsOnError an empty file and a failure give the log tail.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("msg");
    let v = Vigil::start(&format!(
        r#"
[pods.msg]
restart_policy = "Never"
[[pods.msg.containers]]
name = "file"
command = ["sh", "-c", "printf 'cannot open /etc/app.toml' > {f}; exit 3"]
termination_message_path = "{f}"
[[pods.msg.containers]]
name = "logs"
command = ["sh", "-c", "for i in $(seq 1 100); do echo line $i; done; exit 2"]
termination_message_path = "{empty}"
termination_message_policy = "FallbackToLogsOnError"
[[pods.msg.containers]]
name = "plain"
command = ["sh", "-c", "echo noise; exit 4"]
"#,
        f = file.display(),
        empty = dir.path().join("never-written").display()
    ));
    v.wait_for(T, "all three to end", |v| {
        ["file", "logs", "plain"]
            .iter()
            .all(|c| v.container("msg", c)["state"]["terminated"].is_object())
    });
    let t = |c: &str| v.container("msg", c)["state"]["terminated"].clone();
    assert_eq!(t("file")["message"], "cannot open /etc/app.toml");
    assert_eq!(t("file")["exit_code"], 3);
    let tail = t("logs")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        tail.starts_with("line 21\n") && tail.ends_with("line 100\n"),
        "the last 80 lines: {tail:?}"
    );
    assert_eq!(
        t("plain")["message"],
        "exited with code 4",
        "without a message, vigil's own explanation"
    );
}

/// Issue 14 point 5 through the CLI: `start` waits for a stopped dependency, a pod `restart`
/// runs the init container again, a container restart does not.
#[test]
fn start_waits_for_dependencies_and_pod_restart_reruns_init_containers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let runs = dir.path().join("init-runs");
    std::fs::write(
        &config,
        format!(
            r#"{}
[pods.db]
termination_grace_period_seconds = 2
[[pods.db.containers]]
name = "db"
command = ["sleep", "600"]

[pods.app]
termination_grace_period_seconds = 2
depends_on = {{ db = "started" }}
[[pods.app.init_containers]]
name = "migrate"
command = ["sh", "-c", "echo run >> {}"]
[[pods.app.containers]]
name = "web"
command = ["sleep", "600"]
"#,
            supervisor_header(&socket),
            runs.display()
        ),
    )
    .expect("write config");
    let v = Vigil::start_with(dir, socket, config);
    let init_runs = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    v.wait_for(T, "app running", |v| {
        state_reason(&v.container("app", "web")) == "Running"
    });
    assert_eq!(init_runs(), 1);
    for pod in ["app", "db"] {
        let out = v.cli(&["stop", pod, "--wait"]);
        assert!(out.status.success(), "{out:?}");
    }
    let out = v.cli(&["start", "app"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("waiting for pod db to be started"), "{said}");
    let web = v.container("app", "web");
    assert_eq!(state_reason(&web), "WaitingForDependencies", "{web}");
    assert_eq!(v.pod("app")["phase"], "Pending");
    let out = v.cli(&["start", "db"]);
    assert!(out.status.success(), "{out:?}");
    v.wait_for(T, "app resumed once db started", |v| {
        state_reason(&v.container("app", "web")) == "Running"
    });
    assert_eq!(init_runs(), 1, "a start resumes the pod: no init re-run");
    let out = v.cli(&["restart", "app", "--wait"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        init_runs(),
        2,
        "a pod restart runs the init container again"
    );
    let out = v.cli(&["restart", "app/web", "--wait"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(init_runs(), 2, "a container restart does not");
}

#[test]
fn a_pod_waiting_on_a_failed_job_says_so_and_start_ignore_dependencies_runs_it() {
    // behaviour.md §8: `job` (restartPolicy Never) fails for good; `app`, which needs it
    // completed, keeps waiting and says why; a plain `start` keeps it waiting, and
    // `start --ignore-dependencies` runs it now.
    let v = Vigil::start(
        "[pods.job]\nrestart_policy = \"Never\"\n[[pods.job.containers]]\nname = \"run\"\n\
         command = [\"sh\", \"-c\", \"exit 1\"]\n\
         [pods.app]\ndepends_on = { job = \"completed\" }\n[[pods.app.containers]]\n\
         name = \"web\"\ncommand = [\"sleep\", \"60\"]\n",
    );
    v.wait_for(T, "app DependencyFailed", |v| {
        state_reason(&v.container("app", "web")) == "DependencyFailed"
    });
    let c = v.container("app", "web");
    assert_eq!(
        c["state"]["waiting"]["message"],
        "waiting for pod job to be completed: pod job failed and will not run again \
         (container run: Error, exit code 1)",
        "{c}"
    );
    let out = v.cli(&["start", "app"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(state_reason(&v.container("app", "web")), "DependencyFailed");
    let out = v.cli(&["start", "app/web", "--ignore-dependencies"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ignore_dependencies starts a whole pod"),
        "{out:?}"
    );
    let out = v.cli(&["start", "app", "--ignore-dependencies"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "starting pod app without waiting for pod job to be completed"
    );
    v.wait_for(T, "app running", |v| {
        state_reason(&v.container("app", "web")) == "Running"
    });
    assert_eq!(
        v.pod("job")["phase"],
        "Failed",
        "the dependency is left as it was"
    );
    assert_eq!(v.shutdown(), 0);
}

/// A shutdown that waits for a container that ignores its stop signal says which one and when
/// the SIGKILL comes, instead of nothing until it does.
#[test]
fn a_shutdown_says_which_container_it_waits_for_and_when_sigkill_comes() {
    let mut v = Vigil::start(
        "[pods.worker]\ntermination_grace_period_seconds = 3\n[[pods.worker.containers]]\n\
         name = \"loop\"\ncommand = [\"sh\", \"-c\", \"trap '' TERM; while :; do sleep 1; done\"]\n",
    );
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("worker", "loop")) == "Running"
    });
    let _ = v.try_request(r#"{"cmd":"shutdown"}"#);
    assert_eq!(v.wait_exit(Duration::from_secs(20)), 0);
    let log = v.log();
    assert!(
        log.contains("shutdown: waiting for worker/loop: SIGKILL in 3s"),
        "{log}"
    );
}

/// `vigil run` of the bundled demo stopped with Ctrl-C (SIGINT) ends at once: its containers
/// handle their stop signals, none waits out a grace period.
#[test]
fn the_bundled_demo_stops_at_once_on_ctrl_c() {
    let demo = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    // The demo as shipped, with this test's socket and without cgroups (any host).
    let text = demo
        .replacen(
            "[supervisor]\n",
            &format!("[supervisor]\nsocket = \"{}\"\n", socket.display()),
            1,
        )
        .replacen("cgroup_root = \"auto\"", "cgroup_root = \"none\"", 1);
    std::fs::write(&config, text).unwrap();
    let mut v = Vigil::start_with(dir, socket, config);
    v.wait_for(T, "worker/loop running", |v| {
        state_reason(&v.container("worker", "loop")) == "Running"
    });
    let pid = v.child.as_ref().unwrap().id();
    let asked = std::time::Instant::now();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert_eq!(v.wait_exit(Duration::from_secs(20)), 0);
    let took = asked.elapsed();
    // The demo's grace is 5 s: well under it means nothing waited for its SIGKILL.
    assert!(took < Duration::from_secs(3), "took {took:?}\n{}", v.log());
    assert!(!v.log().contains("sending SIGKILL"), "{}", v.log());
}

/// `run --exit-with POD`, as a CI job or a container's PID 1 uses it: when the job ends,
/// the web pod is stopped in the usual order and vigil's exit code is the job's.
#[test]
fn run_exit_with_a_job_stops_everything_and_exits_with_the_jobs_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let marker = dir.path().join("web-stopped");
    let config = crate::common::write_config(
        dir.path(),
        &socket,
        "",
        &format!(
            r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sh", "-c", "trap 'touch {}; exit 0' TERM; while :; do sleep 0.1; done"]

[pods.tests]
restart_policy = "Never"
[[pods.tests.containers]]
name = "run"
command = ["sh", "-c", "sleep 1; exit 3"]
"#,
            marker.display()
        ),
    );
    let mut v = Vigil::start_with_args(
        dir,
        socket,
        config,
        &["--exit-with".as_ref(), "tests".as_ref()],
    );
    assert_eq!(v.wait_exit(T), 3, "the job's exit code\n{}", v.log());
    assert!(marker.exists(), "web was stopped with its signal first");
    let log = v.log();
    assert!(
        log.contains("pod tests failed, exit code 3: stopping everything"),
        "{log}"
    );
}

#[test]
fn run_exit_with_an_unknown_pod_is_refused_naming_the_pods() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = crate::common::write_config(
        dir.path(),
        &socket,
        "",
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"sleep\", \"100\"]\n",
    );
    let out = std::process::Command::new(crate::common::BIN)
        .args(["run", "-c"])
        .arg(&config)
        .args(["--exit-with", "wbe"])
        .output()
        .expect("run vigil");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"run --exit-with wbe: no pod "wbe" in the config (its pods: web)"#),
        "{err}"
    );
}

/// `run_as_non_root = true` with a user that is root: the start is refused as the kubelet's
/// verifyRunAsNonRoot refuses it (`StartError`), nothing runs as root.
#[test]
fn run_as_non_root_refuses_to_start_a_container_as_root() {
    let v = Vigil::start(
        "[pods.p]\nrestart_policy = \"Never\"\n[[pods.p.containers]]\nname = \"c\"\n\
         command = [\"sh\", \"-c\", \"exit 0\"]\nuser = \"root\"\nrun_as_non_root = true\n",
    );
    v.wait_for(T, "StartError recorded", |v| {
        v.container("p", "c")["state"]["terminated"]["reason"] == "StartError"
    });
    let c = v.container("p", "c");
    assert_eq!(
        c["state"]["terminated"]["message"],
        "run_as_non_root is set but the container would run as root (uid 0, its user); set user \
         to a non-root user or uid",
        "{c}"
    );
}

/// Issue 41 point 3 with real processes (behaviour.md §8.2): a crash of `db` restarts `app`,
/// which follows it (`restart = true`), once db's new run is ready; `logger`, which does not
/// follow, keeps its process. A `stop` of db stops `bound` (`stop = true`) until db is back.
#[test]
fn a_dependent_that_follows_its_dependency_restarts_with_it_and_stops_while_it_is_stopped() {
    let v = Vigil::start(
        r#"
[pods.db]
termination_grace_period_seconds = 2
containers = [{ name = "c", command = ["sleep", "600"], backoff = { initial_seconds = 0.1 } }]

[pods.app]
termination_grace_period_seconds = 2
depends_on = { db = { condition = "ready", restart = true } }
containers = [{ name = "c", command = ["sleep", "600"] }]

[pods.bound]
termination_grace_period_seconds = 2
depends_on = { db = { condition = "started", stop = true } }
containers = [{ name = "c", command = ["sleep", "600"] }]

[pods.logger]
termination_grace_period_seconds = 2
depends_on = { db = "ready" }
containers = [{ name = "c", command = ["sleep", "600"] }]
"#,
    );
    let pid = |v: &Vigil, pod: &str| v.container(pod, "c")["pid"].as_u64();
    v.wait_for(T, "every pod running", |v| {
        ["db", "app", "bound", "logger"]
            .iter()
            .all(|p| state_reason(&v.container(p, "c")) == "Running")
    });
    let (db0, app0, logger0) = (
        pid(&v, "db").expect("db pid"),
        pid(&v, "app").expect("app pid"),
        pid(&v, "logger").expect("logger pid"),
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(db0 as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill db");
    v.wait_for(T, "app restarted beside db's new run", |v| {
        pid(v, "db").is_some_and(|p| p != db0)
            && pid(v, "app").is_some_and(|p| p != app0)
            && state_reason(&v.container("app", "c")) == "Running"
    });
    assert_eq!(
        pid(&v, "logger"),
        Some(logger0),
        "logger does not follow db"
    );
    let events = v.request(r#"{"cmd":"events"}"#).to_string();
    assert!(
        events.contains("Restarting: dependency db was restarted"),
        "{events}"
    );
    let out = v.cli(&["stop", "db", "--wait"]);
    assert!(out.status.success(), "{out:?}");
    v.wait_for(T, "bound stopped while db is stopped", |v| {
        pid(v, "bound").is_none() && state_reason(&v.container("bound", "c")) != "Running"
    });
    let out = v.cli(&["start", "db"]);
    assert!(out.status.success(), "{out:?}");
    v.wait_for(T, "bound back with db", |v| {
        state_reason(&v.container("bound", "c")) == "Running"
    });
}
