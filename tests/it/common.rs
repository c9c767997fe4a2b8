//! A vigil under test: started with a temp config and socket, stopped (by PID) on drop.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_vigil");

pub struct Vigil {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
}

/// `[supervisor]` lines every test config starts with (socket filled in by `start`).
pub fn supervisor_header(socket: &Path) -> String {
    format!(
        "[supervisor]\nsocket = \"{}\"\ncgroup_root = \"none\"\nlog_forward = false\nshutdown_timeout_seconds = 10\n\n",
        socket.display()
    )
}

/// [`supervisor_header`] with `lines` (`key = value`, one a line) set: a line for a key the
/// header has replaces it, the others are added at the top of the table.
pub fn supervisor_header_with(socket: &Path, lines: &str) -> String {
    let key = |l: &str| l.split('=').next().unwrap_or("").trim().to_string();
    let mut header = supervisor_header(socket);
    let mut added = String::new();
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        let k = key(line);
        match header.lines().find(|l| l.contains('=') && key(l) == k) {
            Some(old) => header = header.replacen(&format!("{old}\n"), &format!("{line}\n"), 1),
            None => added.push_str(&format!("{line}\n")),
        }
    }
    header.replacen("[supervisor]\n", &format!("[supervisor]\n{added}"), 1)
}

/// Writes `dir/vigil.toml`: the header for `socket` with `supervisor` lines set (see
/// [`supervisor_header_with`]), then `pods`; returns its path.
pub fn write_config(dir: &Path, socket: &Path, supervisor: &str, pods: &str) -> PathBuf {
    let config = dir.join("vigil.toml");
    std::fs::write(
        &config,
        format!("{}{pods}", supervisor_header_with(socket, supervisor)),
    )
    .unwrap_or_else(|e| panic!("write {}: {e}", config.display()));
    config
}

/// A pod `name` of one container `c` running `cmd` with `sh -c`.
pub fn sh_pod(name: &str, cmd: &str) -> String {
    format!(
        "[pods.{name}]\n[[pods.{name}.containers]]\nname = \"c\"\ncommand = [\"sh\", \"-c\", \"{cmd}\"]\n"
    )
}

/// How much longer than its nominal deadline a wait may take here: the load average per CPU
/// when that is above 1 (a 2-core machine running other builds and tests; at most 5), times
/// `VIGIL_TEST_PATIENCE` when set (a factor, e.g. `3` on a slow emulated machine). A state that
/// never comes still fails, only later; a timed-out wait says what it waited for and how long.
pub fn patience() -> f64 {
    let load: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let factor: f64 = std::env::var("VIGIL_TEST_PATIENCE")
        .ok()
        .and_then(|f| f.parse().ok())
        .filter(|f: &f64| *f >= 1.0)
        .unwrap_or(1.0);
    (load / cpus).clamp(1.0, 5.0) * factor
}

/// `base` times [`patience`].
pub fn patient(base: Duration) -> Duration {
    base.mul_f64(patience())
}

impl Vigil {
    /// Start `vigil run` on `pods` (TOML without the `[supervisor]` table).
    pub fn start(pods: &str) -> Vigil {
        Self::start_in(tempfile::tempdir().expect("tempdir"), "", pods)
    }

    /// Start on `pods` in `dir` (socket `dir/vigil.sock`), with `supervisor` lines set in
    /// `[supervisor]` (see [`supervisor_header_with`]).
    pub fn start_in(dir: tempfile::TempDir, supervisor: &str, pods: &str) -> Vigil {
        let socket = dir.path().join("vigil.sock");
        let config = write_config(dir.path(), &socket, supervisor, pods);
        Self::start_with(dir, socket, config)
    }

    /// [`Vigil::start_in`] a fresh directory other uids may enter (0755), with the socket
    /// open to them (`socket_mode = "0666"`) and `supervisor` lines set as well: for tests
    /// whose client runs as another uid.
    pub fn start_shared(supervisor: &str, pods: &str) -> Vigil {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        Self::start_in(dir, &format!("socket_mode = \"0666\"\n{supervisor}"), pods)
    }

    /// Start with a complete config file already written to `config`.
    pub fn start_with(dir: tempfile::TempDir, socket: PathBuf, config: PathBuf) -> Vigil {
        Self::start_with_args(dir, socket, config, &[])
    }

    /// [`Vigil::start_with`] with more arguments after `run -c CONFIG` (e.g. `-f pod.yaml`).
    pub fn start_with_args(
        dir: tempfile::TempDir,
        socket: PathBuf,
        config: PathBuf,
        extra: &[&std::ffi::OsStr],
    ) -> Vigil {
        Self::start_logging_at(dir, socket, config, extra, "debug")
    }

