//! The validated configuration: what the rest of vigil consumes.
//!
//! Owns the typed, defaulted shape of a config file. Everything here has passed validation
//! (`config::load`), so consumers never re-check ranges or names. Pure data: no I/O.
//! Equality (`PartialEq`) is what `reload` uses to decide whether a pod changed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A whole validated config file.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Config {
    /// Where it was read from (for messages and reload).
    pub source: PathBuf,
    pub supervisor: SupervisorSpec,
    /// Pods in file order of their names (sorted by name; TOML tables are unordered). A pod
    /// with `replicas` is here as its replicas, `NAME-0` … `NAME-{N-1}`.
    pub pods: Vec<PodSpec>,
    /// The pods with `replicas`, by name: the template their replicas are made from and how
    /// many there are (`vigil scale` changes the count). (`default`: a handoff or state from
    /// a vigil without replicas.)
    #[serde(default)]
    pub replica_sets: Vec<ReplicaSetSpec>,
    /// The files of `[supervisor] pod_dir` whose pods are here, and which pods each gave
    /// (`convert::pod_dir`). (`default`: a handoff from a vigil without the key.)
    #[serde(default)]
    pub pod_files: Vec<PodFile>,
}

/// One file of `pod_dir` and the pods it gave the config.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct PodFile {
    pub path: PathBuf,
    /// Its pods as they run (a pod with `replicas` as its replicas).
    pub pods: Vec<String>,
    /// Its pods with `replicas`, by the name written.
    pub replica_sets: Vec<String>,
}

/// The most replicas one pod may have (`replicas`, `vigil scale`): each is a pod with its own
/// cgroups, pipes and status.
pub const MAX_REPLICAS: u32 = 1000;

/// A pod with `replicas = N` (StatefulSet-style names: its replicas are the pods `NAME-0` …
/// `NAME-{N-1}`, each made from `template` by [`ReplicaSetSpec::replica`]).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ReplicaSetSpec {
    /// The pod's name as written (`web`).
    pub name: String,
    /// How many replicas run now.
    pub replicas: u32,
    /// What the file said at the last load: a reload applies the file's count only when it
    /// changed from this, so a `vigil scale` survives a reload that did not touch the key.
    pub file_replicas: u32,
    /// The pod as written, its strings still templates: `${replica}` not expanded yet and a
    /// literal `$` written `$$` (`config::interpolate`); `name` is the set's.
    pub template: PodSpec,
}

/// `update`: how a reload applies a changed definition to a pod's replicas.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpdateStrategy {
    /// Every replica is stopped and replaced at once (what a reload does to any pod).
    #[default]
    Recreate,
    /// A batch at a time, each after the previous one is Ready (a Deployment's RollingUpdate).
    Rolling,
}

impl UpdateStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateStrategy::Recreate => "Recreate",
            UpdateStrategy::Rolling => "Rolling",
        }
    }
}

/// A replica's place in its set, and the set's keys that are not part of a replica's
/// definition (a change of them alone replaces no replica).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Replica {
    /// The set's name (`web` for `web-2`).
    pub set: String,
    /// The replica's index (`2` for `web-2`).
    pub index: u32,
    /// `min_ready`: how many replicas meet a `depends_on` condition on the set (unset: all).
    #[serde(default)]
    pub min_ready: Option<u32>,
    /// `update`.
    #[serde(default)]
    pub update: UpdateStrategy,
    /// `max_unavailable`: replicas a rolling update or restart takes down at once.
    #[serde(default = "default_one")]
    pub max_unavailable: u32,
    /// `progress_deadline_seconds`: how long a batch of a rollout may take to be Ready.
    #[serde(default = "default_progress_deadline")]
    pub progress_deadline: Duration,
}

fn default_one() -> u32 {
    1
}

/// A Deployment's `progressDeadlineSeconds` default.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(600);

fn default_progress_deadline() -> Duration {
    DEFAULT_PROGRESS_DEADLINE
}

