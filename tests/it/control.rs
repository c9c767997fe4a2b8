//! The control socket and CLI against a real supervisor.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::common::{BIN, Vigil, state_reason, supervisor_header};

const T: Duration = Duration::from_secs(15);

const ONE_SLEEPER: &str = r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sh", "-c", "echo hello from app; echo oops >&2; exec sleep 60"]
"#;

#[test]
fn several_requests_on_one_connection_are_answered_in_order() {
    let v = Vigil::start(ONE_SLEEPER);
    let mut s = UnixStream::connect(&v.socket).expect("connect");
    s.write_all(b"{\"id\":1,\"cmd\":\"version\"}\n{\"id\":2,\"cmd\":\"status\"}\n{\"id\":\"three\",\"cmd\":\"bogus\"}\n")
        .expect("write");
    let mut r = BufReader::new(s);
    let mut replies = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        r.read_line(&mut line).expect("read");
        replies.push(serde_json::from_str::<serde_json::Value>(&line).expect("json"));
    }
    assert_eq!(replies[0]["id"], 1);
    assert_eq!(replies[1]["id"], 2);
    assert_eq!(replies[1]["ok"], true);
    assert_eq!(replies[2]["id"], "three");
    assert_eq!(replies[2]["ok"], false);
    assert_eq!(replies[2]["error"]["kind"], "unknown_command");
}

#[test]
fn malformed_json_gets_an_error_and_the_connection_stays_usable() {
    let v = Vigil::start(ONE_SLEEPER);
    let mut s = UnixStream::connect(&v.socket).expect("connect");
    s.write_all(b"{not json\n{\"id\":5,\"cmd\":\"status\",\"pod\":\"nope\"}\n{\"id\":6,\"cmd\":\"version\"}\n")
        .expect("write");
    let mut r = BufReader::new(s);
    let mut lines = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        r.read_line(&mut line).expect("read");
        lines.push(serde_json::from_str::<serde_json::Value>(&line).expect("json"));
    }
    assert_eq!(lines[0]["ok"], false);
    assert_eq!(lines[0]["error"]["kind"], "bad_request");
    assert_eq!(lines[1]["error"]["kind"], "not_found");
    assert!(
        lines[1]["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("nope")
    );
    assert_eq!(lines[2]["ok"], true);
}

