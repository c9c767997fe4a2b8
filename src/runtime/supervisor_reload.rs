//! What a reload may change in `[supervisor]`, decided before anything is changed.
//!
//! Owns: the list of `[supervisor]` keys, each either applied live by the runtime or needing a
//! restart. A reload that changes a restart-only key is refused whole ("needs a restart",
//! naming each key) so nothing is ever reported as applied while being ignored; the runtime
//! applies the live ones only after the whole reload was accepted.
//!
//! Live: `socket_mode`, `socket_group` (the bound socket file is changed), `admin_uids`,
//! `admin_gids` (open connections are judged again), `max_connections_per_uid`,
//! `client_idle_timeout_seconds`, `client_fd_percent` (new connections, the next sweep),
//! `shutdown_timeout_seconds` (the core reads it at the next shutdown), `log_buffer_bytes`
//! (each container's next run), `log_max_file_bytes` and `log_max_files` (the next write),
//! `log_timestamps` (the next write), `log_forward` (forwarding starts or stops), `oom_score_adj` to a number (written at once),
//! `sched_slice_microseconds` to a number (asked of the kernel at once),
//! `on_restart` and `on_output_lost` (only read when vigil starts: kept for the next start),
//! `on_event` (the hooks: at once, from the next event), `pod_dir` (read by the same reload;
//! watched from then on).
//! Restart: `socket` (clients and units know the old path), `cgroup_root` and `cgroup_name`
//! (running containers live in the old tree), `allow_missing_controllers` (decided at start),
//! `log_dir` (open files of running containers stay where they are), `metrics_address`
//! (scrapers know the old address), `oom_score_adj` and `sched_slice_microseconds` back to
//! `"inherit"`.
//!
//! Must not: do I/O. Pure over two validated specs.

use crate::config::spec::SupervisorSpec;

/// `[supervisor]` keys a reload changed that vigil cannot change while running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[supervisor] {} changed: needs a restart of vigil (nothing was changed; put the old value \
     back to reload the rest)",
    keys.join(", ")
)]
pub struct RestartNeeded {
    pub keys: Vec<&'static str>,
}

/// The live `[supervisor]` keys a reload changed, in file order of the docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub keys: Vec<&'static str>,
}

impl Plan {
    pub fn changes(&self, key: &str) -> bool {
        self.keys.contains(&key)
    }

    /// `; [supervisor]: log_forward, shutdown_timeout_seconds applied`, or nothing.
    pub fn summary(&self) -> String {
        if self.keys.is_empty() {
            String::new()
        } else {
            format!("; [supervisor] {} applied", self.keys.join(", "))
        }
    }
}

/// Whether the control server can apply `socket_mode`/`socket_group` to its bound socket.
pub const SOCKET_ACCESS_LIVE: bool = true;

