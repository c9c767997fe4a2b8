//! Pipelined starts (issue 20): with cgroups, a container's child is cloned and the loop goes on
//! to the next while it execs; its exec is confirmed later from its error pipe. These tests
//! start many containers at once and check that every one ends where it should — Running with
//! its own live pid, or StartError naming its own path — that a stop or shutdown in the middle
//! of the pipeline leaves nothing behind, and that an upgrade in the middle keeps every pid.
//!
//! They need root and a cgroup2 mount (the pipelined path is the clone3(CLONE_INTO_CGROUP) one;
//! without cgroups a spawn waits for its exec as before), hence `#[ignore]`.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;

use crate::common::{BIN, Vigil, alive, state_reason};
use crate::faults::{ScratchCgroup, start_with_cgroup_root};

const T: Duration = Duration::from_secs(60);

/// A sleep argument unique to this test process and `salt`, so its children can be found by
/// command line.
fn unique_sleep(salt: u32) -> String {
    format!("{}", 2_000_000 + std::process::id() * 10 + salt)
}

fn sleepers(n: usize, arg: &str) -> String {
    let mut pods = String::new();
    for i in 0..n {
        pods += &format!(
            "[pods.p{i:04}]\n[[pods.p{i:04}.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"{arg}\"]\n\n"
        );
    }
    pods
}

/// Every container of every pod, as (pod name, container status).
fn containers(v: &Vigil) -> Vec<(String, Value)> {
    let st = v.status();
    let mut out = Vec::new();
    for p in st["pods"].as_array().cloned().unwrap_or_default() {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        for c in p["containers"].as_array().cloned().unwrap_or_default() {
            out.push((name.clone(), c));
        }
    }
    out
}

fn all_running(v: &Vigil, n: usize) -> bool {
    let cs = containers(v);
    cs.len() == n && cs.iter().all(|(_, c)| state_reason(c) == "Running")
}

