//! After a crash of vigil (issue 17.4): finding the containers an earlier vigil left running,
//! and then adopting or replacing each one (`[supervisor] on_restart`); and the adopted runs'
//! process descriptors.
//!
//! Found: with cgroups, every `<root>/<pod>/<container>` whose `cgroup.procs` is not empty and
//! whose main process the state file names (pid and start time); without, every main process
//! the state file names that is still the same process. Adopted when `on_restart = "adopt"`,
//! the container is still in the config with the same definition ([`statefile::spec_hash`]),
//! and the core takes it ([`crate::core::Supervisor::adopt`]: a regular container or a
//! sidecar; its pod's plain init containers count as completed). Everything else is killed as before (`cgroup.kill` of the cgroups
//! left, or the state file's processes) and starts afresh. Then the core takes back the
//! earlier vigil's record from the state file ([`crate::core::recall`]: restart counts, last
//! states, back-off, ended containers, events, ages); this vigil keeps its own record there
//! ([`Runs::remember`]).
//!
//! Owns: the pidfd of each adopted run (pidfd_open(2)), registered with the poll: an adopted
//! process is not vigil's child, so it cannot be reaped, and its exit status cannot be known;
//! the pidfd becomes readable when it exits, and the run ends with an unknown status. Signals
//! to an adopted run go through its pidfd (never to a recycled pid). Its output pipes come from
//! the earlier vigil's output holder (`runtime::holder`) when it kept them: read on, and given
//! to this vigil's holder; without them nothing of the run is captured and its writes fail:
//! the core is told (`OutputLost`), and by `[supervisor] on_output_lost` the run is restarted
//! (the default) or kept, marked.
//!
//! Must not: adopt a process whose start time it has not verified, or one whose definition
//! changed; make lifecycle decisions (the core's).

use std::collections::HashMap;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use log::{debug, info, warn};
use mio::{Interest, Registry, Token};

use super::capture::PipeFrom;
use super::component::Link;
use super::runs::Runs;
use super::tokens::{self, Watched};
use crate::config::spec::Config;
use crate::config::spec::{ContainerSpec, OnOutputLost, OnRestart};
use crate::core::KeptEnd;
use crate::core::recall::{Recalled, Recollection};
use crate::core::{ContainerKey, Generation, Supervisor};
use crate::runtime::fdstore::PipeName;
use crate::runtime::holder;
use crate::runtime::slots::Run;
use crate::runtime::statefile::{self, Ended, Entry, MainInfo};

/// A container main process found running at start.
#[derive(Debug)]
struct Leftover {
    /// `pod/container`.
    label: String,
    pid: u32,
    start: u64,
    /// What the state file recorded for it (`None`: nothing, or an older vigil's line).
    main: Option<MainInfo>,
    /// Its cgroup, with cgroups.
    cgroup: Option<PathBuf>,
}

/// An adopted run whose output pipes were not kept.
#[derive(Debug)]
struct LostOutput {
    key: ContainerKey,
    generation: Generation,
    label: String,
    pid: u32,
}

/// Why a container found running is replaced rather than adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replaced {
    /// `on_restart = "replace"`.
    Configured,
    /// The pod or container is no longer in the config.
    NotInConfig,
    /// The definition changed since it was started.
    DefinitionChanged,
    /// The state file has no record to adopt it with (an older vigil's, or none).
    NoRecord,
    /// It exited before it could be adopted.
    Gone,
    /// The core would not take it (a plain init container: it should have completed).
    NotAdoptable,
    /// Its cgroup or pidfd could not be opened or watched.
    Unwatchable,
}

impl fmt::Display for Replaced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Replaced::Configured => "on_restart = \"replace\"",
            Replaced::NotInConfig => "no longer in the config",
            Replaced::DefinitionChanged => "its definition changed since it was started",
            Replaced::NoRecord => "no adoption record in the state file",
            Replaced::Gone => "it exited meanwhile",
            Replaced::NotAdoptable => {
                "it cannot be adopted (a plain init container, or its pod had already begun here)"
            }
            Replaced::Unwatchable => "it cannot be watched",
        })
    }
}

