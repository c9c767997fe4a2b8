use super::forward::{is_dev_null, reopen_stdout_nonblocking};
use super::*;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
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
fn a_reloaded_ring_size_applies_from_the_next_run() {
    let mut b = LogBuffer::new(4);
    b.push(b"abcdef");
    b.set_capacity_next_run(8);
    b.push(b"gh");
    assert_eq!(
        b.tail_lines(None, false),
        b"efgh",
        "the current run keeps its size"
    );
    b.new_run();
    b.push(b"0123456789");
    assert_eq!(b.tail_lines(None, false), b"23456789");
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
    f.close_for_test();
    std::fs::write(dir.path().join("p"), b"").unwrap();
    assert!(!f.write(b"lost\n"));
    std::fs::remove_file(dir.path().join("p")).unwrap();
    assert!(f.write(b"back\n"));
    assert_eq!(
        read(&dir.path().join("p/c.log")),
        b"[vigil: 5 bytes not written: Not a directory]\nback\n"
    );
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
fn forwarder_drops_when_full_and_notes_it_naming_the_container() {
    let mut fw = Forwarder::new(32, 64);
    fw.push("p/c", b"0123456789\n"); // 17 bytes queued
    fw.push("p/c", b"0123456789\n"); // would be 34 > 32, no sink: dropped
    fw.push("p/c", b"xx\n"); // 9 bytes still fit
    assert_eq!(fw.dropped_bytes(), 17);
    assert!(fw.pending());
    assert_eq!(
        forwarded(&mut fw),
        "p/c | 0123456789\np/c | xx\np/c | [vigil: 17 bytes dropped]\n"
    );
    assert!(!fw.pending());
    fw.push("p/c", b"ok\n");
    assert_eq!(forwarded(&mut fw), "p/c | ok\n");
}

#[test]
fn forwarder_never_drops_what_a_regular_file_takes() {
    let file = tempfile::tempfile().unwrap();
    let mut fw = Forwarder::writing_to(file.as_fd());
    let line = [b'y'; 99];
    let mut expected = 0;
    for _ in 0..50_000 {
        fw.push("web/app", &line);
        fw.push("web/app", b"\n");
        expected += "web/app | ".len() + 100;
    }
    fw.flush(file.as_fd()).unwrap();
    assert_eq!(fw.dropped_bytes(), 0);
    assert!(!fw.pending());
    assert_eq!(file.metadata().unwrap().len(), expected as u64);
}

/// A non-blocking pipe whose buffer is full: writes to it would block.
fn full_pipe() -> (OwnedFd, OwnedFd, usize) {
    let (r, w) = crate::process::pipe_nonblocking().unwrap();
    crate::process::set_nonblocking(&w).unwrap();
    let chunk = [b'.'; 4096];
    let mut filled = 0;
    loop {
        match nix::unistd::write(&w, &chunk) {
            Ok(n) => filled += n,
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(e) => panic!("{e}"),
        }
    }
    (r, w, filled)
}

#[test]
fn drop_notes_come_once_per_container_per_second_while_the_destination_blocks() {
    let (r, w, filled) = full_pipe();
    let mut fw = Forwarder::new(64, 64);
    let t0 = Instant::now();
    let flood = |fw: &mut Forwarder| {
        for _ in 0..100 {
            fw.push("web/app", b"0123456789012345678901234567890123456789\n");
            fw.push("db/pg", b"0123456789012345678901234567890123456789\n");
        }
    };
    // Ten turns over 1.5 s of virtual time, the reader never reading.
    for i in 0..10u64 {
        flood(&mut fw);
        fw.flush_at(w.as_fd(), t0 + Duration::from_millis(150 * i))
            .unwrap();
    }
    // The reader catches up; the flood is over: what is left is noted at once.
    let mut got = Vec::new();
    while fw.pending() {
        drain_pipe(r.as_fd(), &mut got, usize::MAX).unwrap();
        fw.flush_at(w.as_fd(), t0 + Duration::from_millis(1600))
            .unwrap();
    }
    drop(w);
    drain_pipe(r.as_fd(), &mut got, usize::MAX).unwrap();
    let text = String::from_utf8_lossy(&got[filled..]).into_owned();
    let notes: Vec<&str> = text.lines().filter(|l| l.contains("[vigil:")).collect();
    let count = |c: &str| notes.iter().filter(|l| l.starts_with(c)).count();
    // At 0 ms and at 1050 ms (the first turn ≥ 1 s later), then the rest once it passed.
    assert_eq!(count("web/app | [vigil: "), 3, "{notes:#?}");
    assert_eq!(count("db/pg | [vigil: "), 3, "{notes:#?}");
    let noted: f64 = notes
        .iter()
        .map(|l| {
            let n = l
                .split("[vigil: ")
                .nth(1)
                .unwrap()
                .split(' ')
                .collect::<Vec<_>>();
            let v: f64 = n[0].parse().unwrap();
            match n[1] {
                "bytes" | "byte" => v,
                "kB" => v * 1e3,
                u => panic!("unit {u}"),
            }
        })
        .sum();
    let total = fw.dropped_bytes() as f64;
    assert!(
        (noted - total).abs() <= total * 0.05,
        "noted {noted}, dropped {total}"
    );
}

#[test]
fn drop_sizes_read_like_the_issue_asks() {
    use super::forward::si_bytes;
    assert_eq!(si_bytes(1), "1 byte");
    assert_eq!(si_bytes(999), "999 bytes");
    assert_eq!(si_bytes(1_234), "1.2 kB");
    assert_eq!(si_bytes(1_200_000), "1.2 MB");
    assert_eq!(si_bytes(427_000_000_000), "427.0 GB");
}

#[test]
fn a_symlink_planted_as_the_log_file_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious\n").unwrap();
    std::fs::create_dir(dir.path().join("web")).unwrap();
    std::fs::set_permissions(
        dir.path().join("web"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("web/app.log")).unwrap();
    let e = LogFile::open(dir.path(), "web", "app", 1 << 20, 1).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert_eq!(read(&victim), b"precious\n");
    // A symlink in place of the pod directory is refused as well.
    std::fs::remove_dir_all(dir.path().join("web")).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("web")).unwrap();
    let e = LogFile::open(dir.path(), "web", "app", 1 << 20, 1).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert!(!elsewhere.join("app.log").exists());
}

