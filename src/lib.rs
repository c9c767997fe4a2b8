//! vigil: a Linux process supervisor — pods of processes in cgroup v2 cgroups, startup,
//! liveness and readiness probes, kubelet-style restart back-off, and a local control socket,
//! all driven by one synchronous mio event loop.
//!
//! Layout: [`core`] is pure (no I/O, no clock); [`runtime`] is the thin shell that owns every
//! file descriptor; [`cgroup`], [`process`], [`probe`], [`control`] and [`logs`] are adapters.

pub mod cgroup;
pub mod cli;
pub mod config;
pub mod control;
pub mod core;
pub mod logs;
pub mod probe;
pub mod process;
pub mod runtime;
