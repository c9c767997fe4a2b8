//! Paths root trusts, attacked as an unprivileged user would (uid 65534 owns what the attacker
//! controls; the attacker's own steps run as that uid through `setpriv`): the config and its
//! directories at start and at every reload, the socket's ancestors, `log_dir`, and `env_file`
//! secrets. Each attack must be refused with a message naming the path, and change nothing.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{
    BIN, Vigil, require_program, require_root, sh_pod as pod, state_reason, supervisor_header,
    write_config,
};

const T: Duration = Duration::from_secs(15);
const NOBODY: u32 = 65534;

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn chown_nobody(p: &Path) {
    std::os::unix::fs::lchown(p, Some(NOBODY), Some(NOBODY)).expect("chown");
}

/// A temp dir others may traverse (0755), as /etc or /srv would be.
fn open_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    chmod(dir.path(), 0o755);
    dir
}

/// Runs `script` with `sh -c` as uid/gid 65534.
fn as_nobody(script: &str) {
    require_program("setpriv", "--version", "util-linux");
    let out = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .args(["sh", "-c", script])
        .output()
        .expect("setpriv");
    assert!(
        out.status.success(),
        "attacker step failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `vigil run -c config`, expected to refuse: its exit code and log.
fn run_refused(config: &Path) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["run", "-c"])
        .arg(config)
        .env("VIGIL_LOG", "info")
        .env_remove("VIGIL_SOCKET")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run vigil");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Waits until `web/c` runs.
fn wait_web_running(v: &Vigil) {
    v.wait_for(T, "web running", |v| {
        state_reason(&v.container("web", "c")) == "Running"
    });
}

/// A file only root may read (`root-only/file`, its directory mode 0700) under `dir`.
fn root_only_secret(dir: &Path) -> PathBuf {
    let secret_dir = dir.join("root-only");
    std::fs::create_dir(&secret_dir).unwrap();
    chmod(&secret_dir, 0o700);
    let secret = secret_dir.join("file");
    std::fs::write(&secret, "root only\n").unwrap();
    secret
}

/// After a refused change: vigil still runs `web` alone.
fn assert_nothing_changed(v: &Vigil) {
    assert_eq!(pod_names(v), vec!["web".to_string()], "nothing changed");
}

fn pod_names(v: &Vigil) -> Vec<String> {
    v.status()["pods"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root (attacks as another uid)"]
fn a_config_swapped_in_a_directory_a_user_took_over_is_refused_on_reload() {
    require_root("to chown to another uid and act as it");
    let dir = open_tempdir();
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    chmod(&conf, 0o755);
    let socket = dir.path().join("vigil.sock");
    let config = write_config(&conf, &socket, "", &pod("web", "exec sleep 60"));
    let header = supervisor_header(&socket);
    let v = Vigil::start_with(dir, socket.clone(), config.clone());
    wait_web_running(&v);
    // The directory is handed to a user; the user swaps the file for their own.
    chown_nobody(&conf);
    let evil = format!(
        "{header}{}",
        pod("evil", "id -u > /tmp/vigil-evil; exec sleep 60")
    );
    let evil_path = v.dir.path().join("evil.toml");
    std::fs::write(&evil_path, evil).unwrap();
    chmod(&evil_path, 0o644);
    as_nobody(&format!(
        "mv {c} {c}.old && cp {e} {c}",
        c = config.display(),
        e = evil_path.display()
    ));
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], false, "{r}");
    let msg = r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(msg.contains(&conf.display().to_string()), "{msg}");
    assert!(msg.contains("owner uid 65534"), "{msg}");
    // SIGHUP takes the same path.
    let pid = v.child.as_ref().unwrap().id() as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGHUP).unwrap();
    v.wait_for(T, "SIGHUP refusal logged", |v| {
        v.log().contains("SIGHUP: reload failed")
    });
    assert_nothing_changed(&v);
    assert_eq!(state_reason(&v.container("web", "c")), "Running");
}

#[test]
#[ignore = "needs root (the check applies to a root vigil)"]
fn a_config_made_world_writable_after_start_is_refused_on_reload() {
    require_root("the path checks are for a root vigil");
    let v = Vigil::start(&pod("web", "exec sleep 60"));
    wait_web_running(&v);
    std::fs::write(
        &v.config,
        format!(
            "{}{}{}",
            supervisor_header(&v.socket),
            pod("web", "exec sleep 60"),
            pod("injected", "exec sleep 60")
        ),
    )
    .unwrap();
    chmod(&v.config, 0o666);
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], false, "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(&v.config.display().to_string()), "{msg}");
    assert!(
        msg.contains("mode 0666") && msg.contains("writable by others"),
        "{msg}"
    );
    assert_nothing_changed(&v);
    // Fixed, the same file is accepted.
    chmod(&v.config, 0o644);
    let r = v.request(r#"{"id":2,"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    v.wait_for(T, "injected pod now running", |v| {
        state_reason(&v.container("injected", "c")) == "Running"
    });
}

