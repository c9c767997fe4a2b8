//! Replicas: a pod with `replicas = N` runs as the pods `NAME-0` … `NAME-{N-1}`
//! (StatefulSet-style names, Kubernetes `pkg/controller/statefulset` `getPodName`), each made
//! from the pod as written.
//!
//! Owns turning a [`ReplicaSetSpec`]'s template into one replica's [`PodSpec`]: `${replica}`
//! expanded in every string (the template's strings are `config::interpolate`'s output in its
//! `Kept` mode: a literal `$` is `$$` there), the replica's name, and `VIGIL_POD_NAME` and
//! `VIGIL_REPLICA` added to every container's environment. Pure: no I/O.

use std::sync::Arc;

use super::interpolate::{REPLICA_VAR, expand};
use super::spec::{Config, ContainerSpec, PodSpec, Replica, ReplicaSetSpec};

/// The environment variable holding a replica's pod name (`web-2`).
pub const ENV_POD_NAME: &str = "VIGIL_POD_NAME";
/// The environment variable holding a replica's index (`2`).
pub const ENV_REPLICA: &str = "VIGIL_REPLICA";

/// `web-2`: the name of replica `index` of the set `set`.
pub fn replica_name(set: &str, index: u32) -> String {
    format!("{set}-{index}")
}

/// Whether `pod` is a name a replica of `set` would have (`web-0`, `web-17`): a pod of its
/// own by that name would collide with one, now or after a `vigil scale`.
pub fn collides(set: &str, pod: &str) -> bool {
    pod.strip_prefix(set)
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl ReplicaSetSpec {
    /// Replica `index`: the template with `${replica}` expanded, named `NAME-index`, with the
    /// two variables in each container's environment (unless its `env` sets them itself).
    /// `Err` says what could not be expanded (nothing the validator let through).
    pub fn replica(&self, index: u32) -> Result<PodSpec, String> {
        let name = replica_name(&self.name, index);
        let number = index.to_string();
        let mut value =
            serde_json::to_value(&self.template).map_err(|e| format!("pod {}: {e}", self.name))?;
        // The set's own keys are not templates (`name`, `replica` are set below).
        expand_strings(&mut value, &number)?;
        let mut pod: PodSpec = serde_json::from_value(value)
            .map_err(|e| format!("replica {name} of pod {}: {e}", self.name))?;
        let own = |c: &Arc<ContainerSpec>| {
            let mut c = ContainerSpec::clone(c);
            for (key, value) in [(ENV_POD_NAME, &name), (ENV_REPLICA, &number)] {
                if let Err(at) = c.env.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
                    c.env.insert(at, (key.to_string(), value.clone()));
                }
            }
            Arc::new(c)
        };
        pod.init_containers = pod.init_containers.iter().map(own).collect();
        pod.containers = pod.containers.iter().map(own).collect();
        pod.name = name;
        pod.replica = Some(Replica {
            set: self.name.clone(),
            index,
            ..self.keys()
        });
        Ok(pod)
    }

    /// The replicas `0..self.replicas`.
    pub fn replicas(&self) -> Result<Vec<PodSpec>, String> {
        (0..self.replicas).map(|i| self.replica(i)).collect()
    }

    /// The set's keys each replica carries (`min_ready`, `update`, …), from the template.
    fn keys(&self) -> Replica {
        self.template.replica.clone().unwrap_or(Replica {
            set: self.name.clone(),
            index: 0,
            min_ready: None,
            update: Default::default(),
            max_unavailable: 1,
            progress_deadline: super::spec::DEFAULT_PROGRESS_DEADLINE,
        })
    }
}

