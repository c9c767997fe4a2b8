//! The executor: turns the core's actions into effects — spawning a run into a fresh cgroup,
//! signalling and killing runs, retiring finished runs' cgroups — and reads container output
//! into the log buffers. Outcomes go straight back to the core as inputs; nothing here
//! decides what runs.

use super::*;

impl Shell {
    pub(super) fn feed(&mut self, now: Instant, input: Input) {
        self.core.handle(now, input);
    }

    pub(super) fn drain_actions(&mut self, now: Instant) {
        while let Some(action) = self.core.poll_action() {
            self.execute(action, now);
        }
    }

    pub(super) fn execute(&mut self, action: Action, now: Instant) {
        match action {
            Action::Spawn { .. } => {
                if let Some(input) = self.spawn(&action, now) {
                    // The run starts when its process does, not when the turn began: a turn
                    // spawning hundreds of containers lasts a second, and `started_at` — the
                    // base of the probe schedule — must not predate the process by that much
                    // (nor put every probe of the batch on the same instant).
                    self.feed(Instant::now(), input);
                }
            }
            Action::Signal {
                key,
                generation,
                signal,
            } => {
                if let Some(pid) = self.live_pid(key, generation)
                    && let Err(e) = process::signal(pid, signal)
                {
                    debug!("{e}");
                }
            }
            Action::Kill { key, generation } => self.kill_run(key, generation),
            Action::StartProbe {
                key,
                generation,
                container,
                kind,
                seq,
                probe,
                ..
            } => {
                if let Some(input) =
                    self.start_probe(key, generation, &container, kind, seq, &probe, now)
                {
                    self.feed(now, input);
                }
            }
            Action::CancelProbe {
                key,
                generation,
                kind,
                seq,
            } => self.cancel_probe(key, generation, kind, seq),
            Action::Forget { key } => {
                self.kill_run_any(key);
                self.slots.remove(&key);
                self.followers
                    .retain(|f| !matches!(f, Follower::Logs { key: k, .. } if *k == key));
            }
            Action::Exit { code } => self.exit_code = Some(code),
        }
    }

    pub(super) fn live_pid(&self, key: ContainerKey, generation: Generation) -> Option<u32> {
        let run = self.slots.get(&key)?.run.as_ref()?;
        (run.generation == generation && !run.exited)
            .then_some(run.pid)
            .flatten()
    }

    pub(super) fn kill_run(&mut self, key: ContainerKey, generation: Generation) {
        let Some(run) = self.slots.get(&key).and_then(|s| s.run.as_ref()) else {
            return;
        };
        if run.generation != generation || run.exited {
            return;
        }
        match &run.cgroup {
            Some(cg) => {
                if let Err(e) = cg.kill() {
                    warn!("{e}");
                    if let Some(pid) = run.pid {
                        let _ = process::signal_group(pid, libc::SIGKILL);
                    }
                }
            }
            None => {
                if let Some(pid) = run.pid {
                    let _ = process::signal_group(pid, libc::SIGKILL);
                    let _ = process::signal(pid, libc::SIGKILL);
                }
            }
        }
    }

    pub(super) fn kill_run_any(&mut self, key: ContainerKey) {
        if let Some(generation) = self
            .slots
            .get(&key)
            .and_then(|s| s.run.as_ref())
            .map(|r| r.generation)
        {
            self.kill_run(key, generation);
        }
    }

