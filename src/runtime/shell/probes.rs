//! The probe runner: probe attempts on the loop — network probes as non-blocking sockets,
//! exec probes as processes in a sub-cgroup of their container — and their results.
//!
//! Owns: the attempt in flight per (container, probe kind), with its socket (registered by
//! [`NetProbe`] under the attempt's token) or its process, output pipe and sub-cgroup. The
//! token of an attempt is derived from (container, kind, attempt number)
//! ([`tokens::probe_token`]): at most one attempt per pair is in flight, and an event left
//! over from an earlier attempt carries another token and is dropped here.
//!
//! An exec attempt's process is cloned without waiting for its exec ([`process::spawn_pipelined`]):
//! its report pipe is registered under the attempt's token beside its output pipe, and read
//! when readable. A child that has not reached `execve` by the attempt's timeout (its cgroup
//! frozen, stopped, in D state) fails the attempt with a message saying so
//! ([`ProbeRunner::expire`]; the kubelet counts a probe timeout as a failure,
//! pkg/kubelet/prober `runProbe`), is SIGKILLed, and is reaped whenever it dies (a frozen task
//! dies of SIGKILL at once, cgroup v2 docs "cgroup.freeze"; one in D state when it leaves it).
//!
//! A process an exec lifecycle hook leaves running (a daemon it started in the background)
//! lives until its container stops, as in the kubelet, which runs exec hooks inside the
//! container (pkg/kubelet/lifecycle/handlers.go `HandlerRunner.Run` → the runtime's
//! `ExecSync` in the container): with cgroups, the hook's cgroup (`probe-hook-<seq>`, below
//! the container's) is left in place when the hook ends populated, and dies with the
//! container's (`cgroup.kill` takes the descendants, the janitor removes the tree); without,
//! the hook's session is handed to the state file's tracker
//! ([`ProbeRunner::take_hook_sessions`]), which kills its members with the container.
//!
//! Must not: schedule or count results (the core owns schedules, thresholds and timeouts; a
//! timeout reaches here as a cancel), wait for a child (its exec or its exit), or reap (the
//! reaper reports an exec probe's exit through [`ProbeRunner::on_exit`]).

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Interest, Registry, Token};

use super::janitor::Janitor;
use super::kill::kill_tree;
use super::reaper::{PidOwner, Reaper};
use super::tokens::{self, Watched};
use crate::cgroup::ContainerCgroup;
use crate::config::spec::{ContainerSpec, ProbeAction, ProbeKind, ProbeSpec};
use crate::core::{ContainerKey, Generation, Input, ProbeOutcome};
use crate::logs;
use crate::probe::NetProbe;
use crate::process::{self, PendingExec, SpawnError, Stdio};

/// How much of an exec probe's output is kept for its result message.
const EXEC_OUTPUT_KEPT: usize = 4096;
/// How much of it is read per readiness event.
const EXEC_READ_CAP: usize = 64 * 1024;

/// One attempt the core asked for (`Action::StartProbe`).
pub struct ProbeRequest<'a> {
    pub key: ContainerKey,
    pub generation: Generation,
    pub container: &'a Arc<ContainerSpec>,
    pub kind: ProbeKind,
    pub seq: u64,
    pub probe: &'a Arc<ProbeSpec>,
}

struct Attempt {
    generation: Generation,
    seq: u64,
    started: Instant,
    how: How,
}

enum How {
    Net(NetProbe),
    Exec {
        pid: u32,
        pipe: Option<Watched<OwnedFd>>,
        output: Vec<u8>,
        cgroup: Option<ContainerCgroup>,
        /// Its exec not confirmed yet.
        starting: Option<Starting>,
    },
}

/// An exec attempt's child whose exec is not confirmed yet: its report pipe (registered under
/// the attempt's token) and until when it may take (the attempt's timeout).
struct Starting {
    exec: Watched<PendingExec>,
    /// `None`: no deadline (a `post_start` hook has no timeout).
    deadline: Option<Instant>,
    timeout: Duration,
}

