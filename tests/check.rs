//! `vigil check` end to end: the built binary on good and bad files (exit codes, output
//! format `FILE:LINE:COL: field: message`, one problem per line on stderr). Also what the
//! binary does before any command: the environment it reads, its standard descriptors and
//! SIGPIPE (src/main.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn vigil_check(config: Option<&Path>, env_config: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vigil"));
    cmd.arg("check").env_remove("VIGIL_CONFIG");
    if let Some(c) = config {
        cmd.arg("-c").arg(c);
    }
    if let Some(e) = env_config {
        cmd.env("VIGIL_CONFIG", e);
    }
    cmd.output().expect("run vigil check")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write config");
    p
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const GOOD: &str = r#"
[pods.web]
depends_on = { db = "ready" }
[[pods.web.init_containers]]
name = "migrate"
command = ["/bin/true"]
[[pods.web.containers]]
name = "app"
command = ["/bin/sleep", "1000"]
[pods.web.containers.readiness_probe]
tcp_socket = { port = 8080 }

[pods.db]
[[pods.db.containers]]
name = "db"
command = ["/bin/sleep", "1000"]
"#;

#[test]
fn check_accepts_a_valid_file_and_counts_pods_and_containers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(dir.path(), "good.toml", GOOD);
    let out = vigil_check(Some(&f), None);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{}: ok (2 pods, 3 containers)\n", f.display())
    );
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn check_reports_every_problem_located_on_stderr_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "bad.toml",
        "[pods.web]\n\
         restart_policy = \"Sometimes\"\n\
         colour = \"blue\"\n\
         [[pods.web.containers]]\n\
         name = \"app\"\n\
         command = [\"/bin/sh\"]\n\
         [pods.web.containers.liveness_probe]\n\
         http_get = { port = 8080, scheme = \"gopher\" }\n\
         period_seconds = 0\n",
    );
    let out = vigil_check(Some(&f), None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let p = f.display();
    assert_eq!(
        lines,
        vec![
            format!(
                "{p}:2:18: pods.web.restart_policy: invalid restart_policy \"Sometimes\"; \
                 expected Always, OnFailure or Never"
            ),
            format!(
                "{p}:3:1: pods.web.colour: unknown key \"colour\"; expected one of: \
                 restart_policy, termination_grace_period_seconds, backoff, max_restarts, \
                 depends_on, shutdown_on, active_deadline_seconds, schedule, history, \
                 stable_identity, autostart, profiles, replicas, min_ready, update, \
                 max_unavailable, progress_deadline_seconds, init_containers, containers"
            ),
            format!(
                "{p}:8:36: pods.web.containers[0].liveness_probe.http_get.scheme: unsupported \
                 scheme \"gopher\"; use \"HTTP\" or \"HTTPS\""
            ),
            format!(
                "{p}:9:18: pods.web.containers[0].liveness_probe.period_seconds: must be > 0 \
                 seconds, got 0"
            ),
        ],
        "{stderr}"
    );
}

#[test]
fn check_accepts_host_names_https_and_grpc_probes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "names.toml",
        "[[pods.web.containers]]\n\
         name = \"app\"\n\
         command = [\"/bin/sh\"]\n\
         liveness_probe = { http_get = { host = \"app.internal\", port = 8443, scheme = \"HTTPS\" } }\n\
         readiness_probe = { grpc = { host = \"db.local\", port = 9090 } }\n\
         startup_probe = { tcp_socket = { host = \"cache.local\", port = 6379 } }\n",
    );
    // The names need not resolve here: the file is for wherever it runs.
    let out = vigil_check_args(&f, &["--no-host"]);
    assert_eq!(text(&out.stderr), "");
    assert_eq!(
        text(&out.stdout),
        format!("{}: ok (1 pod, 1 container)\n", f.display())
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn check_reports_a_syntax_error_with_its_location() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(dir.path(), "syntax.toml", "[pods.web\nx = 1\n");
    let out = vigil_check(Some(&f), None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("{}:1:", f.display())) && stderr.contains("TOML syntax error"),
        "{stderr}"
    );
}