#[test]
#[ignore = "needs root (the check applies to a root vigil)"]
fn a_socket_directory_under_a_user_owned_ancestor_is_refused_at_start() {
    require_root("to chown to another uid");
    let dir = open_tempdir();
    let g = dir.path().join("g");
    let run = g.join("run");
    std::fs::create_dir_all(&run).unwrap();
    chmod(&g, 0o755);
    chmod(&run, 0o755);
    chown_nobody(&g);
    let socket = run.join("vigil.sock");
    let config = write_config(dir.path(), &socket, "", &pod("web", "exec sleep 60"));
    let (code, log) = run_refused(&config);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("socket directory"), "{log}");
    assert!(log.contains(&format!("directory {}", g.display())), "{log}");
    assert!(log.contains("owner uid 65534"), "{log}");
    assert!(!socket.exists(), "no socket was created");
}

#[test]
#[ignore = "needs root (the check applies to a root vigil)"]
fn a_log_dir_that_is_a_symlink_to_a_root_only_file_is_refused_at_start() {
    require_root("the path checks are for a root vigil");
    let dir = open_tempdir();
    let secret = root_only_secret(dir.path());
    let logs = dir.path().join("logs");
    std::os::unix::fs::symlink(&secret, &logs).unwrap();
    let config = write_config(
        dir.path(),
        &dir.path().join("vigil.sock"),
        &format!("log_dir = \"{}\"", logs.display()),
        &pod("web", "echo hi; exec sleep 60"),
    );
    let (code, log) = run_refused(&config);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("log_dir") && log.contains("not the expected kind"),
        "{log}"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
}

/// An env file with a secret; returns its path.
fn env_file(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("web.env");
    std::fs::write(&p, text).unwrap();
    chmod(&p, 0o600);
    p
}

fn env_file_pod(path: &Path, cmd: &str) -> String {
    format!(
        "[pods.web]\nbackoff = {{ initial_seconds = 0.1, max_seconds = 0.2 }}\n[[pods.web.containers]]\nname = \"c\"\nenv_file = \"{}\"\nenv = {{ MODE = \"prod\" }}\ncommand = [\"sh\", \"-c\", \"{cmd}\"]\n",
        path.display()
    )
}

#[test]
fn env_file_values_reach_the_container_but_never_status_or_describe() {
    let dir = open_tempdir();
    let envf = env_file(
        dir.path(),
        "# database\nDB_PASSWORD=hunter2-very-secret\n\nMODE=from-file\n",
    );
    let v = Vigil::start_in(
        dir,
        "",
        &env_file_pod(
            &envf,
            "echo pw-length=$${#DB_PASSWORD} mode=$MODE; exec sleep 60",
        ),
    );
    wait_web_running(&v);
    v.wait_for(T, "output", |v| {
        String::from_utf8_lossy(&v.cli(&["logs", "web"]).stdout).contains("pw-length=19")
    });
    let out = String::from_utf8_lossy(&v.cli(&["logs", "web"]).stdout).into_owned();
    assert!(
        out.contains("mode=prod"),
        "config env wins over env_file: {out}"
    );
    for args in [
        vec!["status", "-o", "json"],
        vec!["status"],
        vec!["describe", "web"],
        vec!["describe", "web", "-o", "json"],
    ] {
        let o = v.cli(&args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            !text.contains("hunter2"),
            "{args:?} shows the secret: {text}"
        );
    }
    let d = String::from_utf8_lossy(&v.cli(&["describe", "web", "-o", "json"]).stdout).into_owned();
    assert!(d.contains("web.env"), "describe names the file: {d}");
    assert!(!v.log().contains("hunter2"), "vigil's log shows the secret");
}