/// An attempt, and the key of its children in [`ProbeRunner::abandoned`].
type AttemptId = (ContainerKey, ProbeKind, u64);

/// An exec hook in flight, as `vigil upgrade` hands it over.
pub struct ExecHook<'a> {
    pub key: ContainerKey,
    pub generation: Generation,
    pub seq: u64,
    pub pid: u32,
    pub pipe: Option<std::os::fd::RawFd>,
    pub output: &'a [u8],
    pub cgroup: Option<&'a ContainerCgroup>,
    pub started: Instant,
}

pub struct ProbeRunner {
    registry: Rc<Registry>,
    attempts: HashMap<(ContainerKey, ProbeKind), Attempt>,
    /// No network attempt expires before this (it may be earlier than the earliest still in
    /// flight: an attempt decided since is not taken out), so [`ProbeRunner::expire`] looks
    /// at the attempts only when it has passed, not on every turn. `None`: none to expire.
    next_expiry: Option<Instant>,
    /// Children of cancelled attempts killed before their exec was confirmed: kept (with the
    /// memory a `CLONE_VM` child may still use) until the reaper has them.
    abandoned: HashMap<AttemptId, PendingExec>,
    /// Without cgroups: (container, session id) of exec hooks that ended, whose session
    /// members (what the hook left running) are to die with the container.
    hook_sessions: Vec<(ContainerKey, u32)>,
}

impl ProbeRunner {
    pub fn new(registry: Rc<Registry>) -> ProbeRunner {
        ProbeRunner {
            registry,
            attempts: HashMap::new(),
            next_expiry: None,
            abandoned: HashMap::new(),
            hook_sessions: Vec::new(),
        }
    }

    /// Starts an attempt; returns its result at once when it cannot even start. `cgroup` is the
    /// container's (exec probes run in a `probe-<kind>` cgroup below it).
    pub fn start(
        &mut self,
        req: ProbeRequest<'_>,
        cgroup: Option<&ContainerCgroup>,
        now: Instant,
        reaper: &mut Reaper,
        janitor: &mut Janitor,
    ) -> Option<Input> {
        let ProbeRequest {
            key,
            generation,
            container,
            kind,
            seq,
            probe,
        } = req;
        // A previous attempt still in flight is abandoned (the core never doubles; this only
        // happens when its cancel raced with the next start).
        self.cancel_any(key, kind, janitor);
        let result = |outcome| {
            Some(Input::ProbeResult {
                key,
                generation,
                kind,
                seq,
                outcome,
                duration: Duration::ZERO,
            })
        };
        let token = tokens::probe_token(key, kind, seq);
        let how = match &probe.action {
            ProbeAction::Exec { command } => {
                // A hook's cgroup may outlive its hook (the module docs): one name per attempt,
                // so the next hook of the same run never meets the last one's.
                let name = match kind {
                    ProbeKind::Hook => format!("probe-hook-{seq}"),
                    _ => format!("probe-{}", kind.as_str()),
                };
                let cgroup = match cgroup {
                    Some(cg) => match cg.create_child(&name) {
                        Ok(c) => Some(c),
                        Err(e) => {
                            return result(ProbeOutcome::Failure(format!(
                                "cannot create the probe's cgroup: {e}"
                            )));
                        }
                    },
                    None => None,
                };
                let prepared = match process::prepare(command, container) {
                    Ok(p) => p,
                    Err(e) => return result(ProbeOutcome::Failure(e.to_string())),
                };
                let (r, w) = match process::pipe_nonblocking() {
                    Ok(p) => p,
                    Err(e) => return result(ProbeOutcome::Failure(e.to_string())),
                };
                let launched = process::spawn_pipelined(
                    prepared,
                    cgroup.as_ref().map(|c| process::CgroupTarget {
                        dir: Some(c.dir_fd()),
                        procs: c.procs_fd(),
                    }),
                    Stdio::Combined(w),
                );
                let (pid, pending) = match launched {
                    Ok(process::Launched::Running(pid)) => (pid, None),
                    Ok(process::Launched::Pending(exec)) => (exec.pid(), Some(exec)),
                    Err(e) => {
                        if let Some(cg) = cgroup {
                            kill_tree(Some(&cg), None);
                            janitor.remove_or_watch(cg);
                        }
                        return result(ProbeOutcome::Failure(e.to_string()));
                    }
                };
                reaper.track(pid, PidOwner::ExecProbe { key, kind, seq });
                let pipe =
                    Watched::new(&self.registry, r, |r| r.as_fd(), token, Interest::READABLE).ok();
                let starting = pending.and_then(|exec| {
                    match Watched::new(
                        &self.registry,
                        exec,
                        PendingExec::fd,
                        token,
                        Interest::READABLE,
                    ) {
                        Ok(exec) => {
                            let deadline = now.checked_add(probe.timeout);
                            self.next_expiry = self.next_expiry.into_iter().chain(deadline).min();
                            Some(Starting {
                                exec,
                                deadline,
                                timeout: probe.timeout,
                            })
                        }
                        Err((exec, e)) => {
                            // Without the poll to tell when it execs, its exit tells (the
                            // reaper); it is kept until then.
                            log::debug!("{key:?} {kind:?}: cannot watch the exec report: {e}");
                            self.abandoned.insert((key, kind, seq), exec);
                            None
                        }
                    }
                });
                How::Exec {
                    pid,
                    pipe,
                    output: Vec::new(),
                    cgroup,
                    starting,
                }
            }
            action @ (ProbeAction::HttpGet { .. }
            | ProbeAction::TcpSocket { .. }
            | ProbeAction::Grpc { .. }) => match NetProbe::start(action, &self.registry, token) {
                Ok(mut p) => {
                    p.expire_at(now, probe.timeout);
                    self.next_expiry = self.next_expiry.into_iter().chain(p.expires_at()).min();
                    How::Net(p)
                }
                Err(outcome) => return result(outcome),
            },
        };
        self.attempts.insert(
            (key, kind),
            Attempt {
                generation,
                seq,
                started: now,
                how,
            },
        );
        None
    }

