//! Wire → text: the reply types of [`super::wire`] as kubectl-style tables and `describe`
//! output (client side).
//!
//! Owns how a reply is shown to people. Pure functions: `now` is an argument. It must not talk
//! to the socket, and it reads only the wire types, so a field the server stops sending fails
//! when the reply is read, never here as an empty cell. Everything from outside (names,
//! messages, commands, environment) goes through [`format::cell`], so it cannot drive the
//! terminal.

use std::fmt::Write as _;
use std::time::SystemTime;

use super::time;
use super::wire::{self, Container, Pod, State, Timestamp};
use crate::core::{ConditionType, TerminationReason, WaitingReason};
use crate::format::{self, cell};

/// Aligns `\t`-separated cells like Go's `text/tabwriter` (what kubectl uses): a column's width
/// is the widest cell in the run of consecutive lines that have that column, plus `padding`,
/// at least `min_width`; the last cell of a line is not padded. Trailing blanks are trimmed.
pub fn tabwrite(text: &str, min_width: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let max_cols = lines.iter().map(Vec::len).max().unwrap_or(0);
    // widths[i][j]: width of column j on line i (if it is an aligned, non-last cell).
    let mut widths = vec![vec![0usize; max_cols]; lines.len()];
    for col in 0..max_cols.saturating_sub(1) {
        let mut i = 0;
        while i < lines.len() {
            if lines[i].len() <= col + 1 {
                i += 1;
                continue;
            }
            let start = i;
            let mut w = 0;
            while i < lines.len() && lines[i].len() > col + 1 {
                w = w.max(lines[i][col].chars().count());
                i += 1;
            }
            let w = (w + padding).max(min_width);
            for row in &mut widths[start..i] {
                row[col] = w;
            }
        }
    }
    let mut out = String::new();
    for (i, cells) in lines.iter().enumerate() {
        let mut line = String::new();
        for (j, cell) in cells.iter().enumerate() {
            line.push_str(cell);
            if j + 1 < cells.len() {
                let pad = widths[i][j].saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn condition_true(pod: &Pod, kind: ConditionType) -> bool {
    pod.conditions.iter().any(|c| c.kind == kind && c.status)
}

/// The STATUS column: kubectl's `printPod` display reason.
pub fn pod_display_status(pod: &Pod) -> String {
    pod_columns(pod).status
}

/// A pod's READY, STATUS and RESTARTS as kubectl's `printPod` computes them: the one
/// computation `vigil status` and `vigil top` both show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodColumns {
    pub status: String,
    /// READY's numerator and denominator.
    pub ready: usize,
    pub total: usize,
    pub restarts: u64,
    /// When the restart counted last ended (RESTARTS' `(… ago)`).
    pub last_restart: Option<SystemTime>,
}

/// Whether init container `c` is a sidecar: its own restart policy is `Always` (Kubernetes'
/// restartable init container, `podutil.IsRestartableInitContainer`).
fn is_sidecar(c: &Container) -> bool {
    c.spec.restart_policy == crate::config::spec::RestartPolicy::Always
}

/// (STATUS, RESTARTS, READY) exactly as kubectl's `printPod` computes them
/// (pkg/printers/internalversion/printers.go, 1.29+): a started sidecar is skipped by the
/// init walk and counted in READY (when ready) and in its denominator; once the pod is past
/// its init containers, RESTARTS is the sidecars' restarts plus the containers', and the last
/// restart is the latest of theirs.
fn pod_status_and_restarts(pod: &Pod, now: SystemTime) -> (String, String, String) {
    let c = pod_columns(pod);
    let restarts_text = match c.last_restart {
        Some(t) if c.restarts > 0 => format!("{} ({} ago)", c.restarts, format::age(now, t)),
        _ => c.restarts.to_string(),
    };
    (c.status, restarts_text, format!("{}/{}", c.ready, c.total))
}

/// [`PodColumns`] of `pod`.
pub fn pod_columns(pod: &Pod) -> PodColumns {
    let mut reason = pod.phase.as_str().to_string();
    let mut restarts: u64 = 0;
    let mut sidecar_restarts: u64 = 0;
    let mut total = pod.containers.len();
    let mut ready = 0usize;
    let mut last_restart: Option<SystemTime> = None;
    let mut last_sidecar_restart: Option<SystemTime> = None;
    let note_last = |c: &Container, last: &mut Option<SystemTime>| {
        if let Some(t) = &c.last_state.terminated {
            let t = t.finished_at.0;
            *last = Some(last.map_or(t, |l| l.max(t)));
        }
    };
    total += pod.init_containers.iter().filter(|c| is_sidecar(c)).count();
    let mut initializing = false;
    for (i, c) in pod.init_containers.iter().enumerate() {
        restarts += u64::from(c.restart_count);
        note_last(c, &mut last_restart);
        if is_sidecar(c) {
            sidecar_restarts += u64::from(c.restart_count);
            note_last(c, &mut last_sidecar_restart);
        }
        match &c.state {
            State::Terminated(t) if t.exit_code == 0 => continue,
            _ if is_sidecar(c) && c.started => {
                if c.ready {
                    ready += 1;
                }
                continue;
            }
            State::Terminated(t) => reason = format!("Init:{}", t.reason.as_str()),
            State::Waiting(w) if w.reason != WaitingReason::PodInitializing => {
                reason = format!("Init:{}", w.reason);
            }
            _ => reason = format!("Init:{}/{}", i, pod.init_containers.len()),
        }
        initializing = true;
        break;
    }
    if !initializing || condition_true(pod, ConditionType::Initialized) {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in pod.containers.iter().rev() {
            restarts += u64::from(c.restart_count);
            note_last(c, &mut last_restart);
            match &c.state {
                State::Waiting(w) => reason = w.reason.to_string(),
                State::Terminated(t) => reason = t.reason.as_str().to_string(),
                State::Running(_) if c.ready => {
                    has_running = true;
                    ready += 1;
                }
                State::Running(_) => {}
            }
        }
        // A completed container must not hide running ones.
        if reason == TerminationReason::Completed.as_str() && has_running {
            reason = if condition_true(pod, ConditionType::Ready) {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }
    // kubectl `printPod`: a pod being deleted shows `Terminating` whatever its containers do;
    // in vigil, a pod with a container being stopped.
    let terminating = pod
        .init_containers
        .iter()
        .chain(pod.containers.iter())
        .any(|c| matches!(&c.state, State::Running(r) if r.terminating.is_some()));
    if terminating {
        reason = "Terminating".to_string();
    }
    PodColumns {
        status: reason,
        ready,
        total,
        restarts,
        last_restart,
    }
}

/// `vigil status`: like `kubectl get pods` (`wide` adds PID, MEMORY, CPU).
pub fn status_table(reply: &wire::StatusReply, wide: bool, now: SystemTime) -> String {
    if reply.pods.is_empty() {
        return "No pods configured.\n".to_string();
    }
    let mut text = String::from("NAME\tREADY\tSTATUS\tRESTARTS\tAGE");
    if wide {
        text.push_str("\tPID\tMEMORY\tCPU");
    }
    text.push('\n');
    for pod in &reply.pods {
        let (status, restarts, ready) = pod_status_and_restarts(pod, now);
        let age = format::age(now, pod.created_at.0);
        let _ = write!(
            text,
            "{}\t{ready}\t{status}\t{restarts}\t{age}",
            cell(&pod.name)
        );
        if wide {
            let pids: Vec<String> = pod
                .containers
                .iter()
                .filter_map(|c| c.pid.map(|p| p.to_string()))
                .collect();
            let sum = |figure: fn(&wire::Figures) -> Option<u64>| -> Option<u64> {
                let figures: Vec<u64> = pod
                    .containers
                    .iter()
                    .filter_map(|c| figure(&c.resources))
                    .collect();
                (!figures.is_empty()).then(|| figures.iter().sum())
            };
            let none = || "<none>".to_string();
            let _ = write!(
                text,
                "\t{}\t{}\t{}",
                if pids.is_empty() {
                    none()
                } else {
                    pids.join(",")
                },
                sum(|f| f.memory_current).map_or_else(none, format::human_bytes),
                sum(|f| f.cpu_usage_usec).map_or_else(none, format::human_cpu),
            );
        }
        text.push('\n');
    }
    // kubectl get: min width 6, padding 3.
    let mut out = tabwrite(&text, 6, 3);
    out.push_str(&schedules_table(reply, now));
    out.push_str(&rollout_lines(reply));
    out
}

/// When some replica's pod with replicas had a rollout: one line for each such pod, after a
/// blank line (`rolling restart of pod web: Progressing, 1/3 replaced, waiting for web-1`);
/// else nothing.
fn rollout_lines(reply: &wire::StatusReply) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut text = String::new();
    for r in reply.pods.iter().filter_map(|p| p.rollout.as_ref()) {
        if seen.contains(&r.pod.as_str()) {
            continue;
        }
        seen.push(&r.pod);
        let _ = write!(
            text,
            "rolling {} of pod {}: {}, {}/{} replaced",
            cell(&r.kind),
            cell(&r.pod),
            cell(&r.state),
            r.replaced,
            r.total
        );
        if let (Some(reason), Some(message)) = (&r.reason, &r.message) {
            let _ = write!(text, " ({}: {})", cell(reason), cell(message));
        } else if !r.waiting_for.is_empty() {
            let waiting: Vec<String> = r.waiting_for.iter().map(|p| cell(p)).collect();
            let _ = write!(text, ", waiting for {}", waiting.join(", "));
        }
        text.push('\n');
    }
    if text.is_empty() {
        return text;
    }
    format!("\n{text}")
}

/// When some pod has a `schedule`: a second table, `kubectl get cronjobs`' columns with the
/// next run beside them (`NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE NEXT RUN`), after
/// a blank line; else nothing.
fn schedules_table(reply: &wire::StatusReply, now: SystemTime) -> String {
    let scheduled: Vec<(&Pod, &wire::Schedule)> = (reply.pods.iter())
        .filter_map(|p| Some((p, p.schedule.as_ref()?)))
        .collect();
    if scheduled.is_empty() {
        return String::new();
    }
    let mut text =
        String::from("NAME\tSCHEDULE\tTIMEZONE\tSUSPEND\tACTIVE\tLAST SCHEDULE\tNEXT RUN\n");
    for (pod, s) in scheduled {
        let _ = writeln!(
            text,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            cell(&pod.name),
            cell(&s.cron),
            s.time_zone
                .as_deref()
                .map_or_else(|| "<none>".to_string(), cell),
            if s.suspended { "True" } else { "False" },
            u8::from(s.active),
            last_schedule(s, now),
            next_run(s, now),
        );
    }
    format!("\n{}", tabwrite(&text, 6, 3))
}

/// `LAST SCHEDULE` as `kubectl get cronjobs` shows it: how long ago, or `<none>`.
fn last_schedule(s: &wire::Schedule, now: SystemTime) -> String {
    s.last_schedule.map_or_else(
        || "<none>".to_string(),
        |t| format!("{} ago", format::age(now, t.0)),
    )
}

/// The next run: `in 5h`, or `<none>` (suspended, or the pattern never matches again).
fn next_run(s: &wire::Schedule, now: SystemTime) -> String {
    s.next_run.map_or_else(
        || "<none>".to_string(),
        |t| format!("in {}", format::age(t.0, now)),
    )
}

fn event_age(e: &wire::Event, now: SystemTime) -> String {
    format::event_age(
        now,
        e.first_timestamp.0,
        e.last_timestamp.0,
        u64::from(e.count),
    )
}

/// `vigil events`: `LAST SEEN  TYPE  REASON  OBJECT  MESSAGE`, oldest first.
pub fn events_table(events: &[wire::Event], now: SystemTime) -> String {
    if events.is_empty() {
        return "No events.\n".to_string();
    }
    let mut text = String::from("LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE\n");
    for e in events {
        let _ = writeln!(
            text,
            "{}\t{}\t{}\t{}\t{}",
            event_age(e, now),
            e.kind.as_str(),
            cell(&e.reason),
            cell(&e.object),
            cell(&e.message)
        );
    }
    tabwrite(&text, 6, 3)
}

/// Width of a followed event's LAST SEEN column: room for `4m52s (x99999 over 5h20m)`, so a
/// repeat's count does not push the columns after it (a longer cell pushes its row only).
const FOLLOW_AGE_WIDTH: usize = 25;

/// One followed event as a table row with fixed column widths (the table cannot be realigned
/// once printed).
pub fn event_follow_line(e: &wire::Event, now: SystemTime) -> String {
    format!(
        "{:<FOLLOW_AGE_WIDTH$} {:<8} {:<22} {:<24} {}\n",
        event_age(e, now),
        e.kind.as_str(),
        cell(&e.reason),
        cell(&e.object),
        cell(&e.message)
    )
}

/// The header matching [`event_follow_line`].
pub fn event_follow_header() -> String {
    format!(
        "{:<FOLLOW_AGE_WIDTH$} {:<8} {:<22} {:<24} {}\n",
        "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"
    )
}

/// Appends a `key:\tvalue` line at `indent` levels of two spaces.
fn kv(out: &mut String, indent: usize, key: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{}{key}:\t{value}", "  ".repeat(indent));
}

fn plain(out: &mut String, indent: usize, text: &str) {
    let _ = writeln!(out, "{}{text}", "  ".repeat(indent));
}

fn rfc1123(t: Timestamp) -> String {
    time::rfc1123z(t.0)
}

/// An argument as `describe` lists it: empty ones as `""` so they are visible.
fn arg_text(arg: &str) -> String {
    if arg.is_empty() {
        "\"\"".to_string()
    } else {
        cell(arg)
    }
}

fn describe_terminated(out: &mut String, title: &str, t: &wire::Terminated) {
    kv(out, 2, title, "Terminated");
    kv(out, 3, "Reason", t.reason.as_str());
    if !t.message.is_empty() {
        kv(out, 3, "Message", cell(&t.message));
    }
    kv(out, 3, "Exit Code", t.exit_code);
    if let Some(sig) = t.signal.filter(|s| *s != 0) {
        kv(out, 3, "Signal", sig);
    }
    if let Some(s) = t.started_at {
        kv(out, 3, "Started", rfc1123(s));
    }
    kv(out, 3, "Finished", rfc1123(t.finished_at));
}

/// The `State:` block as `kubectl describe` prints it.
fn describe_state(out: &mut String, state: &State) {
    match state {
        State::Waiting(w) => {
            kv(out, 2, "State", "Waiting");
            kv(out, 3, "Reason", w.reason);
            if !w.message.is_empty() {
                kv(out, 3, "Message", cell(&w.message));
            }
        }
        State::Running(r) => {
            kv(out, 2, "State", "Running");
            kv(out, 3, "Started", rfc1123(r.started_at));
            if let Some(t) = &r.terminating {
                kv(out, 3, "Terminating", rfc1123(t.since));
                let grace = crate::format::go_duration(std::time::Duration::from_secs_f64(
                    t.grace_period_seconds.max(0.0),
                ));
                let kill = if t.killed {
                    "SIGKILL sent".to_string()
                } else {
                    format!("grace period {grace}")
                };
                kv(out, 3, "Message", cell(&format!("{} ({kill})", t.message)));
            }
        }
        State::Terminated(t) => describe_terminated(out, "State", t),
    }
}

fn describe_probe_line(p: &wire::ProbeSpec) -> String {
    format!(
        "{} delay={} timeout={} period={} #success={} #failure={}",
        cell(&p.action),
        format::seconds(p.initial_delay_seconds),
        format::seconds(p.timeout_seconds),
        format::seconds(p.period_seconds),
        p.success_threshold,
        p.failure_threshold,
    )
}

fn describe_container(out: &mut String, c: &Container, now: SystemTime) {
    plain(out, 1, &format!("{}:", cell(&c.name)));
    let spec = &c.spec;
    plain(out, 2, "Command:");
    for arg in &spec.command {
        plain(out, 3, &arg_text(arg));
    }
    describe_state(out, &c.state);
    if let Some(t) = &c.last_state.terminated {
        describe_terminated(out, "Last State", t);
    }
    let tf = |b: bool| if b { "True" } else { "False" };
    kv(out, 2, "Ready", tf(c.ready));
    kv(out, 2, "Started", tf(c.started));
    kv(out, 2, "Restart Count", c.restart_count);
    kv(out, 2, "Restart Policy", spec.restart_policy.as_str());
    if let Some(pid) = c.pid {
        kv(out, 2, "PID", pid);
    }
    if let Some(n) = &c.notify {
        let said = match (n.ready, n.stopping) {
            (_, true) => "stopping (STOPPING=1)",
            (true, false) => "ready (READY=1)",
            (false, false) => "waiting for READY=1",
        };
        kv(out, 2, "Notify", said);
        if let Some(status) = &n.status {
            kv(out, 2, "Notify Status", cell(status));
        }
    }
    if c.output_lost {
        kv(
            out,
            2,
            "Output",
            "lost in a crash of vigil (its writes to stdout and stderr fail)",
        );
    }
    if let Some(cg) = &c.cgroup {
        kv(out, 2, "Cgroup", cell(cg));
    }
    for (probe, title) in [
        (&spec.liveness_probe, "Liveness"),
        (&spec.readiness_probe, "Readiness"),
        (&spec.startup_probe, "Startup"),
    ] {
        if let Some(p) = probe {
            kv(out, 2, title, describe_probe_line(p));
        }
    }

    // Limits, in kubectl's spelling where one exists.
    let limits = &spec.limits;
    let mut lim = Vec::new();
    if let Some(cpu) = limits.cpu_max {
        lim.push(("cpu", format!("{}m", (cpu * 1000.0).round() as u64)));
    }
    if let Some(w) = limits.cpu_weight {
        lim.push(("cpu.weight", w.to_string()));
    }
    if let Some(m) = limits.memory_max {
        lim.push(("memory", format::human_bytes(m)));
    }
    if let Some(m) = limits.memory_high {
        lim.push(("memory.high", format::human_bytes(m)));
    }
    if let Some(m) = limits.swap_max {
        lim.push(("swap", format::human_bytes(m)));
    }
    if let Some(p) = limits.pids_max {
        lim.push(("pids", p.to_string()));
    }
    if limits.oom_group {
        lim.push(("oom.group", "true".to_string()));
    }
    if !lim.is_empty() {
        plain(out, 2, "Limits:");
        for (k, v) in lim {
            kv(out, 3, k, v);
        }
    }

    // Current figures from the cgroup.
    let r = &c.resources;
    let mut figures = Vec::new();
    if let Some(m) = r.memory_current {
        let mut s = format::human_bytes(m);
        if let Some(p) = r.memory_peak {
            let _ = write!(s, " (peak {})", format::human_bytes(p));
        }
        figures.push(("Memory", s));
    }
    if r.oom_kills > 0 {
        figures.push(("OOM Kills", r.oom_kills.to_string()));
    }
    if let Some(u) = r.cpu_usage_usec {
        figures.push(("CPU Time", format::human_cpu(u)));
    }
    if let Some(p) = r.pids_current {
        figures.push(("Pids", p.to_string()));
    }
    if let Some(p) = r.memory_pressure_some_avg10 {
        figures.push(("Memory Pressure", format!("some avg10={p:.2}")));
    }
    if !figures.is_empty() {
        plain(out, 2, "Resources:");
        for (k, v) in figures {
            kv(out, 3, k, v);
        }
    }

    if c.probes.iter().any(|p| !p.recent.is_empty()) {
        plain(out, 2, "Probe Results:");
        for p in &c.probes {
            for rec in &p.recent {
                let outcome = if rec.success { "success" } else { "failure" };
                // Which run it probed: results of an earlier run explain its restart.
                let run = match rec.run {
                    0 => "run ?".to_string(),
                    n => format!("run {n}"),
                };
                let _ = writeln!(
                    out,
                    "      {}\t{run}\t{outcome}\t{} ago\t{:.0}ms\t{}",
                    p.kind.as_str(),
                    format::age(now, rec.time.0),
                    rec.duration_ms,
                    cell(&rec.message)
                );
            }
        }
    }
    if spec.env.is_empty() {
        kv(out, 2, "Environment", "<none>");
    } else {
        plain(out, 2, "Environment:");
        for (k, v) in &spec.env {
            kv(out, 3, &cell(k), arg_text(v));
        }
    }
}

/// A kept run's outcome: `Succeeded`, or `Failed: run Error (exit code 7)`.
fn run_result(r: &wire::Run) -> String {
    match &r.failure {
        None => r.phase.as_str().to_string(),
        Some(f) => format!(
            "{}: {} {} (exit code {})",
            r.phase.as_str(),
            cell(&f.container),
            f.reason.as_str(),
            f.exit_code
        ),
    }
}

/// `vigil describe POD`: like `kubectl describe pod`, with the pod's events.
pub fn describe_text(reply: &wire::DescribeReply, now: SystemTime) -> String {
    let pod = &reply.pod;
    let mut out = String::new();
    kv(&mut out, 0, "Name", cell(&pod.name));
    kv(&mut out, 0, "Start Time", rfc1123(pod.created_at));
    kv(&mut out, 0, "Status", pod.phase.as_str());
    kv(&mut out, 0, "Restart Policy", pod.restart_policy.as_str());
    if let Some(s) = &pod.schedule {
        // kubectl describe cronjob's lines, and the next run.
        let zone = s
            .time_zone
            .as_deref()
            .map_or_else(String::new, |z| format!(" ({})", cell(z)));
        kv(&mut out, 0, "Schedule", format!("{}{zone}", cell(&s.cron)));
        kv(&mut out, 0, "Concurrency Policy", cell(&s.concurrency));
        kv(
            &mut out,
            0,
            "Suspend",
            if s.suspended { "True" } else { "False" },
        );
        let when = |t: Option<Timestamp>, what: String| {
            t.map_or_else(
                || "<unset>".to_string(),
                |t| format!("{} ({what})", rfc1123(t)),
            )
        };
        kv(
            &mut out,
            0,
            "Last Schedule Time",
            when(s.last_schedule, last_schedule(s, now)),
        );
        kv(
            &mut out,
            0,
            "Next Schedule Time",
            when(s.next_run, next_run(s, now)),
        );
        kv(
            &mut out,
            0,
            "Active",
            if s.active { "True" } else { "False" },
        );
    }
    if !pod.init_containers.is_empty() {
        plain(&mut out, 0, "Init Containers:");
        for c in &pod.init_containers {
            describe_container(&mut out, c, now);
        }
    }
    plain(&mut out, 0, "Containers:");
    for c in &pod.containers {
        describe_container(&mut out, c, now);
    }
    if !pod.conditions.is_empty() {
        plain(&mut out, 0, "Conditions:");
        let _ = writeln!(out, "  Type\tStatus\tReason\tMessage");
        for c in &pod.conditions {
            let _ = writeln!(
                out,
                "  {}\t{}\t{}\t{}",
                c.kind.as_str(),
                if c.status { "True" } else { "False" },
                cell(&c.reason),
                cell(&c.message)
            );
        }
    }
    if !pod.runs.is_empty() {
        // The runs `history` keeps, newest first (`kubectl get jobs`' duration and age).
        plain(&mut out, 0, "Runs:");
        let _ = writeln!(out, "  Scheduled For\tStarted\tDuration\tResult");
        for r in pod.runs.iter().rev() {
            let took = (r.finished_at.0)
                .duration_since(r.started_at.0)
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {}\t{} ago\t{}\t{}",
                r.scheduled_for
                    .map_or_else(|| "<none>".to_string(), rfc1123),
                format::age(now, r.started_at.0),
                format::human_duration(took),
                run_result(r),
            );
        }
    }
    // Describe's tabwriter: padding 2 (the header block and the events block are aligned
    // separately, because lines without a tab end an alignment run).
    let mut text = tabwrite(&out, 0, 2);
    if reply.events.is_empty() {
        text.push_str("Events:  <none>\n");
    } else {
        text.push_str("Events:\n");
        let mut table = String::from(
            "  Type\tReason\tAge\tFrom\tMessage\n  ----\t------\t----\t----\t-------\n",
        );
        for e in &reply.events {
            let _ = writeln!(
                table,
                "  {}\t{}\t{}\tvigil\t{}",
                e.kind.as_str(),
                cell(&e.reason),
                event_age(e, now),
                cell(&e.message)
            );
        }
        text.push_str(&tabwrite(&table, 0, 2));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant, UNIX_EPOCH};

    use super::*;
    use crate::control::render::{self, Secrets, fixtures::*};
    use crate::core::{EventType, Phase};

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_000_000)
    }

    fn sample_status(mono: Instant) -> wire::StatusReply {
        render::status(
            &[sample_pod(mono)],
            &observed(),
            &clock(mono),
            Secrets::Shown,
        )
    }

    #[test]
    fn status_table_shows_crashloop_restarts_and_age() {
        let mono = Instant::now();
        let v = sample_status(mono);
        let t = status_table(&v, false, now());
        assert_eq!(
            t,
            "NAME   READY   STATUS             RESTARTS     AGE\n\
             web    1/2     CrashLoopBackOff   3 (4m ago)   60m\n"
        );
        let t = status_table(&v, true, now());
        let row = t.lines().nth(1).unwrap();
        assert!(row.ends_with("60m   4242   0        0.00s"), "{row:?}");
    }

    #[test]
    fn status_column_follows_kubectl_display_reasons() {
        let mono = Instant::now();
        let template = sample_status(mono).pods[0].containers[1].clone();
        let at = Timestamp(now());
        let with = |state: State, ready: bool| Container {
            name: "c".into(),
            ready,
            restart_count: 0,
            state,
            last_state: wire::LastState::default(),
            ..template.clone()
        };
        let waiting = |reason| {
            with(
                State::Waiting(wire::Waiting {
                    reason,
                    message: String::new(),
                }),
                false,
            )
        };
        let running = |ready| {
            with(
                State::Running(wire::Running {
                    started_at: at,
                    terminating: None,
                }),
                ready,
            )
        };
        let terminated = |exit_code, reason| {
            with(
                State::Terminated(wire::Terminated {
                    exit_code,
                    signal: None,
                    reason,
                    message: String::new(),
                    started_at: None,
                    finished_at: at,
                }),
                false,
            )
        };
        // Plain init containers (a sidecar's own restart policy is `Always`: see the sidecar
        // test below).
        let pod_with = |init: Vec<Container>, containers: Vec<Container>, initialized| Pod {
            name: "p".into(),
            phase: Phase::Pending,
            restart_policy: crate::config::spec::RestartPolicy::Always,
            created_at: at,
            schedule: None,
            runs: vec![],
            rollout: None,
            conditions: vec![wire::Condition {
                kind: ConditionType::Initialized,
                status: initialized,
                reason: String::new(),
                message: String::new(),
                last_transition_time: at,
            }],
            init_containers: init
                .into_iter()
                .map(|mut c| {
                    c.spec.restart_policy = crate::config::spec::RestartPolicy::OnFailure;
                    c
                })
                .collect(),
            containers,
        };
        let terminating = with(
            State::Running(wire::Running {
                started_at: at,
                terminating: Some(wire::Terminating {
                    since: at,
                    grace_period_seconds: 5.0,
                    message: "stopped by request".into(),
                    killed: false,
                }),
            }),
            false,
        );
        use TerminationReason as T;
        use WaitingReason as W;
        let cases = [
            (
                pod_with(vec![], vec![running(true), terminating.clone()], true),
                "Terminating",
            ),
            (
                pod_with(
                    vec![waiting(W::PodInitializing)],
                    vec![waiting(W::PodInitializing)],
                    false,
                ),
                "Init:0/1",
            ),
            (
                pod_with(
                    vec![terminated(0, T::Completed), running(false)],
                    vec![waiting(W::PodInitializing)],
                    false,
                ),
                "Init:1/2",
            ),
            (
                pod_with(
                    vec![waiting(W::CrashLoopBackOff)],
                    vec![waiting(W::PodInitializing)],
                    false,
                ),
                "Init:CrashLoopBackOff",
            ),
            (
                pod_with(
                    vec![terminated(1, T::Error)],
                    vec![waiting(W::PodInitializing)],
                    false,
                ),
                "Init:Error",
            ),
            (
                pod_with(vec![], vec![waiting(W::ContainerCreating)], true),
                "ContainerCreating",
            ),
            (
                pod_with(vec![], vec![terminated(0, T::Completed)], true),
                "Completed",
            ),
            (
                pod_with(vec![], vec![terminated(137, T::OomKilled)], true),
                "OOMKilled",
            ),
            (
                pod_with(
                    vec![],
                    vec![running(true), terminated(0, T::Completed)],
                    true,
                ),
                "NotReady",
            ),
            (
                pod_with(vec![terminated(0, T::Completed)], vec![running(true)], true),
                "Pending",
            ),
        ];
        for (pod, want) in cases {
            assert_eq!(pod_display_status(&pod), want, "{pod:?}");
        }
        assert_eq!(
            status_table(&wire::StatusReply { pods: vec![] }, false, now()),
            "No pods configured.\n"
        );
    }

    /// kubectl's own cases for restartable init containers (kubernetes
    /// pkg/printers/internalversion/printers_test.go, `TestPrintPodWithRestartableInitContainer`),
    /// and the one a user met: a started sidecar and a running container show `2/2 Running`,
    /// with the sidecar's restarts counted.
    #[test]
    fn sidecars_print_as_kubectl_prints_restartable_init_containers() {
        use crate::config::spec::RestartPolicy;
        use TerminationReason as T;
        let mono = Instant::now();
        let template = sample_status(mono).pods[0].containers[1].clone();
        let ago = |secs| Timestamp(now() - Duration::from_secs(secs));
        let last = |secs: Option<u64>| wire::LastState {
            terminated: secs.map(|s| wire::Terminated {
                exit_code: 1,
                signal: None,
                reason: T::Error,
                message: String::new(),
                started_at: None,
                finished_at: ago(s),
            }),
        };
        let running = State::Running(wire::Running {
            started_at: ago(60),
            terminating: None,
        });
        let waiting = State::Waiting(wire::Waiting {
            reason: WaitingReason::ContainerCreating,
            message: String::new(),
        });
        let terminated = |exit_code, reason| {
            State::Terminated(wire::Terminated {
                exit_code,
                signal: None,
                reason,
                message: String::new(),
                started_at: None,
                finished_at: ago(5),
            })
        };
        let container = |state: &State, ready, started, restarts, last_secs, policy| {
            let mut c = Container {
                name: "c".into(),
                ready,
                started,
                restart_count: restarts,
                state: state.clone(),
                last_state: last(last_secs),
                ..template.clone()
            };
            c.spec.restart_policy = policy;
            c
        };
        let sidecar = |state: &State, ready, started, restarts, last_secs| {
            container(
                state,
                ready,
                started,
                restarts,
                last_secs,
                RestartPolicy::Always,
            )
        };
        let main = |state: &State, ready, restarts, last_secs| {
            container(
                state,
                ready,
                true,
                restarts,
                last_secs,
                RestartPolicy::Always,
            )
        };
        let pod = |phase, init, containers, initialized, ready| Pod {
            name: "p".into(),
            phase,
            restart_policy: RestartPolicy::Always,
            created_at: ago(3600),
            schedule: None,
            runs: vec![],
            rollout: None,
            conditions: [
                (ConditionType::Initialized, initialized),
                (ConditionType::Ready, ready),
            ]
            .into_iter()
            .map(|(kind, status)| wire::Condition {
                kind,
                status,
                reason: String::new(),
                message: String::new(),
                last_transition_time: ago(3600),
            })
            .collect(),
            init_containers: init,
            containers,
        };
        let row = |p: &Pod| pod_status_and_restarts(p, now());
        let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        let cases = [
            // Two sidecars, the first running but not started: still initializing.
            (
                pod(
                    Phase::Pending,
                    vec![
                        sidecar(&running, false, false, 3, Some(10)),
                        sidecar(&waiting, false, false, 0, None),
                    ],
                    vec![main(&waiting, false, 0, None)],
                    false,
                    false,
                ),
                s("Init:0/2", "3 (10s ago)", "0/3"),
            ),
            // The first started, the second running but not started.
            (
                pod(
                    Phase::Pending,
                    vec![
                        sidecar(&running, false, true, 3, Some(10)),
                        sidecar(&running, false, false, 0, None),
                    ],
                    vec![main(&waiting, false, 0, None)],
                    false,
                    false,
                ),
                s("Init:1/2", "3 (10s ago)", "0/3"),
            ),
            // Both started (not ready), the container running and ready: the sidecars' restarts
            // and the latest of every restart.
            (
                pod(
                    Phase::Running,
                    vec![
                        sidecar(&running, false, true, 3, Some(10)),
                        sidecar(&running, false, true, 0, None),
                    ],
                    vec![main(&running, true, 4, Some(20))],
                    true,
                    false,
                ),
                s("Running", "7 (10s ago)", "1/3"),
            ),
            // Sidecars ended with an error, the container completed.
            (
                pod(
                    Phase::Succeeded,
                    vec![
                        sidecar(&terminated(137, T::Error), false, false, 3, Some(10)),
                        sidecar(&terminated(137, T::Error), false, false, 0, None),
                    ],
                    vec![main(&terminated(0, T::Completed), false, 4, Some(20))],
                    true,
                    false,
                ),
                s("Completed", "7 (10s ago)", "0/3"),
            ),
            // The user's case: one started, ready sidecar that restarted once, one container.
            (
                pod(
                    Phase::Running,
                    vec![sidecar(&running, true, true, 1, Some(30))],
                    vec![main(&running, true, 0, None)],
                    true,
                    true,
                ),
                s("Running", "1 (30s ago)", "2/2"),
            ),
        ];
        for (p, want) in cases {
            assert_eq!(row(&p), want, "{p:?}");
        }
    }

    #[test]
    fn describe_text_reads_like_kubectl_describe() {
        let mono = Instant::now();
        let clock = clock(mono);
        let d = render::describe(
            &sample_pod(mono),
            &observed(),
            &[sample_event(mono)],
            &clock,
            Secrets::Shown,
        );
        let text = describe_text(&d, now());
        for want in [
            "Name:            web\n",
            "Status:          Running\n",
            "Containers:\n  app:\n",
            "    Cgroup:          /sys/fs/cgroup/vigil/web/app\n",
            "    Command:\n      /usr/bin/app\n      --port\n      8080\n",
            "    State:           Waiting\n      Reason:        CrashLoopBackOff\n",
            "    Last State:      Terminated\n      Reason:        OOMKilled\n",
            "      Exit Code:     137\n      Signal:        9\n",
            "      Started:       Mon, 12 Jan 1970 13:41:40 +0000\n",
            "    Restart Count:   3\n",
            "    Limits:\n      cpu:     1500m\n      memory:  20Mi\n",
            "    Liveness:        http-get http://127.0.0.1:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3\n",
            // An attempt of an earlier run (restart count 3 now): the run says which.
            "      liveness  run 2  failure  4m10s ago  3ms  HTTP probe failed with statuscode: 500\n",
            "    Environment:\n      RUST_LOG:  info\n",
            "  Type             Status  Reason              Message\n",
            "  ContainersReady  False   ContainersNotReady  containers with unready status: [app]\n",
            "  Type     Reason   Age                   From   Message\n",
            "  Warning  BackOff  4m52s (x79 over 28m)  vigil  Back-off restarting failed container app in pod web\n",
            "    State:           Running\n      Started:       Mon, 12 Jan 1970 13:36:40 +0000\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        assert!(
            !text.lines().any(|l| l.ends_with(' ')),
            "trailing blanks:\n{text}"
        );
        let empty = describe_text(
            &wire::DescribeReply {
                events: vec![],
                ..d
            },
            now(),
        );
        assert!(empty.ends_with("Events:  <none>\n"));
    }

    #[test]
    fn describe_lists_the_kept_runs_newest_first_with_how_each_ended() {
        let mono = Instant::now();
        let clock = clock(mono);
        let mut pod = sample_pod(mono);
        let ago = |s: u64| mono - Duration::from_secs(s);
        pod.runs = vec![
            crate::core::history::RunRecord {
                started_at: ago(7200),
                finished_at: ago(7140),
                scheduled_for: None,
                failure: None,
            },
            crate::core::history::RunRecord {
                started_at: ago(3600),
                finished_at: ago(3590),
                scheduled_for: Some("1970-01-12T13:00:00Z".parse().unwrap()),
                failure: Some(crate::core::history::RunFailure {
                    container: "app".to_string(),
                    reason: crate::core::TerminationReason::Error,
                    exit_code: 7,
                }),
            },
        ];
        let d = render::describe(&pod, &observed(), &[], &clock, Secrets::Shown);
        let text = describe_text(&d, now());
        let runs: Vec<&str> = text.lines().skip_while(|l| *l != "Runs:").take(4).collect();
        assert_eq!(
            runs,
            vec![
                "Runs:",
                "  Scheduled For                    Started   Duration  Result",
                "  Mon, 12 Jan 1970 13:00:00 +0000  60m ago   10s       Failed: app Error (exit code 7)",
                "  <none>                           120m ago  60s       Succeeded",
            ],
            "{text}"
        );
        // The JSON a script reads: oldest first, the failure with its reason.
        let json = serde_json::to_value(&d.pod).unwrap();
        assert_eq!(json["runs"][0]["phase"], "Succeeded");
        assert_eq!(json["runs"][1]["failure"]["reason"], "Error");
        assert_eq!(json["runs"][1]["scheduled_for"], "1970-01-12T13:00:00.000Z");
        let without = render::describe(&sample_pod(mono), &observed(), &[], &clock, Secrets::Shown);
        let json = serde_json::to_value(&without.pod).unwrap();
        assert!(json.get("runs").is_none(), "no runs kept: no field");
    }

    #[test]
    fn describe_shows_empty_arguments_and_escapes_terminal_controls() {
        let mono = Instant::now();
        let mut d = render::describe(
            &sample_pod(mono),
            &observed(),
            &[],
            &clock(mono),
            Secrets::Shown,
        );
        let app = &mut d.pod.containers[0];
        app.spec.command = vec!["/bin/echo".into(), String::new(), "\x1b[2J".into()];
        app.spec.env.insert("EMPTY".into(), String::new());
        if let State::Waiting(w) = &mut app.state {
            w.message = "evil\x1b]0;title\x07".into();
        }
        let text = describe_text(&d, now());
        assert!(
            text.contains("    Command:\n      /bin/echo\n      \"\"\n      \\x1b[2J\n"),
            "{text}"
        );
        assert!(text.contains("      EMPTY:     \"\"\n"), "{text}");
        assert!(
            text.contains("Message:       evil\\x1b]0;title\\x07\n"),
            "{text}"
        );
        assert!(!text.contains('\x1b'), "{text}");
    }

    #[test]
    fn events_table_lists_oldest_first_with_repeats() {
        let mono = Instant::now();
        let mut started = sample_event(mono);
        started.kind = EventType::Normal;
        started.reason = "Started".into();
        started.message = "Started container app".into();
        started.count = 1;
        started.first = mono - Duration::from_secs(45);
        started.last = started.first;
        let v = render::events([&sample_event(mono), &started], &clock(mono));
        assert_eq!(
            events_table(&v.events, now()),
            "LAST SEEN              TYPE      REASON    OBJECT    MESSAGE\n\
             4m52s (x79 over 28m)   Warning   BackOff   web/app   Back-off restarting failed container app in pod web\n\
             45s                    Normal    Started   web/app   Started container app\n"
        );
        assert_eq!(events_table(&[], now()), "No events.\n");
        let line = event_follow_line(&v.events[1], now());
        assert!(line.starts_with("45s   "), "{line:?}");
    }

    #[test]
    fn followed_event_columns_stay_put_when_a_repeat_count_appears() {
        let mono = Instant::now();
        let mut once = sample_event(mono);
        once.count = 1;
        once.first = mono - Duration::from_secs(5);
        once.last = once.first;
        let mut many = sample_event(mono);
        many.count = 12_345;
        many.first = mono - Duration::from_secs(5 * 3600 + 20 * 60);
        many.last = mono - Duration::from_secs(292);
        let v = render::events([&once, &many], &clock(mono));
        let header = event_follow_header();
        let rows = [
            event_follow_line(&v.events[0], now()),
            event_follow_line(&v.events[1], now()),
        ];
        assert!(
            rows[1].starts_with("4m52s (x12345 over 5h20m)"),
            "{:?}",
            rows[1]
        );
        let col = |line: &str, word: &str| line.find(word).unwrap();
        for row in &rows {
            assert_eq!(col(row, "Warning"), col(&header, "TYPE"), "{row:?}");
            assert_eq!(col(row, "BackOff"), col(&header, "REASON"), "{row:?}");
            assert_eq!(col(row, "web/app"), col(&header, "OBJECT"), "{row:?}");
        }
    }

    #[test]
    fn tabwrite_aligns_runs_and_skips_last_cells() {
        let text = "a\tbb\tc\nccc\td\te\nno tabs here\nxx\ty\n";
        assert_eq!(
            tabwrite(text, 0, 2),
            "a    bb  c\nccc  d   e\nno tabs here\nxx  y\n"
        );
    }
}