#[test]
fn a_hard_link_or_a_fifo_as_the_log_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("web")).unwrap();
    std::fs::set_permissions(
        dir.path().join("web"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    let other = dir.path().join("other");
    std::fs::write(&other, b"x").unwrap();
    std::fs::hard_link(&other, dir.path().join("web/app.log")).unwrap();
    let e = LogFile::open(dir.path(), "web", "app", 1 << 20, 1).unwrap_err();
    assert!(e.to_string().contains("hard links"), "{e}");
    nix::unistd::mkfifo(
        &dir.path().join("web/fifo.log"),
        nix::sys::stat::Mode::S_IRWXU,
    )
    .unwrap();
    let e = LogFile::open(dir.path(), "web", "fifo", 1 << 20, 1).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
#[ignore = "needs root (chowns to another uid)"]
fn a_pod_directory_owned_by_someone_else_is_refused() {
    assert!(nix::unistd::Uid::effective().is_root(), "needs root");
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("web");
    std::fs::create_dir(&pod).unwrap();
    std::os::unix::fs::chown(&pod, Some(65534), Some(65534)).unwrap();
    let e = LogFile::open(dir.path(), "web", "app", 1 << 20, 1).unwrap_err();
    assert!(e.to_string().contains("owned by uid 65534"), "{e}");
    assert!(!pod.join("app.log").exists());
}

#[test]
fn a_write_gap_is_warned_and_marked_in_the_file_when_writing_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "p", "c", 1 << 20, 1).expect("open");
    assert!(f.write(b"before\npartial"));
    // /dev/full answers every write with ENOSPC (null(4)).
    f.set_file_for_test(File::options().write(true).open("/dev/full").unwrap());
    assert!(!f.write(b"lost one\n"));
    f.close_for_test();
    std::fs::remove_dir_all(dir.path().join("p")).unwrap();
    std::fs::write(dir.path().join("p"), b"").unwrap();
    assert!(!f.write(b"lost two\n")); // the pod directory is a file now: cannot open
    std::fs::remove_file(dir.path().join("p")).unwrap();
    assert!(f.write(b"after\n"));
    assert_eq!(
        String::from_utf8(read(&dir.path().join("p/c.log"))).unwrap(),
        "[vigil: 18 bytes not written: No space left on device]\nafter\n"
    );
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
        log_timestamps: false,
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

#[test]
fn tail_range_and_read_range_stream_what_tail_lines_returns() {
    let mut b = LogBuffer::new(64);
    b.push(b"old 1\nold 2\n");
    b.new_run();
    b.push(b"a\nbb\nccc\n");
    for (n, previous) in [
        (None, false),
        (Some(2), false),
        (Some(0), false),
        (Some(1), true),
        (None, true),
    ] {
        let want = b.tail_lines(n, previous);
        let (start, end) = b.tail_range(n, previous);
        let mut got = Vec::new();
        let mut at = start;
        while at < end {
            let r = b.read_range(at, 3);
            assert_eq!(r.skipped, 0);
            let take = r.bytes.len().min((end - at) as usize);
            got.extend_from_slice(&r.bytes[..take]);
            at += take as u64;
        }
        assert_eq!(got, want, "{n:?} {previous}");
    }
    // Overwritten bytes are reported as skipped.
    let mut small = LogBuffer::new(4);
    small.push(b"0123456789");
    let r = small.read_range(2, 2);
    assert_eq!((r.bytes.as_slice(), r.skipped, r.next), (&b"67"[..], 4, 8));
}

#[test]
fn a_wrapped_ring_starts_at_a_line_boundary() {
    let mut b = LogBuffer::new(16);
    b.push(b"first line\nsecond\nthird\n");
    // Held: "ne\nsecond\nthird\n" minus what wrapped: the partial "ne" is left out.
    assert_eq!(b.tail_lines(None, false), b"second\nthird\n");
    assert_eq!(b.tail_lines(Some(5), false), b"second\nthird\n");
    assert_eq!(b.tail_lines(Some(1), false), b"third\n");
    // The range streamed by `logs` and `logs -f` starts there too.
    let (start, end) = b.tail_range(None, false);
    assert_eq!((start, end), (b.total_written() - 13, b.total_written()));
    // And the previous run keeps the rule.
    b.new_run();
    b.push(b"new\n");
    assert_eq!(b.tail_lines(None, true), b"second\nthird\n");
    assert_eq!(b.tail_lines(None, false), b"new\n");
}

#[test]
fn a_ring_wrapped_exactly_at_a_newline_keeps_its_first_line() {
    let mut b = LogBuffer::new(8);
    b.push(b"aaaa\n");
    b.push(b"bbb\ncc\n");
    // "aaaa\n" was overwritten whole: "bbb\ncc\n" begins a line.
    assert_eq!(b.tail_lines(None, false), b"bbb\ncc\n");
    // A chunk larger than the ring, cut right after a newline.
    let mut b = LogBuffer::new(4);
    b.push(b"xyz\nab\n\n");
    assert_eq!(b.tail_lines(None, false), b"ab\n\n");
}

#[test]
fn a_wrapped_ring_holding_part_of_one_line_returns_it() {
    let mut b = LogBuffer::new(8);
    b.push(b"0123456789abcdef\n");
    assert_eq!(b.tail_lines(None, false), b"9abcdef\n");
    let mut b = LogBuffer::new(8);
    b.push(b"0123456789abcdef");
    assert_eq!(b.tail_lines(None, false), b"89abcdef");
}

#[test]
fn timestamps_print_as_go_rfc3339_nano_in_utc() {
    assert_eq!(
        rfc3339_nano(1_795_441_247_123_456_789),
        "2026-11-23T13:40:47.123456789Z"
    );
    // Trailing zeros go, as with Go's RFC3339Nano.
    assert_eq!(
        rfc3339_nano(1_795_441_247_500_000_000),
        "2026-11-23T13:40:47.5Z"
    );
    assert_eq!(
        rfc3339_nano(1_795_441_247_000_000_000),
        "2026-11-23T13:40:47Z"
    );
}

const S: i64 = 1_000_000_000;

#[test]
fn each_line_takes_the_time_of_the_chunk_its_first_byte_came_in() {
    let mut b = LogBuffer::new(1024);
    b.push_at(b"one\ntw", 10 * S);
    b.push_at(b"o\nthree\n", 20 * S);
    assert_eq!(b.stamp_at(0), Some(10 * S));
    assert_eq!(
        b.stamp_at(4),
        Some(10 * S),
        "\"two\" began in the first chunk"
    );
    assert_eq!(b.stamp_at(8), Some(20 * S));
    let all = b.tail_lines(None, false);
    let stamped = stamp_lines(&b, 0, &all, true);
    assert_eq!(
        String::from_utf8(stamped).unwrap(),
        "1970-01-01T00:00:10Z one\n1970-01-01T00:00:10Z two\n1970-01-01T00:00:20Z three\n"
    );
    // A piece starting mid-line stamps only the lines that begin in it.
    let piece = stamp_lines(&b, 5, b"wo\nthree\n", false);
    assert_eq!(
        String::from_utf8(piece).unwrap(),
        "wo\n1970-01-01T00:00:20Z three\n"
    );
}

#[test]
fn since_starts_at_the_first_line_read_then_or_later() {
    let mut b = LogBuffer::new(1024);
    b.push_at(b"old\nhalf", 10 * S);
    b.push_at(b" line\nnew\n", 20 * S);
    b.push_at(b"newer\n", 30 * S);
    // The chunk at 20 s begins mid-line: that line is older, so the next one starts.
    assert_eq!(b.since_offset(15 * S, false), 14);
    assert_eq!(b.since_offset(30 * S, false), 18);
    assert_eq!(b.since_offset(0, false), 0);
    assert_eq!(b.since_offset(31 * S, false), b.total_written());
    // The previous run keeps its stamps.
    b.new_run();
    b.push_at(b"next run\n", 40 * S);
    assert_eq!(b.since_offset(30 * S, true), 18);
    assert_eq!(b.stamp_at(18), Some(30 * S));
    assert_eq!(b.stamp_at(24), Some(40 * S));
    assert_eq!(b.since_offset(35 * S, false), 24);
}

#[test]
fn stamps_are_coalesced_never_go_back_and_stay_bounded() {
    let mut b = LogBuffer::new(64 * 20);
    // Within a millisecond: one stamp.
    b.push_at(b"a\n", 10 * S);
    b.push_at(b"b\n", 10 * S + 999_999);
    assert_eq!(b.stamp_at(2), Some(10 * S));
    // A clock stepped back does not make a later line older.
    b.push_at(b"c\n", 5 * S);
    assert_eq!(b.stamp_at(4), Some(10 * S));
    // Many tiny chunks a second apart: at most capacity / STAMP_BYTES stamps (min 16) held.
    for i in 0..10_000 {
        b.push_at(b"x\n", (100 + i) * S);
    }
    let (start, _) = b.tail_range(None, false);
    let stamped = stamp_lines(&b, start, &b.tail_lines(None, false), true);
    let distinct: std::collections::BTreeSet<&[u8]> = stamped
        .split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| &l[..l.len() - 2])
        .collect();
    assert!(distinct.len() <= 20, "{}", distinct.len());
    // The newest line keeps its own time.
    assert_eq!(b.stamp_at(b.total_written() - 1), Some(10_099 * S));
}

