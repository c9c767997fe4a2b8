//! Hooks on events (`[[supervisor.on_event]]`, docs/behaviour.md §5.7): every event the core
//! records is matched against each hook's filter and, when it matches, delivered — an `exec`
//! hook's command run with the event as JSON on stdin and in `VIGIL_EVENT_*` variables, or a
//! webhook's `POST` of the same JSON — never on the loop's time.
//!
//! Owns: per hook, its bounded queue of events waiting (retries included) and its deliveries
//! under way (at most `max_concurrent`): an exec hook's process (cloned without waiting for
//! its exec, as exec probes are: `process::spawn_pipelined`; its report pipe and output pipe
//! are watched under the delivery's token), a webhook's socket (a [`NetProbe`] driven by
//! readiness events); their timeouts (this component's deadline); the counters of the
//! metrics (`vigil_event_hook_*`); the seq of the last event it looked at.
//!
//! A queue that is full drops the event: counted, and said in vigil's log at most once a
//! second. A failed webhook delivery is tried again after 1 s, 2 s, 4 s … (at most 30 s)
//! up to `retries` times, waiting in the queue meanwhile. A delivery that finally fails
//! records a Warning `EventHookFailed` event, which no hook ever receives (a hook never
//! triggers itself: `config::on_event`).
//!
//! An exec hook runs in vigil's own cgroup, in a session of its own (the child calls `setsid`):
//! at its end or timeout its process group is SIGKILLed, so nothing it started outlives it.
//!
//! Must not: wait for anything (a child's exec or exit, a peer), reap (the reaper reports an
//! exit through [`EventHooks::on_exit`]), or start more than [`STARTS_PER_TURN`] deliveries in
//! one turn.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use log::{debug, info, warn};
use mio::{Interest, Registry, Token};

use super::component::{Component, Link};
use super::kill::kill_tree;
use super::reaper::{PidOwner, Reaper};
use super::tokens::{Owner, TokenSpace, Watched};
use crate::config::on_event::{EventKind, OnEventAction, OnEventSpec};
use crate::config::spec::ContainerSpec;
use crate::control::time::WallClock;
use crate::core::{EventType, ProbeOutcome, Supervisor};
use crate::metrics::HookFigures;
use crate::probe::NetProbe;
use crate::process::{self, PendingExec, Stdio};

/// Deliveries started per loop turn, all hooks together (each is a clone or a connect).
pub const STARTS_PER_TURN: usize = 16;
/// What is kept of an exec hook's output for its failure message.
const OUTPUT_KEPT: usize = 4096;
/// What is read of it per readiness event.
const READ_CAP: usize = 64 * 1024;
/// The first retry of a webhook waits this long, each next one twice as long …
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// … up to this.
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Drops are said in vigil's log at most this often.
const DROP_REPORT_EVERY: Duration = Duration::from_secs(1);

/// The figures of every hook, as the last turn left them (read by the metrics exposition,
/// like `stderr_log::dropped_total`).
static FIGURES: Mutex<Vec<HookFigures>> = Mutex::new(Vec::new());

/// The figures of every hook, for the metrics.
pub(super) fn figures() -> Vec<HookFigures> {
    FIGURES.lock().map(|f| f.clone()).unwrap_or_default()
}

/// An event waiting to be delivered (or delivered again).
#[derive(Debug, Clone)]
struct Job {
    /// The event as JSON (docs/interface.md §3.3).
    json: Rc<str>,
    /// `VIGIL_EVENT_*` for an exec hook.
    env: Rc<[(String, String)]>,
    /// What the log and the failure event say of it: `BackOff web/app`.
    what: Rc<str>,
    /// Attempts made so far.
    attempts: u32,
    /// Not before (a retry's back-off).
    due: Instant,
}

/// A delivery under way.
struct Delivery {
    id: u64,
    token: Token,
    job: Job,
    deadline: Instant,
    how: How,
}

enum How {
    Exec {
        pid: u32,
        pipe: Option<Watched<OwnedFd>>,
        output: Vec<u8>,
        /// Its exec not confirmed yet.
        starting: Option<Watched<PendingExec>>,
    },
    Net(NetProbe),
}