/// The adopted runs' pidfds, each registered under its container's token.
pub struct Adopted {
    registry: Rc<Registry>,
    runs: HashMap<ContainerKey, (Generation, Watched<OwnedFd>)>,
}

impl Adopted {
    pub fn new(registry: Rc<Registry>) -> Adopted {
        Adopted {
            registry,
            runs: HashMap::new(),
        }
    }

    /// Every adopted run's pidfd (handed over by `vigil upgrade`).
    pub fn fds(&self) -> Vec<(ContainerKey, Generation, std::os::fd::RawFd)> {
        use std::os::fd::AsRawFd;
        self.runs
            .iter()
            .map(|(k, (g, w))| (*k, *g, w.as_raw_fd()))
            .collect()
    }

    pub(super) fn watch(&mut self, key: ContainerKey, generation: Generation, fd: OwnedFd) -> bool {
        match Watched::new(
            &self.registry,
            fd,
            AsFd::as_fd,
            tokens::adopted_token(key),
            Interest::READABLE,
        ) {
            Ok(w) => {
                self.runs.insert(key, (generation, w));
                true
            }
            Err((_, e)) => {
                warn!("cannot watch an adopted process: {e}");
                false
            }
        }
    }

    /// The adopted run whose pidfd became readable: it exited.
    pub fn on_event(&mut self, token: Token) -> Option<(ContainerKey, Generation)> {
        let key = tokens::adopted_key(token);
        let (generation, _) = self.runs.remove(&key)?;
        Some((key, generation))
    }

    /// Sends `sig` through the pidfd of `key`'s adopted run `generation`; `None` when that run
    /// is not an adopted one.
    pub fn signal(
        &self,
        key: ContainerKey,
        generation: Generation,
        sig: i32,
    ) -> Option<std::io::Result<()>> {
        let (g, fd) = self.runs.get(&key)?;
        (*g == generation).then(|| statefile::pidfd_signal(fd, sig))
    }

    /// The container slot is gone: stop watching.
    pub fn forget(&mut self, key: ContainerKey) {
        self.runs.remove(&key);
    }
}

impl Runs {
    /// Start-up, after the core is built and before its first actions run: finds what an
    /// earlier vigil left (see the module docs), adopts what it can, kills the rest. Returns
    /// the journal's sequence number to go on from when the earlier vigil's events were taken
    /// back.
    pub(super) fn take_over_leftovers(&mut self, now: Instant, link: &mut Link<'_>) -> Option<u64> {
        let statefile::Previous {
            entries: previous,
            ended,
            record,
        } = self.tracker.previous();
        let adopt = link.config.supervisor.on_restart == OnRestart::Adopt;
        let mut memory = record.filter(|_| adopt).and_then(|json| {
            serde_json::from_str::<Recollection>(&json)
                .map_err(|e| warn!("the state file's record does not parse: {e}; not taken back"))
                .ok()
        });
        let mut journal_seq = None;
        if let Some(m) = memory.as_mut() {
            for e in &ended {
                if let Some((pod, name)) = e.label.split_once('/') {
                    m.ended_since(pod, name, e.spec, e.end, now);
                }
            }
            // The earlier vigil's events come first (it logged them).
            journal_seq = Some(link.core.recall_events(m));
        }
        let found = match &self.cgroups {
            Some(m) => in_cgroups(m.populated_containers(), &previous),
            None => alive_mains(&previous),
        };
        let mut kept_labels = HashMap::new();
        let mut kept_dirs = Vec::new();
        let mut lost = Vec::new();
        for l in found {
            match self.adopt_one(&l, now, &mut lost, link) {
                Ok(()) => {
                    kept_labels.insert(l.label.clone(), l.pid);
                    kept_dirs.extend(l.cgroup.clone());
                }
                Err(why) => info!(
                    "{}: pid {} left running by an earlier vigil is replaced: {why}",
                    l.label, l.pid
                ),
            }
        }
        match memory {
            Some(m) => self.recall(&m, now, link),
            None if adopt => self.keep_ended(&ended, &kept_labels, now, link),
            None => {}
        }
        output_lost(lost, now, link);
        match &self.cgroups {
            Some(m) => {
                for stale in m.sweep_stale_except(&kept_dirs) {
                    warn!(
                        "cleaned up cgroup left by an earlier vigil: {}",
                        stale.display()
                    );
                }
            }
            None => self.tracker.kill_leftovers(&previous, &kept_labels),
        }
        self.remember(now, link.core, link.config);
        self.tracker.set_scales(link.config.scales());
        self.tracker.flush();
        if !self.held.is_empty() {
            debug!(
                "{} held output pipe(s) of runs not adopted closed",
                self.held.len()
            );
            self.held.clear();
        }
        self.fdstore.drop_unclaimed();
        journal_seq
    }