#[test]
fn log_file_lines_carry_their_time_and_runs_are_marked() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "web", "app", 1 << 20, 2).expect("open");
    f.set_timestamps(true);
    let base = dir.path().join("web").join("app.log");
    assert!(f.mark_run(10 * S));
    assert!(f.write_output(b"one\ntw", 11 * S));
    // The line that began in the last chunk keeps that chunk's time.
    assert!(f.write_output(b"o\nthree\n", 12 * S + 5));
    // A run that ends mid-line: the next run's marker starts on a line of its own.
    assert!(f.write_output(b"cut", 13 * S));
    assert!(f.mark_run(14 * S));
    assert!(f.write_output(b"again\n", 15 * S));
    assert_eq!(
        String::from_utf8(read(&base)).unwrap(),
        "--- run 1 started at 1970-01-01T00:00:10Z ---\n\
         1970-01-01T00:00:11Z one\n\
         1970-01-01T00:00:11Z two\n\
         1970-01-01T00:00:12.000000005Z three\n\
         1970-01-01T00:00:13Z cut\n\
         --- run 2 started at 1970-01-01T00:00:14Z ---\n\
         1970-01-01T00:00:15Z again\n"
    );
    // Without log_timestamps the output is written as read; the markers stay.
    f.set_timestamps(false);
    assert!(f.write_output(b"plain\n", 16 * S));
    assert!(read(&base).ends_with(b"\nplain\n"));
}

