//! Rendering: the core's snapshot → JSON (server side), and JSON → kubectl-style text (client
//! side).
//!
//! Owns the exact shape of the status JSON (interface.md, "Status JSON") and how it is shown.
//! Pure functions: the wall-clock anchor and `now` are arguments. It must not query the core
//! or the socket. The client renders only from JSON, so what `-o json` shows is exactly what
//! the tables are built from.
//!
//! Result shapes the runtime sends (and the client expects):
//! - `status`: [`status_json`] → `{"pods": [...]}`
//! - `describe`: [`describe_json`] → `{"pod": {...}, "events": [...]}`
//! - `events`: [`events_json`] → `{"events": [...]}`; followed events as `reply_event` lines
//!   carrying [`event_json`].
//! - `logs`: `{"log": "..."}`; followed output as `reply_log` lines.
//! - `version`: [`version_json`] → `{"version": "..."}`.
//! - `start`/`stop`/`restart`/`reload`/`shutdown`: any object; an optional `"message"` is shown.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use super::time::{self, WallClock};
use crate::config::spec::{ContainerSpec, ProbeAction, ProbeSpec, Resources};
use crate::core::{
    Condition, ContainerState, ContainerStatus, Event, PodStatus, ProbeResultState, ProbeStatus,
    Terminated,
};

// ---------------------------------------------------------------------------------------------
// Server side: snapshot → JSON
// ---------------------------------------------------------------------------------------------

/// `{"pods": [...]}`.
pub fn status_json(pods: &[PodStatus], clock: &WallClock) -> Value {
    json!({"pods": pods.iter().map(|p| pod_json(p, clock)).collect::<Vec<_>>()})
}

/// One pod, per interface.md.
pub fn pod_json(pod: &PodStatus, clock: &WallClock) -> Value {
    json!({
        "name": pod.name,
        "phase": pod.phase.as_str(),
        "restart_policy": pod.restart_policy.as_str(),
        "created_at": clock.rfc3339(pod.created_at),
        "conditions": pod.conditions.iter().map(|c| condition_json(c, clock)).collect::<Vec<_>>(),
        "init_containers": pod.init_containers.iter().map(|c| container_json(c, clock)).collect::<Vec<_>>(),
        "containers": pod.containers.iter().map(|c| container_json(c, clock)).collect::<Vec<_>>(),
    })
}

fn condition_json(c: &Condition, clock: &WallClock) -> Value {
    json!({
        "type": c.kind.as_str(),
        "status": if c.status { "True" } else { "False" },
        "reason": c.reason,
        "message": c.message,
        "last_transition_time": clock.rfc3339(c.last_transition),
    })
}

fn terminated_json(t: &Terminated, clock: &WallClock) -> Value {
    json!({
        "exit_code": t.exit_code,
        "signal": t.signal,
        "reason": t.reason.as_str(),
        "message": t.message,
        "started_at": t.started_at.map(|s| clock.rfc3339(s)),
        "finished_at": clock.rfc3339(t.finished_at),
    })
}

/// One container: status, last state, cgroup figures, probe results and a spec summary.
pub fn container_json(c: &ContainerStatus, clock: &WallClock) -> Value {
    let state = match &c.state {
        ContainerState::Waiting { reason, message } => {
            json!({"waiting": {"reason": reason.as_str(), "message": message}})
        }
        ContainerState::Running { started_at } => {
            json!({"running": {"started_at": clock.rfc3339(*started_at)}})
        }
        ContainerState::Terminated(t) => json!({"terminated": terminated_json(t, clock)}),
    };
    let last_state = match &c.last_state {
        Some(t) => json!({"terminated": terminated_json(t, clock)}),
        None => json!({}),
    };
    let figures = c.resources.clone().unwrap_or_default();
    let resources = json!({
        "memory_current": figures.memory_current,
        "memory_peak": figures.memory_peak,
        "memory_max": figures.memory_max.or(c.spec.resources.memory_max),
        "oom_kills": c.oom_kills,
        "cpu_usage_usec": figures.cpu_usage_usec,
        "pids_current": figures.pids_current,
        "memory_pressure_some_avg10": figures.memory_pressure_some_avg10,
    });
    json!({
        "name": c.name,
        "ready": c.ready,
        "started": c.started,
        "restart_count": c.restart_count,
        "pid": c.pid,
        "state": state,
        "last_state": last_state,
        "cgroup": c.cgroup.as_ref().map(|p| p.display().to_string()),
        "resources": resources,
        "probes": c.probes.iter().map(|p| probe_status_json(p, clock)).collect::<Vec<_>>(),
        "spec": spec_json(&c.spec),
    })
}

fn probe_status_json(p: &ProbeStatus, clock: &WallClock) -> Value {
    let result = match p.result {
        ProbeResultState::Unknown => "unknown",
        ProbeResultState::Success => "success",
        ProbeResultState::Failure => "failure",
    };
    json!({
        "kind": p.kind.as_str(),
        "result": result,
        "recent": p.recent.iter().map(|r| json!({
            "time": clock.rfc3339(r.at),
            "duration_ms": r.duration.as_secs_f64() * 1000.0,
            "success": r.success,
            "message": r.message,
        })).collect::<Vec<_>>(),
    })
}

