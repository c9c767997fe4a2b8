//! Virtual-time tests of the core: time is `t0 + offset`, and the harness jumps straight to
//! `poll_timeout()`, so minutes of back-off run in microseconds. Files by topic.

mod adopt;
mod backoff;
mod dependencies;
mod follow;
mod grace;
mod harness;
mod health;
mod history;
mod hooks;
mod jobs;
mod kubelet;
mod lifecycle;
mod notify;
mod operator;
mod pipeline;
mod probes;
mod reasons;
mod recall;
mod reload;
mod replicas;
mod rollouts;
mod schedules;
mod selection;
mod shutdown;
mod sidecars;
mod triggers;
