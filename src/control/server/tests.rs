//! Unit tests of the server against real sockets, driven like the runtime drives it.

use super::admission::{is_admin, peer_groups};
use super::*;
use crate::control::protocol::{self, RequestId};
use mio::net::UnixStream;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream as StdStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mio::{Events, Poll};
use serde_json::{Value, json};

const LISTENER: Token = Token(1);
const WATCH: Token = Token(2);
const CONN_BASE: usize = 100;

struct Harness {
    poll: Poll,
    events: Events,
    server: Server,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

type Handler<'a> = &'a mut dyn FnMut(&mut Server, &Registry, Incoming);

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run").join("vigil.sock");
        let poll = Poll::new().unwrap();
        let mut server = Server::bind(&path, &Access::default(), CONN_BASE).unwrap();
        server.register(poll.registry(), LISTENER, WATCH).unwrap();
        Harness {
            poll,
            events: Events::with_capacity(256),
            server,
            path,
            _dir: dir,
        }
    }

    /// Hands only poll events to the server (no sweep, no requests) until `done` says so;
    /// fails naming `what` after 10 s.
    fn events_until(&mut self, what: &str, mut done: impl FnMut(&Server) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&self.server) {
            crate::testutil::poll_once(&mut self.poll, &mut self.events, Duration::from_millis(20));
            for ev in self.events.iter() {
                self.server
                    .on_event(self.poll.registry(), ev, Instant::now());
            }
            assert!(Instant::now() < deadline, "{what}");
        }
    }

    /// One loop turn, like the runtime's.
    fn turn(&mut self, handler: Handler) {
        let timeout = if self.server.has_backlog() {
            Duration::ZERO
        } else {
            Duration::from_millis(20)
        };
        match self.poll.poll(&mut self.events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return,
            Err(e) => panic!("poll: {e}"),
        }
        let registry = self.poll.registry();
        let now = Instant::now();
        for ev in self.events.iter() {
            assert!(
                self.server.owns(ev.token()),
                "foreign token {:?}",
                ev.token()
            );
            self.server.on_event(registry, ev, now);
        }
        self.server.begin_turn(registry, now);
        while let Some(inc) = self.server.next_request(registry, now) {
            handler(&mut self.server, registry, inc);
        }
        // Every test checks this: a turn leaves work for a zero-timeout poll, or a deadline
        // still ahead; never one already due that the next turn would not move (a busy loop).
        assert!(
            self.server.has_backlog() || self.server.next_deadline().is_none_or(|d| d > now),
            "a deadline due without progress: {:?} at {now:?}",
            self.server.next_deadline()
        );
    }

    /// Turns until the client thread on the other end of `rx` sends what it got.
    fn run_until_received<T>(&mut self, rx: &mpsc::Receiver<T>, handler: Handler) -> T {
        let mut got = None;
        self.run_until(
            |_| {
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            handler,
        );
        match got {
            Some(v) => v,
            None => unreachable!("run_until returns only once something was received"),
        }
    }

    fn run_until(&mut self, mut done: impl FnMut(&Server) -> bool, handler: Handler) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(&self.server) {
            assert!(Instant::now() < deadline, "deadline passed");
            self.turn(handler);
        }
    }
}

fn echo(server: &mut Server, registry: &Registry, inc: Incoming) {
    let line = match inc.request {
        Ok(r) => protocol::reply_ok(&r.id, json!({"cmd": r.cmd.name()})),
        Err(e) => e.reply(),
    };
    server.send(registry, inc.conn, &line);
}

fn mode(mode: u32) -> Access {
    Access {
        mode,
        ..Access::default()
    }
}

fn connect(path: &Path) -> StdStream {
    let s = StdStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn read_lines(stream: &StdStream, n: usize) -> Vec<Value> {
    let mut reader = BufReader::new(stream);
    (0..n)
        .map(|_| {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap()
        })
        .collect()
}

#[test]
fn several_requests_on_one_connection_are_answered_in_order() {
    let mut h = Harness::new();
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = connect(&path);
        s.write_all(
            b"{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"statsu\"}\n\n{\"id\":\"three\",\"cmd\":\"version\"}\n",
        )
        .unwrap();
        tx.send(read_lines(&s, 3)).unwrap();
    });
    let lines = h.run_until_received(&rx, &mut echo);
    assert_eq!(
        lines[0],
        json!({"id": 1, "ok": true, "result": {"cmd": "status"}})
    );
    assert_eq!(lines[1]["id"], json!(2));
    assert_eq!(lines[1]["error"]["kind"], json!("unknown_command"));
    assert_eq!(lines[2]["id"], json!("three"));
    assert_eq!(lines[2]["result"]["cmd"], json!("version"));
}

#[test]
fn state_changes_sent_by_a_client_that_closes_at_once_are_all_carried_out() {
    let mut h = Harness::new();
    // Sent and closed before vigil looks: the hang-up comes with the requests unread.
    let mut s = connect(&h.path);
    s.write_all(
        b"{\"id\":1,\"cmd\":\"restart\",\"pod\":\"a\"}\n{\"id\":2,\"cmd\":\"version\"}\n\
          {\"id\":3,\"cmd\":\"restart\",\"pod\":\"b\"}\n{\"id\":4,\"cmd\":\"shutdown\"}",
    )
    .unwrap();
    drop(s);
    let carried = std::cell::RefCell::new(Vec::new());
    h.run_until(
        |s| carried.borrow().len() >= 3 && s.connection_count() == 0,
        &mut |server, registry, inc| {
            let r = inc.request.as_ref().unwrap();
            carried.borrow_mut().push(r.id.clone());
            echo(server, registry, inc);
        },
    );
    let carried = carried.into_inner();
    // The read-only `version` was answered to nobody: skipped.
    let ids: Vec<RequestId> = [1, 3, 4].map(|i| RequestId::from(json!(i))).to_vec();
    assert_eq!(carried, ids);
}