/// What `describe` shows of the configuration (vigil has no images: the command is the thing).
fn spec_json(s: &ContainerSpec) -> Value {
    let env: Map<String, Value> = s
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    json!({
        "command": s.command,
        "restart_policy": s.restart_policy.as_str(),
        "working_dir": s.working_dir.as_ref().map(|p| p.display().to_string()),
        "user": s.user,
        "group": s.group,
        "env": env,
        "stop_signal": s.stop_signal_name,
        "termination_grace_period_seconds": s.termination_grace.as_secs_f64(),
        "max_restarts": s.max_restarts,
        "limits": limits_json(&s.resources),
        "startup_probe": s.startup_probe.as_ref().map(probe_spec_json),
        "liveness_probe": s.liveness_probe.as_ref().map(probe_spec_json),
        "readiness_probe": s.readiness_probe.as_ref().map(probe_spec_json),
    })
}

fn limits_json(r: &Resources) -> Value {
    json!({
        "memory_max": r.memory_max,
        "memory_high": r.memory_high,
        "swap_max": r.swap_max,
        "pids_max": r.pids_max,
        "cpu_max": r.cpu_max,
        "cpu_weight": r.cpu_weight,
        "oom_group": r.oom_group,
    })
}

/// kubectl's probe handler text: `http-get http://127.0.0.1:8080/healthz`,
/// `tcp-socket 127.0.0.1:8080`, `exec [cat /tmp/healthy]`.
pub fn probe_action_text(a: &ProbeAction) -> String {
    match a {
        ProbeAction::Exec { command } => format!("exec [{}]", command.join(" ")),
        ProbeAction::HttpGet {
            host,
            port,
            path,
            scheme,
            ..
        } => format!("http-get {}://{host}:{port}{path}", scheme.as_str()),
        ProbeAction::TcpSocket { host, port } => format!("tcp-socket {host}:{port}"),
        ProbeAction::Grpc {
            host,
            port,
            service,
        } => format!("grpc {host}:{port} {service}")
            .trim_end()
            .to_string(),
    }
}

fn probe_spec_json(p: &ProbeSpec) -> Value {
    json!({
        "action": probe_action_text(&p.action),
        "initial_delay_seconds": p.initial_delay.as_secs_f64(),
        "timeout_seconds": p.timeout.as_secs_f64(),
        "period_seconds": p.period.as_secs_f64(),
        "success_threshold": p.success_threshold,
        "failure_threshold": p.failure_threshold,
    })
}

/// One event, with `seq` so a follower can resume after the last one it saw.
pub fn event_json(e: &Event, clock: &WallClock) -> Value {
    json!({
        "seq": e.seq,
        "type": e.kind.as_str(),
        "reason": e.reason,
        "object": e.object,
        "message": e.message,
        "count": e.count,
        "first_timestamp": clock.rfc3339(e.first),
        "last_timestamp": clock.rfc3339(e.last),
    })
}

/// `{"events": [...]}`, in the order given (oldest first).
pub fn events_json<'a>(events: impl IntoIterator<Item = &'a Event>, clock: &WallClock) -> Value {
    json!({"events": events.into_iter().map(|e| event_json(e, clock)).collect::<Vec<_>>()})
}

/// Whether an event concerns pod `pod` (object `pod` or `pod/container`).
pub fn event_is_for_pod(e: &Event, pod: &str) -> bool {
    e.object == pod
        || e.object
            .strip_prefix(pod)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `{"pod": {...}, "events": [...]}` for `describe`; only the pod's own events are included.
pub fn describe_json<'a>(
    pod: &PodStatus,
    events: impl IntoIterator<Item = &'a Event>,
    clock: &WallClock,
) -> Value {
    let events = events
        .into_iter()
        .filter(|e| event_is_for_pod(e, &pod.name))
        .map(|e| event_json(e, clock))
        .collect::<Vec<_>>();
    json!({"pod": pod_json(pod, clock), "events": events})
}

/// `{"version": "..."}`.
pub fn version_json() -> Value {
    json!({"version": env!("CARGO_PKG_VERSION")})
}

// ---------------------------------------------------------------------------------------------
// Client side: JSON → text
// ---------------------------------------------------------------------------------------------

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn time_of(v: &Value, key: &str) -> Option<SystemTime> {
    v.get(key)
        .and_then(Value::as_str)
        .and_then(time::parse_rfc3339)
}

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

/// Bytes the way `kubectl top` shows memory: `512Ki`, `12Mi`, `1.5Gi`.
pub fn human_bytes(b: u64) -> String {
    const KI: u64 = 1024;
    const MI: u64 = KI * 1024;
    const GI: u64 = MI * 1024;
    if b >= GI {
        let g = b as f64 / GI as f64;
        if g < 10.0 {
            format!("{:.1}Gi", g)
        } else {
            format!("{}Gi", b / GI)
        }
    } else if b >= MI {
        format!("{}Mi", b / MI)
    } else if b >= KI {
        format!("{}Ki", b / KI)
    } else {
        format!("{b}")
    }
}