struct Hook {
    spec: OnEventSpec,
    queue: VecDeque<Job>,
    running: Vec<Delivery>,
    figures: HookFigures,
    /// Drops not yet said in the log.
    unreported_drops: u64,
}

impl Hook {
    fn new(spec: OnEventSpec) -> Hook {
        Hook {
            figures: HookFigures {
                hook: spec.name.clone(),
                ..HookFigures::default()
            },
            spec,
            queue: VecDeque::new(),
            running: Vec::new(),
            unreported_drops: 0,
        }
    }

    /// Queues `job`, or drops it when the queue is full.
    fn offer(&mut self, job: Job) {
        if self.queue.len() >= self.spec.queue_size as usize {
            self.figures.dropped += 1;
            self.unreported_drops += 1;
            debug!(
                "on_event {}: queue full, dropped {}",
                self.spec.name, job.what
            );
            return;
        }
        self.queue.push_back(job);
    }
}

pub(super) struct EventHooks {
    registry: Rc<Registry>,
    hooks: Vec<Hook>,
    /// The last event looked at.
    last_seq: u64,
    tokens: TokenSpace,
    next_id: u64,
    /// Exec hooks' children killed before their exec was confirmed: kept (with the memory a
    /// `CLONE_VM` child may still use) until the reaper has them.
    abandoned: Vec<(u64, PendingExec)>,
    /// Exits the reaper collected for this component, handled at its next chore.
    ended: Vec<(u64, Option<i32>, Option<i32>)>,
    last_drop_report: Option<Instant>,
}

impl EventHooks {
    /// The hooks of `specs`; events recorded up to `last_seq` are not theirs (they were before
    /// this vigil, or before an upgrade, and were handled then).
    pub(super) fn new(registry: Rc<Registry>, specs: &[OnEventSpec], last_seq: u64) -> Self {
        let hooks = specs.iter().cloned().map(Hook::new).collect();
        let mut h = EventHooks {
            registry,
            hooks,
            last_seq,
            tokens: TokenSpace::new(Owner::EventHooks),
            next_id: 0,
            abandoned: Vec::new(),
            ended: Vec::new(),
            last_drop_report: None,
        };
        h.publish();
        h
    }

    /// After a reload: a hook kept by name keeps its queue and its deliveries under way (they
    /// finish with the action they began with); a removed hook's are abandoned.
    pub(super) fn reconfigure(&mut self, specs: &[OnEventSpec]) {
        let mut old = std::mem::take(&mut self.hooks);
        for spec in specs {
            match old.iter().position(|h| h.spec.name == spec.name) {
                Some(i) => {
                    let mut h = old.remove(i);
                    h.spec = spec.clone();
                    while h.queue.len() > spec.queue_size as usize {
                        h.queue.pop_back();
                        h.figures.dropped += 1;
                        h.unreported_drops += 1;
                    }
                    self.hooks.push(h);
                }
                None => self.hooks.push(Hook::new(spec.clone())),
            }
        }
        for mut h in old {
            if !h.queue.is_empty() || !h.running.is_empty() {
                info!(
                    "on_event {}: removed by reload; {} events waiting and {} deliveries under \
                     way abandoned",
                    h.spec.name,
                    h.queue.len(),
                    h.running.len()
                );
            }
            for d in h.running.drain(..) {
                self.abandon(d);
            }
        }
        self.publish();
    }

    /// Events up to `seq` were an earlier vigil's (taken back after a crash): not delivered
    /// again.
    pub(super) fn skip_to(&mut self, seq: u64) {
        self.last_seq = self.last_seq.max(seq);
    }

    /// An exec hook's process was reaped (handled at the next chore, with the core at hand).
    pub(super) fn ended(&mut self, id: u64, code: Option<i32>, signal: Option<i32>) {
        self.ended.push((id, code, signal));
    }

    /// Kills every delivery under way (shutdown).
    pub(super) fn cancel_all(&mut self) {
        let running: Vec<Delivery> = self
            .hooks
            .iter_mut()
            .flat_map(|h| h.running.drain(..))
            .collect();
        for d in running {
            self.abandon(d);
        }
    }

    /// Gives a delivery up: its process group is killed (reaped whenever it dies), its socket
    /// closed.
    fn abandon(&mut self, d: Delivery) {
        match d.how {
            How::Exec { pid, starting, .. } => {
                kill_tree(None, Some(pid));
                if let Some(exec) = starting {
                    self.abandoned.push((d.id, exec.into_inner()));
                }
            }
            How::Net(probe) => probe.cancel(&self.registry),
        }
    }