#[test]
fn a_client_that_pipelines_and_dies_is_closed_and_its_uid_is_not_locked_out() {
    let mut h = Harness::new();
    h.server.strangers = true;
    h.server.set_limits(Limits {
        max_per_uid: 2,
        ..Limits::default()
    });
    // Each sends many requests, takes one reply and dies with the rest read in part.
    let mut batch = String::new();
    for i in 0..2000 {
        batch.push_str(&format!("{{\"id\":{i},\"cmd\":\"version\"}}\n"));
    }
    for _ in 0..2 {
        let path = h.path.clone();
        let batch = batch.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = connect(&path);
            s.set_nonblocking(true).unwrap();
            let _ = s.write(batch.as_bytes());
            s.set_nonblocking(false).unwrap();
            tx.send(read_lines(&s, 1)).unwrap();
        });
        h.run_until_received(&rx, &mut echo);
    }
    h.run_until(|s| s.connection_count() == 0, &mut echo);
    assert_eq!(h.server.memory(), 0);
    // The uid gets in again.
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = connect(&path);
        s.write_all(b"{\"id\":9,\"cmd\":\"version\"}\n").unwrap();
        tx.send(read_lines(&s, 1).remove(0)).unwrap();
    });
    let got = h.run_until_received(&rx, &mut echo);
    assert_eq!(got["id"], json!(9), "{got}");
}

#[test]
fn many_clients_that_pipeline_never_read_and_die_are_all_closed_and_their_memory_freed() {
    let mut h = Harness::new();
    h.server.strangers = true;
    let mut batch = String::new();
    for _ in 0..2000 {
        batch.push_str("{\"cmd\":\"version\"}\n");
    }
    let clients: Vec<StdStream> = (0..1000)
        .map(|_| {
            let mut s = connect(&h.path);
            s.set_nonblocking(true).unwrap();
            let _ = s.write(batch.as_bytes());
            s
        })
        .collect();
    // Served for a while (replies pile up unread), then every client dies at once.
    let until = Instant::now() + Duration::from_millis(300);
    h.run_until(|_| Instant::now() >= until, &mut echo);
    assert!(h.server.connection_count() > 0);
    drop(clients);
    h.run_until(|s| s.connection_count() == 0, &mut echo);
    assert_eq!(h.server.memory(), 0);
}

#[test]
fn more_requests_than_the_turn_cap_are_all_answered_in_order() {
    let mut h = Harness::new();
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = connect(&path);
        let mut batch = String::new();
        for i in 0..250 {
            batch.push_str(&format!("{{\"id\":{i},\"cmd\":\"version\"}}\n"));
        }
        s.write_all(batch.as_bytes()).unwrap();
        tx.send(read_lines(&s, 250)).unwrap();
    });
    let got = h.run_until_received(&rx, &mut echo);
    let ids: Vec<u64> = got.iter().map(|v| v["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (0..250).collect::<Vec<_>>());
}

#[test]
fn turn_cap_leaves_a_backlog_for_the_next_turn_without_a_new_wakeup() {
    let mut h = Harness::new();
    let mut s = connect(&h.path);
    let mut batch = String::new();
    for i in 0..150 {
        batch.push_str(&format!("{{\"id\":{i},\"cmd\":\"version\"}}\n"));
    }
    s.write_all(batch.as_bytes()).unwrap();
    let mut per_turn = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while per_turn.iter().sum::<usize>() < 150 {
        assert!(Instant::now() < deadline);
        let mut n = 0;
        h.turn(&mut |server, registry, inc| {
            n += 1;
            echo(server, registry, inc)
        });
        if n > 0 {
            per_turn.push(n);
        }
    }
    assert_eq!(per_turn[0], TURN_REQUESTS, "{per_turn:?}");
    assert!(per_turn.iter().all(|&n| n <= TURN_REQUESTS));
    assert!(!h.server.has_backlog());
    assert_eq!(read_lines(&s, 150).len(), 150);
}

#[test]
fn a_turn_takes_no_further_request_once_its_output_budget_is_spent() {
    let mut h = Harness::new();
    let clients: Vec<StdStream> = (0..8).map(|_| connect(&h.path)).collect();
    h.run_until(|s| s.connection_count() == 8, &mut echo);
    for mut c in &clients {
        c.write_all(b"{\"id\":1,\"cmd\":\"version\"}\n").unwrap();
    }
    // Replies of 200 KiB: the 512 KiB budget is spent by the third, so a turn takes three
    // requests although eight wait (the request cap is 64).
    let pad = "x".repeat(200 * 1024);
    let mut per_turn = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while per_turn.iter().sum::<usize>() < 8 {
        assert!(Instant::now() < deadline, "{per_turn:?}");
        let mut n = 0;
        h.turn(&mut |server, registry, inc| {
            n += 1;
            let id = inc
                .request
                .map(|r| r.id)
                .unwrap_or_else(|_| RequestId::null());
            server.send(
                registry,
                inc.conn,
                &protocol::reply_ok(&id, json!({ "pad": pad })),
            );
        });
        if n > 0 {
            per_turn.push(n);
        }
    }
    let most = TURN_OUTPUT.div_ceil(pad.len());
    assert!(per_turn.iter().all(|&n| n <= most), "{per_turn:?}");
    assert_eq!(per_turn[0], most, "{per_turn:?}");
}

#[test]
fn requests_of_many_connections_are_taken_round_robin() {
    let mut h = Harness::new();
    let mut clients: Vec<StdStream> = (0..4).map(|_| connect(&h.path)).collect();
    for c in &mut clients {
        let mut batch = String::new();
        for i in 0..40 {
            batch.push_str(&format!("{{\"id\":{i},\"cmd\":\"version\"}}\n"));
        }
        c.write_all(batch.as_bytes()).unwrap();
    }
    h.run_until(|s| s.connection_count() == 4, &mut echo);
    let mut order = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while order.len() < 160 {
        assert!(Instant::now() < deadline);
        h.turn(&mut |server, registry, inc| {
            order.push(inc.conn);
            echo(server, registry, inc)
        });
    }
    // No connection gets a second request in before every other one with requests waiting
    // had one (after the first full round).
    for window in order[8..152].chunks(4) {
        let mut w = window.to_vec();
        w.sort();
        w.dedup();
        assert_eq!(w.len(), 4, "{window:?}");
    }
}

#[test]
fn oversized_line_gets_too_large_then_close() {
    let mut h = Harness::new();
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let s = connect(&path);
        let mut w = s.try_clone().unwrap();
        // The server stops reading; the write fails once it closes.
        std::thread::spawn(move || {
            let _ = w.write_all(&vec![b'x'; 1 << 20]);
        });
        let mut reader = BufReader::new(&s);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        // After the reply: EOF, or ECONNRESET since unread input was discarded (unix(7)).
        let mut rest = String::new();
        let end = reader.read_line(&mut rest);
        tx.send((line, end.map_err(|e| e.kind()), rest)).unwrap();
    });
    let (line, end, rest) = h.run_until_received(&rx, &mut echo);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["error"]["kind"], json!("too_large"));
    assert!(
        matches!(end, Ok(0) | Err(io::ErrorKind::ConnectionReset)),
        "{end:?} {rest:?}"
    );
    assert_eq!(h.server.connection_count(), 0);
}

