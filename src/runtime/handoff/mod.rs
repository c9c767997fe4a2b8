//! The handoff of `vigil upgrade`: everything a new vigil needs to carry on supervising in
//! the same process after `execve`, and the exec itself.
//!
//! Owns: the state format ([`State`], versioned: [`FORMAT_VERSION`], [`READS`]) and its framing
//! in an anonymous memory file (`memfd_create(2)`): the magic `VIGILHO\n`, the JSON length as
//! 8 bytes little-endian, the JSON, then the raw bytes of the log rings and their read-time
//! stamps ([`Blob`]s point into them, so megabytes of output are copied, not escaped);
//! checking a binary before exec ([`binary`]); the exec with the handed-over descriptors'
//! `FD_CLOEXEC` cleared and the signals vigil handles blocked across it ([`exec`]); and the
//! environment a new instance finds its handoff in ([`FD_ENV`], [`EXE_FD_ENV`], [`ERROR_ENV`]).
//!
//! The JSON of format 2 is `{"version":2,"specs":[...],"state":{...}}`: each distinct
//! container definition once in `specs`, and its index wherever the state holds it
//! ([`specs`]). Format 1 was the state alone, every definition written in full four times
//! (the config, the core's pod, the core's slot, the shell's slot). Descriptors handed over
//! besides the listening socket and the pipes: each running container's cgroup files (format
//! 2; a format-1 state's cgroups are opened again by path).
//!
//! Must not: decide what a container's state means (the core's, carried as is), or touch a
//! descriptor beyond clearing and restoring `FD_CLOEXEC` on those it is given — until
//! `execve` succeeds the old process keeps every descriptor and all its state, so a failed
//! exec changes nothing.
//!
//! Compatibility: a build reads every version in [`READS`]; `tests/data/handoff-v1.bin` and
//! `tests/data/handoff-v2.bin` are states written by those versions' builds and must stay
//! readable (`tests.rs`).

pub mod binary;
pub mod exec;
pub mod fallback;
pub mod guard;

// The serde helpers the core and config state types name, kept below both (issue 37: floors
// that hold); re-exported under the names the handoff has always used.
pub use crate::config::intern as specs;
pub use crate::monotime as mono;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cgroup::{CgroupFds, OomCounters};
use crate::config::ConfigSource;
use crate::config::spec::{Config, ContainerSpec};
use crate::core::{ContainerKey, Generation, Supervisor};
use crate::logs::ring::RingMeta;

/// The state format this build writes.
pub const FORMAT_VERSION: u32 = 2;
/// The state formats this build reads.
pub const READS: &[u32] = &[1, 2];
/// The first bytes of a handoff file.
pub const MAGIC: &[u8; 8] = b"VIGILHO\n";
/// The descriptor number of the handoff file, in the new instance's environment.
pub const FD_ENV: &str = "VIGIL_HANDOFF_FD";
/// The descriptor of the old binary (opened from `/proc/self/exe`), to go back to.
pub const EXE_FD_ENV: &str = "VIGIL_HANDOFF_EXE_FD";
/// Set when a new instance could not take the state over and went back to the old binary:
/// why (the old binary continues and tells the caller).
pub const ERROR_ENV: &str = "VIGIL_HANDOFF_ERROR";
/// A handoff file larger than this is refused (a corrupt length).
const MAX_STATE: u64 = 16 << 30;

/// What `vigil --handoff-version` prints (one JSON line): the formats a binary reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    pub vigil: String,
    pub writes: u32,
    pub reads: Vec<u32>,
    /// It checks a handoff before taking it over (`--handoff-check`, the pre-flight of
    /// `vigil upgrade`). Absent from earlier vigils' answers: they cannot.
    #[serde(default)]
    pub check: bool,
    /// It tells the upgrade's guardian when its takeover is done ([`guard::READY_FD_ENV`]).
    /// Absent from earlier vigils' answers: the guardian would take them for hung.
    #[serde(default)]
    pub guarded: bool,
    /// As PID 1, it keeps the way back to the old binary itself until its takeover is done
    /// ([`fallback`]). Absent from earlier vigils' answers: as PID 1 their failed takeover
    /// would end the system.
    #[serde(default)]
    pub pid1_way_back: bool,
}

