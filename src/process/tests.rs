//! Tests with real short-lived children.
//!
//! cargo runs tests as threads of one process, so a `waitpid(-1)` here could steal another
//! test's child. Every test therefore waits for its own pid only ([`try_reap`]); the one test of
//! [`reap_all`] (and the one that changes process-wide signal dispositions) re-executes the
//! test binary to run alone in a fresh process (see `isolated`).

use super::child::child_plan;
use super::prepare::{can_drop_bounding, cap_last_cap};
use super::spawn::CLONE3_UNUSABLE;
use super::*;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::process::Command;

use crate::config::spec::{ContainerSpec, Rlimit};
use nix::errno::Errno;
use nix::unistd::User;
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);
const ISOLATED_ENV: &str = "VIGIL_ISOLATED_TEST";

fn spec(user: Option<&str>) -> ContainerSpec {
    ContainerSpec {
        user: user.map(str::to_string),
        termination_grace: Duration::from_secs(1),
        ..ContainerSpec::new("t", &["/bin/true"])
    }
}

/// `RLIMIT_NOFILE` is `u32` on glibc and `c_int` on musl.
#[allow(clippy::unnecessary_cast)]
fn nofile(n: u64) -> Rlimit {
    Rlimit {
        resource: libc::RLIMIT_NOFILE as u32,
        name: "nofile",
        soft: n,
        hard: n,
    }
}

fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

/// Waits for `pid` (only that pid) with a deadline.
fn wait_for(pid: u32) -> Reaped {
    let start = Instant::now();
    loop {
        if let Some(r) = try_reap(pid).expect("waitpid") {
            return r;
        }
        assert!(start.elapsed() < DEADLINE, "child {pid} did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads a non-blocking pipe until EOF, with a deadline.
fn read_to_eof(fd: OwnedFd) -> String {
    let mut f = File::from(fd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(start.elapsed() < DEADLINE, "no EOF on child output");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("read child output: {e}"),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which spawn path a test drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `std::process::Command` + `pre_exec` (spawns without a cgroup directory).
    Command,
    /// The raw clone3 path (without CLONE_INTO_CGROUP unless the test gives a directory).
    Clone3,
}

const BOTH: [Via; 2] = [Via::Command, Via::Clone3];

/// Spawns `p` through `via`; `cgroup` only for `Via::Command` (the procs fd).
fn spawn_via(
    via: Via,
    p: &Prepared,
    cgroup: Option<BorrowedFd<'_>>,
    stdio: Stdio,
) -> Result<u32, SpawnError> {
    match via {
        Via::Command => spawn(
            p,
            cgroup.map(|procs| CgroupTarget { dir: None, procs }),
            stdio,
        ),
        Via::Clone3 => {
            assert!(
                cgroup.is_none(),
                "use spawn() with a CgroupTarget for clone3"
            );
            match raw::spawn(p, child_plan(p, None), None, stdio) {
                Ok(pid) => Ok(pid),
                Err(raw::RawError::Failed(e)) => Err(e),
                Err(raw::RawError::Unsupported(e)) => panic!("clone3 unusable here: {e}"),
                Err(raw::RawError::KilledAtBirth) => panic!("clone3 child killed at birth"),
            }
        }
    }
}

/// Spawns `p` through `via`, collects its combined output and waits for it.
fn run_via(via: Via, p: &Prepared) -> (u32, String, Reaped) {
    let (r, w) = pipe_nonblocking().expect("pipe");
    let pid = spawn_via(via, p, None, Stdio::Combined(w)).expect("spawn");
    let out = read_to_eof(r);
    let reaped = wait_for(pid);
    (pid, out, reaped)
}

/// Spawns `p` with [`spawn`] (the production entry), collects output and waits for it.
fn run(p: &Prepared, cgroup: Option<CgroupTarget<'_>>) -> (u32, String, Reaped) {
    let (r, w) = pipe_nonblocking().expect("pipe");
    let pid = spawn(p, cgroup, Stdio::Combined(w)).expect("spawn");
    let out = read_to_eof(r);
    let reaped = wait_for(pid);
    (pid, out, reaped)
}

/// `Key:\tvalue` from /proc/<pid>/status output.
fn status_field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("{key} missing in {out}"))
        .trim()
}

fn env_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.contains('=')).collect()
}

/// Panics unless this process is root: tests that need root are `#[ignore = "needs root…"]`,
/// and run that way (`--include-ignored`) without root they fail rather than pass untested.
fn require_root(why: &str) {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test needs root ({why}); run it as root or without --include-ignored"
    );
}