    /// An event for an attempt's socket or output pipe; returns a network probe's result once
    /// it is decided (an exec probe's comes with its exit).
    pub fn on_event(
        &mut self,
        token: Token,
        event: &mio::event::Event,
        now: Instant,
        reaper: &mut Reaper,
        janitor: &mut Janitor,
    ) -> Option<Input> {
        let (key, kind, tag) = tokens::probe_of(token)?;
        let attempt = self
            .attempts
            .get_mut(&(key, kind))
            .filter(|a| tokens::probe_seq_tag(a.seq) == tag)?;
        match &mut attempt.how {
            How::Exec { pid, .. } => {
                let pid = *pid;
                if let Some(Err(e)) = poll_start(attempt) {
                    // It did not exec, and `poll` has reaped it.
                    reaper.untrack(pid);
                    let attempt = self.attempts.remove(&(key, kind))?;
                    return Some(self.failed_start(key, kind, attempt, &e, now, janitor));
                }
                read_exec_output(attempt);
                None
            }
            How::Net(probe) => {
                let outcome = probe.on_event(&self.registry, event)?;
                let attempt = self.attempts.remove(&(key, kind))?;
                Some(Input::ProbeResult {
                    key,
                    generation: attempt.generation,
                    kind,
                    seq: attempt.seq,
                    outcome,
                    duration: now.saturating_duration_since(attempt.started),
                })
            }
        }
    }