    /// Execute a Spawn action; returns the input to feed back, or `None` when deferred.
    pub(super) fn spawn(&mut self, action: &Action, now: Instant) -> Option<Input> {
        let Action::Spawn {
            key,
            generation,
            pod,
            container,
            ..
        } = action
        else {
            return None;
        };
        let (key, generation) = (*key, *generation);
        let sup = &self.config.supervisor;
        let slot = self.slots.entry(key).or_insert_with(|| {
            let (log, err) = ContainerLog::new(pod, &container.name, sup);
            if let Some(e) = err {
                warn!("{e}");
            }
            Slot {
                pod: pod.clone(),
                name: container.name.clone(),
                spec: container.clone(),
                log,
                run: None,
            }
        });
        slot.spec = container.clone();
        let failed = |message: String| {
            Some(Input::SpawnFailed {
                key,
                generation,
                message,
            })
        };

        // A fresh cgroup per run (platform-notes: never reuse a cgroup after cgroup.kill).
        if let Some(m) = &self.cgroups {
            let path = m.root().join(pod).join(&container.name);
            if self.dying.values().any(|(cg, _)| cg.path() == path) {
                // The previous run's cgroup still holds dying processes: retry shortly rather
                // than block the loop waiting for the kernel to empty it.
                self.deferred
                    .push((now + Duration::from_millis(5), action.clone()));
                return None;
            }
        }
        let cgroup = match &self.cgroups {
            Some(m) => {
                match m.create_container(pod, &container.name, &(&container.resources).into()) {
                    Ok(cg) => Some(cg),
                    Err(e) => return failed(format!("cgroup placement failed: {e}")),
                }
            }
            None => None,
        };

        let prepared = match process::prepare(&container.command, container) {
            Ok(p) => p,
            Err(e) => {
                if let Some(cg) = cgroup {
                    self.retire_cgroup(key, generation, cg);
                }
                return failed(e.to_string());
            }
        };
        let pipes = process::pipe_nonblocking()
            .and_then(|out| process::pipe_nonblocking().map(|err| (out, err)));
        let ((out_r, out_w), (err_r, err_w)) = match pipes {
            Ok(p) => p,
            Err(e) => {
                if let Some(cg) = cgroup {
                    self.retire_cgroup(key, generation, cg);
                }
                return failed(e.to_string());
            }
        };
        let spawned = process::spawn(
            &prepared,
            cgroup.as_ref().map(|c| process::CgroupTarget {
                dir: Some(c.dir_fd()),
                procs: c.procs_fd(),
            }),
            Stdio::Separate {
                stdout: out_w,
                stderr: err_w,
            },
        );
        let pid = match spawned {
            Ok(pid) => pid,
            Err(e) => {
                if let Some(cg) = cgroup {
                    self.retire_cgroup(key, generation, cg);
                }
                return failed(e.to_string());
            }
        };
        self.pids.insert(pid, PidOwner::Main { key, generation });

        let mut pipe_tokens = Vec::new();
        for fd in [out_r, err_r] {
            let token = self.alloc_token(TokenOwner::Pipe { key, generation });
            let raw = fd.as_raw_fd();
            match self
                .poll
                .registry()
                .register(&mut SourceFd(&raw), token, Interest::READABLE)
            {
                Ok(()) => {
                    self.pipes.insert(token, fd);
                    pipe_tokens.push(token);
                }
                Err(e) => {
                    warn!("cannot watch output of pid {pid}: {e}");
                    self.tokens.remove(&token);
                }
            }
        }
        if let Some(cg) = &cgroup
            && let Some(fd) = cg.memory_events_fd()
        {
            let token = self.alloc_token(TokenOwner::MemoryEvents { key, generation });
            let raw = fd.as_raw_fd();
            if let Err(e) =
                self.poll
                    .registry()
                    .register(&mut SourceFd(&raw), token, Interest::PRIORITY)
            {
                debug!("cannot watch memory.events of {}: {e}", cg.path().display());
                self.tokens.remove(&token);
            }
        }
        let slot = self.slots.get_mut(&key)?;
        slot.log.new_run();
        let oom_seen = cgroup
            .as_ref()
            .map(|c| c.oom_baseline())
            .unwrap_or_default();
        slot.run = Some(Run {
            generation,
            pid: Some(pid),
            oom_seen,
            cgroup,
            pipes: pipe_tokens,
            exited: false,
        });
        debug!(
            "spawned {}/{} pid {pid} (generation {generation})",
            slot.pod, slot.name
        );
        Some(Input::Spawned {
            key,
            generation,
            pid,
        })
    }

