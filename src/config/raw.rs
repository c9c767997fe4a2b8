//! A serde mirror of the TOML file: every value wrapped in [`Spanned`] so validation can point
//! at it, every struct `deny_unknown_fields`, every field optional so that a missing required
//! key is reported by `validate` with a good message rather than by serde.
//!
//! Numbers are kept wide (`i64`, `f64`) on purpose: ranges are checked in `validate`, which
//! names the field; a serde "invalid value: integer -1, expected u32" would not. Must agree
//! with `schema.rs` (which runs first and reports all unknown keys and types at once).

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

pub(crate) type S<T> = Spanned<T>;
/// A table with free keys (env, depends_on, headers), in key order.
pub(crate) type StrMap = BTreeMap<S<String>, S<String>>;

/// A value that may be a name or a number (`user = "app"` / `user = 1000`; `"256Mi"` / `1024`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum StrOrInt {
    Int(i64),
    Str(String),
}

/// A number or a keyword (`cpu_max = 1.5` / `cpu_max = "max"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum NumOrStr {
    Num(f64),
    Str(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub supervisor: Option<S<RawSupervisor>>,
    #[serde(default)]
    pub pods: BTreeMap<S<String>, S<RawPod>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSupervisor {
    pub socket: Option<S<String>>,
    pub socket_mode: Option<S<StrOrInt>>,
    pub socket_group: Option<S<StrOrInt>>,
    pub admin_uids: Option<Vec<S<i64>>>,
    pub admin_gids: Option<Vec<S<i64>>>,
    pub cgroup_root: Option<S<String>>,
    pub cgroup_name: Option<S<String>>,
    pub log_dir: Option<S<String>>,
    pub log_max_file_bytes: Option<S<StrOrInt>>,
    pub log_max_files: Option<S<i64>>,
    pub log_buffer_bytes: Option<S<StrOrInt>>,
    pub log_forward: Option<S<bool>>,
    pub shutdown_timeout_seconds: Option<S<f64>>,
    pub oom_score_adj: Option<S<StrOrInt>>,
    pub max_connections_per_uid: Option<S<i64>>,
    pub client_idle_timeout_seconds: Option<S<f64>>,
    pub client_fd_percent: Option<S<i64>>,
    pub on_restart: Option<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBackoff {
    pub initial_seconds: Option<S<f64>>,
    pub max_seconds: Option<S<f64>>,
    pub reset_after_seconds: Option<S<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPod {
    pub restart_policy: Option<S<String>>,
    pub termination_grace_period_seconds: Option<S<f64>>,
    pub backoff: Option<S<RawBackoff>>,
    pub max_restarts: Option<S<i64>>,
    pub depends_on: Option<StrMap>,
    pub init_containers: Option<Vec<S<RawContainer>>>,
    pub containers: Option<Vec<S<RawContainer>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawContainer {
    pub name: Option<S<String>>,
    pub command: Option<S<Vec<S<String>>>>,
    /// Container image for `vigil convert --to kubernetes`; vigil itself never reads it.
    pub image: Option<S<String>>,
    pub env: Option<StrMap>,
    pub working_dir: Option<S<String>>,
    pub env_file: Option<S<String>>,
    pub user: Option<S<StrOrInt>>,
    pub group: Option<S<StrOrInt>>,
    pub stop_signal: Option<S<StrOrInt>>,
    pub restart_policy: Option<S<String>>,
    pub termination_grace_period_seconds: Option<S<f64>>,
    pub backoff: Option<S<RawBackoff>>,
    pub max_restarts: Option<S<i64>>,
    pub capabilities: Option<Vec<S<String>>>,
    pub no_new_privs: Option<S<bool>>,
    pub rlimits: Option<BTreeMap<S<String>, S<RawRlimit>>>,
    pub resources: Option<S<RawResources>>,
    pub startup_probe: Option<S<RawProbe>>,
    pub lifecycle: Option<S<RawLifecycle>>,
    pub termination_message_path: Option<S<String>>,
    pub termination_message_policy: Option<S<String>>,
    pub liveness_probe: Option<S<RawProbe>>,
    pub readiness_probe: Option<S<RawProbe>>,
}

/// `nofile = 1024`, `core = "unlimited"` or `nofile = { soft = 1024, hard = 4096 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawRlimit {
    Both(StrOrInt),
    Pair {
        soft: Option<StrOrInt>,
        hard: Option<StrOrInt>,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResources {
    pub memory_max: Option<S<StrOrInt>>,
    pub memory_high: Option<S<StrOrInt>>,
    pub swap_max: Option<S<StrOrInt>>,
    pub pids_max: Option<S<StrOrInt>>,
    pub cpu_max: Option<S<NumOrStr>>,
    pub cpu_weight: Option<S<i64>>,
    pub oom_group: Option<S<bool>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProbe {
    pub exec: Option<S<RawExec>>,
    pub http_get: Option<S<RawHttpGet>>,
    pub tcp_socket: Option<S<RawTcpSocket>>,
    pub grpc: Option<S<RawGrpc>>,
    pub initial_delay_seconds: Option<S<f64>>,
    pub period_seconds: Option<S<f64>>,
    pub timeout_seconds: Option<S<f64>>,
    pub success_threshold: Option<S<i64>>,
    pub failure_threshold: Option<S<i64>>,
    pub termination_grace_period_seconds: Option<S<f64>>,
    /// Hooks only (`sleep = { seconds = N }`); the schema walk rejects it on probes.
    pub sleep: Option<S<RawSleep>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLifecycle {
    /// A hook is read as a probe table (its `exec`/`http_get` are a probe's); the schema walk
    /// has already removed every key a hook does not take.
    pub post_start: Option<S<RawProbe>>,
    pub pre_stop: Option<S<RawProbe>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSleep {
    pub seconds: Option<S<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExec {
    pub command: Option<S<Vec<S<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHttpGet {
    pub host: Option<S<String>>,
    pub port: Option<S<i64>>,
    pub path: Option<S<String>>,
    pub scheme: Option<S<String>>,
    pub headers: Option<StrMap>,
    pub tls: Option<S<RawTls>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub ca_file: Option<S<String>>,
    pub server_name: Option<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGrpc {
    pub host: Option<S<String>>,
    pub port: Option<S<i64>>,
    pub service: Option<S<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTcpSocket {
    pub host: Option<S<String>>,
    pub port: Option<S<i64>>,
}
