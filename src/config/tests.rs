//! Unit tests of the whole config pipeline on strings: every problem class with its exact
//! `LINE:COL` and field, all-problems-at-once reporting, defaults folding, the shipped files.

use std::path::Path;
use std::time::Duration;

use super::spec::*;
use super::*;

/// A minimal valid pod; its lines are 1–3, so appended keys start at line 4 and belong to
/// `pods.web.containers[0]`.
const POD: &str = "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/app\"]\n";

fn errors(text: &str) -> Vec<String> {
    match load_str(text, Path::new("t.toml")) {
        Ok(_) => panic!("expected errors, config was accepted:\n{text}"),
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

/// Exactly one problem, starting with `prefix` (`t.toml:L:C: field: `) and containing `msg`.
#[track_caller]
fn one(text: &str, prefix: &str, msg: &str) {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    assert_has(&errs[0], prefix, msg);
}

#[track_caller]
fn assert_has(err: &str, prefix: &str, msg: &str) {
    assert!(
        err.starts_with(&format!("t.toml:{prefix}")) && err.contains(msg),
        "error {err:?} does not start with t.toml:{prefix:?} / contain {msg:?}"
    );
}

fn ok(text: &str) -> Config {
    match load_str(text, Path::new("t.toml")) {
        Ok(c) => c,
        Err(e) => panic!("unexpected errors:\n{e}"),
    }
}

fn container(c: &Config) -> &ContainerSpec {
    &c.pods[0].containers[0]
}

// ---- syntax, unknown keys, types --------------------------------------------------------------

#[test]
fn syntax_error_is_located_and_stops() {
    one(
        "a = [1,\nb = 2\n",
        "2:3: ",
        "TOML syntax error: unexpected `=`",
    );
}

#[test]
fn duplicate_key_is_a_syntax_error() {
    one(
        &format!("{POD}name = \"again\"\n"),
        "4:1: ",
        "TOML syntax error",
    );
}

#[test]
fn every_unknown_key_is_reported_at_once() {
    let text = format!(
        "{POD}colour = 1\n\
         [pods.web.containers.liveness_probe]\n\
         exec = {{ command = [\"x\"] }}\n\
         perod_seconds = 3\n\
         [supervisor]\n\
         foo = 1\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:1: pods.web.containers[0].colour: ",
        "unknown key \"colour\"; expected one of: name, command",
    );
    assert_has(
        &errs[1],
        "7:1: pods.web.containers[0].liveness_probe.perod_seconds: ",
        "unknown key \"perod_seconds\"; did you mean \"period_seconds\"?",
    );
    assert_has(&errs[2], "9:1: supervisor.foo: ", "unknown key \"foo\"");
}

#[test]
fn unknown_top_level_and_pod_keys_are_reported() {
    let text = format!("[pod.web]\nx = 1\n[pods.web]\nrestart = \"Never\"\n{POD}");
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(&errs[0], "1:2: pod: ", "did you mean \"pods\"?");
    assert_has(
        &errs[1],
        "4:1: pods.web.restart: ",
        "unknown key \"restart\"",
    );
}

#[test]
fn wrong_types_are_all_reported_with_expected_and_found() {
    let text = format!(
        "{POD}max_restarts = \"ten\"\nno_new_privs = 1\ncapabilities = [\"CAP_CHOWN\", 3]\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:16: pods.web.containers[0].max_restarts: ",
        "expected an integer, found a string",
    );
    assert_has(
        &errs[1],
        "5:16: pods.web.containers[0].no_new_privs: ",
        "expected a boolean (true or false), found an integer",
    );
    assert_has(
        &errs[2],
        "6:30: pods.web.containers[0].capabilities[1]: ",
        "expected a string, found an integer",
    );
}

#[test]
fn structural_and_value_problems_are_reported_in_the_same_run() {
    // The wrongly typed name is reported once (not again as "missing"); the unknown key and
    // the bad command element do not hide the bad restart_policy and the bad signal.
    let text = "[pods.web]\nrestart_policy = \"Sometimes\"\nfoo = 1\n\
                [[pods.web.containers]]\nname = 7\ncommand = [\"/bin/a\", 2]\n\
                stop_signal = \"SIGNOPE\"\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 5, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:18: pods.web.restart_policy: ",
        "invalid restart_policy",
    );
    assert_has(&errs[1], "3:1: pods.web.foo: ", "unknown key \"foo\"");
    assert_has(
        &errs[2],
        "5:8: pods.web.containers[0].name: ",
        "expected a string, found an integer",
    );
    assert_has(
        &errs[3],
        "6:22: pods.web.containers[0].command[1]: ",
        "expected a string, found an integer",
    );
    assert_has(
        &errs[4],
        "7:15: pods.web.containers[0].stop_signal: ",
        "unknown signal",
    );
}

#[test]
fn containers_as_a_table_instead_of_an_array_is_a_type_error() {
    one(
        "[pods.web.containers]\nname = \"a\"\n",
        "1:1: pods.web.containers: ",
        "expected an array of tables, found a table",
    );
}

// ---- durations and thresholds ------------------------------------------------------------------

#[test]
fn probe_period_and_timeout_must_be_positive() {
    let text = format!(
        "{POD}[pods.web.containers.liveness_probe]\n\
         exec = {{ command = [\"true\"] }}\n\
         period_seconds = 0\n\
         timeout_seconds = -1\n\
         initial_delay_seconds = -0.5\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    let p = "pods.web.containers[0].liveness_probe";
    assert_has(
        &errs[0],
        &format!("6:18: {p}.period_seconds: "),
        "must be > 0 seconds, got 0",
    );
    assert_has(
        &errs[1],
        &format!("7:19: {p}.timeout_seconds: "),
        "must be > 0 seconds, got -1",
    );
    assert_has(
        &errs[2],
        &format!("8:25: {p}.initial_delay_seconds: "),
        "must be >= 0 seconds, got -0.5",
    );
}

#[test]
fn nan_and_infinite_durations_are_rejected() {
    one(
        &format!("{POD}termination_grace_period_seconds = nan\n"),
        "4:36: pods.web.containers[0].termination_grace_period_seconds: ",
        "must be a finite number of seconds, got NaN",
    );
    one(
        "[supervisor]\nshutdown_timeout_seconds = inf\n",
        "2:28: supervisor.shutdown_timeout_seconds: ",
        "finite",
    );
}

/// Kubernetes accepts `terminationGracePeriodSeconds: 9223372036854775807` (an int64); vigil
/// refuses every duration beyond 10 years where it is written, instead of panicking later when
/// a stop adds it to the clock.
#[test]
fn durations_beyond_ten_years_are_refused_where_they_are_written() {
    one(
        &format!("[pods.web]\ntermination_grace_period_seconds = 9223372036854775807\n{POD}"),
        "2:36: pods.web.termination_grace_period_seconds: ",
        "must be at most 315360000 seconds (10 years)",
    );
    let p = "pods.web.containers[0]";
    for key in [
        "termination_grace_period_seconds",
        "backoff = { max_seconds",
        "liveness_probe = { exec = { command = [\"x\"] }, period_seconds",
        "lifecycle = { pre_stop = { sleep = { seconds",
    ] {
        let close = "}".repeat(key.matches('{').count() - key.matches('}').count());
        one(
            &format!("{POD}{key} = 315360001 {close}\n"),
            &format!("4:{}: {p}.", key.len() + 4),
            "must be at most 315360000 seconds (10 years)",
        );
    }
    one(
        "[supervisor]\nshutdown_timeout_seconds = 1e300\n",
        "2:28: supervisor.shutdown_timeout_seconds: ",
        "must be at most 315360000 seconds",
    );
    // Ten years exactly is accepted.
    let c = ok(&format!(
        "{POD}termination_grace_period_seconds = 315360000\n"
    ));
    assert_eq!(
        container(&c).termination_grace,
        Duration::from_secs(MAX_SECONDS)
    );
}

#[test]
fn negative_grace_period_is_rejected() {
    let text = format!("[pods.web]\ntermination_grace_period_seconds = -3\n{POD}");
    one(
        &text,
        "2:36: pods.web.termination_grace_period_seconds: ",
        "must be >= 0 seconds, got -3",
    );
}

#[test]
fn backoff_fields_are_checked() {
    let text =
        format!("[pods.web]\nbackoff = {{ initial_seconds = -1, reset_after_seconds = 0 }}\n{POD}");
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:31: pods.web.backoff.initial_seconds: ",
        "must be >= 0",
    );
    assert_has(
        &errs[1],
        "2:57: pods.web.backoff.reset_after_seconds: ",
        "must be > 0",
    );
}

#[test]
fn backoff_max_below_initial_is_rejected_after_folding() {
    // The pod's max (5) is below the default initial (10).
    one(
        &format!("[pods.web]\nbackoff = {{ max_seconds = 5 }}\n{POD}"),
        "2:27: pods.web.backoff.max_seconds: ",
        "max_seconds (5) must be >= initial_seconds (10)",
    );
    // The container's initial (20) is above the pod's max (15).
    one(
        &format!(
            "[pods.web]\nbackoff = {{ initial_seconds = 1, max_seconds = 15 }}\n{POD}\
             backoff = {{ initial_seconds = 20 }}\n"
        ),
        "6:31: pods.web.containers[0].backoff.initial_seconds: ",
        "max_seconds (15) must be >= initial_seconds (20)",
    );
}

#[test]
fn success_threshold_must_be_one_for_liveness_and_startup() {
    let text = format!(
        "{POD}[pods.web.containers.startup_probe]\n\
         tcp_socket = {{ port = 80 }}\n\
         success_threshold = 2\n\
         [pods.web.containers.readiness_probe]\n\
         tcp_socket = {{ port = 80 }}\n\
         success_threshold = 2\n\
         failure_threshold = 0\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "6:21: pods.web.containers[0].startup_probe.success_threshold: ",
        "must be 1 for startup probes, got 2",
    );
    assert_has(
        &errs[1],
        "10:21: pods.web.containers[0].readiness_probe.failure_threshold: ",
        "must be >= 1, got 0",
    );
}

// ---- names and structure -----------------------------------------------------------------------

#[test]
fn duplicate_container_names_span_init_and_regular_containers() {
    let text = "[[pods.web.init_containers]]\nname = \"app\"\ncommand = [\"/bin/init\"]\n\
                [[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/app\"]\n";
    one(
        text,
        "5:8: pods.web.containers[0].name: ",
        "duplicate container name \"app\" in pod \"web\"",
    );
}

#[test]
fn pod_and_container_names_must_be_cgroup_safe() {
    let text = "[[pods.Web.containers]]\nname = \"a/b\"\ncommand = [\"x\"]\n\
                [[pods.supervisor.containers]]\nname = \"memory.max\"\ncommand = [\"x\"]\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert_has(&errs[0], "1:8: pods.Web: ", "invalid pod name \"Web\"");
    assert_has(
        &errs[1],
        "2:8: pods.Web.containers[0].name: ",
        "invalid container name \"a/b\"",
    );
    assert_has(&errs[2], "4:8: pods.supervisor: ", "reserved");
    assert_has(
        &errs[3],
        "5:8: pods.supervisor.containers[0].name: ",
        "collide with a cgroup interface file",
    );
}

#[test]
fn pod_without_containers_is_rejected() {
    one(
        "[pods.idle]\nrestart_policy = \"Never\"\n",
        "1:1: pods.idle.containers: ",
        "pod has no containers; add at least one [[pods.idle.containers]] table",
    );
    one(
        "[pods.idle]\ncontainers = []\n",
        "1:1: pods.idle.containers: ",
        "pod has no containers",
    );
}

