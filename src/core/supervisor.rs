//! The supervisor state machine. (Skeleton: the core helper implements it.)

use super::*;
use crate::config::spec::Config;

/// All pods of one `vigil run`, driven by the runtime.
#[derive(Debug)]
pub struct Supervisor {
    _private: (),
}

impl Supervisor {
    /// A supervisor for `config`, starting its pods at `now` (actions queue up).
    pub fn new(config: &Config, now: Time) -> Self {
        let _ = (config, now);
        todo!()
    }

    /// Feed one input.
    pub fn handle(&mut self, now: Time, input: Input) {
        let _ = (now, input);
        todo!()
    }

    /// Apply an operator command; `Ok(message)` is a short human summary.
    pub fn command(&mut self, now: Time, command: Command) -> Result<String, CommandError> {
        let _ = (now, command);
        todo!()
    }

    /// Fire every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        let _ = now;
        todo!()
    }

    /// The earliest pending deadline, if any.
    pub fn poll_timeout(&self) -> Option<Time> {
        todo!()
    }

    /// Next action to execute.
    pub fn poll_action(&mut self) -> Option<Action> {
        todo!()
    }

    /// Snapshot of every pod, in config order.
    pub fn pods(&self, now: Time) -> Vec<PodStatus> {
        let _ = now;
        todo!()
    }

    /// Events with `seq > after`, oldest first.
    pub fn events_since(&self, after: u64) -> Vec<Event> {
        let _ = after;
        todo!()
    }
}