#[test]
fn a_bad_env_file_line_fails_the_start_naming_file_and_line_not_the_value() {
    let dir = open_tempdir();
    let envf = env_file(dir.path(), "A=1\nhunter2-secret-without-equals\n");
    let v = Vigil::start_in(dir, "", &env_file_pod(&envf, "exec sleep 60"));
    let want = format!("{}:2:", envf.display());
    v.wait_for(T, "a start error naming file:line", |v| {
        v.container("web", "c").to_string().contains(&want)
            || v.request(r#"{"cmd":"events"}"#).to_string().contains(&want)
    });
    let all = format!(
        "{}{}{}",
        v.status(),
        v.request(r#"{"cmd":"events"}"#),
        v.log()
    );
    assert!(!all.contains("hunter2"), "{all}");
}

#[test]
#[ignore = "needs root (the check applies to a root vigil)"]
fn an_env_file_others_may_write_is_refused_at_spawn() {
    require_root("the path checks are for a root vigil");
    let dir = open_tempdir();
    let envf = env_file(dir.path(), "A=1\n");
    chown_nobody(&envf);
    let v = Vigil::start_in(dir, "", &env_file_pod(&envf, "exec sleep 60"));
    v.wait_for(T, "a start error naming the env file's owner", |v| {
        let c = v.container("web", "c").to_string() + &v.request(r#"{"cmd":"events"}"#).to_string();
        c.contains("env_file") && c.contains("owner uid 65534")
    });
    assert_ne!(state_reason(&v.container("web", "c")), "Running");
}

#[test]
#[ignore = "needs root (attacks as another uid)"]
fn a_users_symlink_in_a_sticky_log_dir_is_refused_and_the_target_untouched() {
    require_root("to act as another uid");
    let dir = open_tempdir();
    let secret = root_only_secret(dir.path());
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    chmod(&logs, 0o1777);
    // The user gets there first: their own `web` directory with a symlink as the log file.
    as_nobody(&format!(
        "mkdir -m 0777 {l}/web && ln -s {s} {l}/web/c.log",
        l = logs.display(),
        s = secret.display()
    ));
    let log_dir = format!("log_dir = \"{}\"", logs.display());
    let v = Vigil::start_in(dir, &log_dir, &pod("web", "echo injected; exec sleep 60"));
    wait_web_running(&v);
    v.wait_for(T, "the refusal logged", |v| {
        v.log().contains("under log_dir: it is owned by uid 65534")
    });
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
    // The output is still captured in memory.
    v.wait_for(T, "output in memory", |v| {
        String::from_utf8_lossy(&v.cli(&["logs", "web"]).stdout).contains("injected")
    });
}

#[test]
fn forwarding_into_a_regular_file_drops_nothing() {
    let dir = open_tempdir();
    let lines = 2_000_000;
    // vigil's stdout is the test's log file: a regular file.
    let v = Vigil::start_in(
        dir,
        "log_forward = true",
        &pod(
            "web",
            &format!("yes | head -n {lines}; echo done; exec sleep 60"),
        ),
    );
    v.wait_for(Duration::from_secs(60), "all output forwarded", |v| {
        v.log().contains("web/c | done")
    });
    let log = v.log();
    assert!(
        !log.contains("dropped]"),
        "nothing dropped into a regular file"
    );
    let forwarded = log.lines().filter(|l| *l == "web/c | y").count();
    assert_eq!(forwarded, lines);
}

#[test]
#[ignore = "needs root (attacks as another uid)"]
fn a_users_symlink_at_the_socket_path_in_a_sticky_directory_is_refused_and_its_target_untouched() {
    require_root("to act as another uid");
    let dir = open_tempdir();
    let secret = dir.path().join("root-only");
    std::fs::write(&secret, "root only\n").unwrap();
    chmod(&secret, 0o600);
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    chmod(&tmp, 0o1777);
    let socket = tmp.join("vigil.sock");
    // The user plants the socket's name first, pointing at a root-only file vigil would chmod.
    as_nobody(&format!("ln -s {} {}", secret.display(), socket.display()));
    let config = write_config(dir.path(), &socket, "", &pod("web", "exec sleep 60"));
    let (code, log) = run_refused(&config);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("socket directory") && log.contains(&tmp.display().to_string()),
        "{log}"
    );
    let meta = std::fs::metadata(&secret).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600, "mode untouched");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
    assert!(
        std::fs::symlink_metadata(&socket)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
#[ignore = "needs root (the check applies to a root vigil)"]
fn a_reload_moving_log_dir_into_a_users_directory_is_refused_and_changes_nothing() {
    require_root("the path checks are for a root vigil");
    let v = Vigil::start(&pod("web", "exec sleep 60"));
    wait_web_running(&v);
    let theirs = v.dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chown_nobody(&theirs);
    let header = supervisor_header(&v.socket).replace(
        "[supervisor]\n",
        &format!("[supervisor]\nlog_dir = \"{}/logs\"\n", theirs.display()),
    );
    std::fs::write(
        &v.config,
        format!(
            "{header}{}{}",
            pod("web", "exec sleep 60"),
            pod("added", "exec sleep 60")
        ),
    )
    .unwrap();
    let r = v.request(r#"{"id":1,"cmd":"reload"}"#);
    assert_eq!(r["ok"], false, "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("log_dir") && msg.contains("owner uid 65534"),
        "{msg}"
    );
    assert_nothing_changed(&v);
    assert!(!theirs.join("logs").exists(), "nothing created there");
}
