//! `replicas` and the keys that go with it (`min_ready`, `update`, `max_unavailable`,
//! `progress_deadline_seconds`): ranges, the names the replicas will have, and the split of a
//! replicated pod into its set (the template) and its replicas (`config::replicas`).

use std::collections::BTreeMap;

use toml::Spanned;

use super::{Checker, span};
use crate::config::keys::RawPod;
use crate::config::replicas::collides;
use crate::config::schema::join;
use crate::config::spec::{
    DEFAULT_PROGRESS_DEADLINE, MAX_REPLICAS, PodSpec, Replica, ReplicaSetSpec, UpdateStrategy,
};

/// The longest name a pod with replicas may have: its last possible replica,
/// `NAME-999`, must still be a valid pod name (63 characters).
const MAX_SET_NAME: usize = 63 - 1 - 3;

impl Checker<'_> {
    /// A replicated pod's count and set keys (into `spec.replica`, the template's), or `None`
    /// for a pod without `replicas` — whose set keys, if written, are refused.
    pub(super) fn replica_keys(
        &mut self,
        name: &Spanned<String>,
        raw: &RawPod,
        spec: &mut PodSpec,
    ) -> Option<u32> {
        let path = join("pods", name.get_ref());
        let Some(count) = &raw.replicas else {
            let set_keys = [
                ("min_ready", raw.min_ready.as_ref().map(span)),
                ("update", raw.update.as_ref().map(span)),
                ("max_unavailable", raw.max_unavailable.as_ref().map(span)),
                (
                    "progress_deadline_seconds",
                    raw.progress_deadline_seconds.as_ref().map(span),
                ),
            ];
            for (key, at) in set_keys {
                if let Some(at) = at {
                    self.err(
                        at,
                        &join(&path, key),
                        format!("{key} applies to a pod with replicas; add `replicas = N`"),
                    );
                }
            }
            return None;
        };
        let count_field = join(&path, "replicas");
        let count = self.int(count, &count_field, 1, i64::from(MAX_REPLICAS));
        if name.get_ref().len() > MAX_SET_NAME {
            self.err(
                span(name),
                &path,
                format!(
                    "a pod with replicas may have a name of at most {MAX_SET_NAME} characters \
                     (its replicas are named {}-0 … {}-{})",
                    name.get_ref(),
                    name.get_ref(),
                    MAX_REPLICAS - 1
                ),
            );
        }
        let min_ready = raw.min_ready.as_ref().and_then(|v| {
            let k = self.int(v, &join(&path, "min_ready"), 1, i64::from(MAX_REPLICAS))?;
            let k = u32::try_from(k).ok()?;
            if let Some(n) = count
                && i64::from(k) > n
            {
                self.err(
                    span(v),
                    &join(&path, "min_ready"),
                    format!("min_ready ({k}) is more than replicas ({n})"),
                );
            }
            Some(k)
        });
        let update =
            raw.update
                .as_ref()
                .map_or(UpdateStrategy::default(), |v| match v.get_ref().as_str() {
                    "recreate" => UpdateStrategy::Recreate,
                    "rolling" => UpdateStrategy::Rolling,
                    other => {
                        self.err(
                            span(v),
                            &join(&path, "update"),
                            format!("invalid update {other:?}; expected recreate or rolling"),
                        );
                        UpdateStrategy::default()
                    }
                });
        let max_unavailable = raw.max_unavailable.as_ref().map_or(1, |v| {
            let field = join(&path, "max_unavailable");
            let k = self.int(v, &field, 1, i64::from(MAX_REPLICAS));
            k.and_then(|k| u32::try_from(k).ok()).unwrap_or(1)
        });
        let progress_deadline = self.opt_seconds(
            &raw.progress_deadline_seconds,
            &join(&path, "progress_deadline_seconds"),
            true,
            DEFAULT_PROGRESS_DEADLINE,
        );
        spec.replica = Some(Replica {
            set: name.get_ref().clone(),
            index: 0,
            min_ready,
            update,
            max_unavailable,
            progress_deadline,
        });
        count.and_then(|n| u32::try_from(n).ok())
    }

    /// Pods named like a replica of a replicated pod (`web-0` beside `web` with replicas).
    pub(super) fn replica_names(&mut self, raw: &BTreeMap<Spanned<String>, Spanned<RawPod>>) {
        let sets: Vec<&str> = raw
            .iter()
            .filter(|(_, p)| p.get_ref().replicas.is_some())
            .map(|(n, _)| n.get_ref().as_str())
            .collect();
        for name in raw.keys() {
            if let Some(set) = sets.iter().find(|s| collides(s, name.get_ref())) {
                self.err(
                    span(name),
                    &join("pods", name.get_ref()),
                    format!(
                        "pod name {:?} is taken by the replicas of pod {set:?} ({set}-0, \
                         {set}-1, …; `vigil scale` may add any number): rename one of them",
                        name.get_ref()
                    ),
                );
            }
        }
    }

    /// The replicated pods of `pods` (counts in `counts`, by index) made into their sets, each
    /// followed in the list by its replicas in place of the template.
    pub(super) fn split_replicas(
        &mut self,
        pods: Vec<PodSpec>,
        counts: &[Option<u32>],
        spans: &[std::ops::Range<usize>],
    ) -> (Vec<PodSpec>, Vec<ReplicaSetSpec>) {
        let mut out = Vec::new();
        let mut sets = Vec::new();
        for ((template, count), at) in pods.into_iter().zip(counts).zip(spans) {
            let Some(count) = count else {
                out.push(template);
                continue;
            };
            let set = ReplicaSetSpec {
                name: template.name.clone(),
                replicas: *count,
                file_replicas: *count,
                template,
            };
            match set.replicas() {
                Ok(replicas) => out.extend(replicas),
                Err(message) => {
                    let field = join(&join("pods", &set.name), "replicas");
                    self.err(at.clone(), &field, message);
                }
            }
            sets.push(set);
        }
        (out, sets)
    }
}
