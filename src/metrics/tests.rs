use std::time::{Duration, Instant};

use super::probes::ProbeResult;
use super::*;
use crate::control::render::fixtures::{observed, sample_pod};
use crate::core::ContainerKey;

fn own() -> ProcessFigures {
    ProcessFigures {
        resident_memory_bytes: Some(4 << 20),
        virtual_memory_bytes: Some(64 << 20),
        cpu_seconds: Some(1.5),
        open_fds: Some(12),
        max_fds: Some(1024),
        start_time_seconds: Some(1_000_000.25),
    }
}

fn exposition(format: Format, pods: &[PodStatus], probes: &ProbeStats, now: Instant) -> String {
    render(
        format,
        &Snapshot {
            pods,
            observed: &observed(),
            probes,
            process: &own(),
            counters: Counters {
                adopted_runs: 3,
                output_lost_runs: 1,
                log_lines_dropped: 42,
                last_reload_successful: false,
                last_reload_success_unix_ms: 1_700_000_000_500,
                event_hooks: vec![crate::metrics::HookFigures {
                    hook: "notify".into(),
                    delivered: 5,
                    failed: 1,
                    dropped: 7,
                    queued: 2,
                }],
            },
            now,
        },
    )
}

/// The value of the one sample line starting with `prefix ` (name and labels).
fn value(text: &str, prefix: &str) -> f64 {
    let found: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(prefix)?.strip_prefix(' '))
        .collect();
    assert_eq!(found.len(), 1, "{prefix}: {found:?}\n{text}");
    found[0].parse().unwrap()
}

/// Family name → type, from the `# TYPE` lines (each must appear once).
fn types(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                !out.iter().any(|(n, _)| n == name),
                "family {name} declared twice"
            );
            out.push((name.to_string(), kind.to_string()));
        }
    }
    out
}

#[test]
fn every_family_is_declared_once_and_the_list_of_families_is_exactly_what_is_written() {
    let mono = Instant::now();
    let text = exposition(
        Format::Prometheus,
        &[sample_pod(mono)],
        &ProbeStats::default(),
        mono,
    );
    let declared: Vec<String> = types(&text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(declared, FAMILIES, "{text}");
    // Samples of a family follow its header, before the next family's.
    let mut current = String::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            current = rest.split_once(' ').unwrap().0.to_string();
        } else if !l.starts_with('#') {
            let name = l.split(['{', ' ']).next().unwrap();
            let base = name
                .strip_suffix("_bucket")
                .or_else(|| name.strip_suffix("_sum"))
                .or_else(|| name.strip_suffix("_count"))
                .filter(|b| *b == current)
                .unwrap_or(name);
            assert_eq!(base, current, "{l}");
        }
    }
}