/// Compares the running `[supervisor]` with a reloaded one.
pub fn plan(old: &SupervisorSpec, new: &SupervisorSpec) -> Result<Plan, RestartNeeded> {
    let mut restart = Vec::new();
    let mut live = Vec::new();
    let mut key = |changed: bool, name: &'static str, is_live: bool| {
        if changed {
            if is_live {
                live.push(name);
            } else {
                restart.push(name);
            }
        }
    };
    key(old.socket != new.socket, "socket", false);
    key(
        old.socket_mode != new.socket_mode,
        "socket_mode",
        SOCKET_ACCESS_LIVE,
    );
    key(
        old.socket_group != new.socket_group,
        "socket_group",
        SOCKET_ACCESS_LIVE,
    );
    key(old.admin_uids != new.admin_uids, "admin_uids", true);
    key(old.admin_gids != new.admin_gids, "admin_gids", true);
    key(
        old.max_connections_per_uid != new.max_connections_per_uid,
        "max_connections_per_uid",
        true,
    );
    key(
        old.client_idle_timeout != new.client_idle_timeout,
        "client_idle_timeout_seconds",
        true,
    );
    key(
        old.client_fd_percent != new.client_fd_percent,
        "client_fd_percent",
        true,
    );
    key(old.cgroup_root != new.cgroup_root, "cgroup_root", false);
    key(old.cgroup_name != new.cgroup_name, "cgroup_name", false);
    key(old.log_dir != new.log_dir, "log_dir", false);
    key(old.pod_dir != new.pod_dir, "pod_dir", true);
    key(
        old.metrics_address != new.metrics_address,
        "metrics_address",
        false,
    );
    key(
        old.log_max_file_bytes != new.log_max_file_bytes,
        "log_max_file_bytes",
        true,
    );
    key(
        old.log_max_files != new.log_max_files,
        "log_max_files",
        true,
    );
    key(
        old.log_buffer_bytes != new.log_buffer_bytes,
        "log_buffer_bytes",
        true,
    );
    key(old.log_forward != new.log_forward, "log_forward", true);
    key(
        old.log_timestamps != new.log_timestamps,
        "log_timestamps",
        true,
    );
    key(
        old.allow_missing_controllers != new.allow_missing_controllers,
        "allow_missing_controllers",
        false,
    );
    key(
        old.log_forward_to != new.log_forward_to,
        "log_forward_to",
        true,
    );
    key(old.on_event != new.on_event, "on_event", true);
    key(
        old.shutdown_timeout != new.shutdown_timeout,
        "shutdown_timeout_seconds",
        true,
    );
    // Only read when vigil starts: the new value is simply kept for the next start.
    key(old.on_restart != new.on_restart, "on_restart", true);
    key(
        old.on_output_lost != new.on_output_lost,
        "on_output_lost",
        true,
    );
    // A value is written at once; back to "inherit" would need the value vigil started with.
    key(
        old.oom_score_adj != new.oom_score_adj,
        "oom_score_adj",
        new.oom_score_adj.is_some(),
    );
    // Likewise: "inherit" would need the slice vigil started with.
    key(
        old.sched_slice_micros != new.sched_slice_micros,
        "sched_slice_microseconds",
        new.sched_slice_micros.is_some(),
    );
    if restart.is_empty() {
        Ok(Plan { keys: live })
    } else {
        Err(RestartNeeded { keys: restart })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::spec::CgroupRoot;
    use std::path::PathBuf;
    use std::time::Duration;

    #[test]
    fn nothing_changed_is_an_empty_plan() {
        let s = SupervisorSpec::default();
        assert_eq!(plan(&s, &s.clone()), Ok(Plan::default()));
        assert_eq!(Plan::default().summary(), "");
    }

    #[test]
    fn live_keys_are_listed_and_summarised() {
        let old = SupervisorSpec::default();
        let new = SupervisorSpec {
            log_forward: !old.log_forward,
            log_buffer_bytes: 4096,
            shutdown_timeout: Duration::from_secs(5),
            admin_uids: vec![1000],
            ..old.clone()
        };
        let p = plan(&old, &new).unwrap();
        assert_eq!(
            p.keys,
            [
                "admin_uids",
                "log_buffer_bytes",
                "log_forward",
                "shutdown_timeout_seconds"
            ]
        );
        assert!(p.changes("log_forward"));
        assert_eq!(
            p.summary(),
            "; [supervisor] admin_uids, log_buffer_bytes, log_forward, shutdown_timeout_seconds applied"
        );
    }

    #[test]
    fn restart_only_keys_refuse_the_whole_reload_naming_each() {
        let old = SupervisorSpec::default();
        let new = SupervisorSpec {
            socket: Some(PathBuf::from("/run/other.sock")),
            cgroup_root: CgroupRoot::None,
            cgroup_name: "other".into(),
            log_forward: !old.log_forward,
            metrics_address: Some("127.0.0.1:9469".parse().unwrap()),
            ..old.clone()
        };
        let e = plan(&old, &new).unwrap_err();
        assert_eq!(
            e.keys,
            ["socket", "cgroup_root", "cgroup_name", "metrics_address"]
        );
        let m = e.to_string();
        assert!(
            m.contains(
                "socket, cgroup_root, cgroup_name, metrics_address changed: needs a restart"
            ),
            "{m}"
        );
    }

    #[test]
    fn a_new_time_slice_applies_live_and_back_to_inherit_needs_a_restart() {
        let old = SupervisorSpec::default();
        let shorter = SupervisorSpec {
            sched_slice_micros: Some(500),
            ..old.clone()
        };
        let p = plan(&old, &shorter).unwrap();
        assert_eq!(p.keys, ["sched_slice_microseconds"]);
        let inherit = SupervisorSpec {
            sched_slice_micros: None,
            ..old.clone()
        };
        assert_eq!(
            plan(&old, &inherit).unwrap_err().keys,
            ["sched_slice_microseconds"]
        );
    }

    #[test]
    fn socket_access_is_never_reported_applied_while_the_server_cannot_apply_it() {
        let old = SupervisorSpec::default();
        let new = SupervisorSpec {
            socket_mode: 0o666,
            ..old.clone()
        };
        let r = plan(&old, &new);
        if SOCKET_ACCESS_LIVE {
            assert_eq!(r.unwrap().keys, ["socket_mode"]);
        } else {
            assert_eq!(r.unwrap_err().keys, ["socket_mode"]);
        }
    }
}