    /// Network probes past their timeout while still resolving, connecting or in a TLS
    /// handshake end here with a message naming that stage (`tls: handshake timed out after
    /// 1s`); the router runs this just before the core's timeouts, which would only say `probe
    /// timed out`. Looks at the attempts in flight only once the earliest expiry has come
    /// (at 5,000 probes/s a scan of the ~100 in flight on each of ~3,000 turns a second
    /// was the largest part of the turn's own time).
    pub fn expire(&mut self, now: Instant, janitor: &mut Janitor) -> Vec<Input> {
        if self.next_expiry.is_none_or(|t| now < t) {
            return Vec::new();
        }
        // Deadlines already passed and not expired here (waiting for the response) are the
        // core's timeouts, in this same turn.
        self.next_expiry = self
            .attempts
            .values()
            .filter_map(|a| match &a.how {
                How::Net(probe) => probe.expires_at().filter(|t| *t > now),
                How::Exec { starting, .. } => starting.as_ref()?.deadline.filter(|t| *t > now),
            })
            .min();
        let due: Vec<_> = self
            .attempts
            .iter()
            .filter_map(|(k, a)| match &a.how {
                How::Net(probe) => probe.expired(now).map(|m| (*k, m)),
                How::Exec { starting, .. } => {
                    let s = starting.as_ref()?;
                    s.deadline.filter(|t| *t <= now).map(|_| {
                        let message = format!(
                            "command not started after {}: its process has not reached execve \
                             (is the container's cgroup frozen, or the process stopped?)",
                            crate::format::go_duration(s.timeout)
                        );
                        (*k, message)
                    })
                }
            })
            .collect();
        let mut out = Vec::new();
        for ((key, kind), message) in due {
            let Some(attempt) = self.attempts.get(&(key, kind)) else {
                continue;
            };
            let (generation, seq, started) = (attempt.generation, attempt.seq, attempt.started);
            // Killed now; reaped whenever it dies (see the module doc).
            self.cancel_any(key, kind, janitor);
            out.push(Input::ProbeResult {
                key,
                generation,
                kind,
                seq,
                outcome: ProbeOutcome::Failure(message),
                duration: now.saturating_duration_since(started),
            });
        }
        out
    }

    /// The result of an attempt whose child failed before its exec (`e`, as a synchronous
    /// spawn reports it); its cgroup is cleaned up.
    fn failed_start(
        &mut self,
        key: ContainerKey,
        kind: ProbeKind,
        attempt: Attempt,
        e: &SpawnError,
        now: Instant,
        janitor: &mut Janitor,
    ) -> Input {
        if let How::Exec {
            cgroup: Some(cg), ..
        } = attempt.how
        {
            kill_tree(Some(&cg), None);
            janitor.remove_or_watch(cg);
        }
        Input::ProbeResult {
            key,
            generation: attempt.generation,
            kind,
            seq: attempt.seq,
            outcome: ProbeOutcome::Failure(e.to_string()),
            duration: now.saturating_duration_since(attempt.started),
        }
    }

