//! Issue 17.4, a crash rather than an upgrade: vigil is `kill -9`ed and started again on the
//! same config. With `on_restart = "adopt"` (the default) the containers it left keep their
//! pids and are shown Running with their restart counts; one killed afterwards is noticed
//! (pidfd) and restarted by policy as `ContainerStatusUnknown`; `stop` works on an adopted one;
//! probes go on; a container whose definition changed is replaced. With `"replace"` the old
//! processes are gone and new ones run, one copy each. Both without cgroups (the state file)
//! and with them (`#[ignore]`d: root and a cgroup2 mount).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    Vigil, alive, processes_with_cmdline, require_cgroup2_mount, require_root, state_reason,
    supervisor_header,
};

const T: Duration = Duration::from_secs(20);

/// Sleep lengths unique to this test process and call (processes are counted machine-wide
/// by their command line).
fn unique(offset: u32) -> u32 {
    2_000_000 + (std::process::id() % 100_000) * 40 + offset
}

fn count(secs: u32) -> usize {
    processes_with_cmdline(&format!("sleep\0{secs}\0")).len()
}

/// The pod mix: `svc` (a quiet service), `flaky` (failed once, running in its second run:
/// restart count 1), `probed` (a liveness probe every second).
fn pods(svc: u32, flaky: u32, probed: u32, flag: &Path) -> String {
    format!(
        r#"
[pods.svc]
backoff = {{ initial_seconds = 0.1, max_seconds = 0.2 }}
[[pods.svc.containers]]
name = "c"
command = ["sleep", "{svc}"]

[pods.flaky]
backoff = {{ initial_seconds = 0.1, max_seconds = 0.2 }}
[[pods.flaky.containers]]
name = "c"
command = ["sh", "-c", "if [ -e {flag} ]; then exec sleep {flaky}; fi; touch {flag}; exit 1"]

[pods.probed]
[[pods.probed.containers]]
name = "c"
command = ["sleep", "{probed}"]
liveness_probe = {{ exec = {{ command = ["true"] }}, period_seconds = 1 }}
"#,
        flag = flag.display()
    )
}

struct Mix {
    svc: u32,
    flaky: u32,
    probed: u32,
    dir: tempfile::TempDir,
    socket: PathBuf,
    config: PathBuf,
}

impl Mix {
    /// Writes the config: `header_extra` goes into `[supervisor]`, `cgroup_root` replaces
    /// `"none"` when given.
    fn new(offset: u32, header_extra: &str, cgroup_root: Option<&Path>) -> Mix {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("vigil.sock");
        let config = dir.path().join("vigil.toml");
        let mix = Mix {
            svc: unique(offset),
            flaky: unique(offset + 1),
            probed: unique(offset + 2),
            socket,
            config,
            dir,
        };
        let mut header = supervisor_header(&mix.socket).replacen(
            "[supervisor]\n",
            &format!("[supervisor]\n{header_extra}"),
            1,
        );
        if let Some(root) = cgroup_root {
            header = header.replace(
                "cgroup_root = \"none\"",
                &format!("cgroup_root = \"{}\"", root.display()),
            );
        }
        let flag = mix.dir.path().join("flaky-ran");
        std::fs::write(
            &mix.config,
            format!("{header}{}", pods(mix.svc, mix.flaky, mix.probed, &flag)),
        )
        .unwrap();
        mix
    }

    fn start(&self) -> Vigil {
        Vigil::start_with(
            tempfile::tempdir().unwrap(),
            self.socket.clone(),
            self.config.clone(),
        )
    }

    fn state_file(&self) -> String {
        let mut p = self.socket.as_os_str().to_os_string();
        p.push(".state");
        std::fs::read_to_string(p).unwrap_or_default()
    }

    fn counts(&self) -> (usize, usize, usize) {
        (count(self.svc), count(self.flaky), count(self.probed))
    }
}

fn pid_of(v: &Vigil, pod: &str) -> u64 {
    v.container(pod, "c")["pid"].as_u64().unwrap_or(0)
}

fn running(v: &Vigil, pod: &str) -> bool {
    state_reason(&v.container(pod, "c")) == "Running"
}

