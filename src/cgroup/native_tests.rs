//! Tests on this host's real cgroup2 hierarchy (found via /proc/self/mountinfo). Each works in
//! a scratch root `<mount>/vigil-test-<pid>-<n>` that a drop guard kills and removes; the test
//! process itself is never moved (the harness is multi-threaded), except in the re-executed
//! child of `setup_moves_itself_into_the_supervisor_leaf_and_back`. They need root and a
//! cgroup2 mount, so they are `#[ignore = "needs root and cgroup v2"]`; run with
//! `--include-ignored` without either, they fail naming the need. Where the memory and pids
//! controllers are absent (a hybrid host: only hugetlb on cgroup2), the limits test checks that
//! a limit is refused naming its file instead; the VM suite covers applied limits.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use super::discover;
use super::files::{self, CGROUP_EVENTS};
use super::removal::kill_by_pids;
use super::*;

const DEADLINE: Duration = Duration::from_secs(10);
const CHILD_ENV: &str = "VIGIL_CGROUP_SELFMOVE_ROOT";

/// A scratch cgroup on the real hierarchy, killed and removed on drop.
struct Scratch {
    root: PathBuf,
    mount: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.root.exists() {
            return;
        }
        let _ = files::write_file(&self.root, files::CGROUP_KILL, "1");
        if let Ok(events) = files::open_read(&self.root, CGROUP_EVENTS) {
            let p = self.root.join(CGROUP_EVENTS);
            let deadline = Instant::now() + DEADLINE;
            while Instant::now() < deadline {
                match files::reread(&events, &p).map(|t| files::parse_populated(&t, &p)) {
                    Ok(Ok(false)) | Err(_) | Ok(Err(_)) => break,
                    Ok(Ok(true)) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        remove_all(&self.root);
    }
}

fn remove_all(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_all(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The cgroup2 mount point; panics (naming the need) when not root or there is none.
fn cgroup2_mount() -> PathBuf {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (it creates cgroups); run it as root or without --include-ignored"
    );
    let text = std::fs::read_to_string(discover::PROC_SELF_MOUNTINFO).unwrap();
    let mounts = discover::parse_mountinfo(&text);
    discover::find_cgroup2(&mounts)
        .map(|m| m.mount_point.clone())
        .expect("this test needs a cgroup2 mount and there is none")
}

/// A fresh scratch root on the cgroup2 mount; panics without root or cgroup2.
fn scratch() -> Scratch {
    static N: AtomicUsize = AtomicUsize::new(0);
    let mount = cgroup2_mount();
    let n = N.fetch_add(1, Ordering::Relaxed);
    let root = mount.join(format!("vigil-test-{}-{n}", std::process::id()));
    Scratch { root, mount }
}

/// `sh -c script` placed into `cg` by writing "0" to its cgroup.procs fd before exec.
fn spawn_in(cg: &ContainerCgroup, script: &str) -> Child {
    let fd = cg.procs_fd().as_raw_fd();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs between fork and exec and only calls write(2), which is
    // async-signal-safe, on a descriptor the parent keeps open; it allocates nothing
    // (last_os_error does not allocate).
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
    cmd.spawn().expect("spawn sh")
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Gone, or a zombie waiting for its reaper (exited: no longer in any cgroup listing).
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|st| st == "Z" || st == "X"),
    }
}

fn assert_killed(child: &mut Child) {
    use std::os::unix::process::ExitStatusExt;
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn kill_empties_the_container_with_a_priority_event_and_remove_succeeds() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let c = m
        .create_container("pod", "ctr", &Limits::default())
        .unwrap();
    assert!(!c.populated().unwrap());

    let mut poll = Poll::new().unwrap();
    let raw = c.events_fd().as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&raw), Token(7), Interest::PRIORITY)
        .unwrap();

    let mut child = spawn_in(&c, "sleep 100 & setsid sh -c 'sleep 100' & wait");
    wait_for("3 processes in the container", || {
        c.pids().unwrap().len() >= 3
    });
    let pids = c.pids().unwrap();
    let rel = c.path().strip_prefix(&s.mount).unwrap();
    let own = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id())).unwrap();
    assert!(
        own.lines().any(|l| l == format!("0::/{}", rel.display())),
        "{own}"
    );
    assert!(c.populated().unwrap());

    // Drain the populated 0→1 notification; reading re-arms the descriptor.
    let mut events = Events::with_capacity(8);
    poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
    c.populated().unwrap();

    c.kill().unwrap();
    let deadline = Instant::now() + DEADLINE;
    let mut saw_priority = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no PRIORITY event with populated 0");
        poll.poll(&mut events, Some(left)).unwrap();
        for ev in events.iter() {
            assert_eq!(ev.token(), Token(7));
            saw_priority |= ev.is_priority();
        }
        if saw_priority && !c.populated().unwrap() {
            break;
        }
    }
    for pid in pids {
        assert!(dead(pid), "pid {pid} survived cgroup.kill");
    }
    assert_killed(&mut child);
    poll.registry().deregister(&mut SourceFd(&raw)).unwrap();
    c.remove().unwrap();
    assert!(!c.path().exists());
    assert!(m.remove_pod_dir("pod").unwrap());
    m.teardown().unwrap();
    assert!(!s.root.exists());
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn remove_while_populated_is_busy_then_succeeds_after_kill() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let c = m.create_container("p", "c", &Limits::default()).unwrap();
    let mut child = spawn_in(&c, "exec sleep 100");
    wait_for("the process to be placed", || !c.pids().unwrap().is_empty());
    match c.remove() {
        Err(CgroupError::Busy { path }) => assert_eq!(path, c.path()),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert!(
        !m.remove_pod_dir("p").unwrap(),
        "pod dir with a container must stay"
    );
    c.kill().unwrap();
    assert!(c.wait_unpopulated(DEADLINE).unwrap());
    assert_killed(&mut child);
    c.remove().unwrap();
    m.teardown().unwrap();
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn create_container_replaces_a_leftover_and_kills_its_processes() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let old = m.create_container("p", "c", &Limits::default()).unwrap();
    let mut child = spawn_in(&old, "exec sleep 100");
    wait_for("the process to be placed", || {
        !old.pids().unwrap().is_empty()
    });
    let fresh = m.create_container("p", "c", &Limits::default()).unwrap();
    assert_killed(&mut child);
    assert!(!fresh.populated().unwrap());
    assert!(fresh.pids().unwrap().is_empty());
    fresh.remove().unwrap();
    m.teardown().unwrap();
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn sweep_stale_kills_and_removes_leftovers_but_not_the_supervisor_leaf() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    std::fs::create_dir(s.root.join(subtree::SUPERVISOR_LEAF)).unwrap();
    let c = m
        .create_container("old-pod", "c", &Limits::default())
        .unwrap();
    let mut child = spawn_in(&c, "sleep 100 & exec sleep 100");
    wait_for("2 processes", || c.pids().unwrap().len() >= 2);
    let cleaned = m.sweep_stale();
    assert_eq!(cleaned, vec![s.root.join("old-pod")]);
    assert!(!s.root.join("old-pod").exists());
    assert!(s.root.join(subtree::SUPERVISOR_LEAF).exists());
    assert_killed(&mut child);
    m.teardown().unwrap();
    assert!(!s.root.exists());
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn probe_child_cgroup_lives_inside_a_populated_container_and_dies_with_it() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let c = m.create_container("p", "c", &Limits::default()).unwrap();
    let mut main = spawn_in(&c, "exec sleep 100");
    wait_for("main placed", || !c.pids().unwrap().is_empty());
    let probe = c.create_child("probe-liveness").unwrap();
    let mut probe_proc = spawn_in(&probe, "sleep 100 & exec sleep 100");
    wait_for("probe placed", || probe.pids().unwrap().len() >= 2);
    assert_eq!(
        c.pids().unwrap().len(),
        1,
        "probe processes are not in the parent"
    );

    // The probe alone can be killed and removed, the container lives on.
    probe.kill().unwrap();
    assert!(probe.wait_unpopulated(DEADLINE).unwrap());
    assert_killed(&mut probe_proc);
    probe.remove().unwrap();
    assert!(c.populated().unwrap());

    // A container kill also covers probe sub-cgroups; remove takes empty children along.
    let probe2 = c.create_child("probe-readiness").unwrap();
    let mut p2 = spawn_in(&probe2, "exec sleep 100");
    wait_for("probe 2 placed", || !probe2.pids().unwrap().is_empty());
    c.kill().unwrap();
    assert!(c.wait_unpopulated(DEADLINE).unwrap());
    assert_killed(&mut main);
    assert_killed(&mut p2);
    c.remove().unwrap();
    assert!(!c.path().exists());
    m.teardown().unwrap();
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn kill_fallback_sigkills_every_listed_pid_including_sub_cgroups() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let c = m.create_container("p", "c", &Limits::default()).unwrap();
    let mut child = spawn_in(&c, "sleep 100 & setsid sh -c 'sleep 100' & wait");
    let probe = c.create_child("probe-startup").unwrap();
    let mut p = spawn_in(&probe, "exec sleep 100");
    wait_for("4 processes", || {
        c.pids().unwrap().len() >= 3 && !probe.pids().unwrap().is_empty()
    });
    kill_by_pids(c.path()).unwrap();
    assert!(c.wait_unpopulated(DEADLINE).unwrap());
    assert_killed(&mut child);
    assert_killed(&mut p);
    c.remove().unwrap();
    m.teardown().unwrap();
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn status_figures_are_reread_once_they_are_100_ms_old_and_not_before() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let c = m.create_container("p", "c", &Limits::default()).unwrap();
    let t0 = Instant::now();
    let first = c.figures_at(t0);
    assert!(first.cpu_usage_usec.is_some(), "{first:?}");
    // With the cgroup gone, a fresh reading has nothing; a reading within 100 ms is the
    // cached one, and one 100 ms later is fresh.
    c.remove().unwrap();
    assert_eq!(c.figures_at(t0 + Duration::from_millis(99)), first);
    assert_eq!(
        c.figures_at(t0 + container::FIGURES_MAX_AGE).cpu_usage_usec,
        None
    );
    m.teardown().unwrap();
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn figures_and_oom_counters_read_what_exists() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let c = m.create_container("p", "c", &Limits::default()).unwrap();
    let f = c.figures();
    // cpu.stat exists on every cgroup v2 cgroup (core file since Linux 4.15).
    assert!(f.cpu_usage_usec.is_some(), "{f:?}");
    if c.memory_events_fd().is_none() {
        eprintln!("memory controller not enabled here: memory figures are None");
        assert_eq!(f.memory_current, None);
        assert_eq!(c.oom_counters().unwrap(), OomCounters::default());
    }
    assert_eq!(
        c.oom_delta_since_baseline().unwrap(),
        OomCounters::default()
    );
    c.remove().unwrap();
    m.teardown().unwrap();
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn limits_are_applied_when_controllers_exist_and_refused_naming_the_file_otherwise() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    let needs = Controllers::MEMORY | Controllers::PIDS;
    let res = Limits {
        memory_max: Some(20 * 1024 * 1024),
        pids_max: Some(32),
        oom_group: true,
        ..Limits::default()
    };
    if m.check_controllers(needs).is_err() {
        // A host without the controllers (the hybrid dev host): the limit is refused, and the
        // error names the file it could not write.
        let err = m.create_container("p", "c", &res).unwrap_err().to_string();
        assert!(err.contains("memory.max"), "{err}");
        m.teardown().unwrap();
        return;
    }
    let c = m.create_container("p", "c", &res).unwrap();
    assert_eq!(c.memory_max(), Some(20 * 1024 * 1024));
    assert_eq!(
        files::read_file(c.path(), files::PIDS_MAX).unwrap().trim(),
        "32"
    );
    assert!(c.memory_events_fd().is_some());
    c.remove().unwrap();
    m.teardown().unwrap();
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn check_controllers_explains_missing_memory_on_this_host() {
    let s = scratch();
    let m = Manager::with_root(&s.root).unwrap();
    match m.check_controllers(Controllers::MEMORY) {
        // A host with the controller: nothing to explain, and no error to look at.
        Ok(()) => {}
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.starts_with("memory controller not available in cgroup2 at "),
                "{msg}"
            );
            let mi = std::fs::read_to_string(discover::PROC_SELF_MOUNTINFO).unwrap();
            if discover::v1_mount_of(&discover::parse_mountinfo(&mi), "memory").is_some() {
                assert!(
                    msg.contains("it is bound to cgroup v1 on this host"),
                    "{msg}"
                );
            }
        }
    }
    m.teardown().unwrap();
}

