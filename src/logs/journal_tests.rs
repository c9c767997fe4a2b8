//! The native protocol against a fake journal: a bound datagram socket in a temp dir whose
//! datagrams are parsed back into fields.

use super::*;
use crate::logs::forward::NOTE_INTERVAL;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Parses one native-protocol entry into its fields, in order; panics on anything malformed.
fn parse(mut data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut fields = Vec::new();
    while !data.is_empty() {
        let nl = data.iter().position(|b| *b == b'\n').expect("field ends");
        let line = &data[..nl];
        if let Some(eq) = line.iter().position(|b| *b == b'=') {
            let name = String::from_utf8(line[..eq].to_vec()).unwrap();
            assert!(valid_field_name(&name), "{name:?}");
            fields.push((name, line[eq + 1..].to_vec()));
            data = &data[nl + 1..];
        } else {
            let name = String::from_utf8(line.to_vec()).unwrap();
            assert!(valid_field_name(&name), "{name:?}");
            let rest = &data[nl + 1..];
            let len = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            fields.push((name, rest[8..8 + len].to_vec()));
            assert_eq!(rest[8 + len], b'\n', "binary field ends with a newline");
            data = &rest[9 + len..];
        }
    }
    fields
}

fn field<'a>(entry: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a str> {
    entry
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| std::str::from_utf8(v).unwrap())
}

struct FakeJournal {
    _dir: tempfile::TempDir,
    path: PathBuf,
    socket: UnixDatagram,
}

impl FakeJournal {
    fn new() -> FakeJournal {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("socket");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket.set_nonblocking(true).unwrap();
        FakeJournal {
            _dir: dir,
            path,
            socket,
        }
    }

    /// Every datagram waiting, parsed (a memfd one read from its descriptor).
    fn entries(&self) -> Vec<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        while let Some(data) = self.recv() {
            out.push(parse(&data));
        }
        out
    }

    fn recv(&self) -> Option<Vec<u8>> {
        use nix::sys::socket::{ControlMessageOwned, recvmsg};
        let mut buf = vec![0u8; 1 << 20];
        let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let msg = match recvmsg::<()>(
            self.socket.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_DONTWAIT,
        ) {
            Err(Errno::EAGAIN) => return None,
            r => r.unwrap(),
        };
        let n = msg.bytes;
        let fds: Vec<_> = msg
            .cmsgs()
            .unwrap()
            .filter_map(|c| match c {
                ControlMessageOwned::ScmRights(fds) => Some(fds),
                _ => None,
            })
            .flatten()
            .collect();
        if fds.is_empty() {
            return Some(buf[..n].to_vec());
        }
        assert_eq!(n, 0, "a datagram with a descriptor has an empty payload");
        assert_eq!(fds.len(), 1);
        // SAFETY: the descriptor was just received with SCM_RIGHTS and is owned by nobody else.
        #[allow(unsafe_code)]
        let memfd = unsafe { OwnedFd::from_raw_fd(fds[0]) };
        let seals = nix::fcntl::fcntl(&memfd, nix::fcntl::FcntlArg::F_GET_SEALS).unwrap();
        let want = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        assert_eq!(seals & want, want, "the memfd is sealed");
        let mut data = Vec::new();
        let mut f = std::fs::File::from(memfd);
        use std::io::{Read, Seek};
        f.seek(io::SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut data).unwrap();
        Some(data)
    }
}

fn origin(source: &str, stream: Stream, run: u64) -> Origin<'_> {
    Origin {
        source,
        stream,
        run: Some(run),
    }
}