    /// New events from the core go to the hooks whose filter they match.
    fn collect(&mut self, core: &Supervisor) {
        if core.last_event_seq() == self.last_seq {
            return;
        }
        let events = core.events_since(self.last_seq);
        self.last_seq = core.last_event_seq();
        if self.hooks.is_empty() {
            return;
        }
        let clock = WallClock::new(Instant::now(), SystemTime::now());
        for e in events {
            let kind = match e.kind {
                EventType::Normal => EventKind::Normal,
                EventType::Warning => EventKind::Warning,
            };
            let replica_of = |pod: &str, set: &str| core.is_replica_of(pod, set);
            if !self
                .hooks
                .iter()
                .any(|h| h.spec.matches(&e.reason, kind, &e.object, replica_of))
            {
                continue;
            }
            let wire = crate::control::render::event(&e, &clock);
            let json: Rc<str> = match serde_json::to_string(&wire) {
                Ok(j) => Rc::from(j),
                Err(err) => {
                    warn!("on_event: cannot write event {} as JSON: {err}", e.seq);
                    continue;
                }
            };
            let env: Rc<[(String, String)]> = Rc::from(event_env(&wire));
            let what: Rc<str> = Rc::from(format!("{} {}", e.reason, e.object));
            for h in &mut self.hooks {
                if h.spec.matches(&e.reason, kind, &e.object, replica_of) {
                    h.offer(Job {
                        json: Rc::clone(&json),
                        env: Rc::clone(&env),
                        what: Rc::clone(&what),
                        attempts: 0,
                        due: clock.mono,
                    });
                }
            }
        }
    }

    /// Starts what is due where a hook has room, at most [`STARTS_PER_TURN`] in all.
    fn start_due(&mut self, now: Instant, reaper: &mut Reaper, core: &mut Supervisor) {
        let mut budget = STARTS_PER_TURN;
        for i in 0..self.hooks.len() {
            while budget > 0
                && self.hooks[i].running.len() < self.hooks[i].spec.max_concurrent as usize
            {
                let Some(pos) = self.hooks[i].queue.iter().position(|j| j.due <= now) else {
                    break;
                };
                let Some(mut job) = self.hooks[i].queue.remove(pos) else {
                    break;
                };
                budget -= 1;
                job.attempts += 1;
                let id = self.next_id;
                self.next_id += 1;
                let token = self.tokens.next();
                match self.start(i, id, token, &job, now, reaper) {
                    Ok(how) => {
                        let deadline =
                            crate::instant::saturating_add(now, self.hooks[i].spec.timeout);
                        self.hooks[i].running.push(Delivery {
                            id,
                            token,
                            job,
                            deadline,
                            how,
                        });
                    }
                    Err(message) => self.settle(i, job, Err(message), now, core),
                }
            }
        }
    }

    /// Launches one delivery of `job` by hook `i`.
    fn start(
        &mut self,
        i: usize,
        id: u64,
        token: Token,
        job: &Job,
        now: Instant,
        reaper: &mut Reaper,
    ) -> Result<How, String> {
        let _ = now;
        match &self.hooks[i].spec.action {
            OnEventAction::Webhook(hook) => {
                NetProbe::post(hook, job.json.as_bytes(), &self.registry, token)
                    .map(How::Net)
                    .map_err(|o| outcome_message(&o))
            }
            OnEventAction::Exec {
                command,
                user,
                group,
            } => {
                let mut spec = ContainerSpec::new(&self.hooks[i].spec.name, &[]);
                spec.command = command.clone();
                spec.user = user.clone();
                spec.group = group.clone();
                spec.env = job.env.to_vec();
                let prepared = process::prepare(command, &spec).map_err(|e| e.to_string())?;
                let (out_r, out_w) = process::pipe_nonblocking().map_err(|e| e.to_string())?;
                let input = stdin_with(job.json.as_bytes())?;
                let launched = process::spawn_pipelined(
                    prepared,
                    None,
                    Stdio::CombinedWithInput {
                        output: out_w,
                        input,
                    },
                )
                .map_err(|e| e.to_string())?;
                let (pid, pending) = match launched {
                    process::Launched::Running(pid) => (pid, None),
                    process::Launched::Pending(exec) => (exec.pid(), Some(exec)),
                };
                reaper.track(pid, PidOwner::EventHook { id });
                let pipe = Watched::new(
                    &self.registry,
                    out_r,
                    |r| r.as_fd(),
                    token,
                    Interest::READABLE,
                )
                .ok();
                let starting = pending.map(|exec| {
                    Watched::new(
                        &self.registry,
                        exec,
                        PendingExec::fd,
                        token,
                        Interest::READABLE,
                    )
                    .unwrap_or_else(|(exec, e)| {
                        // Its exit will tell (the reaper); until then its report is read on
                        // every event of its output pipe.
                        debug!("on_event: cannot watch the exec report of pid {pid}: {e}");
                        Watched::unwatched(exec)
                    })
                });
                Ok(How::Exec {
                    pid,
                    pipe,
                    output: Vec::new(),
                    starting,
                })
            }
        }
    }