#[test]
fn a_client_that_never_reads_gets_no_more_requests_processed_while_others_are_answered() {
    let mut h = Harness::new();
    // The slow client asks for far more than OUTPUT_HIGH and never reads.
    let mut slow = connect(&h.path);
    let mut batch = String::new();
    for i in 0..100 {
        batch.push_str(&format!(
            "{{\"id\":{i},\"cmd\":\"logs\",\"pod\":\"big\"}}\n"
        ));
    }
    slow.write_all(batch.as_bytes()).unwrap();
    let big = "y".repeat(64 * 1024);
    let mut big_replies = 0;
    let mut handler = |server: &mut Server, registry: &Registry, inc: Incoming| {
        let line = match inc.request {
            Ok(r) if r.cmd.name() == "logs" => {
                big_replies += 1;
                protocol::reply_ok(&r.id, json!({"log": big}))
            }
            Ok(r) => protocol::reply_ok(&r.id, json!({"cmd": r.cmd.name()})),
            Err(e) => e.reply(),
        };
        server.send(registry, inc.conn, &line);
    };
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut fast = connect(&path);
        for i in 0..20 {
            fast.write_all(format!("{{\"id\":{i},\"cmd\":\"version\"}}\n").as_bytes())
                .unwrap();
            let v = read_lines(&fast, 1).remove(0);
            assert_eq!(v["id"], json!(i));
        }
        tx.send(fast).unwrap();
    });
    let mut fast = None;
    h.run_until(
        |_| {
            fast = fast.take().or_else(|| rx.try_recv().ok());
            fast.is_some()
        },
        &mut handler,
    );
    // What the kernel buffers plus one reply over the bound: a handful, not a hundred.
    assert!(big_replies < 10, "{big_replies} big replies built");
    assert!(h.server.memory() < 2 * 1024 * 1024, "{}", h.server.memory());
    drop((slow, fast));
}

#[test]
fn a_cut_client_that_still_does_not_read_is_closed_after_the_grace_freeing_its_slot_and_buffers() {
    let mut h = Harness::new();
    let (slow, _) = stalled_behind_a_big_reply(&mut h);
    let registry = h.poll.registry();
    let cut_at = Instant::now() + SWEEP_EVERY;
    h.server.begin_turn(registry, cut_at);
    assert!(h.server.conns.iter().flatten().all(|c| c.closing), "cut");
    assert_eq!(h.server.connection_count(), 1, "kept for the grace");
    // It never reads: once the grace is over, the next sweep closes it.
    h.server
        .begin_turn(registry, cut_at + CLOSE_GRACE + SWEEP_EVERY);
    assert_eq!(h.server.connection_count(), 0);
    assert_eq!(h.server.memory(), 0, "its buffers went with it");
    assert_eq!(
        h.server.next_deadline(),
        None,
        "no timer once nothing is open"
    );
    drop(slow);
}

#[test]
fn over_the_memory_budget_non_admins_wait_and_admins_are_served_until_memory_is_freed() {
    let mut h = Harness::new();
    h.server.set_limits(Limits {
        memory_budget: 1024 * 1024,
        ..Limits::default()
    });
    h.server.strangers = true;
    // A non-admin that never reads a 4 MiB reply holds client buffers over the budget.
    let mut hog = connect(&h.path);
    hog.write_all(b"{\"id\":1,\"cmd\":\"version\"}\n").unwrap();
    let big = "y".repeat(4 << 20);
    let mut answered = false;
    while !answered {
        h.turn(
            &mut |server: &mut Server, registry: &Registry, inc: Incoming| {
                answered = true;
                let r = inc.request.unwrap();
                server.send(
                    registry,
                    inc.conn,
                    &protocol::reply_ok(&r.id, json!({"log": big})),
                );
            },
        );
    }
    assert!(h.server.memory() >= 1024 * 1024, "{}", h.server.memory());
    let mut waiter = connect(&h.path);
    waiter
        .write_all(b"{\"id\":2,\"cmd\":\"version\"}\n")
        .unwrap();
    let taken = std::cell::Cell::new(0);
    for _ in 0..20 {
        h.turn(&mut |server, registry, inc| {
            taken.set(taken.get() + 1);
            echo(server, registry, inc)
        });
    }
    assert_eq!(
        taken.get(),
        0,
        "a non-admin is not read while client buffers are over the budget"
    );
    // An admin still is.
    h.server.strangers = false;
    let mut admin = connect(&h.path);
    admin
        .write_all(b"{\"id\":3,\"cmd\":\"version\"}\n")
        .unwrap();
    h.run_until(|_| taken.get() > 0, &mut |server, registry, inc| {
        taken.set(taken.get() + 1);
        echo(server, registry, inc)
    });
    assert_eq!(read_lines(&admin, 1)[0]["id"], json!(3));
    // Once the hog goes, the waiting non-admin is read without a new event of its own.
    drop(hog);
    h.run_until(|_| taken.get() > 1, &mut |server, registry, inc| {
        taken.set(taken.get() + 1);
        echo(server, registry, inc)
    });
    assert_eq!(read_lines(&waiter, 1)[0]["id"], json!(2));
}

#[test]
fn a_stalled_client_is_cut_after_the_idle_timeout_at_a_line_end() {
    let mut h = Harness::new();
    let (mut slow, conn) = stalled_behind_a_big_reply(&mut h);
    std::thread::sleep(SWEEP_EVERY + Duration::from_millis(50));
    h.turn(&mut echo);
    assert!(h.server.conns.iter().flatten().all(|c| c.closing), "cut");
    // Were it to read again, it gets the whole line it was in, then the error, then EOF.
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = std::io::Read::read_to_string(&mut slow, &mut all);
        all
    });
    h.run_until(|s| !s.is_open(conn), &mut echo);
    let all = reader.join().unwrap();
    let lines: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:.80}")))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0]["result"]["log"].as_str().map(str::len),
        Some(4 << 20)
    );
    assert!(
        lines[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("read nothing")
    );
}