#[test]
fn each_line_becomes_an_entry_with_pod_container_run_stream_and_priority() {
    let j = FakeJournal::new();
    let mut sink = JournalSink::connect(&j.path).unwrap();
    sink.push(origin("web/app", Stream::Stdout, 3), b"hello\nwor");
    sink.push(origin("web/app", Stream::Stderr, 3), b"oops\n");
    sink.flush().unwrap();
    let entries = j.entries();
    assert_eq!(entries.len(), 2, "the unfinished line is held");
    let out = &entries[0];
    assert_eq!(field(out, "MESSAGE"), Some("hello"));
    assert_eq!(field(out, "PRIORITY"), Some("6"));
    assert_eq!(field(out, "SYSLOG_IDENTIFIER"), Some("web/app"));
    assert_eq!(field(out, "VIGIL_POD"), Some("web"));
    assert_eq!(field(out, "VIGIL_CONTAINER"), Some("app"));
    assert_eq!(field(out, "VIGIL_RUN"), Some("3"));
    assert_eq!(field(out, "VIGIL_STREAM"), Some("stdout"));
    let err = &entries[1];
    assert_eq!(field(err, "MESSAGE"), Some("oops"));
    assert_eq!(field(err, "PRIORITY"), Some("3"), "stderr is err");
    assert_eq!(field(err, "VIGIL_STREAM"), Some("stderr"));
    // The held stdout line is not mixed with stderr's and comes out at EOF.
    sink.push(origin("web/app", Stream::Stdout, 3), b"ld");
    sink.finish(origin("web/app", Stream::Stdout, 3));
    sink.flush().unwrap();
    let entries = j.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(field(&entries[0], "MESSAGE"), Some("world"));
    assert!(!sink.pending());
}

#[test]
fn a_value_with_a_newline_or_binary_bytes_survives_the_round_trip() {
    let mut entry = Vec::new();
    put_field(&mut entry, "MESSAGE", b"two\nlines");
    put_field(&mut entry, "BIN", b"\x00\xff=x");
    let mut want = b"MESSAGE\n".to_vec();
    want.extend_from_slice(&9u64.to_le_bytes());
    want.extend_from_slice(b"two\nlines\nBIN=\x00\xff=x\n");
    assert_eq!(entry, want);
    let j = FakeJournal::new();
    let mut sink = JournalSink::connect(&j.path).unwrap();
    sink.event(
        "web/app",
        "Killing",
        true,
        "web/app: Killing: liveness failed:\nconnection refused",
    );
    sink.flush().unwrap();
    let e = &j.entries()[0];
    assert_eq!(
        field(e, "MESSAGE"),
        Some("web/app: Killing: liveness failed:\nconnection refused")
    );
    assert_eq!(field(e, "PRIORITY"), Some("3"), "a Warning event is err");
    assert_eq!(field(e, "SYSLOG_IDENTIFIER"), Some("vigil"));
    assert_eq!(field(e, "VIGIL_REASON"), Some("Killing"));
    assert_eq!(field(e, "VIGIL_CONTAINER"), Some("app"));
    sink.event("web", "Scheduled", false, "web: Scheduled: x");
    sink.flush().unwrap();
    let e = &j.entries()[0];
    assert_eq!(field(e, "PRIORITY"), Some("6"));
    assert_eq!(field(e, "VIGIL_POD"), Some("web"));
    assert_eq!(
        field(e, "VIGIL_CONTAINER"),
        None,
        "a pod event names no container"
    );
}

#[test]
fn an_entry_too_big_for_a_datagram_is_sent_in_a_sealed_memfd() {
    let j = FakeJournal::new();
    let mut sink = JournalSink::with_limits(&j.path, 8 << 20, 8 << 20).unwrap();
    // Larger than any socket send buffer (net.core.wmem_max is 208 KiB by default): EMSGSIZE.
    let big = vec![b'y'; 4 << 20];
    let mut chunk = big.clone();
    chunk.push(b'\n');
    sink.push(origin("web/app", Stream::Stdout, 1), &chunk);
    sink.push(origin("web/app", Stream::Stdout, 1), b"small\n");
    sink.flush().unwrap();
    let entries = j.entries();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0].iter().find(|(n, _)| n == "MESSAGE").unwrap().1,
        big
    );
    assert_eq!(field(&entries[0], "VIGIL_CONTAINER"), Some("app"));
    assert_eq!(field(&entries[1], "MESSAGE"), Some("small"), "order kept");
    assert_eq!(sink.dropped_bytes(), 0);
}

