//! Builders for specs and a driver for the supervisor in virtual time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::config::spec::*;
use crate::core::*;

pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

pub fn container(name: &str) -> ContainerSpec {
    ContainerSpec::new(name, &["/bin/app"])
}

pub fn with_policy(mut c: ContainerSpec, p: RestartPolicy) -> ContainerSpec {
    c.restart_policy = p;
    c
}

pub fn probe(period: f64) -> ProbeSpec {
    ProbeSpec {
        action: ProbeAction::Exec {
            command: vec!["check".to_string()],
        },
        initial_delay: Duration::ZERO,
        period: secs(period),
        timeout: Duration::from_secs(1),
        success_threshold: 1,
        failure_threshold: 3,
        termination_grace: None,
    }
}

/// Specs as a pod holds them (each shared, `Arc`).
pub fn shared(v: Vec<ContainerSpec>) -> Vec<std::sync::Arc<ContainerSpec>> {
    v.into_iter().map(std::sync::Arc::new).collect()
}

pub fn pod(name: &str, containers: Vec<ContainerSpec>) -> PodSpec {
    let policy = containers
        .first()
        .map(|c| c.restart_policy)
        .unwrap_or_default();
    PodSpec {
        name: name.to_string(),
        restart_policy: policy,
        depends_on: Vec::new(),
        init_containers: Vec::new(),
        termination_grace: containers
            .iter()
            .map(|c| c.termination_grace)
            .max()
            .unwrap_or_default(),
        containers: shared(containers),
        shutdown_on: None,
        active_deadline: None,
        schedule: None,
        history: Default::default(),
        autostart: true,
        profiles: Vec::new(),
        replica: None,
        stable_identity: false,
    }
}

pub fn config(pods: Vec<PodSpec>) -> Config {
    Config {
        source: PathBuf::from("vigil.toml"),
        supervisor: SupervisorSpec::default(),
        pods,
        replica_sets: Vec::new(),
        pod_files: Vec::new(),
    }
}

/// Drives a [`Supervisor`] in virtual time and remembers every action it emitted.
pub struct Harness {
    pub sup: Supervisor,
    pub t0: Instant,
    pub now: Instant,
    /// Actions drained since the last `take()`.
    pub pending: Vec<Action>,
    gens: HashMap<ContainerKey, Generation>,
    next_pid: u32,
}

impl Harness {
    pub fn new(cfg: Config) -> Harness {
        let t0 = Instant::now();
        let sup = Supervisor::new(&cfg, t0);
        let mut h = Harness {
            sup,
            t0,
            now: t0,
            pending: Vec::new(),
            gens: HashMap::new(),
            next_pid: 1000,
        };
        h.drain();
        h
    }

    /// A supervisor for `cfg` that adopts `(pod, container, pid, started secs before t0,
    /// restart count)` before its first actions are drained, as the runtime does after a
    /// crash of vigil; returns which adoptions were accepted.
    pub fn adopting(cfg: Config, adopt: &[(&str, &str, u32, f64, u32)]) -> (Harness, Vec<bool>) {
        let t0 = Instant::now() + secs(3600.0);
        let mut sup = Supervisor::new(&cfg, t0);
        let mut gens = HashMap::new();
        let mut accepted = Vec::new();
        for &(pod, c, pid, ago, restarts) in adopt {
            let key = sup.container_key(pod, c).expect("container exists");
            let g = sup.adopt(t0, key, pid, t0 - secs(ago), restarts);
            if let Some(g) = g {
                gens.insert(key, g);
            }
            accepted.push(g.is_some());
        }
        let mut h = Harness {
            sup,
            t0,
            now: t0,
            pending: Vec::new(),
            gens,
            next_pid: 1000,
        };
        h.drain();
        (h, accepted)
    }