#[test]
fn check_names_an_unreadable_file_and_the_os_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.toml");
    let out = vigil_check(Some(&missing), None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "{}: cannot read config file: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
}

#[test]
fn check_reads_vigil_config_from_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(dir.path(), "env.toml", GOOD);
    let out = vigil_check(None, Some(&f));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(&format!("{}: ok", f.display())));
}

#[test]
fn an_empty_vigil_config_or_vigil_socket_is_the_same_as_unset() {
    // `check`: the file it would read without the variable (the system config or the bundled
    // default), not clap's "a value is required for '--config <CONFIG>'".
    let unset = vigil_check(None, None);
    let empty = vigil_check(None, Some(Path::new("")));
    assert_eq!(text(&empty.stderr), text(&unset.stderr));
    assert_eq!(text(&empty.stdout), text(&unset.stdout));
    assert_eq!(empty.status.code(), unset.status.code());
    // A client command, through clap (`status -o json`) and through its quick parser
    // (`status`): the socket named on the command line, unreachable: exit 2 naming it.
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("nobody.sock");
    for args in [&["status"][..], &["status", "-o", "json"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
            .args(args)
            .arg("--socket")
            .arg(&sock)
            .env("VIGIL_CONFIG", "")
            .env("VIGIL_SOCKET", "")
            .output()
            .expect("run vigil status");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&sock.display().to_string()), "{stderr}");
    }
    // Set and not empty, it is used as before: a missing config is an error naming it.
    let missing = dir.path().join("missing.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("status")
        .env("VIGIL_CONFIG", &missing)
        .env_remove("VIGIL_SOCKET")
        .output()
        .expect("run vigil status");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&missing.display().to_string()),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_reader_that_went_away_makes_a_write_fail_instead_of_killing_vigil_with_sigpipe() {
    use std::os::unix::process::ExitStatusExt as _;
    // stdout is a pipe whose read end is closed before vigil starts.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let status = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("--version")
        .stdout(writer)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run vigil --version");
    assert_eq!(status.signal(), None, "{status:?}");
}

#[test]
#[ignore = "needs root"]
fn vigil_started_with_stdin_closed_has_dev_null_there_not_one_of_its_own_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("v.sock");
    let config = write(
        dir.path(),
        "v.toml",
        &format!(
            "[supervisor]\nsocket = \"{}\"\ncgroup_root = \"none\"\n\n[pods.p]\n[[pods.p.containers]]\nname = \"c\"\ncommand = [\"/bin/sleep\", \"60\"]\n",
            sock.display()
        ),
    );
    // The shell closes descriptor 0 (`<&-`) and execs vigil.
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg("exec \"$0\" run -c \"$1\" <&-")
        .arg(env!("CARGO_BIN_EXE_vigil"))
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run vigil");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !sock.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let started = sock.exists();
    let fd0 = std::fs::read_link(format!("/proc/{}/fd/0", child.id()));
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    assert!(started, "vigil did not start");
    assert_eq!(fd0.expect("fd 0"), Path::new("/dev/null"));
}

#[test]
fn check_without_a_file_validates_the_bundled_default() {
    let out = vigil_check(None, None);
    let system = "/etc/vigil/vigil.toml";
    if Path::new(system).exists() {
        // This host has a system config: it takes precedence over the bundled default, and
        // whatever its verdict, it is the file named.
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(said.starts_with(system), "{said}");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("<bundled default>: ok ("), "{stdout}");
}