impl Replica {
    /// This replica's keys with the set-level ones at their defaults: what a replica's
    /// definition is compared by.
    fn definition(&self) -> Replica {
        Replica {
            set: self.set.clone(),
            index: self.index,
            min_ready: None,
            update: UpdateStrategy::default(),
            max_unavailable: 1,
            progress_deadline: DEFAULT_PROGRESS_DEADLINE,
        }
    }
}

/// The kernel's bounds for a custom fair slice, in microseconds (kernel/sched/syscalls.c,
/// `__setparam_fair`: `clamp_t(..., NSEC_PER_MSEC/10, NSEC_PER_MSEC*100)`): what
/// `sched_slice_microseconds` accepts.
pub const SLICE_MICROS: std::ops::RangeInclusive<u32> = 100..=100_000;

/// `[supervisor]`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct SupervisorSpec {
    /// Control socket path; `None` means the per-user default (see `control::default_socket_path`).
    pub socket: Option<PathBuf>,
    /// Socket file mode (default 0o600).
    pub socket_mode: u32,
    /// Group owning the socket, name or gid.
    pub socket_group: Option<String>,
    pub admin_uids: Vec<u32>,
    pub admin_gids: Vec<u32>,
    pub cgroup_root: CgroupRoot,
    /// Name of the child cgroup vigil creates when its own cgroup is the hierarchy root.
    pub cgroup_name: String,
    /// Container logs are also written to `<log_dir>/<pod>/<container>.log` when set.
    pub log_dir: Option<PathBuf>,
    /// Rotate a log file when it passes this size (bytes).
    pub log_max_file_bytes: u64,
    /// Rotated files kept (`.1` … `.N`).
    pub log_max_files: u32,
    /// Each line in a `log_dir` file is prefixed with when it was read.
    #[serde(default = "default_true")]
    pub log_timestamps: bool,
    /// A pod whose limits need a cgroup controller the host lacks is refused on its own (with
    /// an event and status) instead of refusing the whole start (`--allow-missing-controllers`).
    #[serde(default)]
    pub allow_missing_controllers: bool,
    /// Per-container in-memory ring buffer size (bytes).
    pub log_buffer_bytes: usize,
    /// Forward container output to vigil's stdout as `pod/container | line`.
    pub log_forward: bool,
    /// Where forwarded output goes: stdout, the journal, or the journal under systemd.
    pub log_forward_to: ForwardTo,
    pub shutdown_timeout: Duration,
    /// `oom_score_adj` vigil sets for itself (`None`: leave it).
    pub oom_score_adj: Option<i32>,
    /// The CPU time slice vigil asks for itself, µs, within [`SLICE_MICROS`] (`None`: leave
    /// its scheduling alone); applied by `process::sched`.
    pub sched_slice_micros: Option<u32>,
    /// Control connections one non-admin uid may hold at once.
    pub max_connections_per_uid: usize,
    /// A control connection without a request (and not reading its replies) this long is closed.
    pub client_idle_timeout: Duration,
    /// Share of `RLIMIT_NOFILE` (percent) control connections may hold together.
    pub client_fd_percent: u32,
    /// What a vigil started after another died without a clean shutdown does with the
    /// containers that one left running (docs/behaviour.md, "After a crash of vigil").
    pub on_restart: OnRestart,
    /// What becomes of an adopted container whose output pipes were lost in that crash
    /// (docs/behaviour.md, "After a crash of vigil"). (`default`: a handoff from a vigil
    /// without the key.)
    #[serde(default)]
    pub on_output_lost: OnOutputLost,
    /// Where `GET /metrics` is served (Prometheus / OpenMetrics text); `None`: not served.
    /// (`default`: a handoff from a vigil without the key.)
    #[serde(default)]
    pub metrics_address: Option<std::net::SocketAddr>,
    /// `[[supervisor.on_event]]`: hooks on events, in file order.
    #[serde(default)]
    pub on_event: Vec<super::on_event::OnEventSpec>,
    /// `pod_dir`: a directory whose `*.toml` files and Kubernetes Pod manifests are pods too,
    /// watched while vigil runs (`convert::pod_dir`, `runtime::shell::pod_dir`). (`default`:
    /// a handoff from a vigil without the key.)
    #[serde(default)]
    pub pod_dir: Option<PathBuf>,
}

