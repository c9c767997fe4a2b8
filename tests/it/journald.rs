//! The real binary forwarding to a journal through the native protocol (docs/interface.md §5):
//! vigil runs in a private mount namespace where `/run/systemd/journal/socket` is a bind mount
//! of a datagram socket this test reads, so the path vigil connects to is the real one.
//! `log_forward_to = "auto"` decides by `$JOURNAL_STREAM`: naming vigil's stderr, the journal;
//! naming another file, stdout as before.

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

const T: Duration = Duration::from_secs(15);

type Entry = BTreeMap<String, String>;

/// One native-protocol datagram as its fields (the binary-safe form included).
fn parse(mut data: &[u8]) -> Entry {
    let mut fields = Entry::new();
    while let Some(nl) = data.iter().position(|b| *b == b'\n') {
        let line = &data[..nl];
        if let Some(eq) = line.iter().position(|b| *b == b'=') {
            fields.insert(
                String::from_utf8_lossy(&line[..eq]).into_owned(),
                String::from_utf8_lossy(&line[eq + 1..]).into_owned(),
            );
            data = &data[nl + 1..];
        } else {
            let rest = &data[nl + 1..];
            let len = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            fields.insert(
                String::from_utf8_lossy(line).into_owned(),
                String::from_utf8_lossy(&rest[8..8 + len]).into_owned(),
            );
            data = &rest[9 + len..];
        }
    }
    fields
}

struct Journal {
    socket: UnixDatagram,
    seen: Vec<Entry>,
}

impl Journal {
    /// Reads until an entry satisfies `want` (returning it) or the time is up (panicking with
    /// everything seen and vigil's log).
    fn wait(&mut self, v: &Vigil, what: &str, want: impl Fn(&Entry) -> bool) -> Entry {
        if let Some(e) = self.seen.iter().find(|e| want(e)) {
            return e.clone();
        }
        let deadline = Instant::now() + T;
        let mut buf = vec![0u8; 64 * 1024];
        while Instant::now() < deadline {
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let e = parse(&buf[..n]);
                    self.seen.push(e.clone());
                    if want(&e) {
                        return e;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("reading the fake journal: {e}"),
            }
        }
        panic!(
            "no journal entry {what}; seen: {:#?}\nvigil log:\n{}",
            self.seen,
            v.log()
        );
    }
}

fn field<'a>(e: &'a Entry, name: &str) -> &'a str {
    e.get(name).map(String::as_str).unwrap_or("")
}