/// The shipped examples are valid files; what they name on a real machine (users such as
/// `app`, programs such as /usr/local/bin/queue-exporter, limits) may be missing here, and then
/// `check` says so as a host problem only.
#[test]
fn check_accepts_every_shipped_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut files = vec![root.join("default.toml")];
    for e in std::fs::read_dir(root.join("examples")).expect("config/examples") {
        files.push(e.expect("dir entry").path());
    }
    for f in files {
        let out = vigil_check_args(&f, &["--no-host"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            f.display(),
            text(&out.stderr)
        );
        let out = vigil_check(Some(&f), None);
        let stderr = text(&out.stderr);
        for line in stderr.lines() {
            assert!(line.contains(": on this host: "), "{}: {line}", f.display());
        }
    }
    // The bundled default runs anywhere: nothing on this host stops it.
    let out = vigil_check(Some(&root.join("default.toml")), None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn check_names_a_missing_cgroup_controller_with_the_hierarchy_and_what_is_available() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("limits.toml");
    std::fs::write(
        &f,
        "[pods.a]\n[[pods.a.containers]]\nname = \"c\"\ncommand = [\"true\"]\n\
         [pods.a.containers.resources]\nmemory_max = \"20Mi\"\n",
    )
    .expect("write");
    let out = vigil_check(Some(&f), None);
    if out.status.code() == Some(0) {
        // This host's cgroup2 offers the memory controller: the limit can be given.
        let stdout = text(&out.stdout);
        assert!(
            stdout.starts_with(&format!("{}: ok (1 pod, 1 container)", f.display())),
            "{stdout}"
        );
        return;
    }
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("memory controller not available in cgroup2 at ")
            && stderr.contains("(available: "),
        "{stderr}"
    );
}

#[test]
fn check_names_each_container_whose_limits_conflict_with_cgroup_root_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "none.toml",
        "[supervisor]\n\
         cgroup_root = \"none\"\n\
         [pods.web]\n\
         [[pods.web.containers]]\n\
         name = \"app\"\n\
         command = [\"/bin/sleep\", \"1000\"]\n\
         resources = { memory_max = \"64Mi\", pids_max = 10 }\n\
         [[pods.web.containers]]\n\
         name = \"free\"\n\
         command = [\"/bin/sleep\", \"1000\"]\n",
    );
    let out = vigil_check(Some(&f), None);
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "cgroup_root = \"none\" conflicts with resource limits, which need cgroups: \
             web/app sets resources.memory_max, resources.pids_max;"
        ),
        "{err}"
    );
    assert!(!err.contains("web/free"), "{err}");
}

fn vigil_check_args(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("check")
        .args(args)
        .arg("-c")
        .arg(config)
        .env_remove("VIGIL_CONFIG")
        .output()
        .expect("run vigil check")
}