/// For keys added after a state file format was fixed (`vigil upgrade` reads older ones).
fn default_true() -> bool {
    true
}

impl Default for SupervisorSpec {
    fn default() -> Self {
        SupervisorSpec {
            socket: None,
            socket_mode: 0o600,
            socket_group: None,
            admin_uids: Vec::new(),
            admin_gids: Vec::new(),
            cgroup_root: CgroupRoot::Auto,
            cgroup_name: "vigil".to_string(),
            log_dir: None,
            log_max_file_bytes: 10 * 1024 * 1024,
            log_max_files: 3,
            log_timestamps: true,
            allow_missing_controllers: false,
            log_buffer_bytes: 1024 * 1024,
            log_forward: true,
            log_forward_to: ForwardTo::Auto,
            shutdown_timeout: Duration::from_secs(60),
            oom_score_adj: Some(-900),
            sched_slice_micros: Some(100),
            max_connections_per_uid: 32,
            client_idle_timeout: Duration::from_secs(60),
            client_fd_percent: 50,
            on_restart: OnRestart::Adopt,
            on_output_lost: OnOutputLost::Restart,
            metrics_address: None,
            on_event: Vec::new(),
            pod_dir: None,
        }
    }
}

/// `supervisor.on_restart`: containers found running at start, left by an earlier vigil that
/// died without a clean shutdown (`kill -9`, the OOM killer).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnRestart {
    /// Keep each one whose definition is unchanged running and supervise it again (kubelet
    /// style: a kubelet restart leaves running pods alone).
    #[default]
    Adopt,
    /// Kill them all and start every container afresh.
    Replace,
}

impl OnRestart {
    pub fn as_str(self) -> &'static str {
        match self {
            OnRestart::Adopt => "adopt",
            OnRestart::Replace => "replace",
        }
    }
}

/// `supervisor.on_output_lost`: an adopted container whose output pipes did not survive the
/// crash of the earlier vigil (no output holder kept them) cannot write to stdout or stderr
/// any more (EPIPE, or SIGPIPE).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnOutputLost {
    /// Restart it at once, as an operator's `restart` would (the kubelet restarts a container
    /// whose state it cannot know rather than trust it).
    #[default]
    Restart,
    /// Leave it running, marked `output_lost` in its status.
    Keep,
}

impl OnOutputLost {
    pub fn as_str(self) -> &'static str {
        match self {
            OnOutputLost::Restart => "restart",
            OnOutputLost::Keep => "keep",
        }
    }
}

/// `supervisor.log_forward_to` (docs/interface.md; the rule is `logs::journal::journal_wanted`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardTo {
    /// The journal when vigil runs as a systemd service, else stdout.
    #[default]
    Auto,
    Stdout,
    Journal,
}

/// `supervisor.cgroup_root`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum CgroupRoot {
    /// The subtree vigil owns on the cgroup2 mount (see `cgroup::discover`).
    Auto,
    /// No cgroups at all: process groups only.
    None,
    /// An explicit directory on a cgroup2 mount that vigil owns.
    Path(PathBuf),
}

/// `restart_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    #[default]
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Always => "Always",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Never => "Never",
        }
    }
}

/// Restart back-off (docs/behaviour.md §2.2). Kubelet defaults: 10 s doubling to 300 s, forgiven
/// after a run of more than 600 s.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub reset_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

/// `depends_on = { other = "ready" }`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyCondition {
    /// Every container of the other pod has started (running, startup probe passed).
    Started,
    /// The other pod is Ready.
    Ready,
    /// The other pod has Succeeded.
    Completed,
}