/// Runs the calling test alone in a fresh test process. Returns true in that process (run the
/// body), false in the outer one (after checking the inner run passed).
fn isolated(name: &str, extra_env: &[(&str, &str)]) -> bool {
    if std::env::var(ISOLATED_ENV).as_deref() == Ok(name) {
        return true;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let full = format!("process::tests::{name}");
    let out = Command::new(exe)
        .args([
            full.as_str(),
            "--exact",
            "--include-ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(ISOLATED_ENV, name)
        .envs(extra_env.iter().copied())
        .output()
        .expect("re-run test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "isolated {name} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "isolated {name} did not run:\n{text}"
    );
    false
}

const PROBE_SCRIPT: &str = "grep -E '^(SigBlk|SigIgn|NoNewPrivs|CapBnd|CapEff|CapPrm|CapInh|CapAmb|Uid|Gid|Groups):' \
     /proc/self/status; echo \"stat:$(cut -d')' -f2 /proc/self/stat)\"; \
     echo \"nofile:$(ulimit -n)\"; env";

#[test]
fn child_gets_clean_signal_state_own_session_and_clean_env() {
    if !isolated(
        "child_gets_clean_signal_state_own_session_and_clean_env",
        &[
            ("NOTIFY_SOCKET", "/run/vigil-test.sock"),
            ("LISTEN_FDS", "3"),
            ("VIGIL_PARENT_ONLY", "1"),
        ],
    ) {
        return;
    }
    // Process-wide and thread state that must not leak into children: an ignored signal and a
    // blocked one (this test runs alone in its own process).
    // SAFETY: plain libc calls on a valid, initialised sigset.
    unsafe {
        libc::signal(libc::SIGUSR2, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGTERM);
        assert_eq!(
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()),
            0
        );
    }
    let mut s = spec(None);
    s.env = vec![
        ("GREETING".into(), "hello".into()),
        ("NOTIFY_SOCKET".into(), "/configured".into()),
    ];
    let p = prepare(&sh(PROBE_SCRIPT), &s).expect("prepare");
    for via in BOTH {
        check_clean_state(via, &p);
    }
}

fn check_clean_state(via: Via, p: &Prepared) {
    let (pid, out, reaped) = run_via(via, p);
    assert_eq!(reaped, Reaped::Exited { pid, code: 0 }, "{via:?}: {out}");

    assert_eq!(status_field(&out, "SigBlk"), "0000000000000000");
    assert_eq!(status_field(&out, "SigIgn"), "0000000000000000");
    // After ')' in /proc/<pid>/stat: state ppid pgrp session ...
    let stat: Vec<&str> = status_field(&out, "stat").split_whitespace().collect();
    assert_eq!(stat[2], pid.to_string(), "process group is the child's own");
    assert_eq!(stat[3], pid.to_string(), "session is the child's own");

    let env = env_lines(&out);
    assert!(
        env.contains(&format!("PATH={DEFAULT_PATH}").as_str()),
        "{env:?}"
    );
    assert!(env.contains(&"GREETING=hello"), "{env:?}");
    assert!(env.iter().any(|l| l.starts_with("HOME=")), "{env:?}");
    for banned in [
        "NOTIFY_SOCKET=",
        "LISTEN_FDS=",
        "VIGIL_PARENT_ONLY=",
        "VIGIL_ISOLATED",
    ] {
        assert!(
            !env.iter().any(|l| l.starts_with(banned)),
            "{banned} leaked: {env:?}"
        );
    }
}

#[test]
#[ignore = "needs root (changes user and capabilities)"]
fn root_child_runs_as_nobody_with_only_kept_caps_usable_and_no_new_privs() {
    require_root("to change user and drop bounding-set capabilities");
    let mut s = spec(Some("nobody"));
    s.capabilities = vec!["CAP_NET_BIND_SERVICE".into()];
    s.no_new_privs = true;
    s.rlimits = vec![nofile(256)];
    let p = prepare(&sh(PROBE_SCRIPT), &s).expect("prepare");
    for via in BOTH {
        check_nobody_with_kept_caps(via, &p);
    }
}

fn check_nobody_with_kept_caps(via: Via, p: &Prepared) {
    let (pid, out, reaped) = run_via(via, p);
    assert_eq!(reaped, Reaped::Exited { pid, code: 0 }, "{via:?}: {out}");

    let nobody = User::from_name("nobody").unwrap().expect("nobody exists");
    let uid = nobody.uid.as_raw();
    let gid = nobody.gid.as_raw();
    assert_eq!(
        status_field(&out, "Uid"),
        format!("{uid}\t{uid}\t{uid}\t{uid}")
    );
    assert_eq!(
        status_field(&out, "Gid"),
        format!("{gid}\t{gid}\t{gid}\t{gid}")
    );
    assert_eq!(status_field(&out, "Groups"), gid.to_string());
    assert_eq!(status_field(&out, "CapBnd"), "0000000000000400");
    // The kept capability is usable by the non-root program: effective, permitted,
    // inheritable and ambient hold exactly CAP_NET_BIND_SERVICE (bit 10).
    for set in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
        assert_eq!(
            status_field(&out, set),
            "0000000000000400",
            "{set} in {out}"
        );
    }
    assert_eq!(status_field(&out, "NoNewPrivs"), "1");
    assert_eq!(status_field(&out, "nofile"), "256");
    let env = env_lines(&out);
    assert!(env.contains(&"USER=nobody"), "{env:?}");
    assert!(
        env.contains(&format!("HOME={}", nobody.dir.display()).as_str()),
        "{env:?}"
    );
}

#[test]
#[ignore = "needs root (changes user and capabilities)"]
fn nobody_child_without_kept_caps_has_empty_capability_sets() {
    require_root("to change user");
    let p = prepare(&sh(PROBE_SCRIPT), &spec(Some("nobody"))).expect("prepare");
    assert!(p.ambient_capabilities().is_empty());
    for via in BOTH {
        let (pid, out, reaped) = run_via(via, &p);
        assert_eq!(reaped, Reaped::Exited { pid, code: 0 }, "{via:?}: {out}");
        for set in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
            assert_eq!(
                status_field(&out, set),
                "0000000000000000",
                "{via:?}: {set} in {out}"
            );
        }
    }
}