    /// A delivery of hook `i` ended: counted; a failed webhook delivery goes back to the queue
    /// for its next attempt, else the failure is logged and recorded as an event.
    fn settle(
        &mut self,
        i: usize,
        mut job: Job,
        result: Result<(), String>,
        now: Instant,
        core: &mut Supervisor,
    ) {
        let h = &mut self.hooks[i];
        let message = match result {
            Ok(()) => {
                h.figures.delivered += 1;
                debug!("on_event {}: delivered {}", h.spec.name, job.what);
                return;
            }
            Err(m) => m,
        };
        if job.attempts <= h.spec.retries {
            let wait = RETRY_FIRST
                .saturating_mul(1 << (job.attempts - 1).min(16))
                .min(RETRY_MAX);
            debug!(
                "on_event {}: {} not delivered ({message}); again in {}",
                h.spec.name,
                job.what,
                crate::format::go_duration(wait)
            );
            job.due = crate::instant::saturating_add(now, wait);
            h.offer(job);
            return;
        }
        h.figures.failed += 1;
        let tries = match job.attempts {
            1 => String::new(),
            n => format!(" (after {n} attempts)"),
        };
        let text = format!(
            "on_event hook {} failed for {}{tries}: {message}",
            h.spec.name, job.what
        );
        warn!("{text}");
        core.record_hook_failure(now, text);
    }

    /// The delivery with token `token`: (hook, index in its `running`).
    fn find(&self, token: Token) -> Option<(usize, usize)> {
        self.hooks.iter().enumerate().find_map(|(i, h)| {
            h.running
                .iter()
                .position(|d| d.token == token)
                .map(|j| (i, j))
        })
    }

    fn find_id(&self, id: u64) -> Option<(usize, usize)> {
        self.hooks
            .iter()
            .enumerate()
            .find_map(|(i, h)| h.running.iter().position(|d| d.id == id).map(|j| (i, j)))
    }

    /// Exec hooks reaped since the last turn.
    fn on_exits(&mut self, now: Instant, reaper: &mut Reaper, core: &mut Supervisor) {
        for (id, code, signal) in std::mem::take(&mut self.ended) {
            if let Some(pos) = self.abandoned.iter().position(|(a, _)| *a == id) {
                // Reaped: its report is complete, and the memory it may have used is free.
                let (_, mut exec) = self.abandoned.swap_remove(pos);
                let _ = exec.poll();
            }
            let Some((i, j)) = self.find_id(id) else {
                continue; // abandoned earlier; its group was killed then
            };
            let mut d = self.hooks[i].running.swap_remove(j);
            let How::Exec {
                pid,
                pipe,
                output,
                starting,
            } = &mut d.how
            else {
                continue;
            };
            if let Some(Err(e)) = starting.as_mut().and_then(|s| s.poll()) {
                reaper.untrack(*pid);
                self.settle(i, d.job, Err(e.to_string()), now, core);
                continue;
            }
            read_output(pipe, output);
            // Whatever the hook left behind in its session goes with it.
            kill_tree(None, Some(*pid));
            let message = crate::probe::exec_message(output);
            let result = match (code, signal) {
                (Some(0), _) => Ok(()),
                (Some(c), _) if message.is_empty() => Err(format!("command exited with code {c}")),
                (Some(c), _) => Err(format!("command exited with code {c}: {message}")),
                (None, Some(s)) => Err(format!("command killed by {}", super::signal_name(s))),
                (None, None) => Err("command ended".to_string()),
            };
            self.settle(i, d.job, result, now, core);
        }
    }