/// Accumulated CPU time: `0.42s`, `12.3s`, then kubectl-style `5m12s`.
pub fn human_cpu(usec: u64) -> String {
    let secs = usec as f64 / 1e6;
    if secs < 10.0 {
        format!("{secs:.2}s")
    } else if secs < 120.0 {
        format!("{secs:.1}s")
    } else {
        time::human_duration(Duration::from_micros(usec))
    }
}

/// A duration given in (possibly fractional) seconds, Go style: `5s`, `500ms`, `1.5s`.
fn seconds_text(v: &Value) -> String {
    let s = v.as_f64().unwrap_or(0.0);
    if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else if s < 1.0 {
        format!("{}ms", (s * 1000.0).round() as u64)
    } else {
        format!("{s}s")
    }
}

/// Where a terminated state's reason is empty, kubectl shows `Signal:N` / `ExitCode:N`.
fn terminated_reason(t: &Value, prefix: &str) -> String {
    let reason = str_of(t, "reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    match t.get("signal").and_then(Value::as_i64) {
        Some(sig) if sig != 0 => format!("{prefix}Signal:{sig}"),
        _ => format!(
            "{prefix}ExitCode:{}",
            t.get("exit_code").and_then(Value::as_i64).unwrap_or(0)
        ),
    }
}

fn condition_true(pod: &Value, kind: &str) -> bool {
    arr(&pod["conditions"])
        .iter()
        .any(|c| str_of(c, "type") == kind && str_of(c, "status") == "True")
}

/// The STATUS column: kubectl's `printPod` display reason.
pub fn pod_display_status(pod: &Value) -> String {
    pod_status_and_restarts(pod, SystemTime::UNIX_EPOCH).0
}

