//! The watch of `[supervisor] pod_dir` (docs/behaviour.md §13): an inotify instance on the
//! directory, whose events for pod files (`convert::pod_dir::is_pod_file`) make a reload due
//! [`DEBOUNCE`] after the last of them, so that an editor's burst (write a temporary file,
//! rename it over, touch its mode) is one reload. The reload itself is the router's
//! (`Shell::reload_from`, origin `pod_dir`): the same path as `vigil reload`, so only the pods
//! of a changed file restart (`convert::pod_dir` composes, the core applies).
//!
//! Owns the inotify descriptor, its registration and the debounce deadline. Must not read or
//! judge the files (the reload does), or block: the descriptor is non-blocking and drained in
//! one go. inotify(7): `IN_CLOSE_WRITE`, `IN_MODIFY`, `IN_CREATE`, `IN_ATTRIB` (a mode change
//! decides the trust check), `IN_MOVED_FROM` / `IN_MOVED_TO` / `IN_DELETE` on entries,
//! `IN_DELETE_SELF` / `IN_MOVE_SELF` on the directory itself, `IN_Q_OVERFLOW` when events were
//! lost (then the reload is due all the same).

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use log::{debug, error, warn};
use mio::event::Event;
use mio::{Interest, Registry};
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use super::component::{Component, Link};
use super::tokens::{POD_DIR_WATCH, Watched};
use crate::config::ConfigErrors;

/// A reload is due this long after the last event (an editor's save is a burst of them).
pub(super) const DEBOUNCE: Duration = Duration::from_millis(500);
/// However long a burst goes on, a reload is due this long after its first event.
const DEBOUNCE_AT_MOST: Duration = Duration::from_secs(5);

/// The directory watched, and when a reload is due.
pub(super) struct PodDirWatch {
    registry: Rc<Registry>,
    /// The directory and its watch (`None` inside when it could not be watched).
    watched: Option<(PathBuf, Option<Watched<Inotify>>)>,
    /// The first event of the burst not reloaded yet, and the reload's deadline.
    due: Option<(Instant, Instant)>,
    /// The watch must be set up afresh (the directory moved, deleted, or events lost).
    stale: bool,
}

impl PodDirWatch {
    /// Watches `dir` (a config's `pod_dir`), if any.
    pub(super) fn new(registry: Rc<Registry>, dir: Option<&Path>) -> PodDirWatch {
        let mut w = PodDirWatch {
            registry,
            watched: None,
            due: None,
            stale: false,
        };
        w.configure(dir);
        w
    }

    /// After a (re)load: watches `dir` from now on, set up afresh when it changed or the old
    /// watch went stale. A directory that cannot be watched is logged; its files are still
    /// read at every reload.
    pub(super) fn configure(&mut self, dir: Option<&Path>) {
        let same = self.watched.as_ref().map(|(d, _)| d.as_path()) == dir;
        if same && !self.stale {
            return;
        }
        self.stale = false;
        self.watched = dir.map(|d| (d.to_path_buf(), self.watch(d)));
    }

    fn watch(&self, dir: &Path) -> Option<Watched<Inotify>> {
        let inotify = match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
            Ok(i) => i,
            Err(e) => {
                warn!(
                    "pod_dir {}: cannot create an inotify instance ({e}): its changes apply at \
                     the next reload only",
                    dir.display()
                );
                return None;
            }
        };
        let flags = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_ONLYDIR;
        if let Err(e) = inotify.add_watch(dir, flags) {
            warn!(
                "pod_dir {}: cannot watch it ({e}): its changes apply at the next reload only",
                dir.display()
            );
            return None;
        }
        match Watched::new(
            &self.registry,
            inotify,
            |i| i.as_fd(),
            POD_DIR_WATCH,
            Interest::READABLE,
        ) {
            Ok(w) => Some(w),
            Err((_, e)) => {
                warn!(
                    "pod_dir {}: cannot poll its watch ({e}): its changes apply at the next \
                     reload only",
                    dir.display()
                );
                None
            }
        }
    }

    /// Whether the debounced reload is due at `now` (then it is no longer pending).
    pub(super) fn take_due(&mut self, now: Instant) -> bool {
        match self.due {
            Some((_, at)) if at <= now => {
                self.due = None;
                true
            }
            _ => false,
        }
    }

    /// Reads every queued event; a relevant one pushes the reload's deadline out.
    fn drain(&mut self, now: Instant) {
        let Some((dir, Some(inotify))) = &self.watched else {
            return;
        };
        let mut relevant = false;
        loop {
            match inotify.read_events() {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    for e in events {
                        let on_self = e.mask.intersects(
                            AddWatchFlags::IN_DELETE_SELF
                                | AddWatchFlags::IN_MOVE_SELF
                                | AddWatchFlags::IN_IGNORED
                                | AddWatchFlags::IN_Q_OVERFLOW,
                        );
                        if on_self {
                            self.stale = true;
                        }
                        let named = e
                            .name
                            .as_deref()
                            .is_some_and(crate::convert::pod_dir::is_pod_file);
                        relevant |= on_self || named;
                    }
                }
                Err(Errno::EINTR) => continue,
                // EAGAIN: drained.
                Err(Errno::EAGAIN) => break,
                Err(e) => {
                    warn!("pod_dir {}: reading its watch: {e}", dir.display());
                    self.stale = true;
                    relevant = true;
                    break;
                }
            }
        }
        if relevant {
            let first = self.due.map_or(now, |(first, _)| first);
            let at = (now + DEBOUNCE).min(first + DEBOUNCE_AT_MOST);
            debug!(
                "pod_dir {}: changed; reload due in {:?}",
                dir.display(),
                at - now
            );
            self.due = Some((first, at));
        }
        if self.stale {
            // Drop the dead watch now (its descriptor would stay readable); a new one is made
            // after the reload.
            if let Some((_, w)) = &mut self.watched {
                *w = None;
            }
        }
    }
}

impl Component for PodDirWatch {
    fn process(&mut self, _: &Event, now: Instant, _: &mut Link<'_>) {
        self.drain(now);
    }

    fn deadline(&self, _: Instant) -> Option<Instant> {
        self.due.map(|(_, at)| at)
    }
}

/// The `pod_dir` files an accepted reload refused: each problem an error line of vigil's log
/// (it names its file), and what the reply adds: nothing, or `; pod_dir: refused:` and the
/// problems, one a line.
pub(super) fn refused_summary(refused: &ConfigErrors) -> String {
    if refused.is_empty() {
        return String::new();
    }
    for e in refused.iter() {
        error!("pod_dir: {e}");
    }
    format!("; pod_dir: refused:\n{refused}")
}