#[test]
fn container_log_marks_each_run_in_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let sup = crate::config::spec::SupervisorSpec {
        log_dir: Some(dir.path().to_path_buf()),
        log_timestamps: false,
        ..Default::default()
    };
    let (mut log, err) = ContainerLog::new("web", "app", &sup);
    assert!(err.is_none());
    log.new_run();
    log.ingest(b"first\n", None);
    log.new_run();
    log.ingest(b"second\n", None);
    let text = String::from_utf8(read(&dir.path().join("web/app.log"))).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with("--- run 1 started at ") && lines[0].ends_with("Z ---"));
    assert_eq!(lines[1], "first");
    assert!(lines[2].starts_with("--- run 2 started at "));
    assert_eq!(lines[3], "second");
}

#[test]
fn run_numbering_continues_in_a_log_file_opened_again_after_a_reload_or_restart() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("web").join("app.log");
    {
        let mut f = LogFile::open(dir.path(), "web", "app", 1 << 20, 2).expect("open");
        assert!(f.mark_run(10 * S));
        assert!(f.write_output(b"one\n", 11 * S));
        assert!(f.mark_run(12 * S));
        // Output that merely mentions a marker mid-line is not one.
        assert!(f.write_output(b"x --- run 99 started at noon\n", 13 * S));
    }
    // A new vigil (or a reload that replaced the container) opens the same file.
    let mut f = LogFile::open(dir.path(), "web", "app", 1 << 20, 2).expect("open again");
    assert!(f.mark_run(14 * S));
    let text = String::from_utf8(read(&base)).unwrap();
    assert!(
        text.ends_with("--- run 3 started at 1970-01-01T00:00:14Z ---\n"),
        "{text}"
    );
}