/// (STATUS, RESTARTS, READY) following kubectl's `printPod`.
fn pod_status_and_restarts(pod: &Value, now: SystemTime) -> (String, String, String) {
    let mut reason = str_of(pod, "phase").to_string();
    let mut restarts: u64 = 0;
    let mut last_restart: Option<SystemTime> = None;
    let note_last = |c: &Value, last: &mut Option<SystemTime>| {
        if let Some(t) = time_of(&c["last_state"]["terminated"], "finished_at") {
            *last = Some(last.map_or(t, |l| l.max(t)));
        }
    };
    let inits = arr(&pod["init_containers"]);
    let mut initializing = false;
    for (i, c) in inits.iter().enumerate() {
        restarts += c["restart_count"].as_u64().unwrap_or(0);
        note_last(c, &mut last_restart);
        let state = &c["state"];
        if let Some(t) = state.get("terminated") {
            if t["exit_code"].as_i64() == Some(0) {
                continue;
            }
            reason = terminated_reason(t, "Init:");
        } else if let Some(w) = state
            .get("waiting")
            .filter(|w| !str_of(w, "reason").is_empty() && str_of(w, "reason") != "PodInitializing")
        {
            reason = format!("Init:{}", str_of(w, "reason"));
        } else {
            reason = format!("Init:{}/{}", i, inits.len());
        }
        initializing = true;
        break;
    }
    let containers = arr(&pod["containers"]);
    if !initializing || condition_true(pod, "Initialized") {
        restarts = 0;
        let mut has_running = false;
        for c in containers.iter().rev() {
            restarts += c["restart_count"].as_u64().unwrap_or(0);
            note_last(c, &mut last_restart);
            let state = &c["state"];
            if let Some(w) = state
                .get("waiting")
                .filter(|w| !str_of(w, "reason").is_empty())
            {
                reason = str_of(w, "reason").to_string();
            } else if let Some(t) = state.get("terminated") {
                reason = terminated_reason(t, "");
            } else if c["ready"].as_bool() == Some(true) && state.get("running").is_some() {
                has_running = true;
            }
        }
        // A completed sidecar must not hide running containers.
        if reason == "Completed" && has_running {
            reason = if condition_true(pod, "Ready") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }
    let restarts_text = match last_restart {
        Some(t) if restarts > 0 => format!("{restarts} ({} ago)", time::age(now, t)),
        _ => restarts.to_string(),
    };
    let ready = containers
        .iter()
        .filter(|c| c["ready"].as_bool() == Some(true))
        .count();
    (
        reason,
        restarts_text,
        format!("{ready}/{}", containers.len()),
    )
}

/// `vigil status`: like `kubectl get pods` (`wide` adds PID, MEMORY, CPU).
pub fn status_table(v: &Value, wide: bool, now: SystemTime) -> String {
    let pods = arr(&v["pods"]);
    if pods.is_empty() {
        return "No pods configured.\n".to_string();
    }
    let mut text = String::from("NAME\tREADY\tSTATUS\tRESTARTS\tAGE");
    if wide {
        text.push_str("\tPID\tMEMORY\tCPU");
    }
    text.push('\n');
    for pod in pods {
        let (status, restarts, ready) = pod_status_and_restarts(pod, now);
        let age = time_of(pod, "created_at").map_or("<unknown>".to_string(), |t| time::age(now, t));
        let _ = write!(
            text,
            "{}\t{ready}\t{status}\t{restarts}\t{age}",
            str_of(pod, "name")
        );
        if wide {
            let containers = arr(&pod["containers"]);
            let pids: Vec<String> = containers
                .iter()
                .filter_map(|c| c["pid"].as_u64().map(|p| p.to_string()))
                .collect();
            let sum = |key: &str| -> Option<u64> {
                let figures: Vec<u64> = containers
                    .iter()
                    .filter_map(|c| c["resources"][key].as_u64())
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
                sum("memory_current").map_or_else(none, human_bytes),
                sum("cpu_usage_usec").map_or_else(none, human_cpu),
            );
        }
        text.push('\n');
    }
    // kubectl get: min width 6, padding 3.
    tabwrite(&text, 6, 3)
}

fn event_row(e: &Value, now: SystemTime) -> (String, u64) {
    let count = e["count"].as_u64().unwrap_or(1);
    let last = time_of(e, "last_timestamp");
    let first = time_of(e, "first_timestamp").or(last);
    let age = match (first, last) {
        (Some(f), Some(l)) => time::event_age(now, f, l, count),
        _ => "<unknown>".to_string(),
    };
    (age, count)
}

/// `vigil events`: `LAST SEEN  TYPE  REASON  OBJECT  MESSAGE`, oldest first.
pub fn events_table(v: &Value, now: SystemTime) -> String {
    let events = if v.is_array() { v } else { &v["events"] };
    let events = arr(events);
    if events.is_empty() {
        return "No events.\n".to_string();
    }
    let mut text = String::from("LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE\n");
    for e in events {
        text.push_str(&event_cells(e, now));
        text.push('\n');
    }
    tabwrite(&text, 6, 3)
}

fn event_cells(e: &Value, now: SystemTime) -> String {
    let (age, _) = event_row(e, now);
    format!(
        "{age}\t{}\t{}\t{}\t{}",
        str_of(e, "type"),
        str_of(e, "reason"),
        str_of(e, "object"),
        str_of(e, "message").replace('\n', " ")
    )
}

/// One followed event as a table row with fixed column widths (the table cannot be realigned
/// once printed).
pub fn event_follow_line(e: &Value, now: SystemTime) -> String {
    let (age, _) = event_row(e, now);
    format!(
        "{:<12} {:<8} {:<22} {:<24} {}\n",
        age,
        str_of(e, "type"),
        str_of(e, "reason"),
        str_of(e, "object"),
        str_of(e, "message").replace('\n', " ")
    )
}

/// The header matching [`event_follow_line`].
pub fn event_follow_header() -> String {
    format!(
        "{:<12} {:<8} {:<22} {:<24} {}\n",
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

fn rfc1123_of(v: &Value, key: &str) -> String {
    time_of(v, key).map_or_else(|| "<unknown>".to_string(), time::rfc1123z)
}

/// A container state block as `kubectl describe` prints it (`State:` or `Last State:`).
fn describe_state(out: &mut String, title: &str, state: &Value) {
    if let Some(w) = state.get("waiting") {
        kv(out, 2, title, "Waiting");
        if !str_of(w, "reason").is_empty() {
            kv(out, 3, "Reason", str_of(w, "reason"));
        }
        if !str_of(w, "message").is_empty() {
            kv(out, 3, "Message", str_of(w, "message"));
        }
    } else if let Some(r) = state.get("running") {
        kv(out, 2, title, "Running");
        kv(out, 3, "Started", rfc1123_of(r, "started_at"));
    } else if let Some(t) = state.get("terminated") {
        kv(out, 2, title, "Terminated");
        kv(out, 3, "Reason", str_of(t, "reason"));
        if !str_of(t, "message").is_empty() {
            kv(out, 3, "Message", str_of(t, "message"));
        }
        kv(out, 3, "Exit Code", t["exit_code"].as_i64().unwrap_or(0));
        if let Some(sig) = t["signal"].as_i64().filter(|s| *s != 0) {
            kv(out, 3, "Signal", sig);
        }
        if t.get("started_at").is_some_and(|s| !s.is_null()) {
            kv(out, 3, "Started", rfc1123_of(t, "started_at"));
        }
        kv(out, 3, "Finished", rfc1123_of(t, "finished_at"));
    } else {
        kv(out, 2, title, "");
    }
}

fn describe_probe_line(p: &Value) -> String {
    format!(
        "{} delay={} timeout={} period={} #success={} #failure={}",
        str_of(p, "action"),
        seconds_text(&p["initial_delay_seconds"]),
        seconds_text(&p["timeout_seconds"]),
        seconds_text(&p["period_seconds"]),
        p["success_threshold"].as_u64().unwrap_or(1),
        p["failure_threshold"].as_u64().unwrap_or(3),
    )
}

fn describe_container(out: &mut String, c: &Value, now: SystemTime) {
    plain(out, 1, &format!("{}:", str_of(c, "name")));
    let spec = &c["spec"];
    plain(out, 2, "Command:");
    for arg in arr(&spec["command"]) {
        plain(out, 3, arg.as_str().unwrap_or(""));
    }
    describe_state(out, "State", &c["state"]);
    if c["last_state"].as_object().is_some_and(|o| !o.is_empty()) {
        describe_state(out, "Last State", &c["last_state"]);
    }
    let tf = |b: bool| if b { "True" } else { "False" };
    kv(out, 2, "Ready", tf(c["ready"].as_bool().unwrap_or(false)));
    kv(
        out,
        2,
        "Started",
        tf(c["started"].as_bool().unwrap_or(false)),
    );
    kv(
        out,
        2,
        "Restart Count",
        c["restart_count"].as_u64().unwrap_or(0),
    );
    if let Some(p) = spec["restart_policy"].as_str() {
        kv(out, 2, "Restart Policy", p);
    }
    if let Some(pid) = c["pid"].as_u64() {
        kv(out, 2, "PID", pid);
    }
    if let Some(cg) = c["cgroup"].as_str() {
        kv(out, 2, "Cgroup", cg);
    }
    for (key, title) in [
        ("liveness_probe", "Liveness"),
        ("readiness_probe", "Readiness"),
        ("startup_probe", "Startup"),
    ] {
        if spec[key].is_object() {
            kv(out, 2, title, describe_probe_line(&spec[key]));
        }
    }

    // Limits, in kubectl's spelling where one exists.
    let limits = &spec["limits"];
    let mut lim = Vec::new();
    if let Some(cpu) = limits["cpu_max"].as_f64() {
        lim.push(("cpu", format!("{}m", (cpu * 1000.0).round() as u64)));
    }
    if let Some(w) = limits["cpu_weight"].as_u64() {
        lim.push(("cpu.weight", w.to_string()));
    }
    if let Some(m) = limits["memory_max"].as_u64() {
        lim.push(("memory", human_bytes(m)));
    }
    if let Some(m) = limits["memory_high"].as_u64() {
        lim.push(("memory.high", human_bytes(m)));
    }
    if let Some(m) = limits["swap_max"].as_u64() {
        lim.push(("swap", human_bytes(m)));
    }
    if let Some(p) = limits["pids_max"].as_u64() {
        lim.push(("pids", p.to_string()));
    }
    if limits["oom_group"].as_bool() == Some(true) {
        lim.push(("oom.group", "true".to_string()));
    }
    if !lim.is_empty() {
        plain(out, 2, "Limits:");
        for (k, v) in lim {
            kv(out, 3, k, v);
        }
    }

    // Current figures from the cgroup.
    let r = &c["resources"];
    let mut figures = Vec::new();
    if let Some(m) = r["memory_current"].as_u64() {
        let mut s = human_bytes(m);
        if let Some(p) = r["memory_peak"].as_u64() {
            let _ = write!(s, " (peak {})", human_bytes(p));
        }
        figures.push(("Memory", s));
    }
    if let Some(k) = r["oom_kills"].as_u64().filter(|k| *k > 0) {
        figures.push(("OOM Kills", k.to_string()));
    }
    if let Some(u) = r["cpu_usage_usec"].as_u64() {
        figures.push(("CPU Time", human_cpu(u)));
    }
    if let Some(p) = r["pids_current"].as_u64() {
        figures.push(("Pids", p.to_string()));
    }
    if let Some(p) = r["memory_pressure_some_avg10"].as_f64() {
        figures.push(("Memory Pressure", format!("some avg10={p:.2}")));
    }
    if !figures.is_empty() {
        plain(out, 2, "Resources:");
        for (k, v) in figures {
            kv(out, 3, k, v);
        }
    }

    let probes = arr(&c["probes"]);
    if probes.iter().any(|p| !arr(&p["recent"]).is_empty()) {
        plain(out, 2, "Probe Results:");
        for p in probes {
            let kind = str_of(p, "kind");
            for rec in arr(&p["recent"]) {
                let when = time_of(rec, "time").map_or("<unknown>".to_string(), |t| {
                    format!("{} ago", time::age(now, t))
                });
                let outcome = if rec["success"].as_bool() == Some(true) {
                    "success"
                } else {
                    "failure"
                };
                let ms = rec["duration_ms"].as_f64().unwrap_or(0.0);
                let _ = writeln!(
                    out,
                    "      {kind}\t{outcome}\t{when}\t{ms:.0}ms\t{}",
                    str_of(rec, "message").replace('\n', " ")
                );
            }
        }
    }
    let env = spec["env"].as_object();
    match env {
        Some(env) if !env.is_empty() => {
            plain(out, 2, "Environment:");
            for (k, v) in env {
                kv(out, 3, k, v.as_str().unwrap_or(""));
            }
        }
        _ => kv(out, 2, "Environment", "<none>"),
    }
}

/// `vigil describe POD`: like `kubectl describe pod`. `events` is the pod's event list.
pub fn describe_text(pod: &Value, events: &Value, now: SystemTime) -> String {
    let mut out = String::new();
    kv(&mut out, 0, "Name", str_of(pod, "name"));
    kv(&mut out, 0, "Start Time", rfc1123_of(pod, "created_at"));
    kv(&mut out, 0, "Status", str_of(pod, "phase"));
    kv(&mut out, 0, "Restart Policy", str_of(pod, "restart_policy"));
    let inits = arr(&pod["init_containers"]);
    if !inits.is_empty() {
        plain(&mut out, 0, "Init Containers:");
        for c in inits {
            describe_container(&mut out, c, now);
        }
    }
    plain(&mut out, 0, "Containers:");
    for c in arr(&pod["containers"]) {
        describe_container(&mut out, c, now);
    }
    let conditions = arr(&pod["conditions"]);
    if !conditions.is_empty() {
        plain(&mut out, 0, "Conditions:");
        let _ = writeln!(out, "  Type\tStatus\tReason\tMessage");
        for c in conditions {
            let _ = writeln!(
                out,
                "  {}\t{}\t{}\t{}",
                str_of(c, "type"),
                str_of(c, "status"),
                str_of(c, "reason"),
                str_of(c, "message")
            );
        }
    }
    // Describe's tabwriter: padding 2 (the header block and the events block are aligned
    // separately, because lines without a tab end an alignment run).
    let mut text = tabwrite(&out, 0, 2);
    let events = arr(events);
    if events.is_empty() {
        text.push_str("Events:  <none>\n");
    } else {
        text.push_str("Events:\n");
        let mut table = String::from(
            "  Type\tReason\tAge\tFrom\tMessage\n  ----\t------\t----\t----\t-------\n",
        );
        for e in events {
            let (age, _) = event_row(e, now);
            let _ = writeln!(
                table,
                "  {}\t{}\t{age}\tvigil\t{}",
                str_of(e, "type"),
                str_of(e, "reason"),
                str_of(e, "message").replace('\n', " ")
            );
        }
        text.push_str(&tabwrite(&table, 0, 2));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::{Instant, UNIX_EPOCH};

    use crate::config::spec::{Backoff, ProbeKind, RestartPolicy};
    use crate::core::{
        Condition, ConditionType, ContainerKey, EventType, Phase, ProbeRecord, ResourceFigures,
        TerminationReason,
    };

    fn spec(name: &str) -> Arc<ContainerSpec> {
        Arc::new(ContainerSpec {
            name: name.into(),
            command: vec!["/usr/bin/app".into(), "--port".into(), "8080".into()],
            env: vec![("RUST_LOG".into(), "info".into())],
            working_dir: None,
            user: None,
            group: None,
            stop_signal: 15,
            stop_signal_name: "SIGTERM".into(),
            restart_policy: RestartPolicy::Always,
            termination_grace: Duration::from_secs(30),
            backoff: Backoff::default(),
            max_restarts: None,
            capabilities: vec![],
            no_new_privs: true,
            rlimits: vec![],
            resources: Resources {
                memory_max: Some(20 * 1024 * 1024),
                cpu_max: Some(1.5),
                ..Resources::default()
            },
            startup_probe: None,
            liveness_probe: Some(ProbeSpec {
                action: ProbeAction::HttpGet {
                    host: "127.0.0.1".into(),
                    port: 8080,
                    path: "/healthz".into(),
                    headers: vec![],
                    scheme: crate::config::spec::HttpScheme::Http,
                    tls: Default::default(),
                },
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
                termination_grace: None,
            }),
            readiness_probe: None,
        })
    }

    /// Anchor: monotonic `mono` is wall time 1_000_000 s after the epoch.
    fn clock(mono: Instant) -> WallClock {
        WallClock::new(mono, UNIX_EPOCH + Duration::from_secs(1_000_000))
    }

    fn sample_pod(mono: Instant) -> PodStatus {
        let ago = |s: u64| mono - Duration::from_secs(s);
        let app = ContainerStatus {
            key: ContainerKey(1),
            name: "app".into(),
            ready: false,
            started: true,
            restart_count: 3,
            pid: None,
            state: ContainerState::Waiting {
                reason: crate::core::WaitingReason::CrashLoopBackOff,
                message: "back-off 40s restarting failed container=app pod=web".into(),
            },
            last_state: Some(Terminated {
                exit_code: 137,
                signal: Some(9),
                reason: TerminationReason::OomKilled,
                message: "memory limit 20Mi reached".into(),
                started_at: Some(ago(300)),
                finished_at: ago(240),
            }),
            probes: vec![ProbeStatus {
                kind: ProbeKind::Liveness,
                result: ProbeResultState::Failure,
                recent: vec![ProbeRecord {
                    at: ago(250),
                    duration: Duration::from_millis(3),
                    success: false,
                    message: "HTTP probe failed with statuscode: 500".into(),
                }],
            }],
            oom_kills: 1,
            spec: spec("app"),
            cgroup: Some(PathBuf::from("/sys/fs/cgroup/vigil/web/app")),
            resources: Some(ResourceFigures {
                memory_current: Some(0),
                memory_peak: Some(20 * 1024 * 1024),
                memory_max: None,
                cpu_usage_usec: Some(1234),
                pids_current: Some(0),
                memory_pressure_some_avg10: None,
            }),
        };
        let sidecar = ContainerStatus {
            key: ContainerKey(2),
            name: "sidecar".into(),
            ready: true,
            started: true,
            restart_count: 0,
            pid: Some(4242),
            state: ContainerState::Running {
                started_at: ago(600),
            },
            last_state: None,
            probes: vec![],
            oom_kills: 0,
            spec: spec("sidecar"),
            cgroup: None,
            resources: None,
        };
        PodStatus {
            name: "web".into(),
            phase: Phase::Running,
            restart_policy: RestartPolicy::Always,
            conditions: vec![Condition {
                kind: ConditionType::ContainersReady,
                status: false,
                reason: "ContainersNotReady".into(),
                message: "containers with unready status: [app]".into(),
                last_transition: ago(240),
            }],
            init_containers: vec![],
            containers: vec![app, sidecar],
            created_at: ago(3600),
        }
    }

    #[test]
    fn status_json_matches_the_interface_shape() {
        let mono = Instant::now();
        let v = status_json(&[sample_pod(mono)], &clock(mono));
        let pod = &v["pods"][0];
        assert_eq!(pod["name"], "web");
        assert_eq!(pod["phase"], "Running");
        assert_eq!(pod["restart_policy"], "Always");
        assert_eq!(pod["created_at"], "1970-01-12T12:46:40.000Z");
        assert_eq!(
            pod["conditions"][0],
            json!({"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
                   "message": "containers with unready status: [app]",
                   "last_transition_time": "1970-01-12T13:42:40.000Z"})
        );
        let app = &pod["containers"][0];
        assert_eq!(app["ready"], false);
        assert_eq!(app["restart_count"], 3);
        assert_eq!(app["pid"], Value::Null);
        assert_eq!(
            app["state"],
            json!({"waiting": {"reason": "CrashLoopBackOff",
                               "message": "back-off 40s restarting failed container=app pod=web"}})
        );
        assert_eq!(
            app["last_state"],
            json!({"terminated": {"exit_code": 137, "signal": 9, "reason": "OOMKilled",
                                  "message": "memory limit 20Mi reached",
                                  "started_at": "1970-01-12T13:41:40.000Z",
                                  "finished_at": "1970-01-12T13:42:40.000Z"}})
        );
        assert_eq!(app["cgroup"], "/sys/fs/cgroup/vigil/web/app");
        assert_eq!(
            app["resources"],
            json!({"memory_current": 0, "memory_peak": 20971520, "memory_max": 20971520,
                   "oom_kills": 1, "cpu_usage_usec": 1234, "pids_current": 0,
                   "memory_pressure_some_avg10": null})
        );
        assert_eq!(app["probes"][0]["kind"], "liveness");
        assert_eq!(app["probes"][0]["result"], "failure");
        assert_eq!(app["probes"][0]["recent"][0]["duration_ms"], 3.0);
        assert_eq!(
            app["spec"]["liveness_probe"]["action"],
            "http-get http://127.0.0.1:8080/healthz"
        );
        let sidecar = &pod["containers"][1];
        assert_eq!(sidecar["last_state"], json!({}));
        assert_eq!(
            sidecar["state"],
            json!({"running": {"started_at": "1970-01-12T13:36:40.000Z"}})
        );
        assert_eq!(sidecar["resources"]["memory_current"], Value::Null);
        // Exactly one state key, always.
        for c in arr(&pod["containers"]) {
            assert_eq!(c["state"].as_object().unwrap().len(), 1);
        }
    }

    fn sample_event(mono: Instant) -> Event {
        Event {
            seq: 17,
            kind: EventType::Warning,
            reason: "BackOff".into(),
            object: "web/app".into(),
            message: "Back-off restarting failed container app in pod web".into(),
            count: 79,
            first: mono - Duration::from_secs(28 * 60),
            last: mono - Duration::from_secs(292),
        }
    }

    #[test]
    fn event_json_has_kubectl_fields_and_seq() {
        let mono = Instant::now();
        let v = event_json(&sample_event(mono), &clock(mono));
        assert_eq!(
            v,
            json!({"seq": 17, "type": "Warning", "reason": "BackOff", "object": "web/app",
                   "message": "Back-off restarting failed container app in pod web",
                   "count": 79, "first_timestamp": "1970-01-12T13:18:40.000Z",
                   "last_timestamp": "1970-01-12T13:41:48.000Z"})
        );
    }

    #[test]
    fn describe_json_keeps_only_the_pods_events() {
        let mono = Instant::now();
        let mut other = sample_event(mono);
        other.object = "webby/app".into();
        let mut pod_level = sample_event(mono);
        pod_level.object = "web".into();
        let events = [sample_event(mono), other, pod_level];
        let v = describe_json(&sample_pod(mono), &events, &clock(mono));
        assert_eq!(v["pod"]["name"], "web");
        let objects: Vec<&str> = arr(&v["events"])
            .iter()
            .map(|e| str_of(e, "object"))
            .collect();
        assert_eq!(objects, vec!["web/app", "web"]);
    }

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_000_000)
    }

    #[test]
    fn status_table_shows_crashloop_restarts_and_age() {
        let mono = Instant::now();
        let v = status_json(&[sample_pod(mono)], &clock(mono));
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

    fn pod_with(init: Value, containers: Value, initialized: bool) -> Value {
        json!({"pods": [{"name": "p", "phase": "Pending", "created_at": "1970-01-12T13:46:00.000Z",
            "conditions": [{"type": "Initialized", "status": if initialized {"True"} else {"False"}}],
            "init_containers": init, "containers": containers}]})
    }

    fn status_of(v: &Value) -> String {
        let t = status_table(v, false, now());
        t.lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .nth(2)
            .unwrap()
            .to_string()
    }

    #[test]
    fn status_column_follows_kubectl_display_reasons() {
        let waiting = |r: &str| json!({"name": "c", "ready": false, "restart_count": 0, "state": {"waiting": {"reason": r}}, "last_state": {}});
        let running = |ready: bool| json!({"name": "c", "ready": ready, "restart_count": 0, "state": {"running": {"started_at": "1970-01-12T13:46:00.000Z"}}, "last_state": {}});
        let terminated = |code: i64, reason: &str| json!({"name": "c", "ready": false, "restart_count": 0, "state": {"terminated": {"exit_code": code, "reason": reason, "signal": null}}, "last_state": {}});
        let cases = [
            (
                pod_with(
                    json!([waiting("PodInitializing")]),
                    json!([waiting("PodInitializing")]),
                    false,
                ),
                "Init:0/1",
            ),
            (
                pod_with(
                    json!([terminated(0, "Completed"), running(false)]),
                    json!([waiting("PodInitializing")]),
                    false,
                ),
                "Init:1/2",
            ),
            (
                pod_with(
                    json!([waiting("CrashLoopBackOff")]),
                    json!([waiting("PodInitializing")]),
                    false,
                ),
                "Init:CrashLoopBackOff",
            ),
            (
                pod_with(
                    json!([terminated(1, "Error")]),
                    json!([waiting("PodInitializing")]),
                    false,
                ),
                "Init:Error",
            ),
            (
                pod_with(json!([terminated(2, "")]), json!([]), false),
                "Init:ExitCode:2",
            ),
            (
                pod_with(json!([]), json!([waiting("ContainerCreating")]), true),
                "ContainerCreating",
            ),
            (
                pod_with(json!([]), json!([terminated(0, "Completed")]), true),
                "Completed",
            ),
            (
                pod_with(json!([]), json!([terminated(137, "OOMKilled")]), true),
                "OOMKilled",
            ),
            (
                pod_with(
                    json!([]),
                    json!([running(true), terminated(0, "Completed")]),
                    true,
                ),
                "NotReady",
            ),
            (
                pod_with(
                    json!([terminated(0, "Completed")]),
                    json!([running(true)]),
                    true,
                ),
                "Pending",
            ),
        ];
        for (pod, want) in cases {
            assert_eq!(status_of(&pod), want, "{pod}");
        }
        assert_eq!(
            status_table(&json!({"pods": []}), false, now()),
            "No pods configured.\n"
        );
    }

    #[test]
    fn describe_text_reads_like_kubectl_describe() {
        let mono = Instant::now();
        let clock = clock(mono);
        let d = describe_json(&sample_pod(mono), &[sample_event(mono)], &clock);
        let text = describe_text(&d["pod"], &d["events"], now());
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
            "      liveness  failure  4m10s ago  3ms  HTTP probe failed with statuscode: 500\n",
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
        let empty = describe_text(&d["pod"], &json!([]), now());
        assert!(empty.ends_with("Events:  <none>\n"));
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
        let v = events_json([&sample_event(mono), &started], &clock(mono));
        assert_eq!(
            events_table(&v, now()),
            "LAST SEEN              TYPE      REASON    OBJECT    MESSAGE\n\
             4m52s (x79 over 28m)   Warning   BackOff   web/app   Back-off restarting failed container app in pod web\n\
             45s                    Normal    Started   web/app   Started container app\n"
        );
        assert_eq!(events_table(&json!({"events": []}), now()), "No events.\n");
        let line = event_follow_line(&v["events"][1], now());
        assert!(
            line.starts_with("45s          Normal   Started"),
            "{line:?}"
        );
    }

    #[test]
    fn tabwrite_aligns_runs_and_skips_last_cells() {
        let text = "a\tbb\tc\nccc\td\te\nno tabs here\nxx\ty\n";
        assert_eq!(
            tabwrite(text, 0, 2),
            "a    bb  c\nccc  d   e\nno tabs here\nxx  y\n"
        );
    }

    #[test]
    fn human_figures_are_compact() {
        assert_eq!(human_bytes(512), "512");
        assert_eq!(human_bytes(512 * 1024), "512Ki");
        assert_eq!(human_bytes(20 * 1024 * 1024), "20Mi");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5Gi");
        assert_eq!(human_cpu(1_234_567), "1.23s");
        assert_eq!(human_cpu(42_000_000), "42.0s");
        assert_eq!(human_cpu(312_000_000), "5m12s");
        assert_eq!(seconds_text(&json!(0.5)), "500ms");
        assert_eq!(seconds_text(&json!(1.5)), "1.5s");
        assert_eq!(seconds_text(&json!(10.0)), "10s");
    }
}
