//! The metrics endpoint (`metrics_address`) and `vigil metrics` against a real supervisor, and
//! against the real Prometheus (`prometheus`, `promtool`: Debian's `prometheus` package).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{BIN, Vigil, require_program, supervisor_header, write_config};

/// A guard against a hang, never a performance figure: how long a read, a wait for a state or a
/// scrape may take before the test fails. Generous because a scrape of hundreds of pods is built
/// over many loop turns and the machine running the tests may be loaded; vigil itself closes a
/// scraper's connection only after 10 s without progress, and waiting for an exposition is not
/// that.
const T: Duration = Duration::from_secs(60);

/// A crash-looping container (fast back-off) and a probed sleeper.
const PODS: &str = r#"
[pods.crash]
backoff = { initial_seconds = 0.1, max_seconds = 0.2 }
[[pods.crash.containers]]
name = "c"
command = ["sh", "-c", "exit 3"]

[pods.web]
[[pods.web.containers]]
name = "app"
command = ["sleep", "600"]
readiness_probe = { exec = { command = ["true"] }, period_seconds = 1 }
"#;

/// vigil with `metrics_address` on a port the kernel picks; the address it serves on.
fn start() -> (Vigil, SocketAddr) {
    start_pods(PODS)
}

/// `n` sleeping pods `p0000`, `p0001`, … (many more containers than a scrape's slice per turn).
fn sleepers(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!("[pods.p{i:04}]\n[[pods.p{i:04}.containers]]\nname = \"c\"\ncommand = [\"sleep\", \"600\"]\n")
        })
        .collect()
}

/// The `[supervisor]` line that turns the metrics endpoint on, on a free loopback port.
const METRICS_ON: &str = "metrics_address = \"127.0.0.1:0\"\n";

/// [`start`] with other pods.
fn start_pods(pods: &str) -> (Vigil, SocketAddr) {
    let v = Vigil::start_in(tempfile::tempdir().expect("tempdir"), METRICS_ON, pods);
    let log = v.log();
    let addr = log
        .lines()
        .find_map(|l| l.split("metrics: serving http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"))
        .parse()
        .expect("address");
    (v, addr)
}

/// One HTTP exchange: `request` written whole, everything read until the server closes.
fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(T)).unwrap();
    s.write_all(request).expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    String::from_utf8(out).expect("utf-8")
}

/// `GET path` with `Connection: close`; (status line, headers, body).
fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (String, String, String) {
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    let reply = exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n")
            .as_bytes(),
    );
    let (head, body) = reply.split_once("\r\n\r\n").expect("a head");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_string(), body.to_string())
}

/// The value of the one sample `prefix value`.
fn sample(text: &str, prefix: &str) -> f64 {
    let found: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix(prefix)?.strip_prefix(' ')?.parse().ok())
        .collect();
    assert_eq!(found.len(), 1, "{prefix}\n{text}");
    found[0]
}

fn type_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("# TYPE ")).collect()
}

fn wait_restarts(v: &Vigil, n: u64) {
    v.wait_for(T, "the crash-looping container to restart", |v| {
        v.container("crash", "c")["restart_count"]
            .as_u64()
            .is_some_and(|r| r >= n)
    });
}

