//! `cgroup_root = "none"`: the state file next to the socket lets a restarted vigil
//! (`on_restart = "replace"`; adoption is tests/it/adopt.rs) kill what a `kill -9`ed one left, and a container's `setsid` child (seen by a scan as its descendant)
//! dies with it instead of piling up over restarts.

use std::time::Duration;

use crate::common::{Vigil, processes_with_cmdline, state_reason, supervisor_header};

const T: Duration = Duration::from_secs(20);

/// A service whose main process is `sleep MAIN` and which leaves a `setsid sleep CHILD` behind.
fn config(socket: &std::path::Path, main: u32, child: u32) -> String {
    format!(
        "{}[pods.svc]\nbackoff = {{ initial_seconds = 0.1, max_seconds = 0.2 }}\n[[pods.svc.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"setsid sleep {child} & exec sleep {main}\"]\n",
        supervisor_header(socket).replacen(
            "[supervisor]\n",
            "[supervisor]\non_restart = \"replace\"\n",
            1
        )
    )
}

/// Sleep lengths no other copy of this test binary uses (several checkouts may run the suite
/// at once on one machine, and processes are counted machine-wide by their command line).
fn unique_secs(offset: u32) -> (u32, u32) {
    let base = 1_000_000 + (std::process::id() % 1_000_000) * 4 + offset;
    (base, base + 1)
}

fn count(secs: u32) -> usize {
    processes_with_cmdline(&format!("sleep\0{secs}\0")).len()
}

fn state_lists(socket: &std::path::Path, pid: u32) -> bool {
    let mut p = socket.as_os_str().to_os_string();
    p.push(".state");
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with(&format!("{pid} ")))
}

#[test]
fn after_kill_9_of_vigil_a_restarted_vigil_kills_what_it_left_and_starts_no_duplicate() {
    let (main, child) = unique_secs(0);
    let shared = tempfile::tempdir().unwrap();
    let socket = shared.path().join("vigil.sock");
    let cfg = shared.path().join("vigil.toml");
    std::fs::write(&cfg, config(&socket, main, child)).unwrap();

    let mut a = Vigil::start_with(tempfile::tempdir().unwrap(), socket.clone(), cfg.clone());
    a.wait_for(T, "svc running with its setsid child", |_| {
        count(main) == 1 && count(child) == 1
    });
    let child_pid = processes_with_cmdline(&format!("sleep\0{child}\0"))[0];
    a.wait_for(T, "a scan recorded the setsid child", |_| {
        state_lists(&socket, child_pid)
    });
    let mut proc_a = a.child.take().unwrap();
    proc_a.kill().unwrap(); // SIGKILL: no clean-up by vigil
    proc_a.wait().unwrap();
    assert_eq!((count(main), count(child)), (1, 1), "they outlive vigil");

    let b = Vigil::start_with(tempfile::tempdir().unwrap(), socket.clone(), cfg.clone());
    b.wait_for(T, "svc running again", |v| {
        state_reason(&v.container("svc", "c")) == "Running"
    });
    b.wait_for(T, "exactly one copy of each", |_| {
        count(main) == 1 && count(child) == 1
    });
    assert!(
        !processes_with_cmdline(&format!("sleep\0{child}\0")).contains(&child_pid),
        "the old setsid child was killed"
    );
    assert!(
        b.log().contains("left running by an earlier vigil"),
        "{}",
        b.log()
    );
    drop(b);
    assert_eq!(
        (count(main), count(child)),
        (0, 0),
        "a clean shutdown leaves nothing"
    );
}

#[test]
fn a_setsid_child_seen_by_a_scan_dies_with_its_container_on_every_restart() {
    let (main, child) = unique_secs(2);
    let v = Vigil::start(
        &config(std::path::Path::new("/unused"), main, child)
            .split_once("\n\n")
            .map(|(_, pods)| pods.to_string())
            .unwrap(),
    );
    for round in 0..2 {
        v.wait_for(T, "running with its setsid child", |_| {
            count(main) == 1 && count(child) == 1
        });
        let child_pid = processes_with_cmdline(&format!("sleep\0{child}\0"))[0];
        v.wait_for(T, "a scan recorded the setsid child", |v| {
            state_lists(&v.socket, child_pid)
        });
        let restarts = v.container("svc", "c")["restart_count"].as_u64().unwrap();
        let main_pid = processes_with_cmdline(&format!("sleep\0{main}\0"))[0];
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(main_pid as i32),
            nix::sys::signal::SIGKILL,
        )
        .unwrap();
        v.wait_for(T, "restarted", |v| {
            v.container("svc", "c")["restart_count"].as_u64() > Some(restarts)
        });
        v.wait_for(T, "the old setsid child gone", |_| {
            !processes_with_cmdline(&format!("sleep\0{child}\0")).contains(&child_pid)
        });
        let _ = round;
    }
    v.wait_for(T, "one copy of each after two restarts", |_| {
        count(main) == 1 && count(child) == 1
    });
    // Shut down at once, maybe before any scan saw the newest setsid child: it is re-parented
    // to vigil by then, and vigil kills what was re-parented to it.
    drop(v);
    assert_eq!(
        (count(main), count(child)),
        (0, 0),
        "a shutdown leaves nothing"
    );
}