    /// An adopted run's output: its pipes as the service manager's store or the earlier
    /// vigil's holder kept them, read again and given to this vigil's holder (and kept in the
    /// store). Returns false when one or both were not kept (no
    /// holder then, it died, or it did not have them): that output is lost.
    fn adopt_output(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        label: &str,
        pid: u32,
    ) -> bool {
        let mut found = 0;
        for stderr in [false, true] {
            let name = holder::name(label, pid, stderr);
            let Some(fd) = self.held.remove(&name) else {
                continue;
            };
            found += 1;
            self.holder.keep(&name, fd.as_fd());
            self.fdstore
                .keep(&PipeName::new(label, pid, stderr), fd.as_fd());
            let stream = if stderr {
                crate::logs::Stream::Stderr
            } else {
                crate::logs::Stream::Stdout
            };
            self.capture.add_output(
                key,
                pid,
                fd,
                stream,
                Some(generation),
                PipeFrom::Handoff,
                None,
            );
        }
        found == 2
    }

    /// Takes back the core's record an earlier vigil left (after adoption: see
    /// [`crate::core::recall`]), and logs what became of each container.
    fn recall(&mut self, memory: &Recollection, now: Instant, link: &mut Link<'_>) {
        let spec_of = |_: ContainerKey, spec: &ContainerSpec| statefile::spec_hash(spec);
        let done = link.core.recall(now, memory, &spec_of);
        for (label, how) in done {
            match how {
                Recalled::History => {
                    debug!("{label}: {} from before vigil restarted", how.describe())
                }
                _ => info!("{label}: {} (before vigil restarted)", how.describe()),
            }
        }
        let now_ended = self.kept_ends(link.core, link.config);
        self.tracker.set_ended(now_ended);
    }

    /// Gives the state file the core's record ([`crate::core::recall`]) when the core changed
    /// (a new event: every change of a container's state records one), at most once per
    /// [`statefile::RECORD_INTERVAL`]; with `on_restart = "adopt"` only (nothing else reads
    /// it).
    pub(super) fn remember(&mut self, now: Instant, core: &Supervisor, config: &Config) {
        if config.supervisor.on_restart != OnRestart::Adopt {
            return;
        }
        let seq = core.last_event_seq();
        if !self.tracker.record_wanted(seq, now) {
            return;
        }
        let slots = &self.slots;
        let spec_of = |key: ContainerKey, spec: &ContainerSpec| {
            slots
                .get(&key)
                .map(|s| s.spec_hash)
                .unwrap_or_else(|| statefile::spec_hash(spec))
        };
        match serde_json::to_string(&core.recollection(&spec_of)) {
            Ok(json) => self.tracker.set_record(seq, &json, now),
            Err(e) => warn!("cannot record the core's state for a restart after a crash: {e}"),
        }
    }