#[test]
fn run_numbering_continues_from_the_newest_rotated_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("web").join("app.log");
    {
        // Rotates at 4 KiB: run 5's output fills more than the current file.
        let mut f = LogFile::open(dir.path(), "web", "app", 4096, 2).expect("open");
        for i in 0..5 {
            assert!(f.mark_run(i * S));
        }
        assert!(f.write_output(&b"y\n".repeat(3000), 6 * S));
    }
    let current = String::from_utf8(read(&base)).unwrap();
    assert!(!current.contains("--- run"), "rotated away: {current:.60}");
    let mut f = LogFile::open(dir.path(), "web", "app", 4096, 2).expect("open again");
    assert!(f.mark_run(7 * S));
    assert!(
        String::from_utf8(read(&base))
            .unwrap()
            .contains("--- run 6 started at"),
        "found in app.log.1"
    );
}

#[test]
fn stamped_output_larger_than_a_block_keeps_every_line_whole_and_stamped_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "web", "app", 1 << 30, 1).expect("open");
    f.set_timestamps(true);
    // Lines of every length from 1 to 300 bytes, three blocks' worth and more, ending
    // mid-line; then the rest of that line in a second chunk.
    let mut data = Vec::new();
    let mut n = 0usize;
    while data.len() < 3 * file::STAMPED_BLOCK + 7 {
        let len = n % 300;
        data.extend(std::iter::repeat_n(b'a' + (n % 26) as u8, len));
        data.push(b'\n');
        n += 1;
    }
    data.extend_from_slice(b"unfinished");
    assert!(f.write_output(&data, 11 * S));
    assert!(f.write_output(b" line\n", 12 * S));
    let text = read(&dir.path().join("web/app.log"));
    let mut expected = Vec::new();
    for line in data.split_inclusive(|&b| b == b'\n') {
        expected.extend_from_slice(b"1970-01-01T00:00:11Z ");
        expected.extend_from_slice(line);
    }
    expected.extend_from_slice(b" line\n");
    assert!(text == expected, "the stamped file differs from the output");
}