/// `shutdown_on`: which end of this pod makes vigil stop everything, in its usual order, and
/// exit with the pod's exit code (`vigil run --exit-with POD` is `"ended"`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownOn {
    /// The pod Succeeded.
    Completed,
    /// The pod Failed.
    Failed,
    /// The pod Succeeded or Failed.
    Ended,
    /// The pod can never start: a dependency was refused or failed for good.
    DependencyFailed,
}

impl ShutdownOn {
    pub fn as_str(self) -> &'static str {
        match self {
            ShutdownOn::Completed => "completed",
            ShutdownOn::Failed => "failed",
            ShutdownOn::Ended => "ended",
            ShutdownOn::DependencyFailed => "dependency_failed",
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Dependency {
    pub pod: String,
    pub condition: DependencyCondition,
    /// `restart = true`: the dependent restarts after the dependency was restarted or
    /// replaced (compose's `depends_on.restart`).
    #[serde(default)]
    pub restart: bool,
    /// `stop = true`: the dependent stops while the dependency is stopped or has ended, and
    /// starts again when it is back (systemd's `BindsTo=`).
    #[serde(default)]
    pub stop: bool,
}

impl Dependency {
    /// `depends_on = { POD = "CONDITION" }`: no propagation.
    pub fn new(pod: impl Into<String>, condition: DependencyCondition) -> Self {
        Dependency {
            pod: pod.into(),
            condition,
            restart: false,
            stop: false,
        }
    }
}

/// One pod.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct PodSpec {
    pub name: String,
    pub restart_policy: RestartPolicy,
    pub depends_on: Vec<Dependency>,
    /// Each container's definition is held once and shared (`Arc`) by every clone of the pod
    /// (the core's, the shell's slots); serde writes an `Arc` as its contents, so the
    /// serialised form is that of a plain list (in a handoff state: indices into its table of
    /// definitions, `config::intern`).
    #[serde(with = "crate::config::intern::vec")]
    pub init_containers: Vec<Arc<ContainerSpec>>,
    #[serde(with = "crate::config::intern::vec")]
    pub containers: Vec<Arc<ContainerSpec>>,
    /// The budget of a whole-pod stop (`core::pod` `Pod::stop_all`): the pod's
    /// `termination_grace_period_seconds` when written, else the longest grace of its
    /// containers (so an unwritten pod key, only the containers' default, cuts no one short).
    pub termination_grace: Duration,
    /// `shutdown_on` (or `run --exit-with`): the end of this pod that ends vigil.
    #[serde(default)]
    pub shutdown_on: Option<ShutdownOn>,
    /// `active_deadline_seconds` (Kubernetes `activeDeadlineSeconds`): how long a run of the
    /// pod may be active, from its start (init containers included), before vigil stops it and
    /// it fails with reason `DeadlineExceeded`.
    #[serde(default)]
    pub active_deadline: Option<Duration>,
    /// `schedule`: the pod runs at the times of a cron pattern, each time anew.
    #[serde(default)]
    pub schedule: Option<ScheduleSpec>,
    /// `history`: how many of the pod's ended runs status keeps, by outcome (a scheduled pod
    /// keeps 3 and 1 unwritten, as a CronJob does; any other pod none).
    #[serde(default)]
    pub history: HistorySpec,
    /// Whether the pod starts when vigil starts (or a reload adds it). The file's `autostart`,
    /// then decided for this run by the selection (`config::select::apply`: `run POD…`,
    /// `--profile`, `$VIGIL_PROFILES`); a pod that does not start shows `Pending`
    /// (`NotStarted`) until `vigil start`.
    #[serde(default = "default_true")]
    pub autostart: bool,
    /// `profiles`: the pod starts only when one of them is active (empty: always).
    #[serde(default)]
    pub profiles: Vec<String>,
    /// A replica of a pod with `replicas` (its set, its index), else `None`.
    #[serde(default)]
    pub replica: Option<Replica>,
    /// `stable_identity`: read only by `vigil convert --to kubernetes` (a StatefulSet).
    #[serde(default)]
    pub stable_identity: bool,
}

/// One of a container's `ports`: a name (an IANA service name, as a Kubernetes port name) and
/// a TCP port. Read only by `vigil convert --to kubernetes`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub name: String,
    pub port: u16,
}