    fn adopt_one(
        &mut self,
        l: &Leftover,
        now: Instant,
        lost: &mut Vec<LostOutput>,
        link: &mut Link<'_>,
    ) -> Result<(), Replaced> {
        if link.config.supervisor.on_restart == OnRestart::Replace {
            return Err(Replaced::Configured);
        }
        let (pod, name) = l.label.split_once('/').ok_or(Replaced::NotInConfig)?;
        let key = link
            .core
            .container_key(pod, name)
            .ok_or(Replaced::NotInConfig)?;
        let spec = link
            .config
            .pods
            .iter()
            .find(|p| p.name == pod)
            .and_then(|p| {
                p.containers
                    .iter()
                    .chain(&p.init_containers)
                    .find(|c| c.name == name)
            })
            .ok_or(Replaced::NotAdoptable)?;
        let main = l.main.ok_or(Replaced::NoRecord)?;
        if main.spec != statefile::spec_hash(spec) {
            return Err(Replaced::DefinitionChanged);
        }
        let pidfd = statefile::pidfd_verified(l.pid, l.start).ok_or(Replaced::Gone)?;
        let cgroup = match (&self.cgroups, &l.cgroup) {
            (Some(m), Some(_)) => Some(m.open_container(pod, name).map_err(|e| {
                debug!("{e}");
                Replaced::Unwatchable
            })?),
            _ => None,
        };
        let started_at = statefile::age_of(l.start)
            .and_then(|age| now.checked_sub(age))
            .unwrap_or(now);
        let generation = link
            .core
            .adopt(now, key, l.pid, started_at, main.restarts)
            .ok_or(Replaced::NotAdoptable)?;
        // From here on the core has it: a failure to watch it is the core's to hear as an exit.
        let watched = self.adopted.watch(key, generation, pidfd);
        let spec = spec.clone();
        self.ensure_slot(key, pod, &spec, &link.config.supervisor);
        let oom_seen = cgroup
            .as_ref()
            .map(|c| c.oom_baseline())
            .unwrap_or_default();
        let cgroup = cgroup.map(|cg| self.watch_memory_events(key, cg));
        if let Some(slot) = self.slots.get_mut(&key) {
            slot.log.new_run();
            slot.run = Some(Run {
                generation,
                pid: Some(l.pid),
                oom_seen,
                cgroup,
                exited: false,
                message_stamp: None,
            });
        }
        self.reopen_notify(key, link.config, link.notify, None);
        self.tracker.started(key, &l.label, l.pid, main);
        if !self.adopt_output(key, generation, &l.label, l.pid) {
            lost.push(LostOutput {
                key,
                generation,
                label: l.label.clone(),
                pid: l.pid,
            });
        }
        info!(
            "{}: adopted pid {} left running by an earlier vigil (restart count {})",
            l.label, l.pid, main.restarts
        );
        if !watched {
            // Without a watch its exit would go unnoticed: end the run now (it is killed).
            self.kill_run(key, Some(generation));
            self.on_adopted_exit(key, generation, now, link);
        }
        Ok(())
    }

    /// Containers that had ended for good under the earlier vigil stay so (unless one was
    /// found running and adopted meanwhile): stopped by an operator, or completed (while its
    /// definition is the same).
    fn keep_ended(
        &mut self,
        ended: &[Ended],
        adopted: &HashMap<String, u32>,
        now: Instant,
        link: &mut Link<'_>,
    ) {
        for e in ended.iter().filter(|e| !adopted.contains_key(&e.label)) {
            let Some((pod, name)) = e.label.split_once('/') else {
                continue;
            };
            let Some(key) = link.core.container_key(pod, name) else {
                continue;
            };
            if e.end == KeptEnd::Completed
                && Some(e.spec) != config_spec_hash(link.config, pod, name)
            {
                continue;
            }
            let how = match e.end {
                KeptEnd::Stopped => "stopped, as an operator left it",
                KeptEnd::Completed => "completed, as it was",
            };
            if link.core.keep_ended(now, key, e.end) {
                info!("{}: kept {how} before vigil restarted", e.label);
            } else {
                info!("{}: was {how}, but starts again with its pod", e.label);
            }
        }
        let now_ended = self.kept_ends(link.core, link.config);
        self.tracker.set_ended(now_ended);
    }