/// The parent's value is a protective -500 where lowering is allowed (CAP_SYS_RESOURCE), else a
/// raised 500 (raising needs no privilege, proc(5)); either way the child starts at 0.
#[test]
fn child_does_not_inherit_the_parents_oom_score_adj() {
    if !isolated("child_does_not_inherit_the_parents_oom_score_adj", &[]) {
        return;
    }
    let lower = caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_RESOURCE,
    )
    .expect("read capabilities");
    let adj = if lower { "-500" } else { "500" };
    std::fs::write("/proc/self/oom_score_adj", adj).expect("set oom_score_adj");
    let p = prepare(&sh("cat /proc/self/oom_score_adj"), &spec(None)).expect("prepare");
    for via in BOTH {
        let (pid, out, reaped) = run_via(via, &p);
        assert_eq!(reaped, Reaped::Exited { pid, code: 0 }, "{via:?}: {out}");
        assert_eq!(out.trim(), "0", "{via:?}");
    }
}

#[test]
fn rlimit_nofile_is_applied() {
    let mut s = spec(None);
    s.rlimits = vec![nofile(200)];
    let p = prepare(&sh("echo \"nofile:$(ulimit -n)\""), &s).expect("prepare");
    for via in BOTH {
        let (_, out, _) = run_via(via, &p);
        assert_eq!(status_field(&out, "nofile"), "200", "{via:?}");
    }
}

#[test]
fn configured_env_overrides_defaults_and_reserved_keys_are_dropped() {
    let mut s = spec(None);
    s.env = vec![
        ("PATH".into(), "/opt/bin".into()),
        ("WATCHDOG_USEC".into(), "1".into()),
        ("A".into(), "1".into()),
    ];
    let p = prepare(&["/bin/true".to_string()], &s).expect("prepare");
    let keys: Vec<&str> = p.env().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys.iter().filter(|k| **k == "PATH").count(), 1);
    assert!(p.env().contains(&("PATH".into(), "/opt/bin".into())));
    assert!(p.env().contains(&("A".into(), "1".into())));
    assert!(!keys.contains(&"WATCHDOG_USEC"));
}

#[test]
#[ignore = "needs root (CAP_SETPCAP)"]
fn bounding_set_drops_every_capability_but_the_kept_ones_for_non_root() {
    assert!(
        can_drop_bounding(),
        "this test needs CAP_SETPCAP (root): without it nothing is dropped"
    );
    let mut s = spec(Some("nobody"));
    s.capabilities = vec!["net_bind_service".into()];
    let p = prepare(&["/bin/true".to_string()], &s).expect("prepare");
    let last = cap_last_cap() as libc::c_int;
    assert!(!p.dropped_capabilities().contains(&10));
    assert_eq!(p.dropped_capabilities().len(), last as usize);
    assert!(p.dropped_capabilities().contains(&last));

    // Root without an explicit list keeps its bounding set, like any root service.
    let root = prepare(&["/bin/true".to_string()], &spec(Some("0"))).expect("prepare");
    assert!(root.dropped_capabilities().is_empty());
}