/// `schedule.concurrency` (Kubernetes `CronJob.spec.concurrencyPolicy`). `"Allow"` is refused
/// by validation: two runs of one pod at once would share its containers' cgroups, logs and
/// status.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// A trigger while a run is active waits for it to end (and is skipped past its starting
    /// deadline).
    Forbid,
    /// A trigger while a run is active stops it and starts a new one.
    Replace,
}

impl Concurrency {
    pub fn as_str(self) -> &'static str {
        match self {
            Concurrency::Forbid => "Forbid",
            Concurrency::Replace => "Replace",
        }
    }
}

/// `history = { successful = 3, failed = 1 }` of a pod: how many ended runs status keeps
/// (Kubernetes `CronJob.spec.successfulJobsHistoryLimit` and `failedJobsHistoryLimit`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistorySpec {
    pub successful: u32,
    pub failed: u32,
}

impl HistorySpec {
    /// What a scheduled pod keeps when `history` is not written: the CronJob's defaults.
    pub const SCHEDULED: HistorySpec = HistorySpec {
        successful: 3,
        failed: 1,
    };
    /// The most runs of one outcome a pod keeps (each is a few dozen bytes in status).
    pub const MAX: u32 = 100;
}

/// `schedule = { cron = "0 2 * * *", … }` of a pod (Kubernetes `CronJob`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ScheduleSpec {
    pub cron: super::schedule::CronPattern,
    /// `time_zone`; unwritten, the host's local zone.
    pub time_zone: super::schedule::Zone,
    pub concurrency: Concurrency,
    /// `starting_deadline_seconds`: a trigger later than this is skipped.
    pub starting_deadline: Option<Duration>,
    /// `suspend`: the schedule starts suspended (`vigil start POD` resumes it).
    pub suspend: bool,
}

impl PodSpec {
    /// Whether `self` and `other` define the same pod to run: equal but for `autostart` and
    /// `profiles`, which only say whether it starts, and `history`, which only says what
    /// status keeps (a reload that changes only them neither stops nor restarts it).
    pub fn same_definition(&self, other: &PodSpec) -> bool {
        let strip = |p: &PodSpec| PodSpec {
            autostart: true,
            profiles: Vec::new(),
            replica: p.replica.as_ref().map(Replica::definition),
            history: HistorySpec::default(),
            ..p.clone()
        };
        self == other || strip(self) == strip(other)
    }

    /// Whether a `depends_on`, an operator command or `vigil run` naming `name` means this
    /// pod: its own name, or the name of the set it is a replica of.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.replica.as_ref().is_some_and(|r| r.set == name)
    }
}