#[test]
fn a_scrape_over_http_counts_restarts_and_says_the_same_as_vigil_metrics() {
    let (v, addr) = start();
    wait_restarts(&v, 2);
    let (status, headers, body) = get(addr, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{headers}"
    );
    let restarts = sample(
        &body,
        r#"vigil_container_restarts_total{pod="crash",container="c"}"#,
    );
    assert!(restarts >= 2.0, "{body}");
    assert_eq!(
        sample(&body, r#"vigil_container_ready{pod="web",container="app"}"#),
        1.0
    );
    let out = v.cli(&["metrics"]);
    assert!(out.status.success(), "{out:?}");
    let cli = String::from_utf8(out.stdout).unwrap();
    assert_eq!(type_lines(&cli), type_lines(&body));
    // The counter never goes back between the two.
    assert!(
        sample(
            &cli,
            r#"vigil_container_restarts_total{pod="crash",container="c"}"#
        ) >= restarts
    );
}

#[test]
fn openmetrics_is_served_when_the_scraper_asks_for_it() {
    let (v, addr) = start();
    let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let (status, headers, body) = get(addr, "/metrics", Some(om));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{headers}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(body.contains("# TYPE vigil_container_restarts counter\n"));
    let out = v.cli(&["metrics", "--openmetrics"]);
    let cli = String::from_utf8(out.stdout).unwrap();
    assert!(cli.ends_with("# EOF\n"), "{cli}");
    assert_eq!(type_lines(&cli), type_lines(&body));
}

#[test]
fn one_connection_is_kept_alive_for_several_scrapes() {
    let (_v, addr) = start();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(T)).unwrap();
    let req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    // Two requests in one write (pipelined), then a third after the replies.
    s.write_all(&[&req[..], &req[..]].concat()).unwrap();
    let mut got = String::new();
    let mut buf = [0u8; 65536];
    while got.matches("# TYPE process_start_time_seconds").count() < 2 {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed early:\n{got}");
        got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    assert_eq!(got.matches("HTTP/1.1 200 OK\r\n").count(), 2);
    assert_eq!(got.matches("Connection: keep-alive\r\n").count(), 2);
    s.write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut rest = String::new();
    s.read_to_string(&mut rest).expect("read to the end");
    assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{rest}");
    assert!(rest.contains("Connection: close\r\n"), "{rest}");
}

#[test]
fn bad_requests_get_their_status_and_the_next_scrape_is_answered() {
    let (v, addr) = start();
    let long = format!(
        "GET /metrics HTTP/1.1\r\nX-Long: {}\r\n\r\n",
        "a".repeat(9 * 1024)
    );
    let cases: [(&[u8], &str); 6] = [
        (long.as_bytes(), "HTTP/1.1 431 "),
        (
            b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 405 ",
        ),
        (b"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 404 "),
        (
            b"GET /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
            "HTTP/1.1 413 ",
        ),
        (
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
            "HTTP/1.1 400 ",
        ),
        (b"GET /metrics HTTP/3\r\n\r\n", "HTTP/1.1 "),
    ];
    for (req, want) in cases {
        let reply = exchange(addr, req);
        assert!(
            reply.starts_with(want) && !reply.starts_with("HTTP/1.1 200"),
            "{:?}: {reply}",
            String::from_utf8_lossy(&req[..req.len().min(40)])
        );
        assert!(reply.contains("Connection: close\r\n"), "{reply}");
    }
    let (status, _, _) = get(addr, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(v.status()["pods"].as_array().map(Vec::len), Some(2));
}

#[test]
fn scrapers_beyond_the_limit_get_503_and_the_control_socket_still_answers() {
    let (v, addr) = start();
    // 64 connections that send nothing hold every slot (from eight addresses: one address
    // may hold 16).
    let held: Vec<TcpStream> = (0..64).map(|i| connect_from(crowd(i), addr)).collect();
    // Once all are accepted, one more is refused with a status line.
    let mut refused = String::new();
    let deadline = Instant::now() + T;
    while !refused.starts_with("HTTP/1.1 503 ") {
        assert!(Instant::now() < deadline, "no 503: {refused:?}");
        refused = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    }
    assert!(v.status()["pods"].is_array());
    drop(held);
    answered_again(addr, "slots never freed");
}

#[test]
fn a_client_that_sends_half_a_request_is_closed_after_the_idle_timeout() {
    let (_v, addr) = start();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut out = Vec::new();
    // EOF (not a read timeout) once the server closes it: 10 s without progress.
    s.read_to_end(&mut out).expect("closed by the server");
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
}

#[test]
fn a_scraper_that_shuts_its_sending_side_after_the_request_still_gets_the_whole_reply() {
    let (_v, addr) = start_pods(&format!("{PODS}{}", sleepers(200)));
    for request in [
        // Keep-alive asked for: the half-close says no further request comes.
        &b"GET /metrics HTTP/1.1\r\n\r\n"[..],
        &b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
    ] {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(T)).unwrap();
        s.write_all(request).expect("write");
        // As `nc -N` does: shutdown(SHUT_WR) once the request is sent.
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let mut out = Vec::new();
        s.read_to_end(&mut out).expect("read");
        let reply = String::from_utf8(out).expect("utf-8");
        let (head, body) = reply.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("Connection: close"), "{head}");
        let len: usize = content_length(head);
        assert_eq!(body.len(), len, "{head}");
        assert_eq!(
            body.lines()
                .filter(|l| l.starts_with("vigil_pod_ready{"))
                .count(),
            202
        );
    }
}

#[test]
fn a_metrics_address_in_use_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let header = supervisor_header(&socket).replacen(
        "[supervisor]\n",
        &format!("[supervisor]\nmetrics_address = \"127.0.0.1:{port}\"\n"),
        1,
    );
    std::fs::write(&config, format!("{header}{PODS}")).unwrap();
    let out = Command::new(BIN)
        .args(["run", "-c"])
        .arg(&config)
        .env_remove("VIGIL_SOCKET")
        .stdin(Stdio::null())
        .output()
        .expect("run vigil");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("metrics_address 127.0.0.1:{port}: cannot listen")),
        "{err}"
    );
    assert!(!socket.exists(), "nothing left behind");
}