    /// An exec probe's process was reaped: its result, unless the attempt was cancelled since.
    #[allow(clippy::too_many_arguments)]
    pub fn on_exit(
        &mut self,
        key: ContainerKey,
        kind: ProbeKind,
        seq: u64,
        code: Option<i32>,
        signal: Option<i32>,
        now: Instant,
        janitor: &mut Janitor,
    ) -> Option<Input> {
        if let Some(mut exec) = self.abandoned.remove(&(key, kind, seq)) {
            // Reaped: its report is complete, and the memory it may have used is free.
            let _ = exec.poll();
        }
        if self.attempts.get(&(key, kind)).is_none_or(|a| a.seq != seq) {
            return None; // cancelled earlier; its tree was killed then
        }
        let mut attempt = self.attempts.remove(&(key, kind))?;
        // Reaped before its exec report was read: complete now, it tells whether it exec'd.
        if let Some(Err(e)) = poll_start(&mut attempt) {
            return Some(self.failed_start(key, kind, attempt, &e, now, janitor));
        }
        // Collect the last output before deciding.
        read_exec_output(&mut attempt);
        let How::Exec {
            pid,
            pipe,
            output,
            cgroup,
            ..
        } = attempt.how
        else {
            return None;
        };
        drop(pipe);
        match cgroup {
            // What a hook left running stays, in its cgroup, until the container stops.
            Some(cg) if kind == ProbeKind::Hook && cg.populated().unwrap_or(false) => {
                log::debug!(
                    "{key:?}: the hook left processes in {}; they live until the container stops",
                    cg.path().display()
                );
            }
            Some(cg) => {
                kill_tree(Some(&cg), None);
                janitor.remove_or_watch(cg);
            }
            None if kind == ProbeKind::Hook => self.hook_sessions.push((key, pid)),
            None => {}
        }
        let message = crate::probe::exec_message(&output);
        let outcome = match (code, signal) {
            (Some(0), _) => ProbeOutcome::Success(message),
            (Some(c), _) => ProbeOutcome::Failure(if message.is_empty() {
                format!("command exited with code {c}")
            } else {
                format!("command exited with code {c}: {message}")
            }),
            (None, Some(s)) => {
                ProbeOutcome::Failure(format!("command killed by {}", super::signal_name(s)))
            }
            (None, None) => ProbeOutcome::Failure("command ended".to_string()),
        };
        Some(Input::ProbeResult {
            key,
            generation: attempt.generation,
            kind,
            seq,
            outcome,
            duration: now.saturating_duration_since(attempt.started),
        })
    }

    /// Without cgroups: the (container, session id) of each exec hook that ended since the
    /// last call, for the tracker to kill its session's members with the container.
    pub fn take_hook_sessions(&mut self) -> Vec<(ContainerKey, u32)> {
        std::mem::take(&mut self.hook_sessions)
    }

    /// The core's cancel (a timeout, or the run ended): only if it is still that attempt.
    pub fn cancel(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        kind: ProbeKind,
        seq: u64,
        janitor: &mut Janitor,
    ) {
        if self
            .attempts
            .get(&(key, kind))
            .is_some_and(|a| a.seq == seq && a.generation == generation)
        {
            self.cancel_any(key, kind, janitor);
        }
    }

    /// Abandons whatever attempt (container, kind) has in flight.
    pub fn cancel_any(&mut self, key: ContainerKey, kind: ProbeKind, janitor: &mut Janitor) {
        let Some(attempt) = self.attempts.remove(&(key, kind)) else {
            return;
        };
        let seq = attempt.seq;
        match attempt.how {
            How::Net(probe) => probe.cancel(&self.registry),
            How::Exec {
                pid,
                pipe,
                cgroup,
                starting,
                ..
            } => {
                // Kill the probe's whole tree; its pid stays in the reaper table (as an owner
                // whose seq no longer matches) so it is reaped and ignored.
                kill_tree(cgroup.as_ref(), Some(pid));
                drop(pipe);
                if let Some(s) = starting {
                    // Not yet a group leader (its setsid comes before the exec): by pid too.
                    let _ = process::signal(pid, libc::SIGKILL);
                    self.abandoned.insert((key, kind, seq), s.exec.into_inner());
                }
                if let Some(cg) = cgroup {
                    janitor.remove_or_watch(cg);
                }
            }
        }
    }

    /// An `http_get` lifecycle hook is in flight (`vigil upgrade` waits for it: its socket
    /// is not handed over, and a hook is not run twice). Exec hooks are handed over
    /// ([`ProbeRunner::exec_hooks`]).
    pub fn net_hook_running(&self) -> bool {
        self.attempts
            .iter()
            .any(|((_, kind), a)| *kind == ProbeKind::Hook && matches!(a.how, How::Net(_)))
    }

    /// The exec probes running, hooks aside: pid and cgroup (the next vigil kills them; the
    /// core runs those probes again).
    pub fn exec_attempts(&self) -> Vec<(u32, Option<std::path::PathBuf>)> {
        self.attempts
            .iter()
            .filter(|((_, kind), _)| *kind != ProbeKind::Hook)
            .filter_map(|(_, a)| match &a.how {
                How::Exec { pid, cgroup, .. } => {
                    Some((*pid, cgroup.as_ref().map(|c| c.path().to_path_buf())))
                }
                How::Net(_) => None,
            })
            .collect()
    }

