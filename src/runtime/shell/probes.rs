//! Probe attempts on the loop: network probes as non-blocking sockets, exec probes as
//! processes in a sub-cgroup of their container; results go back to the core, which owns
//! schedules, thresholds and timeouts (a timeout reaches here as a cancel).

use super::*;

impl Shell {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_probe(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        container: &Arc<ContainerSpec>,
        kind: ProbeKind,
        seq: u64,
        probe: &Arc<ProbeSpec>,
        now: Instant,
    ) -> Option<Input> {
        // A previous attempt still in flight is abandoned (the core never doubles; this only
        // happens when its cancel raced with the next start).
        self.cancel_probe_any(key, kind);
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
        match &probe.action {
            ProbeAction::Exec { command } => {
                let cgroup = match self
                    .slots
                    .get(&key)
                    .and_then(|s| s.run.as_ref())
                    .and_then(|r| r.cgroup.as_ref())
                {
                    Some(cg) => match cg.create_child(&format!("probe-{}", kind.as_str())) {
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
                let pid = match process::spawn(
                    &prepared,
                    cgroup.as_ref().map(|c| process::CgroupTarget {
                        dir: Some(c.dir_fd()),
                        procs: c.procs_fd(),
                    }),
                    Stdio::Combined(w),
                ) {
                    Ok(pid) => pid,
                    Err(e) => {
                        if let Some(cg) = cgroup {
                            let _ = cg.kill();
                            let _ = cg.remove();
                        }
                        return result(ProbeOutcome::Failure(e.to_string()));
                    }
                };
                self.pids
                    .insert(pid, PidOwner::ExecProbe { key, kind, seq });
                let token = self.alloc_token(TokenOwner::ProbePipe { key, kind });
                let raw = r.as_raw_fd();
                let pipe = match self.poll.registry().register(
                    &mut SourceFd(&raw),
                    token,
                    Interest::READABLE,
                ) {
                    Ok(()) => Some((r, token)),
                    Err(_) => {
                        self.tokens.remove(&token);
                        None
                    }
                };
                self.probes.insert(
                    (key, kind),
                    ProbeRun {
                        generation,
                        seq,
                        started: now,
                        how: ProbeHow::Exec {
                            pid,
                            pipe,
                            output: Vec::new(),
                            cgroup,
                        },
                    },
                );
                None
            }
            action @ (ProbeAction::HttpGet { .. }
            | ProbeAction::TcpSocket { .. }
            | ProbeAction::Grpc { .. }) => {
                let token = self.alloc_token(TokenOwner::NetProbe { key, kind });
                match crate::probe::NetProbe::start(action, self.poll.registry(), token) {
                    Ok(mut p) => {
                        p.expire_at(now, probe.timeout);
                        self.probes.insert(
                            (key, kind),
                            ProbeRun {
                                generation,
                                seq,
                                started: now,
                                how: ProbeHow::Net { probe: p, token },
                            },
                        );
                        None
                    }
                    Err(outcome) => {
                        self.tokens.remove(&token);
                        result(outcome)
                    }
                }
            }
        }
    }

    pub(super) fn on_net_probe(
        &mut self,
        key: ContainerKey,
        kind: ProbeKind,
        event: &mio::event::Event,
        now: Instant,
    ) {
        let Some(run) = self.probes.get_mut(&(key, kind)) else {
            return;
        };
        let ProbeHow::Net { probe, .. } = &mut run.how else {
            return;
        };
        if let Some(outcome) = probe.on_event(self.poll.registry(), event) {
            let Some(run) = self.probes.remove(&(key, kind)) else {
                return;
            };
            if let ProbeHow::Net { token, .. } = run.how {
                self.tokens.remove(&token);
            }
            self.feed(
                now,
                Input::ProbeResult {
                    key,
                    generation: run.generation,
                    kind,
                    seq: run.seq,
                    outcome,
                    duration: now.saturating_duration_since(run.started),
                },
            );
        }
    }

    /// Network probes past their timeout while still resolving, connecting or in a TLS
    /// handshake end here with a message naming that stage (`tls: handshake timed out after
    /// 1s`); this runs just before the core's timeouts, which would only say `probe timed
    /// out`. Bounded by the number of probes in flight.
    pub(super) fn expire_net_probes(&mut self, now: Instant) {
        let due: Vec<_> = self
            .probes
            .iter()
            .filter_map(|(k, run)| match &run.how {
                ProbeHow::Net { probe, .. } => probe.expired(now).map(|m| (*k, m)),
                ProbeHow::Exec { .. } => None,
            })
            .collect();
        for ((key, kind), message) in due {
            let Some(run) = self.probes.remove(&(key, kind)) else {
                continue;
            };
            if let ProbeHow::Net { probe, token } = run.how {
                probe.cancel(self.poll.registry());
                self.tokens.remove(&token);
            }
            self.feed(
                now,
                Input::ProbeResult {
                    key,
                    generation: run.generation,
                    kind,
                    seq: run.seq,
                    outcome: ProbeOutcome::Failure(message),
                    duration: now.saturating_duration_since(run.started),
                },
            );
        }
    }

    pub(super) fn on_probe_pipe(&mut self, key: ContainerKey, kind: ProbeKind) {
        let Some(run) = self.probes.get_mut(&(key, kind)) else {
            return;
        };
        let ProbeHow::Exec { pipe, output, .. } = &mut run.how else {
            return;
        };
        let Some((fd, token)) = pipe.as_ref() else {
            return;
        };
        let token = *token;
        let mut buf = Vec::new();
        let res = logs::drain_pipe(fd.as_fd(), &mut buf, 64 * 1024);
        // Keep only the first bytes: the result message needs no more.
        let room = 4096usize.saturating_sub(output.len());
        output.extend_from_slice(&buf[..buf.len().min(room)]);
        if !matches!(res, Ok(ref r) if !r.eof) {
            if let Some((fd, _)) = pipe.take() {
                let raw = fd.as_raw_fd();
                let _ = self.poll.registry().deregister(&mut SourceFd(&raw));
            }
            self.tokens.remove(&token);
        }
    }

    pub(super) fn on_exec_probe_exit(
        &mut self,
        key: ContainerKey,
        kind: ProbeKind,
        seq: u64,
        code: Option<i32>,
        signal: Option<i32>,
        now: Instant,
    ) {
        let matches = self.probes.get(&(key, kind)).is_some_and(|r| r.seq == seq);
        if !matches {
            return; // cancelled earlier; its tree was killed then
        }
        // Collect the last output before deciding.
        self.on_probe_pipe(key, kind);
        let Some(run) = self.probes.remove(&(key, kind)) else {
            return;
        };
        let ProbeHow::Exec {
            pipe,
            output,
            cgroup,
            ..
        } = run.how
        else {
            return;
        };
        if let Some((fd, token)) = pipe {
            let raw = fd.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&raw));
            self.tokens.remove(&token);
        }
        if let Some(cg) = cgroup {
            let _ = cg.kill();
            if cg.remove().is_err() {
                self.retire_cgroup(key, run.generation, cg);
            }
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
                ProbeOutcome::Failure(format!("command killed by {}", signal_name(s)))
            }
            (None, None) => ProbeOutcome::Failure("command ended".to_string()),
        };
        self.feed(
            now,
            Input::ProbeResult {
                key,
                generation: run.generation,
                kind,
                seq,
                outcome,
                duration: now.saturating_duration_since(run.started),
            },
        );
    }

    pub(super) fn cancel_probe(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        kind: ProbeKind,
        seq: u64,
    ) {
        if self
            .probes
            .get(&(key, kind))
            .is_some_and(|r| r.seq == seq && r.generation == generation)
        {
            self.cancel_probe_any(key, kind);
        }
    }

    pub(super) fn cancel_probe_any(&mut self, key: ContainerKey, kind: ProbeKind) {
        let Some(run) = self.probes.remove(&(key, kind)) else {
            return;
        };
        match run.how {
            ProbeHow::Net { probe, token } => {
                probe.cancel(self.poll.registry());
                self.tokens.remove(&token);
            }
            ProbeHow::Exec {
                pid, pipe, cgroup, ..
            } => {
                // Kill the probe's whole tree; its pid stays in the reaper table (as an owner
                // whose seq no longer matches) so it is reaped and ignored.
                match &cgroup {
                    Some(cg) => {
                        let _ = cg.kill();
                    }
                    None => {
                        let _ = process::signal_group(pid, libc::SIGKILL);
                    }
                }
                if let Some((fd, token)) = pipe {
                    let raw = fd.as_raw_fd();
                    let _ = self.poll.registry().deregister(&mut SourceFd(&raw));
                    self.tokens.remove(&token);
                }
                if let Some(cg) = cgroup
                    && cg.remove().is_err()
                {
                    self.retire_cgroup(key, run.generation, cg);
                }
            }
        }
    }
}
