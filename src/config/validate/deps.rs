//! `depends_on` between pods: the named pod exists, the condition can hold
//! (`service_completed_successfully` needs a pod that completes), and no cycles.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use toml::Spanned;

use super::{Checker, span};
use crate::config::error::Problem;
use crate::config::keys::RawPod;
use crate::config::raw::RawDependency;
use crate::config::schema::join;
use crate::config::spec::{Dependency, DependencyCondition, PodSpec};
use crate::config::values;

impl Checker<'_> {
    pub(super) fn dependencies(
        &mut self,
        raw: &BTreeMap<Spanned<String>, Spanned<RawPod>>,
        pods: &mut [PodSpec],
    ) {
        let names: BTreeSet<&str> = raw.keys().map(|k| k.get_ref().as_str()).collect();
        // Valid edges, for cycle detection: pod → [(target, span of the key naming it)].
        let mut edges: BTreeMap<&str, Vec<(&str, Range<usize>)>> = BTreeMap::new();
        for ((name, pod), spec) in raw.iter().zip(pods.iter_mut()) {
            let me = name.get_ref().as_str();
            let path = join(&join("pods", me), "depends_on");
            for (target, cond) in pod.get_ref().depends_on.iter().flatten() {
                let t = target.get_ref().as_str();
                let field = join(&path, t);
                let (text, restart, stop) = match cond.get_ref() {
                    RawDependency::Condition(c) => (Some(c.as_str()), false, false),
                    RawDependency::Table(d) => (
                        d.condition.as_deref(),
                        d.restart.unwrap_or(false),
                        d.stop.unwrap_or(false),
                    ),
                };
                let condition = match text {
                    Some("started") => Some(DependencyCondition::Started),
                    Some("ready") => Some(DependencyCondition::Ready),
                    Some("completed") => Some(DependencyCondition::Completed),
                    Some(other) => {
                        self.err(
                            span(cond),
                            &field,
                            format!(
                                "invalid condition {other:?}; expected started, ready or completed"
                            ),
                        );
                        None
                    }
                    None => {
                        self.err(
                            span(cond),
                            &field,
                            "missing condition: write { condition = \"ready\", … } (or \"started\", \"completed\")",
                        );
                        None
                    }
                };
                // A job's end is not a state to follow: `completed` happens once per run.
                if condition == Some(DependencyCondition::Completed) && (restart || stop) {
                    self.err(
                        span(cond),
                        &field,
                        "restart and stop follow a running dependency: they apply to the \
                         conditions started and ready, not completed",
                    );
                }
                if t == me {
                    self.err(span(target), &field, "a pod cannot depend on itself");
                    continue;
                }
                if !names.contains(t) {
                    let hint = values::closest_name(t, names.iter().copied())
                        .map(|n| format!("; did you mean {n:?}?"))
                        .unwrap_or_default();
                    self.err(
                        span(target),
                        &field,
                        format!("depends on unknown pod {t:?}{hint}"),
                    );
                    continue;
                }
                edges.entry(me).or_default().push((t, span(target)));
                let Some(condition) = condition else { continue };
                if condition == DependencyCondition::Completed
                    && let Some(forever) = self.never_completes(raw, t)
                {
                    self.err(span(cond), &field, forever);
                }
                spec.depends_on.push(Dependency {
                    pod: t.to_string(),
                    condition,
                    restart,
                    stop,
                });
            }
        }
        self.cycles(&names, &edges);
    }

    /// Why pod `name` can never reach Succeeded (a container restarts on success), if so.
    pub(super) fn never_completes(
        &self,
        raw: &BTreeMap<Spanned<String>, Spanned<RawPod>>,
        name: &str,
    ) -> Option<String> {
        let (_, pod) = raw.iter().find(|(k, _)| k.get_ref() == name)?;
        let pod = pod.get_ref();
        let pod_policy = pod.restart_policy.as_ref().map(|p| p.get_ref().as_str());
        for c in pod.containers.iter().flatten() {
            let c = c.get_ref();
            let policy = c
                .restart_policy
                .as_ref()
                .map(|p| p.get_ref().as_str())
                .or(pod_policy)
                .unwrap_or("Always");
            if policy == "Always" {
                let cname = c.name.as_ref().map_or("?", |n| n.get_ref().as_str());
                return Some(format!(
                    "pod {name:?} can never complete: its container {cname:?} has restart_policy Always"
                ));
            }
        }
        None
    }

    /// Report each dependency cycle once, as `a -> b -> a`, at the edge that closes it.
    pub(super) fn cycles(
        &mut self,
        names: &BTreeSet<&str>,
        edges: &BTreeMap<&str, Vec<(&str, Range<usize>)>>,
    ) {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnStack,
            Done,
        }
        let mut marks: BTreeMap<&str, Mark> = names.iter().map(|n| (*n, Mark::New)).collect();
        let mut found: Vec<Problem> = Vec::new();
        fn visit<'a>(
            n: &'a str,
            edges: &BTreeMap<&'a str, Vec<(&'a str, Range<usize>)>>,
            marks: &mut BTreeMap<&'a str, Mark>,
            stack: &mut Vec<&'a str>,
            found: &mut Vec<Problem>,
        ) {
            marks.insert(n, Mark::OnStack);
            stack.push(n);
            for (t, sp) in edges.get(n).into_iter().flatten() {
                match marks.get(t).copied().unwrap_or(Mark::Done) {
                    Mark::New => visit(t, edges, marks, stack, found),
                    Mark::OnStack => {
                        let start = stack.iter().position(|s| s == t).unwrap_or(0);
                        let mut cycle: Vec<&str> = stack[start..].to_vec();
                        cycle.push(t);
                        found.push(Problem::new(
                            sp.clone(),
                            join(&join(&join("pods", n), "depends_on"), t),
                            format!("dependency cycle: {}", cycle.join(" -> ")),
                        ));
                    }
                    Mark::Done => {}
                }
            }
            stack.pop();
            marks.insert(n, Mark::Done);
        }
        for n in names {
            if marks.get(n) == Some(&Mark::New) {
                visit(n, edges, &mut marks, &mut Vec::new(), &mut found);
            }
        }
        self.out.extend(found);
    }
}