    /// The exec lifecycle hooks running, for `vigil upgrade` to hand over (nothing is taken
    /// out: a failed exec leaves them here).
    pub fn exec_hooks(&self) -> Vec<ExecHook<'_>> {
        self.attempts
            .iter()
            .filter(|((_, kind), _)| *kind == ProbeKind::Hook)
            .filter_map(|((key, _), a)| match &a.how {
                How::Exec {
                    pid,
                    pipe,
                    output,
                    cgroup,
                    ..
                } => Some(ExecHook {
                    key: *key,
                    generation: a.generation,
                    seq: a.seq,
                    pid: *pid,
                    pipe: pipe.as_ref().map(|p| {
                        use std::os::fd::AsRawFd;
                        p.as_raw_fd()
                    }),
                    output,
                    cgroup: cgroup.as_ref(),
                    started: a.started,
                }),
                How::Net(_) => None,
            })
            .collect()
    }

    /// An exec hook handed over by the old instance (`vigil upgrade`): its result is reported
    /// once its process (tracked by the reaper as `PidOwner::ExecProbe`) is reaped.
    #[allow(clippy::too_many_arguments)]
    pub fn resume_exec_hook(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        seq: u64,
        started: Instant,
        pid: u32,
        pipe: Option<OwnedFd>,
        output: Vec<u8>,
        cgroup: Option<ContainerCgroup>,
    ) {
        let token = tokens::probe_token(key, ProbeKind::Hook, seq);
        let pipe = pipe.and_then(|r| {
            Watched::new(&self.registry, r, |r| r.as_fd(), token, Interest::READABLE).ok()
        });
        self.attempts.insert(
            (key, ProbeKind::Hook),
            Attempt {
                generation,
                seq,
                started,
                how: How::Exec {
                    pid,
                    pipe,
                    output,
                    cgroup,
                    starting: None,
                },
            },
        );
    }

    /// Abandons every attempt (shutdown).
    pub fn cancel_all(&mut self, janitor: &mut Janitor) {
        let pairs: Vec<_> = self.attempts.keys().copied().collect();
        for (key, kind) in pairs {
            self.cancel_any(key, kind, janitor);
        }
    }
}

/// Reads the report of an exec attempt's child whose exec is unconfirmed, without waiting:
/// `Some` once it has settled (then it is no longer starting); an error means it did not exec
/// and has been reaped.
fn poll_start(attempt: &mut Attempt) -> Option<Result<(), SpawnError>> {
    let How::Exec { starting, .. } = &mut attempt.how else {
        return None;
    };
    let outcome = starting.as_mut()?.exec.poll()?;
    *starting = None;
    Some(outcome)
}