#[test]
fn one_reply_larger_than_the_output_bound_reaches_a_reading_client() {
    let mut h = Harness::new();
    let big = "z".repeat(OUTPUT_HIGH * 4);
    let mut handler = |server: &mut Server, registry: &Registry, inc: Incoming| {
        let line = match inc.request {
            Ok(r) => protocol::reply_ok(&r.id, json!({"status": big})),
            Err(e) => e.reply(),
        };
        server.send(registry, inc.conn, &line);
    };
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut c = connect(&path);
        c.write_all(b"{\"id\":7,\"cmd\":\"status\"}\n").unwrap();
        tx.send(read_lines(&c, 1).remove(0)).unwrap();
    });
    let v = h.run_until_received(&rx, &mut handler);
    assert_eq!(v["id"], json!(7));
    assert_eq!(
        v["result"]["status"].as_str().map(str::len),
        Some(OUTPUT_HIGH * 4)
    );
    h.run_until(|s| s.memory() < 64 * 1024, &mut echo);
}

#[test]
fn a_reply_sent_in_parts_arrives_whole_and_in_order_when_the_socket_takes_only_some_of_it() {
    let mut h = Harness::new();
    // Far more than a Unix socket buffers, and a client that reads only after a while: the
    // first sendmsg takes part of the parts, the rest waits in the connection's buffer.
    let middle: String = (0..OUTPUT_HIGH * 4)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let mut handler = |server: &mut Server, registry: &Registry, inc: Incoming| {
        let Ok(r) = inc.request else {
            return;
        };
        let (before, after) = protocol::reply_ok_around(&r.id);
        let quoted = format!("\"{middle}\"");
        let parts = [before.as_bytes(), quoted.as_bytes(), after.as_bytes()];
        assert!(server.send_parts(registry, inc.conn, &parts));
    };
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut c = connect(&path);
        c.write_all(b"{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"status\"}\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        tx.send(read_lines(&c, 2)).unwrap();
    });
    let lines = h.run_until_received(&rx, &mut handler);
    for (n, v) in lines.iter().enumerate() {
        assert_eq!(v["id"], json!(n + 1));
        assert_eq!(v["ok"], json!(true));
        assert_eq!(v["result"].as_str(), Some(middle.as_str()));
    }
}

#[test]
fn two_hundred_concurrent_connections_are_served() {
    let mut h = Harness::new();
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut clients: Vec<StdStream> = (0..200).map(|_| connect(&path)).collect();
        for (i, c) in clients.iter_mut().enumerate() {
            c.write_all(format!("{{\"id\":{i},\"cmd\":\"status\"}}\n").as_bytes())
                .unwrap();
        }
        for (i, c) in clients.iter().enumerate() {
            assert_eq!(read_lines(c, 1)[0]["id"], json!(i));
        }
        tx.send(clients.len()).unwrap();
    });
    let mut got = None;
    let mut peak = 0;
    h.run_until(
        |s| {
            peak = peak.max(s.connection_count());
            got = got.take().or_else(|| rx.try_recv().ok());
            got.is_some()
        },
        &mut echo,
    );
    assert_eq!(got, Some(200));
    assert_eq!(peak, 200);
}

fn first_line_then_eof(c: StdStream) -> mpsc::Receiver<(String, usize)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(&c);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let mut rest = String::new();
        let n = reader.read_line(&mut rest).unwrap_or(0);
        tx.send((line, n)).unwrap();
    });
    rx
}

#[test]
fn connections_beyond_the_limit_get_busy_and_are_closed() {
    let mut h = Harness::new();
    h.server.set_limits(Limits {
        max_connections: 2,
        ..Limits::default()
    });
    // The test runs as the server's own uid (an admin): judge it a stranger.
    h.server.strangers = true;
    let a = connect(&h.path);
    let b = connect(&h.path);
    h.run_until(|s| s.connection_count() == 2, &mut echo);
    let rx = first_line_then_eof(connect(&h.path));
    let (line, n) = h.run_until_received(&rx, &mut echo);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["error"]["kind"], json!("busy"));
    assert_eq!(n, 0, "closed after the error line");
    drop((a, b));
}

#[test]
fn per_uid_cap_refuses_the_next_connection_with_a_clear_error() {
    let mut h = Harness::new();
    h.server.strangers = true;
    h.server.set_limits(Limits {
        max_per_uid: 3,
        ..Limits::default()
    });
    let keep: Vec<StdStream> = (0..3).map(|_| connect(&h.path)).collect();
    h.run_until(|s| s.connection_count() == 3, &mut echo);
    let rx = first_line_then_eof(connect(&h.path));
    let (line, _) = h.run_until_received(&rx, &mut echo);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["error"]["kind"], json!("busy"));
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("max_connections_per_uid = 3"), "{msg}");
    drop(keep);
}

#[test]
fn an_admin_evicts_the_newest_non_admin_when_full() {
    let mut h = Harness::new();
    h.server.set_limits(Limits {
        max_connections: 2,
        ..Limits::default()
    });
    let old = connect(&h.path);
    let newest = connect(&h.path);
    h.run_until(|s| s.connection_count() == 2, &mut echo);
    // Make the two open connections non-admins (as if another uid had opened them).
    for c in h.server.conns.iter_mut().flatten() {
        c.admin = false;
    }
    let rx = first_line_then_eof(newest);
    let mut admin = connect(&h.path);
    admin
        .write_all(b"{\"id\":1,\"cmd\":\"version\"}\n")
        .unwrap();
    let path = h.path.clone();
    let (tx, rx2) = mpsc::channel();
    std::thread::spawn(move || {
        tx.send(read_lines(&admin, 1).remove(0)).unwrap();
        drop(path);
    });
    let (mut evicted, mut answered) = (None, None);
    h.run_until(
        |_| {
            evicted = evicted.take().or_else(|| rx.try_recv().ok());
            answered = answered.take().or_else(|| rx2.try_recv().ok());
            evicted.is_some() && answered.is_some()
        },
        &mut echo,
    );
    let (line, n) = evicted.unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("administrator")
    );
    assert_eq!(n, 0);
    assert_eq!(answered.unwrap()["id"], json!(1));
    drop(old);
}

