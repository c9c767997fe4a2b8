//! Integration tests: the real `vigil` binary with real short-lived children, driven through
//! its control socket. One test binary, files by topic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod adopt;
mod common;
mod control;
mod convert;
mod crash;
mod event_hooks;
mod faults;
mod follow;
mod health;
mod host;
mod hostile;
mod journal;
mod journald;
mod lifecycle;
mod logfiles;
mod metrics;
mod nocgroup;
mod notify;
mod outside_input;
mod paths;
mod pid1;
mod pod_dir;
mod probes;
mod profiles;
mod reload;
mod replicas;
mod schedules;
mod sidecars;
mod spawn;
mod stall;
mod supervisor_reload;
mod top;
mod upgrade;
mod wire;