/// Reads what an exec probe wrote (keeping the first [`EXEC_OUTPUT_KEPT`] bytes); closes the
/// pipe at EOF or on an error.
fn read_exec_output(attempt: &mut Attempt) {
    let How::Exec { pipe, output, .. } = &mut attempt.how else {
        return;
    };
    let Some(fd) = pipe.as_ref() else {
        return;
    };
    let mut buf = Vec::new();
    let res = logs::drain_pipe(fd.as_fd(), &mut buf, EXEC_READ_CAP);
    let room = EXEC_OUTPUT_KEPT.saturating_sub(output.len());
    output.extend_from_slice(&buf[..buf.len().min(room)]);
    if !matches!(res, Ok(ref r) if !r.eof) {
        *pipe = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::shell::tokens::Owner;

    fn tcp_probe(port: u16) -> Arc<ProbeSpec> {
        Arc::new(ProbeSpec {
            action: ProbeAction::TcpSocket {
                host: "127.0.0.1".into(),
                port,
            },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
            success_threshold: 1,
            failure_threshold: 3,
            termination_grace: None,
        })
    }

    fn setup() -> (mio::Poll, ProbeRunner, Janitor) {
        let poll = mio::Poll::new().unwrap();
        let registry = Rc::new(poll.registry().try_clone().unwrap());
        let runner = ProbeRunner::new(Rc::clone(&registry));
        (poll, runner, Janitor::new(registry))
    }

    #[test]
    fn a_tcp_probe_is_routed_back_by_its_token_and_reports_success() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mut poll, mut runner, mut janitor) = setup();
        let container = crate::control::render::fixtures::spec("c");
        let probe = tcp_probe(port);
        let key = ContainerKey(9);
        let req = ProbeRequest {
            key,
            generation: 4,
            container: &container,
            kind: ProbeKind::Readiness,
            seq: 17,
            probe: &probe,
        };
        let now = Instant::now();
        let started = runner.start(req, None, now, &mut Reaper::default(), &mut janitor);
        assert!(started.is_none(), "in flight, not decided at once");

        let mut events = mio::Events::with_capacity(4);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "no result");
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(100));
            let mut result = None;
            for e in events.iter() {
                assert_eq!(Owner::of(e.token()), Some(Owner::Probes));
                result = result.or(runner.on_event(
                    e.token(),
                    e,
                    Instant::now(),
                    &mut Reaper::default(),
                    &mut janitor,
                ));
            }
            if let Some(input) = result {
                match input {
                    Input::ProbeResult {
                        key: k,
                        generation,
                        kind,
                        seq,
                        outcome,
                        ..
                    } => {
                        assert_eq!(
                            (k, generation, kind, seq),
                            (key, 4, ProbeKind::Readiness, 17)
                        );
                        assert!(matches!(outcome, ProbeOutcome::Success(_)), "{outcome:?}");
                    }
                    other => panic!("unexpected input {other:?}"),
                }
                break;
            }
        }
        assert!(runner.attempts.is_empty());
    }

    #[test]
    fn a_cancel_for_another_attempt_is_ignored_and_the_right_one_deregisters() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mut poll, mut runner, mut janitor) = setup();
        let container = crate::control::render::fixtures::spec("c");
        let probe = tcp_probe(port);
        let key = ContainerKey(2);
        let req = ProbeRequest {
            key,
            generation: 1,
            container: &container,
            kind: ProbeKind::Liveness,
            seq: 5,
            probe: &probe,
        };
        let now = Instant::now();
        assert!(
            runner
                .start(req, None, now, &mut Reaper::default(), &mut janitor)
                .is_none()
        );
        runner.cancel(key, 1, ProbeKind::Liveness, 4, &mut janitor);
        assert_eq!(
            runner.attempts.len(),
            1,
            "seq 4 is not the attempt in flight"
        );
        runner.cancel(key, 1, ProbeKind::Liveness, 5, &mut janitor);
        assert!(runner.attempts.is_empty());
        let mut events = mio::Events::with_capacity(4);
        crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(50));
        assert!(
            events.is_empty(),
            "the cancelled socket is closed, which removes its registration"
        );
    }

    /// A listener whose accept queue is full (backlog 0, one connection waiting): the kernel
    /// drops further SYNs (tcp_conn_request, `sk_acceptq_is_full`), so a probe's connect stays
    /// in progress for seconds.
    fn full_listener() -> (std::net::TcpListener, std::net::TcpStream) {
        use nix::sys::socket::{Backlog, listen};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listen(&listener, Backlog::new(0).unwrap()).unwrap();
        let filler = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (listener, filler)
    }

    #[test]
    fn connects_stuck_past_their_timeouts_are_expired_at_their_deadlines_and_not_before() {
        let (listener, _filler) = full_listener();
        let port = listener.local_addr().unwrap().port();
        let (_poll, mut runner, mut janitor) = setup();
        let container = crate::control::render::fixtures::spec("c");
        let probe = |ms| {
            let mut p = (*tcp_probe(port)).clone();
            p.timeout = Duration::from_millis(ms);
            Arc::new(p)
        };
        let (long, short) = (probe(900), probe(300));
        let t0 = Instant::now();
        let mut reaper = Reaper::default();
        let mut start = |key, probe: &Arc<ProbeSpec>, at| {
            let req = ProbeRequest {
                key: ContainerKey(key),
                generation: 1,
                container: &container,
                kind: ProbeKind::Liveness,
                seq: 1,
                probe,
            };
            assert!(
                runner
                    .start(req, None, at, &mut reaper, &mut janitor)
                    .is_none()
            );
        };
        start(1, &long, t0);
        start(2, &short, t0 + Duration::from_millis(100));
        let mut expired = |runner: &mut ProbeRunner, ms| -> Vec<(u32, String)> {
            let mut v: Vec<_> = runner
                .expire(t0 + Duration::from_millis(ms), &mut janitor)
                .into_iter()
                .map(|i| match i {
                    Input::ProbeResult {
                        key,
                        outcome: ProbeOutcome::Failure(m),
                        ..
                    } => (key.0, m),
                    other => panic!("unexpected {other:?}"),
                })
                .collect();
            v.sort();
            v
        };
        assert!(expired(&mut runner, 399).is_empty());
        let message = |ms| format!("dial tcp 127.0.0.1:{port}: connect: timed out after {ms}ms");
        assert_eq!(expired(&mut runner, 400), vec![(2, message(300))]);
        assert!(expired(&mut runner, 899).is_empty());
        assert_eq!(expired(&mut runner, 950), vec![(1, message(900))]);
        assert!(runner.attempts.is_empty());
        assert!(expired(&mut runner, 5_000).is_empty());
    }

    #[test]
    fn an_event_carrying_an_earlier_attempts_token_does_not_decide_the_attempt_in_flight() {
        let (listener, _filler) = full_listener();
        let port = listener.local_addr().unwrap().port();
        let (mut poll, mut runner, mut janitor) = setup();
        let container = crate::control::render::fixtures::spec("c");
        let probe = tcp_probe(port);
        let key = ContainerKey(3);
        let req = |seq| ProbeRequest {
            key,
            generation: 1,
            container: &container,
            kind: ProbeKind::Readiness,
            seq,
            probe: &probe,
        };
        let now = Instant::now();
        let mut reaper = Reaper::default();
        assert!(
            runner
                .start(req(6), None, now, &mut reaper, &mut janitor)
                .is_none()
        );
        runner.cancel(key, 1, ProbeKind::Readiness, 6, &mut janitor);
        assert!(
            runner
                .start(req(7), None, now, &mut reaper, &mut janitor)
                .is_none()
        );

        // What a registration left behind by attempt 6 would deliver (its socket closed while
        // a freshly cloned child still held it): a writable descriptor under 6's token.
        let (stale, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let stale_fd = std::os::fd::AsRawFd::as_raw_fd(&stale);
        let old = tokens::probe_token(key, ProbeKind::Readiness, 6);
        runner
            .registry
            .register(
                &mut mio::unix::SourceFd(&stale_fd),
                old,
                Interest::READABLE | Interest::WRITABLE,
            )
            .unwrap();
        let mut events = mio::Events::with_capacity(4);
        let mut seen_stale = false;
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(50));
            for e in events.iter() {
                seen_stale |= e.token() == old && e.is_writable();
                let result = runner.on_event(
                    e.token(),
                    e,
                    Instant::now(),
                    &mut Reaper::default(),
                    &mut janitor,
                );
                assert!(result.is_none(), "decided by {e:?}: {result:?}");
            }
        }
        assert!(seen_stale, "the stale registration delivered its event");
        assert_eq!(
            runner
                .attempts
                .get(&(key, ProbeKind::Readiness))
                .map(|a| a.seq),
            Some(7),
            "attempt 7 is still connecting"
        );
        runner.cancel(key, 1, ProbeKind::Readiness, 7, &mut janitor);
    }
}
