//! vigil: a Linux process supervisor — pods of processes in cgroup v2 cgroups, startup,
//! liveness and readiness probes, kubelet-style restart back-off, and a local control socket,
//! all driven by one synchronous mio event loop.
//!
//! Layout: [`core`] is pure (no I/O, no clock); [`runtime`] is the thin shell that owns every
//! file descriptor; [`cgroup`], [`process`], [`probe`], [`control`] and [`logs`] are adapters;
//! [`config`] reads only its file, and [`host`] is where a config meets the host (`vigil check`,
//! the start-up checks, config values in the cgroup layer's own types).
//! [`convert`] (feature `kubernetes`) maps configs to and from Kubernetes manifests.
//! [`top`] is `vigil top`, a terminal view on the client side (the only user of ratatui).

#[cfg(target_env = "musl")]
pub mod alloc;
pub mod cgroup;
pub mod cli;
pub mod config;
pub mod control;
pub mod convert;
pub mod core;
pub mod format;
pub mod host;
pub mod instant;
pub mod logs;
pub mod metrics;
pub mod monotime;
pub mod probe;
pub mod process;
pub mod runtime;
#[cfg(test)]
mod testutil;
pub mod top;
pub mod tricks;
pub mod trust;
