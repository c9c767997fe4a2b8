//! Control requests answered from the core's snapshot in the same loop turn: authorisation,
//! dispatch of each command, and the `events -f` / `logs -f` streams.

use super::*;
use crate::control::wire::{self, ErrorKind};

impl Shell {
    pub(super) fn on_control(&mut self, event: &mio::event::Event, now: Instant) {
        let incoming = self.server.on_event(self.poll.registry(), event);
        for inc in incoming {
            self.answer(inc, now);
        }
    }

    pub(super) fn answer(&mut self, inc: Incoming, now: Instant) {
        // Re-anchor wall-clock times at every answer, so a stepped system clock (NTP, a VM
        // resumed) shows up in what is reported; the core's timers never see it.
        self.clock = WallClock::now();
        let Incoming {
            conn,
            peer,
            request,
        } = inc;
        let request: Request = match request {
            Ok(r) => r,
            Err(e) => {
                self.server.send(self.poll.registry(), conn, &e.reply());
                return;
            }
        };
        let id = request.id.clone();
        if request.cmd.is_mutating() && !self.authorised(peer.uid, peer.gid) {
            warn!(
                "control: refused {} from pid {} uid {}",
                request.cmd.name(),
                peer.pid,
                peer.uid
            );
            let line = protocol::reply_err(
                &id,
                ErrorKind::PermissionDenied,
                &format!(
                    "{} needs root, vigil's own uid, or a uid/gid in admin_uids/admin_gids (you are uid {})",
                    request.cmd.name(),
                    peer.uid
                ),
            );
            self.server.send(self.poll.registry(), conn, &line);
            return;
        }
        let secrets = if self.authorised(peer.uid, peer.gid) {
            render::Secrets::Shown
        } else {
            render::Secrets::Redacted
        };
        let reply = match request.cmd {
            RequestCmd::Version => wire_json(&render::version()),
            RequestCmd::Status { pod } => {
                let pods = self.snapshot(now, pod.as_deref());
                match pod {
                    Some(name) if !pods.iter().any(|p| p.name == name) => {
                        Err((ErrorKind::NotFound, format!("no pod named \"{name}\"")))
                    }
                    _ => wire_json(&render::status(&pods, &self.clock, secrets)),
                }
            }
            RequestCmd::Describe { pod } => {
                let pods = self.snapshot(now, Some(pod.as_str()));
                match pods.iter().find(|p| p.name == pod) {
                    Some(p) => wire_json(&render::describe(
                        p,
                        &self.core.events_since(0),
                        &self.clock,
                        secrets,
                    )),
                    None => Err((ErrorKind::NotFound, format!("no pod named \"{pod}\""))),
                }
            }
            RequestCmd::Events { follow } => {
                let events = self.core.events_since(0);
                if follow {
                    self.server.set_follow(conn, id.clone());
                    for e in &events {
                        if let Some(line) = event_line(&id, e, &self.clock) {
                            self.server.send(self.poll.registry(), conn, &line);
                        }
                    }
                    let last_seq = events.iter().map(|e| e.seq).max().unwrap_or(0);
                    self.followers.push(Follower::Events { conn, id, last_seq });
                    return;
                }
                wire_json(&render::events(&events, &self.clock))
            }
            RequestCmd::Logs {
                pod,
                container,
                follow,
                tail,
                previous,
            } => match self.find_slot(&pod, container.as_deref()) {
                Err(e) => Err((ErrorKind::NotFound, e)),
                Ok(key) => {
                    let Some(slot) = self.slots.get(&key) else {
                        return;
                    };
                    let data = slot.log.buffer.tail_lines(tail, previous);
                    let offset = slot.log.buffer.total_written();
                    if follow {
                        self.server.set_streaming(conn);
                        let line = protocol::reply_log(&id, &data);
                        self.server.send(self.poll.registry(), conn, &line);
                        self.followers.push(Follower::Logs {
                            conn,
                            id,
                            key,
                            offset,
                        });
                        return;
                    }
                    wire_json(&wire::LogsReply {
                        pod: slot.pod.clone(),
                        container: slot.name.clone(),
                        log: String::from_utf8_lossy(&data).into_owned(),
                        dropped_bytes: slot.log.buffer.dropped_bytes(),
                    })
                }
            },
            RequestCmd::Start { pod, container } => {
                self.command(now, Command::Start { pod, container })
            }
            RequestCmd::Stop { pod, container } => {
                self.command(now, Command::Stop { pod, container })
            }
            RequestCmd::Restart { pod, container } => {
                self.command(now, Command::Restart { pod, container })
            }
            RequestCmd::Shutdown => {
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
                self.command(now, Command::Shutdown { force: false })
            }
            RequestCmd::Reload => match self.reload(now) {
                Ok(message) => wire_json(&wire::MessageReply { message }),
                Err(e) => Err((ErrorKind::from(&e), e.to_string())),
            },
        };
        let line = match reply {
            Ok(v) => protocol::reply_ok(&id, v),
            Err((kind, message)) => protocol::reply_err(&id, kind, &message),
        };
        self.server.send(self.poll.registry(), conn, &line);
        self.drain_actions(now);
    }