/// What `run` would refuse on this host, all of it, each `FILE:LINE:COL: field: on this host:
/// …`; `--no-host` checks the file alone.
#[test]
fn check_lists_every_host_problem_located_and_no_host_skips_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.env");
    let not_pem = write(dir.path(), "ca.pem", "not a certificate\n");
    let f = write(
        dir.path(),
        "host.toml",
        &format!(
            "[[pods.web.containers]]\n\
             name = \"app\"\n\
             command = [\"/bin/sh\"]\n\
             env_file = \"{m}\"\n\
             [[pods.web.containers]]\n\
             name = \"side\"\n\
             command = [\"/bin/sh\"]\n\
             env_file = \"{m}\"\n\
             liveness_probe = {{ http_get = {{ host = \"127.0.0.1\", port = 8443, scheme = \"HTTPS\", tls = {{ ca_file = \"{ca}\" }} }} }}\n",
            m = missing.display(),
            ca = not_pem.display()
        ),
    );
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(text(&out.stdout), "");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    let shown = f.display();
    assert!(
        lines[0].starts_with(&format!(
            "{shown}:4:12: pods.web.containers[0].env_file: on this host: env_file"
        )) && lines[0].contains(&format!("{}: ", missing.display())),
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{shown}:8:12: pods.web.containers[1].env_file: on this host:"
        )),
        "{err}"
    );
    assert!(
        lines[2].starts_with(&format!("{shown}:9:"))
            && lines[2].contains("liveness_probe.http_get.tls.ca_file: on this host: tls: ca_file"),
        "{err}"
    );
    let out = vigil_check_args(&f, &["--no-host"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
}

/// A probe host that does not resolve is a warning (`run` accepts it, as the kubelet does):
/// said, located, exit 0.
#[test]
fn check_warns_of_a_probe_host_that_does_not_resolve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "dns.toml",
        "[[pods.web.containers]]\n\
         name = \"app\"\n\
         command = [\"/bin/sh\"]\n\
         readiness_probe = { http_get = { host = \"db.invalid\", port = 80 } }\n",
    );
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.starts_with(&format!(
            "{}:4:41: pods.web.containers[0].readiness_probe.http_get.host: warning: on this host: host \"db.invalid\" does not resolve here",
            f.display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(text(&out.stdout).contains(": ok (1 pod, 1 container)"));
}

/// `cgroup_root` that is not on cgroup2 (a cgroup v1 hierarchy, a plain directory) is refused
/// by `run` at start: `check` says so too, at the key.
#[test]
fn check_refuses_a_cgroup_root_not_on_cgroup2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "v1.toml",
        &format!(
            "[supervisor]\ncgroup_root = \"{}\"\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/sh\"]\n",
            dir.path().join("cg").display()
        ),
    );
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "{}:2:15: supervisor.cgroup_root: on this host: {} is not on a cgroup2 file system\n",
            f.display(),
            dir.path().join("cg").display()
        )
    );
}

/// As root, `run` refuses a config file others may write and a socket in a directory others
/// may write: `check` lists both.
#[test]
#[ignore = "needs root (the trust checks are a root vigil's)"]
fn check_as_root_refuses_a_writable_config_and_socket_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let f = write(
        dir.path(),
        "loose.toml",
        &format!(
            "[supervisor]\nsocket = \"{}\"\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/sh\"]\n",
            open.join("vigil.sock").display()
        ),
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(&format!("{}: on this host: ", f.display()))
            && lines[0].contains("config file"),
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{}:2:10: supervisor.socket: on this host: ",
            f.display()
        )) && lines[1].contains("socket directory"),
        "{err}"
    );
}

/// `FILE` and `FILE.d/NAME` for each drop-in.
fn with_drop_ins(dir: &Path, main: &str, drop_ins: &[(&str, &str)]) -> PathBuf {
    let f = write(dir, "vigil.toml", main);
    let d = dir.join("vigil.toml.d");
    std::fs::create_dir(&d).expect("mkdir .d");
    for (name, body) in drop_ins {
        write(&d, name, body);
    }
    f
}

#[test]
fn check_reads_drop_ins_and_locates_a_key_a_drop_in_broke_in_the_drop_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = with_drop_ins(
        dir.path(),
        GOOD,
        &[
            (
                "10-ok.toml",
                "[pods.extra]\n[[pods.extra.containers]]\nname = \"x\"\ncommand = [\"/bin/x\"]\n",
            ),
            (
                "20-bad.toml",
                "[[pods.web.containers]]\nname = \"app\"\nstop_signal = \"SIGNOPE\"\n",
            ),
        ],
    );
    let out = vigil_check_args(&f, &["--no-host"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "{}:3:15: pods.web.containers[0].stop_signal: ",
            dir.path().join("vigil.toml.d/20-bad.toml").display()
        )),
        "{err}"
    );
    std::fs::remove_file(dir.path().join("vigil.toml.d/20-bad.toml")).expect("rm");
    let out = vigil_check_args(&f, &["--no-host"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{}: ok (3 pods, 4 containers)\n", f.display())
    );
}