/// Every string in `value` expanded for replica `number`.
fn expand_strings(value: &mut serde_json::Value, number: &str) -> Result<(), String> {
    use serde_json::Value;
    match value {
        Value::String(s) if s.contains('$') => {
            *s = expand(s, |n| (n == REPLICA_VAR).then(|| number.to_string()))?;
        }
        Value::Array(items) => {
            for item in items {
                expand_strings(item, number)?;
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if key != "name" && key != "replica" {
                    expand_strings(item, number)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

impl Config {
    /// The set named `name`, if the config has one.
    pub fn replica_set(&self, name: &str) -> Option<&ReplicaSetSpec> {
        self.replica_sets.iter().find(|s| s.name == name)
    }

    /// The config with the set `name` at `count` replicas: its pods `NAME-0` … in place of
    /// the ones it had, the others untouched. `Err` names what is wrong (no such set, a count
    /// out of range).
    pub fn scaled(&self, name: &str, count: u32) -> Result<Config, String> {
        let max = super::spec::MAX_REPLICAS;
        if !(1..=max).contains(&count) {
            return Err(format!(
                "replicas must be between 1 and {max}, got {count} (to stop every replica, \
                 `vigil stop` each)"
            ));
        }
        let Some(at) = self.replica_sets.iter().position(|s| s.name == name) else {
            return Err(format!("pod {name:?} has no replicas"));
        };
        let mut config = self.clone();
        config.replica_sets[at].replicas = count;
        let set = &config.replica_sets[at];
        let mut fresh = set.replicas()?;
        // Replicas kept are the very definitions they were (an upgrade's interned `Arc`s).
        for pod in &mut fresh {
            if let Some(old) = self.pods.iter().find(|p| p.name == pod.name) {
                pod.clone_from(old);
            }
        }
        config
            .pods
            .retain(|p| p.replica.as_ref().is_none_or(|r| r.set != name));
        config.pods.extend(fresh);
        config.pods.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(config)
    }
}

/// A set's count as `vigil scale` left it, and the file's count it was scaled from: what a
/// reload, and a vigil started again after a crash, keep (docs/behaviour.md §14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetScale {
    pub set: String,
    pub replicas: u32,
    pub file_replicas: u32,
}

impl Config {
    /// The sets whose count is not the file's (a `vigil scale` changed it), by name.
    pub fn scales(&self) -> Vec<SetScale> {
        (self.replica_sets.iter())
            .filter(|s| s.replicas != s.file_replicas)
            .map(|s| SetScale {
                set: s.name.clone(),
                replicas: s.replicas,
                file_replicas: s.file_replicas,
            })
            .collect()
    }

    /// This config (just loaded by a reload) with each set kept at the count the running
    /// config has, where `vigil scale` changed it and the file's `replicas` has not changed
    /// since: a reload applies a new count written in the file, and leaves a scale alone
    /// otherwise.
    pub fn keeping_scale_of(self, running: &Config) -> Config {
        self.keeping_scales(&running.scales())
    }

    /// This config (just loaded) with each set of `scales` at its scaled count, where the
    /// file's `replicas` is still the count it was scaled from (else the file's count wins);
    /// a set the config no longer has, or a count out of range, is passed over.
    pub fn keeping_scales(mut self, scales: &[SetScale]) -> Config {
        for old in scales {
            let Some(new) = self.replica_set(&old.set) else {
                continue;
            };
            if new.file_replicas == old.file_replicas
                && new.replicas != old.replicas
                && let Ok(scaled) = self.scaled(&old.set, old.replicas)
            {
                self = scaled;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_a_number_after_the_sets_name_collides_with_a_replica() {
        assert!(collides("web", "web-0"));
        assert!(collides("web", "web-12"));
        assert!(!collides("web", "web-"));
        assert!(!collides("web", "web-a"));
        assert!(!collides("web", "web0"));
        assert!(!collides("web", "webs-0"));
        assert!(!collides("web", "web"));
    }

    fn with_count(n: u32) -> Config {
        let text = format!(
            "[pods.w]\nreplicas = {n}\n[[pods.w.containers]]\nname = \"a\"\ncommand = [\"/bin/a\"]\n"
        );
        match crate::config::load_str(&text, std::path::Path::new("t.toml")) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_reload_keeps_a_scale_unless_the_files_count_changed() {
        let running = with_count(2).scaled("w", 5).expect("scaled");
        // The file still says 2: the scale stays.
        let kept = with_count(2).keeping_scale_of(&running);
        assert_eq!(kept.pods.len(), 5);
        assert_eq!(kept.replica_set("w").map(|s| s.replicas), Some(5));
        // The file now says 3: the file wins.
        let changed = with_count(3).keeping_scale_of(&running);
        assert_eq!(changed.pods.len(), 3);
        assert_eq!(
            changed
                .replica_set("w")
                .map(|s| (s.replicas, s.file_replicas)),
            Some((3, 3))
        );
    }

    #[test]
    fn a_recorded_scale_is_kept_while_the_files_count_is_the_one_it_was_scaled_from() {
        let running = with_count(2).scaled("w", 5).expect("scaled");
        let recorded = running.scales();
        assert_eq!(
            recorded,
            [SetScale {
                set: "w".to_string(),
                replicas: 5,
                file_replicas: 2
            }]
        );
        let kept = with_count(2).keeping_scales(&recorded);
        assert_eq!(kept.pods.len(), 5);
        assert_eq!(kept.pods[4].name, "w-4");
        // Scaled again from the restarted config, it still knows the file's count.
        assert_eq!(kept.scales(), recorded);
        // The file changed its count meanwhile: the file's.
        assert_eq!(with_count(4).keeping_scales(&recorded).pods.len(), 4);
        // A scale back to the file's count is no scale.
        assert!(running.scaled("w", 2).expect("scaled").scales().is_empty());
        // Out of range (a hand-edited state file): passed over.
        let wild = [SetScale {
            set: "w".to_string(),
            replicas: 5000,
            file_replicas: 2,
        }];
        assert_eq!(with_count(2).keeping_scales(&wild).pods.len(), 2);
    }
}