#[test]
fn missing_name_and_command_are_reported_at_the_container() {
    let errs = errors("[[pods.web.containers]]\nenv = { A = \"1\" }\n");
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "1:1: pods.web.containers[0].command: ",
        "missing required key \"command\"",
    );
    assert_has(
        &errs[1],
        "1:1: pods.web.containers[0].name: ",
        "missing required key \"name\"",
    );
}

#[test]
fn empty_command_and_empty_program_are_rejected() {
    one(
        "[[pods.web.containers]]\nname = \"a\"\ncommand = []\n",
        "3:11: pods.web.containers[0].command: ",
        "must not be empty",
    );
    one(
        "[[pods.web.containers]]\nname = \"a\"\ncommand = [\"\", \"x\"]\n",
        "3:12: pods.web.containers[0].command[0]: ",
        "must not be empty: it is the program to run",
    );
}

#[test]
fn restart_policy_must_be_known() {
    one(
        &format!("[pods.web]\nrestart_policy = \"always\"\n{POD}"),
        "2:18: pods.web.restart_policy: ",
        "invalid restart_policy \"always\"; expected Always, OnFailure or Never",
    );
}

#[test]
fn init_containers_take_no_probes_unless_sidecars() {
    let text = "[[pods.web.init_containers]]\nname = \"init\"\ncommand = [\"x\"]\n\
                restart_policy = \"OnFailure\"\n\
                readiness_probe = { exec = { command = [\"true\"] } }\n{POD}";
    let errs = errors(&text.replace("{POD}", POD));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "5:19: pods.web.init_containers[0].readiness_probe: ",
        "probes are not supported on init containers that run to completion",
    );
}

#[test]
fn notify_is_refused_on_init_containers_that_run_to_completion() {
    let text = "[[pods.web.init_containers]]\nname = \"init\"\ncommand = [\"x\"]\n\
                notify = true\n{POD}";
    let errs = errors(&text.replace("{POD}", POD));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:10: pods.web.init_containers[0].notify: ",
        "notify is not supported on init containers that run to completion",
    );
}

#[test]
fn ready_log_line_is_compiled_and_kept_with_its_source() {
    let text = "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n\
                ready_log_line = 'listening on port \\d+'\n";
    let cfg = ok(text);
    let p = cfg.pods[0].containers[0]
        .ready_log_line
        .as_ref()
        .expect("a pattern");
    assert_eq!(p.as_str(), "listening on port \\d+");
    assert!(p.is_match(b"INFO listening on port 8080"));
    assert!(!p.is_match(b"listening on port x"));
}

#[test]
fn a_bad_or_huge_ready_log_line_is_refused_located() {
    let cases = [
        ("(unclosed", "not a valid regular expression"),
        // Compiles to far more than LinePattern::SIZE_LIMIT (a million-state program).
        ("a{1000}{1000}", "the pattern compiles to more than"),
        ("\\w{500}\\w{500}", "the pattern compiles to more than"),
    ];
    for (pattern, says) in cases {
        let text = format!(
            "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n\
             ready_log_line = '{pattern}'\n"
        );
        let errs = errors(&text);
        assert_eq!(errs.len(), 1, "{pattern}: {errs:#?}");
        assert_has(
            &errs[0],
            "4:18: pods.web.containers[0].ready_log_line: ",
            says,
        );
    }
}

#[test]
fn ready_log_line_is_refused_with_notify_and_on_init_containers_that_run_to_completion() {
    let text = "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n\
                notify = true\nready_log_line = 'ready'\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "5:18: pods.web.containers[0].ready_log_line: ",
        "two ways for a run to say it is ready; choose one",
    );
    let text = "[[pods.web.init_containers]]\nname = \"init\"\ncommand = [\"x\"]\n\
                ready_log_line = 'ready'\n{POD}";
    let errs = errors(&text.replace("{POD}", POD));
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:18: pods.web.init_containers[0].ready_log_line: ",
        "ready_log_line is not supported on init containers that run to completion",
    );
}

#[test]
fn start_timeout_seconds_needs_notify_and_a_positive_duration() {
    let text = "[[pods.web.containers]]\nname = \"a\"\ncommand = [\"x\"]\nstart_timeout_seconds = 5\n\
                [[pods.web.containers]]\nname = \"b\"\ncommand = [\"x\"]\nnotify = true\n\
                start_timeout_seconds = -1\n{POD}";
    let errs = errors(&text.replace("{POD}", POD));
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:25: pods.web.containers[0].start_timeout_seconds: ",
        "start_timeout_seconds needs notify = true",
    );
    assert_has(
        &errs[1],
        "9:25: pods.web.containers[1].start_timeout_seconds: ",
        "must be > 0 seconds",
    );
    let text = "[[pods.web.containers]]\nname = \"a\"\ncommand = [\"x\"]\nnotify = true\n\
                start_timeout_seconds = 1.5\n{POD}";
    let cfg = ok(&text.replace("{POD}", POD));
    assert_eq!(
        cfg.pods[0].containers[0].start_timeout,
        Some(std::time::Duration::from_millis(1500))
    );
}

#[test]
fn watchdog_seconds_needs_notify_and_a_positive_duration() {
    let text = "[[pods.web.containers]]\nname = \"a\"\ncommand = [\"x\"]\nwatchdog_seconds = 5\n\
                [[pods.web.containers]]\nname = \"b\"\ncommand = [\"x\"]\nnotify = true\n\
                watchdog_seconds = 0\n{POD}";
    let errs = errors(&text.replace("{POD}", POD));
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:20: pods.web.containers[0].watchdog_seconds: ",
        "watchdog_seconds needs notify = true",
    );
    assert_has(
        &errs[1],
        "9:20: pods.web.containers[1].watchdog_seconds: ",
        "must be > 0 seconds",
    );
    let text = "[[pods.web.containers]]\nname = \"a\"\ncommand = [\"x\"]\nnotify = true\n\
                watchdog_seconds = 2.5\n{POD}";
    let cfg = ok(&text.replace("{POD}", POD));
    assert_eq!(
        cfg.pods[0].containers[0].watchdog,
        Some(std::time::Duration::from_millis(2500))
    );
}

#[test]
fn init_container_with_restart_policy_always_is_a_sidecar_with_probes() {
    let text = "[[pods.web.init_containers]]\nname = \"log\"\ncommand = [\"x\"]\n\
                restart_policy = \"Always\"\n\
                startup_probe = { exec = { command = [\"true\"] } }\n{POD}";
    let cfg = ok(&text.replace("{POD}", POD));
    let init = &cfg.pods[0].init_containers[0];
    assert_eq!(init.restart_policy, RestartPolicy::Always);
    assert!(init.startup_probe.is_some());
}

#[test]
fn termination_message_path_must_be_absolute_and_policy_known() {
    let text = "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n\
                termination_message_path = \"msg\"\n\
                termination_message_policy = \"Logs\"\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:28: pods.web.containers[0].termination_message_path: ",
        "absolute",
    );
    assert_has(
        &errs[1],
        "5:30: pods.web.containers[0].termination_message_policy: ",
        "expected File or FallbackToLogsOnError",
    );
    let cfg = ok(&text
        .replace("\"msg\"", "\"/run/app/msg\"")
        .replace("\"Logs\"", "\"FallbackToLogsOnError\""));
    let c = &cfg.pods[0].containers[0];
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some(Path::new("/run/app/msg"))
    );
    assert_eq!(
        c.termination_message_policy,
        TerminationMessagePolicy::FallbackToLogsOnError
    );
}

#[test]
fn shutdown_on_and_success_exit_codes_are_checked_and_located() {
    let text = "[pods.web]\nshutdown_on = \"done\"\n\
                [[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n\
                success_exit_codes = [3, 256, -1]\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:15: pods.web.shutdown_on: ",
        "expected completed, failed, ended or dependency_failed",
    );
    assert_has(
        &errs[1],
        "6:26: pods.web.containers[0].success_exit_codes[1]: ",
        "invalid exit code 256; an exit code is 0 to 255",
    );
    assert_has(
        &errs[2],
        "6:31: pods.web.containers[0].success_exit_codes[2]: ",
        "invalid exit code -1",
    );
    let cfg = ok(&text
        .replace("\"done\"", "\"dependency_failed\"")
        .replace(", 256, -1", ""));
    assert_eq!(cfg.pods[0].shutdown_on, Some(ShutdownOn::DependencyFailed));
    assert_eq!(cfg.pods[0].containers[0].success_exit_codes, [3]);
}

#[test]
fn container_ports_are_kubernetes_port_names_each_once_and_located() {
    let base = "[pods.web]\nstable_identity = true\n[[pods.web.containers]]\nname = \"app\"\n\
                command = [\"x\"]\n";
    let cfg = ok(&format!(
        "{base}ports = [{{ name = \"http\", port = 8080 }}, {{ name = \"metrics-2\", port = 9100 }}]\n"
    ));
    let ports = &cfg.pods[0].containers[0].ports;
    assert_eq!(ports.len(), 2);
    assert_eq!((ports[1].name.as_str(), ports[1].port), ("metrics-2", 9100));
    assert!(cfg.pods[0].stable_identity);
    let errs = errors(&format!(
        "{base}ports = [{{ name = \"Http\", port = 8080 }}, {{ name = \"a\", port = 0 }}, \
         {{ name = \"a\", port = 8080 }}, {{ name = \"9100\", port = 9100 }}]\n"
    ));
    assert_eq!(errs.len(), 5, "{errs:#?}");
    for (e, (field, msg)) in errs.iter().zip([
        ("ports[0].name: ", "invalid port name \"Http\""),
        ("ports[1].port: ", "invalid port 0"),
        ("ports[2].name: ", "port name \"a\" is used twice"),
        ("ports[2].port: ", "port 8080 is named twice"),
        ("ports[3].name: ", "invalid port name \"9100\""),
    ]) {
        assert!(
            e.contains(&format!("pods.web.containers[0].{field}")) && e.contains(msg),
            "{field} {msg}: {errs:#?}"
        );
    }
}

#[test]
fn active_deadline_seconds_is_checked_and_located() {
    let text = "[pods.job]\nactive_deadline_seconds = 0\n\
                [[pods.job.containers]]\nname = \"run\"\ncommand = [\"x\"]\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:27: pods.job.active_deadline_seconds: ",
        "must be > 0 seconds",
    );
    let cfg = ok(&text.replace("= 0", "= 90"));
    assert_eq!(
        cfg.pods[0].active_deadline,
        Some(std::time::Duration::from_secs(90))
    );
    assert_eq!(
        ok(&text.replace("active_deadline_seconds = 0\n", "")).pods[0].active_deadline,
        None
    );
}

#[test]
fn a_schedule_is_checked_and_located() {
    let text = "[pods.job]\nschedule = { cron = \"0 25 * * *\", time_zone = \"Mars/Olympus\", \
                concurrency = \"Allow\", starting_deadline_seconds = -1 }\n\
                [[pods.job.containers]]\nname = \"run\"\ncommand = [\"x\"]\n";
    let errs = errors(text);
    let all = errs.join("\n");
    assert_eq!(errs.len(), 5, "{all}");
    assert!(
        all.contains("pods.job.schedule: a scheduled pod runs to completion"),
        "{all}"
    );
    assert!(
        all.contains("pods.job.schedule.cron: invalid cron pattern \"0 25 * * *\""),
        "{all}"
    );
    assert!(
        all.contains("pods.job.schedule.time_zone: unknown time zone \"Mars/Olympus\""),
        "{all}"
    );
    assert!(
        all.contains("pods.job.schedule.concurrency: concurrency = \"Allow\" would run two runs"),
        "{all}"
    );
    assert!(
        all.contains("pods.job.schedule.starting_deadline_seconds: must be > 0"),
        "{all}"
    );
    let good = "[pods.job]\nrestart_policy = \"Never\"\nschedule = { cron = \"@daily\" }\n\
                [[pods.job.containers]]\nname = \"run\"\ncommand = [\"x\"]\n";
    let s = ok(good).pods[0].schedule.clone().expect("a schedule");
    assert_eq!(s.cron.as_str(), "@daily");
    assert_eq!(s.concurrency, Concurrency::Forbid, "the default");
    assert_eq!(s.time_zone.name(), None, "the host's zone");
    assert!(!s.suspend);
}

