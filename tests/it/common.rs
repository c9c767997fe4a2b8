//! A vigil under test: started with a temp config and socket, stopped (by PID) on drop.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

impl Vigil {
    /// Start `vigil run` on `pods` (TOML without the `[supervisor]` table).
    pub fn start(pods: &str) -> Vigil {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("vigil.sock");
        let config = dir.path().join("vigil.toml");
        std::fs::write(&config, format!("{}{}", supervisor_header(&socket), pods))
            .expect("write config");
        Self::start_with(dir, socket, config)
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
        let log = std::fs::File::create(dir.path().join("vigil.log")).expect("log file");
        let child = Command::new(BIN)
            .args(["run", "-c"])
            .arg(&config)
            .args(extra)
            .env("VIGIL_LOG", level)
            .env_remove("VIGIL_SOCKET")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .expect("spawn vigil");
        let v = Vigil {
            child: Some(child),
            dir,
            socket,
            config,
        };
        v.wait_for(Duration::from_secs(10), "socket to answer", |v| {
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

    /// Poll until `cond` holds or `timeout` passes (then panic with the log and last status).
    pub fn wait_for(&self, timeout: Duration, what: &str, mut cond: impl FnMut(&Vigil) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(self) {
                return;
            }
            if Instant::now() > deadline {
                let status = self.try_request(r#"{"cmd":"status"}"#);
                panic!(
                    "timed out waiting for {what}\nlast status: {}\nvigil log:\n{}",
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
        let deadline = Instant::now() + timeout;
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