/// The pids of all `n` containers: each Running, alive, a `sleep ARG` of its own.
fn running_pids(v: &Vigil, n: usize, arg: &str) -> Vec<u64> {
    let cs = containers(v);
    assert_eq!(cs.len(), n);
    let mut pids = Vec::new();
    for (pod, c) in &cs {
        assert_eq!(state_reason(c), "Running", "{pod}: {c}");
        assert_eq!(c["restart_count"], 0, "{pod}: {c}");
        let pid = c["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("{pod}: no pid: {c}"));
        assert!(alive(pid), "{pod}: pid {pid} is not alive");
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert_eq!(
            cmdline,
            format!("sleep\0{arg}\0"),
            "{pod}: pid {pid} runs something else"
        );
        pids.push(pid);
    }
    let distinct: HashSet<u64> = pids.iter().copied().collect();
    assert_eq!(distinct.len(), n, "every container has its own pid");
    pids
}

/// SIGTERM to vigil (by its pid) and its exit code.
fn sigterm_and_wait(v: &mut Vigil) -> i32 {
    let pid = v.child.as_ref().expect("running").id();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    v.wait_exit(Duration::from_secs(40))
}

fn sleep_pids(arg: &str) -> Vec<u32> {
    crate::common::processes_with_cmdline(&format!("sleep\0{arg}\0"))
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn two_hundred_containers_started_at_once_all_run_with_their_own_pids() {
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(1);
    let v = start_with_cgroup_root(&cg, &sleepers(200, &arg));
    v.wait_for(T, "200 containers Running", |v| all_running(v, 200));
    running_pids(&v, 200, &arg);
    assert_eq!(sleep_pids(&arg).len(), 200, "one process per container");
    let code = v.shutdown();
    assert_eq!(code, 0);
    assert!(sleep_pids(&arg).is_empty(), "nothing left after shutdown");
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn an_exec_failure_among_many_pipelined_starts_is_reported_on_its_own_container() {
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(2);
    let tmp = tempfile::tempdir().expect("tempdir");
    let not_exec = tmp.path().join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\nexit 0\n").expect("write");
    let missing = tmp.path().join("no-such-binary");
    let no_dir = tmp.path().join("no-such-dir");
    // Failures in the middle of a run of good starts, each a different kind.
    let mut pods = sleepers(120, &arg);
    for (name, extra) in [
        (
            "bad-missing",
            format!("command = [\"{}\"]", missing.display()),
        ),
        (
            "bad-noexec",
            format!("command = [\"{}\"]", not_exec.display()),
        ),
        (
            "bad-cwd",
            format!(
                "command = [\"sleep\", \"{arg}\"]\nworking_dir = \"{}\"",
                no_dir.display()
            ),
        ),
    ] {
        pods += &format!(
            "[pods.{name}]\nrestart_policy = \"Never\"\n[[pods.{name}.containers]]\nname = \"c\"\n{extra}\n\n"
        );
    }
    pods += &sleepers(120, &arg).replace("pods.p", "pods.q");
    let v = start_with_cgroup_root(&cg, &pods);
    v.wait_for(T, "every container settled", |v| {
        let cs = containers(v);
        cs.len() == 243
            && cs.iter().all(|(_, c)| {
                let r = state_reason(c);
                r == "Running" || r == "StartError"
            })
    });
    let mut failed = Vec::new();
    for (pod, c) in containers(&v) {
        if state_reason(&c) == "StartError" {
            failed.push((pod, c["state"]["terminated"]["message"].to_string()));
        } else {
            assert!(pod.starts_with('p') || pod.starts_with('q'), "{pod}: {c}");
        }
    }
    failed.sort();
    let names: Vec<&str> = failed.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        names,
        ["bad-cwd", "bad-missing", "bad-noexec"],
        "{failed:?}"
    );
    let msg = |p: &str| failed.iter().find(|(n, _)| n == p).unwrap().1.clone();
    let m = msg("bad-missing");
    assert!(
        m.contains(&missing.display().to_string()) && m.contains("No such file"),
        "{m}"
    );
    let m = msg("bad-noexec");
    assert!(
        m.contains(&not_exec.display().to_string()) && m.contains("Permission denied"),
        "{m}"
    );
    let m = msg("bad-cwd");
    assert!(
        m.contains(&no_dir.display().to_string()) && m.contains("working directory"),
        "{m}"
    );
    // The failed ones left no process and the others run on, once each.
    assert_eq!(sleep_pids(&arg).len(), 240);
    let events = v.request(r#"{"cmd":"events"}"#).to_string();
    for p in ["bad-cwd", "bad-missing", "bad-noexec"] {
        assert!(
            events.contains(&format!("{p}/c")),
            "a Failed event for {p}: {events}"
        );
    }
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn stops_and_a_shutdown_in_the_middle_of_the_pipeline_leave_nothing_running() {
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(3);
    let mut v = start_with_cgroup_root(&cg, &sleepers(300, &arg));
    // As soon as the socket answers (containers are still being started): stop a third of
    // them, one request each.
    v.wait_for(T, "the socket", |v| {
        v.try_request(r#"{"cmd":"status"}"#).is_some()
    });
    for i in (0..300).step_by(3) {
        let r = v.request(&format!(r#"{{"cmd":"stop","pod":"p{i:04}"}}"#));
        assert_eq!(r["ok"], true, "{r}");
    }
    v.wait_for(T, "stopped ones Stopped, others Running", |v| {
        let cs = containers(v);
        cs.len() == 300
            && cs.iter().all(|(pod, c)| {
                let i: usize = pod[1..].parse().unwrap();
                let want = if i % 3 == 0 { "Stopped" } else { "Running" };
                state_reason(c) == want
            })
    });
    assert_eq!(
        sleep_pids(&arg).len(),
        200,
        "the stopped ones left no process"
    );
    // A shutdown while nothing is pending, then again with starts in flight.
    assert_eq!(sigterm_and_wait(&mut v), 0);
    assert!(sleep_pids(&arg).is_empty(), "nothing left after shutdown");

    let arg = unique_sleep(4);
    let mut v = start_with_cgroup_root(&cg, &sleepers(300, &arg));
    v.wait_for(T, "the socket", |v| {
        v.try_request(r#"{"cmd":"status"}"#).is_some()
    });
    assert_eq!(sigterm_and_wait(&mut v), 0);
    assert!(
        sleep_pids(&arg).is_empty(),
        "a shutdown during the starts leaves nothing running\n{}",
        v.log()
    );
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn an_upgrade_in_the_middle_of_the_pipeline_keeps_every_container() {
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(5);
    let next_dir = tempfile::tempdir().expect("tempdir");
    let next = next_dir.path().join("vigil-next");
    std::fs::copy(BIN, &next).expect("copy vigil");
    let v = start_with_cgroup_root(&cg, &sleepers(300, &arg));
    v.wait_for(T, "the socket", |v| {
        v.try_request(r#"{"cmd":"status"}"#).is_some()
    });
    let r = v.request(&format!(
        r#"{{"cmd":"upgrade","binary":"{}"}}"#,
        next.display()
    ));
    assert_eq!(r["ok"], true, "{r}\n{}", v.log());
    v.wait_for(T, "300 containers Running", |v| all_running(v, 300));
    let pids = running_pids(&v, 300, &arg);
    assert_eq!(sleep_pids(&arg).len(), 300, "no container started twice");
    // Still the same processes a moment later: nothing was restarted behind the status.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(running_pids(&v, 300, &arg), pids);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn vigil_started_above_its_root_moves_into_the_supervisor_leaf_once_its_containers_started() {
    // The test process (and so vigil) sits above the scratch root: vigil's move into
    // `<root>/supervisor` comes after its initial starts (behaviour.md §1, cgroup layout).
    let cg = ScratchCgroup::new();
    let arg = unique_sleep(5);
    let v = start_with_cgroup_root(&cg, &sleepers(20, &arg));
    v.wait_for(T, "20 containers Running", |v| all_running(v, 20));
    let pid = v.child.as_ref().expect("running").id();
    let name = cg
        .path
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let want = format!("/{name}/supervisor");
    let own = || {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_string))
            .unwrap_or_default()
    };
    v.wait_for(T, "vigil in its supervisor leaf", |_| {
        own().ends_with(&want)
    });
    let procs = std::fs::read_to_string(cg.path.join("supervisor/cgroup.procs")).expect("procs");
    assert_eq!(procs.trim(), pid.to_string(), "only vigil is in the leaf");
    assert_eq!(v.shutdown(), 0);
    assert!(sleep_pids(&arg).is_empty(), "nothing left after shutdown");
}

/// A container's reset of its `oom_score_adj` to 0 must not reach vigil. The pipelined child
/// shares vigil's memory until it execs, and the kernel gives an `oom_score_adj` written by one
/// process to every process sharing its memory (fs/proc/base.c, `__set_oom_adj`): such a child
/// resetting its own value would reset vigil's protection. Checked with a raised value (no
/// privilege needed, proc(5)) and with the protective default where lowering is allowed, over
/// many starts at once and a restart.
#[test]
#[ignore = "needs root and cgroup v2"]
fn starting_containers_leaves_vigils_own_oom_score_adj_alone() {
    let values = crate::common::oom_score_adj_values(500, -900);
    let read = crate::common::oom_score_adj_of;
    for (salt, adj) in values.into_iter().enumerate() {
        let cg = ScratchCgroup::new();
        let arg = unique_sleep(7 + salt as u32);
        let v = Vigil::start_in(
            tempfile::tempdir().expect("tempdir"),
            &format!("{}\noom_score_adj = {adj}", cg.root_line()),
            &sleepers(20, &arg),
        );
        v.wait_for(T, "20 containers Running", |v| all_running(v, 20));
        let vigil_pid = u64::from(v.child.as_ref().expect("running").id());
        assert_eq!(
            read(vigil_pid),
            adj.to_string(),
            "vigil's own value\n{}",
            v.log()
        );
        let pids = running_pids(&v, 20, &arg);
        for pid in &pids {
            assert_eq!(read(*pid), "0", "container pid {pid} starts at 0");
        }
        // A restart spawns again the same way.
        let first = pids[0];
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(first as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill");
        v.wait_for(T, "the killed container restarted", |v| {
            containers(v)
                .iter()
                .any(|(_, c)| c["restart_count"] == 1 && state_reason(c) == "Running")
        });
        assert_eq!(
            read(vigil_pid),
            adj.to_string(),
            "after a restart\n{}",
            v.log()
        );
        assert_eq!(v.shutdown(), 0);
    }
}

/// `VIGIL_PLAIN` (src/tricks.rs) turns the named performance tricks off for that vigil: its
/// start-up log says which, names a word that is no trick, and the plain paths start and
/// restart containers in cgroups as the tricks do (CI runs the lifecycle tests this way too).
#[test]
#[ignore = "needs root and a cgroup2 mount"]
fn vigil_plain_takes_the_plain_paths_and_names_what_it_does_not_know() {
    let cg = ScratchCgroup::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let pods = "[pods.loop]\nrestart_policy = \"Always\"\n[pods.loop.backoff]\ninitial_seconds = 0.1\nmax_seconds = 0.1\n\
                [[pods.loop.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"sleep 0.2\"]\n";
    let config = crate::common::write_config(dir.path(), &socket, &cg.root_line(), pods);
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["run", "-c"])
        .arg(&config)
        .env("VIGIL_LOG", "info")
        .env(
            "VIGIL_PLAIN",
            "clone-vm, json-pieces,idle-trim,pipe-growth,dlmalloc,bogus",
        )
        .stdin(std::process::Stdio::null());
    let v = Vigil::launch(cmd, dir, socket, config);
    v.wait_for(T, "three restarts on the plain paths", |v| {
        v.container("loop", "c")["restart_count"].as_u64() >= Some(3)
    });
    let log = v.log();
    assert!(
        log.contains(
            "VIGIL_PLAIN: plain paths for clone-vm, dlmalloc, json-pieces, idle-trim, pipe-growth"
        ),
        "{log}"
    );
    assert!(log.contains("\"bogus\" is no trick"), "{log}");
    // The status reply, written by the plain JSON path, is whole and parses.
    assert_eq!(v.status()["pods"][0]["name"], "loop");
    v.shutdown();
}