#[test]
fn history_is_checked_and_located_and_a_schedule_gives_the_cronjob_defaults() {
    let text = "[pods.job]\nhistory = { successful = 101, failed = -1 }\n\
                [[pods.job.containers]]\nname = \"run\"\ncommand = [\"x\"]\n";
    let errs = errors(text);
    let all = errs.join("\n");
    assert_eq!(errs.len(), 3, "{all}");
    assert!(
        all.contains("2:11: pods.job.history: history keeps the ended runs of a pod"),
        "{all}"
    );
    assert!(
        all.contains("pods.job.history.successful: must be between 0 and 100, got 101"),
        "{all}"
    );
    assert!(
        all.contains("pods.job.history.failed: must be between 0 and 100, got -1"),
        "{all}"
    );
    let job = |keys: &str| {
        format!(
            "[pods.job]\nrestart_policy = \"Never\"\n{keys}\
             [[pods.job.containers]]\nname = \"run\"\ncommand = [\"x\"]\n"
        )
    };
    assert_eq!(ok(&job("")).pods[0].history, HistorySpec::default());
    let scheduled = job("schedule = { cron = \"@daily\" }\n");
    assert_eq!(ok(&scheduled).pods[0].history, HistorySpec::SCHEDULED);
    let written = job("schedule = { cron = \"@daily\" }\nhistory = { failed = 5 }\n");
    assert_eq!(
        ok(&written).pods[0].history,
        HistorySpec {
            successful: 0,
            failed: 5
        },
        "a key left out of a written history is 0"
    );
}

#[test]
fn profiles_are_checked_and_located_and_autostart_defaults_to_true() {
    let text = "[pods.web]\nprofiles = [\"debug\", \"-x\", \"debug\"]\n\
                [[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:22: pods.web.profiles[1]: ",
        "invalid profile name \"-x\"",
    );
    assert_has(
        &errs[1],
        "2:28: pods.web.profiles[2]: ",
        "profile \"debug\" is listed twice",
    );
    let cfg = ok(&text.replace(", \"-x\", \"debug\"", ""));
    assert!(cfg.pods[0].autostart);
    assert_eq!(cfg.pods[0].profiles, ["debug"]);
    let cfg = ok(&text.replace(
        "profiles = [\"debug\", \"-x\", \"debug\"]",
        "autostart = false",
    ));
    assert!(!cfg.pods[0].autostart);
}

#[test]
fn lifecycle_hooks_take_exactly_one_action() {
    let text = "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n\
                [pods.web.containers.lifecycle]\n\
                post_start = {}\n\
                pre_stop = { sleep = { seconds = 1 }, exec = { command = [\"x\"] } }\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(
        &errs[0],
        "5:14: pods.web.containers[0].lifecycle.post_start: ",
        "hook needs exactly one action: exec, http_get or sleep",
    );
    assert_has(
        &errs[1],
        "6:12: pods.web.containers[0].lifecycle.pre_stop: ",
        "more than one action (exec, sleep)",
    );
    let cfg = ok(
        "[[pods.web.containers]]\nname = \"app\"\ncommand = [\"x\"]\n\
                  [pods.web.containers.lifecycle]\n\
                  post_start = { http_get = { port = 8080, path = \"/warm\" } }\n\
                  pre_stop = { sleep = { seconds = 2.5 } }\n",
    );
    let l = &cfg.pods[0].containers[0].lifecycle;
    assert!(matches!(
        l.post_start,
        Some(Hook::Action(ProbeAction::HttpGet { port: 8080, .. }))
    ));
    assert_eq!(l.pre_stop, Some(Hook::Sleep(Duration::from_millis(2500))));
    // `sleep` is not a probe action.
    let errs = errors(&format!(
        "{POD}readiness_probe = {{ sleep = {{ seconds = 1 }} }}\n"
    ));
    assert!(errs.iter().any(|e| e.contains("sleep")), "{errs:#?}");
}

#[test]
fn plain_init_container_under_an_always_pod_is_not_a_sidecar() {
    let text = "[pods.web]\nrestart_policy = \"Always\"\n\
                [[pods.web.init_containers]]\nname = \"init\"\ncommand = [\"x\"]\n\
                [[pods.web.containers]]\nname = \"c\"\ncommand = [\"x\"]\n";
    let cfg = ok(text);
    assert_eq!(
        cfg.pods[0].init_containers[0].restart_policy,
        RestartPolicy::OnFailure
    );
}

// ---- depends_on ----------------------------------------------------------------------------

fn pod(name: &str, extra: &str) -> String {
    format!("[pods.{name}]\n{extra}\n[[pods.{name}.containers]]\nname = \"c\"\ncommand = [\"x\"]\n")
}

#[test]
fn depends_on_unknown_pod_self_and_bad_condition() {
    let text = format!(
        "{}{}",
        pod("web", "depends_on = { dbb = \"ready\", web = \"started\" }"),
        pod("db", "depends_on = { web = \"healthy\" }")
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:16: pods.web.depends_on.dbb: ",
        "depends on unknown pod \"dbb\"; did you mean \"db\"?",
    );
    assert_has(
        &errs[1],
        "2:31: pods.web.depends_on.web: ",
        "a pod cannot depend on itself",
    );
    assert_has(
        &errs[2],
        "7:22: pods.db.depends_on.web: ",
        "invalid condition \"healthy\"; expected started, ready or completed",
    );
}

#[test]
fn dependency_cycle_reports_the_path() {
    let text = format!(
        "{}{}{}",
        pod("a", "depends_on = { b = \"ready\" }"),
        pod("b", "depends_on = { c = \"started\" }"),
        pod("c", "depends_on = { a = \"ready\" }")
    );
    one(
        &text,
        "12:16: pods.c.depends_on.a: ",
        "dependency cycle: a -> b -> c -> a",
    );
}

#[test]
fn completed_dependency_on_a_pod_that_always_restarts_is_rejected() {
    let text = format!(
        "{}{}",
        pod("job", ""),
        pod("web", "depends_on = { job = \"completed\" }")
    );
    one(
        &text,
        "7:22: pods.web.depends_on.job: ",
        "pod \"job\" can never complete: its container \"c\" has restart_policy Always",
    );
    let fixed = format!(
        "{}{}",
        pod("job", "restart_policy = \"OnFailure\""),
        pod("web", "depends_on = { job = \"completed\" }")
    );
    let c = ok(&fixed);
    assert_eq!(
        c.pods[1].depends_on,
        vec![Dependency::new("job", DependencyCondition::Completed)]
    );
}

#[test]
fn a_dependency_written_as_a_table_carries_restart_and_stop() {
    let text = format!(
        "{}{}",
        pod("db", ""),
        pod(
            "web",
            "depends_on = { db = { condition = \"ready\", restart = true, stop = true } }"
        )
    );
    let c = ok(&text);
    let mut want = Dependency::new("db", DependencyCondition::Ready);
    want.restart = true;
    want.stop = true;
    assert_eq!(c.pods[1].depends_on, vec![want]);
    let plain = format!(
        "{}{}",
        pod("db", ""),
        pod("web", "depends_on = { db = { condition = \"started\" } }")
    );
    assert_eq!(
        ok(&plain).pods[1].depends_on,
        vec![Dependency::new("db", DependencyCondition::Started)]
    );
}

#[test]
fn a_dependency_table_without_a_condition_with_an_unknown_key_or_following_a_job_is_refused() {
    let text = format!(
        "{}{}{}",
        pod("db", ""),
        pod("job", "restart_policy = \"Never\""),
        pod(
            "web",
            "depends_on = { db = { restart = true, restrat = true }, job = { condition = \"completed\", stop = true } }"
        )
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs.iter()
            .any(|e| e.contains("pods.web.depends_on.db.restrat: unknown key")),
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("pods.web.depends_on.db: missing condition")),
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .any(|e| e
                .contains("pods.web.depends_on.job: restart and stop follow a running dependency")),
        "{errs:#?}"
    );
    let wrong = format!("{}{}", pod("db", ""), pod("web", "depends_on = { db = 1 }"));
    one(
        &wrong,
        "7:21: pods.web.depends_on.db: ",
        "expected a condition (\"started\", \"ready\", \"completed\") or { condition = …, restart = …, stop = … }, found an integer",
    );
}

// ---- resources, signals, capabilities, rlimits -----------------------------------------------