    /// [`Vigil::start_with_args`] with `VIGIL_LOG` set to `level` (what an operator sees).
    pub fn start_logging_at(
        dir: tempfile::TempDir,
        socket: PathBuf,
        config: PathBuf,
        extra: &[&std::ffi::OsStr],
        level: &str,
    ) -> Vigil {
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "-c"])
            .arg(&config)
            .args(extra)
            .env("VIGIL_LOG", level)
            .stdin(Stdio::null());
        Self::launch(cmd, dir, socket, config)
    }

    /// Runs `cmd` (a `vigil run` on `config`, however wrapped: `prlimit`, `unshare`, a
    /// manifest on stdin) without `VIGIL_SOCKET`, its output in `dir/vigil.log`, and waits
    /// until `socket` answers.
    pub fn launch(
        mut cmd: Command,
        dir: tempfile::TempDir,
        socket: PathBuf,
        config: PathBuf,
    ) -> Vigil {
        let log = std::fs::File::create(dir.path().join("vigil.log")).expect("log file");
        let child = cmd
            .env_remove("VIGIL_SOCKET")
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
        let v = Vigil {
            child: Some(child),
            dir,
            socket,
            config,
        };
        v.wait_for(Duration::from_secs(20), "socket to answer", |v| {
            v.try_request(r#"{"cmd":"version"}"#).is_some()
        });
        v
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("vigil.log")).unwrap_or_default()
    }

    /// One request on a fresh connection; `None` if the socket cannot be reached.
    pub fn try_request(&self, line: &str) -> Option<Value> {
        let mut s = UnixStream::connect(&self.socket).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        s.write_all(line.as_bytes()).ok()?;
        s.write_all(b"\n").ok()?;
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).ok()?;
        serde_json::from_str(&reply).ok()
    }

    pub fn request(&self, line: &str) -> Value {
        match self.try_request(line) {
            Some(v) => v,
            None => panic!("no reply to {line}\nvigil log:\n{}", self.log()),
        }
    }

    pub fn status(&self) -> Value {
        self.request(r#"{"cmd":"status"}"#)["result"].clone()
    }

    pub fn pod(&self, name: &str) -> Value {
        let st = self.status();
        st["pods"]
            .as_array()
            .and_then(|pods| pods.iter().find(|p| p["name"] == name).cloned())
            .unwrap_or(Value::Null)
    }

    pub fn container(&self, pod: &str, container: &str) -> Value {
        let p = self.pod(pod);
        for list in ["containers", "init_containers"] {
            if let Some(c) = p[list]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["name"] == container))
            {
                return c.clone();
            }
        }
        Value::Null
    }

    /// Poll until `cond` holds or `timeout` (stretched by [`patience`] on a loaded machine)
    /// passes; then panic with what was waited for, how long, the last status and the log.
    pub fn wait_for(&self, timeout: Duration, what: &str, cond: impl FnMut(&Vigil) -> bool) {
        self.wait_for_showing(timeout, what, cond, |_| String::new());
    }

    /// [`Vigil::wait_for`] whose failure message also shows `show` (what the condition looks
    /// at besides vigil's status: a file, a process list).
    pub fn wait_for_showing(
        &self,
        timeout: Duration,
        what: &str,
        mut cond: impl FnMut(&Vigil) -> bool,
        show: impl Fn(&Vigil) -> String,
    ) {
        let started = Instant::now();
        let deadline = started + patient(timeout);
        loop {
            if cond(self) {
                return;
            }
            if Instant::now() > deadline {
                let status = self.try_request(r#"{"cmd":"status"}"#);
                panic!(
                    "timed out waiting for {what} ({:.1} s; nominal {timeout:?}, load {})\n\
                     {}\nlast status: {}\nvigil log:\n{}",
                    started.elapsed().as_secs_f64(),
                    std::fs::read_to_string("/proc/loadavg")
                        .unwrap_or_default()
                        .trim(),
                    show(self),
                    status.map(|s| s.to_string()).unwrap_or_default(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Run the CLI against this vigil.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .expect("run vigil cli")
    }

    /// Ask for shutdown and wait for the exit code.
    pub fn shutdown(mut self) -> i32 {
        let _ = self.try_request(r#"{"cmd":"shutdown"}"#);
        self.wait_exit(Duration::from_secs(20))
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> i32 {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + patient(timeout);
        loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                return st.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("vigil did not exit\nlog:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Vigil {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM first so vigil stops its containers; SIGKILL if it does not exit.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn state_reason(c: &Value) -> String {
    for k in ["waiting", "terminated"] {
        if let Some(r) = c["state"][k]["reason"].as_str() {
            return r.to_string();
        }
    }
    if c["state"]["running"].is_object() {
        return "Running".into();
    }
    String::new()
}

/// Whether a process with this pid exists (and is not a zombie).
pub fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Pids whose /proc/PID/cmdline equals `cmdline` exactly (NUL-separated).
pub fn processes_with_cmdline(cmdline: &str) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline"))
                && c == cmdline.as_bytes()
                && alive(pid as u64)
            {
                out.push(pid);
            }
        }
    }
    out
}

// ---- what a privileged test needs ------------------------------------------------------------
//
// Tests that need root, a cgroup2 mount or a host tool are marked `#[ignore = "needs …"]`, so an
// unprivileged `cargo test` lists them as ignored; CI runs as root with `--include-ignored`.
// Run that way, a test whose need is not met fails here, naming the need, rather than passing
// without having run.

/// `oom_score_adj` values a test can give vigil: `raised` everywhere (raising needs no
/// privilege, proc(5)), and `protective` as well where lowering is allowed
/// (CAP_SYS_RESOURCE; root in a container may lack it).
pub fn oom_score_adj_values(raised: i32, protective: i32) -> Vec<i32> {
    let mut values = vec![raised];
    if caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_RESOURCE,
    )
    .unwrap_or(false)
    {
        values.push(protective);
    }
    values
}

/// `/proc/PID/oom_score_adj`, trimmed (empty if it cannot be read).
pub fn oom_score_adj_of(pid: u64) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Panics unless this process is root; `why` says what the test does with it.
pub fn require_root(why: &str) {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test needs root ({why}); run it as root or without --include-ignored"
    );
}

/// The cgroup2 mount point (the unified one on hybrid hosts), from /proc/self/mountinfo;
/// panics without one.
pub fn require_cgroup2_mount() -> PathBuf {
    let text = std::fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo");
    let mounts = vigil::cgroup::discover::parse_mountinfo(&text);
    vigil::cgroup::discover::find_cgroup2(&mounts)
        .map(|m| m.mount_point.clone())
        .expect("this test needs a cgroup2 mount and there is none")
}

/// Panics unless `program` runs with `arg` (e.g. `--version`); `package` says where it comes
/// from. tests/run-all.sh installs every program named here.
pub fn require_program(program: &str, arg: &str, package: &str) {
    let ok = Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs `{program}` (Debian package `{package}`); tests/run-all.sh installs it"
    );
}

// ---- a scratch cgroup ------------------------------------------------------------------------

/// A cgroup2 directory made for one test; on drop everything in it is killed and every
/// directory under it removed (deepest first).
pub struct ScratchCgroup {
    pub path: PathBuf,
}

impl ScratchCgroup {
    /// Panics (naming the need) without root, a cgroup2 mount or `cgroup.kill`.
    pub fn new() -> ScratchCgroup {
        static N: AtomicU32 = AtomicU32::new(0);
        require_root("to create cgroups");
        let mount = require_cgroup2_mount();
        let path = mount.join(format!(
            "vigil-it-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(e) = std::fs::create_dir(&path) {
            panic!("cannot create scratch cgroup {}: {e}", path.display());
        }
        let cg = ScratchCgroup { path };
        assert!(
            cg.path.join("cgroup.kill").exists(),
            "this test needs cgroup.kill (Linux 5.14)"
        );
        cg
    }

    /// `cgroup_root = "<its path>"`, for [`Vigil::start_in`] or [`write_config`].
    pub fn root_line(&self) -> String {
        format!("cgroup_root = \"{}\"", self.path.display())
    }

    /// Every directory under the scratch cgroup, deepest first.
    pub fn dirs(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        walk(&e.path(), out);
                    }
                }
            }
            out.push(dir.to_path_buf());
        }
        let mut out = Vec::new();
        walk(&self.path, &mut out);
        out
    }

    /// Container cgroups (`<root>/<pod>/<container>`) still present.
    pub fn container_dirs(&self) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .filter(|d| d.parent().and_then(Path::parent) == Some(self.path.as_path()))
            .collect()
    }
}