impl VersionInfo {
    pub fn ours() -> VersionInfo {
        VersionInfo {
            vigil: env!("CARGO_PKG_VERSION").to_string(),
            writes: FORMAT_VERSION,
            reads: READS.to_vec(),
            check: true,
            guarded: true,
            pid1_way_back: true,
        }
    }
}

/// Bytes in the blob area after the JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Blob {
    pub at: u64,
    pub len: u64,
}

/// The blob area being written.
#[derive(Debug, Default)]
pub struct Blobs(Vec<u8>);

impl Blobs {
    /// Appends the concatenation of `parts` as one blob.
    pub fn push(&mut self, parts: &[&[u8]]) -> Blob {
        let at = self.0.len() as u64;
        for p in parts {
            self.0.extend_from_slice(p);
        }
        Blob {
            at,
            len: self.0.len() as u64 - at,
        }
    }
}

/// Everything the next instance needs (version [`FORMAT_VERSION`]). Instants travel as
/// `CLOCK_MONOTONIC` nanoseconds ([`mono`]). Generic so that the old instance writes it from
/// references (`State<&Supervisor, &Config>`) without copying the core.
#[derive(Debug, Serialize, Deserialize)]
pub struct State<Core = Supervisor, Cfg = Config> {
    pub version: u32,
    /// The vigil version that wrote it.
    pub written_by: String,
    /// `CLOCK_MONOTONIC` nanoseconds when the old loop took the upgrade request (its last
    /// event).
    pub loop_left_at: i64,
    pub source: ConfigSource,
    pub config: Cfg,
    /// The path the next `vigil upgrade` without `--binary` executes.
    pub exe_path: PathBuf,
    /// The path the old instance ran from (it stays the default when the new binary could
    /// not take over). Added after the first version: absent there.
    #[serde(default)]
    pub previous_exe_path: Option<PathBuf>,
    pub argv: Vec<String>,
    pub core: Core,
    pub slots: Vec<SlotState>,
    /// Container output pipes (read ends), by descriptor number.
    pub pipes: Vec<PipeState>,
    /// Main processes not reaped yet: still vigil's children after the exec.
    pub mains: Vec<MainPid>,
    /// Runs adopted after a crash of an earlier vigil (not vigil's children): their pidfds.
    pub adopted: Vec<AdoptedRun>,
    /// Exec probes (not hooks) that were running: killed by the new instance (the core runs
    /// them again).
    pub probe_pids: Vec<ProbePid>,
    /// Finished runs' cgroups still to be removed (the janitor's).
    pub dying_cgroups: Vec<PathBuf>,
    /// Pods removed by reload whose cgroup directory is still to be removed.
    pub gone_pods: Vec<String>,
    /// The listening control socket.
    pub listener_fd: RawFd,
    /// The connection that asked for the upgrade: the new instance answers it.
    pub requester: Option<Requester>,
    /// Other control connections. A vigil that reads `conns` (below) takes those listed there
    /// over and ignores them here; an earlier vigil tells each that vigil re-executed, then
    /// closes it.
    pub clients: Vec<RawFd>,
    /// The journal's last reported event.
    pub journal_seq: u64,
    pub stop_signals: u32,
    #[serde(with = "mono")]
    pub started_at: std::time::Instant,
    /// How many upgrades this process has been through.
    pub upgrades: u32,
    /// The state file's text as last written (since format 2): the new instance does not
    /// write the same text again.
    #[serde(default)]
    pub statefile_text: Option<String>,
    /// Exec lifecycle hooks running (since format 2; a format-1 vigil refused to upgrade
    /// while one ran): the new instance finishes them.
    #[serde(default)]
    pub hooks: Vec<HookAttempt>,
    /// Container starts waiting for their previous cgroup to be removed (since format 2;
    /// refused before): the new instance retries them.
    #[serde(default)]
    pub deferred_spawns: Vec<DeferredSpawn>,
    /// The probe result counters and duration histograms behind the metrics (added to format
    /// 2 later: absent from earlier states, whose counters start again at zero).
    #[serde(default)]
    pub probe_stats: Vec<ProbeFigures>,
    /// The process that wrote it (added to format 2 later). A takeover in another process —
    /// the upgrade's guardian going back to the old binary ([`guard`]) — holds no container
    /// as its child and watches them through pidfds instead.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Whether `<root>` is vigil's and where vigil came from (added to format 2 later: a
    /// state without it leaves the subtree in place at shutdown, as before).
    #[serde(default)]
    pub cgroup_subtree: Option<crate::cgroup::Ownership>,
    /// Which pods the run started (`run POD…`, `--profile`, `--no-deps`), for its reloads
    /// (added to format 2 later: a state without it had no selection, all pods started).
    #[serde(default)]
    pub selection: crate::config::select::Selection,
    /// Control connections open at the exec (added to format 2 later; each also in
    /// `clients`, for a vigil that reads only those): the new instance's server takes them
    /// over and answers them.
    #[serde(default)]
    pub conns: Vec<ConnState>,
}