#[test]
fn resource_values_are_checked() {
    let text = format!(
        "{POD}[pods.web.containers.resources]\n\
         memory_max = \"20Mx\"\n\
         pids_max = 0\n\
         cpu_max = 0\n\
         cpu_weight = 10001\n\
         memory_high = -5\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 5, "{errs:#?}");
    let p = "pods.web.containers[0].resources";
    assert_has(
        &errs[0],
        &format!("5:14: {p}.memory_max: "),
        "invalid quantity \"20Mx\"",
    );
    assert_has(
        &errs[1],
        &format!("6:12: {p}.pids_max: "),
        "must be >= 1, got 0",
    );
    assert_has(
        &errs[2],
        &format!("7:11: {p}.cpu_max: "),
        "must be > 0 cores",
    );
    assert_has(
        &errs[3],
        &format!("8:14: {p}.cpu_weight: "),
        "must be between 1 and 10000, got 10001",
    );
    assert_has(
        &errs[4],
        &format!("9:15: {p}.memory_high: "),
        "must be >= 0 bytes, got -5",
    );
}

#[test]
fn resources_accept_quantities_and_max() {
    let c = ok(&format!(
        "{POD}resources = {{ memory_max = \"256Mi\", memory_high = 200000000, swap_max = \"0\", \
         pids_max = \"max\", cpu_max = 1.5, cpu_weight = 200, oom_group = true }}\n"
    ));
    let r = &container(&c).resources;
    assert_eq!(r.memory_max, Some(256 << 20));
    assert_eq!(r.memory_high, Some(200_000_000));
    assert_eq!(r.swap_max, Some(0));
    assert_eq!(r.pids_max, None);
    assert_eq!(r.cpu_max, Some(1.5));
    assert_eq!(r.cpu_weight, Some(200));
    assert!(r.oom_group);
}

#[test]
fn unknown_signal_capability_and_rlimit_are_rejected() {
    let text = format!(
        "{POD}stop_signal = \"SIGFOO\"\n\
         capabilities = [\"CAP_NET_BIND_SERVICE\", \"CAP_FLY\"]\n\
         rlimits = {{ files = 10, nofile = {{ soft = 10, hard = 5 }} }}\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    let p = "pods.web.containers[0]";
    assert_has(
        &errs[0],
        &format!("4:15: {p}.stop_signal: "),
        "unknown signal \"SIGFOO\"",
    );
    assert_has(
        &errs[1],
        &format!("5:41: {p}.capabilities[1]: "),
        "unknown capability \"CAP_FLY\"",
    );
    assert_has(
        &errs[2],
        &format!("6:13: {p}.rlimits.files: "),
        "unknown rlimit \"files\"",
    );
    assert_has(
        &errs[3],
        &format!("6:34: {p}.rlimits.nofile: "),
        "soft limit (10) must be <= hard limit (5)",
    );
}

/// The `{ soft, hard }` keys come from the same table as every other key, so a misspelling
/// gets the schema walk's located "did you mean", and a wrongly typed value its located type
/// error, not serde's "data did not match any variant of untagged enum".
#[test]
fn misspelled_or_mistyped_rlimit_pair_keys_are_named_with_their_place() {
    let text = format!(
        "{POD}rlimits = {{ nofile = {{ sotf = 10, hard = 20 }}, core = {{ soft = true, hard = 1 }} }}\n"
    );
    let errs = errors(&text);
    let p = "pods.web.containers[0].rlimits";
    assert!(
        errs.iter()
            .any(|e| e.contains(&format!("4:24: {p}.nofile.sotf: "))
                && e.contains("unknown key \"sotf\"; did you mean \"soft\"?")),
        "{errs:#?}"
    );
    assert!(
        errs.iter().any(|e| e.contains(&format!("{p}.core.soft: "))
            && e.contains("expected a string or an integer, found a boolean")),
        "{errs:#?}"
    );
    assert!(
        !errs.iter().any(|e| e.contains("untagged")),
        "serde's own message must not reach the user: {errs:#?}"
    );
}

#[test]
fn signals_capabilities_and_rlimits_are_canonicalised() {
    let c = ok(&format!(
        "{POD}stop_signal = \"term\"\ncapabilities = [\"net_bind_service\", \"CAP_NET_BIND_SERVICE\"]\n\
         rlimits = {{ nofile = 1024, core = \"unlimited\", nproc = {{ soft = 10, hard = 20 }} }}\n"
    ));
    let k = container(&c);
    assert_eq!(
        (k.stop_signal, k.stop_signal_name.as_str()),
        (15, "SIGTERM")
    );
    assert_eq!(k.capabilities, vec!["CAP_NET_BIND_SERVICE".to_string()]);
    let lims: Vec<(&str, u64, u64)> = k.rlimits.iter().map(|r| (r.name, r.soft, r.hard)).collect();
    assert_eq!(
        lims,
        vec![
            ("core", libc::RLIM_INFINITY, libc::RLIM_INFINITY),
            ("nofile", 1024, 1024),
            ("nproc", 10, 20)
        ]
    );
    let c = ok(&format!("{POD}stop_signal = 3\n"));
    assert_eq!(container(&c).stop_signal_name, "SIGQUIT");
}

// ---- probes ------------------------------------------------------------------------------------

#[test]
fn probe_needs_exactly_one_action() {
    one(
        &format!("{POD}[pods.web.containers.liveness_probe]\nperiod_seconds = 5\n"),
        "4:1: pods.web.containers[0].liveness_probe: ",
        "probe needs exactly one action: exec, http_get, tcp_socket or grpc",
    );
    one(
        &format!(
            "{POD}liveness_probe = {{ exec = {{ command = [\"true\"] }}, tcp_socket = {{ port = 1 }} }}\n"
        ),
        "4:64: pods.web.containers[0].liveness_probe.tcp_socket: ",
        "probe has more than one action (exec, tcp_socket)",
    );
    // Each action present is still checked.
    let errs = errors(&format!(
        "{POD}readiness_probe = {{ exec = {{ command = [] }}, http_get = {{ port = 80, path = \"x\" }} }}\n"
    ));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_has(
        &errs[0],
        "4:40: pods.web.containers[0].readiness_probe.exec.command: ",
        "must not be empty",
    );
    assert_has(
        &errs[1],
        "4:57: pods.web.containers[0].readiness_probe.http_get: ",
        "more than one action",
    );
    assert_has(
        &errs[2],
        "4:77: pods.web.containers[0].readiness_probe.http_get.path: ",
        "must start with '/'",
    );
}

#[test]
fn http_probe_port_path_and_scheme_are_checked() {
    let text = format!(
        "{POD}[pods.web.containers.readiness_probe.http_get]\n\
         port = 70000\n\
         path = \"healthz\"\n\
         scheme = \"ftp\"\n\
         [pods.web.containers.liveness_probe]\n\
         tcp_socket = {{ port = 0 }}\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    let p = "pods.web.containers[0]";
    assert_has(
        &errs[0],
        &format!("5:8: {p}.readiness_probe.http_get.port: "),
        "must be between 1 and 65535, got 70000",
    );
    assert_has(
        &errs[1],
        &format!("6:8: {p}.readiness_probe.http_get.path: "),
        "must start with '/', got \"healthz\"",
    );
    assert_has(
        &errs[2],
        &format!("7:10: {p}.readiness_probe.http_get.scheme: "),
        "unsupported scheme \"ftp\"; use \"HTTP\" or \"HTTPS\"",
    );
    assert_has(
        &errs[3],
        &format!("9:23: {p}.liveness_probe.tcp_socket.port: "),
        "must be between 1 and 65535, got 0",
    );
}

#[test]
fn https_scheme_is_accepted_in_kubernetes_and_lowercase_spelling_with_optional_tls() {
    for scheme in ["HTTPS", "https"] {
        let c = ok(&format!(
            "{POD}liveness_probe = {{ http_get = {{ port = 8443, scheme = \"{scheme}\" }} }}\n\
             readiness_probe = {{ http_get = {{ port = 8443, scheme = \"{scheme}\", \
             tls = {{ ca_file = \"/etc/ssl/app-ca.pem\", server_name = \"app.internal\" }} }} }}\n"
        ));
        let k = container(&c);
        let ProbeAction::HttpGet { scheme, tls, .. } = &k.liveness_probe.as_ref().unwrap().action
        else {
            panic!("not http_get");
        };
        assert_eq!((*scheme, tls), (HttpScheme::Https, &TlsSpec::default()));
        let ProbeAction::HttpGet { tls, .. } = &k.readiness_probe.as_ref().unwrap().action else {
            panic!("not http_get");
        };
        assert_eq!(
            tls,
            &TlsSpec {
                ca_file: Some("/etc/ssl/app-ca.pem".into()),
                server_name: Some("app.internal".into()),
            }
        );
    }
    let c = ok(&format!(
        "{POD}liveness_probe = {{ http_get = {{ port = 80, scheme = \"HTTP\" }} }}\n"
    ));
    assert!(matches!(
        container(&c).liveness_probe.as_ref().unwrap().action,
        ProbeAction::HttpGet {
            scheme: HttpScheme::Http,
            ..
        }
    ));
}

#[test]
fn tls_settings_are_checked() {
    let text = format!(
        "{POD}liveness_probe = {{ http_get = {{ port = 80, tls = {{ ca_file = \"/ca.pem\" }} }} }}\n\
         readiness_probe = {{ http_get = {{ port = 443, scheme = \"HTTPS\", \
         tls = {{ ca_file = \"ca.pem\", server_name = \"bad name!\" }} }} }}\n"
    );
    let errs = errors(&text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    let p = "pods.web.containers[0]";
    assert_has(
        &errs[0],
        &format!("4:50: {p}.liveness_probe.http_get.tls: "),
        "tls applies to scheme = \"HTTPS\" only",
    );
    assert_has(
        &errs[1],
        &format!("5:82: {p}.readiness_probe.http_get.tls.ca_file: "),
        "must be an absolute path, got \"ca.pem\"",
    );
    assert_has(
        &errs[2],
        &format!("5:106: {p}.readiness_probe.http_get.tls.server_name: "),
        "must be a DNS name or an IP address, got \"bad name!\"",
    );
}

#[test]
fn grpc_probe_takes_host_port_and_service() {
    let c = ok(&format!(
        "{POD}liveness_probe = {{ grpc = {{ port = 9090 }} }}\n\
         readiness_probe = {{ grpc = {{ host = \"db.internal\", port = 9091, service = \"db\" }} }}\n"
    ));
    let k = container(&c);
    assert_eq!(
        k.liveness_probe.as_ref().unwrap().action,
        ProbeAction::Grpc {
            host: "127.0.0.1".into(),
            port: 9090,
            service: String::new(),
        }
    );
    assert_eq!(
        k.readiness_probe.as_ref().unwrap().action,
        ProbeAction::Grpc {
            host: "db.internal".into(),
            port: 9091,
            service: "db".into(),
        }
    );
    one(
        &format!("{POD}liveness_probe = {{ grpc = {{ service = \"x\" }} }}\n"),
        "4:27: pods.web.containers[0].liveness_probe.grpc.port: ",
        "missing required key \"port\"",
    );
}

#[test]
fn http_probe_without_port_is_rejected() {
    one(
        &format!("{POD}liveness_probe = {{ http_get = {{ path = \"/\" }} }}\n"),
        "4:31: pods.web.containers[0].liveness_probe.http_get.port: ",
        "missing required key \"port\"",
    );
}

#[test]
fn probe_defaults_follow_the_kubelet() {
    let c = ok(&format!(
        "{POD}liveness_probe = {{ http_get = {{ port = 8080 }} }}\n\
         readiness_probe = {{ tcp_socket = {{ port = 8080 }}, period_seconds = 0.25, success_threshold = 2 }}\n"
    ));
    let k = container(&c);
    let l = k.liveness_probe.as_ref().expect("liveness");
    assert_eq!(
        l.action,
        ProbeAction::HttpGet {
            host: "127.0.0.1".into(),
            port: 8080,
            path: "/".into(),
            headers: vec![],
            scheme: HttpScheme::Http,
            tls: TlsSpec::default(),
        }
    );
    assert_eq!(
        (l.initial_delay, l.period, l.timeout),
        (
            Duration::ZERO,
            Duration::from_secs(10),
            Duration::from_secs(1)
        )
    );
    assert_eq!((l.success_threshold, l.failure_threshold), (1, 3));
    assert_eq!(l.termination_grace, None);
    let r = k.readiness_probe.as_ref().expect("readiness");
    assert_eq!(
        r.action,
        ProbeAction::TcpSocket {
            host: "127.0.0.1".into(),
            port: 8080
        }
    );
    assert_eq!(r.period, Duration::from_millis(250));
    assert_eq!(r.success_threshold, 2);
    assert!(k.startup_probe.is_none());
}

// ---- supervisor --------------------------------------------------------------------------------

#[test]
fn supervisor_values_are_checked() {
    let text = "[supervisor]\n\
                socket_mode = \"0968\"\n\
                cgroup_root = \"sys/fs/cgroup\"\n\
                admin_uids = [0, -1]\n\
                log_buffer_bytes = \"max\"\n\
                oom_score_adj = 2000\n\
                socket = \"vigil.sock\"\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 6, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:15: supervisor.socket_mode: ",
        "expected an octal string like \"0660\"",
    );
    assert_has(
        &errs[1],
        "3:15: supervisor.cgroup_root: ",
        "expected \"auto\", \"none\" or an absolute path",
    );
    assert_has(
        &errs[2],
        "4:18: supervisor.admin_uids[1]: ",
        "must be >= 0, got -1",
    );
    assert_has(
        &errs[3],
        "5:20: supervisor.log_buffer_bytes: ",
        "\"max\" is not allowed here",
    );
    assert_has(
        &errs[4],
        "6:17: supervisor.oom_score_adj: ",
        "between -1000 and 1000",
    );
    assert_has(
        &errs[5],
        "7:10: supervisor.socket: ",
        "must be an absolute path",
    );
}

#[test]
fn sched_slice_is_100_microseconds_by_default_within_the_kernels_bounds_or_inherit() {
    let slice = |text: &str| {
        load_str(text, Path::new("t.toml"))
            .expect("valid")
            .supervisor
            .sched_slice_micros
    };
    assert_eq!(slice(""), Some(100));
    assert_eq!(
        slice("[supervisor]\nsched_slice_microseconds = 100000\n"),
        Some(100_000)
    );
    assert_eq!(
        slice("[supervisor]\nsched_slice_microseconds = \"inherit\"\n"),
        None
    );
    let errs = errors(
        "[supervisor]\nsched_slice_microseconds = 99\n\
         [pods.p]\n[[pods.p.containers]]\nname = \"c\"\ncommand = [\"true\"]\n",
    );
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:28: supervisor.sched_slice_microseconds: ",
        "must be between 100 and 100000 (the kernel's bounds for a time slice), got 99",
    );
    for bad in ["-1", "4294967396", "\"short\""] {
        let errs = errors(&format!("[supervisor]\nsched_slice_microseconds = {bad}\n"));
        assert_eq!(errs.len(), 1, "{bad}: {errs:#?}");
        assert_has(&errs[0], "2:28: supervisor.sched_slice_microseconds: ", "");
    }
}

#[test]
fn on_restart_is_adopt_by_default_and_must_be_adopt_or_replace() {
    let ok = |text: &str| {
        load_str(text, Path::new("t.toml"))
            .expect("valid")
            .supervisor
            .on_restart
    };
    assert_eq!(ok(""), OnRestart::Adopt);
    assert_eq!(
        ok("[supervisor]\non_restart = \"replace\"\n"),
        OnRestart::Replace
    );
    assert_eq!(
        ok("[supervisor]\non_restart = \"adopt\"\n"),
        OnRestart::Adopt
    );
    let errs = errors("[supervisor]\non_restart = \"kill\"\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:14: supervisor.on_restart: ",
        "invalid on_restart \"kill\"; expected \"adopt\" or \"replace\"",
    );
}

#[test]
fn on_output_lost_is_restart_by_default_and_must_be_restart_or_keep() {
    let ok = |text: &str| {
        load_str(text, Path::new("t.toml"))
            .expect("valid")
            .supervisor
            .on_output_lost
    };
    assert_eq!(ok(""), OnOutputLost::Restart);
    assert_eq!(
        ok("[supervisor]\non_output_lost = \"keep\"\n"),
        OnOutputLost::Keep
    );
    assert_eq!(
        ok("[supervisor]\non_output_lost = \"restart\"\n"),
        OnOutputLost::Restart
    );
    let errs = errors("[supervisor]\non_output_lost = \"ignore\"\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "2:18: supervisor.on_output_lost: ",
        "invalid on_output_lost \"ignore\"; expected \"restart\" or \"keep\"",
    );
}

#[test]
fn supervisor_defaults_and_values() {
    let c = ok("");
    assert_eq!(c.supervisor, SupervisorSpec::default());
    assert!(c.pods.is_empty());
    let c = ok("[supervisor]\n\
                socket = \"/run/v.sock\"\nsocket_mode = \"0660\"\nsocket_group = \"vigil\"\n\
                admin_uids = [1000]\nadmin_gids = [27]\ncgroup_root = \"none\"\n\
                cgroup_name = \"vigil-test\"\nlog_dir = \"/var/log/vigil\"\n\
                log_max_file_bytes = \"1Mi\"\nlog_max_files = 5\nlog_buffer_bytes = 65536\n\
                log_forward = false\nshutdown_timeout_seconds = 2.5\noom_score_adj = \"inherit\"\n");
    let s = &c.supervisor;
    assert_eq!(s.socket.as_deref(), Some(Path::new("/run/v.sock")));
    assert_eq!(s.socket_mode, 0o660);
    assert_eq!(s.socket_group.as_deref(), Some("vigil"));
    assert_eq!(
        (s.admin_uids.clone(), s.admin_gids.clone()),
        (vec![1000], vec![27])
    );
    assert_eq!(s.cgroup_root, CgroupRoot::None);
    assert_eq!(s.cgroup_name, "vigil-test");
    assert_eq!(s.log_dir.as_deref(), Some(Path::new("/var/log/vigil")));
    assert_eq!(
        (s.log_max_file_bytes, s.log_max_files, s.log_buffer_bytes),
        (1 << 20, 5, 65536)
    );
    assert!(!s.log_forward);
    assert_eq!(s.shutdown_timeout, Duration::from_millis(2500));
    assert_eq!(s.oom_score_adj, None);
    one(
        "[supervisor]\nsocket_mode = 660\n",
        "2:15: supervisor.socket_mode: ",
        "660 is out of range (integers are decimal); write the mode as an octal string like \"0660\" or as 0o660",
    );
    let c = ok("[supervisor]\ncgroup_root = \"/sys/fs/cgroup/vigil\"\nsocket_mode = 0o640\n");
    assert_eq!(
        c.supervisor.cgroup_root,
        CgroupRoot::Path("/sys/fs/cgroup/vigil".into())
    );
    assert_eq!(c.supervisor.socket_mode, 0o640);
}

// ---- all at once, folding ----------------------------------------------------------------------

#[test]
fn a_file_with_many_problems_reports_all_of_them_in_file_order() {
    let text = "[supervisor]\n\
                shutdown_timeout_seconds = -1\n\
                [pods.web]\n\
                restart_policy = \"Sometimes\"\n\
                depends_on = { ghost = \"ready\" }\n\
                [[pods.web.containers]]\n\
                name = \"App\"\n\
                command = []\n\
                stop_signal = \"SIGNOPE\"\n\
                [pods.web.containers.liveness_probe]\n\
                period_seconds = 0\n\
                success_threshold = 3\n\
                [pods.web.containers.resources]\n\
                memory_max = \"20Mx\"\n";
    let errs = errors(text);
    let located: Vec<&str> = errs
        .iter()
        .map(|e| e.split(": ").nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        located,
        vec![
            "supervisor.shutdown_timeout_seconds",
            "pods.web.restart_policy",
            "pods.web.depends_on.ghost",
            "pods.web.containers[0].name",
            "pods.web.containers[0].command",
            "pods.web.containers[0].stop_signal",
            "pods.web.containers[0].liveness_probe",
            "pods.web.containers[0].liveness_probe.period_seconds",
            "pods.web.containers[0].liveness_probe.success_threshold",
            "pods.web.containers[0].resources.memory_max",
        ],
        "{errs:#?}"
    );
    assert!(errs[0].starts_with("t.toml:2:28: "), "{}", errs[0]);
    assert!(errs[9].starts_with("t.toml:14:14: "), "{}", errs[9]);
}

#[test]
fn containers_inherit_pod_settings_unless_they_override() {
    let c = ok("[pods.web]\n\
                restart_policy = \"OnFailure\"\n\
                termination_grace_period_seconds = 7\n\
                backoff = { initial_seconds = 0.5, max_seconds = 8 }\n\
                max_restarts = 4\n\
                [[pods.web.init_containers]]\nname = \"init\"\ncommand = [\"/bin/init\"]\n\
                [[pods.web.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n\
                [[pods.web.containers]]\nname = \"b\"\ncommand = [\"/bin/b\"]\n\
                restart_policy = \"Never\"\ntermination_grace_period_seconds = 1.5\n\
                backoff = { max_seconds = 2 }\nmax_restarts = 0\nno_new_privs = false\n");
    let p = &c.pods[0];
    assert_eq!(p.restart_policy, RestartPolicy::OnFailure);
    assert_eq!(
        p.termination_grace,
        Duration::from_secs(7),
        "written: the pod's"
    );
    let a = &p.containers[0];
    assert_eq!(a.restart_policy, RestartPolicy::OnFailure);
    assert_eq!(a.termination_grace, Duration::from_secs(7));
    assert_eq!(
        a.backoff,
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
            reset_after: Duration::from_secs(600)
        }
    );
    assert_eq!(a.max_restarts, Some(4));
    assert!(a.no_new_privs);
    assert_eq!(
        (a.stop_signal, a.stop_signal_name.as_str()),
        (libc::SIGTERM, "SIGTERM")
    );
    let b = &p.containers[1];
    assert_eq!(b.restart_policy, RestartPolicy::Never);
    assert_eq!(b.termination_grace, Duration::from_millis(1500));
    assert_eq!(b.backoff.initial, Duration::from_millis(500));
    assert_eq!(b.backoff.max, Duration::from_secs(2));
    assert_eq!(b.max_restarts, Some(0));
    assert!(!b.no_new_privs);
    assert_eq!(
        p.init_containers[0].restart_policy,
        RestartPolicy::OnFailure
    );
}

#[test]
fn defaults_apply_when_nothing_is_set() {
    let c = ok(POD);
    let p = &c.pods[0];
    assert_eq!(p.restart_policy, RestartPolicy::Always);
    assert_eq!(p.termination_grace, Duration::from_secs(30));
    let k = container(&c);
    assert_eq!(k.restart_policy, RestartPolicy::Always);
    assert_eq!(k.termination_grace, Duration::from_secs(30));
    assert_eq!(k.backoff, Backoff::default());
    assert_eq!(k.max_restarts, None);
    assert!(k.no_new_privs && k.capabilities.is_empty() && k.rlimits.is_empty());
    assert!(!k.resources.any());
    assert_eq!(c.source, Path::new("t.toml"));
}

#[test]
fn init_containers_of_an_always_pod_restart_only_on_failure() {
    let c = ok(&format!(
        "[[pods.web.init_containers]]\nname = \"i\"\ncommand = [\"x\"]\n{POD}"
    ));
    assert_eq!(
        c.pods[0].init_containers[0].restart_policy,
        RestartPolicy::OnFailure
    );
}

#[test]
fn pods_are_sorted_by_name_and_env_by_key() {
    let c = ok(&format!(
        "{}{}[[pods.alpha.containers]]\nname = \"c\"\ncommand = [\"x\"]\nenv = {{ Z = \"1\", A = \"2\" }}\n",
        pod("zulu", ""),
        pod("mike", "")
    ));
    let names: Vec<&str> = c.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["alpha", "mike", "zulu"]);
    assert_eq!(
        c.pods[0].containers[0].env,
        vec![
            ("A".to_string(), "2".to_string()),
            ("Z".to_string(), "1".to_string())
        ]
    );
}

// ---- schema and raw agree; shipped files are valid -----------------------------------------

/// Uses every key of the schema once; must be accepted (proves the raw structs and the key
/// lists that `keys.rs` makes from one table agree, since serde runs only after the schema
/// walk passed).
#[test]
fn image_is_kept_and_a_blank_one_is_rejected() {
    let c = ok(
        "[pods.a]\n[[pods.a.containers]]\nname = \"x\"\ncommand = [\"/bin/true\"]\nimage = \"busybox:1.36\"\n",
    );
    assert_eq!(
        c.pods[0].containers[0].image.as_deref(),
        Some("busybox:1.36")
    );
    one(
        &format!("{POD}image = \"a b\"\n"),
        "4:9: pods.web.containers[0].image: ",
        "invalid image",
    );
}

const KITCHEN_SINK: &str = r#"
[supervisor]
socket = "/run/vigil/vigil.sock"
socket_mode = "0660"
socket_group = "vigil"
admin_uids = [1000]
admin_gids = [1000]
cgroup_root = "auto"
cgroup_name = "vigil"
allow_missing_controllers = false
log_dir = "/var/log/vigil"
log_max_file_bytes = "10Mi"
log_max_files = 3
log_timestamps = true
log_buffer_bytes = "1Mi"
log_forward = true
log_forward_to = "auto"
shutdown_timeout_seconds = 60
oom_score_adj = -900
sched_slice_microseconds = 100
max_connections_per_uid = 16
client_idle_timeout_seconds = 30
client_fd_percent = 40
on_restart = "replace"
on_output_lost = "keep"
metrics_address = "[::1]:9469"
env_files = ["/etc/vigil/vars.env"]
pod_dir = "/etc/vigil/pods.d"


[[supervisor.on_event]]
name = "page"
reasons = ["BackOff", "OOMKilling", "Unhealthy"]
pods = ["web"]
type = "Warning"
exec = ["/usr/local/bin/page", "--urgent"]
user = "nobody"
group = "nogroup"
timeout_seconds = 5
max_concurrent = 2
queue_size = 50

[[supervisor.on_event]]
webhook = { url = "https://hooks.example.test/vigil", headers = { Authorization = "Bearer x" }, tls = { ca_file = "/etc/ssl/hooks.pem", server_name = "hooks.example.test" } }
retries = 5
[pods.db]
restart_policy = "Always"
[[pods.db.containers]]
name = "db"
command = ["/usr/bin/db"]
readiness_probe = { grpc = { host = "db.internal", port = 9090, service = "db" } }
termination_message_path = "/run/db/termination-log"
lifecycle = { post_start = { exec = { command = ["/usr/bin/db", "--warm"] } }, pre_stop = { sleep = { seconds = 2 } } }
termination_message_policy = "FallbackToLogsOnError"
success_exit_codes = [0, 3]

[pods.web]
restart_policy = "Always"
termination_grace_period_seconds = 30
backoff = { initial_seconds = 10, max_seconds = 300, reset_after_seconds = 600 }
max_restarts = 100
depends_on = { db = "ready" }
shutdown_on = "failed"
active_deadline_seconds = 3600
autostart = true
profiles = ["prod", "debug"]
stable_identity = true

[[pods.web.init_containers]]
name = "migrate"
command = ["/usr/bin/migrate", "--once"]

[[pods.web.containers]]
name = "app"
command = ["/usr/bin/app", "--port", "8080"]
image = "registry.example/app:1.4"
ports = [{ name = "http", port = 8080 }]
env = { RUST_LOG = "info" }
env_file = "/etc/vigil/web.env"
working_dir = "/srv/app"
user = "app"
group = 1000
stop_signal = "SIGTERM"
restart_policy = "OnFailure"
termination_grace_period_seconds = 10
backoff = { initial_seconds = 1, max_seconds = 30, reset_after_seconds = 60 }
max_restarts = 5
capabilities = ["CAP_NET_BIND_SERVICE"]
no_new_privs = true
run_as_non_root = true
notify = true
watchdog_seconds = 30
start_timeout_seconds = 90
rlimits = { nofile = { soft = 1024, hard = 4096 }, core = 0 }

[pods.web.containers.resources]
memory_max = "256Mi"
memory_high = "200Mi"
swap_max = "0"
pids_max = 512
cpu_max = 1.5
cpu_weight = 100
oom_group = false

[pods.web.containers.startup_probe]
exec = { command = ["/usr/bin/check"] }
failure_threshold = 30
period_seconds = 1

[pods.web.containers.liveness_probe]
http_get = { host = "127.0.0.1", port = 8080, path = "/healthz", scheme = "HTTPS", headers = { X-Probe = "1" }, tls = { ca_file = "/etc/ssl/app-ca.pem", server_name = "app.internal" } }
initial_delay_seconds = 5
period_seconds = 5
timeout_seconds = 1
success_threshold = 1
failure_threshold = 3
termination_grace_period_seconds = 2

[pods.web.containers.readiness_probe]
tcp_socket = { host = "localhost", port = 8080 }
period_seconds = 2

[pods.api]
replicas = 2
min_ready = 1
update = "rolling"
max_unavailable = 2
progress_deadline_seconds = 90
[[pods.api.containers]]
name = "api"
command = ["/usr/bin/api", "--port=900${replica}"]
ready_log_line = "^listening on :900[0-9]$"

[pods.nightly]
restart_policy = "OnFailure"
schedule = { cron = "0 2 * * *", time_zone = "Europe/Berlin", concurrency = "Replace", starting_deadline_seconds = 600, suspend = true }
history = { successful = 5, failed = 2 }

[[pods.nightly.containers]]
name = "import"
command = ["/usr/bin/import"]
"#;

#[test]
fn every_key_deserializes() {
    let c = ok(KITCHEN_SINK);
    assert_eq!(c.pods.len(), 5);
    let web = c.pods.iter().find(|p| p.name == "web").expect("web");
    assert!(web.containers[0].run_as_non_root);
    assert!(!web.init_containers[0].run_as_non_root);
    assert_eq!(web.profiles, ["prod", "debug"]);
    fn keys(fields: &[schema::Field], out: &mut Vec<&'static str>) {
        for f in fields {
            out.push(f.name);
            match &f.kind {
                schema::Kind::Table(inner)
                | schema::Kind::TableArray(inner)
                | schema::Kind::Map(schema::Kind::Table(inner))
                | schema::Kind::Rlimit(inner)
                | schema::Kind::Map(schema::Kind::Rlimit(inner)) => keys(inner, out),
                _ => {}
            }
        }
    }
    let mut all = Vec::new();
    keys(keys::RawConfig::FIELDS, &mut all);
    for k in all {
        let used = KITCHEN_SINK.contains(&format!("{k} ="))
            || KITCHEN_SINK.contains(&format!("[{k}"))
            || KITCHEN_SINK.contains(&format!(".{k}"));
        assert!(used, "schema key {k} is not exercised by KITCHEN_SINK");
    }
}

#[test]
fn shipped_default_and_examples_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut files = vec![root.join("default.toml")];
    let mut examples: Vec<_> = std::fs::read_dir(root.join("examples"))
        .expect("config/examples exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    examples.sort();
    assert!(
        examples.len() >= 4,
        "expected at least 4 examples, found {examples:?}"
    );
    files.extend(examples);
    for f in files {
        if let Err(e) = load(&f) {
            panic!("{} is invalid:\n{e}", f.display());
        }
    }
    let bundled = load_source(&ConfigSource::Bundled).expect("bundled default is valid");
    assert_eq!(bundled.source, Path::new(BUNDLED_NAME));
    assert!(bundled.pods.len() >= 3);
}

// ---- lookup and I/O ------------------------------------------------------------------------

#[test]
fn resolve_path_prefers_explicit_then_system_file_then_bundled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let system = dir.path().join("vigil.toml");
    assert_eq!(resolve_path_in(None, &system), ConfigSource::Bundled);
    std::fs::write(&system, "").expect("write");
    assert_eq!(
        resolve_path_in(None, &system),
        ConfigSource::File(system.clone())
    );
    let explicit = dir.path().join("other.toml");
    assert_eq!(
        resolve_path_in(Some(explicit.clone()), &system),
        ConfigSource::File(explicit)
    );
}