#[test]
fn rotation_removes_the_oldest_before_shifting_and_keeps_every_newer_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "p", "c", 10, 2).expect("open");
    for chunk in [
        &b"one.....\n"[..],
        b"two.....\n",
        b"three...\n",
        b"four....\n",
    ] {
        assert!(f.write(chunk));
    }
    let pod = dir.path().join("p");
    assert_eq!(read(&pod.join("c.log")), b"four....\n");
    assert_eq!(read(&pod.join("c.log.1")), b"three...\n");
    assert_eq!(read(&pod.join("c.log.2")), b"two.....\n");
    assert!(!pod.join("c.log.3").exists());
}

/// A chunk of `len` bytes of numbered lines starting at `from` (each `NNNNNNNN\n`).
fn numbered(from: u32, len: usize) -> Vec<u8> {
    (from..)
        .flat_map(|n| format!("{n:08}\n").into_bytes())
        .take(len)
        .collect()
}

#[test]
fn the_oldest_rotated_file_is_shrunk_away_in_bounded_steps_while_kept_files_stay_whole() {
    let dir = tempfile::tempdir().unwrap();
    let step = file::SHRINK_STEP as usize;
    // Files of 3.5 steps; 2 rotated files kept.
    let max = (step * 7 / 2) as u64;
    let mut f = LogFile::open(dir.path(), "p", "c", max, 2).expect("open");
    let pod = dir.path().join("p");
    let aside = pod.join("c.log.deleting");
    let chunks: Vec<Vec<u8>> = (0..4u32)
        .map(|i| numbered(i * 1_000_000, max as usize))
        .collect();
    for c in &chunks[..3] {
        assert!(f.write(c));
    }
    assert!(!f.shrinking(), "nothing rotated out yet");
    assert!(f.write(&chunks[3]));
    // The first file left `.2`: renamed aside, not unlinked in the rotation.
    assert!(f.shrinking());
    assert_eq!(std::fs::metadata(&aside).unwrap().len(), max);
    assert_eq!(read(&pod.join("c.log")), chunks[3]);
    assert_eq!(read(&pod.join("c.log.1")), chunks[2]);
    assert_eq!(read(&pod.join("c.log.2")), chunks[1]);
    assert!(!pod.join("c.log.3").exists());
    let mut sizes = vec![];
    while f.shrink_step() {
        sizes.push(std::fs::metadata(&aside).unwrap().len());
    }
    // Each step took off one step's bytes, and the last unlinked what was left.
    assert_eq!(
        sizes,
        [
            max - step as u64,
            max - 2 * step as u64,
            max - 3 * step as u64
        ]
    );
    assert!(!aside.exists());
    assert!(!f.shrink_step());
    // The kept files were not touched by the deletion.
    assert_eq!(read(&pod.join("c.log.1")), chunks[2]);
    assert_eq!(read(&pod.join("c.log.2")), chunks[1]);
}