/// One container, with the pod-level defaults already folded in.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    pub name: String,
    /// argv; never empty.
    pub command: Vec<String>,
    /// Container image (`image = "…"`), used only by `vigil convert --to kubernetes`; vigil runs
    /// `command` on the host and never reads it.
    pub image: Option<String>,
    /// Extra environment, in key order.
    pub env: Vec<(String, String)>,
    /// `env_file`: `KEY=VALUE` lines read at every spawn (`process::env_file`); `env` wins.
    /// Its values are secrets: never shown, only this path is.
    pub env_file: Option<PathBuf>,
    pub working_dir: Option<PathBuf>,
    /// User name or numeric uid (resolved at spawn time, before fork).
    pub user: Option<String>,
    /// Group name or numeric gid.
    pub group: Option<String>,
    /// Signal number sent first when stopping (default SIGTERM).
    pub stop_signal: i32,
    /// The signal's name as configured, for messages.
    pub stop_signal_name: String,
    /// Effective restart policy (container override, else the pod's). An init container has
    /// `Always` only when its own `restart_policy = "Always"` says so: it is then a sidecar
    /// (Kubernetes 1.29 restartable init container); under a pod's `Always` a plain init
    /// container gets `OnFailure`.
    pub restart_policy: RestartPolicy,
    pub termination_grace: Duration,
    pub backoff: Backoff,
    pub max_restarts: Option<u32>,
    /// Capabilities kept in the bounding set (e.g. `CAP_NET_BIND_SERVICE`).
    pub capabilities: Vec<String>,
    pub no_new_privs: bool,
    /// `run_as_non_root = true` (Kubernetes `runAsNonRoot`): the container is refused at
    /// start, as the kubelet's verifyRunAsNonRoot refuses it, when it would run as uid 0.
    #[serde(default)]
    pub run_as_non_root: bool,
    pub rlimits: Vec<Rlimit>,
    pub resources: Resources,
    pub startup_probe: Option<ProbeSpec>,
    pub liveness_probe: Option<ProbeSpec>,
    pub readiness_probe: Option<ProbeSpec>,
    /// A file the container may write before it exits; read when it exits (at most 4 KiB)
    /// into `terminated.message` (Kubernetes `terminationMessagePath`; no default file).
    pub termination_message_path: Option<PathBuf>,
    /// `[...containers.lifecycle]`: `post_start` and `pre_stop` hooks.
    pub lifecycle: Lifecycle,
    pub termination_message_policy: TerminationMessagePolicy,
    /// `success_exit_codes`: exit codes besides 0 that end a run as `Completed` (systemd's
    /// `SuccessExitStatus=`); the restart policy and the pod's phase count them as success.
    #[serde(default)]
    pub success_exit_codes: Vec<i32>,
    /// `ports`: named ports, only for `vigil convert --to kubernetes`.
    #[serde(default)]
    pub ports: Vec<PortSpec>,
    /// `notify = true`: the container gets a `NOTIFY_SOCKET` of its own and speaks sd_notify(3)
    /// (`READY=1` makes it ready, `STATUS=`, `STOPPING=1`; docs/behaviour.md §4.4).
    #[serde(default)]
    pub notify: bool,
    /// `ready_log_line = "regex"` (process-compose's key): the run is ready once a line of its
    /// output matches (with its readiness probe, if it has one; docs/behaviour.md §4.5).
    #[serde(default)]
    pub ready_log_line: Option<LinePattern>,
    /// `watchdog_seconds` (with `notify = true`): systemd's `WatchdogSec=`: a run that sent no
    /// `WATCHDOG=1` within this long is killed (`WatchdogTimeout`; docs/behaviour.md §4.4).
    #[serde(default)]
    pub watchdog: Option<Duration>,
    /// `start_timeout_seconds` (with `notify = true`): systemd's `TimeoutStartSec=`: a run
    /// that sent no `READY=1` within this long (moved on by `EXTEND_TIMEOUT_USEC=`) is stopped
    /// (`StartTimeout`; docs/behaviour.md §4.4).
    #[serde(default)]
    pub start_timeout: Option<Duration>,
}

impl ContainerSpec {
    /// Whether the run itself says when it is ready (`notify` or `ready_log_line`): it is not
    /// ready until it does.
    pub fn says_ready(&self) -> bool {
        self.notify || self.ready_log_line.is_some()
    }
}

/// A compiled `ready_log_line` pattern (the `regex` crate's syntax, matched against each line
/// of output as bytes). Compared, hashed and carried as its source text; compiled once, when
/// the config is read (and again when a handoff is read back).
#[derive(Clone)]
pub struct LinePattern {
    source: String,
    regex: regex::bytes::Regex,
}

impl LinePattern {
    /// The most a compiled pattern may take (`RegexBuilder::size_limit`, and the same for the
    /// lazy DFA's cache): a pattern that compiles larger (`a{1000}{1000}`) is refused, so a
    /// config cannot make vigil build a huge automaton or match slowly against every line.
    pub const SIZE_LIMIT: usize = 256 * 1024;