    /// The containers that have ended for good now, for the state file.
    pub(super) fn kept_ends(&self, core: &Supervisor, config: &Config) -> Vec<Ended> {
        core.kept_ends()
            .into_iter()
            .map(|(key, pod, name, end)| Ended {
                label: format!("{pod}/{name}"),
                end,
                spec: self
                    .slots
                    .get(&key)
                    .map(|s| s.spec_hash)
                    .or_else(|| config_spec_hash(config, pod, name))
                    .unwrap_or(0),
            })
            .collect()
    }

    /// An adopted run's pidfd is readable: its process exited, status unknown.
    pub(super) fn on_adopted(&mut self, token: Token, now: Instant, link: &mut Link<'_>) {
        if let Some((key, generation)) = self.adopted.on_event(token) {
            self.on_adopted_exit(key, generation, now, link);
        }
    }
}

/// Adopted runs whose output pipes were not kept (`on_output_lost`): each is told to the
/// core (an `OutputLost` event, its status mark, a restart by default) and said at warn.
/// After the record is taken back, so that a restart counts on top of the recorded count.
fn output_lost(lost: Vec<LostOutput>, now: Instant, link: &mut Link<'_>) {
    let policy = link.config.supervisor.on_output_lost;
    for l in lost {
        let restart = policy == OnOutputLost::Restart;
        if !link.core.output_lost(now, l.key, l.generation, restart) {
            continue;
        }
        let then = if restart {
            "restarting it (on_output_lost = \"restart\")"
        } else {
            "kept running as configured (on_output_lost = \"keep\"): its writes to stdout \
             and stderr fail"
        };
        warn!(
            "{}: the output pipes of pid {} were not kept across the crash of vigil (no \
             output holder had them): its output is lost; {then}",
            l.label, l.pid
        );
    }
}

/// [`statefile::spec_hash`] of `pod/container` in the config.
fn config_spec_hash(config: &Config, pod: &str, name: &str) -> Option<u64> {
    config
        .pods
        .iter()
        .find(|p| p.name == pod)?
        .containers
        .iter()
        .find(|c| c.name == name)
        .map(|c| statefile::spec_hash(c))
}

/// With cgroups: the populated container cgroups, each with the recorded main process found in
/// it (or, with none, its first process: it is then replaced).
fn in_cgroups(
    populated: Vec<(String, String, PathBuf, Vec<i32>)>,
    previous: &[Entry],
) -> Vec<Leftover> {
    populated
        .into_iter()
        .map(|(pod, container, dir, pids)| {
            let label = format!("{pod}/{container}");
            let recorded = previous.iter().find(|e| {
                e.label == label
                    && e.main.is_some()
                    && pids.contains(&(e.pid as i32))
                    && statefile::read_stat(e.pid).is_some_and(|s| s.start == e.start)
            });
            match recorded {
                Some(e) => Leftover {
                    label,
                    pid: e.pid,
                    start: e.start,
                    main: e.main,
                    cgroup: Some(dir),
                },
                None => Leftover {
                    label,
                    pid: pids[0] as u32,
                    start: 0,
                    main: None,
                    cgroup: Some(dir),
                },
            }
        })
        .collect()
}

/// Without cgroups: the recorded main processes that are still the same processes.
fn alive_mains(previous: &[Entry]) -> Vec<Leftover> {
    previous
        .iter()
        .filter(|e| e.main.is_some())
        .filter(|e| {
            statefile::read_stat(e.pid).is_some_and(|s| s.start == e.start && s.state != 'Z')
        })
        .map(|e| Leftover {
            label: e.label.clone(),
            pid: e.pid,
            start: e.start,
            main: e.main,
            cgroup: None,
        })
        .collect()
}
