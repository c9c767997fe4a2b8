use super::*;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

#[test]
fn ring_keeps_newest_bytes_and_counts_overwritten_ones() {
    let mut b = LogBuffer::new(8);
    b.push(b"abcde");
    b.push(b"fghij");
    assert_eq!(b.tail_lines(None, false), b"cdefghij");
    assert_eq!(b.dropped_bytes(), 2);
    assert_eq!(b.total_written(), 10);
    // A chunk larger than the ring keeps only its tail.
    b.push(b"0123456789AB");
    assert_eq!(b.tail_lines(None, false), b"456789AB");
    assert_eq!(b.dropped_bytes(), 2 + 8 + 4);
    assert_eq!(b.total_written(), 22);
}

#[test]
fn new_run_keeps_previous_run_for_previous_flag() {
    let mut b = LogBuffer::new(64);
    assert!(!b.has_previous());
    b.push(b"run1 a\nrun1 b\n");
    b.new_run();
    b.push(b"run2\n");
    assert!(b.has_previous());
    assert_eq!(b.tail_lines(None, true), b"run1 a\nrun1 b\n");
    assert_eq!(b.tail_lines(None, false), b"run2\n");
    b.new_run();
    assert_eq!(b.tail_lines(None, true), b"run2\n");
    assert_eq!(b.tail_lines(None, false), b"");
}

#[test]
fn tail_returns_last_n_lines_counting_an_unterminated_last_line() {
    let mut b = LogBuffer::new(1024);
    b.push(b"one\ntwo\nthree\n");
    assert_eq!(b.tail_lines(Some(2), false), b"two\nthree\n");
    assert_eq!(b.tail_lines(Some(10), false), b"one\ntwo\nthree\n");
    assert_eq!(b.tail_lines(Some(0), false), b"");
    b.push(b"four");
    assert_eq!(b.tail_lines(Some(2), false), b"three\nfour");
    assert_eq!(b.tail_lines(Some(1), false), b"four");
}

#[test]
fn read_since_follows_across_runs_and_reports_gaps() {
    let mut b = LogBuffer::new(8);
    b.push(b"hello");
    let r = b.read_since(0);
    assert_eq!(
        (r.bytes.as_slice(), r.next, r.skipped),
        (&b"hello"[..], 5, 0)
    );
    let r2 = b.read_since(r.next);
    assert_eq!((r2.bytes.len(), r2.next), (0, 5));

    // The follower falls behind: the ring wrapped past its offset.
    b.push(b"0123456789");
    let r = b.read_since(5);
    assert_eq!(r.bytes, b"23456789");
    assert_eq!((r.next, r.skipped), (15, 2));

    // A restart while a follower is behind: it finishes the old run, then gets the new one.
    let mut b = LogBuffer::new(16);
    b.push(b"old-run\n");
    b.new_run();
    b.push(b"new\n");
    let r = b.read_since(4);
    assert_eq!((r.bytes.as_slice(), r.next), (&b"run\n"[..], 8));
    let r = b.read_since(r.next);
    assert_eq!((r.bytes.as_slice(), r.next), (&b"new\n"[..], 12));
    // Offsets past the end return nothing.
    assert!(b.read_since(99).bytes.is_empty());
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn log_file_rotates_by_size_keeping_n_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "web", "app", 10, 2).expect("open");
    let base = dir.path().join("web").join("app.log");
    assert_eq!(f.path(), base);
    assert!(f.write(b"aaaaaa\n")); // 7
    assert!(f.write(b"bbb\n")); // 11 > 10: rotate first
    assert!(f.write(b"cccccc\n")); // 4 + 7 > 10: rotate
    assert!(f.write(b"dddddddddddddddd\n")); // larger than the limit: own file
    assert_eq!(read(&base), b"dddddddddddddddd\n");
    assert_eq!(read(&dir.path().join("web/app.log.1")), b"cccccc\n");
    assert_eq!(read(&dir.path().join("web/app.log.2")), b"bbb\n");
    assert!(!dir.path().join("web/app.log.3").exists(), "only 2 kept");

    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&base), 0o640);
    assert_eq!(mode(&dir.path().join("web")), 0o750);

    // Reopening appends and knows the current size.
    drop(f);
    let mut f = LogFile::open(dir.path(), "web", "app", 20, 2).expect("reopen");
    assert!(f.write(b"e\n"));
    assert_eq!(read(&base), b"dddddddddddddddd\ne\n");
}