#[test]
fn unreadable_file_names_the_path_and_os_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.toml");
    let e = load(&missing).expect_err("missing file");
    assert_eq!(e.len(), 1);
    let s = e.to_string();
    assert!(
        s.starts_with(&format!("{}: cannot read config file: ", missing.display())),
        "{s}"
    );
    assert!(s.contains("No such file or directory"), "{s}");
}

/// docs/interface.md §4 has a section per config table and a row per key: a key added to the
/// schema without a row (or a new table without a section) fails here, so the reference cannot
/// fall behind the parser.
#[test]
fn every_config_key_is_documented_in_interface_md() {
    use schema::{Field, Kind};
    const SECTIONS: &[(&str, &[Field])] = &[
        ("### `[supervisor]`", keys::RawSupervisor::FIELDS),
        ("### `[[supervisor.on_event]]`", keys::RawOnEvent::FIELDS),
        ("### `webhook`", keys::RawWebhook::FIELDS),
        ("### `[pods.NAME]`", keys::RawPod::FIELDS),
        ("### `backoff`", keys::RawBackoff::FIELDS),
        ("### `schedule`", keys::RawSchedule::FIELDS),
        ("### `history`", keys::RawHistory::FIELDS),
        ("### `[[pods.NAME.containers]]`", keys::RawContainer::FIELDS),
        ("### `ports`", keys::RawPort::FIELDS),
        ("### `resources`", keys::RawResources::FIELDS),
        ("### Probes", keys::RawProbe::FIELDS),
        ("### `exec`", keys::RawExec::FIELDS),
        ("### `http_get`", keys::RawHttpGet::FIELDS),
        ("### `tls`", keys::RawTls::FIELDS),
        ("### `tcp_socket`", keys::RawTcpSocket::FIELDS),
        ("### `grpc`", keys::RawGrpc::FIELDS),
        ("### `rlimits`", keys::RawRlimitPair::FIELDS),
        ("### `lifecycle`", keys::RawLifecycle::FIELDS),
        ("### Hooks", keys::RawHook::FIELDS),
        ("### `sleep`", keys::RawSleep::FIELDS),
    ];
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/interface.md"))
            .expect("read docs/interface.md");
    // Every table reachable from the root, with the dotted path it was first reached by.
    fn tables(fields: &'static [Field], path: &str, out: &mut Vec<(String, &'static [Field])>) {
        for f in fields {
            let p = schema::join(path, f.name);
            let inner: Option<&'static [Field]> = match &f.kind {
                Kind::Table(t) | Kind::TableArray(t) | Kind::Map(Kind::Table(t)) => Some(t),
                Kind::Rlimit(t) | Kind::Map(Kind::Rlimit(t)) => Some(t),
                _ => None,
            };
            if let Some(t) = inner
                && !out.iter().any(|(_, seen)| std::ptr::eq(*seen, t))
            {
                out.push((p.clone(), t));
                tables(t, &p, out);
            }
        }
    }
    let mut found = Vec::new();
    tables(keys::RawConfig::FIELDS, "", &mut found);
    let mut missing = Vec::new();
    for (path, fields) in found {
        let Some((heading, _)) = SECTIONS.iter().find(|(_, f)| std::ptr::eq(*f, fields)) else {
            missing.push(format!(
                "table {path}: no section; add one to docs/interface.md §4 and to SECTIONS here"
            ));
            continue;
        };
        let Some(start) = doc.find(&format!("\n{heading}")) else {
            missing.push(format!(
                "table {path}: heading {heading:?} not in docs/interface.md"
            ));
            continue;
        };
        let body = &doc[start + 1..];
        let end = body[1..].find("\n#").map_or(body.len(), |e| e + 1);
        let rows: Vec<&str> = body[..end]
            .lines()
            .filter_map(|l| l.strip_prefix("| ")?.split(" |").next())
            .collect();
        for f in fields {
            let cell = format!("`{}`", f.name);
            if !rows.iter().any(|r| r.contains(&cell)) {
                missing.push(format!(
                    "{}: no row under {heading:?}",
                    schema::join(&path, f.name)
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/interface.md is missing config keys:\n{}",
        missing.join("\n")
    );
}

#[test]
fn env_file_must_be_an_absolute_path() {
    let errs = errors(
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"true\"]\nenv_file = \"web.env\"\n",
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("env_file") && errs[0].contains("must be an absolute path"),
        "{errs:?}"
    );
    let c = ok(
        "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"true\"]\nenv_file = \"/etc/vigil/web.env\"\n",
    );
    assert_eq!(
        c.pods[0].containers[0].env_file.as_deref(),
        Some(std::path::Path::new("/etc/vigil/web.env"))
    );
}

#[test]
fn client_limits_are_checked_and_default_sensibly() {
    let c = ok("[supervisor]\n");
    assert_eq!(c.supervisor.max_connections_per_uid, 32);
    assert_eq!(c.supervisor.client_idle_timeout, Duration::from_secs(60));
    assert_eq!(c.supervisor.client_fd_percent, 50);
    let c = ok(
        "[supervisor]\nmax_connections_per_uid = 4\nclient_idle_timeout_seconds = 2.5\nclient_fd_percent = 20\n",
    );
    assert_eq!(c.supervisor.max_connections_per_uid, 4);
    assert_eq!(
        c.supervisor.client_idle_timeout,
        Duration::from_millis(2500)
    );
    assert_eq!(c.supervisor.client_fd_percent, 20);
    for (text, at) in [
        (
            "[supervisor]\nmax_connections_per_uid = 0\n",
            "2:27: supervisor.max_connections_per_uid: ",
        ),
        (
            "[supervisor]\nclient_idle_timeout_seconds = 0\n",
            "2:31: supervisor.client_idle_timeout_seconds: ",
        ),
        (
            "[supervisor]\nclient_fd_percent = 95\n",
            "2:21: supervisor.client_fd_percent: ",
        ),
    ] {
        one(text, at, "");
    }
}

#[test]
fn log_forward_to_takes_auto_stdout_or_journal_and_names_the_bad_value() {
    use crate::config::spec::ForwardTo;
    assert_eq!(ok("").supervisor.log_forward_to, ForwardTo::Auto);
    for (v, want) in [
        ("auto", ForwardTo::Auto),
        ("stdout", ForwardTo::Stdout),
        ("journal", ForwardTo::Journal),
    ] {
        let c = ok(&format!("[supervisor]\nlog_forward_to = \"{v}\"\n"));
        assert_eq!(c.supervisor.log_forward_to, want);
    }
    one(
        "[supervisor]\nlog_forward_to = \"syslog\"\n",
        "2:18: supervisor.log_forward_to: ",
        "invalid log_forward_to \"syslog\"; expected \"auto\", \"stdout\" or \"journal\"",
    );
}

// ---- drop-ins and layers (docs/interface.md §4.0) -----------------------------------------

/// `dir/vigil.toml` = `main`, and `dir/vigil.toml.d/NAME` = text for each drop-in.
fn layered(dir: &Path, main: &str, drop_ins: &[(&str, &str)]) -> std::path::PathBuf {
    let file = dir.join("vigil.toml");
    std::fs::write(&file, main).expect("write main");
    if !drop_ins.is_empty() {
        let d = dir.join("vigil.toml.d");
        std::fs::create_dir_all(&d).expect("mkdir .d");
        for (name, text) in drop_ins {
            std::fs::write(d.join(name), text).expect("write drop-in");
        }
    }
    file
}

const BASE: &str = r#"
[supervisor]
shutdown_timeout_seconds = 20
log_max_files = 3

[pods.web]
restart_policy = "Always"
[[pods.web.containers]]
name = "app"
command = ["/bin/app", "--old"]
env = { A = "1", B = "2" }
[pods.web.containers.liveness_probe]
exec = { command = ["/bin/true"] }
period_seconds = 7

[pods.db]
restart_policy = "OnFailure"
[[pods.db.containers]]
name = "db"
command = ["/bin/db"]
env = { KEEP = "no" }
"#;

#[test]
fn drop_ins_merge_key_by_key_in_lexical_order_and_replace_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(
        dir.path(),
        BASE,
        &[
            // Read second: it wins over 10-first.toml.
            (
                "20-second.toml",
                "[supervisor]\nlog_max_files = 9\n[[pods.web.containers]]\nname = \"app\"\n\
                 env = { B = \"two\", C = \"3\" }\n",
            ),
            (
                "10-first.toml",
                "[supervisor]\nlog_max_files = 5\n[[pods.web.containers]]\nname = \"app\"\n\
                 command = [\"/bin/app\", \"--new\"]\n\
                 liveness_probe = { http_get = { port = 80 } }\n\
                 [[pods.web.containers]]\nname = \"side\"\ncommand = [\"/bin/side\"]\n",
            ),
            // Not a drop-in: ignored.
            ("30-backup.toml~", "this is not toml"),
        ],
    );
    let c = load(&file).expect("valid");
    assert_eq!(c.source, file);
    assert_eq!(c.supervisor.log_max_files, 9);
    assert_eq!(c.supervisor.shutdown_timeout, Duration::from_secs(20));
    let web = c.pods.iter().find(|p| p.name == "web").expect("web");
    let names: Vec<&str> = web.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app", "side"]);
    let app = &web.containers[0];
    assert_eq!(app.command, ["/bin/app", "--new"]);
    assert_eq!(
        app.env,
        [
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "two".to_string()),
            ("C".to_string(), "3".to_string())
        ]
    );
    let probe = app.liveness_probe.as_ref().expect("probe");
    // The action was replaced (an exec and an http_get together would be refused); the
    // timing written beside the old action stays.
    assert!(
        matches!(probe.action, ProbeAction::HttpGet { .. }),
        "{probe:?}"
    );
    assert_eq!(probe.period, Duration::from_secs(7));
}

#[test]
fn override_replace_replaces_the_pod_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(
        dir.path(),
        BASE,
        &[(
            "db.toml",
            "[pods.db]\noverride = \"replace\"\n[[pods.db.containers]]\nname = \"pg\"\n\
             command = [\"/bin/pg\"]\n",
        )],
    );
    let c = load(&file).expect("valid");
    let db = c.pods.iter().find(|p| p.name == "db").expect("db");
    assert_eq!(db.containers.len(), 1);
    assert_eq!(db.containers[0].name, "pg");
    assert!(db.containers[0].env.is_empty());
    // The earlier pod's restart_policy went with it: the default again.
    assert_eq!(db.restart_policy, RestartPolicy::Always);
}