fn liveness_attempts(c: &Value) -> usize {
    c["probes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["kind"] == "liveness"))
        .and_then(|p| p["recent"].as_array())
        .map_or(0, Vec::len)
}

/// Starts the mix, waits until it is settled and recorded, then `kill -9`s vigil; returns
/// the pids of svc, flaky and probed.
fn run_then_kill_9(mix: &Mix) -> [u64; 3] {
    let mut a = mix.start();
    a.wait_for(T, "the mix running (flaky in its second run)", |v| {
        ["svc", "flaky", "probed"].iter().all(|p| running(v, p))
            && v.container("flaky", "c")["restart_count"] == 1
    });
    let pids = [pid_of(&a, "svc"), pid_of(&a, "flaky"), pid_of(&a, "probed")];
    a.wait_for(T, "the state file records every main process", |_| {
        let text = mix.state_file();
        pids.iter().all(|p| {
            text.lines()
                .any(|l| l.starts_with(&format!("{p} ")) && l.split(' ').count() == 5)
        })
    });
    let mut child = a.child.take().unwrap();
    // SIGKILL by the pid of the vigil we started: no clean-up by vigil.
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    assert!(pids.iter().all(|p| alive(*p)), "they outlive vigil");
    pids
}

/// The adopt checks shared by the cgroup and no-cgroup variants.
fn adopted_mix_behaves(mix: &Mix) {
    let [svc, flaky, probed] = run_then_kill_9(mix);
    let b = mix.start();
    b.wait_for(T, "all three Running", |v| {
        ["svc", "flaky", "probed"].iter().all(|p| running(v, p))
    });
    assert_eq!(
        [pid_of(&b, "svc"), pid_of(&b, "flaky"), pid_of(&b, "probed")],
        [svc, flaky, probed],
        "the same processes, adopted\n{}",
        b.log()
    );
    assert_eq!(b.container("flaky", "c")["restart_count"], 1, "count kept");
    assert_eq!(b.container("svc", "c")["restart_count"], 0);
    assert_eq!(mix.counts(), (1, 1, 1), "no duplicates");
    let events = b.request(r#"{"cmd":"events"}"#).to_string();
    assert!(events.contains("Adopted"), "{events}");
    // Probes run against the adopted container.
    b.wait_for(T, "liveness probes of the adopted container", |v| {
        liveness_attempts(&v.container("probed", "c")) >= 2
    });

    // Killed from outside: noticed through its pidfd, status unknown, restarted by policy.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(svc as i32),
        nix::sys::signal::SIGKILL,
    )
    .unwrap();
    b.wait_for(T, "svc restarted", |v| {
        let c = v.container("svc", "c");
        running(v, "svc") && c["restart_count"] == 1 && c["pid"].as_u64() != Some(svc)
    });
    let c = b.container("svc", "c");
    let last = &c["last_state"]["terminated"];
    assert_eq!(last["reason"], "ContainerStatusUnknown", "{c}");
    assert_eq!(last["exit_code"], 137, "{c}");
    assert_eq!(count(mix.svc), 1);

    // A stop of an adopted container signals it and waits for it.
    let r = b.request(r#"{"cmd":"stop","pod":"flaky","container":"c"}"#);
    assert_eq!(r["ok"], true, "{r}");
    b.wait_for(T, "flaky stopped", |v| {
        state_reason(&v.container("flaky", "c")) == "Stopped"
    });
    b.wait_for(T, "flaky's process gone", |_| !alive(flaky));
    assert_eq!(count(mix.flaky), 0);

    assert_eq!(b.shutdown(), 0);
    assert_eq!(mix.counts(), (0, 0, 0), "a clean shutdown leaves nothing");
}

#[test]
fn without_cgroups_a_restarted_vigil_adopts_what_a_kill_9ed_one_left() {
    let mix = Mix::new(0, "", None);
    adopted_mix_behaves(&mix);
}

#[test]
fn without_cgroups_replace_kills_what_was_left_and_starts_one_copy_of_each() {
    let mix = Mix::new(3, "on_restart = \"replace\"\n", None);
    let pids = run_then_kill_9(&mix);
    let b = mix.start();
    b.wait_for(T, "all three Running with new pids", |v| {
        ["svc", "flaky", "probed"]
            .iter()
            .zip(pids)
            .all(|(p, old)| running(v, p) && pid_of(v, p) != old)
    });
    b.wait_for(T, "the old processes gone", |_| {
        pids.iter().all(|p| !alive(*p))
    });
    assert_eq!(mix.counts(), (1, 1, 1), "one copy of each");
    assert!(
        b.log().contains("is replaced: on_restart = \"replace\""),
        "{}",
        b.log()
    );
    assert_eq!(b.shutdown(), 0);
}

#[test]
fn a_container_whose_definition_changed_is_replaced_and_the_others_adopted() {
    let mix = Mix::new(6, "", None);
    let [svc, flaky, probed] = run_then_kill_9(&mix);
    // svc's definition changes (a new argument); the others stay as they were.
    let text = std::fs::read_to_string(&mix.config).unwrap();
    let changed = mix.svc + 100;
    std::fs::write(
        &mix.config,
        text.replace(&format!("\"{}\"", mix.svc), &format!("\"{changed}\"")),
    )
    .unwrap();
    let b = mix.start();
    b.wait_for(T, "svc running its new definition", |v| {
        running(v, "svc") && count(changed) == 1
    });
    b.wait_for(T, "the old svc killed", |_| !alive(svc));
    assert_eq!(count(mix.svc), 0);
    assert_eq!(pid_of(&b, "flaky"), flaky, "flaky adopted");
    assert_eq!(pid_of(&b, "probed"), probed, "probed adopted");
    assert!(
        b.log().contains("svc/c: pid") && b.log().contains("definition changed"),
        "{}",
        b.log()
    );
    assert_eq!(b.shutdown(), 0);
    assert_eq!(count(changed), 0);
}

#[test]
fn a_second_vigil_on_the_same_socket_is_refused_and_leaves_the_first_ones_containers_alone() {
    let mix = Mix::new(9, "", None);
    let a = mix.start();
    a.wait_for(T, "svc running", |v| running(v, "svc"));
    let svc = pid_of(&a, "svc");
    let out = Command::new(crate::common::BIN)
        .args(["run", "-c"])
        .arg(&mix.config)
        .env("VIGIL_LOG", "info")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a second vigil must not run");
    assert_eq!(pid_of(&a, "svc"), svc);
    assert!(alive(svc));
    assert_eq!(mix.counts().0, 1);
    assert_eq!(a.shutdown(), 0);
}

// ---- with cgroups --------------------------------------------------------------------------

/// A scratch cgroup on the cgroup2 mount for one test; emptied and removed on drop.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        require_root("to create cgroups");
        let mount = require_cgroup2_mount();
        let path = mount.join(format!(
            "vigil-adopt-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&path).expect("create scratch cgroup");
        assert!(
            path.join("cgroup.kill").exists(),
            "this test needs cgroup.kill (Linux 5.14)"
        );
        Scratch { path }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
        std::thread::sleep(Duration::from_millis(100));
        fn rm(dir: &Path) {
            if let Ok(rd) = std::fs::read_dir(dir) {
                for e in rd.flatten() {
                    if e.path().is_dir() {
                        rm(&e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
        rm(&self.path);
    }
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn with_cgroups_a_restarted_vigil_adopts_the_containers_in_their_cgroups() {
    let cg = Scratch::new();
    let mix = Mix::new(12, "", Some(&cg.path));
    adopted_mix_behaves(&mix);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn with_cgroups_an_adopted_container_keeps_its_cgroup_and_its_end_empties_it() {
    let cg = Scratch::new();
    let mix = Mix::new(15, "", Some(&cg.path));
    let [svc, _, _] = run_then_kill_9(&mix);
    let b = mix.start();
    b.wait_for(T, "svc Running", |v| running(v, "svc"));
    assert_eq!(pid_of(&b, "svc"), svc);
    let dir = cg.path.join("svc").join("c");
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|l| l == svc.to_string()),
        "still in its cgroup: {procs}"
    );
    assert_eq!(
        b.container("svc", "c")["cgroup"]
            .as_str()
            .map(PathBuf::from),
        Some(dir.clone()),
        "status shows its cgroup"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(svc as i32),
        nix::sys::signal::SIGKILL,
    )
    .unwrap();
    b.wait_for(T, "svc restarted in a fresh cgroup", |v| {
        running(v, "svc") && pid_of(v, "svc") != svc
    });
    let last = b.container("svc", "c")["last_state"]["terminated"]["reason"].clone();
    assert_eq!(last, "ContainerStatusUnknown");
    assert_eq!(b.shutdown(), 0);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn with_cgroups_replace_kills_the_old_cgroups_and_starts_one_copy_of_each() {
    let cg = Scratch::new();
    let mix = Mix::new(18, "on_restart = \"replace\"\n", Some(&cg.path));
    let pids = run_then_kill_9(&mix);
    let b = mix.start();
    b.wait_for(T, "all three Running with new pids", |v| {
        ["svc", "flaky", "probed"]
            .iter()
            .zip(pids)
            .all(|(p, old)| running(v, p) && pid_of(v, p) != old)
    });
    assert!(pids.iter().all(|p| !alive(*p)), "old ones killed");
    assert_eq!(mix.counts(), (1, 1, 1), "one copy of each");
    assert_eq!(b.shutdown(), 0);
}

#[test]
fn a_pod_with_an_init_container_and_a_sidecar_is_adopted_without_running_the_init_again() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let runs = dir.path().join("setup-runs");
    let (proxy, app) = (unique(21), unique(22));
    std::fs::write(
        &config,
        format!(
            r#"{}[pods.web]
[[pods.web.init_containers]]
name = "setup"
command = ["sh", "-c", "echo ran >> {runs}"]
[[pods.web.init_containers]]
name = "proxy"
restart_policy = "Always"
command = ["sleep", "{proxy}"]
[[pods.web.containers]]
name = "app"
command = ["sleep", "{app}"]
"#,
            supervisor_header(&socket),
            runs = runs.display()
        ),
    )
    .unwrap();
    let start = || Vigil::start_with(tempfile::tempdir().unwrap(), socket.clone(), config.clone());
    let pid = |v: &Vigil, c: &str| v.container("web", c)["pid"].as_u64().unwrap_or(0);
    let mut a = start();
    a.wait_for(T, "proxy and app running", |v| {
        state_reason(&v.container("web", "proxy")) == "Running"
            && state_reason(&v.container("web", "app")) == "Running"
    });
    let (p, m) = (pid(&a, "proxy"), pid(&a, "app"));
    let mut state = socket.as_os_str().to_os_string();
    state.push(".state");
    a.wait_for(T, "both recorded", |_| {
        let t = std::fs::read_to_string(&state).unwrap_or_default();
        [p, m]
            .iter()
            .all(|x| t.lines().any(|l| l.starts_with(&format!("{x} "))))
    });
    let mut child = a.child.take().unwrap();
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();

    let b = start();
    b.wait_for(T, "proxy and app adopted", |v| {
        pid(v, "proxy") == p
            && pid(v, "app") == m
            && state_reason(&v.container("web", "app")) == "Running"
    });
    let setup = b.container("web", "setup");
    assert_eq!(state_reason(&setup), "Completed", "{setup}");
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        1,
        "the init container did not run again"
    );
    assert_eq!((count(proxy), count(app)), (1, 1));
    assert_eq!(b.shutdown(), 0);
    assert_eq!((count(proxy), count(app)), (0, 0));
}

#[test]
fn a_chatty_container_loses_its_pipe_with_the_old_vigil_and_its_next_run_is_captured() {
    // Its output went to pipes the killed vigil held: its next write gets SIGPIPE (vigil resets
    // every signal to its default in the child). Whether it dies before or after the new vigil
    // adopts it, a new run replaces it and that run's output is captured.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    std::fs::write(
        &config,
        format!(
            "{}[pods.chatty]\nbackoff = {{ initial_seconds = 0.1, max_seconds = 0.2 }}\n[[pods.chatty.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"while :; do echo tick $$; sleep 0.1; done\"]\n",
            supervisor_header(&socket)
        ),
    )
    .unwrap();
    let start = || Vigil::start_with(tempfile::tempdir().unwrap(), socket.clone(), config.clone());
    let mut a = start();
    a.wait_for(T, "chatty running", |v| running(v, "chatty"));
    let old = pid_of(&a, "chatty");
    let mut state = socket.as_os_str().to_os_string();
    state.push(".state");
    a.wait_for(T, "recorded", |_| {
        std::fs::read_to_string(&state)
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with(&format!("{old} ")))
    });
    let mut child = a.child.take().unwrap();
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    let b = start();
    b.wait_for(T, "a new run, captured", |v| {
        let new = pid_of(v, "chatty");
        let log = v.request(r#"{"cmd":"logs","pod":"chatty","tail":1}"#)["result"]["log"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        running(v, "chatty") && new != old && log.contains(&format!("tick {new}"))
    });
    assert!(!alive(old), "the old run died of its lost pipe");
    assert_eq!(b.shutdown(), 0);
}

#[test]
fn a_container_stopped_by_request_stays_stopped_after_a_crash_and_starts_on_request() {
    let mix = Mix::new(24, "", None);
    let mut a = mix.start();
    a.wait_for(T, "the mix running", |v| {
        ["svc", "flaky", "probed"].iter().all(|p| running(v, p))
    });
    let r = a.request(r#"{"cmd":"stop","pod":"svc","container":"c"}"#);
    assert_eq!(r["ok"], true, "{r}");
    a.wait_for(T, "svc stopped and recorded so", |v| {
        state_reason(&v.container("svc", "c")) == "Stopped"
            && mix
                .state_file()
                .lines()
                .any(|l| l.starts_with("stopped svc/c "))
    });
    let probed = pid_of(&a, "probed");
    a.wait_for(T, "probed recorded", |_| {
        mix.state_file()
            .lines()
            .any(|l| l.starts_with(&format!("{probed} ")))
    });
    let mut child = a.child.take().unwrap();
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();

    let b = mix.start();
    b.wait_for(T, "probed adopted", |v| pid_of(v, "probed") == probed);
    let svc = b.container("svc", "c");
    assert_eq!(state_reason(&svc), "Stopped", "{svc}");
    assert_eq!(count(mix.svc), 0, "not started again");
    assert!(b.log().contains("svc/c: kept stopped"), "{}", b.log());
    let r = b.request(r#"{"cmd":"start","pod":"svc","container":"c"}"#);
    assert_eq!(r["ok"], true, "{r}");
    b.wait_for(T, "svc started on request", |v| running(v, "svc"));
    b.wait_for(T, "no longer recorded as stopped", |_| {
        !mix.state_file()
            .lines()
            .any(|l| l.starts_with("stopped svc/c "))
    });
    assert_eq!(b.shutdown(), 0);
    assert_eq!(mix.counts(), (0, 0, 0));
}

#[test]
fn a_completed_job_is_not_run_again_after_a_crash_unless_its_definition_changed() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let runs = dir.path().join("job-runs");
    let svc = unique(27);
    let write = |arg: &str| {
        std::fs::write(
            &config,
            format!(
                r#"{}[pods.job]
restart_policy = "OnFailure"
[[pods.job.containers]]
name = "run"
command = ["sh", "-c", "echo {arg} >> {runs}"]

[pods.svc]
[[pods.svc.containers]]
name = "c"
command = ["sleep", "{svc}"]
"#,
                supervisor_header(&socket),
                runs = runs.display()
            ),
        )
        .unwrap();
    };
    write("one");
    let start = || Vigil::start_with(tempfile::tempdir().unwrap(), socket.clone(), config.clone());
    let mut state = socket.as_os_str().to_os_string();
    state.push(".state");
    let kill_9 = |v: &mut Vigil| {
        let mut child = v.child.take().unwrap();
        Command::new("kill")
            .args(["-9", &child.id().to_string()])
            .status()
            .unwrap();
        child.wait().unwrap();
    };
    let lines = || std::fs::read_to_string(&runs).unwrap_or_default();

    let mut a = start();
    a.wait_for(T, "the job completed and recorded so", |v| {
        state_reason(&v.container("job", "run")) == "Completed"
            && std::fs::read_to_string(&state)
                .unwrap_or_default()
                .lines()
                .any(|l| l.starts_with("completed job/run "))
    });
    kill_9(&mut a);

    let mut b = start();
    b.wait_for(T, "svc adopted", |v| running(v, "svc"));
    let job = b.container("job", "run");
    assert_eq!(state_reason(&job), "Completed", "{job}");
    assert_eq!(lines(), "one\n", "not run again");
    assert!(b.log().contains("job/run: kept completed"), "{}", b.log());
    kill_9(&mut b);

    // A changed definition runs again.
    write("two");
    let c = start();
    c.wait_for(T, "the changed job ran", |_| lines() == "one\ntwo\n");
    c.wait_for(T, "and completed", |v| {
        state_reason(&v.container("job", "run")) == "Completed"
    });
    assert_eq!(c.shutdown(), 0);
    assert_eq!(count(svc), 0);
}