    /// Compiles `source`, or says why it cannot be (a syntax error, or too large once
    /// compiled).
    pub fn new(source: &str) -> Result<LinePattern, String> {
        regex::bytes::RegexBuilder::new(source)
            .size_limit(Self::SIZE_LIMIT)
            .dfa_size_limit(Self::SIZE_LIMIT)
            .build()
            .map(|regex| LinePattern {
                source: source.to_string(),
                regex,
            })
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(limit) => {
                    format!("the pattern compiles to more than {limit} bytes; write a simpler one")
                }
                // The syntax error's own text points at the offending part (multi-line).
                e => format!("not a valid regular expression: {e}"),
            })
    }

    /// The pattern as configured.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `line` (without its newline) matches somewhere.
    pub fn is_match(&self, line: &[u8]) -> bool {
        self.regex.is_match(line)
    }
}

impl PartialEq for LinePattern {
    fn eq(&self, other: &LinePattern) -> bool {
        self.source == other.source
    }
}

impl std::fmt::Debug for LinePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl serde::Serialize for LinePattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl<'de> serde::Deserialize<'de> for LinePattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LinePattern, D::Error> {
        let source = String::deserialize(d)?;
        LinePattern::new(&source).map_err(serde::de::Error::custom)
    }
}

impl ContainerSpec {
    /// A container running `command` with every optional key at its default, as a config
    /// that sets only `name` and `command` gets it (SIGTERM, a 30 s grace period, `Always`,
    /// the default back-off). Tests and fixtures start from it (`..ContainerSpec::new(…)`),
    /// so a new key changes this function, not every fixture; the validator builds its spec
    /// field by field so that it cannot forget one.
    pub fn new(name: &str, command: &[&str]) -> ContainerSpec {
        ContainerSpec {
            name: name.to_string(),
            command: command.iter().map(|a| a.to_string()).collect(),
            image: None,
            env: Vec::new(),
            env_file: None,
            working_dir: None,
            user: None,
            group: None,
            stop_signal: libc::SIGTERM,
            stop_signal_name: "SIGTERM".to_string(),
            restart_policy: RestartPolicy::Always,
            termination_grace: Duration::from_secs(30),
            backoff: Backoff::default(),
            max_restarts: None,
            capabilities: Vec::new(),
            no_new_privs: false,
            run_as_non_root: false,
            rlimits: Vec::new(),
            resources: Resources::default(),
            startup_probe: None,
            liveness_probe: None,
            readiness_probe: None,
            termination_message_path: None,
            lifecycle: Lifecycle::default(),
            termination_message_policy: TerminationMessagePolicy::default(),
            success_exit_codes: Vec::new(),
            ports: Vec::new(),
            notify: false,
            ready_log_line: None,
            watchdog: None,
            start_timeout: None,
        }
    }
}

/// Kubernetes `Lifecycle`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Lifecycle {
    /// Runs right after the start; the container is not started until it returns, and a
    /// failure kills it.
    pub post_start: Option<Hook>,
    /// Runs before the stop signal, within the grace period.
    pub pre_stop: Option<Hook>,
}

/// One lifecycle hook (Kubernetes `LifecycleHandler`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub enum Hook {
    /// `exec` or `http_get`, run like a probe of the container.
    Action(ProbeAction),
    /// `sleep = { seconds = N }`: wait, run nothing.
    Sleep(Duration),
}

/// `termination_message_policy` (Kubernetes `terminationMessagePolicy`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TerminationMessagePolicy {
    /// Only the file.
    #[default]
    File,
    /// The file, or when it is empty and the container failed (exit code not 0), the last
    /// 80 lines / 2 KiB of its output.
    FallbackToLogsOnError,
}