#[test]
fn a_problem_set_by_a_drop_in_is_located_in_the_drop_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(
        dir.path(),
        BASE,
        &[(
            "50-bad.toml",
            "# breaks two keys\n[pods.web]\nrestart_policy = \"Sometimes\"\n\
             [[pods.web.containers]]\nname = \"app\"\nmax_restarts = -1\n",
        )],
    );
    let e = load(&file).expect_err("invalid");
    let drop_in = dir.path().join("vigil.toml.d/50-bad.toml");
    let got: Vec<String> = e.iter().map(|e| e.to_string()).collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with(&format!(
            "{}:3:18: pods.web.restart_policy: ",
            drop_in.display()
        )),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with(&format!(
            "{}:6:16: pods.web.containers[0].max_restarts: ",
            drop_in.display()
        )),
        "{got:#?}"
    );
}

#[test]
fn syntax_errors_of_every_file_are_reported_in_their_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(dir.path(), "a = [1,\n", &[("x.toml", "\n\n[pods\n")]);
    let e = load(&file).expect_err("invalid");
    let got: Vec<String> = e.iter().map(|e| e.to_string()).collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with(&format!("{}:", file.display())),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with(&format!("{}/vigil.toml.d/x.toml:3:", dir.path().display())),
        "{got:#?}"
    );
}

