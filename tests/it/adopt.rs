//! Issue 17.4, a crash rather than an upgrade: vigil is `kill -9`ed and started again on the
//! same config. With `on_restart = "adopt"` (the default) the containers it left keep their
//! pids and are shown Running with their restart counts; one killed afterwards is noticed
//! (pidfd) and restarted by policy as `ContainerStatusUnknown`; `stop` works on an adopted one;
//! probes go on; a container whose definition changed is replaced. With `"replace"` the old
//! processes are gone and new ones run, one copy each. Both without cgroups (the state file)
//! and with them (`#[ignore]`d: root and a cgroup2 mount).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    ScratchCgroup, Vigil, alive, processes_with_cmdline, state_reason, write_config,
};

const T: Duration = Duration::from_secs(20);

/// Sleep lengths unique to this test process and call (processes are counted machine-wide
/// by their command line): `offset` < 40, each used by one test (free: 23, 32-39).
fn unique(offset: u32) -> u32 {
    assert!(
        offset < 40,
        "offset {offset} would reach another test process's range"
    );
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

/// A config and a socket in a directory of their own, for vigils started one after another
/// on them (each with a log directory of its own).
struct Site {
    dir: tempfile::TempDir,
    socket: PathBuf,
    config: PathBuf,
}

impl Site {
    /// A fresh directory; no config written yet.
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("vigil.sock");
        let config = dir.path().join("vigil.toml");
        Site {
            dir,
            socket,
            config,
        }
    }

    /// Writes the config: `supervisor` lines set in `[supervisor]` (see
    /// `common::supervisor_header_with`), then `pods`.
    fn write(&self, supervisor: &str, pods: &str) {
        write_config(self.dir.path(), &self.socket, supervisor, pods);
    }

    /// A file in the site's directory.
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn start(&self) -> Vigil {
        Vigil::start_with(
            tempfile::tempdir().unwrap(),
            self.socket.clone(),
            self.config.clone(),
        )
    }

    /// The state file's text (empty when there is none).
    fn state_file(&self) -> String {
        let mut p = self.socket.as_os_str().to_os_string();
        p.push(".state");
        std::fs::read_to_string(p).unwrap_or_default()
    }

    /// Whether the state file has a line starting with `prefix`.
    fn records(&self, prefix: &str) -> bool {
        self.state_file().lines().any(|l| l.starts_with(prefix))
    }
}

/// Waits until the state file records `pids` (main processes of `v`, a vigil on `site`), then
/// `kill -9`s `v`.
fn kill_9_once_recorded(site: &Site, v: &mut Vigil, pids: &[u64]) {
    v.wait_for_showing(
        T,
        &format!("the state file to record {pids:?}"),
        |_| pids.iter().all(|p| site.records(&format!("{p} "))),
        |_| format!("state file:\n{}", site.state_file()),
    );
    kill_9(v);
}

/// `kill -9` of the vigil `v` runs (by its pid): no clean-up by vigil.
fn kill_9(v: &mut Vigil) {
    let mut child = v.child.take().unwrap();
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
}

struct Mix {
    svc: u32,
    flaky: u32,
    probed: u32,
    site: Site,
}

impl Mix {
    /// `supervisor`: lines set in `[supervisor]` (`cgroup_root`, `on_restart`).
    fn new(offset: u32, supervisor: &str) -> Mix {
        let (svc, flaky, probed) = (unique(offset), unique(offset + 1), unique(offset + 2));
        let site = Site::new();
        site.write(
            supervisor,
            &pods(svc, flaky, probed, &site.path("flaky-ran")),
        );
        Mix {
            svc,
            flaky,
            probed,
            site,
        }
    }

    fn start(&self) -> Vigil {
        self.site.start()
    }

