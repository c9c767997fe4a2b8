//! Fault injection for the VM tests (cargo feature `fault-injection`, off by default, so a
//! production build has no way to trigger it).
//!
//! Owns reading `VIGIL_FAULT_PANIC_AFTER_SECS` (seconds after start at which a loop turn
//! panics) and `VIGIL_FAULT_PANICS` (how many turns panic, default 1: 2 exercises the
//! "panicked again while shutting down" path), and `VIGIL_FAULT_HANDOFF_REFUSE_FILE` (a path:
//! when that file exists, the new instance of `vigil upgrade` removes it and refuses the
//! state, so the way back to the old binary runs), `VIGIL_FAULT_TAKEOVER_ABORT_FILE` (the
//! same, but the new instance aborts in the middle of its takeover: PID 1's way back),
//! `VIGIL_FAULT_TAKEOVER_HANG_FILE` (the new instance hangs there instead, until the takeover's
//! alarm ends it) and `VIGIL_FAULT_EXEC_FAIL_FILE` (the old instance's `execve(2)` of the new
//! binary is given an argument longer than the kernel takes, so it fails with `E2BIG` and
//! returns), `VIGIL_FAULT_POLL_ERROR_FILE` (while that file exists the loop's `poll` fails with
//! `EINVAL` instead of polling) and `VIGIL_FAULT_SLOW_TURN_FILE` (while that file exists one
//! chore of a turn, the janitor's, sleeps 300 ms, at most once a second). Must not do anything
//! else.

#[cfg(feature = "fault-injection")]
use std::time::{Duration, Instant};

#[cfg(feature = "fault-injection")]
use log::warn;

/// The new instance of an upgrade (not the way back: `returning`) refuses the state when
/// `VIGIL_FAULT_HANDOFF_REFUSE_FILE` names a file that exists (removed first, so only once).
/// Always false without the `fault-injection` feature.
pub fn refuse_handoff(returning: bool) -> bool {
    #[cfg(feature = "fault-injection")]
    {
        !returning
            && std::env::var_os("VIGIL_FAULT_HANDOFF_REFUSE_FILE")
                .is_some_and(|flag| std::fs::remove_file(flag).is_ok())
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = returning;
        false
    }
}

/// The new instance of an upgrade (not the way back: `returning`) aborts in the middle of its
/// takeover — after the components took the descriptors handed over, before the caller is
/// answered — when `VIGIL_FAULT_TAKEOVER_ABORT_FILE` names a file that exists (removed first,
/// so only once). Nothing without the `fault-injection` feature.
pub fn abort_takeover(returning: bool) {
    #[cfg(feature = "fault-injection")]
    if !returning
        && std::env::var_os("VIGIL_FAULT_TAKEOVER_ABORT_FILE")
            .is_some_and(|flag| std::fs::remove_file(flag).is_ok())
    {
        log::error!(
            "fault injection: VIGIL_FAULT_TAKEOVER_ABORT_FILE was there: aborting the takeover"
        );
        super::stderr_log::flush();
        std::process::abort();
    }
    #[cfg(not(feature = "fault-injection"))]
    let _ = returning;
}