/// The self-move runs in a re-executed copy of this test binary (only this test, one
/// thread), so the real test harness process is never moved.
#[test]
#[ignore = "needs root and cgroup v2"]
fn setup_moves_itself_into_the_supervisor_leaf_and_back() {
    if let Ok(root) = std::env::var(CHILD_ENV) {
        selfmove_child(Path::new(&root));
        return;
    }
    let s = scratch();
    let before = std::fs::read_to_string(discover::PROC_SELF_CGROUP).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "--include-ignored",
            "cgroup::native_tests::setup_moves_itself_into_the_supervisor_leaf_and_back",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &s.root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SELFMOVE-OK"), "{text}");
    if before.lines().any(|l| l == "0::/") {
        // At the hierarchy root both Path (an ancestor of the root) and Auto move vigil, and
        // only once told the initial starts are done (`finish_move`), not at setup.
        for what in ["path", "auto"] {
            assert!(text.contains(&format!("{what}: not yet")), "{text}");
            assert!(text.contains(&format!("{what}: MOVED")), "{text}");
        }
    }
    assert!(!s.root.exists(), "teardown must remove the root it created");
    assert_eq!(
        before,
        std::fs::read_to_string(discover::PROC_SELF_CGROUP).unwrap()
    );
}

fn selfmove_child(root: &Path) {
    let mount = cgroup2_mount();
    let rel = root.strip_prefix(&mount).unwrap();
    let expect = format!("0::/{}/supervisor", rel.display());
    let name = root.file_name().unwrap().to_str().unwrap();
    let configs = [
        ("path", RootSetting::Path(root.to_path_buf())),
        ("auto", RootSetting::Auto),
    ];
    for (what, cfg) in configs {
        let mut m = Manager::setup(&cfg, name, Controllers::NONE)
            .unwrap()
            .unwrap();
        assert_eq!(m.root(), root);
        let now = std::fs::read_to_string(discover::PROC_SELF_CGROUP).unwrap();
        if !now.lines().any(|l| l == expect) {
            println!("{what}: not yet");
        }
        // Containers may start before the move (above the root it does not block them).
        let early = m
            .create_container("early", "c", &Limits::default())
            .unwrap();
        early.remove().unwrap();
        m.finish_move();
        let now = std::fs::read_to_string(discover::PROC_SELF_CGROUP).unwrap();
        if now.lines().any(|l| l == expect) {
            println!("{what}: MOVED");
        } else {
            // vigil moves only when its own cgroup is the root or above it.
            println!("{what}: NOT-MOVED ({now})");
        }
        let c = m.create_container("p", "c", &Limits::default()).unwrap();
        c.remove().unwrap();
        m.teardown().unwrap();
        assert!(!root.exists(), "{what}: teardown left {}", root.display());
    }
    println!("SELFMOVE-OK");
}