impl Drop for ScratchCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path.join("cgroup.freeze"), "0");
        let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
        let deadline = Instant::now() + Duration::from_secs(5);
        for dir in self.dirs() {
            while std::fs::remove_dir(&dir).is_err() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Starts vigil with `cgroup_root` at `cg` (no resources: no controllers needed).
pub fn start_with_cgroup_root(cg: &ScratchCgroup, pods: &str) -> Vigil {
    Vigil::start_in(tempfile::tempdir().expect("tempdir"), &cg.root_line(), pods)
}

/// `se.slice` (ns) and the nice of a task, from /proc/PID/sched and /proc/PID/stat.
pub fn slice_and_nice(pid: u64) -> (u64, i64) {
    let sched = std::fs::read_to_string(format!("/proc/{pid}/sched")).expect("read sched");
    let slice = sched
        .lines()
        .find_map(|l| l.strip_prefix("se.slice"))
        .and_then(|v| v.trim_start_matches([' ', ':']).trim().parse().ok())
        .unwrap_or_else(|| panic!("no se.slice in /proc/{pid}/sched:\n{sched}"));
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read stat");
    let after_comm = &stat[stat.rfind(')').expect("comm") + 2..];
    // Fields 3.. after the comm: nice is field 19 of stat(5), the 17th here.
    let nice = after_comm
        .split(' ')
        .nth(16)
        .and_then(|v| v.parse().ok())
        .expect("nice");
    (slice, nice)
}

/// Linux 6.12 or later: SCHED_OTHER tasks may ask for their own time slice.
pub fn kernel_has_custom_slices() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (6, 12)
}

/// A value of the `metrics` reply on the control socket.
pub fn metric(v: &Vigil, name: &str) -> f64 {
    let reply = v.request(r#"{"cmd":"metrics"}"#);
    let text = reply["result"]["text"].as_str().unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}
