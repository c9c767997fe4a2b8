//! Scheduled pods against a real supervisor (docs/behaviour.md §6.6): `vigil trigger` runs one
//! now, `vigil status` and `describe` show its schedule, and `trigger` needs an admin.

use std::time::Duration;

use crate::common::{BIN, Vigil};

const T: Duration = Duration::from_secs(20);

/// `nightly`: once a year at 02:00 on 1 January (never during a test), in UTC.
const NIGHTLY: &str = r#"
[pods.nightly]
restart_policy = "OnFailure"
schedule = { cron = "0 2 1 1 *", time_zone = "UTC" }
[[pods.nightly.containers]]
name = "import"
command = ["sh", "-c", "echo imported"]
"#;

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn trigger_runs_a_scheduled_pod_now_and_status_and_describe_show_its_schedule() {
    let v = Vigil::start(NIGHTLY);
    // Before any run: LAST SCHEDULE <none>, the next run in months.
    v.wait_for(T, "the schedule's next run", |v| {
        v.pod("nightly")["schedule"]["next_run"].is_string()
    });
    let (out, _) = text(&v.cli(&["status"]));
    let table: Vec<&str> = out.lines().collect();
    let at = table
        .iter()
        .position(|l| l.starts_with("NAME") && l.contains("LAST SCHEDULE"))
        .unwrap_or_else(|| panic!("no schedule table:\n{out}"));
    assert!(
        table[at].contains("SCHEDULE") && table[at].ends_with("NEXT RUN"),
        "{out}"
    );
    let row = table[at + 1];
    assert!(
        row.starts_with("nightly") && row.contains("0 2 1 1 *"),
        "{row}"
    );
    assert!(row.contains("<none>") && row.contains(" in "), "{row}");
    // `vigil trigger`: a run now, as kubectl create job --from=cronjob/… makes one.
    let out = v.cli(&["trigger", "nightly"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, "triggered a run of pod nightly\n");
    v.wait_for(T, "the triggered run to complete", |v| {
        v.pod("nightly")["phase"] == "Succeeded"
    });
    assert!(text(&v.cli(&["logs", "nightly"])).0.contains("imported"));
    let (events, _) = text(&v.cli(&["events", "nightly"]));
    assert!(
        events.contains("Started a run by request (trigger)"),
        "{events}"
    );
    // describe: kubectl describe cronjob's lines.
    let (describe, _) = text(&v.cli(&["describe", "nightly"]));
    for line in [
        "Schedule:",
        "0 2 1 1 * (UTC)",
        "Concurrency Policy:",
        "Forbid",
        "Suspend:",
        "Last Schedule Time:",
        "Next Schedule Time:",
    ] {
        assert!(describe.contains(line), "{line} in\n{describe}");
    }
    // A pod that names none is not_found; one under way is refused.
    let (_, err) = text(&v.cli(&["trigger", "nightlyy"]));
    assert!(err.contains("no pod named \"nightlyy\""), "{err}");
}

#[test]
#[ignore = "needs root (the client runs as nobody)"]
fn trigger_needs_an_admin() {
    crate::common::require_root("the client runs as nobody");
    crate::common::require_program("setpriv", "--version", "util-linux");
    let v = Vigil::start_shared("", NIGHTLY);
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            BIN,
        ])
        .args(["trigger", "nightly", "--socket"])
        .arg(&v.socket)
        .output()
        .expect("setpriv");
    assert_eq!(out.status.code(), Some(1));
    let (_, err) = text(&out);
    assert!(
        err.contains("trigger needs root") && err.contains("uid 65534"),
        "{err}"
    );
    assert!(
        v.log().contains("refused trigger from pid"),
        "denial is logged"
    );
    assert_eq!(v.pod("nightly")["phase"], "Pending", "nothing ran");
}