/// One control connection handed over: its descriptor and what the old instance held of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnState {
    pub fd: RawFd,
    /// Received and not answered yet (the next requests).
    pub input: Blob,
    /// Not sent yet (the rest of a reply; a streamed reply's end and the upgrade's notice).
    pub output: Blob,
    /// What was sent ends inside a line.
    pub sent_open: bool,
    /// Close once `output` is sent.
    pub closing: bool,
    /// The peer closed its writing side.
    pub eof: bool,
    /// A `start`/`stop`/`restart` the old instance carried out whose reply waits for its
    /// target's state (`wait_ms`): the new instance waits on and answers it (added to format 2
    /// later: a state without it had none, such a connection was cut with the notice).
    #[serde(default)]
    pub wait: Option<WaitState>,
}

/// A request waiting for its target's state, handed over with its connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WaitState {
    /// The request's id, as JSON text.
    pub id: String,
    /// The command's own reply message (`restarting pod web`), sent with the outcome.
    pub message: String,
    pub target: crate::control::wire::wait::Target,
    /// When the command was carried out (a run begun before it is not its outcome).
    #[serde(with = "mono")]
    pub taken: std::time::Instant,
    /// The `wait_ms` asked for (the timed-out message names it).
    pub timeout: std::time::Duration,
    #[serde(with = "mono")]
    pub deadline: std::time::Instant,
}

/// One (container, probe)'s metrics figures (`crate::metrics::probes::ProbeCounters`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeFigures {
    pub key: ContainerKey,
    /// `startup`, `liveness`, `readiness` or `hook`.
    pub kind: String,
    pub successes: u64,
    pub failures: u64,
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_seconds: f64,
}

/// An exec lifecycle hook in flight: its process is vigil's child and runs on across the
/// exec; the new instance reads the rest of its output, reaps it and reports its result to
/// the core under the same sequence number, as the old one would have. Its time limit is the
/// core's (carried with the core's state), so it continues where it was.
#[derive(Debug, Serialize, Deserialize)]
pub struct HookAttempt {
    pub key: ContainerKey,
    pub generation: Generation,
    pub seq: u64,
    pub pid: u32,
    /// Its output pipe's read end, while open.
    pub pipe_fd: Option<RawFd>,
    /// The output read so far (kept for the result's message).
    pub output: Blob,
    /// Its cgroup (below the container's), and that cgroup's descriptors.
    pub cgroup: Option<PathBuf>,
    pub cgroup_fds: Option<CgroupFds>,
    /// When it started (its result's duration).
    #[serde(with = "mono")]
    pub started: std::time::Instant,
}

/// A container start the old instance deferred until its previous cgroup is removed.
#[derive(Debug, Serialize, Deserialize)]
pub struct DeferredSpawn {
    pub key: ContainerKey,
    pub generation: Generation,
    pub pod: String,
    #[serde(with = "specs::arc")]
    pub container: Arc<ContainerSpec>,
    pub init: bool,
    /// When it looks again.
    #[serde(with = "mono")]
    pub at: std::time::Instant,
}

impl<Core, Cfg> State<Core, Cfg> {
    /// Every descriptor number the state hands over besides the state file and the old
    /// binary (the new instance marks them close-on-exec at once, so nothing it starts
    /// inherits them, and clears the mark again only to go back to the old binary).
    pub fn handed_fds(&self) -> Vec<RawFd> {
        let cgroup = |c: &CgroupFds| {
            [c.dir, c.procs, c.events]
                .into_iter()
                .chain(c.memory_events)
                .collect::<Vec<_>>()
        };
        let mut fds = vec![self.listener_fd];
        fds.extend(self.pipes.iter().map(|p| p.fd));
        fds.extend(self.adopted.iter().map(|a| a.pidfd));
        fds.extend(
            self.slots
                .iter()
                .filter_map(|s| s.run.as_ref()?.cgroup_fds.as_ref())
                .flat_map(cgroup),
        );
        fds.extend(self.slots.iter().filter_map(|s| s.run.as_ref()?.notify_fd));
        for h in &self.hooks {
            fds.extend(h.pipe_fd);
            fds.extend(h.cgroup_fds.as_ref().map(cgroup).unwrap_or_default());
        }
        fds.extend(self.requester.as_ref().map(|r| r.fd));
        fds.extend(&self.clients);
        fds.extend(self.conns.iter().map(|c| c.fd));
        fds
    }