    fn state_file(&self) -> String {
        self.site.state_file()
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
    // The pids are read again at each look: it is the main processes running now that must be
    // recorded (one replaced meanwhile, say after liveness attempts timed out on a loaded
    // machine, is not to be waited for).
    let records = |pids: &[u64]| {
        let text = mix.state_file();
        pids.iter().all(|p| {
            *p != 0
                && text
                    .lines()
                    .any(|l| l.starts_with(&format!("{p} ")) && l.split(' ').count() == 5)
        })
    };
    let mains = |v: &Vigil| [pid_of(v, "svc"), pid_of(v, "flaky"), pid_of(v, "probed")];
    a.wait_for_showing(
        T,
        "the state file to record every main process",
        |v| records(&mains(v)),
        |_| format!("state file:\n{}", mix.state_file()),
    );
    let pids = mains(&a);
    assert!(
        records(&pids),
        "{pids:?} replaced as they were recorded\nstate file:\n{}\nvigil log:\n{}",
        mix.state_file(),
        a.log()
    );
    kill_9(&mut a);
    assert!(pids.iter().all(|p| alive(*p)), "they outlive vigil");
    pids
}

/// The replace checks shared by the cgroup and no-cgroup variants: new pids, the old
/// processes killed (the cgroup variant's `cgroup.kill` takes effect asynchronously: waited
/// for, like the state file's kills), one copy of each.
fn replaced_mix_behaves(mix: &Mix) {
    let pids = run_then_kill_9(mix);
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
    let mix = Mix::new(0, "");
    adopted_mix_behaves(&mix);
}

#[test]
fn without_cgroups_replace_kills_what_was_left_and_starts_one_copy_of_each() {
    let mix = Mix::new(3, "on_restart = \"replace\"");
    replaced_mix_behaves(&mix);
}

#[test]
fn a_container_whose_definition_changed_is_replaced_and_the_others_adopted() {
    let mix = Mix::new(6, "");
    let [svc, flaky, probed] = run_then_kill_9(&mix);
    // svc's definition changes (a new argument); the others stay as they were.
    let text = std::fs::read_to_string(&mix.site.config).unwrap();
    // From this test process's own range (an argument outside it could be another test
    // process's: they are counted machine-wide).
    let changed = unique(28);
    std::fs::write(
        &mix.site.config,
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
    let mix = Mix::new(9, "");
    let a = mix.start();
    a.wait_for(T, "svc running", |v| running(v, "svc"));
    let svc = pid_of(&a, "svc");
    let out = Command::new(crate::common::BIN)
        .args(["run", "-c"])
        .arg(&mix.site.config)
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

#[test]
#[ignore = "needs root and cgroup v2"]
fn with_cgroups_a_restarted_vigil_adopts_the_containers_in_their_cgroups() {
    let cg = ScratchCgroup::new();
    let mix = Mix::new(12, &cg.root_line());
    adopted_mix_behaves(&mix);
}

#[test]
#[ignore = "needs root and cgroup v2"]
fn with_cgroups_an_adopted_container_keeps_its_cgroup_and_its_end_empties_it() {
    let cg = ScratchCgroup::new();
    let mix = Mix::new(15, &cg.root_line());
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
    let cg = ScratchCgroup::new();
    let mix = Mix::new(18, &format!("on_restart = \"replace\"\n{}", cg.root_line()));
    replaced_mix_behaves(&mix);
}

#[test]
fn a_pod_with_an_init_container_and_a_sidecar_is_adopted_without_running_the_init_again() {
    let site = Site::new();
    let runs = site.path("setup-runs");
    let (proxy, app) = (unique(21), unique(22));
    site.write(
        "",
        &format!(
            r#"[pods.web]
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
            runs = runs.display()
        ),
    );
    let pid = |v: &Vigil, c: &str| v.container("web", c)["pid"].as_u64().unwrap_or(0);
    let mut a = site.start();
    a.wait_for(T, "proxy and app running", |v| {
        state_reason(&v.container("web", "proxy")) == "Running"
            && state_reason(&v.container("web", "app")) == "Running"
    });
    let (p, m) = (pid(&a, "proxy"), pid(&a, "app"));
    kill_9_once_recorded(&site, &mut a, &[p, m]);

    let b = site.start();
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
fn a_chatty_container_keeps_its_pipe_across_the_crash_and_its_adopted_run_is_captured() {
    // Its output pipes' read ends were kept by vigil's output holder (src/runtime/holder.rs):
    // its writes never fail, and the next vigil reads on from where the pipe was.
    let site = Site::new();
    site.write(
        "",
        "[pods.chatty]\nbackoff = { initial_seconds = 0.1, max_seconds = 0.2 }\n[[pods.chatty.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"while :; do echo tick $$$$; sleep 0.1; done\"]\n",
    );
    let mut a = site.start();
    a.wait_for(T, "chatty running", |v| running(v, "chatty"));
    let old = pid_of(&a, "chatty");
    kill_9_once_recorded(&site, &mut a, &[old]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(old), "its writes did not fail while no vigil ran");
    let b = site.start();
    b.wait_for(T, "the same run adopted, its output captured", |v| {
        let log = v.request(r#"{"cmd":"logs","pod":"chatty","tail":1}"#)["result"]["log"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        running(v, "chatty") && pid_of(v, "chatty") == old && log.contains(&format!("tick {old}"))
    });
    assert!(alive(old));
    assert_eq!(b.container("chatty", "c")["restart_count"], 0);
    assert_eq!(b.shutdown(), 0);
}

#[test]
fn a_container_stopped_by_request_stays_stopped_after_a_crash_and_starts_on_request() {
    let mix = Mix::new(24, "");
    let mut a = mix.start();
    a.wait_for(T, "the mix running", |v| {
        ["svc", "flaky", "probed"].iter().all(|p| running(v, p))
    });
    let r = a.request(r#"{"cmd":"stop","pod":"svc","container":"c"}"#);
    assert_eq!(r["ok"], true, "{r}");
    a.wait_for(T, "svc stopped and recorded so", |v| {
        state_reason(&v.container("svc", "c")) == "Stopped" && mix.site.records("stopped svc/c ")
    });
    let probed = pid_of(&a, "probed");
    kill_9_once_recorded(&mix.site, &mut a, &[probed]);

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
        !mix.site.records("stopped svc/c ")
    });
    assert_eq!(b.shutdown(), 0);
    assert_eq!(mix.counts(), (0, 0, 0));
}

#[test]
fn a_completed_job_is_not_run_again_after_a_crash_unless_its_definition_changed() {
    let site = Site::new();
    let runs = site.path("job-runs");
    let svc = unique(27);
    let write = |arg: &str| {
        site.write(
            "",
            &format!(
                r#"[pods.job]
restart_policy = "OnFailure"
[[pods.job.containers]]
name = "run"
command = ["sh", "-c", "echo {arg} >> {runs}"]

[pods.svc]
[[pods.svc.containers]]
name = "c"
command = ["sleep", "{svc}"]
"#,
                runs = runs.display()
            ),
        );
    };
    write("one");
    let lines = || std::fs::read_to_string(&runs).unwrap_or_default();

    let mut a = site.start();
    a.wait_for(T, "the job completed and recorded so", |v| {
        state_reason(&v.container("job", "run")) == "Completed"
            && site.records("completed job/run ")
    });
    kill_9(&mut a);

    let mut b = site.start();
    b.wait_for(T, "svc adopted", |v| running(v, "svc"));
    let job = b.container("job", "run");
    assert_eq!(state_reason(&job), "Completed", "{job}");
    assert_eq!(lines(), "one\n", "not run again");
    assert!(b.log().contains("job/run: kept completed"), "{}", b.log());
    kill_9(&mut b);

    // A changed definition runs again.
    write("two");
    let c = site.start();
    c.wait_for(T, "the changed job ran", |_| lines() == "one\ntwo\n");
    c.wait_for(T, "and completed", |v| {
        state_reason(&v.container("job", "run")) == "Completed"
    });
    assert_eq!(c.shutdown(), 0);
    assert_eq!(count(svc), 0);
}

#[test]
fn an_upgrade_after_an_adoption_counts_the_adopted_containers_among_those_kept() {
    let mix = Mix::new(29, "");
    let [svc, flaky, probed] = run_then_kill_9(&mix);
    let b = mix.start();
    b.wait_for(T, "all three adopted", |v| {
        pid_of(v, "svc") == svc && pid_of(v, "flaky") == flaky && pid_of(v, "probed") == probed
    });
    let out = b.cli(&["upgrade"]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{}", b.log());
    assert!(text.contains(": 3 containers kept"), "{text}");
    assert_eq!(
        [pid_of(&b, "svc"), pid_of(&b, "flaky"), pid_of(&b, "probed")],
        [svc, flaky, probed]
    );
    assert_eq!(b.shutdown(), 0);
}