#[test]
fn vigils_own_counters_are_counters_with_the_values_given_in_both_formats() {
    let mono = Instant::now();
    for format in [Format::Prometheus, Format::OpenMetrics] {
        let text = exposition(format, &[sample_pod(mono)], &ProbeStats::default(), mono);
        assert_eq!(value(&text, "vigil_adopted_runs_total"), 3.0);
        assert_eq!(value(&text, "vigil_output_lost_runs_total"), 1.0);
        assert_eq!(value(&text, "vigil_log_lines_dropped_total"), 42.0);
        assert_eq!(
            value(
                &text,
                r#"vigil_event_hook_deliveries_total{hook="notify",result="failed"}"#
            ),
            1.0
        );
        assert_eq!(
            value(&text, r#"vigil_event_hook_dropped_total{hook="notify"}"#),
            7.0
        );
        assert_eq!(
            value(&text, r#"vigil_event_hook_queue_length{hook="notify"}"#),
            2.0
        );
        assert_eq!(value(&text, "vigil_config_last_reload_successful"), 0.0);
        assert_eq!(
            value(&text, "vigil_config_last_reload_success_timestamp_seconds"),
            1_700_000_000.5
        );
        let t = types(&text);
        for gauge in [
            "vigil_config_last_reload_successful",
            "vigil_config_last_reload_success_timestamp_seconds",
        ] {
            assert!(
                t.iter().any(|(n, k)| *n == gauge && k == "gauge"),
                "{gauge} is a gauge\n{text}"
            );
        }
        for family in [
            "vigil_adopted_runs",
            "vigil_output_lost_runs",
            "vigil_log_lines_dropped",
        ] {
            let name = match format {
                Format::Prometheus => format!("{family}_total"),
                Format::OpenMetrics => family.to_string(),
            };
            assert!(
                t.iter().any(|(n, k)| *n == name && k == "counter"),
                "{name} is a counter\n{text}"
            );
        }
    }
}

#[test]
fn container_figures_come_from_the_snapshot_and_the_cgroup_figures() {
    let mono = Instant::now();
    let text = exposition(
        Format::Prometheus,
        &[sample_pod(mono)],
        &ProbeStats::default(),
        mono,
    );
    let app = r#"{pod="web",container="app"}"#;
    let sidecar = r#"{pod="web",container="sidecar"}"#;
    assert_eq!(
        value(&text, &format!("vigil_container_restarts_total{app}")),
        3.0
    );
    assert_eq!(
        value(&text, &format!("vigil_container_oom_kills_total{app}")),
        1.0
    );
    assert_eq!(
        value(&text, &format!("vigil_container_ready{sidecar}")),
        1.0
    );
    assert_eq!(value(&text, &format!("vigil_container_ready{app}")), 0.0);
    assert_eq!(
        value(
            &text,
            &format!("vigil_container_backoff_remaining_seconds{app}")
        ),
        40.0
    );
    assert_eq!(
        value(
            &text,
            &format!("vigil_container_backoff_remaining_seconds{sidecar}")
        ),
        0.0
    );
    assert_eq!(
        value(
            &text,
            r#"vigil_container_state{pod="web",container="app",state="waiting"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"vigil_container_state{pod="web",container="app",state="running"}"#
        ),
        0.0
    );
    assert_eq!(
        value(
            &text,
            r#"vigil_container_waiting_reason{pod="web",container="app",reason="CrashLoopBackOff"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"vigil_container_last_terminated_reason{pod="web",container="app",reason="OOMKilled"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            &format!("vigil_container_last_terminated_exit_code{app}")
        ),
        137.0
    );
    assert_eq!(
        value(&text, &format!("vigil_container_cpu_seconds_total{app}")),
        0.001234
    );
    assert_eq!(
        value(&text, &format!("vigil_container_memory_peak_bytes{app}")),
        20.0 * 1024.0 * 1024.0
    );
    // Unlimited memory, a sidecar without a cgroup: left out, not written as 0.
    assert!(
        !text.contains("vigil_container_memory_max_bytes{"),
        "{text}"
    );
    assert!(
        !text.contains(&format!("vigil_container_pids{sidecar}")),
        "{text}"
    );
    assert_eq!(value(&text, r#"vigil_pod_ready{pod="web"}"#), 0.0);
    for (phase, v) in [
        ("Pending", 0.0),
        ("Running", 1.0),
        ("Succeeded", 0.0),
        ("Failed", 0.0),
    ] {
        assert_eq!(
            value(
                &text,
                &format!(r#"vigil_pod_phase{{pod="web",phase="{phase}"}}"#)
            ),
            v,
            "{phase}"
        );
    }
    assert_eq!(
        value(
            &text,
            &format!(
                r#"vigil_build_info{{version="{}"}}"#,
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    assert_eq!(value(&text, "process_open_fds"), 12.0);
    assert_eq!(value(&text, "process_start_time_seconds"), 1_000_000.25);
}

#[test]
fn probe_results_and_the_duration_histogram_are_cumulative_per_probe() {
    let mono = Instant::now();
    let mut stats = ProbeStats::default();
    let app = ContainerKey(1);
    for (ms, result) in [
        (2, ProbeResult::Success),
        (30, ProbeResult::Failure),
        (30, ProbeResult::Failure),
        (20_000, ProbeResult::Failure),
    ] {
        stats.record(app, ProbeKind::Liveness, result, Duration::from_millis(ms));
    }
    let text = exposition(Format::Prometheus, &[sample_pod(mono)], &stats, mono);
    let l = r#"pod="web",container="app",probe="liveness""#;
    assert_eq!(
        value(
            &text,
            &format!(r#"vigil_probe_results_total{{{l},result="success"}}"#)
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            &format!(r#"vigil_probe_results_total{{{l},result="failure"}}"#)
        ),
        3.0
    );
    let bucket = |le: &str| {
        value(
            &text,
            &format!(r#"vigil_probe_duration_seconds_bucket{{{l},le="{le}"}}"#),
        )
    };
    assert_eq!(bucket("0.005"), 1.0);
    assert_eq!(bucket("0.025"), 1.0);
    assert_eq!(bucket("0.05"), 3.0);
    assert_eq!(bucket("10.0"), 3.0);
    assert_eq!(bucket("+Inf"), 4.0);
    assert_eq!(
        value(&text, &format!("vigil_probe_duration_seconds_count{{{l}}}")),
        4.0
    );
    assert_eq!(
        value(&text, &format!("vigil_probe_duration_seconds_sum{{{l}}}")),
        20.062
    );
    // The sidecar has no probe: no probe series for it.
    assert!(!text.contains(r#"container="sidecar",probe"#), "{text}");
}

#[test]
fn a_probe_that_never_ran_is_exported_as_zeros_so_its_series_exist_from_the_start() {
    let mono = Instant::now();
    let text = exposition(
        Format::Prometheus,
        &[sample_pod(mono)],
        &ProbeStats::default(),
        mono,
    );
    let l = r#"pod="web",container="app",probe="liveness""#;
    assert_eq!(
        value(
            &text,
            &format!(r#"vigil_probe_results_total{{{l},result="failure"}}"#)
        ),
        0.0
    );
    assert_eq!(
        value(&text, &format!("vigil_probe_duration_seconds_count{{{l}}}")),
        0.0
    );
}

#[test]
fn openmetrics_names_counters_without_total_and_ends_with_eof() {
    let mono = Instant::now();
    let text = exposition(
        Format::OpenMetrics,
        &[sample_pod(mono)],
        &ProbeStats::default(),
        mono,
    );
    assert!(text.ends_with("\n# EOF\n"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1);
    let t = types(&text);
    let kind = |n: &str| {
        t.iter()
            .find(|(name, _)| name == n)
            .map(|(_, k)| k.as_str())
    };
    assert_eq!(kind("vigil_container_restarts"), Some("counter"));
    assert_eq!(kind("vigil_container_restarts_total"), None);
    assert_eq!(kind("process_cpu_seconds"), Some("counter"));
    assert_eq!(kind("vigil_probe_duration_seconds"), Some("histogram"));
    assert!(text.contains("\nvigil_container_restarts_total{pod=\"web\",container=\"app\"} 3\n"));
    assert!(
        text.contains("# HELP vigil_container_restarts Times"),
        "{text}"
    );
}

#[test]
fn label_values_with_quotes_backslashes_and_newlines_are_escaped() {
    let mono = Instant::now();
    let mut pod = sample_pod(mono);
    pod.name = "we\"b\\\n".into();
    let text = exposition(Format::Prometheus, &[pod], &ProbeStats::default(), mono);
    assert_eq!(
        value(
            &text,
            r#"vigil_container_restarts_total{pod="we\"b\\\n",container="app"}"#
        ),
        3.0
    );
    // Every sample stays on one line.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(l.split(' ').count() >= 2, "{l:?}");
    }
}

#[test]
fn no_pods_still_gives_a_valid_exposition_with_vigils_own_figures() {
    let now = Instant::now();
    let text = exposition(Format::OpenMetrics, &[], &ProbeStats::default(), now);
    assert_eq!(value(&text, "process_resident_memory_bytes"), 4194304.0);
    assert!(text.ends_with("# EOF\n"));
}

/// Identifiers of a PromQL expression outside strings, `$variables` and `[ranges]`.
fn promql_identifiers(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '[' => for _ in chars.by_ref().take_while(|&c| c != ']') {},
            '$' => {
                while chars
                    .next_if(|c| c.is_alphanumeric() || *c == '_')
                    .is_some()
                {}
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut word = c.to_string();
                while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_') {
                    word.push(c);
                }
                out.push(word);
            }
            c if c.is_ascii_digit() => {
                while chars
                    .next_if(|c| c.is_ascii_alphanumeric() || *c == '.')
                    .is_some()
                {}
            }
            _ => {}
        }
    }
    out
}

/// Every PromQL expression of a Grafana dashboard: panel targets' `expr` and templating
/// queries.
fn dashboard_expressions(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                match (k.as_str(), child) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::Object(q)) => {
                        if let Some(s) = q.get("query").and_then(|s| s.as_str()) {
                            out.push(s.to_string());
                        }
                    }
                    _ => dashboard_expressions(child, out),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                dashboard_expressions(item, out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_expression_in_the_grafana_dashboard_names_only_families_vigil_exports() {
    let text = include_str!("../../docs/grafana-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    assert!(
        dashboard["panels"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    );
    let mut exprs = Vec::new();
    dashboard_expressions(&dashboard, &mut exprs);
    assert!(exprs.len() > 10, "{exprs:?}");
    // PromQL functions, keywords and label names the dashboard uses; anything else must be a
    // family (or a histogram's `_bucket`, `_sum`, `_count`).
    const NOT_METRICS: &[&str] = &[
        "increase",
        "rate",
        "sum",
        "count",
        "by",
        "histogram_quantile",
        "time",
        "label_values",
        "job",
        "pod",
        "container",
        "probe",
        "result",
        "le",
        "reason",
        "version",
        "instance",
    ];
    let mut used = std::collections::BTreeSet::new();
    for e in &exprs {
        let mut names_one = false;
        for id in promql_identifiers(e) {
            if NOT_METRICS.contains(&id.as_str()) {
                continue;
            }
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| id.strip_suffix(s))
                .filter(|base| FAMILIES.contains(base))
                .unwrap_or(&id);
            assert!(
                FAMILIES.contains(&family),
                "{id} in {e:?} is not a family vigil exports"
            );
            used.insert(family.to_string());
            names_one = true;
        }
        assert!(names_one, "{e:?} names no family");
    }
    // The dashboard shows the figures issue 18 asks for.
    for needed in [
        "vigil_container_restarts_total",
        "vigil_container_oom_kills_total",
        "vigil_container_memory_current_bytes",
        "vigil_container_cpu_seconds_total",
        "vigil_container_memory_pressure_some_avg10_ratio",
        "vigil_probe_results_total",
        "vigil_probe_duration_seconds",
        "vigil_container_backoff_remaining_seconds",
        "process_resident_memory_bytes",
    ] {
        assert!(
            used.contains(needed),
            "the dashboard does not show {needed}"
        );
    }
}

#[test]
fn promql_identifiers_skip_strings_variables_and_ranges() {
    assert_eq!(
        promql_identifiers(r#"rate(x_total{pod=~"a\"b c",le="+Inf"}[$__rate_interval]) > 0.5"#),
        ["rate", "x_total", "pod", "le"]
    );
    assert_eq!(promql_identifiers("time() - y[5m]"), ["time", "y"]);
}

#[test]
fn docs_metrics_md_describes_every_family() {
    let doc = include_str!("../../docs/metrics.md");
    for family in FAMILIES {
        assert!(
            doc.contains(&format!("| `{family}` |")),
            "docs/metrics.md has no row for {family}"
        );
    }
}