/// The hang-up of the connection an admin evicts comes in the same batch of events as the
/// admin's connection, after it: the admin's connection takes the freed slot, and the late
/// hang-up must not be taken for its own (it would be closed, its reply dropped: the CLI saw
/// `closed the connection without answering` under a connection flood).
#[test]
fn a_late_hang_up_of_an_evicted_connection_does_not_close_the_admin_that_took_its_slot() {
    let mut h = Harness::new();
    h.server.set_limits(Limits {
        max_connections: 2,
        ..Limits::default()
    });
    let old = connect(&h.path);
    let newest = connect(&h.path);
    h.run_until(|s| s.connection_count() == 2, &mut echo);
    for c in h.server.conns.iter_mut().flatten() {
        c.admin = false;
    }
    // The admin connects and asks first; then the newest non-admin hangs up: epoll(7) reports
    // the listener before that hang-up.
    let mut admin = connect(&h.path);
    admin
        .write_all(b"{\"id\":1,\"cmd\":\"version\"}\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    drop(newest);
    std::thread::sleep(Duration::from_millis(20));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(&admin).read_line(&mut line);
        tx.send(line).unwrap();
    });
    let line = h.run_until_received(&rx, &mut echo);
    assert!(
        !line.is_empty(),
        "the admin's connection was closed without an answer"
    );
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id"], json!(1), "{line}");
    drop(old);
}

#[test]
fn idle_connections_are_closed_after_the_timeout() {
    let mut h = Harness::new();
    h.server.set_limits(Limits {
        idle_timeout: Duration::from_millis(1),
        ..Limits::default()
    });
    let c = connect(&h.path);
    h.run_until(|s| s.connection_count() == 1, &mut echo);
    let rx = first_line_then_eof(c);
    std::thread::sleep(SWEEP_EVERY);
    let (line, n) = h.run_until_received(&rx, &mut echo);
    assert!(line.contains("client_idle_timeout_seconds"), "{line}");
    assert_eq!(n, 0);
    assert_eq!(h.server.connection_count(), 0);
}

#[test]
fn a_replaced_socket_file_is_noticed_and_bound_again() {
    let mut h = Harness::new();
    // Someone renames the directory away and puts their own socket at the path.
    let run = h.path.parent().unwrap().to_path_buf();
    let moved = run.with_file_name("moved");
    std::fs::rename(&run, &moved).unwrap();
    std::fs::create_dir(&run).unwrap();
    let impostor = std::os::unix::net::UnixListener::bind(&h.path).unwrap();
    assert!(h.server.check_socket_file(h.poll.registry()).unwrap());
    drop(impostor);
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut c = connect(&path);
        c.write_all(b"{\"id\":3,\"cmd\":\"version\"}\n").unwrap();
        tx.send(read_lines(&c, 1).remove(0)).unwrap();
    });
    let got = h.run_until_received(&rx, &mut echo);
    assert_eq!(got["id"], json!(3));
    assert!(!h.server.check_socket_file(h.poll.registry()).unwrap());
}

#[test]
fn an_ancestor_renamed_away_is_noticed_by_the_watch_without_a_timer() {
    let mut h = Harness::new();
    // Idle: no connection, nothing due, so the runtime may sleep for ever.
    assert_eq!(h.server.next_deadline(), None);
    let run = h.path.parent().unwrap().to_path_buf();
    std::fs::rename(&run, run.with_file_name("moved")).unwrap();
    std::fs::create_dir(&run).unwrap();
    let impostor = std::os::unix::net::UnixListener::bind(&h.path).unwrap();
    // Only events are handled here (the sweep is not due): the watch alone must re-bind.
    h.events_until("the watch never fired", |s| {
        !s.check_socket_file_is_needed()
    });
    drop(impostor);
    // The path's new directory is watched too: deleting the socket again is noticed.
    std::fs::remove_file(&h.path).unwrap();
    h.events_until("the re-armed watch never fired", |s| {
        !s.check_socket_file_is_needed()
    });
    assert_eq!(h.server.next_deadline(), None);
}

#[test]
fn a_failed_rebind_keeps_checking_on_the_timer_until_the_path_is_ours_again() {
    let mut h = Harness::new();
    assert_eq!(h.server.next_deadline(), None);
    // The directory is replaced by a plain file when vigil looks: binding again fails, and no
    // inotify event need follow (as when an impostor takes the path between our look and our
    // bind).
    let run = h.path.parent().unwrap().to_path_buf();
    std::fs::rename(&run, run.with_file_name("moved")).unwrap();
    std::fs::write(&run, b"not a directory").unwrap();
    h.server.check_socket_file_logged(h.poll.registry());
    assert!(h.server.check_socket_file_is_needed());
    let due = h
        .server
        .next_deadline()
        .expect("a failed check keeps the sweep's timer running");
    std::fs::remove_file(&run).unwrap();
    std::fs::create_dir(&run).unwrap();
    let impostor = std::os::unix::net::UnixListener::bind(&h.path).unwrap();
    // No event is delivered here: the timer alone must find the impostor and bind again.
    h.server.begin_turn(h.poll.registry(), due);
    assert!(!h.server.check_socket_file_is_needed());
    drop(impostor);
    assert_eq!(
        h.server.next_deadline(),
        None,
        "sure again: the timer stops"
    );
}

#[test]
fn apply_settings_changes_the_mode_and_the_admins_of_open_connections() {
    let mut h = Harness::new();
    let c = connect(&h.path);
    h.run_until(|s| s.connection_count() == 1, &mut echo);
    h.server.euid = u32::MAX;
    let me = nix::unistd::geteuid().as_raw();
    let access = Access {
        mode: 0o666,
        admin_uids: vec![me],
        ..Access::default()
    };
    h.server.apply_settings(&access, Limits::default()).unwrap();
    assert_eq!(
        std::fs::metadata(&h.path).unwrap().permissions().mode() & 0o777,
        0o666
    );
    assert!(h.server.conns.iter().flatten().all(|c| c.admin));
    let access = Access {
        mode: 0o600,
        ..Access::default()
    };
    h.server.apply_settings(&access, Limits::default()).unwrap();
    assert_eq!(
        std::fs::metadata(&h.path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        h.server.conns.iter().flatten().all(|c| c.admin),
        me == 0,
        "only root stays an admin"
    );
    drop(c);
}

#[test]
fn supplementary_groups_are_read_from_the_peer() {
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = UnixStream::from_std(a);
    let groups = peer_groups(&a).unwrap();
    let mut mine: Vec<u32> = nix::unistd::getgroups()
        .unwrap()
        .iter()
        .map(|g| g.as_raw())
        .collect();
    let mut got = groups.clone();
    mine.sort();
    got.sort();
    assert_eq!(got, mine);
    let peer = PeerCred {
        pid: 1,
        uid: 4242,
        gid: 4242,
    };
    let access = Access {
        admin_gids: vec![77],
        ..Access::default()
    };
    assert!(is_admin(&access, 0, &peer, &[5, 77]));
    assert!(!is_admin(&access, 0, &peer, &[5]));
}

#[test]
fn half_closed_client_gets_its_answers_then_the_connection_closes() {
    let mut h = Harness::new();
    let path = h.path.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = connect(&path);
        // No trailing newline: the last line before EOF still counts.
        s.write_all(b"{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"version\"}")
            .unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut all = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut all);
        tx.send(all).unwrap();
    });
    let all = h.run_until_received(&rx, &mut echo);
    let ids: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(1), json!(2)]);
    assert_eq!(h.server.connection_count(), 0);
}