#[test]
fn a_metrics_address_that_is_not_ip_and_port_is_a_config_error_at_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("vigil.toml");
    for bad in ["localhost:9469", "127.0.0.1", "127.0.0.1:99999", ""] {
        std::fs::write(
            &config,
            format!("[supervisor]\nmetrics_address = \"{bad}\"\n"),
        )
        .unwrap();
        let out = Command::new(BIN)
            .args(["check", "-c"])
            .arg(&config)
            .env_remove("VIGIL_CONFIG")
            .output()
            .expect("run vigil check");
        assert!(!out.status.success(), "{bad:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("2:")
                && err.contains("supervisor.metrics_address")
                && err.contains("127.0.0.1:9469"),
            "{bad:?}: {err}"
        );
    }
}

#[test]
#[ignore = "needs promtool (Debian package prometheus; tests/run-all.sh installs it)"]
fn promtool_accepts_the_exposition() {
    require_program("promtool", "--version", "prometheus");
    let (v, _addr) = start();
    wait_restarts(&v, 1);
    let out = v.cli(&["metrics"]);
    assert!(out.status.success(), "{out:?}");
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let checked = child.wait_with_output().unwrap();
    // promtool reads the Prometheus text format only (OpenMetrics is checked by Prometheus
    // itself scraping it: see the next test).
    assert!(
        checked.status.success(),
        "promtool: {}{}\n{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `promtool check metrics` of `text`: its complaints, if any.
fn promtool_check(text: &str) -> Result<(), String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = child.wait_with_output().unwrap();
    if checked.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr)
        ))
    }
}

/// Checks that `text` is a whole exposition of `pods` pods (one `vigil_pod_ready` series each,
/// no pod twice, every family's samples once per container) and returns the crash-looper's
/// restart count in it.
fn whole(text: &str, pods: usize, openmetrics: bool) -> f64 {
    let ready: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("vigil_pod_ready{"))
        .collect();
    let mut names: Vec<&str> = ready.iter().map(|l| l.split('"').nth(1).unwrap()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), pods, "pods once each");
    assert_eq!(ready.len(), pods, "pods once each");
    for family in [
        "vigil_container_restarts_total{",
        "vigil_container_ready{",
        "vigil_container_backoff_remaining_seconds{",
    ] {
        assert_eq!(
            text.lines().filter(|l| l.starts_with(family)).count(),
            pods,
            "{family}"
        );
    }
    assert_eq!(text.ends_with("# EOF\n"), openmetrics);
    assert!(text.contains("\nprocess_start_time_seconds "));
    sample(
        text,
        r#"vigil_container_restarts_total{pod="crash",container="c"}"#,
    )
}

/// The `Content-Length` of a reply head.
fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a length")
        .parse()
        .expect("a number")
}

/// A kept-alive connection's next reply body (`Content-Length` framed).
fn next_body(s: &mut TcpStream, pending: &mut Vec<u8>) -> String {
    let mut buf = [0u8; 65536];
    loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).to_string();
            assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
            let len: usize = content_length(&head);
            if pending.len() >= end + 4 + len {
                let body = String::from_utf8(pending[end + 4..end + 4 + len].to_vec()).unwrap();
                pending.drain(..end + 4 + len);
                return body;
            }
        }
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed before the reply was whole");
        pending.extend_from_slice(&buf[..n]);
    }
}

