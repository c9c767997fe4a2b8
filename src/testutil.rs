//! Helpers shared by the unit tests (compiled only for `cargo test`).
//!
//! Owns nothing at run time and must not be used by non-test code.

use std::io;
use std::time::Duration;

use mio::{Events, Poll};

/// One `Poll::poll` that is tried again when a signal interrupts it (`EINTR`, epoll_wait(2)):
/// the test binary runs many tests on threads of one process, and a child another test
/// started can end (SIGCHLD) while this thread waits. Any other error fails the test.
pub(crate) fn poll_once(poll: &mut Poll, events: &mut Events, timeout: Duration) {
    loop {
        match poll.poll(events, Some(timeout)) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("poll failed: {e}"),
        }
    }
}
