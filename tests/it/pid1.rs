//! vigil as PID 1 of a container: a fresh PID namespace (`unshare --pid --fork`), where it
//! must reap every orphan and, on SIGTERM, stop everything and exit with a meaningful code
//! instead of powering off. (The VM scenarios cover PID 1 of a whole machine.)

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{BIN, supervisor_header};

/// Children of `ppid` (host pids), with their state letter.
fn children(ppid: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest = stat.rsplit(')').next().unwrap_or("");
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if f.next().and_then(|p| p.parse::<u32>().ok()) == Some(ppid) {
            out.push((pid, state));
        }
    }
    out
}

#[test]
#[ignore = "needs root (a PID namespace)"]
fn as_pid1_of_a_pid_namespace_reaps_orphans_and_exits_zero_on_sigterm() {
    crate::common::require_root("to create a PID namespace");
    let unshare_ok = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        unshare_ok,
        "`unshare --pid --fork --mount-proc true` failed: this test needs a PID namespace"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    std::fs::write(
        &config,
        format!(
            "{}[pods.orphans]\n[[pods.orphans.containers]]\nname = \"maker\"\n\
             command = [\"sh\", \"-c\", \"for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do (sleep 0.2 &); done; echo made; exec sleep 60\"]\n",
            supervisor_header(&socket)
        ),
    )
    .expect("write config");
    let mut child = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(BIN)
        .args(["run", "-c"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare");
    // vigil is the only child of `unshare --fork`.
    let deadline = Instant::now() + Duration::from_secs(10);
    let vigil = loop {
        if let Some((pid, _)) = children(child.id()).first() {
            break *pid;
        }
        assert!(Instant::now() < deadline, "vigil did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Wait until the orphans were made and have exited: none of vigil's children may be a
    // zombie for long (the orphans are re-parented to vigil, PID 1 of the namespace).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut saw_made = false;
    loop {
        if !saw_made {
            saw_made = std::process::Command::new(BIN)
                .args(["logs", "orphans/maker", "--socket"])
                .arg(&socket)
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("made"));
        }
        let kids = children(vigil);
        let zombies = kids.iter().filter(|(_, s)| *s == 'Z').count();
        // Settled: the orphans are gone, only the container's `sleep 60` is left, no zombie.
        if saw_made && zombies == 0 && kids.len() == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "orphans not reaped: children of vigil {kids:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &vigil.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "vigil as PID 1 did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert_eq!(
        status.code(),
        Some(0),
        "exit code of vigil as PID 1; log:\n{err}"
    );
    assert!(
        !err.contains("powering off"),
        "a container's PID 1 exits, it does not power off"
    );
}