    /// The core, and the rest.
    pub fn split_core(self) -> (Core, State<(), Cfg>) {
        let State {
            version,
            written_by,
            loop_left_at,
            source,
            config,
            exe_path,
            previous_exe_path,
            argv,
            core,
            slots,
            pipes,
            mains,
            adopted,
            probe_pids,
            dying_cgroups,
            gone_pods,
            listener_fd,
            requester,
            clients,
            journal_seq,
            stop_signals,
            started_at,
            upgrades,
            statefile_text,
            hooks,
            deferred_spawns,
            probe_stats,
            pid,
            cgroup_subtree,
            selection,
            conns,
        } = self;
        let rest = State {
            version,
            written_by,
            loop_left_at,
            source,
            config,
            exe_path,
            previous_exe_path,
            argv,
            core: (),
            slots,
            pipes,
            mains,
            adopted,
            probe_pids,
            dying_cgroups,
            gone_pods,
            listener_fd,
            requester,
            clients,
            journal_seq,
            stop_signals,
            started_at,
            upgrades,
            statefile_text,
            hooks,
            deferred_spawns,
            probe_stats,
            pid,
            cgroup_subtree,
            selection,
            conns,
        };
        (core, rest)
    }
}

/// One container slot of the shell.
#[derive(Debug, Serialize, Deserialize)]
pub struct SlotState {
    pub key: ContainerKey,
    pub pod: String,
    pub name: String,
    #[serde(with = "specs::arc")]
    pub spec: Arc<ContainerSpec>,
    /// The definition's hash recorded at its last spawn (for adoption after a crash).
    pub spec_hash: u64,
    /// The ring's bookkeeping; its stamps travel in `stamps` and `previous_stamps` since
    /// format 2 (format 1 wrote them here, as JSON numbers).
    pub ring: RingMeta,
    pub current: Blob,
    pub previous: Blob,
    /// The ring's read-time stamps, 16 bytes each ([`stamps_blob`]).
    #[serde(default)]
    pub stamps: Blob,
    #[serde(default)]
    pub previous_stamps: Blob,
    pub run: Option<RunState>,
}

/// Log ring stamps `(offset, wall-clock nanoseconds)` as raw bytes: 8 bytes little-endian
/// each.
pub fn stamps_blob(blobs: &mut Blobs, stamps: &[(u64, i64)]) -> Blob {
    let at = blobs.0.len() as u64;
    blobs.0.reserve(stamps.len() * 16);
    for (offset, nanos) in stamps {
        blobs.0.extend_from_slice(&offset.to_le_bytes());
        blobs.0.extend_from_slice(&nanos.to_le_bytes());
    }
    Blob {
        at,
        len: blobs.0.len() as u64 - at,
    }
}

/// The stamps of [`stamps_blob`] (`None` when out of range or not a whole number of them).
pub fn stamps_of(area: &[u8], b: Blob) -> Option<Vec<(u64, i64)>> {
    let bytes = blob(area, b)?;
    if bytes.len() % 16 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(16)
            .map(|c| {
                let mut o = [0u8; 8];
                let mut n = [0u8; 8];
                o.copy_from_slice(&c[..8]);
                n.copy_from_slice(&c[8..]);
                (u64::from_le_bytes(o), i64::from_le_bytes(n))
            })
            .collect(),
    )
}

