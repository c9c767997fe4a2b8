//! Container output into `log_dir` files at full speed: every byte, in order, across
//! rotations; and the control socket answering while a container floods its file.

use std::time::Duration;

use crate::common::{Vigil, supervisor_header};

const T: Duration = Duration::from_secs(60);

/// A vigil whose `[supervisor]` also has `extra` (log settings), running `pods`.
fn start(extra: &str, pods: &str) -> (Vigil, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("vigil.sock");
    let config = dir.path().join("vigil.toml");
    let logs = dir.path().join("logs");
    let header = supervisor_header(&socket).replace(
        "[supervisor]\n",
        &format!("[supervisor]\nlog_dir = \"{}\"\n{extra}", logs.display()),
    );
    std::fs::write(&config, format!("{header}{pods}")).expect("write config");
    (Vigil::start_with(dir, socket, config), logs)
}

/// The files of one container, oldest first (`.N` … `.1`, then the current one).
fn files_oldest_first(pod_dir: &std::path::Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut rotated: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(pod_dir)
        .expect("pod log dir")
        .filter_map(|e| {
            let p = e.ok()?.path();
            let n = p
                .file_name()?
                .to_str()?
                .strip_prefix(&format!("{name}."))?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    rotated.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut all: Vec<_> = rotated.into_iter().map(|(_, p)| p).collect();
    all.push(pod_dir.join(name));
    all
}

/// Starts pod `flood` (`seq 1 1000000`, never restarted) with `supervisor` lines set;
/// returns vigil and the pod's log directory.
fn flood(supervisor: &str) -> (Vigil, std::path::PathBuf) {
    let (v, logs) = start(
        supervisor,
        r#"
[pods.flood]
restart_policy = "Never"
[[pods.flood.containers]]
name = "c"
command = ["seq", "1", "1000000"]
"#,
    );
    (v, logs.join("flood"))
}

/// Waits until the flood's last line is in its current log file.
fn wait_for_the_last_line(v: &Vigil, pod_dir: &std::path::Path) {
    v.wait_for(T, "the last line in the log file", |_| {
        std::fs::read(pod_dir.join("c.log")).is_ok_and(|b| b.ends_with(b" 1000000\n"))
    });
}

/// A million numbered lines written as fast as `seq` goes, into 2 MiB files with a time
/// stamp on each line: the files, oldest first, with stamps and the run marker taken off,
/// are exactly the output (nothing lost, duplicated or reordered across reads, stamp blocks
/// and rotations).
#[test]
fn log_files_keep_every_byte_in_order_across_rotations_at_full_speed() {
    let (v, pod_dir) = flood("log_max_file_bytes = \"2Mi\"\nlog_max_files = 40\n");
    let expected: Vec<u8> = (1..=1_000_000u32)
        .flat_map(|n| format!("{n}\n").into_bytes())
        .collect();
    wait_for_the_last_line(&v, &pod_dir);
    let files = files_oldest_first(&pod_dir, "c.log");
    assert!(files.len() > 5, "the output was rotated: {files:?}");
    // A rotation may fall inside a line (between two reads of the pipe): the files are one
    // text only together.
    let mut text = Vec::new();
    for f in &files {
        text.extend(std::fs::read(f).expect("read log file"));
    }
    let mut got = Vec::with_capacity(expected.len());
    let mut lines = 0usize;
    for line in text.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b"--- run ") {
            continue;
        }
        let space = line.iter().position(|&b| b == b' ').expect("a stamp");
        let stamp = std::str::from_utf8(&line[..space]).expect("utf-8 stamp");
        let _: jiff::Timestamp = stamp.parse().expect("RFC 3339 stamp");
        got.extend_from_slice(&line[space + 1..]);
        lines += 1;
    }
    assert_eq!(lines, 1_000_000);
    // Compared whole, not printed: the first difference is what helps.
    if let Some(i) = got.iter().zip(&expected).position(|(a, b)| a != b) {
        let at = |b: &[u8]| {
            String::from_utf8_lossy(&b[i.saturating_sub(20)..(i + 20).min(b.len())]).into_owned()
        };
        panic!(
            "output differs at byte {i}: {:?} instead of {:?}",
            at(&got),
            at(&expected)
        );
    }
    assert_eq!(got.len(), expected.len());
}

/// A container writing as fast as it can into a rotating file does not keep the control
/// socket from answering: every status request gets its reply while the flood goes on.
#[test]
fn status_is_answered_while_a_container_floods_its_log_file() {
    let (v, logs) = start(
        "log_max_file_bytes = \"1Mi\"\nlog_max_files = 1\n",
        r#"
[pods.flood]
[[pods.flood.containers]]
name = "c"
command = ["sh", "-c", "exec yes 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'"]

[pods.quiet]
[[pods.quiet.containers]]
name = "c"
command = ["sleep", "1000"]
"#,
    );
    let rotated = logs.join("flood/c.log.1");
    v.wait_for(T, "the flood to rotate its file", |_| rotated.exists());
    let first = std::fs::metadata(&rotated)
        .expect("rotated file")
        .modified()
        .ok();
    for _ in 0..200 {
        let r = v.request(r#"{"cmd":"status"}"#);
        let pods = r["result"]["pods"].as_array().expect("pods in the reply");
        assert_eq!(pods.len(), 2, "{r}");
    }
    // The flood went on meanwhile: the file was rotated again.
    v.wait_for(T, "another rotation", |_| {
        std::fs::metadata(&rotated)
            .ok()
            .and_then(|m| m.modified().ok())
            != first
    });
    assert!(
        v.container("flood", "c")["state"]["running"].is_object(),
        "{}",
        v.container("flood", "c")
    );
}

/// A flood through more files than are kept: the oldest are deleted step by step over later
/// loop turns, the deletion finishes once the flood stops (no `.deleting` file is left), and
/// the kept files are the newest output, whole and in order, as many as configured.
#[test]
fn rotated_out_files_are_deleted_in_steps_and_the_kept_ones_are_the_newest_output() {
    let (v, pod_dir) = flood("log_max_file_bytes = \"3Mi\"\nlog_max_files = 3\n");
    wait_for_the_last_line(&v, &pod_dir);
    v.wait_for(T, "the rotated-out file to be deleted", |_| {
        !pod_dir.join("c.log.deleting").exists()
    });
    let mut names: Vec<String> = std::fs::read_dir(&pod_dir)
        .expect("pod log dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    assert_eq!(names, ["c.log", "c.log.1", "c.log.2", "c.log.3"]);
    let mut text = Vec::new();
    for f in files_oldest_first(&pod_dir, "c.log") {
        text.extend(std::fs::read(f).expect("read log file"));
    }
    // The oldest kept file may begin inside a line: from the first whole line on, the numbers
    // follow each other up to the last.
    let start = text.iter().position(|&b| b == b'\n').expect("a line") + 1;
    let mut last: Option<u32> = None;
    for line in text[start..].split_inclusive(|&b| b == b'\n') {
        let space = line.iter().position(|&b| b == b' ').expect("a stamp");
        let n: u32 = std::str::from_utf8(&line[space + 1..line.len() - 1])
            .expect("utf-8")
            .parse()
            .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(line)));
        if let Some(l) = last {
            assert_eq!(n, l + 1, "line {n} follows {l}");
        }
        last = Some(n);
    }
    assert_eq!(last, Some(1_000_000));
    assert!(
        text.len() > 9 << 20,
        "three full files kept: {}",
        text.len()
    );
}
