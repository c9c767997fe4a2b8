//! Read-only views of the supervisor: pod snapshots for status, metrics and the journal, the
//! event log, and the names and keys of containers.
//!
//! Owns answering questions. Must not change anything (every method takes `&self`, except the
//! event history's id, set once at start).

use super::*;

impl Supervisor {
    /// Snapshot of every pod, in config order (pods still stopping after a reload removed
    /// them come last).
    pub fn pods(&self) -> Vec<PodStatus> {
        self.pods.iter().map(|p| self.status_of(p)).collect()
    }

    /// The names of every pod, in [`Supervisor::pods`]' order (a metrics scrape built over
    /// several turns walks them with [`Supervisor::pod_at`]).
    pub fn pod_names(&self) -> Vec<String> {
        self.pods.iter().map(|p| p.name().to_string()).collect()
    }

    /// Snapshot of the pod at `index` in [`Supervisor::pods`]' order, if it is named `name`
    /// (pods may come and go between turns: a reload), else of the pod named `name`.
    pub fn pod_at(&self, index: usize, name: &str) -> Option<PodStatus> {
        match self.pods.get(index) {
            Some(p) if p.name() == name => Some(self.status_of(p)),
            _ => self.pod(name),
        }
    }

    /// The replicas of the pod with replicas `set`, by index (none when `set` is no such
    /// set, or is itself a pod's name: a pod's own name wins). Replicas a reload or a scale
    /// is removing are not among them.
    pub fn replicas_of(&self, set: &str) -> Vec<String> {
        if self.pods.iter().any(|p| p.name() == set) {
            return Vec::new();
        }
        let mut of: Vec<(u32, String)> = (self.pods.iter())
            .filter(|p| p.next != Next::Remove)
            .filter_map(|p| {
                let r = p.spec.replica.as_ref().filter(|r| r.set == set)?;
                Some((r.index, p.name().to_string()))
            })
            .collect();
        of.sort();
        of.into_iter().map(|(_, name)| name).collect()
    }

    /// Snapshot of one pod.
    pub fn pod(&self, name: &str) -> Option<PodStatus> {
        (self.pods.iter())
            .find(|p| p.name() == name)
            .map(|p| self.status_of(p))
    }

    /// The health of every pod, in [`Supervisor::pods`]' order (docs/behaviour.md §5.6).
    pub fn health(&self) -> Vec<PodHealth> {
        self.pods.iter().map(super::super::health::judge).collect()
    }

    /// The health of the pod named `name`.
    pub fn pod_health(&self, name: &str) -> Option<PodHealth> {
        (self.pods.iter())
            .find(|p| p.name() == name)
            .map(super::super::health::judge)
    }

    /// The pods a health check judges (docs/behaviour.md §5.6): those named, in the order
    /// named (a name that names no pod is the error), else every pod expected to run.
    pub fn health_of(&self, names: &[String]) -> Result<Vec<PodHealth>, String> {
        if names.is_empty() {
            let mut all = self.health();
            all.retain(|h| h.expected);
            return Ok(all);
        }
        names
            .iter()
            .map(|n| self.pod_health(n).ok_or_else(|| n.clone()))
            .collect()
    }

    /// Events with `seq > after`, oldest first.
    pub fn events_since(&self, after: u64) -> Vec<Event> {
        self.events.since(after)
    }

    /// The newest event `seq` (0 before any event): a follower starts from here.
    pub fn last_event_seq(&self) -> u64 {
        self.events.last_seq()
    }

    /// A fresh vigil's event history begins, named `id` (unique per start of vigil): what
    /// a follower resumes by, with a `seq` (see `events.rs`). An upgrade's core keeps its own.
    pub fn begin_event_history(&mut self, id: u64) {
        self.events.begin_history(id);
    }

    /// The event history's id (0 when none was begun).
    pub fn event_history(&self) -> u64 {
        self.events.history()
    }

    /// Where a follower that last saw `seq` of history `history` resumes.
    pub fn resume_events(&self, history: u64, seq: u64) -> crate::core::events::Resume {
        self.events.resume(history, seq)
    }

    /// Whether a shutdown has begun (new starts and restarts are refused).
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_some()
    }

    /// `(pod, container)` names of a key, for logs and messages.
    pub fn container_name(&self, key: ContainerKey) -> Option<(String, String)> {
        let loc = self.locate(key)?;
        let pod = &self.pods[loc.pod];
        let slot = loc.slot(pod);
        Some((pod.name().to_string(), slot.name().to_string()))
    }

    /// The key of `pod/container` (init or regular), if it exists.
    pub fn container_key(&self, pod: &str, container: &str) -> Option<ContainerKey> {
        self.pods
            .iter()
            .find(|p| p.name() == pod)?
            .slots()
            .find(|s| s.name() == container)
            .map(|s| s.key)
    }

    /// The restart count of `key`'s container (recorded by the runtime so that a vigil
    /// restarted after a crash can adopt the container with it).
    pub fn restart_count(&self, key: ContainerKey) -> Option<u32> {
        let loc = self.locate(key)?;
        let pod = &self.pods[loc.pod];
        let slot = loc.slot(pod);
        Some(slot.restart_count)
    }
}

impl Supervisor {
    /// Whether `key`'s run `generation` still waits for its `ready_log_line` (it has one, the
    /// run is the current one and no line matched yet): a run handed over by `vigil upgrade`
    /// is matched on by the new instance only then (docs/behaviour.md §4.5).
    pub fn awaits_ready_line(&self, key: ContainerKey, generation: Generation) -> bool {
        let Some(loc) = self.locate(key) else {
            return false;
        };
        let slot = loc.slot(&self.pods[loc.pod]);
        slot.awaits_ready_line(generation)
    }
}

impl Supervisor {
    /// Whether the pod `pod` is a replica of the pod with replicas `set` (an `on_event`
    /// hook's `pods` filter naming the set; docs/behaviour.md §5.7). A pod gone already (a
    /// replica scaled away) is one when `set` still has replicas: no other pod may bear a name
    /// of a replica of a set (`config::replicas::collides`).
    pub fn is_replica_of(&self, pod: &str, set: &str) -> bool {
        let of_set = |p: &Pod| p.spec.replica.as_ref().is_some_and(|r| r.set == set);
        match self.pods.iter().find(|p| p.name() == pod) {
            Some(p) => of_set(p),
            None => self.pods.iter().any(of_set),
        }
    }
}
