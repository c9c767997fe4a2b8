//! The `[supervisor]` table.

use std::path::PathBuf;

use super::{Checker, MAX_ID, has_nul, span};
use crate::config::keys::RawSupervisor;
use crate::config::raw::StrOrInt;
use crate::config::schema::join;
use crate::config::spec::{CgroupRoot, ForwardTo, OnOutputLost, OnRestart, SupervisorSpec};
use crate::config::values;

impl Checker<'_> {
    pub(super) fn supervisor(&mut self, s: &RawSupervisor) -> SupervisorSpec {
        let mut spec = SupervisorSpec::default();
        let p = "supervisor";
        if let Some(v) = &s.socket {
            spec.socket = self.abs_path(v, &join(p, "socket"));
        }
        // Read (and refused when unusable) before validation, by `interpolate`: only checked
        // to be paths here.
        for (i, v) in s.env_files.iter().flatten().enumerate() {
            self.abs_path(v, &format!("{}[{i}]", join(p, "env_files")));
        }
        if let Some(v) = &s.socket_mode {
            let field = join(p, "socket_mode");
            let mode =
                match v.get_ref() {
                    StrOrInt::Str(t) => values::parse_octal_mode(t),
                    // `socket_mode = 660` is decimal 660 = 0o1224: almost certainly meant octal.
                    StrOrInt::Int(n) => u32::try_from(*n).ok().filter(|m| *m <= 0o777).ok_or_else(
                        || {
                            format!(
                                "{n} is out of range (integers are decimal); write the mode as an \
                             octal string like \"0{n}\" or as 0o{n}"
                            )
                        },
                    ),
                };
            match mode {
                Ok(m) => spec.socket_mode = m,
                Err(m) => self.err(span(v), &field, m),
            }
        }
        if let Some(v) = &s.socket_group {
            spec.socket_group = self.id_or_name(v, &join(p, "socket_group"));
        }
        for (key, list) in [("admin_uids", &s.admin_uids), ("admin_gids", &s.admin_gids)] {
            let Some(list) = list else { continue };
            let mut ids = Vec::new();
            for (i, v) in list.iter().enumerate() {
                let field = format!("{}[{i}]", join(p, key));
                if let Some(id) = self.int(v, &field, 0, MAX_ID) {
                    ids.push(id as u32);
                }
            }
            if key == "admin_uids" {
                spec.admin_uids = ids;
            } else {
                spec.admin_gids = ids;
            }
        }
        if let Some(v) = &s.cgroup_root {
            let field = join(p, "cgroup_root");
            match v.get_ref().as_str() {
                "auto" => spec.cgroup_root = CgroupRoot::Auto,
                "none" => spec.cgroup_root = CgroupRoot::None,
                path if path.starts_with('/') && !has_nul(path) => {
                    spec.cgroup_root = CgroupRoot::Path(PathBuf::from(path));
                }
                other => self.err(
                    span(v),
                    &field,
                    format!("invalid cgroup_root {other:?}; expected \"auto\", \"none\" or an absolute path"),
                ),
            }
        }
        if let Some(v) = &s.cgroup_name {
            match values::check_name(v.get_ref(), "cgroup") {
                Ok(()) => spec.cgroup_name = v.get_ref().clone(),
                Err(m) => self.err(span(v), &join(p, "cgroup_name"), m),
            }
        }
        if let Some(v) = &s.log_dir {
            spec.log_dir = self.abs_path(v, &join(p, "log_dir"));
        }
        if let Some(v) = &s.pod_dir {
            spec.pod_dir = self.abs_path(v, &join(p, "pod_dir"));
        }
        if let Some(v) = &s.log_max_file_bytes {
            let field = join(p, "log_max_file_bytes");
            match self.quantity(v, &field, false) {
                Some(Some(0)) => self.err(span(v), &field, "must be > 0 bytes"),
                Some(Some(n)) => spec.log_max_file_bytes = n,
                _ => {}
            }
        }
        if let Some(v) = &s.log_max_files
            && let Some(n) = self.u32_count(v, &join(p, "log_max_files"), 0)
        {
            spec.log_max_files = n;
        }
        if let Some(v) = &s.log_buffer_bytes {
            let field = join(p, "log_buffer_bytes");
            match self.quantity(v, &field, false) {
                Some(Some(0)) => self.err(span(v), &field, "must be > 0 bytes"),
                Some(Some(n)) => match usize::try_from(n) {
                    Ok(n) => spec.log_buffer_bytes = n,
                    Err(_) => self.err(span(v), &field, "is too large"),
                },
                _ => {}
            }
        }
        if let Some(v) = &s.log_forward {
            spec.log_forward = *v.get_ref();
        }
        if let Some(v) = &s.log_timestamps {
            spec.log_timestamps = *v.get_ref();
        }
        if let Some(v) = &s.allow_missing_controllers {
            spec.allow_missing_controllers = *v.get_ref();
        }
        if let Some(v) = &s.log_forward_to {
            match v.get_ref().as_str() {
                "auto" => spec.log_forward_to = ForwardTo::Auto,
                "stdout" => spec.log_forward_to = ForwardTo::Stdout,
                "journal" => spec.log_forward_to = ForwardTo::Journal,
                other => self.err(
                    span(v),
                    &join(p, "log_forward_to"),
                    format!(
                        "invalid log_forward_to {other:?}; expected \"auto\", \"stdout\" or \"journal\""
                    ),
                ),
            }
        }
        spec.shutdown_timeout = self.opt_seconds(
            &s.shutdown_timeout_seconds,
            &join(p, "shutdown_timeout_seconds"),
            false,
            spec.shutdown_timeout,
        );
        if let Some(v) = &s.max_connections_per_uid
            && let Some(n) = self.int(v, &join(p, "max_connections_per_uid"), 1, 1 << 20)
        {
            spec.max_connections_per_uid = n as usize;
        }
        spec.client_idle_timeout = self.opt_seconds(
            &s.client_idle_timeout_seconds,
            &join(p, "client_idle_timeout_seconds"),
            true,
            spec.client_idle_timeout,
        );
        if let Some(v) = &s.client_fd_percent
            && let Some(n) = self.int(v, &join(p, "client_fd_percent"), 1, 90)
        {
            spec.client_fd_percent = n as u32;
        }
        if let Some(v) = &s.on_restart {
            match v.get_ref().as_str() {
                "adopt" => spec.on_restart = OnRestart::Adopt,
                "replace" => spec.on_restart = OnRestart::Replace,
                other => self.err(
                    span(v),
                    &join(p, "on_restart"),
                    format!("invalid on_restart {other:?}; expected \"adopt\" or \"replace\""),
                ),
            }
        }
        if let Some(v) = &s.on_output_lost {
            match v.get_ref().as_str() {
                "restart" => spec.on_output_lost = OnOutputLost::Restart,
                "keep" => spec.on_output_lost = OnOutputLost::Keep,
                other => self.err(
                    span(v),
                    &join(p, "on_output_lost"),
                    format!("invalid on_output_lost {other:?}; expected \"restart\" or \"keep\""),
                ),
            }
        }
        if let Some(v) = &s.metrics_address {
            match v.get_ref().parse::<std::net::SocketAddr>() {
                Ok(a) => spec.metrics_address = Some(a),
                Err(_) => self.err(
                    span(v),
                    &join(p, "metrics_address"),
                    format!(
                        "invalid address {:?}; expected an IP address and port, like \"127.0.0.1:9469\" or \"[::1]:9469\"",
                        v.get_ref()
                    ),
                ),
            }
        }
        if let Some(v) = &s.oom_score_adj {
            let field = join(p, "oom_score_adj");
            match v.get_ref() {
                StrOrInt::Int(n) if (-1000..=1000).contains(n) => {
                    spec.oom_score_adj = Some(*n as i32);
                }
                StrOrInt::Str(t) if t == "inherit" => spec.oom_score_adj = None,
                StrOrInt::Int(n) => self.err(
                    span(v),
                    &field,
                    format!("must be between -1000 and 1000, got {n}"),
                ),
                StrOrInt::Str(t) => self.err(
                    span(v),
                    &field,
                    format!("invalid value {t:?}; expected -1000..1000 or \"inherit\""),
                ),
            }
        }
        if let Some(v) = &s.sched_slice_microseconds {
            let field = join(p, "sched_slice_microseconds");
            let range = crate::config::spec::SLICE_MICROS;
            match v.get_ref() {
                StrOrInt::Int(n) if u32::try_from(*n).is_ok_and(|n| range.contains(&n)) => {
                    spec.sched_slice_micros = u32::try_from(*n).ok();
                }
                StrOrInt::Str(t) if t == "inherit" => spec.sched_slice_micros = None,
                StrOrInt::Int(n) => self.err(
                    span(v),
                    &field,
                    format!(
                        "must be between {} and {} (the kernel's bounds for a time slice), got {n}",
                        range.start(),
                        range.end()
                    ),
                ),
                StrOrInt::Str(t) => self.err(
                    span(v),
                    &field,
                    format!(
                        "invalid value {t:?}; expected {}..{} (microseconds) or \"inherit\"",
                        range.start(),
                        range.end()
                    ),
                ),
            }
        }
        for (i, hook) in s.on_event.iter().flatten().enumerate() {
            let field = format!("{}[{i}]", join(p, "on_event"));
            let Some(h) = self.on_event(hook, i, &field) else {
                continue;
            };
            if spec.on_event.iter().any(|o| o.name == h.name) {
                let at = hook.get_ref().name.as_ref().map_or(span(hook), span);
                self.err(
                    at,
                    &join(&field, "name"),
                    format!(
                        "another on_event hook is named {:?}; give each its own name",
                        h.name
                    ),
                );
                continue;
            }
            spec.on_event.push(h);
        }
        spec
    }
}