#[test]
#[ignore = "needs promtool (Debian package prometheus; tests/run-all.sh installs it)"]
fn scrapes_of_many_pods_stay_whole_valid_and_monotonic_amid_restarts_status_and_other_scrapers() {
    require_program("promtool", "--version", "prometheus");
    const N: usize = 400;
    let (v, addr) = start_pods(&format!("{PODS}{}", sleepers(N)));
    let pods = N + 2;
    wait_restarts(&v, 1);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A second scraper, OpenMetrics on one kept-alive connection, all along.
    let other = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.set_read_timeout(Some(T)).unwrap();
            let mut pending = Vec::new();
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                s.write_all(
                    b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
                )
                .unwrap();
                seen.push(whole(&next_body(&mut s, &mut pending), pods, true));
            }
            seen
        })
    };
    // Status requests all along (each answered between slices of the scrapes).
    let status = {
        let stop = stop.clone();
        let socket = v.socket.clone();
        std::thread::spawn(move || {
            let mut answered = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                s.set_read_timeout(Some(T)).unwrap();
                s.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
                let mut line = String::new();
                std::io::BufRead::read_line(&mut std::io::BufReader::new(s), &mut line).unwrap();
                let reply: Value = serde_json::from_str(&line).unwrap();
                assert_eq!(reply["result"]["pods"].as_array().unwrap().len(), pods);
                answered += 1;
            }
            answered
        })
    };
    let mut last = 0.0;
    for round in 0..12 {
        if round == 4 {
            // A restart asked for in the middle.
            let r = v.request(r#"{"cmd":"restart","pod":"p0007"}"#);
            assert!(r.get("error").is_none(), "{r}");
        }
        let text = if round % 3 == 2 {
            let out = v.cli(&["metrics"]);
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        } else {
            get(addr, "/metrics", None).2
        };
        let restarts = whole(&text, pods, false);
        assert!(restarts >= last, "went back from {last} to {restarts}");
        last = restarts;
        if let Err(e) = promtool_check(&text) {
            panic!("promtool: {e}\n{text}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = other.join().expect("the other scraper");
    assert!(!seen.is_empty());
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "the other scraper's counter went back: {seen:?}"
    );
    assert!(status.join().expect("the status client") > 0);
    assert_eq!(
        v.container("p0007", "c")["restart_count"].as_u64(),
        Some(1),
        "the restart asked for was carried out"
    );
}

#[test]
fn scrapers_that_leave_before_their_reply_free_their_place_and_descriptors() {
    const N: usize = 300;
    let (v, addr) = start_pods(&sleepers(N));
    v.wait_for(T, "every pod to run", |v| {
        v.status()["pods"]
            .as_array()
            .is_some_and(|p| p.len() == N && p.iter().all(|p| p["phase"] == "Running"))
    });
    // While the crowd's scrapes hold the reply places (`WRITERS`, 8: each is answered, as a
    // peer that shut its sending side may still read, and is found gone only when its reply
    // is written), another scrape waits for a place and, after `IDLE_TIMEOUT` (10 s), is told
    // `503` "try again" (runtime::shell::metrics, docs/bad-input.md). On a loaded machine the
    // crowd's expositions of 300 pods, built a slice a turn, can take longer than that, so a
    // `503` is asked again, as a Prometheus server would at its next interval: the test proves
    // that the places come free (a leaked one gives `503` until `T`) and that the descriptors
    // go, not how fast.
    let scrape = || {
        let deadline = Instant::now() + T;
        loop {
            let (status, _, body) = get(addr, "/metrics", None);
            if !status.starts_with("HTTP/1.1 503 ") {
                assert!(status.starts_with("HTTP/1.1 200 "), "{status}\n{body}");
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "still {status} after {T:?}: {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let open_fds = || sample(&scrape(), "process_open_fds");
    let before = open_fds();
    // Far more than the connections that may await a reply at once (8), each gone before its
    // exposition is built: over HTTP (from several addresses, as one may hold 16
    // connections), and `metrics` on the control socket.
    for i in 0..40 {
        let mut s = connect_from(crowd(i), addr);
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        drop(s);
        let mut c = std::os::unix::net::UnixStream::connect(&v.socket).unwrap();
        c.write_all(b"{\"cmd\":\"metrics\"}\n").unwrap();
        drop(c);
    }
    // Their places and descriptors go: a scrape is answered whole and vigil holds what it held.
    let mut now = open_fds();
    let deadline = Instant::now() + T;
    while now != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        now = open_fds();
    }
    assert_eq!(now, before, "descriptors before and after");
    let text = scrape();
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("vigil_pod_ready{"))
            .count(),
        N
    );
    assert!(v.cli(&["metrics"]).status.success());
}

/// A Prometheus server on a free port scraping `target` every second; killed (by PID) on drop.
struct Prometheus {
    child: std::process::Child,
    web: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let web = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: vigil\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            web,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `/api/v1/query`'s result vector for `expr` (empty while Prometheus is starting).
    fn query(&self, expr: &str) -> Vec<Value> {
        self.answer(expr)["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `/api/v1/query`'s whole answer for `expr` (`null` if there was none).
    fn answer(&self, expr: &str) -> Value {
        let mut q = String::new();
        for b in expr.bytes() {
            if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) {
                q.push(b as char);
            } else {
                q.push_str(&format!("%{b:02X}"));
            }
        }
        let Ok(mut s) = TcpStream::connect(self.web) else {
            return Value::Null;
        };
        s.set_read_timeout(Some(T)).unwrap();
        let req = format!(
            "GET /api/v1/query?query={q} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.web
        );
        if s.write_all(req.as_bytes()).is_err() {
            return Value::Null;
        }
        let mut reply = String::new();
        if s.read_to_string(&mut reply).is_err() {
            return Value::Null;
        }
        let Some((_, body)) = reply.split_once("\r\n\r\n") else {
            return Value::Null;
        };
        serde_json::from_str(body).unwrap_or(Value::Null)
    }

    /// Waits until `expr` has a result.
    fn wait_for(&self, expr: &str) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.query(expr);
            if !r.is_empty() {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "no result for {expr}\nprometheus log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs prometheus (Debian package prometheus; tests/run-all.sh installs it)"]
fn prometheus_scrapes_vigil_and_sees_a_restart_counter_move() {
    require_program("prometheus", "--version", "prometheus");
    let (v, addr) = start();
    let prom = Prometheus::start(addr);
    let up = prom.wait_for(&format!("up{{instance=\"{addr}\"}} == 1"));
    assert_eq!(up[0]["value"][1], "1");
    // A counter that moved between scrapes Prometheus stored.
    let moved = prom
        .wait_for(r#"increase(vigil_container_restarts_total{pod="crash",container="c"}[1m]) > 0"#);
    assert_eq!(moved[0]["metric"]["container"], "c");
    // The probe histogram and vigil's own figures arrived too.
    prom.wait_for(r#"vigil_probe_duration_seconds_count{pod="web",probe="readiness"} > 0"#);
    prom.wait_for("process_resident_memory_bytes > 0");
    // Every panel expression of the shipped Grafana dashboard is valid PromQL and finds data
    // (its variables set to "all", Grafana's rate interval to 1m).
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/grafana-dashboard.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() > 10);
    for e in &exprs {
        let q = e
            .replace("$__rate_interval", "1m")
            .replace("$job", ".*")
            .replace("$pod", ".*");
        let a = prom.answer(&q);
        assert_eq!(a["status"], "success", "{q}: {a}");
    }
    // Prometheus asks for OpenMetrics first: what it stored came through that parser.
    assert!(
        v.log().contains("metrics: scrape answered in openmetrics"),
        "{}",
        v.log()
    );
}

/// Every panel target's `expr` in a Grafana dashboard.
fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                match (k.as_str(), child) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_exprs(i, out)),
        _ => {}
    }
}

/// A control client asking `metrics` again and again on one connection until `stop`: each
/// reply must be the whole exposition of `pods` pods for that request, never `busy`. Then the
/// same connection answers `version`, and ends only when the client ends its side. Returns how
/// many expositions it got.
fn metrics_asker(
    socket: std::path::PathBuf,
    k: usize,
    pods: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> u64 {
    let mut w = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    // A guard against a lost reply, not a figure.
    w.set_read_timeout(Some(T)).unwrap();
    let mut r = std::io::BufReader::new(w.try_clone().unwrap());
    let mut line = String::new();
    let mut n = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        writeln!(w, r#"{{"cmd":"metrics","id":{n}}}"#).unwrap();
        line.clear();
        std::io::BufRead::read_line(&mut r, &mut line)
            .unwrap_or_else(|e| panic!("client {k}, request {n}: no reply: {e}"));
        let head = &line[..line.len().min(300)];
        assert!(
            line.ends_with('\n'),
            "client {k}, request {n}: the connection ended ({} bytes): {head}",
            line.len()
        );
        // Checked without parsing 300 KB of JSON each time (the client stays quick, so its
        // next request is soon waiting again): its own reply, whole, with every pod.
        assert!(
            line.starts_with(&format!(r#"{{"id":{n},"ok":true,"result":{{"#)),
            "client {k}, request {n}: {head}"
        );
        assert!(line.ends_with("}}\n"), "client {k}, request {n}");
        assert_eq!(
            line.matches("\\nvigil_pod_ready{").count(),
            pods,
            "client {k}, request {n}: a whole exposition"
        );
    }
    let last: Value = serde_json::from_str(&line).expect("the last reply is JSON");
    assert!(last["result"]["text"].as_str().is_some(), "client {k}");
    // Served on by whichever vigil runs now; closed when the client closes its side.
    w.write_all(b"{\"cmd\":\"version\",\"id\":0}\n").unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut r, &mut line).expect("the version's reply");
    let reply: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(reply["ok"], true, "client {k}: {reply}");
    w.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).expect("the end of the connection");
    assert!(
        rest.is_empty(),
        "client {k}: {}",
        String::from_utf8_lossy(&rest)
    );
    n
}

/// The address the newest vigil in `log` serves metrics on (each instance binds
/// `metrics_address` afresh: port 0 is a new port after an upgrade).
fn newest_metrics_addr(log: &std::path::Path) -> Option<SocketAddr> {
    std::fs::read_to_string(log)
        .ok()?
        .lines()
        .rev()
        .filter_map(|l| l.split("metrics: serving http://").nth(1))
        .find_map(|rest| rest.strip_suffix("/metrics")?.parse().ok())
}

/// One HTTP scrape: `Some(true)` answered whole (`200`, the body its `Content-Length` says),
/// `Some(false)` refused or cut (the connection ended without a whole response), `None` if it
/// hung past [`T`].
fn scrape_once(addr: SocketAddr) -> Option<bool> {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return Some(false);
    };
    s.set_read_timeout(Some(T)).unwrap();
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return Some(false);
    }
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return None;
        }
        Err(_) => return Some(false),
    }
    let text = String::from_utf8_lossy(&got);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Some(false);
    };
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|n| n.trim().parse::<usize>().ok());
    Some(head.starts_with("HTTP/1.1 200 ") && length == Some(body.len()))
}