#[test]
fn a_stream_is_fed_only_while_the_client_has_room_and_then_requests_resume() {
    let mut h = Harness::new();
    let mut client = connect(&h.path);
    client
        .write_all(b"{\"id\":7,\"cmd\":\"logs\",\"pod\":\"p\"}\n{\"id\":8,\"cmd\":\"version\"}\n")
        .unwrap();
    let mut stream_conn = None;
    while stream_conn.is_none() {
        h.turn(&mut |server, _registry, inc| {
            server.start_stream(inc.conn, Some(protocol::LOGS_REPLY_CUT));
            stream_conn = Some(inc.conn);
        });
    }
    let conn = stream_conn.unwrap();
    let registry = h.poll.registry();
    let id = RequestId::from(json!(7));
    assert!(h.server.push(
        registry,
        conn,
        protocol::logs_reply_open(&id, "p", "c", 0).as_bytes()
    ));
    // The client does not read yet: chunks stop once it has no room.
    let chunk = "x".repeat(8 * 1024);
    let mut pushed = 0;
    while h.server.hungry_streams().contains(&conn) {
        h.server.push(registry, conn, chunk.as_bytes());
        pushed += 1;
        assert!(pushed < 1000, "never full");
    }
    let reader = std::thread::spawn(move || read_lines(&client, 2));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut more = 0;
    while more < 100 {
        assert!(Instant::now() < deadline);
        h.turn(&mut echo);
        let registry = h.poll.registry();
        if h.server.hungry_streams().contains(&conn) {
            h.server.push(registry, conn, chunk.as_bytes());
            more += 1;
        }
    }
    let registry = h.poll.registry();
    h.server
        .push(registry, conn, protocol::logs_reply_close(0).as_bytes());
    h.server.end_stream(registry, conn);
    // The pipelined `version` is answered only after the stream.
    let mut lines = None;
    h.run_until(
        |_| {
            if reader.is_finished() {
                lines = Some(true);
            }
            lines.is_some()
        },
        &mut echo,
    );
    let lines = reader.join().unwrap();
    assert_eq!(
        lines[0]["result"]["log"].as_str().unwrap().len(),
        (pushed + more) * chunk.len()
    );
    assert_eq!(lines[1]["id"], json!(8));
    drop(h.server.take_closed());
    // A line for a closed connection is dropped.
    let fake = ConnId {
        index: 999,
        generation: 0,
    };
    assert!(!h.server.send(h.poll.registry(), fake, "{}\n"));
}

#[test]
fn peer_credentials_are_reported() {
    let mut h = Harness::new();
    let mut s = connect(&h.path);
    s.write_all(b"{\"cmd\":\"version\"}\n").unwrap();
    let mut peer = None;
    while peer.is_none() {
        h.turn(&mut |_, _, inc| peer = Some(inc.peer));
    }
    let peer = peer.unwrap();
    assert_eq!(peer.pid, std::process::id() as i32);
    assert_eq!(peer.uid, nix::unistd::geteuid().as_raw());
    assert_eq!(peer.gid, nix::unistd::getegid().as_raw());
}

#[test]
fn socket_mode_is_applied_and_parent_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("s.sock");
    let server = Server::bind(&path, &mode(0o600), CONN_BASE).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    let parent = std::fs::metadata(path.parent().unwrap()).unwrap();
    assert_eq!(parent.permissions().mode() & 0o777, 0o755);
    drop(server);
    let path2 = dir.path().join("g.sock");
    let _s = Server::bind(&path2, &mode(0o660), CONN_BASE).unwrap();
    assert_eq!(
        std::fs::metadata(&path2).unwrap().permissions().mode() & 0o7777,
        0o660
    );
}

#[test]
#[ignore = "needs root (the check applies to a root vigil)"]
fn a_socket_directory_another_uid_made_first_in_a_sticky_directory_is_refused_at_bind() {
    // The start-up check saw no `run` yet (fine: vigil would create it under a sticky
    // directory); a user made it before vigil did.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::chown(&run, Some(65534), Some(65534)).unwrap();
    let path = run.join("vigil.sock");
    let Err(e) = Server::bind(&path, &mode(0o600), CONN_BASE) else {
        panic!("bound in a directory uid 65534 owns");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("socket directory") && msg.contains("owner uid 65534"),
        "{msg}"
    );
    assert!(!path.exists(), "no socket in the user's directory");
    // The same path is fine once the user's directory is gone and vigil makes its own.
    std::fs::remove_dir(&run).unwrap();
    let _s = Server::bind(&path, &mode(0o600), CONN_BASE).unwrap();
    assert_eq!(std::fs::metadata(&run).unwrap().uid(), 0);
}