    /// Deliveries past their timeout are given up.
    fn expire(&mut self, now: Instant, core: &mut Supervisor) {
        for i in 0..self.hooks.len() {
            while let Some(j) = self.hooks[i].running.iter().position(|d| d.deadline <= now) {
                let d = self.hooks[i].running.swap_remove(j);
                let timeout = crate::format::go_duration(self.hooks[i].spec.timeout);
                let message = match &d.how {
                    How::Exec {
                        starting: Some(_), ..
                    } => format!(
                        "command not started after {timeout}: its process has not reached execve"
                    ),
                    How::Exec { .. } => format!("command timed out after {timeout} (killed)"),
                    How::Net(p) => match p.stage_name() {
                        "response" | "done" => format!("no response within {timeout}"),
                        _ => p.timeout_message(&timeout),
                    },
                };
                let job = d.job.clone();
                self.abandon(d);
                self.settle(i, job, Err(message), now, core);
            }
        }
    }

    /// Drops since the last report, said once a second at most.
    fn report_drops(&mut self, now: Instant) {
        if self
            .last_drop_report
            .is_some_and(|t| now.saturating_duration_since(t) < DROP_REPORT_EVERY)
        {
            return;
        }
        for h in &mut self.hooks {
            if h.unreported_drops == 0 {
                continue;
            }
            warn!(
                "on_event {}: {} events dropped, its queue was full ({} waiting, {} being \
                 delivered; {} dropped since vigil started)",
                h.spec.name,
                h.unreported_drops,
                h.queue.len(),
                h.running.len(),
                h.figures.dropped
            );
            h.unreported_drops = 0;
            self.last_drop_report = Some(now);
        }
    }

    /// The figures for the metrics.
    fn publish(&mut self) {
        let figures: Vec<HookFigures> = self
            .hooks
            .iter_mut()
            .map(|h| {
                h.figures.queued = h.queue.len() as u64;
                h.figures.clone()
            })
            .collect();
        if let Ok(mut f) = FIGURES.lock() {
            *f = figures;
        }
    }

    /// This turn's share: exits, timeouts, new events, starts, the drop report, the figures.
    pub(super) fn turn(&mut self, now: Instant, reaper: &mut Reaper, core: &mut Supervisor) {
        self.on_exits(now, reaper, core);
        self.expire(now, core);
        self.collect(core);
        self.start_due(now, reaper, core);
        self.report_drops(now);
        self.publish();
    }

    /// A ready event for a delivery's token: an exec hook's report or output, a webhook's
    /// socket.
    pub(super) fn on_event(
        &mut self,
        event: &mio::event::Event,
        now: Instant,
        reaper: &mut Reaper,
        core: &mut Supervisor,
    ) {
        let Some((i, j)) = self.find(event.token()) else {
            return;
        };
        let d = &mut self.hooks[i].running[j];
        match &mut d.how {
            How::Exec {
                pid,
                pipe,
                output,
                starting,
            } => {
                if let Some(outcome) = starting.as_mut().and_then(|s| s.poll()) {
                    *starting = None;
                    if let Err(e) = outcome {
                        // It did not exec, and `poll` has reaped it.
                        reaper.untrack(*pid);
                        let d = self.hooks[i].running.swap_remove(j);
                        self.settle(i, d.job, Err(e.to_string()), now, core);
                        return;
                    }
                }
                read_output(pipe, output);
            }
            How::Net(probe) => {
                let Some(outcome) = probe.on_event(&self.registry, event) else {
                    return;
                };
                let d = self.hooks[i].running.swap_remove(j);
                let result = match outcome {
                    ProbeOutcome::Success(_) => Ok(()),
                    other => Err(outcome_message(&other)),
                };
                self.settle(i, d.job, result, now, core);
            }
        }
    }

