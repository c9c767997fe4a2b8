//! The answers of the metrics listener's health checks, `GET /readyz` and `GET /healthz`
//! (`/livez`), in the Kubernetes API server's conventions (`k8s.io/apiserver/pkg/server/
//! healthz`, `handleRootHealth`): one check `ping` (the loop answered) and one per pod judged;
//! all passing is `200` with the body `ok`; `?verbose` lists every check, `[+]NAME ok`, and
//! ends `readyz check passed`; a failure is `500` listing the failed checks, `[-]NAME failed:
//! REASON` (with `?verbose` every check), and ends `readyz check failed`. `?pod=NAME` (repeated,
//! or `a,b`) judges those pods only; an unknown one is `404`. Without it the pods judged are
//! those expected to run, the others listed with `?verbose` as `[+]NAME excluded: ok`.
//!
//! Owns the verdict of a check from the pods' health (docs/behaviour.md §5.6) and its text.
//! The reason is the pod's state and what it is about (`CrashLoopBackOff (web/app)`), never
//! its message: anyone who can reach the listener reads it, and a message may carry a
//! container's output (`vigil health` on the socket gives it). Must not touch sockets.

use std::fmt::Write as _;

use super::http::{Check, Status};
use crate::core::PodHealth;

/// The status and body of `check` for the pods named (`pods`; none: those expected to run),
/// given the health of every pod (`all`).
pub fn answer(check: Check, all: &[PodHealth], pods: &[&str], verbose: bool) -> (Status, String) {
    let mut judged: Vec<(&PodHealth, bool)> = Vec::new();
    if pods.is_empty() {
        judged.extend(all.iter().map(|h| (h, h.expected)));
    } else {
        for name in pods {
            match all.iter().find(|h| h.name == *name) {
                Some(h) => judged.push((h, true)),
                None => {
                    let name = crate::format::cell(name);
                    return (Status::NotFound, format!("no pod named \"{name}\"\n"));
                }
            }
        }
    }
    let passes = |h: &PodHealth| match check {
        Check::Ready => h.state.healthy(),
        Check::Live => !h.state.broken(),
    };
    let failed = judged.iter().any(|(h, counted)| *counted && !passes(h));
    if !failed && !verbose {
        return (Status::Ok, "ok".to_string());
    }
    let mut body = String::new();
    if verbose {
        body.push_str("[+]ping ok\n");
    }
    for (h, counted) in &judged {
        if !counted {
            if verbose {
                let _ = writeln!(body, "[+]{} excluded: ok", h.name);
            }
        } else if passes(h) {
            if verbose {
                let _ = writeln!(body, "[+]{} ok", h.name);
            }
        } else if h.object == h.name {
            let _ = writeln!(body, "[-]{} failed: {}", h.name, h.state.as_str());
        } else {
            let _ = writeln!(
                body,
                "[-]{} failed: {} ({})",
                h.name,
                h.state.as_str(),
                h.object
            );
        }
    }
    let name = check.name();
    if failed {
        let _ = writeln!(body, "{name} check failed");
        (Status::InternalServerError, body)
    } else {
        let _ = writeln!(body, "{name} check passed");
        (Status::Ok, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::HealthState;

    fn pod(name: &str, state: HealthState, expected: bool) -> PodHealth {
        PodHealth {
            name: name.into(),
            expected,
            state,
            object: if state.healthy() {
                name.into()
            } else {
                format!("{name}/c")
            },
            message: "the message is never shown".into(),
            at_rest: false,
        }
    }

    fn pods() -> Vec<PodHealth> {
        vec![
            pod("web", HealthState::Ready, true),
            pod("job", HealthState::Completed, true),
            pod("slow", HealthState::NotReady, true),
            pod("later", HealthState::NotStarted, false),
        ]
    }

    #[test]
    fn readyz_fails_for_a_pod_not_ready_listing_it_and_passes_for_the_others() {
        let all = pods();
        let (status, body) = answer(Check::Ready, &all, &[], false);
        assert_eq!(status, Status::InternalServerError);
        assert_eq!(
            body,
            "[-]slow failed: NotReady (slow/c)\nreadyz check failed\n"
        );
        let (status, body) = answer(Check::Ready, &all, &[], true);
        assert_eq!(status, Status::InternalServerError);
        assert_eq!(
            body,
            "[+]ping ok\n[+]web ok\n[+]job ok\n[-]slow failed: NotReady (slow/c)\n\
             [+]later excluded: ok\nreadyz check failed\n"
        );
        assert_eq!(
            answer(Check::Ready, &all, &["web", "job"], false),
            (Status::Ok, "ok".to_string())
        );
        let (status, body) = answer(Check::Ready, &all, &["web"], true);
        assert_eq!(status, Status::Ok);
        assert_eq!(body, "[+]ping ok\n[+]web ok\nreadyz check passed\n");
        // Named, a pod left out is judged.
        assert_eq!(
            answer(Check::Ready, &all, &["later"], false).0,
            Status::InternalServerError
        );
        assert_eq!(
            answer(Check::Ready, &all, &["nope"], false).0,
            Status::NotFound
        );
    }

    #[test]
    fn healthz_fails_only_for_a_pod_that_will_not_get_better_by_waiting() {
        let mut all = pods();
        assert_eq!(answer(Check::Live, &all, &[], false).0, Status::Ok);
        all.push(pod("crash", HealthState::CrashLoopBackOff, true));
        let (status, body) = answer(Check::Live, &all, &[], false);
        assert_eq!(status, Status::InternalServerError);
        assert_eq!(
            body,
            "[-]crash failed: CrashLoopBackOff (crash/c)\nhealthz check failed\n"
        );
        assert!(!body.contains("message"));
    }
}
