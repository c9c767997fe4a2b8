//! vigil's fuzz harness: one function per fuzz target, each taking arbitrary bytes.
//!
//! Owns what each target feeds and which invariants it checks. It is shared by the libFuzzer
//! targets in `fuzz_targets/` (run with `cargo fuzz`, see `fuzz/run.sh`) and by the plain
//! `cargo test` replay in `tests/fuzz_replay.rs`, which includes this file by path and feeds
//! the committed corpus (`fuzz/corpus/<target>/`) and past crashes (`fuzz/regressions/`)
//! through the same functions. So this file must depend on nothing but `vigil` and `std`,
//! and carries no crate-level attributes.
//!
//! Every function panics only to report a broken invariant; any other panic inside vigil is
//! the bug the fuzzer looks for.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use vigil::config::spec::{Config, ProbeKind};
use vigil::core::{
    Action, Command, ContainerKey, ExitInfo, Generation, Input, ProbeOutcome, Supervisor,
};

/// The fuzz targets, by name (the file names under `fuzz_targets/` and `corpus/`).
/// A fuzz target: arbitrary bytes in, panics only on a bug.
pub type Target = fn(&[u8]);

pub const TARGETS: &[(&str, Target)] = &[
    ("config", config),
    ("control_request", control_request),
    ("http_response", http_response),
    ("grpc_response", grpc_response),
    ("hpack", hpack),
    ("cgroup_files", cgroup_files),
    ("core_sequence", core_sequence),
    ("metrics_request", metrics_request),
    #[cfg(feature = "kubernetes")]
    ("manifest", manifest),
];

/// Config parser + validator: any bytes → `Ok` or errors that each carry a location inside
/// the text (or none), never a panic.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = vigil::config::load_str(text, Path::new("fuzz.toml")) {
        let rendered = errors.to_string();
        assert!(!rendered.is_empty(), "an error list renders to something");
    }
}

/// Kubernetes manifest → vigil config (`convert --from kubernetes`, `run -f`): any bytes →
/// a config that passes vigil's own validation, or errors that each render to one line or
/// more, never a panic.
#[cfg(feature = "kubernetes")]
pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match vigil::convert::from_kube::convert(text, Path::new("fuzz.yaml")) {
        Ok(out) => {
            assert!(
                vigil::config::load_str(&out.toml, Path::new("fuzz.toml")).is_ok(),
                "a converted manifest must be a valid config:\n{}",
                out.toml
            );
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "a failed conversion says why");
            for e in errors {
                assert!(!e.to_string().is_empty());
            }
        }
    }
}