#[test]
#[ignore = "needs root (the check applies to a root vigil)"]
fn a_socket_directory_that_became_another_uids_after_start_is_not_bound_into_again() {
    let mut h = Harness::new();
    let run = h.path.parent().unwrap().to_path_buf();
    std::os::unix::fs::chown(&run, Some(65534), Some(65534)).unwrap();
    // The user replaces the socket with their own: vigil notices, judges the directory, and
    // refuses to bind there again.
    std::fs::remove_file(&h.path).unwrap();
    let impostor = std::os::unix::net::UnixListener::bind(&h.path).unwrap();
    let Err(e) = h.server.check_socket_file(h.poll.registry()) else {
        panic!("bound again in a directory uid 65534 owns");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("socket directory") && msg.contains("owner uid 65534"),
        "{msg}"
    );
    assert!(
        h.server.check_socket_file_is_needed(),
        "the user's socket is left"
    );
    drop(impostor);
    std::fs::remove_file(&h.path).unwrap();
    // The user puts a symlink to a root-owned private file at the path; the next look (the
    // sweep's timer) and a reload that widens the mode leave the file as it was.
    let secret = h._dir.path().join("secret");
    std::fs::write(&secret, b"root's").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&secret, &h.path).unwrap();
    h.server.check_socket_file_logged(h.poll.registry());
    let wide = Access {
        mode: 0o666,
        group: Some(65534),
        ..Access::default()
    };
    h.server.apply_settings(&wide, Limits::default()).unwrap();
    let meta = std::fs::metadata(&secret).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!((meta.uid(), meta.gid()), (0, 0));
    // Root takes the directory back: the timer binds again, with the reloaded mode.
    std::fs::remove_file(&h.path).unwrap();
    std::os::unix::fs::chown(&run, Some(0), Some(0)).unwrap();
    h.server.check_socket_file_logged(h.poll.registry());
    let meta = std::fs::symlink_metadata(&h.path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o666);
    assert_eq!(meta.gid(), 65534);
}

#[test]
fn a_symlink_at_the_socket_path_is_never_followed_when_the_mode_is_applied() {
    let mut h = Harness::new();
    let target = h._dir.path().join("target");
    std::fs::write(&target, b"someone's").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&h.path).unwrap();
    std::os::unix::fs::symlink(&target, &h.path).unwrap();
    h.server
        .apply_settings(&mode(0o666), Limits::default())
        .unwrap();
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    // Replaced by a socket someone else bound: not vigil's either, left alone.
    std::fs::remove_file(&h.path).unwrap();
    let other = std::os::unix::net::UnixListener::bind(&h.path).unwrap();
    let before = std::fs::metadata(&h.path).unwrap().permissions().mode() & 0o7777;
    h.server
        .apply_settings(&mode(0o606), Limits::default())
        .unwrap();
    assert_eq!(
        std::fs::metadata(&h.path).unwrap().permissions().mode() & 0o7777,
        before
    );
    drop(other);
}

#[test]
#[ignore = "needs root (chown to another group)"]
fn socket_group_is_applied() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (chown to another group); run it as root or without \
         --include-ignored"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let gid = nix::unistd::getegid().as_raw() + 4321;
    let _s = Server::bind(
        &path,
        &Access {
            group: Some(gid),
            ..mode(0o660)
        },
        CONN_BASE,
    )
    .unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().gid(), gid);
}

#[test]
fn stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "a dropped listener leaves its file");
    let server = Server::bind(&path, &mode(0o600), CONN_BASE).unwrap();
    assert!(StdStream::connect(&path).is_ok());
    drop(server);
}

#[test]
fn live_socket_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let _live = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let err = Server::bind(&path, &mode(0o600), CONN_BASE).err().unwrap();
    assert!(matches!(err, ControlError::AlreadyListening { .. }));
    assert_eq!(
        err.to_string(),
        format!("another vigil is already listening on {}", path.display())
    );
    assert!(StdStream::connect(&path).is_ok());
}

#[test]
fn a_regular_file_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    std::fs::write(&path, "keep").unwrap();
    let err = Server::bind(&path, &mode(0o600), CONN_BASE).err().unwrap();
    assert!(matches!(err, ControlError::NotASocket { .. }));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
}

#[test]
fn drop_removes_the_socket_file_but_not_a_successors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let server = Server::bind(&path, &mode(0o600), CONN_BASE).unwrap();
    server.shutdown();
    assert!(!path.exists());
    let first = Server::bind(&path, &mode(0o600), CONN_BASE).unwrap();
    std::fs::remove_file(&path).unwrap();
    let _second = std::os::unix::net::UnixListener::bind(&path).unwrap();
    drop(first);
    assert!(path.exists(), "someone else's socket must survive");
}

#[test]
fn owns_covers_listener_and_connection_tokens_only() {
    let mut h = Harness::new();
    assert!(h.server.owns(LISTENER));
    assert!(!h.server.owns(Token(CONN_BASE)));
    let _c = connect(&h.path);
    h.run_until(|s| s.connection_count() == 1, &mut echo);
    assert!(h.server.owns(Token(CONN_BASE)));
    assert!(!h.server.owns(Token(CONN_BASE + 1)));
    assert!(!h.server.owns(Token(0)));
}

/// What the next instance inherits of `handed`: a duplicate of each descriptor (the exec
/// keeps the number; here the first server is dropped, closing its own).
fn inherit(handed: &[Handover]) -> Vec<Inherited> {
    handed
        .iter()
        .map(|h| {
            // SAFETY: the number is the first server's open connection, borrowed for the dup.
            #[allow(unsafe_code)]
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(h.fd) };
            Inherited {
                fd: fd.try_clone_to_owned().unwrap(),
                input: h.input.clone(),
                output: h.output.clone(),
                sent_open: h.sent_open,
                closing: h.closing,
                eof: h.eof,
                in_flight: h.in_flight,
            }
        })
        .collect()
}

#[test]
fn at_an_upgrade_a_half_sent_reply_is_finished_and_requests_read_but_not_answered_are_answered_by_the_next_server()
 {
    let mut h = Harness::new();
    // Far more than a socket buffer holds: a client that does not read stays mid-line, and
    // the request it pipelined behind is read but not taken (its output is over the mark).
    let big = "q".repeat(4 << 20);
    let mut handler = |server: &mut Server, registry: &Registry, inc: Incoming| {
        let Ok(r) = inc.request else { return };
        let line = if r.id.as_json() == "2" {
            protocol::reply_ok(&r.id, json!({"status": big}))
        } else {
            protocol::reply_ok(&r.id, json!({"status": "small"}))
        };
        server.send(registry, inc.conn, &line);
    };
    let small = connect(&h.path);
    let mut big_client = connect(&h.path);
    (&small)
        .write_all(b"{\"id\":1,\"cmd\":\"status\"}\n")
        .unwrap();
    big_client
        .write_all(b"{\"id\":2,\"cmd\":\"status\"}\n{\"id\":3,\"cmd\":\"version\"}\n")
        .unwrap();
    let mut turns = 0;
    h.run_until(
        |_| {
            turns += 1;
            turns > 20
        },
        &mut handler,
    );
    assert_eq!(read_lines(&small, 1)[0]["result"]["status"], "small");
    let handed = h.server.handover("NOTICE\n", &|_| Resume::Cut);
    assert_eq!(handed.len(), 2, "{handed:?}");
    let inherited = inherit(&handed);
    drop(h);
    // The next instance: another server takes them over and answers what is left.
    let mut next = Harness::new();
    let taken = next
        .server
        .take_over(next.poll.registry(), inherited, Instant::now());
    assert_eq!((taken.kept, taken.closed), (2, 0));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(read_lines(&big_client, 2)).unwrap());
    let got = next.run_until_received(&rx, &mut echo);
    assert_eq!(
        got[0]["result"]["status"].as_str().map(str::len),
        Some(4 << 20),
        "the reply the first server had begun, whole"
    );
    assert_eq!(got[1]["id"], 3);
    assert_eq!(got[1]["result"]["cmd"], "version", "{}", got[1]);
    // The other one is served on as if accepted here.
    (&small)
        .write_all(b"{\"id\":4,\"cmd\":\"status\"}\n")
        .unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(read_lines(&small, 1)).unwrap());
    let got = next.run_until_received(&rx, &mut echo);
    assert_eq!(got[0]["id"], 4);
}