/// A slot's run.
#[derive(Debug, Serialize, Deserialize)]
pub struct RunState {
    pub generation: Generation,
    pub pid: Option<u32>,
    /// Re-opened by path (its `memory.events` watched again).
    pub cgroup: Option<PathBuf>,
    pub oom_baseline: OomCounters,
    pub oom_seen: OomCounters,
    pub exited: bool,
    pub message_stamp: Option<(u64, i64, i64, u64)>,
    /// The cgroup's open descriptors, handed over (since format 2; without them the new
    /// instance opens the cgroup again by path).
    #[serde(default)]
    pub cgroup_fds: Option<CgroupFds>,
    /// The main process's start time as the state file records it (since format 2; without
    /// it the new instance reads `/proc/PID/stat`).
    #[serde(default)]
    pub proc_start: Option<u64>,
    /// Its sd_notify socket (`notify = true`), handed over so that a sender holding it
    /// connected is still heard (absent before this field: the socket is made again).
    #[serde(default)]
    pub notify_fd: Option<RawFd>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PipeState {
    pub key: ContainerKey,
    pub pid: u32,
    /// The container's stderr (else its stdout).
    pub stderr: bool,
    /// The run it belongs to.
    pub run: Option<Generation>,
    pub fd: RawFd,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct MainPid {
    pub pid: u32,
    pub key: ContainerKey,
    pub generation: Generation,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct AdoptedRun {
    pub key: ContainerKey,
    pub generation: Generation,
    pub pidfd: RawFd,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbePid {
    pub pid: u32,
    pub cgroup: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Requester {
    pub fd: RawFd,
    /// The request's `id`, as JSON text.
    pub id: String,
}

/// Why a handoff file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading the handoff state (fd {fd}): {source}")]
    Io { fd: RawFd, source: io::Error },
    #[error("the handoff state (fd {fd}) is not a vigil handoff: {what}")]
    Framing { fd: RawFd, what: String },
    #[error(
        "the handoff state is format version {found}; this vigil reads version{} {}",
        if READS.len() > 1 { "s" } else { "" },
        READS.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    )]
    Version { found: u32 },
    #[error("the handoff state (format version {version}) does not parse: {source}")]
    Parse {
        version: u32,
        source: serde_json::Error,
    },
}

/// Writes `state` and the blob area into a new memory file (close-on-exec until handed over),
/// in the format [`FORMAT_VERSION`]: `{"version":2,"specs":[...],"state":{...}}`, each
/// container definition once in `specs` ([`specs`]).
pub fn write<C: Serialize, F: Serialize>(state: &State<C, F>, blobs: Blobs) -> io::Result<OwnedFd> {
    let table = specs::Writing::start();
    let body = serde_json::to_vec(state).map_err(io::Error::other)?;
    let table = table.finish();
    let fd =
        nix::sys::memfd::memfd_create(c"vigil-handoff", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .map_err(io::Error::from)?;
    let open = format!("{{\"version\":{FORMAT_VERSION},\"specs\":");
    let len = open.len() + table.len() + b",\"state\":".len() + body.len() + 1;
    let mut head = Vec::with_capacity(16 + len - body.len());
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&(len as u64).to_le_bytes());
    head.extend_from_slice(open.as_bytes());
    head.extend_from_slice(&table);
    head.extend_from_slice(b",\"state\":");
    let mut file = File::from(fd);
    file.write_all(&head)?;
    file.write_all(&body)?;
    file.write_all(b"}")?;
    file.write_all(&blobs.0)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

/// Reads a handoff file: the state and the blob area. `fd` stays open (a new instance that
/// cannot take over hands it back to the old binary).
pub fn read(fd: &OwnedFd) -> Result<(State, Vec<u8>), ReadError> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    let io = |source| ReadError::Io { fd: raw, source };
    let framing = |what: &str| ReadError::Framing {
        fd: raw,
        what: what.to_string(),
    };
    let mut file = File::from(fd.try_clone().map_err(io)?);
    let size = file.metadata().map_err(io)?.len();
    if size > MAX_STATE {
        return Err(framing("larger than 16 GiB"));
    }
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut bytes = Vec::with_capacity(size as usize);
    file.read_to_end(&mut bytes).map_err(io)?;
    let (state, end) = parse_state(&bytes).map_err(|e| match e {
        ReadError::Framing { what, .. } => ReadError::Framing { fd: raw, what },
        other => other,
    })?;
    // The blob area, without copying it again.
    bytes.drain(..end);
    Ok((state, bytes))
}

/// Parses the bytes of a handoff file (see [`read`]).
#[cfg(test)]
pub fn parse(bytes: &[u8]) -> Result<(State, Vec<u8>), ReadError> {
    let (state, end) = parse_state(bytes)?;
    Ok((state, bytes[end..].to_vec()))
}

/// The state, and where the blob area begins.
fn parse_state(bytes: &[u8]) -> Result<(State, usize), ReadError> {
    let framing = |what: &str| ReadError::Framing {
        fd: -1,
        what: what.to_string(),
    };
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(framing("no VIGILHO magic"));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[8..16]);
    let len = u64::from_le_bytes(len);
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(16))
        .filter(|e| *e <= bytes.len())
        .ok_or_else(|| framing("the state's length runs past the end of the file"))?;
    let json = &bytes[16..end];
    let version = match leading_version(json) {
        Some(v) => v,
        None => {
            #[derive(Deserialize)]
            struct Versioned {
                version: u32,
            }
            let v: Versioned = serde_json::from_slice(json)
                .map_err(|e| framing(&format!("no format version: {e}")))?;
            v.version
        }
    };
    if !READS.contains(&version) {
        return Err(ReadError::Version { found: version });
    }
    log::debug!("upgrade: the state is {} bytes of JSON", json.len());
    let parse_error = |source| ReadError::Parse { version, source };
    let state: State = if version == 1 {
        // Every definition in full where it is held.
        serde_json::from_slice(json).map_err(parse_error)?
    } else {
        #[derive(Deserialize)]
        struct Doc {
            #[allow(dead_code)]
            version: u32,
            /// Read first (it comes first): the table the state's indices refer to.
            #[serde(deserialize_with = "specs::install")]
            #[allow(dead_code)]
            specs: (),
            state: State,
        }
        let _table = specs::Reading::start();
        let doc: Doc = serde_json::from_slice(json).map_err(parse_error)?;
        doc.state
    };
    Ok((state, end))
}

