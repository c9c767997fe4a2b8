//! `vmh`: one small static multi-call binary with the test helpers vigil's VM scenarios need
//! (see tests/vm/README.md). Runs inside the guest, where there is only busybox.
//!
//! Std only, no crates: the few libc calls it needs (fork, waitpid, _exit) are declared here.

mod json;
mod rfc3339;

use std::io::{Read, Write};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const MIB: usize = 1 << 20;
const PAGE: usize = 4096;

unsafe extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(code: i32) -> !;
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// struct timespec on x86_64 Linux.
#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// CLOCK_BOOTTIME (linux/time.h): /proc/uptime's clock and that of /proc/PID/stat starttime.
const CLOCK_BOOTTIME: i32 = 7;

fn boottime() -> f64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one struct timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { clock_gettime(CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

const USAGE: &str = "usage: vmh COMMAND …
  memeat <MiB> [--hold]      allocate and touch N MiB in 1 MiB steps (--hold: then sleep forever)
  forkbomb                   fork until EAGAIN, and keep trying, in every process
  orphans <N>                double-fork N grandchildren that sleep 0.2 s and exit (re-parented)
  zombies [-v]               print how many processes are in state Z (-v: also list them)
  pids <CMDLINE…>            print the PIDs whose command line (space-joined) equals CMDLINE
  cgroups [ROOT]             list cgroup dirs under ROOT (/sys/fs/cgroup/vigil) with process counts
  json [-d DEF] <PATH…>      print the value at each dotted PATH of the JSON on stdin, one a line
                             (absent: print DEF, or exit 1)
  wait-json <SECS> <CMD…> -- <PATH> <EXPECTED>
                             run CMD until its JSON output has EXPECTED at PATH (EXPECTED may be
                             prefixed by >= <= > < != for a numeric or inequality test)
  ts <RFC3339>               print the timestamp as seconds since the epoch (fractional)
  now                        print the wall clock as seconds since the epoch (fractional)
  kmsg-now <TAG>             write \"TAG wall=<now> boot=<CLOCK_BOOTTIME>\" to /dev/kmsg: ties the
                             kernel log's clock (dmesg timestamps) to the wall clock and to
                             uptime (/proc/PID/stat starttime), to microseconds";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    let result = match args.first().map(String::as_str) {
        Some("memeat") => memeat(&rest),
        Some("forkbomb") => forkbomb(),
        Some("orphans") => orphans(&rest),
        Some("zombies") => zombies(&rest),
        Some("pids") => pids(&rest),
        Some("cgroups") => cgroups(&rest),
        Some("json") => json_cmd(&rest),
        Some("wait-json") => wait_json(&rest),
        Some("ts") => ts(&rest),
        Some("kmsg-now") => kmsg_now(&rest),
        Some("now") => {
            println!("{:.6}", now());
            Ok(())
        }
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("vmh: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// One write(2) to /dev/kmsg right after reading the clock: the record's printk timestamp and
/// the wall time in its text are microseconds apart.
fn kmsg_now(args: &[&str]) -> Result<(), String> {
    let tag = args.first().ok_or("kmsg-now: a TAG is needed")?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .map_err(|e| format!("/dev/kmsg: {e}"))?;
    let (wall, boot) = (now(), boottime());
    let line = format!("{tag} wall={wall:.6} boot={boot:.6}\n");
    f.write_all(line.as_bytes())
        .map_err(|e| format!("/dev/kmsg: {e}"))
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn arg_num<T: std::str::FromStr>(args: &[&str], i: usize, what: &str) -> Result<T, String> {
    let s = args
        .get(i)
        .ok_or_else(|| format!("missing {what}\n{USAGE}"))?;
    s.parse().map_err(|_| format!("bad {what}: {s:?}"))
}

/// Allocate N MiB, writing one byte in every page so that the memory is really charged to the
/// cgroup (an untouched allocation is only address space).
fn memeat(args: &[&str]) -> Result<(), String> {
    let mib: usize = arg_num(args, 0, "MiB")?;
    let hold = args.contains(&"--hold");
    let mut chunks: Vec<Vec<u8>> = Vec::with_capacity(mib);
    let mut out = std::io::stdout();
    for n in 1..=mib {
        let mut chunk = vec![0u8; MIB];
        for i in (0..MIB).step_by(PAGE) {
            chunk[i] = 1;
        }
        chunks.push(std::hint::black_box(chunk));
        if n % 10 == 0 || n == mib {
            let _ = writeln!(out, "memeat: {n} MiB touched");
            let _ = out.flush();
        }
    }
    if hold {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    Ok(())
}

/// Every process forks as fast as it can; on failure (EAGAIN from pids.max) it waits a little
/// and tries again, forever. Children never exit, so nothing is ever reaped.
fn forkbomb() -> Result<(), String> {
    let mut forks = 0u64;
    let mut reported = false;
    loop {
        // SAFETY: the process is single-threaded; the child only loops, sleeps and forks.
        let pid = unsafe { fork() };
        if pid < 0 {
            if !reported {
                let err = std::io::Error::last_os_error();
                println!("forkbomb: fork failed after {forks} forks: {err}");
                reported = true;
            }
            std::thread::sleep(Duration::from_millis(50));
        } else if pid == 0 {
            forks = 0;
            reported = true; // only the first process reports
        } else {
            forks += 1;
        }
    }
}

/// Make N orphans: fork a child that forks a grandchild and exits at once, so the grandchild
/// is re-parented to the nearest subreaper or PID 1 (prctl(2) PR_SET_CHILD_SUBREAPER), which
/// must reap it when it exits 0.2 s later.
fn orphans(args: &[&str]) -> Result<(), String> {
    let n: u32 = arg_num(args, 0, "count")?;
    for _ in 0..n {
        // SAFETY: single-threaded; the child only forks and calls _exit.
        let child = unsafe { fork() };
        match child {
            -1 => return Err(format!("fork: {}", std::io::Error::last_os_error())),
            0 => {
                // SAFETY: as above; the grandchild only sleeps and calls _exit.
                if unsafe { fork() } == 0 {
                    std::thread::sleep(Duration::from_millis(200));
                    // SAFETY: _exit never returns and skips atexit handlers of the parent's copy.
                    unsafe { _exit(0) }
                }
                // SAFETY: as above.
                unsafe { _exit(0) }
            }
            pid => {
                let mut status = 0;
                // SAFETY: `status` is a valid out-pointer; `pid` is our own child.
                unsafe { waitpid(pid, &mut status, 0) };
            }
        }
    }
    println!("orphans: made {n}");
    Ok(())
}

/// (pid, state, comm, cmdline) of every process, from /proc/<pid>/stat (proc(5)).
fn processes() -> Vec<(u32, char, String, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue; // exited meanwhile
        };
        // comm is in parentheses and may itself contain ')' : the state follows the last one.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let state = stat[close + 1..].trim_start().chars().next().unwrap_or('?');
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                let s = String::from_utf8_lossy(&b).replace('\0', " ");
                s.trim_end().to_string()
            })
            .unwrap_or_default();
        out.push((pid, state, comm, cmdline));
    }
    out.sort();
    out
}

fn zombies(args: &[&str]) -> Result<(), String> {
    let z: Vec<_> = processes().into_iter().filter(|p| p.1 == 'Z').collect();
    println!("{}", z.len());
    if args.contains(&"-v") {
        for (pid, _, comm, _) in z {
            println!("{pid} {comm}");
        }
    }
    Ok(())
}

fn pids(args: &[&str]) -> Result<(), String> {
    if args.is_empty() {
        return Err(format!("missing CMDLINE\n{USAGE}"));
    }
    let want = args.join(" ");
    let me = std::process::id();
    for (pid, state, _, cmdline) in processes() {
        if pid != me && state != 'Z' && cmdline == want {
            println!("{pid}");
        }
    }
    Ok(())
}

fn cgroups(args: &[&str]) -> Result<(), String> {
    let root = std::path::PathBuf::from(args.first().copied().unwrap_or("/sys/fs/cgroup/vigil"));
    if !root.is_dir() {
        return Err(format!("{}: no such cgroup", root.display()));
    }
    let mut stack = vec![root.clone()];
    let mut dirs = Vec::new();
    while let Some(dir) = stack.pop() {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let rel = dir
            .strip_prefix(&root)
            .unwrap_or(&dir)
            .display()
            .to_string();
        dirs.push((
            if rel.is_empty() { ".".to_string() } else { rel },
            procs.lines().count(),
        ));
        if let Ok(rd) = std::fs::read_dir(&dir) {
            stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    dirs.sort();
    for (rel, n) in dirs {
        println!("{rel} procs={n}");
    }
    Ok(())
}

/// Values at `path` in every JSON document of `text`.
fn lookup(text: &str, path: &str) -> Result<Vec<String>, String> {
    let docs = json::parse_many(text).map_err(|e| e.to_string())?;
    Ok(docs
        .iter()
        .filter_map(|d| d.at(path))
        .map(json::Value::render)
        .collect())
}

/// `json [-d DEFAULT] PATH…`: one line per PATH (strings raw). Several documents on stdin (one
/// object a line) give one line per document that has the PATH. An absent PATH prints DEFAULT
/// when given, else makes the exit status 1.
fn json_cmd(args: &[&str]) -> Result<(), String> {
    let (default, paths) = match args {
        ["-d", d, rest @ ..] => (Some(*d), rest),
        rest => (None, rest),
    };
    if paths.is_empty() {
        return Err(format!("missing PATH\n{USAGE}"));
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| format!("reading stdin: {e}"))?;
    let mut absent = Vec::new();
    for path in paths {
        let found = lookup(&text, path)?;
        if found.is_empty() {
            match default {
                Some(d) => println!("{d}"),
                None => absent.push(*path),
            }
        }
        for v in found {
            println!("{v}");
        }
    }
    if absent.is_empty() {
        Ok(())
    } else {
        Err(format!("absent: {}", absent.join(" ")))
    }
}

/// `EXPECTED` against an actual value: `>=3`, `<=3`, `>3`, `<3` compare numerically, `!=x`
/// is inequality, anything else is equality of the rendered text.
fn matches(expected: &str, actual: &str) -> bool {
    let numeric =
        |rest: &str, op: fn(f64, f64) -> bool| match (actual.parse::<f64>(), rest.parse::<f64>()) {
            (Ok(a), Ok(b)) => op(a, b),
            _ => false,
        };
    if let Some(rest) = expected.strip_prefix(">=") {
        numeric(rest, |a, b| a >= b)
    } else if let Some(rest) = expected.strip_prefix("<=") {
        numeric(rest, |a, b| a <= b)
    } else if let Some(rest) = expected.strip_prefix("!=") {
        actual != rest
    } else if let Some(rest) = expected.strip_prefix('>') {
        numeric(rest, |a, b| a > b)
    } else if let Some(rest) = expected.strip_prefix('<') {
        numeric(rest, |a, b| a < b)
    } else {
        actual == expected
    }
}

fn wait_json(args: &[&str]) -> Result<(), String> {
    let secs: f64 = arg_num(args, 0, "timeout seconds")?;
    let sep = args
        .iter()
        .position(|a| *a == "--")
        .ok_or_else(|| format!("missing --\n{USAGE}"))?;
    let cmd = &args[1..sep];
    let (Some(path), Some(expected)) = (args.get(sep + 1), args.get(sep + 2)) else {
        return Err(format!("missing PATH or EXPECTED\n{USAGE}"));
    };
    let (program, cmd_args) = cmd
        .split_first()
        .ok_or_else(|| format!("missing CMD\n{USAGE}"))?;
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        let last = match Command::new(program).args(cmd_args).output() {
            Ok(out) => {
                let text = String::from_utf8_lossy(&out.stdout);
                match lookup(&text, path) {
                    Ok(found) => {
                        if let Some(v) = found.iter().find(|v| matches(expected, v)) {
                            println!("{v}");
                            return Ok(());
                        }
                        format!("{path} = {found:?} in: {}", text.trim_end())
                    }
                    Err(e) => format!("{e} in: {}", text.trim_end()),
                }
            }
            Err(e) => format!("{program}: {e}"),
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out after {secs}s waiting for {path} {expected}; last: {last}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ts(args: &[&str]) -> Result<(), String> {
    let t = args
        .first()
        .ok_or_else(|| format!("missing timestamp\n{USAGE}"))?;
    let secs = rfc3339::to_epoch(t).ok_or_else(|| format!("not an RFC 3339 timestamp: {t:?}"))?;
    println!("{secs:.6}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_values_compare_numerically_or_textually() {
        assert!(matches("3", "3"));
        assert!(!matches("3", "3.0"));
        assert!(matches(">=1", "1") && matches(">=1", "5") && !matches(">=1", "0"));
        assert!(matches(">0", "1") && !matches(">0", "0"));
        assert!(matches("<2", "1") && matches("<=2", "2"));
        assert!(matches("!=OOMKilled", "Error") && !matches("!=OOMKilled", "OOMKilled"));
        assert!(!matches(">=1", "null"));
    }

    #[test]
    fn lookup_reads_every_document() {
        let text = "{\"reason\":\"Started\"}\n{\"reason\":\"OOMKilling\",\"count\":2}\n";
        assert_eq!(lookup(text, "reason").unwrap(), ["Started", "OOMKilling"]);
        assert_eq!(lookup(text, "count").unwrap(), ["2"]);
        assert!(lookup("{", "x").is_err());
    }
}