#[test]
fn log_file_with_zero_kept_files_truncates() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "p", "c", 4, 0).expect("open");
    assert!(f.write(b"abc\n"));
    assert!(f.write(b"xy\n"));
    assert_eq!(read(&dir.path().join("p/c.log")), b"xy\n");
    assert!(!dir.path().join("p/c.log.1").exists());
}

#[test]
fn log_file_errors_are_not_fatal_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "p", "c", 1 << 20, 1).expect("open");
    // Replace the pod directory by a file: reopening fails.
    std::fs::remove_dir_all(dir.path().join("p")).unwrap();
    f.file = None;
    std::fs::write(dir.path().join("p"), b"").unwrap();
    assert!(!f.write(b"lost\n"));
    std::fs::remove_file(dir.path().join("p")).unwrap();
    assert!(f.write(b"back\n"));
    assert_eq!(read(&dir.path().join("p/c.log")), b"back\n");
}

/// Collects everything the forwarder writes through a pipe.
fn forwarded(fw: &mut Forwarder) -> String {
    let (r, w) = crate::process::pipe_nonblocking().unwrap();
    fw.flush(w.as_fd()).unwrap();
    drop(w);
    let mut buf = Vec::new();
    drain_pipe(r.as_fd(), &mut buf, usize::MAX).unwrap();
    String::from_utf8(buf).unwrap()
}

#[test]
fn forwarder_prefixes_lines_and_holds_partial_lines_per_source() {
    let mut fw = Forwarder::new(4096, 64);
    fw.push("web/app", b"hello\nwor");
    fw.push("db/pg", b"ready\n");
    assert_eq!(forwarded(&mut fw), "web/app | hello\ndb/pg | ready\n");
    assert!(!fw.pending());
    fw.push("web/app", b"ld\n\nlast");
    assert_eq!(forwarded(&mut fw), "web/app | world\nweb/app | \n");
    fw.finish("web/app");
    assert_eq!(forwarded(&mut fw), "web/app | last\n");
}

#[test]
fn forwarder_splits_overlong_partial_lines_with_a_marker() {
    let mut fw = Forwarder::new(4096, 4);
    fw.push("p/c", b"abcdefghij");
    assert_eq!(
        forwarded(&mut fw),
        format!("p/c | abcd{SPLIT_MARKER}\np/c | efgh{SPLIT_MARKER}\n")
    );
    fw.push("p/c", b"\n");
    assert_eq!(forwarded(&mut fw), "p/c | ij\n");
}

#[test]
fn forwarder_drops_when_full_and_notes_it_once_writing_resumes() {
    let mut fw = Forwarder::new(32, 64);
    fw.push("p/c", b"0123456789\n"); // 17 bytes queued
    fw.push("p/c", b"0123456789\n"); // would be 34 > 32: dropped
    fw.push("p/c", b"xx\n"); // 9 bytes dropped too: the note must come first and does not fit
    assert_eq!(fw.dropped_bytes(), 17 + 9);
    assert!(fw.pending());
    assert_eq!(
        forwarded(&mut fw),
        "p/c | 0123456789\n[vigil: 26 bytes dropped]\n"
    );
    assert!(!fw.pending());
    fw.push("p/c", b"ok\n");
    assert_eq!(forwarded(&mut fw), "p/c | ok\n");
}

#[test]
fn forwarder_flush_stops_at_would_block_without_losing_bytes() {
    let (r, w) = crate::process::pipe_nonblocking().unwrap();
    crate::process::set_nonblocking(&w).unwrap();
    let mut fw = Forwarder::new(1 << 20, 1 << 20);
    let line = vec![b'x'; 1000];
    for _ in 0..200 {
        fw.push("p/c", &line);
        fw.push("p/c", b"\n");
    }
    let expected = 200 * ("p/c | ".len() + 1000 + 1);
    // A pipe holds 64 KiB by default: the first flush must stop early.
    fw.flush(w.as_fd()).unwrap();
    assert!(fw.pending());
    let mut got = Vec::new();
    let start = Instant::now();
    while fw.pending() {
        drain_pipe(r.as_fd(), &mut got, usize::MAX).unwrap();
        fw.flush(w.as_fd()).unwrap();
        assert!(start.elapsed() < Duration::from_secs(20));
    }
    drop(w);
    drain_pipe(r.as_fd(), &mut got, usize::MAX).unwrap();
    assert_eq!(got.len(), expected);
    assert_eq!(fw.dropped_bytes(), 0);
}