/// `rlimits = { nofile = 1024 }` (soft = hard).
#[derive(serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    /// `libc::RLIMIT_*` resource number.
    pub resource: u32,
    /// Lower-case name (`nofile`).
    pub name: &'static str,
    pub soft: u64,
    pub hard: u64,
}

/// `[...containers.resources]`: cgroup v2 limits.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Resources {
    pub memory_max: Option<u64>,
    pub memory_high: Option<u64>,
    pub swap_max: Option<u64>,
    pub pids_max: Option<u64>,
    /// Cores (1.5 = `150000 100000` in `cpu.max`).
    pub cpu_max: Option<f64>,
    /// `cpu.weight`, 1..=10000.
    pub cpu_weight: Option<u32>,
    /// `memory.oom.group`.
    pub oom_group: bool,
}

impl Resources {
    /// Whether any limit asks for a cgroup controller.
    pub fn any(&self) -> bool {
        self.memory_max.is_some()
            || self.memory_high.is_some()
            || self.swap_max.is_some()
            || self.pids_max.is_some()
            || self.cpu_max.is_some()
            || self.cpu_weight.is_some()
            || self.oom_group
    }
}

/// Which probe — or `Hook`: a lifecycle hook's `exec`/`http_get`, which the runtime runs
/// exactly like a probe attempt (at most one hook of a container runs at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
    Hook,
}

impl ProbeKind {
    /// The three probes (not `Hook`).
    pub const ALL: [ProbeKind; 3] = [
        ProbeKind::Startup,
        ProbeKind::Liveness,
        ProbeKind::Readiness,
    ];

    /// `Liveness`, as in "Liveness probe failed: …".
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Hook => "Hook",
        }
    }

    /// `liveness`, as in JSON and config keys (`liveness_probe`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startup",
            ProbeKind::Liveness => "liveness",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Hook => "hook",
        }
    }
}

/// One probe, defaults applied (docs/behaviour.md §4).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    pub action: ProbeAction,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// Grace period for a kill caused by this probe (else the container's).
    pub termination_grace: Option<Duration>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub enum ProbeAction {
    Exec {
        command: Vec<String>,
    },
    HttpGet {
        host: String,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
        scheme: HttpScheme,
        /// Certificate checks for `Https` (unused for `Http`).
        tls: TlsSpec,
    },
    TcpSocket {
        host: String,
        port: u16,
    },
    /// `grpc.health.v1.Health/Check` over cleartext HTTP/2, as the kubelet's gRPC probe.
    Grpc {
        host: String,
        port: u16,
        /// The `service` field of the request; empty asks about the server as a whole.
        service: String,
    },
}

/// `http_get.scheme`: `HTTP` or `HTTPS` (either case).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpScheme {
    #[default]
    Http,
    Https,
}

impl HttpScheme {
    /// `http` / `https`, as in URLs.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpScheme::Http => "http",
            HttpScheme::Https => "https",
        }
    }
}

/// `http_get.tls`. Like the kubelet, an HTTPS probe does not verify the server's certificate
/// unless `ca_file` is given; then the chain must lead to a certificate in that file and the
/// leaf must be valid now and for `server_name` (default: the probe's host).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSpec {
    /// PEM file of the certificates to trust; `Some` turns verification on.
    pub ca_file: Option<PathBuf>,
    /// Name sent as SNI and checked against the certificate (default: the probe's host).
    pub server_name: Option<String>,
}

/// An [`Rlimit`] read back (a handoff's state): the name is looked up in the known table.
#[derive(serde::Deserialize)]
struct RlimitRepr {
    resource: u32,
    name: String,
    soft: u64,
    hard: u64,
}

impl<'de> serde::Deserialize<'de> for Rlimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rlimit, D::Error> {
        let r = RlimitRepr::deserialize(d)?;
        let (name, _) =
            super::values::parse_rlimit_name(&r.name).map_err(serde::de::Error::custom)?;
        Ok(Rlimit {
            resource: r.resource,
            name,
            soft: r.soft,
            hard: r.hard,
        })
    }
}