/// The new instance of an upgrade (not the way back: `returning`) hangs in the middle of its
/// takeover, where [`abort_takeover`] aborts, when `VIGIL_FAULT_TAKEOVER_HANG_FILE` names a
/// file that exists (removed first, so only once): it sleeps until a signal ends it (as PID 1,
/// the takeover's `alarm(2)`, whose handler goes back to the old binary). Nothing without the
/// `fault-injection` feature.
pub fn hang_takeover(returning: bool) {
    #[cfg(feature = "fault-injection")]
    if !returning
        && std::env::var_os("VIGIL_FAULT_TAKEOVER_HANG_FILE")
            .is_some_and(|flag| std::fs::remove_file(flag).is_ok())
    {
        log::error!(
            "fault injection: VIGIL_FAULT_TAKEOVER_HANG_FILE was there: hanging in the takeover"
        );
        super::stderr_log::flush();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    #[cfg(not(feature = "fault-injection"))]
    let _ = returning;
}

/// An argument that makes the upgrade's `execve(2)` fail with `E2BIG` (one string longer than
/// `MAX_ARG_STRLEN`, 32 pages: execve(2) "Limits on size of arguments and environment"), when
/// `VIGIL_FAULT_EXEC_FAIL_FILE` names a file that exists (removed first, so only once). The
/// kernel refuses it before the point of no return, so `execve` returns as for any exec that
/// fails. Always `None` without the `fault-injection` feature.
pub fn failing_exec_arg() -> Option<std::ffi::CString> {
    #[cfg(feature = "fault-injection")]
    if std::env::var_os("VIGIL_FAULT_EXEC_FAIL_FILE")
        .is_some_and(|flag| std::fs::remove_file(flag).is_ok())
    {
        log::error!(
            "fault injection: VIGIL_FAULT_EXEC_FAIL_FILE was there: the exec gets an argument too long"
        );
        return std::ffi::CString::new(vec![b'x'; 256 * 1024]).ok();
    }
    None
}

#[cfg(feature = "fault-injection")]
pub struct Fault {
    at: Option<Instant>,
    left: u32,
    /// `VIGIL_FAULT_POLL_ERROR_FILE`.
    poll_error_file: Option<std::path::PathBuf>,
    /// `VIGIL_FAULT_SLOW_TURN_FILE`.
    slow_turn_file: Option<std::path::PathBuf>,
    /// When a chore last slept for `slow_turn_file`.
    slowed_at: Option<Instant>,
}

/// How long the chore sleeps while `VIGIL_FAULT_SLOW_TURN_FILE` exists: three times the
/// self-watchdog's threshold (`SLOW_TURN`, 100 ms).
#[cfg(feature = "fault-injection")]
const SLOW_CHORE: Duration = Duration::from_millis(300);

#[cfg(feature = "fault-injection")]
impl Fault {
    pub fn from_env(start: Instant) -> Fault {
        let secs = std::env::var("VIGIL_FAULT_PANIC_AFTER_SECS")
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0);
        let left = std::env::var("VIGIL_FAULT_PANICS")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(1);
        if let Some(s) = secs {
            warn!("fault injection: a loop turn will panic after {s}s ({left} time(s))");
        }
        let file = |name: &str| std::env::var_os(name).map(std::path::PathBuf::from);
        Fault {
            at: secs.map(|s| start + Duration::from_secs_f64(s)),
            left,
            poll_error_file: file("VIGIL_FAULT_POLL_ERROR_FILE"),
            slow_turn_file: file("VIGIL_FAULT_SLOW_TURN_FILE"),
            slowed_at: None,
        }
    }

    /// The error the loop's `poll` gets instead of polling while `VIGIL_FAULT_POLL_ERROR_FILE`
    /// names a file that exists: `EINVAL`, as epoll_wait(2) returns for a broken epoll
    /// descriptor. Not logged here: how vigil logs a run of them is what is under test.
    pub fn poll_error(&self) -> Option<std::io::Error> {
        self.poll_error_file
            .as_deref()
            .filter(|f| f.exists())
            .map(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
    }

    /// While `VIGIL_FAULT_SLOW_TURN_FILE` names a file that exists: sleeps [`SLOW_CHORE`], at
    /// most once a second (a chore that holds the loop, as a slow cgroup removal would).
    pub fn slow_chore(&mut self) {
        let Some(file) = self.slow_turn_file.as_deref() else {
            return;
        };
        let now = Instant::now();
        if self
            .slowed_at
            .is_some_and(|at| now.saturating_duration_since(at) < Duration::from_secs(1))
            || !file.exists()
        {
            return;
        }
        self.slowed_at = Some(now);
        warn!(
            "fault injection: VIGIL_FAULT_SLOW_TURN_FILE is there: this chore sleeps {} ms",
            SLOW_CHORE.as_millis()
        );
        std::thread::sleep(SLOW_CHORE);
    }

    /// When the loop must wake up for the next injected panic.
    pub fn deadline(&self) -> Option<Instant> {
        self.at.filter(|_| self.left > 0)
    }

    /// Panic if one is due.
    pub fn check(&mut self, now: Instant) {
        if let Some(at) = self.deadline()
            && now >= at
        {
            self.left -= 1;
            panic!("fault injection: VIGIL_FAULT_PANIC_AFTER_SECS reached");
        }
    }
}
