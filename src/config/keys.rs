//! Every config key, defined once: one [`tables!`] entry per table lists its keys and their
//! kinds, and from it come both the raw serde struct (`RawSupervisor`, …: what `validate`
//! reads, every value spanned) and the key list the schema walk checks the file against
//! (`RawSupervisor::FIELDS`, …). So a key cannot be known to one and not the other, and the
//! order here is the order of "expected one of: …" in messages.
//!
//! Kinds (what the schema walk accepts → the raw field's type):
//! - `Str` → `Option<Spanned<String>>`; `Int` → `Option<Spanned<i64>>`; `Num` (integer or
//!   float: all `*_seconds`) → `Option<Spanned<f64>>`; `Bool` → `Option<Spanned<bool>>`;
//! - `StrOrInt` (a name or a number: users, signals, modes, byte quantities) and `NumOrStr`
//!   (`cpu_max = 1.5` / `"max"`) → `Option<Spanned<…>>` of [`StrOrInt`] / [`NumOrStr`];
//! - `Argv` (an array of strings spanned as a whole: commands) → `Option<Spanned<Vec<…>>>`;
//!   `StrArray` / `IntArray` → `Option<Vec<Spanned<…>>>`;
//! - `StrMap` (free keys, string values: env, headers, depends_on); `Rlimits` (free keys,
//!   [`RawRlimit`] values: a number, a string, or a `RawRlimitPair` table);
//! - `Deps` (free keys, [`RawDependency`] values: a condition or a `RawDependsOn` table);
//! - `BareStrOrInt` → `Option<StrOrInt>`, `BareStr`, `BareBool`, unspanned: only for keys read
//!   inside an untagged value (`RawRlimitPair`, `RawDependsOn`), where serde buffers the value
//!   and a span cannot survive;
//! - `Table(RawX)` → `Option<Spanned<RawX>>`; `Tables(RawX)` (`[[…]]`) →
//!   `Option<Vec<Spanned<RawX>>>`; `NamedTables(RawX)` (`[pods.NAME]`) → a map of `RawX`.
//!
//! Must not judge values (ranges, names, references): that is `validate`, which names the
//! field; raw numbers are kept wide (`i64`, `f64`) so that it can.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::raw::{NumOrStr, RawDependency, RawRlimit, StrMap, StrOrInt};
use super::schema::{Field, Kind};

/// The raw field type of a key kind (see the module docs).
macro_rules! raw_type {
    (Str) => { Option<Spanned<String>> };
    (Int) => { Option<Spanned<i64>> };
    (Num) => { Option<Spanned<f64>> };
    (Bool) => { Option<Spanned<bool>> };
    (StrOrInt) => { Option<Spanned<StrOrInt>> };
    (BareStrOrInt) => { Option<StrOrInt> };
    (BareStr) => { Option<String> };
    (BareBool) => { Option<bool> };
    (NumOrStr) => { Option<Spanned<NumOrStr>> };
    (Argv) => { Option<Spanned<Vec<Spanned<String>>>> };
    (StrArray) => { Option<Vec<Spanned<String>>> };
    (IntArray) => { Option<Vec<Spanned<i64>>> };
    (StrMap) => { Option<StrMap> };
    (Rlimits) => { Option<BTreeMap<Spanned<String>, Spanned<RawRlimit>>> };
    (Deps) => { Option<BTreeMap<Spanned<String>, Spanned<RawDependency>>> };
    (Table($t:ident)) => { Option<Spanned<$t>> };
    (Tables($t:ident)) => { Option<Vec<Spanned<$t>>> };
    (NamedTables($t:ident)) => { BTreeMap<Spanned<String>, Spanned<$t>> };
}

/// The schema walk's [`Kind`] of a key kind.
macro_rules! schema_kind {
    (Str) => {
        Kind::Str
    };
    (Int) => {
        Kind::Int
    };
    (Num) => {
        Kind::Num
    };
    (Bool) => {
        Kind::Bool
    };
    (StrOrInt) => {
        Kind::StrOrInt
    };
    (BareStrOrInt) => {
        Kind::StrOrInt
    };
    (BareStr) => {
        Kind::Str
    };
    (BareBool) => {
        Kind::Bool
    };
    (NumOrStr) => {
        Kind::NumOrStr
    };
    (Argv) => {
        Kind::StrArray
    };
    (StrArray) => {
        Kind::StrArray
    };
    (IntArray) => {
        Kind::IntArray
    };
    (StrMap) => {
        Kind::Map(&Kind::Str)
    };
    (Rlimits) => {
        Kind::Map(&Kind::Rlimit(RawRlimitPair::FIELDS))
    };
    (Deps) => {
        Kind::Map(&Kind::Dependency(RawDependsOn::FIELDS))
    };
    (Table($t:ident)) => {
        Kind::Table($t::FIELDS)
    };
    (Tables($t:ident)) => {
        Kind::TableArray($t::FIELDS)
    };
    (NamedTables($t:ident)) => {
        Kind::Map(&Kind::Table($t::FIELDS))
    };
}