/// As root, a drop-in is a config file: one owned by another user is refused (it could make
/// root run anything), and a host problem of a key a drop-in set is located in the drop-in.
#[test]
#[ignore = "needs root (the trust checks are a root vigil's)"]
fn check_as_root_refuses_a_drop_in_owned_by_another_user_and_locates_host_problems_in_drop_ins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let socket = format!(
        "# the socket\n[supervisor]\nsocket = \"{}\"\n",
        open.join("s").display()
    );
    let f = with_drop_ins(dir.path(), GOOD, &[("sock.toml", &socket)]);
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "{}:3:10: supervisor.socket: on this host: ",
            dir.path().join("vigil.toml.d/sock.toml").display()
        )),
        "{err}"
    );
    let foreign = dir.path().join("vigil.toml.d/user.toml");
    std::fs::write(&foreign, "[pods.web]\n").expect("write");
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).expect("chown");
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!("{}: config drop-in", foreign.display()))
            && err.contains("owned by a user other than root"),
        "{err}"
    );
}

/// `run` fails a container whose program is not there or whose user is unknown (a
/// `StartError`, then back-off): `check` refuses the file, naming the key, once per problem,
/// and the program is looked up in the container's own PATH (its `env`).
#[test]
fn check_refuses_a_missing_program_and_an_unknown_user_as_run_would() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let prog = bin.join("vigil-test-tool");
    std::fs::write(&prog, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let missing_env = dir.path().join("missing.env");
    let f = write(
        dir.path(),
        "start.toml",
        &format!(
            "[[pods.web.containers]]\n\
             name = \"gone\"\n\
             command = [\"{gone}\", \"-x\"]\n\
             [[pods.web.containers]]\n\
             name = \"nopath\"\n\
             command = [\"vigil-test-tool\"]\n\
             [[pods.web.containers]]\n\
             name = \"who\"\n\
             command = [\"/bin/sh\"]\n\
             user = \"vigil-no-such-user\"\n\
             env_file = \"{env}\"\n\
             [[pods.web.containers]]\n\
             name = \"own-path\"\n\
             command = [\"vigil-test-tool\"]\n\
             env = {{ PATH = \"/usr/bin:{bin}\" }}\n",
            gone = dir.path().join("no/such/prog").display(),
            env = missing_env.display(),
            bin = bin.display(),
        ),
    );
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let shown = f.display();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert_eq!(
        lines[0],
        format!(
            "{shown}:3:11: pods.web.containers[0].command: on this host: \"{}\" cannot be \
             executed: {} does not exist",
            dir.path().join("no/such/prog").display(),
            dir.path().join("no").display()
        )
    );
    assert!(
        lines[1].starts_with(&format!(
            "{shown}:6:11: pods.web.containers[1].command: on this host: \"vigil-test-tool\" is \
             not found in the container's PATH (/usr/local/sbin:"
        )),
        "{err}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "{shown}:10:8: pods.web.containers[2].user: on this host: unknown user \
             \"vigil-no-such-user\""
        )),
        "{err}"
    );
    assert!(
        lines[3].starts_with(&format!(
            "{shown}:11:12: pods.web.containers[2].env_file: on this host: env_file {}: ",
            missing_env.display()
        )),
        "{err}"
    );
    assert!(!err.contains("env_file: env_file"), "{err}");
    // For another machine, the file alone is valid.
    let out = vigil_check_args(&f, &["--no-host"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The program is judged as the container's user: a symlink to a program under a directory
/// that user may not enter is refused, naming that directory (not the symlink).
#[test]
fn check_names_the_directory_the_container_s_user_may_not_enter() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let private = dir.path().join("private");
    std::fs::create_dir(&private).expect("mkdir");
    let prog = private.join("tool");
    std::fs::write(&prog, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let link = dir.path().join("tool");
    std::os::unix::fs::symlink(&prog, &link).expect("symlink");
    let f = write(
        dir.path(),
        "user.toml",
        &format!(
            "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"{}\"]\nuser = \"65534\"\n",
            link.display()
        ),
    );
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "{}:3:11: pods.web.containers[0].command: on this host: \"{}\" cannot be executed: \
             uid 65534 may not enter {} (mode 0700, owner uid {}, group {})\n",
            f.display(),
            link.display(),
            private.display(),
            std::fs::metadata(&private).expect("stat").uid(),
            std::fs::metadata(&private).expect("stat").gid(),
        )
    );
    // Run as the owner of the directory, the same file passes.
    let mine = std::fs::read_to_string(&f)
        .expect("read")
        .replace("user = \"65534\"\n", "");
    std::fs::write(&f, mine).expect("write");
    let out = vigil_check_args(&f, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// With `allow_missing_controllers`, `run` refuses only the pods whose limits this host cannot
/// give and starts the others: `check` warns and passes. Without it, `check` fails and names
/// the ways out.
#[test]
fn check_passes_allow_missing_controllers_with_a_warning_as_run_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = "[pods.big]\n[[pods.big.containers]]\nname = \"c\"\ncommand = [\"/bin/sh\"]\n\
                [pods.big.containers.resources]\nmemory_max = \"20Mi\"\n\
                [pods.small]\n[[pods.small.containers]]\nname = \"c\"\ncommand = [\"/bin/sh\"]\n";
    let strict = write(dir.path(), "strict.toml", body);
    let out = vigil_check_args(&strict, &[]);
    if out.status.code() == Some(0) {
        println!("this host's cgroup2 has the memory controller: nothing is missing");
        return;
    }
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("memory controller not available in cgroup2")
            && err.contains(
                "remove the limits of pod big, or set [supervisor] allow_missing_controllers = \
                 true to start the other pods without it"
            ),
        "{err}"
    );
    if err.contains("bound to cgroup v1") {
        assert!(
            err.contains("boots with systemd.unified_cgroup_hierarchy=1"),
            "{err}"
        );
    }
    let allowed = write(
        dir.path(),
        "allowed.toml",
        &format!("[supervisor]\nallow_missing_controllers = true\n{body}"),
    );
    let out = vigil_check_args(&allowed, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("pods.big.containers[0].resources: warning: on this host: memory controller")
            && err.contains("pod big will be refused at start and the other pods started"),
        "{err}"
    );
    assert!(text(&out.stdout).contains(": ok (2 pods, 2 containers)"));
}