#[test]
fn connections_handed_over_past_the_per_uid_cap_are_closed() {
    let mut h = Harness::new();
    let clients: Vec<StdStream> = (0..3).map(|_| connect(&h.path)).collect();
    h.run_until(|s| s.connection_count() == 3, &mut echo);
    let handed = h.server.handover("NOTICE\n", &|_| Resume::Cut);
    let inherited = inherit(&handed);
    drop(h);
    let mut next = Harness::new();
    next.server.strangers = true;
    next.server.set_limits(Limits {
        max_per_uid: 2,
        ..Limits::default()
    });
    let taken = next
        .server
        .take_over(next.poll.registry(), inherited, Instant::now());
    assert_eq!((taken.kept, taken.closed), (2, 1));
    assert_eq!(next.server.connection_count(), 2);
    // The one closed sees the end of its connection.
    let ended = clients.iter().filter(|c| {
        let mut b = [0u8; 1];
        c.set_nonblocking(true).unwrap();
        matches!((&**c).read(&mut b), Ok(0))
    });
    assert_eq!(ended.count(), 1);
}

/// With an idle timeout of 1 ms, a client asks for a 4 MiB reply and does not read it:
/// returns its stream and connection once the reply is queued.
fn stalled_behind_a_big_reply(h: &mut Harness) -> (StdStream, ConnId) {
    h.server.set_limits(Limits {
        idle_timeout: Duration::from_millis(1),
        ..Limits::default()
    });
    let mut slow = connect(&h.path);
    slow.write_all(b"{\"id\":1,\"cmd\":\"logs\",\"pod\":\"big\"}\n")
        .unwrap();
    let big = "y".repeat(4 << 20);
    let mut conn = None;
    while conn.is_none() {
        h.turn(
            &mut |server: &mut Server, registry: &Registry, inc: Incoming| {
                conn = Some(inc.conn);
                let r = inc.request.unwrap();
                server.send(
                    registry,
                    inc.conn,
                    &protocol::reply_ok(&r.id, json!({"log": big})),
                );
            },
        );
    }
    (slow, conn.unwrap())
}

#[test]
fn client_memory_is_checked_before_every_pipelined_request_so_all_clients_stay_within_the_budget_and_one_reply()
 {
    let mut h = Harness::new();
    const BUDGET: usize = 2 * 1024 * 1024;
    const REPLY: usize = 32 * 1024;
    h.server.set_limits(Limits {
        memory_budget: BUDGET,
        max_per_uid: 1000,
        ..Limits::default()
    });
    h.server.strangers = true;
    // 64 clients, each pipelining 300 requests in one write (one read holds hundreds of them),
    // never reading its replies: without a check before each request each would hold 64 KiB
    // plus a reply unread, three times the budget together.
    let batch = b"{\"cmd\":\"version\"}\n".repeat(300);
    let clients: Vec<StdStream> = (0..64)
        .map(|_| {
            let mut s = connect(&h.path);
            s.write_all(&batch).unwrap();
            s
        })
        .collect();
    let big = "z".repeat(REPLY);
    let most = std::cell::Cell::new(0);
    let taken = std::cell::Cell::new(0);
    for _ in 0..300 {
        h.turn(&mut |server, registry, inc| {
            let r = inc.request.unwrap();
            server.send(registry, inc.conn, &protocol::reply_ok(&r.id, json!(big)));
            taken.set(taken.get() + 1);
            most.set(most.get().max(server.memory()));
        });
    }
    // The replies the kernel took count too (they wait unread in the sockets' send queues), so
    // the budget is reached after about BUDGET / REPLY of them, not one per client.
    assert!(
        taken.get() > BUDGET / REPLY / 2,
        "only {} requests taken",
        taken.get()
    );
    assert!(
        most.get() >= BUDGET,
        "the budget was reached: {}",
        most.get()
    );
    // A reply's line is the reply and its envelope; input is read a chunk at a time.
    assert!(
        most.get() <= BUDGET + 2 * REPLY + READ_CHUNK,
        "client buffers reached {} with a budget of {BUDGET}",
        most.get()
    );
    drop(clients);
    h.run_until(|s| s.connection_count() == 0, &mut echo);
    assert_eq!(h.server.memory(), 0, "released when the clients leave");
}

#[test]
fn replies_waiting_unread_in_the_kernel_count_against_the_client_memory_budget() {
    let mut h = Harness::new();
    h.server.strangers = true;
    let mut client = connect(&h.path);
    client.write_all(b"{\"cmd\":\"version\"}\n").unwrap();
    // 32 KiB fits in the socket's send queue whole: nothing waits in vigil's own buffers.
    let big = "z".repeat(32 * 1024);
    let answered = std::cell::Cell::new(false);
    for _ in 0..20 {
        h.turn(&mut |server, registry, inc| {
            let r = inc.request.unwrap();
            server.send(registry, inc.conn, &protocol::reply_ok(&r.id, json!(big)));
            answered.set(true);
        });
        if answered.get() {
            break;
        }
    }
    assert!(answered.get(), "the request was answered");
    assert!(
        h.server.memory() >= 32 * 1024,
        "a reply the client has not read is client memory: {}",
        h.server.memory()
    );
    drop(client);
    h.run_until(|s| s.connection_count() == 0, &mut echo);
    assert_eq!(h.server.memory(), 0, "released when the client leaves");
}