/// Clients asking `metrics` in a loop on the control socket, each on one connection, while
/// vigil upgrades itself three times. With 400 pods an exposition takes several loop turns, so
/// at an exec a request is usually waiting for one: it is handed over and answered by the new
/// vigil. Every request gets exactly one reply, its whole exposition, and never `busy`.
#[test]
fn metrics_requests_waiting_for_their_exposition_at_an_upgrade_are_answered_once_by_the_new_vigil()
{
    const N: usize = 400;
    const CLIENTS: usize = 6;
    let (v, _addr) = start_pods(&sleepers(N));
    v.wait_for(T, "every pod to run", |v| {
        v.status()["pods"]
            .as_array()
            .is_some_and(|p| p.len() == N && p.iter().all(|p| p["phase"] == "Running"))
    });
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|k| {
            let (socket, stop) = (v.socket.clone(), stop.clone());
            std::thread::spawn(move || metrics_asker(socket, k, N, stop))
        })
        .collect();
    // A scraper on the metrics listener meanwhile: its connections are not handed over, so a
    // scrape at an exec may end without its response, but none hangs.
    let scraper = {
        let (log, stop) = (v.dir.path().join("vigil.log"), stop.clone());
        std::thread::spawn(move || {
            let (mut whole, mut failed) = (0u64, 0u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let addr = newest_metrics_addr(&log).expect("a metrics address in the log");
                match scrape_once(addr) {
                    Some(true) => whole += 1,
                    Some(false) => {
                        failed += 1;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    None => panic!("a scrape of {addr} hung"),
                }
            }
            (whole, failed)
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    for round in 0..3 {
        let out = v.cli(&["upgrade"]);
        assert!(out.status.success(), "round {round}: {out:?}\n{}", v.log());
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for (k, c) in clients.into_iter().enumerate() {
        let got = c
            .join()
            .unwrap_or_else(|_| panic!("client {k} failed\n{}", v.log()));
        assert!(got > 0, "client {k}");
    }
    let (whole, failed) = scraper.join().expect("the scraper");
    assert!(whole > 0, "{failed} scrapes failed, none answered");
    let addr = newest_metrics_addr(&v.dir.path().join("vigil.log")).unwrap();
    assert_eq!(
        scrape_once(addr),
        Some(true),
        "the scrape after the upgrades"
    );
    // Whether an exec found a request waiting for its exposition is timing (most runs do: the
    // old vigil logs "metrics request(s) waiting for their exposition handed over"); either
    // way every request above got exactly its own reply. No connection was closed.
    let log = v.log();
    assert!(!log.contains("connection(s) handed over by the previous vigil were closed"));
}

/// Every reply place (8) held by scrapers that pipeline far more scrapes than the kernel's
/// buffers hold and never read, and one more scraper whose request waits for a place while
/// its idle deadline comes due: vigil does not spin (its CPU time over seconds of that state
/// stays far below a busy loop's), and the waiting scraper is answered or told `503`, then
/// closed.
#[test]
fn a_scrape_waiting_behind_stalled_readers_does_not_make_vigil_spin_and_is_answered_or_refused() {
    let (v, addr) = start_pods(&sleepers(50));
    let pid = v.child.as_ref().expect("child").id();
    v.wait_for(T, "every pod to run", |v| {
        v.status()["pods"]
            .as_array()
            .is_some_and(|p| p.len() == 50 && p.iter().all(|p| p["phase"] == "Running"))
    });
    // The waiting scraper connects first (a scrape answered after it shows it was accepted),
    // so its idle clock started seconds before the readers stall.
    let mut waiting = TcpStream::connect(addr).expect("connect");
    waiting.set_read_timeout(Some(T)).unwrap();
    let size = get(addr, "/metrics", None).2.len();
    let connected = Instant::now();
    std::thread::sleep(Duration::from_secs(4));
    // Replies worth 16 MiB each (more than any socket buffers), asked for in one write.
    let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let n = ((16 << 20) / size + 1).min((48 << 10) / request.len());
    assert!(
        n * size > 8 << 20,
        "exposition of {size} bytes too small to stall a reader"
    );
    // From eight addresses (one address may hold four places).
    let readers: Vec<TcpStream> = (0..8)
        .map(|i| {
            let mut s = connect_from(crowd(i * 8), addr);
            s.set_write_timeout(Some(T)).unwrap();
            s.write_all(&request.repeat(n)).expect("pipelined requests");
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    waiting
        .write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    // Ten seconds after it connected the waiting scraper's deadline is due while the readers
    // (stalled since a few seconds later) still hold every place.
    std::thread::sleep(
        (connected + Duration::from_millis(10_500)).saturating_duration_since(Instant::now()),
    );
    let window = Duration::from_secs(3);
    let cpu = crate::control::cpu_over(pid, window);
    assert!(
        cpu < window.as_secs_f64() / 10.0,
        "vigil used {cpu:.2} s of CPU in {window:?} with a due deadline behind stalled readers"
    );
    let mut reply = Vec::new();
    waiting
        .read_to_end(&mut reply)
        .expect("answered or refused, then closed");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("HTTP/1.1 200 OK") || reply.starts_with("HTTP/1.1 503 "),
        "{reply}"
    );
    drop(readers);
    assert!(v.status()["pods"].is_array());
}

/// vigil under `RLIMIT_NOFILE` 64 (`prlimit`): more scrapers than it has descriptors left are
/// held open. Its metrics share is what its own work leaves (here its minimum): the scrapers
/// beyond it are told `503` or closed at once, so accepting never runs out of descriptors
/// (nothing in the log says so), vigil does not spin meanwhile (its CPU time over seconds of
/// that state stays far below a busy loop's), and once scrapers leave a scrape is answered
/// again.
#[test]
fn scrapers_beyond_a_small_descriptor_share_are_refused_without_spinning_or_running_out() {
    crate::common::require_program("prlimit", "--version", "util-linux");
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = write_config(dir.path(), &socket, METRICS_ON, &sleepers(1));
    let log = std::fs::File::create(dir.path().join("vigil.log")).expect("log file");
    let child = Command::new("prlimit")
        .arg("--nofile=64:64")
        .arg(BIN)
        .args(["run", "-c"])
        .arg(&config)
        .env("VIGIL_LOG", "info")
        .env_remove("VIGIL_SOCKET")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup"))
        .stderr(log)
        .spawn()
        .expect("spawn vigil under prlimit");
    let pid = child.id();
    let v = Vigil {
        child: Some(child),
        dir,
        socket,
        config,
    };
    v.wait_for(T, "the metrics listener", |v| {
        v.log().contains("metrics: serving http://")
    });
    let addr: SocketAddr = v
        .log()
        .lines()
        .find_map(|l| l.split("metrics: serving http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("address")
        .parse()
        .expect("address");
    // More scrapers than vigil has descriptors left, from several addresses.
    let held: Vec<TcpStream> = (0..80).map(|i| connect_from(crowd(i), addr)).collect();
    v.wait_for(T, "a scrape refused while the share is held", |_| {
        // Told `503`, or closed at once (a write or read may then fail): not answered.
        let Ok(mut s) = TcpStream::connect(addr) else {
            return false;
        };
        s.set_read_timeout(Some(T)).unwrap();
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        !out.starts_with(b"HTTP/1.1 200 ")
    });
    let window = Duration::from_secs(3);
    let cpu = crate::control::cpu_over(pid, window);
    assert!(
        cpu < window.as_secs_f64() / 10.0,
        "vigil used {cpu:.2} s of CPU in {window:?} with scrapers beyond its share"
    );
    assert!(!v.log().contains("Too many open files"), "{}", v.log());
    drop(held);
    answered_again(addr, "never answered again");
}

/// Asks `addr` for /metrics until it answers `200 OK`, within `T`; fails with `what` and the
/// last reply otherwise.
fn answered_again(addr: std::net::SocketAddr, what: &str) {
    let deadline = Instant::now() + T;
    loop {
        let reply = exchange(addr, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
        if reply.starts_with("HTTP/1.1 200 OK") {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {reply}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The source address of a crowd's `i`-th connection: eight connections a loopback address
/// (127.0.2.N), within the per-address limits, so one test can be a crowd of several peers.
fn crowd(i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 0, 2, (i / 8 + 1) as u8)
}

/// A connection to `addr` from `source` (a loopback address of the test's choosing), so one
/// test can be several peers.
pub(crate) fn connect_from(source: std::net::Ipv4Addr, addr: SocketAddr) -> TcpStream {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .expect("socket");
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrIn::from(std::net::SocketAddrV4::new(source, 0)),
    )
    .expect("bind the source address");
    let SocketAddr::V4(to) = addr else {
        panic!("an IPv4 metrics address: {addr}");
    };
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(to)).expect("connect");
    TcpStream::from(fd)
}

#[test]
fn a_slowloris_flood_from_one_address_does_not_deny_another_addresss_scrapes() {
    let (_v, addr) = start();
    let attacker = std::net::Ipv4Addr::new(127, 0, 0, 2);
    // 200 connections from one address, each trickling a head that never ends.
    let mut flood: Vec<TcpStream> = Vec::new();
    for _ in 0..200 {
        let mut s = connect_from(attacker, addr);
        s.set_nonblocking(true).expect("nonblocking");
        let _ = s.write(b"GET /metrics HTTP/1.1\r\n");
        flood.push(s);
    }
    // Every legitimate scrape from another address is answered while the flood goes on.
    for round in 0..6 {
        for s in &mut flood {
            let _ = s.write(b"X");
        }
        let mut s = connect_from(std::net::Ipv4Addr::LOCALHOST, addr);
        s.set_read_timeout(Some(T)).expect("timeout");
        s.write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .expect("write");
        let mut out = Vec::new();
        s.read_to_end(&mut out).expect("read");
        let reply = String::from_utf8_lossy(&out);
        assert!(
            reply.starts_with("HTTP/1.1 200 OK"),
            "scrape {round}: {reply}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(flood);
}

#[test]
fn a_head_begun_and_not_finished_is_closed_after_five_seconds() {
    let (_v, addr) = start();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let started = Instant::now();
    s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("closed by the server");
    // Closed at the head deadline (5 s), well before the 10 s idle timeout.
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "closed after {:?}",
        started.elapsed()
    );
}

/// `/readyz` and `/healthz` on the metrics listener, in the Kubernetes API server's words:
/// `200 ok`, or `500` with the failed checks; `?verbose` lists every check; `?pod=` narrows.
#[test]
fn readyz_and_healthz_answer_as_the_kubernetes_api_server_does() {
    let (v, addr) = start();
    v.wait_for(T, "web to be ready", |v| {
        v.container("web", "app")["ready"] == true
    });
    let (status, headers, body) = get(addr, "/readyz?pod=web", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; charset=utf-8"),
        "{headers}"
    );
    assert_eq!(body, "ok");
    let (status, _, body) = get(addr, "/readyz?pod=web&verbose", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, "[+]ping ok\n[+]web ok\nreadyz check passed\n");
    // The crash-looping pod fails readiness, and liveness while it backs off.
    v.wait_for(T, "healthz to fail for the crash loop", |_| {
        let (status, _, body) = get(addr, "/healthz", None);
        status == "HTTP/1.1 500 Internal Server Error"
            && body == "[-]crash failed: CrashLoopBackOff (crash/c)\nhealthz check failed\n"
    });
    let (status, _, body) = get(addr, "/readyz?verbose", None);
    assert_eq!(status, "HTTP/1.1 500 Internal Server Error", "{body}");
    assert!(body.starts_with("[+]ping ok\n"), "{body}");
    assert!(body.contains("[-]crash failed: "), "{body}");
    assert!(body.contains("[+]web ok\n"), "{body}");
    assert!(body.ends_with("readyz check failed\n"), "{body}");
    assert_eq!(get(addr, "/livez?pod=web", None).2, "ok");
    let (status, _, body) = get(addr, "/readyz?pod=nope", None);
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert_eq!(body, "no pod named \"nope\"\n");
    // Scrapes are answered as before.
    assert!(get(addr, "/metrics", None).2.contains("vigil_build_info"));
}