/// The version of a state that begins `{"version":N,` (as every version writes it), without
/// reading the rest.
fn leading_version(json: &[u8]) -> Option<u32> {
    let rest = json.strip_prefix(br#"{"version":"#)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// The bytes of `blob` in `area` (empty when out of range).
pub fn blob(area: &[u8], blob: Blob) -> Option<&[u8]> {
    let at = usize::try_from(blob.at).ok()?;
    let end = at.checked_add(usize::try_from(blob.len).ok()?)?;
    area.get(at..end)
}

/// What a starting vigil finds in its environment when it is the new instance of an upgrade.
#[derive(Debug)]
pub struct Inherited {
    pub state: OwnedFd,
    pub exe: Option<OwnedFd>,
    /// The previous new instance could not take over and came back here: why.
    pub error: Option<String>,
    /// The upgrade's guardian's pipe: a byte on it once the takeover is done.
    pub ready: Option<OwnedFd>,
}

/// Takes the handoff descriptors named in the environment (each at most once per process).
pub fn inherited() -> Option<Inherited> {
    let fd = env_fd(FD_ENV)?;
    let exe = env_fd(EXE_FD_ENV);
    let error = std::env::var(ERROR_ENV).ok().filter(|e| !e.is_empty());
    let ready = env_fd(guard::READY_FD_ENV);
    Some(Inherited {
        state: own_fd(fd)?,
        exe: exe.and_then(own_fd),
        error,
        ready: ready.and_then(own_fd),
    })
}

fn env_fd(name: &str) -> Option<RawFd> {
    std::env::var(name)
        .ok()?
        .parse::<RawFd>()
        .ok()
        .filter(|fd| *fd > 2)
}

/// Takes ownership of an inherited descriptor, if it is open, and makes it close-on-exec
/// again (it was cleared for the handoff: left so, it would leak into every container).
#[allow(unsafe_code)]
pub fn own_fd(fd: RawFd) -> Option<OwnedFd> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    if fd < 0 {
        return None;
    }
    // SAFETY: F_SETFD on a raw number only sets its flag, or fails with EBADF when it is not
    // open; no memory is involved and nothing else holds the number (handed over to us).
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let open = fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).is_ok();
    // SAFETY: the descriptor was handed over by the old instance for this process to own, is
    // open (checked above), and each number is taken once (the state names it once).
    open.then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A close-on-exec duplicate of an inherited descriptor, leaving the number itself as it was
/// (so that a new instance that fails to start can still hand it back to the old binary).
#[allow(unsafe_code)]
pub fn dup_fd(fd: RawFd) -> Option<OwnedFd> {
    if fd < 0 {
        return None;
    }
    // SAFETY: the number is borrowed only for the dup; EBADF when it is not open.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    borrowed.try_clone_to_owned().ok()
}

#[cfg(test)]
mod tests;