    /// The earliest deadline of a delivery, or of a retry where its hook has room; `now` when
    /// something is due and was left for the next turn.
    fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for h in &self.hooks {
            for d in &h.running {
                consider(d.deadline);
            }
            if h.running.len() < h.spec.max_concurrent as usize
                && let Some(due) = h.queue.iter().map(|j| j.due).min()
            {
                consider(due.max(now));
            }
            if h.unreported_drops > 0 {
                consider(self.last_drop_report.map_or(now, |t| {
                    crate::instant::saturating_add(t, DROP_REPORT_EVERY)
                }));
            }
        }
        if !self.ended.is_empty() {
            consider(now);
        }
        next
    }
}

/// Its events are dispatched by the router, which lends it the runs' reaper
/// ([`EventHooks::on_event`]); its share of the turn is [`EventHooks::turn`].
impl Component for EventHooks {
    fn deadline(&self, now: Instant) -> Option<Instant> {
        self.next_deadline(now)
    }

    /// Kills what a hook left running.
    fn finish(&mut self, _: &mut Link<'_>) {
        self.cancel_all();
    }
}

/// The message of a webhook attempt's outcome.
fn outcome_message(o: &ProbeOutcome) -> String {
    match o {
        ProbeOutcome::Success(m) | ProbeOutcome::Warning(m) | ProbeOutcome::Failure(m) => m.clone(),
    }
}

/// The read end of a pipe holding `data` whole, its write end closed: the hook's stdin. An
/// event is far smaller than a pipe's 64 KiB, so the write never waits; a larger one is
/// refused rather than waited for.
fn stdin_with(data: &[u8]) -> Result<OwnedFd, String> {
    use nix::fcntl::OFlag;
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
        .map_err(|e| format!("cannot make the hook's stdin pipe: {e}"))?;
    let written = nix::unistd::write(&w, data)
        .map_err(|e| format!("cannot write the event to the hook's stdin: {e}"))?;
    if written != data.len() {
        return Err(format!(
            "the event ({} bytes) does not fit the hook's stdin pipe",
            data.len()
        ));
    }
    drop(w);
    // The child gets a blocking stdin, as programs expect.
    nix::fcntl::fcntl(r.as_fd(), nix::fcntl::FcntlArg::F_SETFL(OFlag::empty()))
        .map_err(|e| format!("cannot make the hook's stdin blocking: {e}"))?;
    Ok(r)
}

/// Reads what an exec hook wrote (keeping the first [`OUTPUT_KEPT`] bytes); closes the pipe at
/// EOF or on an error.
fn read_output(pipe: &mut Option<Watched<OwnedFd>>, output: &mut Vec<u8>) {
    let Some(fd) = pipe.as_ref() else {
        return;
    };
    let mut buf = Vec::new();
    let res = crate::logs::drain_pipe(fd.as_fd(), &mut buf, READ_CAP);
    let room = OUTPUT_KEPT.saturating_sub(output.len());
    output.extend_from_slice(&buf[..buf.len().min(room)]);
    if !matches!(res, Ok(ref r) if !r.eof) {
        *pipe = None;
    }
}

/// `VIGIL_EVENT_*` of an event (NUL bytes, which no variable can hold, become spaces).
fn event_env(e: &crate::control::wire::Event) -> Vec<(String, String)> {
    let (pod, container) = match e.object.split_once('/') {
        Some((p, c)) => (p, c),
        None => (e.object.as_str(), ""),
    };
    let kind = match e.kind {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    };
    let stamp = |t: &crate::control::wire::Timestamp| {
        serde_json::to_value(t)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    [
        ("VIGIL_EVENT_SEQ", e.seq.to_string()),
        ("VIGIL_EVENT_TYPE", kind.to_string()),
        ("VIGIL_EVENT_REASON", e.reason.clone()),
        ("VIGIL_EVENT_OBJECT", e.object.clone()),
        ("VIGIL_EVENT_POD", pod.to_string()),
        ("VIGIL_EVENT_CONTAINER", container.to_string()),
        ("VIGIL_EVENT_MESSAGE", e.message.clone()),
        ("VIGIL_EVENT_COUNT", e.count.to_string()),
        ("VIGIL_EVENT_FIRST_TIMESTAMP", stamp(&e.first_timestamp)),
        ("VIGIL_EVENT_LAST_TIMESTAMP", stamp(&e.last_timestamp)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.replace('\0', " ")))
    .collect()
}