/// A request head on the metrics endpoint: a scrape or a health check whose length lies within the
/// bytes given and the 8 KiB limit, a refusal that renders as one HTTP reply, or "partial"
/// only while under the limit; the `Accept` reading takes any text.
pub fn metrics_request(data: &[u8]) {
    use vigil::metrics::http::{self, MAX_REQUEST, Parsed};
    match http::parse(data) {
        Parsed::Partial => assert!(data.len() < MAX_REQUEST, "partial past the limit"),
        Parsed::Scrape(s) => {
            assert!(
                s.len <= data.len() && s.len <= MAX_REQUEST,
                "scrape length {}",
                s.len
            );
            assert!(!s.format.content_type().is_empty());
        }
        Parsed::Health(h) => {
            assert!(
                h.len <= data.len() && h.len <= MAX_REQUEST,
                "health check length {}",
                h.len
            );
            assert!(h.query.end <= h.len, "the query lies in the head");
            let _ = http::health_query(h.query(data));
        }
        Parsed::Refuse(status, why) => {
            let reply = http::refusal(status, why);
            assert!(reply.starts_with("HTTP/1.1 ") && reply.contains("\r\n\r\n"));
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = vigil::metrics::Format::from_accept(Some(text));
    }
}

/// Control protocol request line: `Ok(request)` or an error reply that is one JSON line.
pub fn control_request(data: &[u8]) {
    match vigil::control::protocol::parse_request(data) {
        Ok(request) => {
            let _ = request.cmd.is_mutating();
            let _ = request.cmd.to_json();
        }
        Err(e) => {
            let reply = e.reply();
            assert!(!reply.contains('\n') || reply.ends_with('\n'));
            let body = reply.trim_end_matches('\n');
            assert!(
                !body.contains('\n'),
                "error reply must be a single line: {reply:?}"
            );
            assert!(
                serde_json_is_object(body),
                "error reply must be a JSON object: {reply:?}"
            );
        }
    }
}

fn serde_json_is_object(text: &str) -> bool {
    text.starts_with('{') && text.ends_with('}')
}

/// HTTP probe response parser: the first byte says how to split the rest into reads; every
/// split must give the same outcome as one read, and `finish` always decides.
pub fn http_response(data: &[u8]) {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    use vigil::probe::http::{Progress, ResponseParser};
    let whole = {
        let mut p = ResponseParser::new();
        match p.feed(body) {
            Progress::Done(outcome) => outcome,
            _ => p.finish(),
        }
    };
    let step = usize::from(split % 16) + 1;
    let mut p = ResponseParser::new();
    let mut done = None;
    for chunk in body.chunks(step) {
        if let Progress::Done(outcome) = p.feed(chunk) {
            done = Some(outcome);
            break;
        }
    }
    let pieces = done.unwrap_or_else(|| p.finish());
    assert_eq!(whole, pieces, "outcome depends on how the bytes were split");
    // Feeding after the end changes nothing.
    let mut again = p.clone();
    if let Progress::Done(outcome) = again.feed(b"HTTP/1.1 500 x\r\n\r\n") {
        assert_eq!(outcome, pieces);
    }
}

/// Any bytes as the server's side of a gRPC health check (HTTP/2 frames, header blocks,
/// messages): the same outcome however the bytes are split, output only in whole frames
/// after the request, and nothing changes once decided.
pub fn grpc_response(data: &[u8]) {
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    use vigil::probe::grpc::HealthCheck;
    use vigil::probe::h2;
    let fresh = || {
        let mut hc = HealthCheck::new("127.0.0.1:9090", "svc");
        let n = hc.output().len();
        hc.sent(n);
        hc
    };
    let mut one = fresh();
    let whole = one.feed(body).unwrap_or_else(|| one.finish());
    let step = usize::from(split % 32) + 1;
    let mut hc = fresh();
    let mut done = None;
    let mut out = Vec::new();
    for chunk in body.chunks(step) {
        let decided = hc.feed(chunk);
        out.extend_from_slice(hc.output());
        let n = hc.output().len();
        hc.sent(n);
        if decided.is_some() {
            done = decided;
            break;
        }
    }
    let pieces = done.unwrap_or_else(|| hc.finish());
    assert_eq!(whole, pieces, "outcome depends on how the bytes were split");
    // What the client sent back (SETTINGS and PING acknowledgements) is whole frames.
    let mut rest = out.as_slice();
    while !rest.is_empty() {
        match h2::next_frame(rest) {
            Ok(Some((_, n))) => rest = &rest[n..],
            other => panic!("client output is not whole frames: {other:?}"),
        }
    }
    assert_eq!(hc.feed(b"\0\0\0\x04\0\0\0\0\0"), Some(pieces));
}

/// Any bytes as HPACK header blocks: decoded or refused, never a panic, never more than the
/// cap; the dynamic table carries over to a second block.
pub fn hpack(data: &[u8]) {
    use vigil::probe::h2::HeaderDecoder;
    let mut decoder = HeaderDecoder::new();
    let cut = data.len() / 2;
    for block in [&data[..cut], &data[cut..]] {
        if let Ok((fields, said)) = decoder.decode(block, 4096) {
            let size: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
            assert!(size <= 4096, "decoded {size} bytes past the cap");
            assert_eq!(size, said, "the size returned is the fields'");
        }
    }
}

/// `memory.events`, `cgroup.events`, `cpu.stat` and the other cgroup file parsers.
pub fn cgroup_files(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    use vigil::cgroup::{OomCounters, files};
    let counters = OomCounters::parse(text);
    let zero = counters.since(counters);
    assert_eq!(zero, OomCounters::default());
    let _ = counters.since(OomCounters::default());
    let _ = files::parse_populated(text, Path::new("cgroup.events"));
    let _ = files::parse_cpu_usage_usec(text);
    let _ = files::parse_max_value(text);
    let _ = files::parse_u64(text);
    let _ = files::parse_pressure_some_avg10(text);
    let _ = files::parse_controller_list(text);
    let _ = files::parse_procs(text);
    for (k, v) in files::parse_flat_keyed(text) {
        assert!(!k.is_empty() && !v.is_empty());
        assert!(!k.contains(char::is_whitespace));
    }
}

/// The config the core target runs: one pod per restart policy, init containers, every probe
/// kind, a restart limit, fractional back-off and grace periods.
pub const CORE_CONFIG: &str = r#"
[supervisor]
cgroup_root = "none"
shutdown_timeout_seconds = 5

[pods.always]
restart_policy = "Always"
termination_grace_period_seconds = 0.5
backoff = { initial_seconds = 0.1, max_seconds = 2, reset_after_seconds = 5 }

[[pods.always.init_containers]]
name = "init"
command = ["/bin/true"]

[[pods.always.containers]]
name = "app"
command = ["/bin/app"]

[pods.always.containers.liveness_probe]
exec = { command = ["/bin/check"] }
period_seconds = 0.5
timeout_seconds = 0.2
failure_threshold = 2

[pods.always.containers.readiness_probe]
tcp_socket = { port = 8080 }
period_seconds = 0.3
success_threshold = 2

[pods.onfailure]
restart_policy = "OnFailure"
max_restarts = 3
backoff = { initial_seconds = 0.2, max_seconds = 1, reset_after_seconds = 3 }
depends_on = { always = "ready" }

[[pods.onfailure.containers]]
name = "job"
command = ["/bin/job"]

[pods.onfailure.containers.startup_probe]
http_get = { port = 8081, path = "/up" }
period_seconds = 0.25
failure_threshold = 3

[pods.never]
restart_policy = "Never"
termination_grace_period_seconds = 1

[[pods.never.containers]]
name = "one"
command = ["/bin/one"]

[[pods.never.containers]]
name = "two"
command = ["/bin/two"]
restart_policy = "Always"
"#;

/// The validated [`CORE_CONFIG`] (parsed once per process).
pub fn core_config() -> Config {
    static CONFIG: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(
            || match vigil::config::load_str(CORE_CONFIG, Path::new("core-fuzz.toml")) {
                Ok(config) => config,
                Err(e) => panic!("the core fuzz config is invalid: {e}"),
            },
        )
        .clone()
}

const POD_NAMES: &[&str] = &["always", "onfailure", "never", "nope"];
const CONTAINER_NAMES: &[&str] = &["init", "app", "job", "one", "two", "nope"];

/// Reads bytes as a stream of small numbers; runs dry as zeros.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) << 8 | u16::from(self.u8())
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[usize::from(self.u8()) % items.len()]
    }
    fn index(&mut self, len: usize) -> usize {
        usize::from(self.u16()) % len
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The runtime as the core target models it: which runs are spawned and alive.
struct World {
    sup: Supervisor,
    base: Instant,
    /// Offset of `now` from `base` in milliseconds; may go backwards.
    now_ms: i64,
    /// Spawn actions not yet answered.
    pending_spawns: Vec<(ContainerKey, Generation)>,
    /// Runs answered `Spawned` and not yet reported `Exited`.
    live: HashSet<(ContainerKey, Generation)>,
    /// Runs the core asked to kill.
    killed: HashSet<(ContainerKey, Generation)>,
    /// Probe attempts started and not cancelled or answered.
    probes: Vec<(ContainerKey, Generation, ProbeKind, u64)>,
    /// Highest generation seen per key (for stale inputs).
    generations: HashMap<ContainerKey, Generation>,
    /// Per key of a `Never` pod: spawns allowed by operator commands since the last spawn.
    never_keys: HashSet<ContainerKey>,
    never_allowance: HashMap<ContainerKey, u32>,
    never_spawned: HashSet<ContainerKey>,
    restart_counts: HashMap<(String, String), u32>,
    next_pid: u32,
    exit_code: Option<i32>,
    spawns: u64,
    terminations: u64,
    /// Runs adopted at start (left by an earlier vigil that died): not children, so their
    /// exit status is unknown when they end.
    adopted: HashSet<(ContainerKey, Generation)>,
    adoptions: u64,
}

/// An input beginning with this byte first adopts running containers (`Supervisor::adopt`,
/// as a vigil restarted after a crash does): then a mask of which, and per adopted one its
/// age in seconds and restart count.
const ADOPT: u8 = 0xAD;
/// The containers an input may ask to adopt, by mask bit (an init container is refused by
/// the core unless it is a sidecar; "nope" is not a container).
const ADOPTABLE: &[(&str, &str)] = &[
    ("always", "app"),
    ("onfailure", "job"),
    ("never", "one"),
    ("never", "two"),
    ("always", "init"),
    ("nope", "app"),
];

impl World {
    fn new() -> World {
        let config = core_config();
        // Far from the epoch of `Instant` so going backwards cannot underflow.
        let base = Instant::now() + Duration::from_secs(1 << 32);
        let sup = Supervisor::new(&config, base);
        let mut world = World {
            sup,
            base,
            now_ms: 0,
            pending_spawns: Vec::new(),
            live: HashSet::new(),
            killed: HashSet::new(),
            probes: Vec::new(),
            generations: HashMap::new(),
            never_keys: HashSet::new(),
            never_allowance: HashMap::new(),
            never_spawned: HashSet::new(),
            restart_counts: HashMap::new(),
            next_pid: 100,
            exit_code: None,
            spawns: 0,
            terminations: 0,
            adopted: HashSet::new(),
            adoptions: 0,
        };
        for name in ["one"] {
            if let Some(key) = world.sup.container_key("never", name) {
                world.never_keys.insert(key);
            }
        }
        world
    }

    /// Right after `Supervisor::new`, before its first actions are drained: the containers
    /// the input names are adopted running, each with a pid, a start in the past and the
    /// restart count the earlier vigil recorded.
    fn adopt(&mut self, b: &mut Bytes) {
        let mask = b.u8();
        for (i, (pod, name)) in ADOPTABLE.iter().enumerate() {
            if mask & (1 << i) == 0 {
                continue;
            }
            let age = Duration::from_secs(u64::from(b.u8()));
            let restarts = u32::from(b.u8() % 8);
            let Some(key) = self.sup.container_key(pod, name) else {
                continue;
            };
            self.next_pid += 1;
            let pid = self.next_pid;
            let now = self.now();
            let Some(generation) = self.sup.adopt(now, key, pid, now - age, restarts) else {
                continue; // the runtime kills it; the container starts as usual
            };
            let prev = self.generations.get(&key).copied().unwrap_or(0);
            assert!(
                generation > prev,
                "an adopted run's generation did not increase"
            );
            self.generations.insert(key, generation);
            if self.never_keys.contains(&key) {
                self.never_spawned.insert(key);
            }
            self.live.insert((key, generation));
            self.adopted.insert((key, generation));
            self.spawns += 1;
            self.adoptions += 1;
        }
    }

    fn now(&self) -> Instant {
        if self.now_ms >= 0 {
            self.base + Duration::from_millis(self.now_ms.unsigned_abs())
        } else {
            self.base - Duration::from_millis(self.now_ms.unsigned_abs())
        }
    }

    fn set_now_ms(&mut self, ms: i64) {
        // About ±30 years: far beyond any deadline vigil computes, far from overflow.
        self.now_ms = ms.clamp(-(1 << 40), 1 << 40);
    }

    fn handle(&mut self, input: Input) {
        let now = self.now();
        self.sup.handle(now, input);
        self.drain();
    }

    fn timeout(&mut self) {
        let now = self.now();
        self.sup.handle_timeout(now);
        self.drain();
    }

    /// Executes the core's actions and checks the invariants they must keep.
    fn drain(&mut self) {
        while let Some(action) = self.sup.poll_action() {
            match action {
                Action::Spawn {
                    key, generation, ..
                } => {
                    assert!(self.exit_code.is_none(), "spawn after Exit");
                    assert!(
                        !self.live.iter().any(|(k, _)| *k == key)
                            && !self.pending_spawns.iter().any(|(k, _)| *k == key),
                        "{key:?} spawned generation {generation} while another run is live"
                    );
                    let prev = self.generations.get(&key).copied().unwrap_or(0);
                    assert!(generation > prev, "generation did not increase");
                    self.generations.insert(key, generation);
                    if self.never_keys.contains(&key) {
                        if self.never_spawned.contains(&key) {
                            let allowance = self.never_allowance.entry(key).or_insert(0);
                            assert!(*allowance > 0, "a Never container was restarted by policy");
                            *allowance -= 1;
                        }
                        self.never_spawned.insert(key);
                    }
                    self.spawns += 1;
                    self.pending_spawns.push((key, generation));
                }
                Action::Signal { .. } => {}
                Action::Kill { key, generation } => {
                    self.killed.insert((key, generation));
                }
                Action::StartProbe {
                    key,
                    generation,
                    kind,
                    seq,
                    ..
                } => self.probes.push((key, generation, kind, seq)),
                Action::CancelProbe {
                    key,
                    generation,
                    kind,
                    seq,
                } => self.probes.retain(|p| *p != (key, generation, kind, seq)),
                Action::Forget { key } => {
                    assert!(
                        !self.live.iter().any(|(k, _)| *k == key),
                        "{key:?} forgotten while running"
                    );
                }
                Action::Exit { code } => {
                    assert!(self.exit_code.is_none(), "Exit emitted twice");
                    self.exit_code = Some(code);
                }
            }
        }
        self.check_status();
    }

    fn check_status(&mut self) {
        for pod in self.sup.pods() {
            for c in pod.init_containers.iter().chain(&pod.containers) {
                let slot = (pod.name.clone(), c.name.clone());
                let before = self.restart_counts.get(&slot).copied().unwrap_or(0);
                assert!(
                    c.restart_count >= before,
                    "restart_count of {}/{} went from {before} to {}",
                    pod.name,
                    c.name,
                    c.restart_count
                );
                self.restart_counts.insert(slot, c.restart_count);
            }
        }
        let _ = self.sup.events_since(0);
    }

    fn allow_never(&mut self, pod: &str, container: Option<&str>) {
        if pod != "never" {
            return;
        }
        for key in self.never_keys.clone() {
            let name = self.sup.container_name(key).map(|(_, c)| c);
            if container.is_none() || name.as_deref() == container {
                *self.never_allowance.entry(key).or_insert(0) += 1;
            }
        }
    }

    fn exit_run(&mut self, run: (ContainerKey, Generation), exit: ExitInfo) {
        // An adopted run is not vigil's child: its end is seen, its exit status is not.
        let exit = if self.adopted.remove(&run) {
            ExitInfo {
                status_unknown: true,
                ..ExitInfo::default()
            }
        } else {
            exit
        };
        self.live.remove(&run);
        self.killed.remove(&run);
        self.probes.retain(|p| (p.0, p.1) != run);
        self.terminations += 1;
        self.handle(Input::Exited {
            key: run.0,
            generation: run.1,
            exit,
        });
    }

    fn step(&mut self, b: &mut Bytes) {
        match b.u8() % 14 {
            0 | 1 => {
                let ms = i64::from(b.u16()) * i64::from(b.u8() % 8 + 1);
                self.set_now_ms(self.now_ms + ms);
                self.timeout();
            }
            2 => {
                // Jump to the core's next deadline, as the runtime's poll would.
                if let Some(t) = self.sup.poll_timeout() {
                    let ms = if t >= self.base {
                        i64::try_from(t.duration_since(self.base).as_millis()).unwrap_or(i64::MAX)
                    } else {
                        -i64::try_from(self.base.duration_since(t).as_millis()).unwrap_or(i64::MAX)
                    };
                    self.set_now_ms(ms.saturating_add(1));
                }
                self.timeout();
            }
            3 => {
                // Arbitrary `now`, also backwards.
                let ms = i64::from(b.u16() as i16) * 1000 + i64::from(b.u8());
                self.set_now_ms(ms);
                self.timeout();
            }
            4 if !self.pending_spawns.is_empty() => {
                let i = b.index(self.pending_spawns.len());
                let (key, generation) = self.pending_spawns.remove(i);
                self.live.insert((key, generation));
                self.next_pid += 1;
                let pid = self.next_pid;
                self.handle(Input::Spawned {
                    key,
                    generation,
                    pid,
                });
            }
            5 if !self.pending_spawns.is_empty() => {
                let i = b.index(self.pending_spawns.len());
                let (key, generation) = self.pending_spawns.remove(i);
                self.terminations += 1;
                self.handle(Input::SpawnFailed {
                    key,
                    generation,
                    message: "No such file or directory (os error 2)".into(),
                });
            }
            6 if !self.live.is_empty() => {
                let mut runs: Vec<_> = self.live.iter().copied().collect();
                runs.sort();
                let run = runs[b.index(runs.len())];
                let kind = b.u8();
                let exit = ExitInfo {
                    code: (kind & 1 == 0).then_some(i32::from(kind >> 4)),
                    signal: (kind & 1 == 1).then_some(i32::from(kind >> 3 & 15) + 1),
                    oom_kill_delta: u64::from(kind >> 1 & 1),
                    oom_group_kill_delta: u64::from(kind >> 2 & 1),
                    memory_max: (kind & 8 == 8).then_some(1 << 20),
                    memory_peak: None,
                    termination_message: (kind & 2 == 2).then(|| "done\n".to_string()),
                    status_unknown: false,
                    left_behind: u32::from(kind >> 5 & 3),
                };
                self.exit_run(run, exit);
            }
            7 if !self.probes.is_empty() => {
                let i = b.index(self.probes.len());
                let (key, generation, kind, seq) = self.probes.remove(i);
                let outcome = if b.u8() & 1 == 0 {
                    ProbeOutcome::Success("ok".into())
                } else {
                    ProbeOutcome::Failure("HTTP probe failed with statuscode: 503".into())
                };
                let duration = Duration::from_millis(u64::from(b.u8()));
                self.handle(Input::ProbeResult {
                    key,
                    generation,
                    kind,
                    seq,
                    outcome,
                    duration,
                });
            }
            8 if !self.live.is_empty() => {
                let mut runs: Vec<_> = self.live.iter().copied().collect();
                runs.sort();
                let (key, generation) = runs[b.index(runs.len())];
                let delta = u64::from(b.u8());
                self.handle(Input::OomKills {
                    key,
                    generation,
                    delta,
                    memory_max: Some(1 << 20),
                });
            }
            9 => {
                // Inputs for runs that are not (or no longer) live: must be ignored.
                let key = ContainerKey(u32::from(b.u8() % 8));
                let generation = Generation::from(b.u8() % 4);
                if self.live.contains(&(key, generation))
                    || self.pending_spawns.contains(&(key, generation))
                {
                    return;
                }
                let input = match b.u8() % 4 {
                    0 => Input::Exited {
                        key,
                        generation,
                        exit: ExitInfo::default(),
                    },
                    1 => Input::Spawned {
                        key,
                        generation,
                        pid: 1,
                    },
                    2 => Input::ProbeResult {
                        key,
                        generation,
                        kind: b.pick(&[
                            ProbeKind::Startup,
                            ProbeKind::Liveness,
                            ProbeKind::Readiness,
                        ]),
                        seq: u64::from(b.u8()),
                        outcome: ProbeOutcome::Failure("stale".into()),
                        duration: Duration::ZERO,
                    },
                    _ => Input::SpawnFailed {
                        key,
                        generation,
                        message: "stale".into(),
                    },
                };
                // A stale Spawned/SpawnFailed for a generation that was never asked for is
                // not something the runtime can send; only feed the ones it can.
                if matches!(input, Input::Spawned { .. } | Input::SpawnFailed { .. }) {
                    let known = self.generations.get(&key).copied().unwrap_or(0);
                    if generation == 0 || generation > known {
                        return;
                    }
                }
                self.handle(input);
            }
            10 | 11 => {
                let pod = b.pick(POD_NAMES).to_string();
                let container = match b.u8() % 3 {
                    0 => None,
                    _ => Some(b.pick(CONTAINER_NAMES).to_string()),
                };
                let now = self.now();
                let command = match b.u8() % 3 {
                    0 => Command::Start {
                        pod: pod.clone(),
                        container: container.clone(),
                    },
                    1 => Command::Stop {
                        pod: pod.clone(),
                        container: container.clone(),
                    },
                    _ => Command::Restart {
                        pod: pod.clone(),
                        container: container.clone(),
                    },
                };
                if !matches!(command, Command::Stop { .. }) {
                    self.allow_never(&pod, container.as_deref());
                }
                let _ = self.sup.command(now, command);
                self.drain();
            }
            12 => {
                let now = self.now();
                let force = b.u8() & 1 == 1;
                let _ = self.sup.command(now, Command::Shutdown { force });
                self.drain();
            }
            13 => {
                // Reload with the same config: nothing may restart.
                let now = self.now();
                let _ = self
                    .sup
                    .command(now, Command::Reload(Box::new(core_config())));
                self.drain();
            }
            _ => {}
        }
    }

    /// Forced shutdown, the runtime killing whatever it is told to: must reach `Exit` with
    /// no run left alive, every spawn answered by exactly one termination.
    fn finish(&mut self) {
        let now = self.now();
        let _ = self.sup.command(now, Command::Shutdown { force: true });
        self.drain();
        for _ in 0..10_000 {
            if self.exit_code.is_some() {
                break;
            }
            if let Some((key, generation)) = self.pending_spawns.pop() {
                self.terminations += 1;
                self.handle(Input::SpawnFailed {
                    key,
                    generation,
                    message: "shutting down".into(),
                });
                continue;
            }
            let mut killed: Vec<_> = self.killed.iter().copied().collect();
            killed.sort();
            if let Some(&run) = killed.first() {
                if self.live.contains(&run) {
                    self.exit_run(
                        run,
                        ExitInfo {
                            signal: Some(9),
                            ..ExitInfo::default()
                        },
                    );
                } else {
                    self.killed.remove(&run);
                }
                continue;
            }
            if let Some(p) = self.probes.pop() {
                self.handle(Input::ProbeResult {
                    key: p.0,
                    generation: p.1,
                    kind: p.2,
                    seq: p.3,
                    outcome: ProbeOutcome::Failure("shutting down".into()),
                    duration: Duration::ZERO,
                });
                continue;
            }
            // Nothing to answer: let time pass to the next deadline.
            self.set_now_ms(self.now_ms + 1000);
            self.timeout();
        }
        assert!(
            self.exit_code.is_some(),
            "forced shutdown never exited; live runs: {:?}",
            self.live
        );
        assert!(
            self.live.is_empty(),
            "Exit with runs still alive: {:?}",
            self.live
        );
        assert!(
            self.pending_spawns.is_empty(),
            "Exit with unanswered spawns"
        );
        assert_eq!(
            self.spawns, self.terminations,
            "spawns and terminations differ"
        );
    }
}

/// The core state machine fed an arbitrary sequence of inputs, commands and `now` values.
/// Invariants: no panic; at most one live generation per container; generations increase;
/// restart_count never decreases; a `Never` container is restarted only on request; a forced
/// shutdown ends with `Exit` and no live run, every spawn matched by one termination. An input
/// beginning [`ADOPT`] first adopts running containers (their ends reported with an unknown
/// exit status), under the same invariants (an adopted run counts as a spawn).
pub fn core_sequence(data: &[u8]) {
    core_sequence_spawns(data);
}

/// [`core_sequence`], returning how many runs the core spawned (to check that the harness
/// really drives the core).
pub fn core_sequence_spawns(data: &[u8]) -> u64 {
    core_sequence_counts(data).0
}

/// [`core_sequence`], returning how many runs were spawned (adopted ones included) and how
/// many were adopted.
pub fn core_sequence_counts(data: &[u8]) -> (u64, u64) {
    let mut world = World::new();
    let mut bytes = Bytes(data);
    if data.first() == Some(&ADOPT) {
        bytes.u8();
        world.adopt(&mut bytes);
    }
    world.drain();
    let mut steps = 0;
    while !bytes.is_empty() && steps < 2000 {
        world.step(&mut bytes);
        steps += 1;
    }
    world.finish();
    (world.spawns, world.adoptions)
}