#[test]
fn a_journal_that_does_not_read_loses_whole_entries_counted_and_noted_per_container() {
    let j = FakeJournal::new();
    let mut sink = JournalSink::with_limits(&j.path, 4096, 1024).unwrap();
    let line = [b'x'; 100];
    let mut chunk = line.to_vec();
    chunk.push(b'\n');
    const LINES: usize = 20_000;
    for _ in 0..LINES {
        sink.push(origin("web/app", Stream::Stdout, 1), &chunk);
    }
    let dropped = sink.dropped_bytes();
    assert!(
        dropped > 0,
        "the fake journal never read: something was dropped"
    );
    let t0 = Instant::now();
    let mut received = 0;
    let mut notes = Vec::new();
    // Read what the journal holds, then let the sink send the rest and its note.
    for i in 0..1000 {
        for e in j.entries() {
            if field(&e, "MESSAGE").is_some_and(|m| m.starts_with("[vigil: ")) {
                notes.push(e);
            } else {
                assert_eq!(
                    field(&e, "MESSAGE").unwrap().as_bytes(),
                    line,
                    "whole lines"
                );
                received += 1;
            }
        }
        if !sink.pending() {
            break;
        }
        sink.flush_at(t0 + NOTE_INTERVAL * i).unwrap();
    }
    assert!(!sink.pending());
    let entry_len = {
        let mut e = Vec::new();
        sink.line(origin("web/app", Stream::Stdout, 1), &line, "");
        std::mem::swap(&mut e, &mut sink.queue.pop_back().unwrap().1);
        sink.queued_bytes -= e.len();
        e.len() as u64
    };
    assert_eq!(dropped % entry_len, 0, "only whole entries are dropped");
    assert_eq!(received + (dropped / entry_len) as usize, LINES);
    assert_eq!(notes.len(), 1, "one note for one flood: {notes:?}");
    let note = &notes[0];
    assert_eq!(
        field(note, "MESSAGE").unwrap(),
        format!(
            "[vigil: {} dropped]",
            super::super::forward::si_bytes(dropped)
        )
    );
    assert_eq!(field(note, "PRIORITY"), Some("4"));
    assert_eq!(field(note, "VIGIL_POD"), Some("web"));
    assert_eq!(field(note, "VIGIL_CONTAINER"), Some("app"));
}

#[test]
fn a_restarted_journal_is_reconnected_and_a_missing_one_costs_the_entry_not_the_sink() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("socket");
    let first = UnixDatagram::bind(&path).unwrap();
    let mut sink = JournalSink::connect(&path).unwrap();
    drop(first);
    std::fs::remove_file(&path).unwrap();
    // No journal at all: the entry is dropped and counted, the error names the socket.
    sink.push(origin("web/app", Stream::Stdout, 1), b"lost\n");
    let err = sink.flush().unwrap_err();
    assert!(err.to_string().contains("socket"), "{err}");
    assert!(sink.dropped_bytes() > 0);
    // journald back (a new socket at the same path): the sink reconnects by itself.
    let second = UnixDatagram::bind(&path).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(sink.connection(), 0);
    sink.push(origin("web/app", Stream::Stdout, 1), b"found\n");
    sink.flush().unwrap();
    assert_eq!(
        sink.connection(),
        1,
        "a new connection: the runtime watches the new fd"
    );
    let mut buf = vec![0u8; 4096];
    let mut messages = Vec::new();
    second.set_nonblocking(true).unwrap();
    while let Ok(n) = second.recv(&mut buf) {
        messages.push(field(&parse(&buf[..n]), "MESSAGE").unwrap().to_string());
    }
    assert_eq!(messages[0], "found");
    assert!(
        messages[1].starts_with("[vigil: ") && messages[1].ends_with(" dropped]"),
        "{messages:?}"
    );
}

#[test]
fn journal_stream_matches_only_the_descriptor_it_names() {
    use std::os::unix::fs::MetadataExt;
    let a = tempfile::tempfile().unwrap();
    let b = tempfile::tempfile().unwrap();
    let m = a.metadata().unwrap();
    let stream = format!("{}:{}", m.dev(), m.ino());
    assert!(stream_matches(&stream, a.as_fd()));
    assert!(!stream_matches(&stream, b.as_fd()));
    assert!(!stream_matches("", a.as_fd()));
    assert!(!stream_matches("garbage", a.as_fd()));
    assert!(!stream_matches(&format!("{}:x", m.dev()), a.as_fd()));
}

#[test]
fn the_setting_decides_before_the_environment() {
    let missing = Path::new("/nonexistent/journal/socket");
    assert!(!journal_wanted(
        ForwardTo::Stdout,
        Path::new(JOURNAL_SOCKET)
    ));
    assert!(journal_wanted(ForwardTo::Journal, missing));
    assert!(
        !journal_wanted(ForwardTo::Auto, missing),
        "auto needs the socket"
    );
}