    pub(super) fn retry_deferred(&mut self, now: Instant) {
        if self.deferred.is_empty() {
            return;
        }
        let due: Vec<Action> = {
            let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deferred)
                .into_iter()
                .partition(|(at, _)| *at <= now);
            self.deferred = keep;
            due.into_iter().map(|(_, a)| a).collect()
        };
        for action in due {
            if let Some(input) = self.spawn(&action, now) {
                self.feed(now, input);
            }
        }
    }

    pub(super) fn deregister_memory_events(&mut self, key: ContainerKey, generation: Generation) {
        let tokens: Vec<Token> = self
            .tokens
            .iter()
            .filter(|(_, o)| **o == TokenOwner::MemoryEvents { key, generation })
            .map(|(t, _)| *t)
            .collect();
        for t in tokens {
            self.tokens.remove(&t);
        }
    }

    pub(super) fn on_memory_events(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        now: Instant,
    ) {
        let Some(run) = self.slots.get_mut(&key).and_then(|s| s.run.as_mut()) else {
            return;
        };
        if run.generation != generation || run.exited {
            return;
        }
        let Some(cg) = run.cgroup.as_ref() else {
            return;
        };
        let Ok(now_counters) = cg.oom_counters() else {
            return;
        };
        // Events merge: compare values, never count wake-ups.
        let delta = now_counters.oom_kill.saturating_sub(run.oom_seen.oom_kill);
        run.oom_seen = now_counters;
        if delta > 0 {
            let memory_max = cg.memory_max();
            self.feed(
                now,
                Input::OomKills {
                    key,
                    generation,
                    delta,
                    memory_max,
                },
            );
        }
    }

    // ---- container output -----------------------------------------------------------------

    pub(super) fn read_pipe(&mut self, token: Token, key: ContainerKey) {
        let Some(fd) = self.pipes.get(&token) else {
            return;
        };
        let mut buf = Vec::new();
        let result = logs::drain_pipe(fd.as_fd(), &mut buf, PIPE_READ_CAP);
        let eof = matches!(result, Ok(ref r) if r.eof) || result.is_err();
        if let Some(slot) = self.slots.get_mut(&key) {
            let mut fw = self.forwarder.as_mut().map(|(f, _)| f);
            if !buf.is_empty() {
                slot.log.ingest(&buf, fw.as_deref_mut());
            }
            if eof {
                slot.log.eof(fw);
            }
        }
        match result {
            Ok(r) if r.eof => self.close_pipe(token, key),
            Ok(r) => {
                if r.bytes >= PIPE_READ_CAP && !self.pipes_more.contains(&token) {
                    self.pipes_more.push(token);
                }
            }
            Err(e) => {
                debug!("reading container output: {e}");
                self.close_pipe(token, key);
            }
        }
    }

    pub(super) fn read_more_pipes(&mut self, _now: Instant) {
        let more = std::mem::take(&mut self.pipes_more);
        for token in more {
            if let Some(TokenOwner::Pipe { key, .. }) = self.tokens.get(&token).copied() {
                self.read_pipe(token, key);
            }
        }
    }

    pub(super) fn close_pipe(&mut self, token: Token, key: ContainerKey) {
        if let Some(fd) = self.pipes.remove(&token) {
            let raw = fd.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&raw));
        }
        self.tokens.remove(&token);
        self.pipes_more.retain(|t| *t != token);
        if let Some(run) = self.slots.get_mut(&key).and_then(|s| s.run.as_mut()) {
            run.pipes.retain(|t| *t != token);
        }
    }

    pub(super) fn flush_forwarder(&mut self) {
        let Some((fw, fd)) = self.forwarder.as_mut() else {
            return;
        };
        if let Err(e) = fw.flush(fd.as_fd()) {
            debug!("forwarding container output: {e}");
        }
        let want = fw.pending();
        let raw = fd.as_raw_fd();
        // Wait for stdout to drain only while something is queued.
        if want != self.stdout_watched {
            let registry = self.poll.registry();
            let _ = if want {
                registry.register(&mut SourceFd(&raw), STDOUT_TOKEN, Interest::WRITABLE)
            } else {
                registry.deregister(&mut SourceFd(&raw))
            };
            self.stdout_watched = want;
        }
    }
}