#[test]
fn under_a_flood_rotation_keeps_the_newest_files_whole_in_order_and_no_more_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let max = 3 * file::SHRINK_STEP / 2;
    let mut f = LogFile::open(dir.path(), "p", "c", max, 3).expect("open");
    let mut all = Vec::new();
    let mut n = 0u32;
    // 64 KiB writes, one shrink step per write (as one per loop turn), 20 files' worth: some
    // rotations come while the last file is still being shrunk.
    while all.len() < 20 * max as usize {
        let c = numbered(n, 64 * 1024);
        n += (c.len() / 9) as u32 + 1;
        assert!(f.write(&c));
        all.extend_from_slice(&c);
        f.shrink_step();
    }
    while f.shrink_step() {}
    let pod = dir.path().join("p");
    let mut names: Vec<String> = std::fs::read_dir(&pod)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["c.log", "c.log.1", "c.log.2", "c.log.3"]);
    let mut kept = Vec::new();
    for name in ["c.log.3", "c.log.2", "c.log.1", "c.log"] {
        let b = read(&pod.join(name));
        assert!(b.len() as u64 <= max, "{name} is over the limit");
        kept.extend(b);
    }
    assert!(
        all.ends_with(&kept),
        "the kept files are not the newest output in order"
    );
    assert!(kept.len() as u64 > 3 * max - 64 * 1024);
}

#[test]
fn a_leftover_aside_file_is_removed_at_open_but_nothing_vigil_did_not_leave() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("web");
    std::fs::create_dir(&pod).unwrap();
    std::fs::set_permissions(&pod, std::fs::Permissions::from_mode(0o750)).unwrap();
    // A crash (or an upgrade) mid-deletion left one.
    std::fs::write(pod.join("app.log.deleting"), vec![b'x'; 3 << 20]).unwrap();
    // Other names hold a symlink and a file with another link: not vigil's to remove.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, pod.join("sym.log.deleting")).unwrap();
    let other = dir.path().join("other");
    std::fs::write(&other, b"kept\n").unwrap();
    std::fs::hard_link(&other, pod.join("linked.log.deleting")).unwrap();

    let f = LogFile::open(dir.path(), "web", "app", 1 << 20, 1).expect("open");
    assert!(!f.shrinking());
    assert!(!pod.join("app.log.deleting").exists());
    let _s = LogFile::open(dir.path(), "web", "sym", 1 << 20, 1).expect("open");
    let _l = LogFile::open(dir.path(), "web", "linked", 1 << 20, 1).expect("open");
    assert!(pod.join("sym.log.deleting").symlink_metadata().is_ok());
    assert_eq!(read(&victim), b"precious\n");
    assert_eq!(read(&pod.join("linked.log.deleting")), b"kept\n");
}

#[test]
fn a_foreign_name_in_the_aside_place_stays_and_the_oldest_file_is_removed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = LogFile::open(dir.path(), "p", "c", 10, 1).expect("open");
    let pod = dir.path().join("p");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, pod.join("c.log.deleting")).unwrap();
    for chunk in [&b"one.....\n"[..], b"two.....\n", b"three...\n"] {
        assert!(f.write(chunk));
    }
    assert!(!f.shrinking());
    assert_eq!(read(&pod.join("c.log")), b"three...\n");
    assert_eq!(read(&pod.join("c.log.1")), b"two.....\n");
    assert!(!pod.join("c.log.2").exists());
    assert_eq!(read(&pod.join("c.log.deleting")), b"precious\n");
    assert!(
        pod.join("c.log.deleting")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn dropping_the_log_file_mid_deletion_removes_the_aside_file() {
    let dir = tempfile::tempdir().unwrap();
    let max = 2 * file::SHRINK_STEP + 1;
    let mut f = LogFile::open(dir.path(), "p", "c", max, 1).expect("open");
    for i in 0..3 {
        assert!(f.write(&numbered(i * 1_000_000, max as usize)));
    }
    assert!(f.shrinking());
    assert!(f.shrink_step());
    drop(f);
    let pod = dir.path().join("p");
    assert!(!pod.join("c.log.deleting").exists());
    assert!(pod.join("c.log.1").exists());
}
