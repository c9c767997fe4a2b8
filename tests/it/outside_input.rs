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
