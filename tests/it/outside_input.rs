//! Numbers, paths and text from outside that used to steer vigil (issue 43, points 9, 10 and
//! 12), tried as an outsider: a container user swapping a directory for a link, numbers valid
//! in Kubernetes but beyond any wait, manifests built to mislead or to cost time.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::common::{Vigil, require_root};

const T: Duration = Duration::from_secs(20);
const NOBODY: u32 = 65534;
/// Another user, whose private file the container must not get vigil to show.
const VICTIM: u32 = 60020;

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).expect("chown");
}

/// Issue 43.9: the container (uid 65534) owns a directory on its `termination_message_path`
/// and swaps it for a symlink into uid 60020's private directory before exiting. Root vigil
/// must not read the 0600 file there (and show it to every reader); the log says why.
#[test]
#[ignore = "needs root (files of two other uids)"]
fn a_directory_on_the_termination_message_path_swapped_for_a_link_is_not_followed() {
    require_root("the container runs as 65534, the victim's file belongs to 60020");
    let files = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(files.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let victim = files.path().join("victim");
    std::fs::create_dir(&victim).expect("mkdir");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let secret = victim.join("msg");
    std::fs::write(&secret, "the victim's secret").expect("write");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    chown(&secret, VICTIM);
    chown(&victim, VICTIM);
    let own = files.path().join("box");
    std::fs::create_dir_all(own.join("d")).expect("mkdir");
    chown(&own.join("d"), NOBODY);
    chown(&own, NOBODY);
    let path = own.join("d").join("msg");
    let v = Vigil::start(&format!(
        r#"
[pods.m]
restart_policy = "Never"
[[pods.m.containers]]
name = "c"
user = "{NOBODY}"
group = "{NOBODY}"
command = ["sh", "-c", "rmdir {d} && ln -s {victim} {d} && exit 3"]
termination_message_path = "{path}"
"#,
        d = own.join("d").display(),
        victim = victim.display(),
        path = path.display(),
    ));
    v.wait_for(T, "the container to end", |v| {
        v.container("m", "c")["state"]["terminated"].is_object()
    });
    assert!(
        std::fs::symlink_metadata(own.join("d"))
            .expect("the link")
            .file_type()
            .is_symlink(),
        "the container swapped its directory for a link"
    );
    let t = v.container("m", "c")["state"]["terminated"].clone();
    assert_eq!(t["exit_code"], 3, "{t}");
    assert_eq!(
        t["message"], "exited with code 3",
        "vigil's own explanation, not the victim's file"
    );
    v.wait_for(T, "the refusal in the log", |v| {
        v.log()
            .contains(&format!("termination message {} not read", path.display()))
    });
    assert!(
        v.log().contains("a symbolic link is on the path"),
        "{}",
        v.log()
    );
}

/// Runs `vigil ARGS`, killed after 20 s (a test failure, not a hang); its exit code and stderr.
fn run_bounded(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(crate::common::BIN)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn vigil");
    let deadline = std::time::Instant::now() + T;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vigil {args:?} still running after {T:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 43.12: a 200 KB manifest of nested flow mappings cost the YAML parser a minute of CPU
/// (its cost grows with the square of the depth). It is refused at once, located; a 200 KB
/// config of nested arrays or inline tables too.
#[test]
fn a_deeply_nested_200_kb_manifest_or_config_is_refused_quickly_and_located() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("deep.yaml");
    std::fs::write(&manifest, "{a: ".repeat(50_000)).expect("write");
    let (code, err) = run_bounded(&[
        "convert".as_ref(),
        "--from".as_ref(),
        "kubernetes".as_ref(),
        manifest.as_os_str(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("nested deeper than 64 levels at line 1 column 257"),
        "{err}"
    );
    for (name, text) in [
        ("arrays.toml", format!("a = {}", "[".repeat(200_000))),
        ("tables.toml", format!("a = {}", "{b = ".repeat(40_000))),
    ] {
        let config = dir.path().join(name);
        std::fs::write(&config, text).expect("write");
        let (code, err) = run_bounded(&["check".as_ref(), "-c".as_ref(), config.as_os_str()]);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains(&format!("{name}:1:")), "located: {err}");
    }
}

/// Issue 43.12: a manifest that says `runAsUser: 1000` and then `runAsUser: 0` is refused, at
/// the second key, by `convert` and by `run -f`, as kubectl's strict decoding refuses it.
#[test]
fn a_manifest_with_a_key_written_twice_is_refused_by_convert_at_the_second_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    \
         command: [\"sleep\", \"60\"]\n    securityContext:\n      runAsUser: 1000\n      \
         runAsUser: 0\n",
    )
    .expect("write");
    let (code, err) = run_bounded(&[
        "convert".as_ref(),
        "--from".as_ref(),
        "kubernetes".as_ref(),
        manifest.as_os_str(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("duplicate field \"runAsUser\" at line 11 column 7"),
        "{err}"
    );
}

/// Issue 43.12: a `metrics_address` others can reach (`0.0.0.0`, `[::]`, a LAN address) is
/// said by `check` (located, exit 0) and by `run`, before it listens: the endpoint has no
/// authentication. A loopback address is not.
#[test]
fn a_metrics_address_others_can_reach_is_warned_about_by_check_and_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (addr, exposed) in [
        ("0.0.0.0:9469", true),
        ("[::]:9469", true),
        ("192.0.2.1:9469", true),
        ("127.0.0.1:9469", false),
        ("[::1]:9469", false),
    ] {
        let config = dir.path().join("vigil.toml");
        std::fs::write(
            &config,
            format!("[supervisor]\nmetrics_address = \"{addr}\"\n"),
        )
        .expect("write");
        let (code, err) = run_bounded(&[
            "check".as_ref(),
            "--no-host".as_ref(),
            "-c".as_ref(),
            config.as_os_str(),
        ]);
        assert_eq!(code, Some(0), "{addr}: {err}");
        let said = err.contains(&format!(
            "vigil.toml:2:19: supervisor.metrics_address: warning: {addr} is not a loopback \
             address"
        ));
        assert_eq!(said, exposed, "{addr}: {err}");
    }
    // `run` says it before listening: 192.0.2.1 (TEST-NET-1) is no address of this host, so
    // the listen then fails and nothing is ever reachable.
    let socket = dir.path().join("vigil.sock");
    let config = crate::common::write_config(
        dir.path(),
        &socket,
        "metrics_address = \"192.0.2.1:9469\"\ncgroup_root = \"none\"",
        "",
    );
    let (code, err) = run_bounded(&["run".as_ref(), "-c".as_ref(), config.as_os_str()]);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("supervisor.metrics_address: 192.0.2.1:9469 is not a loopback address"),
        "{err}"
    );
}

/// Issue 36 (files a container can write or replace, read on the loop): a container leaves a
/// FIFO at its `termination_message_path` (an `open` for reading would wait for a writer), a
/// symlink to `/dev/zero` (a read would never end), or a 1 MB file. What must hold: vigil is
/// not held by any of them (every exit is recorded, the socket answers), the FIFO and the link
/// give no message from the file (vigil's own explanation instead), and the big file gives
/// its first 4 KiB (kubelet `MaxContainerTerminationMessageLength`).
#[test]
fn a_termination_message_that_is_a_fifo_a_link_to_dev_zero_or_huge_holds_nothing_and_is_capped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let v = Vigil::start(&format!(
        r#"
[pods.msg]
restart_policy = "Never"
[[pods.msg.containers]]
name = "fifo"
command = ["sh", "-c", "mkfifo {fifo}; exit 3"]
termination_message_path = "{fifo}"
[[pods.msg.containers]]
name = "zero"
command = ["sh", "-c", "ln -s /dev/zero {zero}; exit 4"]
termination_message_path = "{zero}"
[[pods.msg.containers]]
name = "huge"
command = ["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x > {huge}; exit 5"]
termination_message_path = "{huge}"
"#,
        fifo = path("fifo"),
        zero = path("zero"),
        huge = path("huge"),
    ));
    v.wait_for(T, "all three to end", |v| {
        ["fifo", "zero", "huge"]
            .iter()
            .all(|c| v.container("msg", c)["state"]["terminated"].is_object())
    });
    let message = |c: &str| {
        v.container("msg", c)["state"]["terminated"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(message("fifo"), "exited with code 3", "{}", v.log());
    assert_eq!(message("zero"), "exited with code 4", "{}", v.log());
    let huge = message("huge");
    assert_eq!(huge.len(), 4096, "{huge:.80}…");
    assert!(huge.bytes().all(|b| b == b'x'), "{huge:.80}…");
    assert_eq!(v.request(r#"{"cmd":"version"}"#)["ok"], true);
}