/// A key's name in the file: the field's, or the one written after `as` (for a key that is a
/// Rust keyword: `kind as "type"`).
macro_rules! key_name {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $key:literal) => {
        $key
    };
}

/// Defines config tables: for each, the raw struct (every field defaulted, unknown fields
/// denied) and its key list, `RawX::FIELDS`.
macro_rules! tables {
    ($(
        $(#[$doc:meta])*
        $raw:ident {
            $( $(#[$fdoc:meta])* $field:ident $(as $key:literal)?: $kind:ident $(($inner:ident))? ),* $(,)?
        }
    )*) => {$(
        $(#[$doc])*
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct $raw {
            $(
                $(#[$fdoc])*
                #[serde(default $(, rename = $key)?)]
                pub $field: raw_type!($kind $(($inner))?),
            )*
        }

        impl $raw {
            /// This table's keys, for the schema walk.
            pub(crate) const FIELDS: &'static [Field] = &[
                $( Field { name: key_name!($field $(, $key)?), kind: schema_kind!($kind $(($inner))?) } ),*
            ];
        }
    )*};
}

tables! {
    /// The whole file.
    RawConfig {
        supervisor: Table(RawSupervisor),
        pods: NamedTables(RawPod),
    }

    /// `[supervisor]`.
    RawSupervisor {
        socket: Str,
        socket_mode: StrOrInt,
        socket_group: StrOrInt,
        admin_uids: IntArray,
        admin_gids: IntArray,
        cgroup_root: Str,
        cgroup_name: Str,
        allow_missing_controllers: Bool,
        log_dir: Str,
        log_max_file_bytes: StrOrInt,
        log_max_files: Int,
        log_timestamps: Bool,
        log_buffer_bytes: StrOrInt,
        log_forward: Bool,
        log_forward_to: Str,
        shutdown_timeout_seconds: Num,
        oom_score_adj: StrOrInt,
        sched_slice_microseconds: StrOrInt,
        max_connections_per_uid: Int,
        client_idle_timeout_seconds: Num,
        client_fd_percent: Int,
        on_restart: Str,
        on_output_lost: Str,
        metrics_address: Str,
        env_files: StrArray,
        pod_dir: Str,
        on_event: Tables(RawOnEvent),
    }

    /// `[[supervisor.on_event]]`: a filter and one action.
    RawOnEvent {
        name: Str,
        reasons: StrArray,
        pods: StrArray,
        kind as "type": Str,
        exec: Argv,
        user: StrOrInt,
        group: StrOrInt,
        webhook: Table(RawWebhook),
        timeout_seconds: Num,
        max_concurrent: Int,
        queue_size: Int,
        retries: Int,
    }

    /// `webhook` of an `on_event` hook.
    RawWebhook {
        url: Str,
        headers: StrMap,
        tls: Table(RawTls),
    }

    /// `[pods.NAME]`.
    RawPod {
        restart_policy: Str,
        termination_grace_period_seconds: Num,
        backoff: Table(RawBackoff),
        max_restarts: Int,
        depends_on: Deps,
        shutdown_on: Str,
        active_deadline_seconds: Num,
        schedule: Table(RawSchedule),
        history: Table(RawHistory),
        /// For `vigil convert --to kubernetes` only: the pod is a StatefulSet (stable name
        /// and storage); vigil itself never reads it.
        stable_identity: Bool,
        autostart: Bool,
        profiles: StrArray,
        replicas: Int,
        min_ready: Int,
        /// `"recreate"` | `"rolling"`: how a reload applies a changed definition to the
        /// replicas.
        update: Str,
        max_unavailable: Int,
        progress_deadline_seconds: Num,
        init_containers: Tables(RawContainer),
        containers: Tables(RawContainer),
    }

    /// `schedule`, of a pod.
    RawSchedule {
        cron: Str,
        time_zone: Str,
        concurrency: Str,
        starting_deadline_seconds: Num,
        suspend: Bool,
    }

    /// `history`, of a pod.
    RawHistory {
        successful: Int,
        failed: Int,
    }

    /// `backoff`, of a pod or a container.
    RawBackoff {
        initial_seconds: Num,
        max_seconds: Num,
        reset_after_seconds: Num,
    }

    /// `[[pods.NAME.containers]]` and `[[pods.NAME.init_containers]]`.
    RawContainer {
        name: Str,
        command: Argv,
        /// Container image for `vigil convert --to kubernetes`; vigil itself never reads it.
        image: Str,
        env: StrMap,
        working_dir: Str,
        env_file: Str,
        user: StrOrInt,
        group: StrOrInt,
        stop_signal: StrOrInt,
        restart_policy: Str,
        termination_grace_period_seconds: Num,
        backoff: Table(RawBackoff),
        max_restarts: Int,
        capabilities: StrArray,
        no_new_privs: Bool,
        run_as_non_root: Bool,
        rlimits: Rlimits,
        resources: Table(RawResources),
        startup_probe: Table(RawProbe),
        liveness_probe: Table(RawProbe),
        readiness_probe: Table(RawProbe),
        lifecycle: Table(RawLifecycle),
        termination_message_path: Str,
        termination_message_policy: Str,
        success_exit_codes: IntArray,
        notify: Bool,
        ready_log_line: Str,
        watchdog_seconds: Num,
        start_timeout_seconds: Num,
        /// The ports the program listens on, by name; for `vigil convert --to kubernetes`
        /// (container ports and a Service) only: vigil never binds or checks them.
        ports: Tables(RawPort),
    }

    /// One of a container's `ports = [{ name = "http", port = 8080 }]`.
    RawPort {
        name: Str,
        port: Int,
    }

    /// A container's `resources` (cgroup v2 limits).
    RawResources {
        memory_max: StrOrInt,
        memory_high: StrOrInt,
        swap_max: StrOrInt,
        pids_max: StrOrInt,
        cpu_max: NumOrStr,
        cpu_weight: Int,
        oom_group: Bool,
    }

    /// A startup, liveness or readiness probe: one action and its timing.
    RawProbe {
        exec: Table(RawExec),
        http_get: Table(RawHttpGet),
        tcp_socket: Table(RawTcpSocket),
        grpc: Table(RawGrpc),
        initial_delay_seconds: Num,
        period_seconds: Num,
        timeout_seconds: Num,
        success_threshold: Int,
        failure_threshold: Int,
        termination_grace_period_seconds: Num,
    }

    /// `exec` of a probe or a hook.
    RawExec {
        command: Argv,
    }

    /// `http_get` of a probe or a hook.
    RawHttpGet {
        host: Str,
        port: Int,
        path: Str,
        scheme: Str,
        headers: StrMap,
        tls: Table(RawTls),
    }

    /// `http_get.tls`.
    RawTls {
        ca_file: Str,
        server_name: Str,
    }

    /// `grpc` of a probe.
    RawGrpc {
        host: Str,
        port: Int,
        service: Str,
    }

    /// `tcp_socket` of a probe.
    RawTcpSocket {
        host: Str,
        port: Int,
    }

    /// A container's `lifecycle`.
    RawLifecycle {
        post_start: Table(RawHook),
        pre_stop: Table(RawHook),
    }

    /// A lifecycle hook: exactly one of these (Kubernetes `LifecycleHandler`).
    RawHook {
        exec: Table(RawExec),
        http_get: Table(RawHttpGet),
        sleep: Table(RawSleep),
    }

    /// A hook's `sleep`.
    RawSleep {
        seconds: Num,
    }

    /// An rlimit given as a table, `nofile = { soft = 1024, hard = 4096 }` (one arm of the
    /// untagged [`RawRlimit`], hence unspanned: `validate` points at the whole entry).
    RawRlimitPair {
        soft: BareStrOrInt,
        hard: BareStrOrInt,
    }

    /// A `depends_on` entry given as a table, `db = { condition = "ready", restart = true }`
    /// (one arm of the untagged [`RawDependency`], hence unspanned).
    RawDependsOn {
        condition: BareStr,
        restart: BareBool,
        stop: BareBool,
    }
}