/// As root, the `.env` the config's variables come from is a config file too: one owned by
/// another user is refused, naming it; owned by root it is read.
#[test]
#[ignore = "needs root (the trust checks are a root vigil's)"]
fn check_as_root_refuses_a_dot_env_owned_by_another_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "vigil.toml",
        "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/${APP}\"]\n",
    );
    let env = write(dir.path(), ".env", "APP=sleep\n");
    let out = vigil_check_args(&f, &["--no-host"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::os::unix::fs::chown(&env, Some(65534), Some(65534)).expect("chown");
    let out = vigil_check_args(&f, &["--no-host"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!("{}: .env: variable file", env.display()))
            && err.contains("owned by a user other than root"),
        "{err}"
    );
}

fn vigil_config(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("config")
        .arg("-c")
        .arg(config)
        .args(args)
        .env_remove("VIGIL_CONFIG")
        .env_remove("VIGIL_TEST_NOT_SET")
        .output()
        .expect("run vigil config")
}

/// A base file, two drop-ins and a `.env`: `vigil config` prints the one config they make
/// (merged, variables expanded, relative paths resolved), `--origin` says which file set each
/// key, and `-o json` is the same tree.
#[test]
fn config_prints_the_merged_resolved_config_and_where_each_key_was_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), ".env", "DATA_DIR=/srv/data\nWORKERS=4\n");
    let f = with_drop_ins(
        dir.path(),
        "[supervisor]\nlog_max_files = 3\nshutdown_timeout_seconds = 20\n\
         [[pods.db.containers]]\nname = \"db\"\ncommand = [\"/bin/db\", \"${DATA_DIR}/db\"]\n\
         env = { A = \"1\", W = \"${WORKERS}\" }\n",
        &[
            (
                "10-a.toml",
                "[[pods.db.containers]]\nname = \"db\"\nenv = { A = \"one\" }\nworking_dir = \"run\"\n",
            ),
            (
                "20-b.toml",
                "[supervisor]\nlog_max_files = 5\n[pods.web]\n[[pods.web.containers]]\nname = \"app\"\n\
                 command = [\"/bin/app\", \"${VIGIL_TEST_NOT_SET:-8080}\", \"$$HOME\"]\n",
            ),
        ],
    );
    let out = vigil_config(&f, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed: toml::Table =
        toml::from_str(&text(&out.stdout)).expect("vigil config prints TOML");
    let expected: toml::Table = toml::from_str(&format!(
        "[supervisor]\nlog_max_files = 5\nshutdown_timeout_seconds = 20\n\
         [[pods.db.containers]]\nname = \"db\"\ncommand = [\"/bin/db\", \"/srv/data/db\"]\n\
         env = {{ A = \"one\", W = \"4\" }}\nworking_dir = \"{}\"\n\
         [[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/app\", \"8080\", \"$HOME\"]\n",
        dir.path().join("vigil.toml.d/run").display()
    ))
    .expect("expected");
    assert_eq!(printed, expected);

    let out = vigil_config(&f, &["-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json, serde_json::to_value(&expected).expect("to json"));

    let out = vigil_config(&f, &["--origin"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let origin = text(&out.stdout);
    let d = dir.path().join("vigil.toml.d");
    for line in [
        format!(
            "pods.db.containers[0].command = [\"/bin/db\", \"/srv/data/db\"]  # {}:6:11",
            f.display()
        ),
        format!(
            "pods.db.containers[0].env.A = \"one\"  # {}:3:13",
            d.join("10-a.toml").display()
        ),
        format!(
            "pods.db.containers[0].env.W = \"4\"  # {}:7:22",
            f.display()
        ),
        format!(
            "supervisor.log_max_files = 5  # {}:2:17",
            d.join("20-b.toml").display()
        ),
        format!(
            "supervisor.shutdown_timeout_seconds = 20  # {}:3:28",
            f.display()
        ),
    ] {
        assert!(
            origin.lines().any(|l| l == line),
            "no line {line:?} in:\n{origin}"
        );
    }
    assert_eq!(origin.lines().count(), 9, "{origin}");
}

#[test]
fn config_refuses_an_unset_variable_located_and_prints_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "vigil.toml",
        "[[pods.db.containers]]\nname = \"db\"\ncommand = [\"/bin/db\", \"-D\", \"${VIGIL_TEST_NOT_SET}\"]\n",
    );
    let out = vigil_config(&f, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr),
        format!(
            "{}:3:29: pods.db.containers[0].command[2]: ${{VIGIL_TEST_NOT_SET}} is not set\n",
            f.display()
        )
    );
}

/// `run_as_non_root = true` (Kubernetes `runAsNonRoot`): a container that would run as uid 0
/// is refused at start, as the kubelet refuses it; `check` says so at `user`.
#[test]
fn check_refuses_run_as_non_root_for_a_container_that_would_run_as_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "nonroot.toml",
        "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/sh\"]\nuser = \"0\"\n\
         run_as_non_root = true\n[[pods.web.containers]]\nname = \"ok\"\ncommand = [\"/bin/sh\"]\n\
         user = \"65534\"\nrun_as_non_root = true\n",
    );
    let out = vigil_check_args(&f, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "{}:4:8: pods.web.containers[0].user: on this host: run_as_non_root is set but the \
             container would run as root (uid 0, its user); set user to a non-root user or uid\n",
            f.display()
        )
    );
}
