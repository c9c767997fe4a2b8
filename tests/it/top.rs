//! `vigil top` in a real terminal: a detached tmux session of fixed size (its own tmux server,
//! on a socket in the test's temp dir), driven with `send-keys` and read with `capture-pane`.
//! What the keys do is checked through vigil itself (`vigil status -o json`), and that `q`
//! leaves the terminal as it found it (main screen, cooked mode).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

const T: Duration = Duration::from_secs(20);

struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend_from_slice(keys);
        let out = self.cmd(&args);
        assert!(out.status.success(), "tmux send-keys {keys:?}: {out:?}");
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    fn format(&self, f: &str) -> String {
        let out = self.cmd(&["display-message", "-p", "-t", "top", f]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until the pane shows what `cond` wants; panics with the screen otherwise.
    fn wait_screen(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + T;
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the pane shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Our own server only (-S): ends the session and whatever still runs in it.
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The line of the pane whose first word is `name` (a pod row) or, indented, a container's.
fn line_of(screen: &str, name: &str) -> Option<usize> {
    screen
        .lines()
        .position(|l| l.split_whitespace().next() == Some(name))
}

fn restart_count(v: &Vigil, pod: &str, container: &str) -> u64 {
    let out = v.cli(&["status", "-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pod = status["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pod)
        .unwrap()
        .clone();
    let c = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == container)
        .unwrap()
        .clone();
    c["restart_count"].as_u64().unwrap()
}

/// `vigil top` against `v` in a detached 120x30 tmux session; `as_user`: a command prefix (e.g.
/// `setpriv …` to run it as another uid).
fn start_top(v: &Vigil, dir: &Path, as_user: &str) -> Tmux {
    let tmux = Tmux {
        socket: dir.join("tmux.sock"),
    };
    let after = dir.join("after-top");
    // After top: its exit code and the terminal's mode, then stay so the pane can be read.
    let script = format!(
        "{as_user} '{}' top --socket '{}'; echo \"top exited $?\"; stty -a > '{}'; sleep 600",
        BIN,
        v.socket.display(),
        after.display()
    );
    let out = tmux.cmd(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "120",
        "-y",
        "30",
        "sh",
        "-c",
        &script,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");
    tmux
}

#[test]
#[ignore = "needs tmux"]
fn top_shows_the_pods_sorts_restarts_the_selection_and_q_restores_the_terminal() {
    require_program("tmux", "-V", "tmux");
    let v = Vigil::start(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sleep", "300"]

[pods.db]
[[pods.db.containers]]
name = "pg"
command = ["sleep", "301"]
"#,
    );
    v.wait_for(T, "both pods running", |v| {
        v.container("web", "app")["pid"].is_u64() && v.container("db", "pg")["pid"].is_u64()
    });
    let dir = tempfile::tempdir().unwrap();
    let tmux = start_top(&v, dir.path(), "");
    let screen = tmux.wait_screen("both pods and their containers", |s| {
        ["web", "app", "db", "pg"]
            .iter()
            .all(|n| line_of(s, n).is_some())
    });
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "1",
        "top uses the alternate screen"
    );
    assert!(screen.contains("vigil top"), "{screen}");
    assert!(
        screen.contains("RESTARTS") && screen.contains("CPU%"),
        "{screen}"
    );
    assert!(
        line_of(&screen, "db") < line_of(&screen, "web"),
        "sorted by name:\n{screen}"
    );
    assert!(
        screen.contains("r restart"),
        "root is an admin: actions offered\n{screen}"
    );

    // Select web/app (rows: db, pg, web, app) and restart it, confirming with y.
    tmux.send(&["j", "j", "j", "r"]);
    tmux.wait_screen("the confirmation prompt", |s| {
        s.contains("restart web/app? y/n")
    });
    assert_eq!(restart_count(&v, "web", "app"), 0, "nothing before y");
    tmux.send(&["y"]);
    v.wait_for(T, "web/app restarted", |v| {
        restart_count(v, "web", "app") == 1
    });
    assert_eq!(restart_count(&v, "db", "pg"), 0, "only the selection");
    tmux.wait_screen("the restart's answer on the status line", |s| {
        s.contains("restart: ")
    });

    // Sort by RESTARTS (s twice: STATUS, then RESTARTS, largest first): web comes first.
    tmux.send(&["s", "s"]);
    let screen = tmux.wait_screen("sorted by restarts", |s| {
        s.contains("sort RESTARTS") && line_of(s, "web") < line_of(s, "db")
    });
    let app_line = screen
        .lines()
        .find(|l| l.split_whitespace().next() == Some("app"))
        .unwrap();
    let cells: Vec<&str> = app_line.split_whitespace().collect();
    assert_eq!(cells.get(3), Some(&"1"), "RESTARTS of web/app: {app_line}");

    // A resize is drawn again at the new size, still showing the pods.
    let out = tmux.cmd(&["resize-window", "-t", "top", "-x", "70", "-y", "12"]);
    assert!(out.status.success(), "{out:?}");
    tmux.wait_screen("the table at 70 columns", |s| {
        line_of(s, "web").is_some() && s.lines().all(|l| l.chars().count() <= 70)
    });

    // q: exit 0, back on the main screen, the terminal out of raw mode.
    tmux.send(&["q"]);
    tmux.wait_screen("top's exit", |s| s.contains("top exited 0"));
    assert_eq!(tmux.format("#{alternate_on}"), "0", "main screen again");
    let after = dir.path().join("after-top");
    let deadline = Instant::now() + T;
    while !after.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let stty = std::fs::read_to_string(&after).unwrap();
    for mode in ["icanon", "echo", "isig"] {
        assert!(
            stty.split_whitespace().any(|w| w == mode),
            "{mode} restored: {stty}"
        );
    }
    drop(tmux);
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs tmux and root (runs top as another uid)"]
fn for_a_user_who_is_not_an_admin_the_actions_are_disabled_and_do_nothing() {
    require_program("tmux", "-V", "tmux");
    require_program("setpriv", "--version", "util-linux");
    require_root("to run top as uid 65534");
    let v = Vigil::start_shared(
        "",
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"sleep\", \"300\"]\n",
    );
    v.wait_for(T, "web/app running", |v| {
        v.container("web", "app")["pid"].is_u64()
    });
    let tmux_dir = tempfile::tempdir().unwrap();
    let tmux = start_top(
        &v,
        tmux_dir.path(),
        "setpriv --reuid 65534 --regid 65534 --clear-groups",
    );
    tmux.wait_screen("the pods, with the actions marked disabled", |s| {
        line_of(s, "app").is_some() && s.contains("r/x/u: not an admin")
    });
    // Select web/app and press r, then y: no prompt, the reason instead, nothing restarted.
    tmux.send(&["j", "r"]);
    tmux.wait_screen("why restart is disabled", |s| {
        s.contains("restart is disabled") && !s.contains("y/n")
    });
    tmux.send(&["y", "x", "y", "u", "y"]);
    tmux.send(&["q"]);
    tmux.wait_screen("top's exit", |s| s.contains("top exited 0"));
    assert_eq!(restart_count(&v, "web", "app"), 0);
    assert_eq!(state_reason(&v.container("web", "app")), "Running");
    assert!(
        !v.log().contains("refused"),
        "top sent no action for the server to refuse:\n{}",
        v.log()
    );
}