#[test]
fn drain_pipe_reads_until_would_block_caps_and_sees_eof() {
    let (r, w) = crate::process::pipe_nonblocking().unwrap();
    let mut buf = Vec::new();
    // Nothing written yet: would block immediately.
    assert_eq!(
        drain_pipe(r.as_fd(), &mut buf, 1024).unwrap(),
        DrainResult {
            bytes: 0,
            eof: false
        }
    );
    nix::unistd::write(&w, b"0123456789").unwrap();
    assert_eq!(
        drain_pipe(r.as_fd(), &mut buf, 4).unwrap(),
        DrainResult {
            bytes: 4,
            eof: false
        }
    );
    assert_eq!(
        drain_pipe(r.as_fd(), &mut buf, 1024).unwrap(),
        DrainResult {
            bytes: 6,
            eof: false
        }
    );
    assert_eq!(buf, b"0123456789");
    drop(w);
    assert_eq!(
        drain_pipe(r.as_fd(), &mut buf, 1024).unwrap(),
        DrainResult {
            bytes: 0,
            eof: true
        }
    );
}

#[test]
fn nonblocking_stdout_does_not_block_and_leaves_pipes_and_ttys_alone() {
    let meta = File::from(io::stdout().as_fd().try_clone_to_owned().unwrap())
        .metadata()
        .unwrap();
    let ft = meta.file_type();
    let plain = ft.is_file() || ft.is_socket() || (ft.is_char_device() && is_dev_null(&meta));
    // A pipe, tty or file is reopened through /proc/self/fd/1; anything else would need the
    // fallback, which changes flags shared with the test harness: not something to do here.
    assert!(
        plain || reopen_stdout_nonblocking().is_some(),
        "this test needs a stdout it may reopen through /proc/self/fd/1 (a socket, or a pipe, \
         tty or file of its own user); it is {ft:?}"
    );
    let flags = |fd: BorrowedFd<'_>| {
        nix::fcntl::OFlag::from_bits_retain(
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).unwrap(),
        )
    };
    let before = flags(io::stdout().as_fd());
    let fd = nonblocking_stdout().expect("stdout");
    if !plain {
        assert!(flags(fd.as_fd()).contains(nix::fcntl::OFlag::O_NONBLOCK));
    }
    // fd 1 keeps its own flags.
    assert_eq!(flags(io::stdout().as_fd()), before);
}

#[test]
fn container_log_feeds_buffer_file_and_forwarder() {
    let dir = tempfile::tempdir().unwrap();
    let sup = crate::config::spec::SupervisorSpec {
        log_dir: Some(dir.path().to_path_buf()),
        log_buffer_bytes: 1024,
        ..Default::default()
    };
    let (mut log, err) = ContainerLog::new("web", "app", &sup);
    assert!(err.is_none(), "{err:?}");
    let mut fw = Forwarder::default();
    log.ingest(b"a\nb", Some(&mut fw));
    log.eof(Some(&mut fw));
    assert_eq!(log.buffer.tail_lines(None, false), b"a\nb");
    assert_eq!(read(&dir.path().join("web/app.log")), b"a\nb");
    assert_eq!(forwarded(&mut fw), "web/app | a\nweb/app | b\n");
    log.new_run();
    assert_eq!(log.buffer.tail_lines(Some(1), true), b"b");
}

#[test]
fn forwarder_writes_to_sockets_without_changing_their_flags() {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut fw = Forwarder::default();
    fw.push("p/c", b"via socket\n");
    fw.flush(a.as_fd()).unwrap();
    assert!(!fw.pending());
    let flags = nix::fcntl::fcntl(a.as_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
    assert_eq!(flags & libc::O_NONBLOCK, 0);
    drop(a);
    let mut got = String::new();
    let mut b = b;
    std::io::Read::read_to_string(&mut b, &mut got).unwrap();
    assert_eq!(got, "p/c | via socket\n");
}