#[test]
fn unknown_capability_fails_in_prepare() {
    let mut s = spec(None);
    s.capabilities = vec!["CAP_FLY".into()];
    let err = prepare(&["/bin/true".to_string()], &s).unwrap_err();
    assert!(matches!(err, SpawnError::UnknownCapability { .. }), "{err}");
}

#[test]
fn unknown_user_fails_in_prepare_before_any_fork() {
    let err = prepare(
        &["/bin/true".to_string()],
        &spec(Some("vigil-no-such-user")),
    )
    .unwrap_err();
    assert!(matches!(err, SpawnError::UnknownUser { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "unknown user \"vigil-no-such-user\": no such name in this host's user database \
         (create it, or give a numeric uid)"
    );

    let mut s = spec(None);
    s.group = Some("vigil-no-such-group".into());
    let err = prepare(&["/bin/true".to_string()], &s).unwrap_err();
    assert!(matches!(err, SpawnError::UnknownGroup { .. }), "{err}");
}

#[test]
fn missing_binary_is_command_not_found_with_path_and_os_error() {
    for via in BOTH {
        let p = prepare(&["/nope/vigil-missing".to_string()], &spec(None)).expect("prepare");
        let err = spawn_via(via, &p, None, Stdio::Null).unwrap_err();
        assert!(matches!(err, SpawnError::CommandNotFound { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "exec \"/nope/vigil-missing\": No such file or directory (os error 2): /nope does \
             not exist"
        );

        // Bare names are looked up in the child's PATH.
        let p = prepare(&["true".to_string()], &spec(None)).expect("prepare");
        let pid = spawn_via(via, &p, None, Stdio::Null).expect("spawn true via PATH");
        assert_eq!(wait_for(pid), Reaped::Exited { pid, code: 0 }, "{via:?}");
        let p = prepare(&["vigil-no-such-command".to_string()], &spec(None)).expect("prepare");
        let err = spawn_via(via, &p, None, Stdio::Null).unwrap_err();
        assert!(matches!(err, SpawnError::CommandNotFound { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "exec \"vigil-no-such-command\": No such file or directory (os error 2): no \
                 directory of PATH ({}) holds it",
                crate::process::DEFAULT_PATH
            )
        );
    }
}

#[test]
fn file_without_exec_bit_is_not_executable() {
    let f = tempfile::NamedTempFile::new().expect("tempfile");
    let path = f.path().to_string_lossy().into_owned();
    let p = prepare(std::slice::from_ref(&path), &spec(None)).expect("prepare");
    for via in BOTH {
        let err = spawn_via(via, &p, None, Stdio::Null).unwrap_err();
        assert!(matches!(err, SpawnError::NotExecutable { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "exec {path:?}: Permission denied (os error 13): uid {uid} may not execute \
                 {path} (mode 0600, owner uid {uid}, group {gid})",
                uid = nix::unistd::Uid::effective(),
                gid = nix::unistd::Gid::effective(),
            )
        );
    }
}

#[test]
fn missing_working_dir_is_reported_as_working_dir_error() {
    let mut s = spec(None);
    s.working_dir = Some(PathBuf::from("/nope/vigil-missing-dir"));
    let p = prepare(&["/bin/true".to_string()], &s).expect("prepare");
    for via in BOTH {
        let err = spawn_via(via, &p, None, Stdio::Null).unwrap_err();
        assert!(matches!(err, SpawnError::WorkingDir { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "change to working directory \"/nope/vigil-missing-dir\": \
             No such file or directory (os error 2)"
        );
    }
}

#[test]
fn working_dir_is_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(None);
    s.working_dir = Some(dir.path().to_path_buf());
    let p = prepare(&sh("echo \"cwd:$(pwd -P)\""), &s).expect("prepare");
    let want = dir.path().canonicalize().unwrap();
    for via in BOTH {
        let (_, out, _) = run_via(via, &p);
        assert_eq!(status_field(&out, "cwd"), want.to_string_lossy(), "{via:?}");
    }
}

#[test]
fn cgroup_placement_failure_is_reported_as_such() {
    // A read-only fd: the child's write of "0" fails with EBADF.
    let ro = File::open("/dev/null").expect("open /dev/null");
    let p = prepare(&["/bin/true".to_string()], &spec(None)).expect("prepare");
    let err = spawn_via(Via::Command, &p, Some(ro.as_fd()), Stdio::Null).unwrap_err();
    assert!(matches!(err, SpawnError::CgroupPlacement { .. }), "{err:?}");
    assert!(err.to_string().contains("os error 9"), "{err}");
}

/// The cgroup2 mount point and this process's cgroup path on it, if any.
fn own_cgroup2_dir() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })?;
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(own.trim_start_matches('/')))
}

/// Runs `body` with a fresh scratch cgroup `<own cgroup>/vigil-<tag>-<pid>` (its directory fd
/// and its cgroup.procs fd), then removes it. Panics without root or cgroup2 access (the
/// callers are `#[ignore]`d for that reason).
fn with_scratch_cgroup(tag: &str, body: impl FnOnce(&Path, CgroupTarget<'_>)) {
    require_root("to create a cgroup");
    let parent = own_cgroup2_dir().expect("this test needs a cgroup2 mount and there is none");
    let dir = parent.join(format!("vigil-{tag}-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        panic!("cannot create scratch cgroup {}: {e}", dir.display());
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .expect("open cgroup.procs");
        let dir_fd = File::open(&dir).expect("open cgroup dir");
        body(
            &dir,
            CgroupTarget {
                dir: Some(dir_fd.as_fd()),
                procs: procs.as_fd(),
            },
        );
    }));
    // Every child has been reaped, so the cgroup is empty again.
    let start = Instant::now();
    while let Err(e) = std::fs::remove_dir(&dir) {
        if start.elapsed() > DEADLINE {
            panic!("remove scratch cgroup {}: {e}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// The child's own `0::` line of /proc/self/cgroup, from `cat /proc/self/cgroup` output.
fn cgroup_line(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("0::"))
        .unwrap_or_else(|| panic!("no 0:: line in {out:?}"))
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn child_is_placed_in_the_given_cgroup_before_it_runs() {
    with_scratch_cgroup("ptest", |dir, target| {
        let want = format!("/{}", dir.file_name().unwrap().to_string_lossy());
        let p = prepare(
            &["/bin/cat".into(), "/proc/self/cgroup".into()],
            &spec(None),
        )
        .expect("prepare");
        // The Command path (cgroup.procs write in pre_exec).
        let (_, out, reaped) = run(
            &p,
            Some(CgroupTarget {
                dir: None,
                ..target
            }),
        );
        assert!(matches!(reaped, Reaped::Exited { code: 0, .. }), "{out}");
        assert!(cgroup_line(&out).ends_with(&want), "Command: {out}");
        // The raw clone3 path, born in the cgroup.
        let (r, w) = pipe_nonblocking().expect("pipe");
        let dir_fd = target.dir.unwrap().as_raw_fd();
        let pid = match raw::spawn(&p, child_plan(&p, None), Some(dir_fd), Stdio::Combined(w)) {
            Ok(pid) => pid,
            Err(raw::RawError::Unsupported(e)) => {
                panic!("this test needs clone3(CLONE_INTO_CGROUP) (Linux 5.7): {e}")
            }
            Err(raw::RawError::KilledAtBirth) => panic!("fresh cgroup killed the child"),
            Err(raw::RawError::Failed(e)) => panic!("clone3 spawn: {e}"),
        };
        let out = read_to_eof(r);
        assert!(
            matches!(wait_for(pid), Reaped::Exited { code: 0, .. }),
            "{out}"
        );
        assert!(cgroup_line(&out).ends_with(&want), "clone3: {out}");
        // The production entry with a directory takes that path and says the same.
        let (_, out, _) = run(&p, Some(target));
        assert!(cgroup_line(&out).ends_with(&want), "spawn: {out}");
        assert!(!CLONE3_UNUSABLE.load(std::sync::atomic::Ordering::Relaxed));
    });
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn clone3_into_a_killed_cgroup_falls_back_to_the_cgroup_procs_write() {
    with_scratch_cgroup("killtest", |dir, target| {
        if let Err(e) = std::fs::write(dir.join("cgroup.kill"), "1") {
            panic!("this test needs cgroup.kill (Linux 5.14): {e}");
        }
        let want = format!("/{}", dir.file_name().unwrap().to_string_lossy());
        let p = prepare(
            &["/bin/cat".into(), "/proc/self/cgroup".into()],
            &spec(None),
        )
        .expect("prepare");
        let dir_fd = target.dir.unwrap().as_raw_fd();
        match raw::spawn(&p, child_plan(&p, None), Some(dir_fd), Stdio::Null) {
            Err(raw::RawError::KilledAtBirth) => {}
            Ok(pid) => {
                // A kernel without that behaviour: the child simply ran.
                eprintln!("note: this kernel does not kill clone3 children of a killed cgroup");
                wait_for(pid);
            }
            Err(raw::RawError::Unsupported(e)) => {
                panic!("this test needs clone3(CLONE_INTO_CGROUP) (Linux 5.7): {e}")
            }
            Err(raw::RawError::Failed(e)) => panic!("clone3 spawn: {e}"),
        }
        // spawn() still delivers a working child in the cgroup.
        let (_, out, reaped) = run(&p, Some(target));
        assert!(matches!(reaped, Reaped::Exited { code: 0, .. }), "{out}");
        assert!(cgroup_line(&out).ends_with(&want), "{out}");
    });
}

#[test]
fn clone3_with_a_non_cgroup_directory_is_reported_unsupported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = File::open(tmp.path()).expect("open tempdir");
    let p = prepare(&["/bin/true".to_string()], &spec(None)).expect("prepare");
    match raw::spawn(&p, child_plan(&p, None), Some(dir.as_raw_fd()), Stdio::Null) {
        // EBADF: the directory is no cgroup. ENOSYS: no clone3 at all (Linux < 5.3, or a
        // seccomp filter that hides it); unsupported all the same, and nothing was started.
        Err(raw::RawError::Unsupported(e)) => {
            assert!(matches!(e, Errno::EBADF | Errno::ENOSYS), "{e}")
        }
        Ok(pid) => panic!("clone3 into a plain directory started pid {pid}"),
        Err(raw::RawError::KilledAtBirth) => panic!("killed at birth"),
        Err(raw::RawError::Failed(e)) => panic!("{e}"),
    }
}

#[test]
fn stdio_goes_where_asked_on_both_paths() {
    let script = "echo out; echo err >&2; echo \"in:$(readlink /proc/self/fd/0)\"";
    let p = prepare(&sh(script), &spec(None)).expect("prepare");
    for via in BOTH {
        let (out_r, out_w) = pipe_nonblocking().expect("pipe");
        let (err_r, err_w) = pipe_nonblocking().expect("pipe");
        let stdio = Stdio::Separate {
            stdout: out_w,
            stderr: err_w,
        };
        let pid = spawn_via(via, &p, None, stdio).expect("spawn");
        assert_eq!(read_to_eof(out_r), "out\nin:/dev/null\n", "{via:?}");
        assert_eq!(read_to_eof(err_r), "err\n", "{via:?}");
        assert_eq!(wait_for(pid), Reaped::Exited { pid, code: 0 });

        let (_, out, _) = run_via(via, &p);
        assert_eq!(out, "out\nerr\nin:/dev/null\n", "{via:?}");

        let p = prepare(&sh("echo out; echo err >&2; exit 3"), &spec(None)).expect("prepare");
        let pid = spawn_via(via, &p, None, Stdio::Null).expect("spawn");
        assert_eq!(wait_for(pid), Reaped::Exited { pid, code: 3 }, "{via:?}");
    }
}

#[test]
fn executable_file_without_a_format_is_run_by_the_shell_on_both_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("plain-script");
    // Written by a child process, not this one: a descriptor open for writing in the test
    // process would be inherited by another test thread's fork until its exec, and an exec of
    // the script meanwhile fails with ETXTBSY (execve(2)).
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            "printf '%s\\n' 'echo \"script:$1\"' > \"$0\" && chmod 755 \"$0\"",
        ])
        .arg(&script)
        .status()
        .expect("sh writes the script");
    assert!(status.success(), "writing {} failed", script.display());
    let p = prepare(
        &[script.to_string_lossy().into_owned(), "arg1".into()],
        &spec(None),
    )
    .expect("prepare");
    for via in BOTH {
        let (pid, out, reaped) = run_via(via, &p);
        assert_eq!(reaped, Reaped::Exited { pid, code: 0 }, "{via:?}: {out}");
        assert_eq!(out, "script:arg1\n", "{via:?}");
    }
}

#[test]
fn bare_name_found_later_in_path_skips_entries_without_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(None);
    s.env = vec![(
        "PATH".into(),
        format!(
            "/nope/vigil-missing-dir:{}:/usr/bin:/bin",
            dir.path().display()
        ),
    )];
    let p = prepare(&["true".to_string()], &s).expect("prepare");
    for via in BOTH {
        let pid = spawn_via(via, &p, None, Stdio::Null).expect("spawn");
        assert_eq!(wait_for(pid), Reaped::Exited { pid, code: 0 }, "{via:?}");
    }
}

#[test]
fn signal_refuses_pids_that_would_mean_everyone() {
    assert!(matches!(signal(0, 9), Err(SignalError::InvalidPid { .. })));
    assert!(matches!(
        signal(u32::MAX, 9),
        Err(SignalError::InvalidPid { .. })
    ));
    assert!(matches!(
        signal_group(1, 9),
        Err(SignalError::InvalidPid { .. })
    ));
    assert!(matches!(
        signal(std::process::id(), 999),
        Err(SignalError::InvalidSignal { .. })
    ));
}

#[test]
fn signal_and_signal_group_terminate_the_tree() {
    // sh prints its background grandchild's pid, then waits.
    let p = prepare(&sh("sleep 300 & echo $!; wait"), &spec(None)).expect("prepare");
    let (r, w) = pipe_nonblocking().expect("pipe");
    let pid = spawn(&p, None, Stdio::Combined(w)).expect("spawn");
    let mut f = File::from(r);
    let mut line = Vec::new();
    let start = Instant::now();
    while !line.contains(&b'\n') {
        let mut buf = [0u8; 64];
        match f.read(&mut buf) {
            Ok(0) => panic!("EOF before grandchild pid"),
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(start.elapsed() < DEADLINE);
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("{e}"),
        }
    }
    let grandchild: u32 = String::from_utf8_lossy(&line).trim().parse().expect("pid");
    signal(pid, 0).expect("child alive");
    signal_group(pid, libc::SIGKILL).expect("killpg");
    assert_eq!(
        wait_for(pid),
        Reaped::Signaled {
            pid,
            signal: libc::SIGKILL,
            core_dumped: false
        }
    );
    // The grandchild was re-parented (to init or a subreaper) and dies of the same signal.
    let start = Instant::now();
    loop {
        let gone = match std::fs::read_to_string(format!("/proc/{grandchild}/stat")) {
            Err(_) => true,
            Ok(s) => s
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z')),
        };
        if gone {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "grandchild survived killpg");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn reap_all_collects_every_terminated_child() {
    if !isolated("reap_all_collects_every_terminated_child", &[]) {
        return;
    }
    let mut expected = Vec::new();
    for code in 0..4 {
        let p = prepare(&sh(&format!("exit {code}")), &spec(None)).expect("prepare");
        let pid = spawn(&p, None, Stdio::Null).expect("spawn");
        expected.push(Reaped::Exited { pid, code });
    }
    let p = prepare(&sh("kill -TERM $$"), &spec(None)).expect("prepare");
    let pid = spawn(&p, None, Stdio::Null).expect("spawn");
    expected.push(Reaped::Signaled {
        pid,
        signal: libc::SIGTERM,
        core_dumped: false,
    });

    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < expected.len() {
        got.extend(reap_all());
        assert!(start.elapsed() < DEADLINE, "reaped only {got:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    got.sort_by_key(|r| r.pid());
    expected.sort_by_key(|r| r.pid());
    assert_eq!(got, expected);
    // Nothing left: ECHILD ends the loop with an empty result.
    assert!(reap_all().is_empty());
}

#[test]
fn subreaper_can_be_set() {
    if !isolated("subreaper_can_be_set", &[]) {
        return;
    }
    set_child_subreaper().expect("prctl");
    assert!(nix::sys::prctl::get_child_subreaper().expect("get"));
}

/// Starts `p` on the raw path without waiting for its exec (as `spawn_pipelined` does).
fn start_pending(p: &Prepared, stdio: &Stdio) -> raw::Started {
    match raw::start(p, child_plan(p, None), None, stdio, false) {
        Ok(s) => s,
        Err(raw::RawError::Failed(e)) => panic!("clone3 spawn: {e}"),
        Err(raw::RawError::Unsupported(e)) => panic!("clone3 unusable here: {e}"),
        Err(raw::RawError::KilledAtBirth) => panic!("clone3 child killed at birth"),
    }
}

/// Reads a pending start's report to the end (blocking) and concludes it, settling its hold.
fn finish_pending(p: &Prepared, started: &mut raw::Started) -> Result<u32, raw::RawError> {
    let mut report = raw::Report::default();
    while !report.read_from(&started.report) {}
    let outcome = raw::conclude(p, started.pid, report.bytes());
    started.hold.settled(&report, outcome.is_err());
    outcome
}

#[test]
fn children_cloned_back_to_back_each_run_and_exec_on_their_own_stack() {
    const N: usize = 24;
    let mut pending = Vec::new();
    for i in 0..N {
        let p = prepare(&["/bin/echo".into(), format!("child {i}")], &spec(None)).expect("prepare");
        let (r, w) = pipe_nonblocking().expect("pipe");
        let stdio = Stdio::Combined(w);
        let started = start_pending(&p, &stdio);
        drop(stdio);
        pending.push((i, p, r, started));
    }
    if cfg!(target_arch = "x86_64") {
        // Every one of them shares this process's memory on a stack of its own until settled
        // (other tests' children may be counted too).
        let (_, in_flight, _) = raw::vm_counts();
        assert!(
            in_flight >= N,
            "{in_flight} CLONE_VM children in flight, want ≥ {N}"
        );
    }
    for (i, p, r, mut started) in pending {
        let pid = match finish_pending(&p, &mut started) {
            Ok(pid) => pid,
            Err(_) => panic!("child {i} did not exec"),
        };
        drop(started);
        assert_eq!(read_to_eof(r), format!("child {i}\n"));
        assert_eq!(wait_for(pid), Reaped::Exited { pid, code: 0 });
    }
}

#[test]
fn a_child_failing_after_clone3_returned_leaves_the_parents_errno_alone() {
    // A PATH of thousands of relative entries (kept without a stat, see `exec_target`): the
    // child tries an execve for each, every one failing with ENOENT, well after clone3 returned
    // here. On the CLONE_VM path it shares this thread's `errno`; it must never write it.
    let mut s = spec(None);
    let path: Vec<String> = (0..3000).map(|i| format!("no-such-dir-{i}")).collect();
    s.env = vec![("PATH".into(), path.join(":"))];
    let p = prepare(&["no-such-program".into()], &s).expect("prepare");
    let stdio = Stdio::Null;
    let mut started = start_pending(&p, &stdio);
    Errno::set_raw(4242);
    // Blocking reads that succeed (the report, then EOF) leave errno alone.
    let mut report = raw::Report::default();
    while !report.read_from(&started.report) {}
    let errno = Errno::last_raw();
    let outcome = raw::conclude(&p, started.pid, report.bytes());
    started.hold.settled(&report, outcome.is_err());
    assert!(
        matches!(
            outcome,
            Err(raw::RawError::Failed(SpawnError::CommandNotFound { .. }))
        ),
        "the child should fail with ENOENT"
    );
    assert_eq!(errno, 4242, "the child wrote the parent's errno");
}

fn dumpable() -> libc::c_int {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) }
}

#[test]
#[ignore = "needs root"]
fn a_child_started_as_another_user_leaves_the_supervisor_dumpable_once_it_has_execed() {
    if !isolated(
        "a_child_started_as_another_user_leaves_the_supervisor_dumpable_once_it_has_execed",
        &[],
    ) {
        return;
    }
    assert_eq!(dumpable(), 1, "the test process starts dumpable");
    let p = prepare(&["/bin/true".into()], &spec(Some("nobody"))).expect("prepare");
    let stdio = Stdio::Null;
    let mut started = start_pending(&p, &stdio);
    let pid = finish_pending(&p, &mut started).unwrap_or_else(|_| panic!("no exec"));
    drop(started);
    assert_eq!(wait_for(pid), Reaped::Exited { pid, code: 0 });
    assert_eq!(
        dumpable(),
        1,
        "a setuid child left the supervisor non-dumpable"
    );
}

#[test]
fn a_pending_start_dropped_before_its_child_execed_keeps_the_childs_stack() {
    if !isolated(
        "a_pending_start_dropped_before_its_child_execed_keeps_the_childs_stack",
        &[],
    ) {
        return;
    }
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let p = prepare(&["/bin/true".into()], &spec(None)).expect("prepare");
    let stdio = Stdio::Null;
    let started = start_pending(&p, &stdio);
    let pid = started.pid;
    // Dropped unread: nothing tells the hold that the child is done with this memory.
    drop(started);
    let (free, in_flight, leaked) = raw::vm_counts();
    assert_eq!(
        (in_flight, leaked),
        (1, 1),
        "the hold must be leaked, not given back"
    );
    assert_eq!(free, 0, "the stack must not return to the pool");
    wait_for(pid);
    // A settled one afterwards is given back; the leaked one stays counted.
    let mut started = start_pending(&p, &stdio);
    let pid = finish_pending(&p, &mut started).unwrap_or_else(|_| panic!("no exec"));
    drop(started);
    wait_for(pid);
    let (free, in_flight, leaked) = raw::vm_counts();
    assert_eq!((free, in_flight, leaked), (1, 1, 1));
}