#[test]
fn a_bad_override_value_is_located() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(
        dir.path(),
        BASE,
        &[("o.toml", "[pods.db]\noverride = \"all\"\n")],
    );
    let e = load(&file).expect_err("invalid");
    assert_eq!(
        e.to_string(),
        format!(
            "{}/vigil.toml.d/o.toml:2:12: pods.db.override: expected \"merge\" or \"replace\"",
            dir.path().display()
        )
    );
}

#[test]
fn config_files_given_more_than_once_merge_in_order_each_with_its_drop_ins() {
    let one = tempfile::tempdir().expect("tempdir");
    let two = tempfile::tempdir().expect("tempdir");
    let first = layered(
        one.path(),
        BASE,
        &[("a.toml", "[supervisor]\nlog_max_files = 4\n")],
    );
    let second = layered(
        two.path(),
        "[supervisor]\nlog_max_files = 6\nshutdown_timeout_seconds = 2\n",
        &[("a.toml", "[supervisor]\nshutdown_timeout_seconds = 3\n")],
    );
    let c = load_source(&resolve_paths(vec![first.clone(), second])).expect("valid");
    assert_eq!(c.source, first);
    assert_eq!(c.supervisor.log_max_files, 6);
    assert_eq!(c.supervisor.shutdown_timeout, Duration::from_secs(3));
    assert_eq!(c.pods.len(), 2);
}

// ---- variables and relative paths (docs/interface.md §4.1) --------------------------------

#[test]
fn variables_come_from_the_environment_then_dot_env_and_relative_paths_from_the_writers_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join(".env"),
        "# beside vigil.toml\nDATA_DIR=/srv/data\nPATH=/not/the/environment\nPORT=8080\n",
    )
    .expect("write .env");
    let file = layered(
        dir.path(),
        "[[pods.db.containers]]\nname = \"db\"\n\
         command = [\"/bin/db\", \"--data\", \"${DATA_DIR}/db\", \"${PATH}\", \"$${LITERAL}\", \"${NOPE:-dflt}\"]\n\
         working_dir = \"run\"\nenv = { PORT = \"${PORT}\", socket = \"rel\" }\n",
        &[(
            "10-env.toml",
            "[[pods.db.containers]]\nname = \"db\"\nenv_file = \"db.env\"\n",
        )],
    );
    let c = load(&file).expect("valid");
    let db = &c.pods[0].containers[0];
    let path = std::env::var("PATH").expect("PATH is set");
    assert_eq!(
        db.command,
        [
            "/bin/db",
            "--data",
            "/srv/data/db",
            path.as_str(),
            "${LITERAL}",
            "dflt"
        ]
    );
    assert_eq!(
        db.working_dir.as_deref(),
        Some(dir.path().join("run").as_path())
    );
    assert_eq!(
        db.env_file.as_deref(),
        Some(dir.path().join("vigil.toml.d/db.env").as_path())
    );
    // A variable's name that looks like a path key is not a path.
    assert!(
        db.env.contains(&("socket".to_string(), "rel".to_string())),
        "{:?}",
        db.env
    );
    assert!(db.env.contains(&("PORT".to_string(), "8080".to_string())));
}

#[test]
fn an_unset_variable_is_located_at_its_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(
        dir.path(),
        "[[pods.db.containers]]\nname = \"db\"\n\
         command = [\"/bin/db\", \"--data\", \"${VIGIL_TEST_SURELY_UNSET_DIR}\"]\n\
         working_dir = \"${VIGIL_TEST_SURELY_UNSET_DIR:?where db runs}\"\n",
        &[],
    );
    let e = load(&file).expect_err("invalid");
    let got: Vec<String> = e.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        got,
        [
            format!(
                "{}:3:33: pods.db.containers[0].command[2]: ${{VIGIL_TEST_SURELY_UNSET_DIR}} is not set",
                file.display()
            ),
            format!(
                "{}:4:15: pods.db.containers[0].working_dir: ${{VIGIL_TEST_SURELY_UNSET_DIR}} is not set: where db runs",
                file.display()
            ),
        ]
    );
}

#[test]
fn env_files_replace_dot_env_are_relative_to_their_file_and_a_missing_one_is_located() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(".env"), "WHO=dot-env\n").expect("write");
    std::fs::write(dir.path().join("a.vars"), "WHO=a\nWHAT=a\n").expect("write");
    std::fs::write(dir.path().join("b.vars"), "WHO=b\n").expect("write");
    let pod = "[[pods.p.containers]]\nname = \"c\"\ncommand = [\"/bin/${WHO}-${WHAT}\"]\n";
    let file = layered(
        dir.path(),
        &format!(
            "[supervisor]\nenv_files = [\"a.vars\", \"{}/b.vars\"]\n{pod}",
            dir.path().display()
        ),
        &[],
    );
    let c = load(&file).expect("valid");
    assert_eq!(c.pods[0].containers[0].command, ["/bin/b-a"]);
    std::fs::write(
        &file,
        format!("[supervisor]\nenv_files = [\"a.vars\", \"gone.vars\"]\n{pod}"),
    )
    .expect("write");
    let e = load(&file).expect_err("invalid");
    let got = e.to_string();
    // (As root the trust check is first to find it missing.)
    assert!(
        got.starts_with(&format!(
            "{}:2:24: supervisor.env_files[1]: ",
            file.display()
        )) && got.contains(&format!("{}: ", dir.path().join("gone.vars").display()))
            && got.contains("No such file"),
        "{got}"
    );
}

#[test]
fn a_malformed_dot_env_is_refused_naming_it_and_the_line_without_the_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(".env"), "A=1\nsecret-value\n").expect("write");
    let file = layered(dir.path(), POD, &[]);
    let got = load(&file).expect_err("invalid").to_string();
    let env = dir.path().join(".env");
    assert_eq!(
        got,
        format!(
            "{}: .env: {}:2: expected KEY=VALUE (no '=' on this line)",
            env.display(),
            env.display()
        )
    );
}