#[test]
fn oversized_line_is_refused_and_closed_while_others_are_served() {
    let v = Vigil::start(ONE_SLEEPER);
    let mut big = UnixStream::connect(&v.socket).expect("connect");
    let garbage = vec![b'x'; 1024 * 1024];
    // The server may close before we finish writing: ignore write errors.
    let _ = big.write_all(&garbage);
    big.set_read_timeout(Some(T)).expect("timeout");
    let mut reply = String::new();
    let _ = BufReader::new(&big).read_line(&mut reply);
    let v2: serde_json::Value = serde_json::from_str(&reply).expect("an error reply line");
    assert_eq!(v2["error"]["kind"], "too_large");
    assert_eq!(v.request(r#"{"cmd":"version"}"#)["ok"], true);
}

#[test]
fn a_client_that_never_reads_does_not_block_others() {
    let v = Vigil::start(ONE_SLEEPER);
    let mut lazy = UnixStream::connect(&v.socket).expect("connect");
    // Ask for lots of output and never read it.
    let many = "{\"cmd\":\"status\"}\n".repeat(20_000);
    lazy.set_nonblocking(true).expect("nonblocking");
    let _ = lazy.write_all(many.as_bytes());
    let start = Instant::now();
    for _ in 0..20 {
        assert_eq!(v.request(r#"{"cmd":"version"}"#)["ok"], true);
    }
    assert!(start.elapsed() < T);
    drop(lazy);
}

#[test]
fn two_hundred_concurrent_connections_are_all_answered() {
    let v = Vigil::start(ONE_SLEEPER);
    let mut conns: Vec<UnixStream> = (0..200)
        .map(|_| UnixStream::connect(&v.socket).expect("connect"))
        .collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(format!("{{\"id\":{i},\"cmd\":\"version\"}}\n").as_bytes())
            .expect("write");
    }
    for (i, c) in conns.into_iter().enumerate() {
        c.set_read_timeout(Some(T)).expect("timeout");
        let mut line = String::new();
        BufReader::new(c).read_line(&mut line).expect("read");
        let r: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(r["id"], i);
    }
}

#[test]
#[ignore = "needs root (acts as another uid)"]
fn non_admin_peer_may_read_but_not_stop() {
    crate::common::require_root("to act as another uid");
    crate::common::require_program("setpriv", "--version", "util-linux");
    let v = Vigil::start_shared("", ONE_SLEEPER);
    let socket = v.socket.clone();
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                BIN,
            ])
            .args(args)
            .arg("--socket")
            .arg(&socket)
            .output()
            .expect("setpriv")
    };
    let st = as_nobody(&["status"]);
    assert_eq!(
        st.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let stop = as_nobody(&["stop", "web"]);
    assert_eq!(stop.status.code(), Some(1));
    let err = String::from_utf8_lossy(&stop.stderr);
    assert!(
        err.contains("uid 65534") || err.contains("permission"),
        "{err}"
    );
    assert_eq!(state_reason(&v.container("web", "app")), "Running");
    assert!(
        v.log().contains("refused stop from pid"),
        "denial is logged"
    );
}

#[test]
fn cli_status_table_and_json_and_exit_codes() {
    let v = Vigil::start(ONE_SLEEPER);
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "app")) == "Running"
    });
    let out = v.cli(&["status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.contains("web") && text.contains("1/1") && text.contains("Running"),
        "{text}"
    );
    let out = v.cli(&["status", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["pods"][0]["name"], "web");
    let out = v.cli(&["describe", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    let out = std::process::Command::new(BIN)
        .args(["status", "--socket", "/nonexistent/vigil.sock"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let out = v.cli(&["describe", "web"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Conditions") && text.contains("Events"),
        "{text}"
    );
}

#[test]
fn logs_tail_previous_and_follow() {
    let v = Vigil::start(
        r#"
[pods.talk]
backoff = { initial_seconds = 0.1 }
[[pods.talk.containers]]
name = "c"
command = ["sh", "-c", "echo one; echo two; echo three; sleep 0.3; exit 1"]
"#,
    );
    v.wait_for(T, "a restart", |v| {
        v.container("talk", "c")["restart_count"]
            .as_u64()
            .unwrap_or(0)
            >= 1
    });
    let out = v.cli(&["logs", "talk/c", "--tail", "2", "--previous"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "two\nthree\n");
    // Follow: the next run's lines arrive on the stream.
    let mut s = UnixStream::connect(&v.socket).expect("connect");
    s.write_all(b"{\"id\":9,\"cmd\":\"logs\",\"pod\":\"talk\",\"container\":\"c\",\"follow\":true,\"tail\":0}\n")
        .expect("write");
    s.set_read_timeout(Some(T)).expect("timeout");
    let mut got = String::new();
    let deadline = Instant::now() + T;
    let mut buf = [0u8; 4096];
    while !got.contains("three") && Instant::now() < deadline {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "stream closed");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(got.contains("one") && got.contains("three"), "{got}");
}

#[test]
fn events_follow_streams_new_events() {
    let v = Vigil::start(ONE_SLEEPER);
    let mut s = UnixStream::connect(&v.socket).expect("connect");
    s.write_all(b"{\"id\":4,\"cmd\":\"events\",\"follow\":true}\n")
        .expect("write");
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "app")) == "Running"
    });
    assert_eq!(v.request(r#"{"cmd":"restart","pod":"web"}"#)["ok"], true);
    s.set_read_timeout(Some(T)).expect("timeout");
    let mut r = BufReader::new(s);
    let deadline = Instant::now() + T;
    let mut reasons = Vec::new();
    while Instant::now() < deadline && !reasons.iter().any(|r| r == "Killing") {
        let mut line = String::new();
        if r.read_line(&mut line).expect("read") == 0 {
            break;
        }
        let e: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(e["id"], 4);
        reasons.push(e["event"]["reason"].as_str().unwrap_or("").to_string());
    }
    assert!(reasons.iter().any(|r| r == "Started"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "Killing"), "{reasons:?}");
}

#[test]
fn a_container_flooding_output_does_not_starve_status_queries() {
    let v = Vigil::start(
        r#"
[pods.flood]
restart_policy = "Never"
[[pods.flood.containers]]
name = "c"
command = ["sh", "-c", "yes vigil-flood-line | head -c 100000000; echo flood-done; exec sleep 60"]
"#,
    );
    v.wait_for(T, "flooding", |v| {
        state_reason(&v.container("flood", "c")) == "Running"
    });
    // Status keeps being answered while 100 MB go through the loop.
    for _ in 0..50 {
        assert_eq!(v.request(r#"{"cmd":"status"}"#)["ok"], true);
    }
    v.wait_for(Duration::from_secs(60), "all output consumed", |v| {
        let r = v.request(r#"{"cmd":"logs","pod":"flood","tail":1}"#);
        r["result"]["log"]
            .as_str()
            .is_some_and(|l| l.contains("flood-done"))
    });
    // The ring holds the newest output only (bounded memory).
    let r = v.request(r#"{"cmd":"logs","pod":"flood"}"#);
    let len = r["result"]["log"].as_str().map(str::len).unwrap_or(0);
    assert!(
        len <= 1024 * 1024 + 64,
        "ring bounded by log_buffer_bytes: {len}"
    );
}

/// A container writing faster than the loop reads finds its output pipe grown from a default
/// pipe's 64 KiB to 256 KiB (it asks with `F_GETPIPE_SZ` after its flood); a quiet one keeps
/// the default; and every byte of the flood, in order, still reaches the ring. The flood's
/// first `write(2)` of 64 KiB fills the empty pipe whole and wakes the reader once, at its end
/// (fs/pipe.c, `pipe_write`), so the loop's first read finds the pipe full however fast it is.
#[test]
fn a_pipe_found_full_is_grown_to_256_kib_and_a_quiet_containers_is_not() {
    let flood = "import fcntl, os, sys\n\
                 for b in range(16):\n    os.write(1, b''.join(b'%07d' % i + b'.' * 4088 + b'\\n' for i in range(16 * b, 16 * b + 16)))\n\
                 sys.stdout.write('pipe %d\\n' % fcntl.fcntl(1, fcntl.F_GETPIPE_SZ)); sys.stdout.flush()\n\
                 os.execvp('sleep', ['sleep', '60'])";
    let quiet = "import fcntl, os, sys, time\n\
                 time.sleep(0.5)\n\
                 sys.stdout.write('pipe %d\\n' % fcntl.fcntl(1, fcntl.F_GETPIPE_SZ)); sys.stdout.flush()\n\
                 os.execvp('sleep', ['sleep', '60'])";
    let pod = |name: &str, script: &str| {
        format!(
            "[pods.{name}]\nrestart_policy = \"Never\"\n\
             [[pods.{name}.containers]]\nname = \"c\"\ncommand = [\"python3\", \"-c\", {script:?}]\n"
        )
    };
    let v = Vigil::start_in(
        tempfile::tempdir().expect("tempdir"),
        "log_buffer_bytes = \"4Mi\"\n",
        &format!("{}{}", pod("flood", flood), pod("quiet", quiet)),
    );
    let last_line = |v: &Vigil, pod: &str| -> Option<String> {
        let r = v.request(&format!(r#"{{"cmd":"logs","pod":"{pod}","tail":1}}"#));
        r["result"]["log"]
            .as_str()
            .map(|l| l.trim_end().to_string())
    };
    v.wait_for(T, "both containers told their pipe size", |v| {
        last_line(v, "flood").is_some_and(|l| l.starts_with("pipe "))
            && last_line(v, "quiet").is_some_and(|l| l.starts_with("pipe "))
    });
    assert_eq!(last_line(&v, "flood").as_deref(), Some("pipe 262144"));
    assert_eq!(last_line(&v, "quiet").as_deref(), Some("pipe 65536"));
    let r = v.request(r#"{"cmd":"logs","pod":"flood"}"#);
    let log = r["result"]["log"].as_str().unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 257, "256 lines of 4 KiB and the size");
    for (i, line) in lines[..256].iter().enumerate() {
        assert_eq!(&line[..8], format!("{i:07}.").as_str(), "line {i} in order");
        assert_eq!(line.len(), 4095, "line {i} whole (4 KiB with its newline)");
    }
}

#[test]
fn bad_usage_exits_one() {
    for args in [
        &["bogus"][..],
        &["status", "-o", "yaml"],
        &["logs"],
        &["logs", "p", "--tail", "x"],
    ] {
        let out = std::process::Command::new(BIN)
            .args(args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    let out = std::process::Command::new(BIN)
        .arg("--help")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_full_ring_comes_back_whole_as_one_streamed_logs_reply() {
    // 1 MiB of NULs is 6 MiB of JSON: streamed in pieces, it still arrives as one valid line.
    let v = Vigil::start(
        r#"
[pods.noisy]
[[pods.noisy.containers]]
name = "c"
command = ["sh", "-c", "head -c 1048576 /dev/zero; printf 'é'; exec sleep 60"]
"#,
    );
    v.wait_for(T, "the ring to fill", |v| {
        v.request(r#"{"cmd":"logs","pod":"noisy","tail":1}"#)["result"]["log"]
            .as_str()
            .is_some_and(|s| s.ends_with('é'))
    });
    let reply = v.request(r#"{"id":123456789012345678901234567890,"cmd":"logs","pod":"noisy"}"#);
    let log = reply["result"]["log"].as_str().expect("log");
    // The ring holds the last 1 MiB: 1,048,574 NULs and the two bytes of é.
    assert_eq!(
        log.chars().count(),
        1024 * 1024 - 1,
        "the whole ring, é last"
    );
    assert!(log.ends_with('é'));
    assert_eq!(reply["result"]["skipped_bytes"], 0);
    // The id comes back exactly as sent.
    let mut s = UnixStream::connect(&v.socket).expect("connect");
    s.write_all(b"{\"id\":123456789012345678901234567890,\"cmd\":\"version\"}\n")
        .expect("write");
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).expect("read");
    assert!(
        line.starts_with("{\"id\":123456789012345678901234567890,"),
        "{line}"
    );
}

#[test]
fn logs_follow_of_a_fast_writer_skips_with_a_notice_and_stays_whole_lines() {
    // `yes` writes far faster than a slow follower reads: the follower gets in-band notices
    // of what it missed and every line it gets is valid JSON (issue 14, item 1).
    let v = Vigil::start(
        r#"
[pods.fast]
[[pods.fast.containers]]
name = "yes"
command = ["yes"]
"#,
    );
    let s = UnixStream::connect(&v.socket).expect("connect");
    (&s).write_all(b"{\"id\":1,\"cmd\":\"logs\",\"pod\":\"fast\",\"follow\":true}\n")
        .expect("write");
    s.set_read_timeout(Some(T)).expect("timeout");
    let mut reader = BufReader::new(&s);
    let (mut notices, mut lines) = (0, 0);
    let deadline = Instant::now() + T;
    while notices < 3 && Instant::now() < deadline {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("read") > 0,
            "stream ended"
        );
        let v: serde_json::Value = serde_json::from_str(&line).expect("whole JSON lines");
        assert_eq!(v["ok"], true, "{line:.200}");
        if v["skipped_bytes"].as_u64().is_some_and(|n| n > 0) {
            assert!(v["log"].as_str().unwrap().contains("bytes skipped"));
            notices += 1;
        }
        lines += 1;
        // Read slowly.
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(notices >= 3, "{notices} notices in {lines} lines");
}

#[test]
fn logs_follow_of_a_pod_removed_by_reload_ends_with_an_error() {
    let v = Vigil::start(
        r#"
[pods.keep]
[[pods.keep.containers]]
name = "c"
command = ["sleep", "60"]

[pods.gone]
[[pods.gone.containers]]
name = "c"
command = ["sh", "-c", "echo hi; exec sleep 60"]
"#,
    );
    v.wait_for(T, "output", |v| {
        v.request(r#"{"cmd":"logs","pod":"gone"}"#)["result"]["log"] == "hi\n"
    });
    let s = UnixStream::connect(&v.socket).expect("connect");
    (&s).write_all(b"{\"id\":2,\"cmd\":\"logs\",\"pod\":\"gone\",\"follow\":true}\n")
        .expect("write");
    s.set_read_timeout(Some(T)).expect("timeout");
    let mut reader = BufReader::new(&s);
    let mut first = String::new();
    reader.read_line(&mut first).expect("first chunk");
    assert!(first.contains("hi"), "{first}");
    std::fs::write(
        &v.config,
        format!(
            "{}[pods.keep]\n[[pods.keep.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"60\"]\n",
            supervisor_header(&v.socket)
        ),
    )
    .expect("write config");
    assert_eq!(v.request(r#"{"cmd":"reload"}"#)["ok"], true);
    let mut end = String::new();
    reader.read_line(&mut end).expect("the end notice");
    let e: serde_json::Value = serde_json::from_str(&end).expect("json");
    assert_eq!(e["ok"], false, "{end}");
    assert_eq!(e["error"]["kind"], "not_found");
    let mut rest = String::new();
    assert_eq!(reader.read_line(&mut rest).expect("eof"), 0, "then EOF");
}

#[test]
fn socket_mode_changed_by_reload_is_applied_to_the_socket_file() {
    use std::os::unix::fs::PermissionsExt;
    let v = Vigil::start(ONE_SLEEPER);
    let mode = |v: &Vigil| {
        std::fs::metadata(&v.socket)
            .expect("socket")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&v), 0o600);
    let header = supervisor_header(&v.socket).replace(
        "[supervisor]\n",
        "[supervisor]\nsocket_mode = \"0666\"\nmax_connections_per_uid = 4\n",
    );
    std::fs::write(&v.config, format!("{header}{ONE_SLEEPER}")).expect("write config");
    let r = v.request(r#"{"cmd":"reload"}"#);
    assert_eq!(r["ok"], true, "{r}");
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("socket_mode") && msg.contains("max_connections_per_uid"),
        "{msg}"
    );
    assert_eq!(mode(&v), 0o666);
}

#[test]
fn logs_previous_without_a_previous_run_is_an_error() {
    let v = Vigil::start(ONE_SLEEPER);
    v.wait_for(T, "running", |v| {
        state_reason(&v.container("web", "app")) == "Running"
    });
    let out = v.cli(&["logs", "web/app", "--previous"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: previous terminated container \"app\" in pod \"web\" not found\n"
    );
    let r = v.request(r#"{"cmd":"logs","pod":"web","previous":true}"#);
    assert_eq!(r["error"]["kind"], "bad_argument", "{r}");
}

#[test]
fn logs_of_a_wrapped_ring_start_at_a_line_boundary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let header = supervisor_header(&socket)
        .replace("[supervisor]\n", "[supervisor]\nlog_buffer_bytes = 4096\n");
    // 1000 numbered lines of 12 bytes ("line 0000 x\n"): the ring wraps mid-line.
    std::fs::write(
        &config,
        format!(
            r#"{header}
[pods.many]
[[pods.many.containers]]
name = "c"
command = ["sh", "-c", "i=0; while [ $i -lt 1000 ]; do printf 'line %04d x\n' $i; i=$((i+1)); done; echo done; exec sleep 600"]
"#
        ),
    )
    .expect("write config");
    let v = Vigil::start_with(dir, socket, config);
    v.wait_for(T, "all output", |v| {
        let r = v.request(r#"{"cmd":"logs","pod":"many","tail":1}"#);
        r["result"]["log"].as_str() == Some("done\n")
    });
    let out = v.cli(&["logs", "many"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.len() < 4096, "{}", text.len());
    for line in text.lines() {
        assert!(
            line == "done" || (line.starts_with("line ") && line.ends_with(" x")),
            "a partial line: {line:?}"
        );
    }
}

/// kubectl's `--timestamps`, `--since` and `--since-time`: a line printed before a moment and
/// one printed after it (the container waits for a file the test creates).
#[test]
fn logs_timestamps_and_since_select_and_stamp_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let go = dir.path().join("go");
    std::fs::write(
        &config,
        format!(
            r#"{}
[pods.two]
[[pods.two.containers]]
name = "c"
command = ["sh", "-c", "echo early; while [ ! -e {} ]; do sleep 0.05; done; echo late; exec sleep 600"]
"#,
            supervisor_header(&socket),
            go.display()
        ),
    )
    .expect("write config");
    let v = Vigil::start_with(dir, socket, config);
    let logs = |args: &[&str]| {
        let mut all = vec!["logs", "two"];
        all.extend_from_slice(args);
        let out = v.cli(&all);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    v.wait_for(T, "early", |_| logs(&[]) == "early\n");
    // Every line read so far is older than `between`, every later one newer.
    let between = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let between = format!(
        "{}",
        jiff::Timestamp::new(between.as_secs() as i64, between.subsec_nanos() as i32).unwrap()
    );
    std::fs::write(&go, "").expect("create go");
    v.wait_for(T, "late", |_| logs(&[]) == "early\nlate\n");
    assert_eq!(logs(&["--since-time", &between]), "late\n");
    assert_eq!(logs(&["--since", "1h"]), "early\nlate\n");
    assert_eq!(logs(&["--since-time", &between, "--tail", "5"]), "late\n");
    let stamped = logs(&["--timestamps"]);
    let lines: Vec<&str> = stamped.lines().collect();
    assert_eq!(lines.len(), 2, "{stamped}");
    for (line, text) in lines.iter().zip(["early", "late"]) {
        let (time, rest) = line.split_once(' ').expect("a stamp and the line");
        assert_eq!(rest, text);
        let t: jiff::Timestamp = time.parse().expect("RFC 3339");
        assert!(time.ends_with('Z'), "{time}");
        let cut: jiff::Timestamp = between.parse().unwrap();
        assert_eq!(t < cut, text == "early", "{time} vs {between}");
    }
    // Both at once is refused by the client, as kubectl does.
    let out = v.cli(&["logs", "two", "--since", "5m", "--since-time", &between]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
        "{out:?}"
    );
    // And by the server.
    let r = v.request(
        r#"{"cmd":"logs","pod":"two","since_seconds":5,"since_time":"2026-01-01T00:00:00Z"}"#,
    );
    assert_eq!(r["error"]["kind"], "bad_argument", "{r}");
    let r = v.request(r#"{"cmd":"logs","pod":"two","since_time":"yesterday"}"#);
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("RFC 3339")),
        "{r}"
    );
}

/// Files under `log_dir`: a time on each line (`log_timestamps`, on by default) and a marker
/// line where each run begins.
#[test]
fn log_dir_files_stamp_lines_and_mark_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let logs = dir.path().join("logs");
    let header = supervisor_header(&socket).replace(
        "[supervisor]\n",
        &format!("[supervisor]\nlog_dir = \"{}\"\n", logs.display()),
    );
    std::fs::write(
        &config,
        format!(
            r#"{header}
[pods.twice]
restart_policy = "OnFailure"
backoff = {{ initial_seconds = 0.1 }}
max_restarts = 1
[[pods.twice.containers]]
name = "c"
command = ["sh", "-c", "echo hello; exit 1"]
"#
        ),
    )
    .expect("write config");
    let v = Vigil::start_with(dir, socket, config);
    v.wait_for(T, "two runs", |v| {
        state_reason(&v.container("twice", "c")) == "RestartLimitExceeded"
    });
    let text = std::fs::read_to_string(logs.join("twice/c.log")).expect("log file");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (i, run) in [(0, 1), (2, 2)] {
        let rest = lines[i]
            .strip_prefix(&format!("--- run {run} started at "))
            .and_then(|r| r.strip_suffix(" ---"))
            .unwrap_or_else(|| panic!("{text}"));
        let _: jiff::Timestamp = rest.parse().expect("RFC 3339");
        let (time, line) = lines[i + 1].split_once(' ').expect("stamped");
        assert_eq!(line, "hello");
        let _: jiff::Timestamp = time.parse().expect("RFC 3339");
    }
}

/// Status replies are reused only while nothing can have changed: `status`, `stop`, `status`
/// sent together on one connection (answered in the same loop turn) — the second status
/// shows the stop under way, not the first status again.
#[test]
fn a_status_right_after_a_stop_in_the_same_batch_shows_the_stop() {
    let v = Vigil::start(
        r#"
[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sleep", "1000"]
"#,
    );
    v.wait_for(T, "app running", |v| {
        v.container("web", "app")["state"]["running"].is_object()
    });
    let mut s = UnixStream::connect(&v.socket).expect("connect");
    s.set_read_timeout(Some(T)).expect("timeout");
    s.write_all(
        b"{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"stop\",\"pod\":\"web\"}\n{\"id\":3,\"cmd\":\"status\"}\n",
    )
    .expect("send");
    let mut r = BufReader::new(s);
    let replies: Vec<serde_json::Value> = (0..3)
        .map(|_| {
            let mut line = String::new();
            r.read_line(&mut line).expect("reply");
            serde_json::from_str(&line).expect("JSON reply")
        })
        .collect();
    let state = |r: &serde_json::Value| r["result"]["pods"][0]["containers"][0]["state"].clone();
    let before = state(&replies[0]);
    assert!(before["running"]["terminating"].is_null(), "{before}");
    assert_eq!(replies[1]["ok"], true, "{}", replies[1]);
    let after = state(&replies[2]);
    assert!(
        after["running"]["terminating"].is_object() || after["running"].is_null(),
        "the status after the stop shows it: {after}"
    );
}

/// CPU time (user + system) `pid` has used so far, from `/proc/PID/stat` (proc(5): fields 14
/// and 15, in clock ticks): a load-independent measure of whether a loop spins.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The command name (field 2) may hold spaces; the fields after it start after its `)`.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    // Clock ticks are USER_HZ, 100 on every Linux ABI (time(7): sysconf(_SC_CLK_TCK)).
    ticks as f64 / 100.0
}

/// How much CPU `pid` uses over `window` of wall-clock time (a spinning loop uses about all of
/// it, less when the machine is loaded; an idle one next to nothing).
pub(crate) fn cpu_over(pid: u32, window: Duration) -> f64 {
    let before = cpu_seconds(pid);
    std::thread::sleep(window);
    cpu_seconds(pid) - before
}

/// Eight connections of one unprivileged uid that pipeline `status` requests until the kernel
/// takes no more and never read, a ninth that sends nothing, then a tenth attempt.
const STALLED_WRITERS: &str = r#"
import socket, sys
path = sys.argv[1]
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
writers = []
for _ in range(8):
    s = connect()
    s.setblocking(False)
    try:
        while True:
            s.send(b'{"id":1,"cmd":"status"}\n' * 256)
    except BlockingIOError:
        pass
    writers.append(s)
quiet = connect()
tenth = connect()
tenth.settimeout(60)
print("tenth " + tenth.makefile().readline().strip(), flush=True)
print("ready", flush=True)
quiet.settimeout(60)
data = b""
while True:
    b = quiet.recv(4096)
    if not b:
        break
    data += b
print("quiet " + data.decode().strip(), flush=True)
sys.stdin.readline()
"#;

#[test]
#[ignore = "needs root (the client runs as nobody)"]
fn stalled_writers_holding_every_slot_of_a_uid_and_a_due_idle_deadline_do_not_make_vigil_spin() {
    use std::os::unix::process::CommandExt;
    crate::common::require_root("the client runs as nobody");
    let v = Vigil::start_shared(
        "client_idle_timeout_seconds = 2\nmax_connections_per_uid = 9\n",
        ONE_SLEEPER,
    );
    let socket = v.socket.clone();
    let pid = v.child.as_ref().expect("child").id();
    let mut client = std::process::Command::new("/usr/bin/python3")
        .uid(65534)
        .gid(65534)
        .arg("-c")
        .arg(STALLED_WRITERS)
        .arg(&socket)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = BufReader::new(client.stdout.take().expect("stdout"));
    let mut said = |what: &str| {
        let mut line = String::new();
        out.read_line(&mut line).expect("client output");
        assert!(line.starts_with(what), "expected {what:?}, got {line:?}");
        line
    };
    // The uid's slots are all taken: the tenth connection is refused, naming the limit.
    let tenth = said("tenth ");
    assert!(tenth.contains("max_connections_per_uid = 9"), "{tenth}");
    said("ready");
    // The quiet connection's idle deadline comes due (2 s) while the writers hold their slots
    // with output unread: over seconds of that state vigil uses a small fraction of one core.
    std::thread::sleep(Duration::from_millis(1500));
    let window = Duration::from_secs(3);
    let cpu = cpu_over(pid, window);
    assert!(
        cpu < window.as_secs_f64() / 10.0,
        "vigil used {cpu:.2} s of CPU in {window:?} with stalled writers and a due deadline"
    );
    // The quiet connection was closed as promised: one `busy` line naming the setting.
    let quiet = said("quiet ");
    assert!(
        quiet.contains("\"busy\"") && quiet.contains("client_idle_timeout_seconds"),
        "{quiet}"
    );
    // And root is served throughout.
    assert!(v.status()["pods"].is_array());
    let _ = client.kill();
    let _ = client.wait();
}

/// A status result is rendered into the buffer of the previous one (src/runtime/shell/
/// control.rs, `status_spare`): a short reply after a long one, and a long one after that,
/// each hold exactly their own pods, whole and valid, nothing left over from the reply before.
#[test]
fn a_status_for_one_pod_between_full_statuses_holds_only_that_pod() {
    let v = Vigil::start(
        r#"
[pods.alpha]
[[pods.alpha.containers]]
name = "app"
command = ["sleep", "1000"]

[pods.beta]
[[pods.beta.containers]]
name = "app"
command = ["sleep", "1000"]
"#,
    );
    v.wait_for(T, "both running", |v| {
        v.container("alpha", "app")["state"]["running"].is_object()
            && v.container("beta", "app")["state"]["running"].is_object()
    });
    let names = |reply: &serde_json::Value| -> Vec<String> {
        assert_eq!(reply["ok"], true, "{reply}");
        reply["result"]["pods"]
            .as_array()
            .map(|pods| {
                pods.iter()
                    .map(|p| p["name"].as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Each request waits for the previous reply, so each is rendered in a later turn.
    let full = r#"{"id":1,"cmd":"status"}"#;
    let one = r#"{"id":2,"cmd":"status","pod":"beta"}"#;
    for _ in 0..2 {
        assert_eq!(names(&v.request(full)), ["alpha", "beta"]);
        assert_eq!(names(&v.request(one)), ["beta"]);
    }
    assert_eq!(names(&v.request(full)), ["alpha", "beta"]);
}

#[test]
fn a_restart_sent_and_closed_at_once_is_carried_out_every_time() {
    let v = Vigil::start(ONE_SLEEPER);
    v.wait_for(T, "web running", |v| {
        v.container("web", "app")["state"]["running"].is_object()
    });
    // Fire and forget: write the request and close without reading, twenty times.
    for _ in 0..20 {
        let mut s = UnixStream::connect(&v.socket).expect("connect");
        s.write_all(b"{\"cmd\":\"restart\",\"pod\":\"web\"}\n")
            .expect("write");
    }
    v.wait_for(T, "twenty restarts requested", |v| {
        v.log()
            .matches("web: restart requested over the control socket")
            .count()
            >= 20
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        v.log()
            .matches("web: restart requested over the control socket")
            .count(),
        20,
        "{}",
        v.log()
    );
}