    pub(super) fn command(
        &mut self,
        now: Instant,
        command: Command,
    ) -> Result<serde_json::Value, (ErrorKind, String)> {
        match self.core.command(now, command) {
            Ok(message) => wire_json(&wire::MessageReply { message }),
            Err(e) => Err((e.kind.into(), e.message)),
        }
    }

    pub(super) fn authorised(&self, uid: u32, gid: u32) -> bool {
        uid == 0
            || uid == nix::unistd::geteuid().as_raw()
            || self.config.supervisor.admin_uids.contains(&uid)
            || self.config.supervisor.admin_gids.contains(&gid)
    }

    pub(super) fn find_slot(
        &self,
        pod: &str,
        container: Option<&str>,
    ) -> Result<ContainerKey, String> {
        let pods = self.core.pods(Instant::now());
        let Some(p) = pods.iter().find(|p| p.name == pod) else {
            return Err(format!("no pod named \"{pod}\""));
        };
        let all: Vec<_> = p
            .init_containers
            .iter()
            .chain(p.containers.iter())
            .collect();
        let c = match container {
            Some(name) => all.iter().find(|c| c.name == name).copied(),
            None => p.containers.first(),
        };
        match c {
            Some(c) if self.slots.contains_key(&c.key) => Ok(c.key),
            Some(c) => Err(format!(
                "container {pod}/{} has not run yet: no logs",
                c.name
            )),
            None => Err(format!(
                "pod \"{pod}\" has no container named \"{}\"",
                container.unwrap_or("")
            )),
        }
    }

    /// Core snapshot plus what only the shell knows: cgroup paths and figures. With `only`,
    /// just that pod (reading cgroup figures costs a few file reads per container, so a query
    /// for one pod must not pay for all of them).
    pub(super) fn snapshot(&self, now: Instant, only: Option<&str>) -> Vec<crate::core::PodStatus> {
        let mut pods = self.core.pods(now);
        if let Some(name) = only {
            pods.retain(|p| p.name == name);
        }
        for pod in &mut pods {
            for c in pod
                .init_containers
                .iter_mut()
                .chain(pod.containers.iter_mut())
            {
                if let Some(run) = self.slots.get(&c.key).and_then(|s| s.run.as_ref())
                    && let Some(cg) = &run.cgroup
                {
                    c.cgroup = Some(cg.path().to_path_buf());
                    c.resources = Some(cg.figures().into());
                }
            }
        }
        pods
    }

    pub(super) fn push_followers(&mut self) {
        for closed in self.server.take_closed() {
            self.followers.retain(|f| match f {
                Follower::Events { conn, .. } | Follower::Logs { conn, .. } => *conn != closed,
            });
        }
        if self.followers.is_empty() {
            return;
        }
        let mut followers = std::mem::take(&mut self.followers);
        followers.retain_mut(|f| match f {
            Follower::Events { conn, id, last_seq } => {
                if !self.server.is_open(*conn) {
                    return false;
                }
                for e in self.core.events_since(*last_seq) {
                    *last_seq = (*last_seq).max(e.seq);
                    if let Some(line) = event_line(id, &e, &self.clock) {
                        self.server.send(self.poll.registry(), *conn, &line);
                    }
                }
                true
            }
            Follower::Logs {
                conn,
                id,
                key,
                offset,
            } => {
                if !self.server.is_open(*conn) {
                    return false;
                }
                let Some(slot) = self.slots.get(key) else {
                    return false;
                };
                let read = slot.log.buffer.read_since(*offset);
                *offset = read.next;
                if !read.bytes.is_empty() {
                    let line = protocol::reply_log(id, &read.bytes);
                    self.server.send(self.poll.registry(), *conn, &line);
                }
                true
            }
        });
        self.followers = followers;
    }
}

/// A reply value as JSON; a value that cannot be serialized (a bug) is an `internal` error.
fn wire_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value, (ErrorKind, String)> {
    wire::to_json(v).map_err(|e| (ErrorKind::Internal, format!("cannot encode the reply: {e}")))
}

/// One followed event's reply line; `None` (logged) if it cannot be encoded (a bug).
fn event_line(id: &serde_json::Value, e: &crate::core::Event, clock: &WallClock) -> Option<String> {
    match wire::to_json(&render::event(e, clock)) {
        Ok(v) => Some(protocol::reply_event(id, v)),
        Err(err) => {
            error!("control: cannot encode event {}: {err}", e.seq);
            None
        }
    }
}