#[test]
fn text_given_in_memory_is_taken_literally() {
    let c = ok(&format!("{POD}working_dir = \"/x/${{HOME}}$$\"\n"));
    assert_eq!(
        container(&c).working_dir.as_deref(),
        Some(Path::new("/x/${HOME}$$"))
    );
}

#[test]
fn a_manifest_run_over_a_config_gets_its_drop_ins_and_variables_and_stays_literal_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(".env"), "N=7\n").expect("write");
    let file = layered(
        dir.path(),
        "[supervisor]\nlog_max_files = 4\n",
        &[(
            "a.toml",
            "[supervisor]\nlog_max_files = 7\nsocket = \"/run/v${N}.sock\"\n",
        )],
    );
    let c = Sources::read_files(std::slice::from_ref(&file))
        .expect("read")
        .then_literal(
            Path::new("m.yaml"),
            "[[pods.m.containers]]\nname = \"c\"\ncommand = [\"/bin/${X}$$\"]\n".to_string(),
        )
        .check()
        .expect("valid");
    assert_eq!(c.source, file);
    assert_eq!(c.supervisor.log_max_files, 7);
    assert_eq!(
        c.supervisor.socket.as_deref(),
        Some(Path::new("/run/v7.sock"))
    );
    assert_eq!(c.pods[0].containers[0].command, ["/bin/${X}$$"]);
}

// ---- replicas ------------------------------------------------------------------------------

const REPLICATED: &str = r#"
[pods.web]
replicas = 3
[[pods.web.containers]]
name = "app"
command = ["/bin/app", "--port=80${replica}", "--price=$$5", "--home=${VIGIL_TEST_REPLICA_HOME:-/srv/${replica}}"]
working_dir = "data-${replica}"
env = { WHO = "${replica}", VIGIL_REPLICA = "mine" }
[pods.web.containers.readiness_probe]
exec = { command = ["/bin/check", "${replica}"] }

[pods.front]
depends_on = { web = "ready" }
[[pods.front.containers]]
name = "app"
command = ["/bin/front"]
"#;

#[test]
fn replicas_are_pods_named_after_their_index_with_replica_expanded_in_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(dir.path(), REPLICATED, &[]);
    let c = load(&file).expect("valid");
    let names: Vec<&str> = c.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["front", "web-0", "web-1", "web-2"]);
    let web1 = &c.pods[2];
    let app = &web1.containers[0];
    assert_eq!(
        app.command,
        ["/bin/app", "--port=801", "--price=$5", "--home=/srv/1"]
    );
    assert_eq!(app.working_dir, Some(dir.path().join("data-1")));
    let env: Vec<(&str, &str)> = app
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // The file's own VIGIL_REPLICA wins; VIGIL_POD_NAME is added.
    assert_eq!(
        env,
        [
            ("VIGIL_POD_NAME", "web-1"),
            ("VIGIL_REPLICA", "mine"),
            ("WHO", "1")
        ]
    );
    let probe = app.readiness_probe.as_ref().expect("probe");
    assert_eq!(
        probe.action,
        ProbeAction::Exec {
            command: vec!["/bin/check".into(), "1".into()]
        }
    );
    let replica = web1.replica.as_ref().expect("a replica");
    assert_eq!((replica.set.as_str(), replica.index), ("web", 1));
    let set = c.replica_set("web").expect("the set");
    assert_eq!((set.replicas, set.file_replicas), (3, 3));
    // The dependent names the set: every replica.
    assert_eq!(c.pods[0].depends_on[0].pod, "web");
    assert!(c.pods[1].answers_to("web") && !c.pods[0].answers_to("web"));
}

#[test]
fn a_replica_gets_its_pod_name_and_index_in_its_environment() {
    let c =
        ok("[pods.w]\nreplicas = 2\n[[pods.w.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n");
    let env = &c.pods[1].containers[0].env;
    assert!(env.contains(&("VIGIL_POD_NAME".to_string(), "w-1".to_string())));
    assert!(env.contains(&("VIGIL_REPLICA".to_string(), "1".to_string())));
}

#[test]
fn replica_outside_a_replicated_pod_is_refused_at_its_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = layered(
        dir.path(),
        "[[pods.db.containers]]\nname = \"db\"\ncommand = [\"/bin/db\", \"${replica}\"]\n",
        &[],
    );
    let e = load(&file).expect_err("invalid").to_string();
    assert!(
        e.contains(":3:23: pods.db.containers[0].command[1]: ${replica}: ${replica} is the index of a replica, set only in a pod with `replicas`"),
        "{e}"
    );
}

#[test]
fn replica_counts_out_of_range_are_refused_where_written() {
    let pod = |extra: &str| {
        format!(
            "[pods.web]\n{extra}\n[[pods.web.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n"
        )
    };
    one(
        &pod("replicas = 0"),
        "2:12: pods.web.replicas: ",
        "must be between 1 and 1000, got 0",
    );
    one(
        &pod("replicas = 1001"),
        "2:12: pods.web.replicas: ",
        "must be between 1 and 1000, got 1001",
    );
    one(
        &pod("replicas = 2\nmin_ready = 3"),
        "3:13: pods.web.min_ready: ",
        "min_ready (3) is more than replicas (2)",
    );
    one(
        &pod("min_ready = 1"),
        "2:13: pods.web.min_ready: ",
        "min_ready applies to a pod with replicas; add `replicas = N`",
    );
}

#[test]
fn rollout_keys_are_checked_where_written() {
    let pod = |extra: &str| {
        format!(
            "[pods.web]\n{extra}\n[[pods.web.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n"
        )
    };
    one(
        &pod("replicas = 2\nupdate = \"RollingUpdate\""),
        "3:10: pods.web.update: ",
        "invalid update \"RollingUpdate\"; expected recreate or rolling",
    );
    one(
        &pod("replicas = 2\nmax_unavailable = 0"),
        "3:19: pods.web.max_unavailable: ",
        "must be between 1 and 1000, got 0",
    );
    one(
        &pod("replicas = 2\nprogress_deadline_seconds = 0"),
        "3:29: pods.web.progress_deadline_seconds: ",
        "must be > 0 seconds, got 0",
    );
    one(
        &pod("update = \"rolling\""),
        "2:10: pods.web.update: ",
        "update applies to a pod with replicas; add `replicas = N`",
    );
}

#[test]
fn rollout_keys_reach_every_replica() {
    let c = ok(KITCHEN_SINK);
    let api = c.pods.iter().find(|p| p.name == "api-1").expect("api-1");
    let r = api.replica.as_ref().expect("a replica");
    assert_eq!(r.update, UpdateStrategy::Rolling);
    assert_eq!(r.max_unavailable, 2);
    assert_eq!(r.progress_deadline, Duration::from_secs(90));
}

#[test]
fn a_pod_named_like_a_replica_is_refused_at_its_name() {
    let text = "[pods.web]\nreplicas = 2\n[[pods.web.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n\
                [pods.web-7]\n[[pods.web-7.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n";
    one(
        text,
        "6:7: pods.web-7: ",
        "pod name \"web-7\" is taken by the replicas of pod \"web\"",
    );
}

#[test]
fn scaling_a_set_adds_or_removes_the_highest_replicas_and_keeps_the_rest() {
    let c = ok(
        "[pods.w]\nreplicas = 2\n[[pods.w.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n\
                [pods.x]\n[[pods.x.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n",
    );
    let up = c.scaled("w", 4).expect("scaled");
    let names: Vec<&str> = up.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["w-0", "w-1", "w-2", "w-3", "x"]);
    assert_eq!(up.pods[0], c.pods[0]);
    assert_eq!(
        up.replica_set("w").map(|s| (s.replicas, s.file_replicas)),
        Some((4, 2))
    );
    let down = up.scaled("w", 1).expect("scaled");
    let names: Vec<&str> = down.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["w-0", "x"]);
    assert!(c.scaled("x", 2).unwrap_err().contains("has no replicas"));
    assert!(c.scaled("w", 0).unwrap_err().contains("between 1 and 1000"));
}

#[test]
fn on_event_hooks_are_checked_and_each_problem_located() {
    let text = r#"[supervisor]

[[supervisor.on_event]]
reasons = ["Backoff", "OOMKilled", "EventHookFailed"]
type = "Fatal"
exec = ["/bin/true"]
retries = 2

[[supervisor.on_event]]
name = "web"
webhook = { url = "ftp://x/" }
user = "nobody"

[[supervisor.on_event]]
name = "both"
exec = ["/bin/true"]
webhook = { url = "http://127.0.0.1:1/" }

[[supervisor.on_event]]
pods = ["web"]

[[supervisor.on_event]]
name = "web"
webhook = { url = "http://h/", tls = { ca_file = "/etc/ca.pem" } }
max_concurrent = 0
queue_size = 10001
"#;
    let errs = errors(text);
    let expect = [
        (
            "4:12: supervisor.on_event[0].reasons[0]: ",
            "did you mean \"BackOff\"?",
        ),
        (
            "4:23: supervisor.on_event[0].reasons[1]: ",
            "OOMKilled is a termination reason",
        ),
        (
            "4:36: supervisor.on_event[0].reasons[2]: ",
            "a hook never triggers itself",
        ),
        (
            "5:8: supervisor.on_event[0].type: ",
            "expected \"Normal\" or \"Warning\"",
        ),
        (
            "7:11: supervisor.on_event[0].retries: ",
            "retries applies to a webhook only",
        ),
        (
            "11:19: supervisor.on_event[1].webhook.url: ",
            "invalid url \"ftp://x/\"",
        ),
        (
            "12:8: supervisor.on_event[1].user: ",
            "user applies to an exec hook only",
        ),
        (
            "14:1: supervisor.on_event[2]: ",
            "has both exec and webhook",
        ),
        ("19:1: supervisor.on_event[3]: ", "needs an action"),
        (
            "24:38: supervisor.on_event[4].webhook.tls: ",
            "tls applies to scheme = \"HTTPS\" only",
        ),
        (
            "25:18: supervisor.on_event[4].max_concurrent: ",
            "between 1 and 64",
        ),
        (
            "26:14: supervisor.on_event[4].queue_size: ",
            "between 0 and 10000",
        ),
    ];
    assert_eq!(errs.len(), expect.len(), "{errs:#?}");
    for ((prefix, msg), e) in expect.iter().zip(&errs) {
        assert_has(e, prefix, msg);
    }
    // Two valid hooks of one name: the second is refused at its name.
    let errs = errors(
        "[[supervisor.on_event]]\nname = \"a\"\nexec = [\"/bin/true\"]\n\
         [[supervisor.on_event]]\nname = \"a\"\nexec = [\"/bin/true\"]\n",
    );
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs[0],
        "5:8: supervisor.on_event[1].name: ",
        "another on_event hook is named \"a\"",
    );
}

#[test]
fn an_on_event_hook_takes_its_defaults_and_its_filter() {
    let c = ok(
        "[[supervisor.on_event]]\nreasons = [\"BackOff\"]\ntype = \"Warning\"\n\
         webhook = { url = \"https://hooks.test/in?a=1\", headers = { X-Token = \"t\" } }\n",
    );
    let h = &c.supervisor.on_event[0];
    assert_eq!(h.name, "on_event-0");
    assert_eq!(h.reasons, [crate::config::on_event::EventReason::BackOff]);
    assert_eq!(h.kind, Some(crate::config::on_event::EventKind::Warning));
    assert_eq!((h.max_concurrent, h.queue_size, h.retries), (1, 100, 3));
    assert_eq!(h.timeout, Duration::from_secs(10));
    let crate::config::on_event::OnEventAction::Webhook(w) = &h.action else {
        panic!("a webhook: {h:?}")
    };
    assert_eq!(
        (w.https, w.host.as_str(), w.port, w.path.as_str()),
        (true, "hooks.test", 443, "/in?a=1")
    );
    assert_eq!(w.headers, [("X-Token".to_string(), "t".to_string())]);
}