    /// The next vigil after this one died at `self.now + after` seconds: a fresh supervisor
    /// for `cfg` that takes back this one's record (through its JSON, as the state file holds
    /// it) after adopting `(pod, container, pid)` still running, as the runtime does; its
    /// clock and t0 are this harness's. Returns it and what the recall did.
    pub fn after_crash(
        &self,
        cfg: &Config,
        after: f64,
        adopt: &[(&str, &str, u32)],
    ) -> (Harness, Vec<(String, recall::Recalled)>) {
        let hash = |_: ContainerKey, s: &ContainerSpec| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            format!("{s:?}").hash(&mut h);
            h.finish()
        };
        let json = serde_json::to_string(&self.sup.recollection(&hash)).expect("serialises");
        let mut memory: recall::Recollection = serde_json::from_str(&json).expect("parses");
        let now = self.now + secs(after);
        let mut sup = Supervisor::new(cfg, now);
        sup.recall_events(&mut memory);
        let mut gens = HashMap::new();
        for &(pod, c, pid) in adopt {
            let key = sup.container_key(pod, c).expect("container exists");
            let restarts = self.status(pod, c).restart_count;
            let started = match self.status(pod, c).state {
                ContainerState::Running { started_at, .. } => started_at,
                other => panic!("{pod}/{c} was not running: {other:?}"),
            };
            let g = sup
                .adopt(now, key, pid, started, restarts)
                .expect("adopted");
            gens.insert(key, g);
        }
        let done = sup.recall(now, &memory, &hash);
        let mut h = Harness {
            sup,
            t0: self.t0,
            now,
            pending: Vec::new(),
            gens,
            next_pid: 5000,
        };
        h.drain();
        (h, done)
    }

    /// Sets the wall clock to `rfc3339` at the harness's `now`, as the shell does each turn.
    pub fn wall(&mut self, rfc3339: &str) {
        let wall: jiff::Timestamp = rfc3339.parse().expect("an RFC 3339 time");
        self.sup.set_wall_clock(self.now, wall);
        self.drain();
    }

    /// Seconds since t0.
    pub fn t(&self) -> f64 {
        (self.now - self.t0).as_secs_f64()
    }

    pub fn drain(&mut self) {
        while let Some(a) = self.sup.poll_action() {
            if let Action::Spawn {
                key, generation, ..
            } = &a
            {
                self.gens.insert(*key, *generation);
            }
            self.pending.push(a);
        }
    }

    pub fn take(&mut self) -> Vec<Action> {
        self.drain();
        std::mem::take(&mut self.pending)
    }

    pub fn key(&self, pod: &str, c: &str) -> ContainerKey {
        self.sup.container_key(pod, c).expect("container exists")
    }

    pub fn generation(&self, key: ContainerKey) -> Generation {
        self.gens.get(&key).copied().unwrap_or(0)
    }

    pub fn input(&mut self, input: Input) {
        self.sup.handle(self.now, input);
        self.drain();
    }

    /// Jump to the next deadline (if it is at or before `limit` seconds) and fire it.
    pub fn step_until(&mut self, limit: f64) -> bool {
        self.step_before(Some(self.t0 + secs(limit)))
    }

    fn step_before(&mut self, limit: Option<Instant>) -> bool {
        match self.sup.poll_timeout() {
            Some(t) if limit.is_none_or(|l| t <= l) => {
                assert!(
                    t >= self.now || t + secs(1e-6) >= self.now,
                    "time went back"
                );
                self.now = self.now.max(t);
                self.sup.handle_timeout(self.now);
                self.drain();
                true
            }
            _ => false,
        }
    }

    /// Jump to the next deadline and fire it; returns its time in seconds.
    pub fn step(&mut self) -> f64 {
        assert!(self.step_before(None), "no deadline pending");
        self.t()
    }

    /// Fire every deadline up to `t` seconds, then set the clock to `t`.
    pub fn advance_to(&mut self, t: f64) {
        while self.step_until(t) {}
        self.now = self.now.max(self.t0 + secs(t));
    }

    pub fn spawned(&mut self, pod: &str, c: &str) -> u32 {
        let key = self.key(pod, c);
        self.next_pid += 1;
        let pid = self.next_pid;
        let generation = self.generation(key);
        self.input(Input::Spawned {
            key,
            generation,
            pid,
        });
        pid
    }

    /// Acknowledge every pending `Spawn` with a pid.
    pub fn ack_spawns(&mut self) {
        self.drain();
        let spawns: Vec<(ContainerKey, Generation)> = self
            .pending
            .iter()
            .filter_map(|a| match a {
                Action::Spawn {
                    key, generation, ..
                } => Some((*key, *generation)),
                _ => None,
            })
            .collect();
        self.pending.clear();
        for (key, generation) in spawns {
            self.next_pid += 1;
            let pid = self.next_pid;
            self.input(Input::Spawned {
                key,
                generation,
                pid,
            });
        }
    }

    pub fn exit_info(&mut self, pod: &str, c: &str, exit: ExitInfo) {
        let key = self.key(pod, c);
        let generation = self.generation(key);
        self.input(Input::Exited {
            key,
            generation,
            exit,
        });
    }

    pub fn exit(&mut self, pod: &str, c: &str, code: i32) {
        self.exit_info(
            pod,
            c,
            ExitInfo {
                code: Some(code),
                ..ExitInfo::default()
            },
        );
    }

    pub fn killed_by(&mut self, pod: &str, c: &str, signal: i32) {
        self.exit_info(
            pod,
            c,
            ExitInfo {
                signal: Some(signal),
                ..ExitInfo::default()
            },
        );
    }

    pub fn status(&self, pod: &str, c: &str) -> ContainerStatus {
        let p = self.pod(pod);
        p.init_containers
            .into_iter()
            .chain(p.containers)
            .find(|s| s.name == c)
            .expect("container")
    }

    pub fn pod(&self, pod: &str) -> PodStatus {
        self.sup.pod(pod).expect("pod")
    }

    pub fn phase(&self, pod: &str) -> Phase {
        self.pod(pod).phase
    }

    pub fn condition(&self, pod: &str, kind: ConditionType) -> Condition {
        self.pod(pod)
            .conditions
            .into_iter()
            .find(|c| c.kind == kind)
            .expect("condition")
    }

    pub fn waiting(&self, pod: &str, c: &str) -> Option<(WaitingReason, String)> {
        match self.status(pod, c).state {
            ContainerState::Waiting { reason, message } => Some((reason, message)),
            _ => None,
        }
    }

    pub fn terminated(&self, pod: &str, c: &str) -> Option<Terminated> {
        match self.status(pod, c).state {
            ContainerState::Terminated(t) => Some(t),
            _ => None,
        }
    }

    pub fn is_running(&self, pod: &str, c: &str) -> bool {
        matches!(self.status(pod, c).state, ContainerState::Running { .. })
    }

    pub fn events(&self) -> Vec<Event> {
        self.sup.events_since(0)
    }

    pub fn event(&self, reason: &str) -> Option<Event> {
        self.events().into_iter().find(|e| e.reason == reason)
    }

    pub fn cmd(&mut self, c: Command) -> Result<String, CommandError> {
        let r = self.sup.command(self.now, c);
        self.drain();
        r
    }

    /// The `StartProbe` actions pending, as `(kind, seq)`.
    pub fn probe_starts(&mut self) -> Vec<(ProbeKind, u64)> {
        self.drain();
        let out = self
            .pending
            .iter()
            .filter_map(|a| match a {
                Action::StartProbe { kind, seq, .. } => Some((*kind, *seq)),
                _ => None,
            })
            .collect();
        self.pending
            .retain(|a| !matches!(a, Action::StartProbe { .. }));
        out
    }

    pub fn probe_result(&mut self, pod: &str, c: &str, kind: ProbeKind, seq: u64, ok: bool) {
        let key = self.key(pod, c);
        let generation = self.generation(key);
        let outcome = if ok {
            ProbeOutcome::Success("ok".to_string())
        } else {
            ProbeOutcome::Failure("HTTP probe failed with statuscode: 503".to_string())
        };
        self.input(Input::ProbeResult {
            key,
            generation,
            kind,
            seq,
            outcome,
            duration: Duration::from_millis(5),
        });
    }
}

/// Whether `actions` contains a `Spawn` for `key`.
pub fn has_spawn(actions: &[Action], key: ContainerKey) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::Spawn { key: k, .. } if *k == key))
}

pub fn has_signal(actions: &[Action], key: ContainerKey) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::Signal { key: k, .. } if *k == key))
}

pub fn has_kill(actions: &[Action], key: ContainerKey) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::Kill { key: k, .. } if *k == key))
}

pub fn exit_code(actions: &[Action]) -> Option<i32> {
    actions.iter().find_map(|a| match a {
        Action::Exit { code } => Some(*code),
        _ => None,
    })
}