/// Starts vigil (config with `pods`, `log_forward_to = "auto"`) in a mount namespace whose
/// `/run/systemd/journal/socket` is the test's socket; `$JOURNAL_STREAM` names vigil's stderr
/// when `stream_is_stderr`, else the config file.
fn start(pods: &str, stream_is_stderr: bool) -> (Vigil, Journal) {
    require_root("to mount a fake journal socket over /run in a private mount namespace");
    require_program("unshare", "--version", "util-linux");
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let journal_path = dir.path().join("journal.socket");
    let journal = UnixDatagram::bind(&journal_path).unwrap();
    journal
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    std::fs::write(
        &config,
        format!(
            "[supervisor]\nsocket = \"{}\"\ncgroup_root = \"none\"\nlog_forward_to = \"auto\"\nshutdown_timeout_seconds = 10\n\n{pods}",
            socket.display()
        ),
    )
    .unwrap();
    let stream = if stream_is_stderr {
        "$(stat -L -c %d:%i /proc/self/fd/2)".to_string()
    } else {
        format!("$(stat -L -c %d:%i '{}')", config.display())
    };
    // unshare(1) makes the mount namespace private and execs sh, which execs vigil: the child's
    // pid is vigil's. The tmpfs over /run exists only in that namespace.
    let script = format!(
        "set -e; mount -t tmpfs tmpfs /run; mkdir -p /run/systemd/journal; \
         : > /run/systemd/journal/socket; mount --bind '{}' /run/systemd/journal/socket; \
         export JOURNAL_STREAM={stream}; exec '{BIN}' run -c '{}'",
        journal_path.display(),
        config.display()
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", &script])
        .env("VIGIL_LOG", "info")
        .stdin(Stdio::null());
    let v = Vigil::launch(cmd, dir, socket, config);
    (
        v,
        Journal {
            socket: journal,
            seen: Vec::new(),
        },
    )
}

const PODS: &str = r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sh", "-c", "echo out-line; echo err-line >&2; exec sleep 300"]
"#;

#[test]
#[ignore = "needs root"]
fn under_systemd_output_and_events_reach_the_journal_with_vigils_fields_and_not_stdout() {
    let (v, mut j) = start(PODS, true);
    let err = j.wait(&v, "for web/app's stderr line", |e| {
        field(e, "MESSAGE") == "err-line"
    });
    assert_eq!(field(&err, "PRIORITY"), "3", "stderr is err: {err:?}");
    assert_eq!(field(&err, "VIGIL_POD"), "web");
    assert_eq!(field(&err, "VIGIL_CONTAINER"), "app");
    assert_eq!(field(&err, "VIGIL_STREAM"), "stderr");
    assert_eq!(field(&err, "SYSLOG_IDENTIFIER"), "web/app");
    let run: u64 = field(&err, "VIGIL_RUN")
        .parse()
        .expect("VIGIL_RUN is a number");
    let out = j.wait(&v, "for web/app's stdout line", |e| {
        field(e, "MESSAGE") == "out-line"
    });
    assert_eq!(field(&out, "PRIORITY"), "6");
    assert_eq!(field(&out, "VIGIL_STREAM"), "stdout");
    assert_eq!(field(&out, "VIGIL_RUN"), run.to_string());
    let started = j.wait(&v, "for the Started event", |e| {
        field(e, "VIGIL_REASON") == "Started" && field(e, "VIGIL_CONTAINER") == "app"
    });
    assert_eq!(field(&started, "SYSLOG_IDENTIFIER"), "vigil");
    assert_eq!(field(&started, "PRIORITY"), "6");
    assert!(
        field(&started, "MESSAGE").starts_with("web/app: Started: "),
        "{started:?}"
    );

    // A restart is a new run: its lines carry the next generation; the kill is a Normal event.
    let reply = v.request(r#"{"cmd":"restart","pod":"web","container":"app"}"#);
    assert_eq!(reply["ok"], true, "{reply}");
    let again = j.wait(&v, "for the restarted run's stdout line", |e| {
        field(e, "MESSAGE") == "out-line" && field(e, "VIGIL_RUN") != run.to_string()
    });
    assert_eq!(field(&again, "VIGIL_RUN"), (run + 1).to_string());

    // Nothing of it went to stdout, and the events are not repeated on stderr.
    let log = v.log();
    assert!(!log.contains("web/app | "), "no stdout forwarding:\n{log}");
    assert!(
        !log.contains("web/app: Started:"),
        "events go to the journal instead of stderr:\n{log}"
    );
    assert_eq!(v.shutdown(), 0);
}

#[test]
#[ignore = "needs root"]
fn a_journal_stream_that_is_not_vigils_own_keeps_stdout_forwarding() {
    let (v, j) = start(PODS, false);
    v.wait_for(T, "web/app's lines on stdout", |v| {
        let log = v.log();
        log.contains("web/app | out-line") && log.contains("web/app | err-line")
    });
    // The Started event is logged to stderr as before, and nothing reached the journal.
    v.wait_for(T, "the Started line on stderr", |v| {
        v.log().contains("web/app: Started:")
    });
    let mut buf = [0u8; 4096];
    let got = j.socket.recv(&mut buf);
    assert!(
        got.is_err(),
        "nothing sent to the journal: {:?}",
        got.map(|n| parse(&buf[..n]))
    );
    assert_eq!(v.shutdown(), 0);
}
