//! The watch of `[supervisor] pod_dir` (docs/behaviour.md §13): an inotify instance on the
//! directory, whose events for pod files (`convert::pod_dir::is_pod_file`) make a reload due
//! [`DEBOUNCE`] after the last of them, so that an editor's burst (write a temporary file,
//! rename it over, touch its mode) is one reload. The reload itself is the router's
//! (`Shell::reload_from`, origin `pod_dir`): the same path as `vigil reload`, so only the pods
//! of a changed file restart (`convert::pod_dir` composes, the core applies).
//!
//! The same instance watches the directory's nearest existing parent for the entry on the
//! way to it, so a directory that does not exist yet, or is removed and made again (`rm -r`
//! and `mkdir`, another directory renamed onto its path), is picked up without a reload: the
//! watches are set again ([`Armed::arm`], at most a few `inotify_add_watch` calls per path
//! component) and a reload is due.
//!
//! Owns the inotify descriptor, its watches and the debounce deadline. Must not read or
//! judge the files (the reload does), or block: the descriptor is non-blocking and drained in
//! one go. inotify(7): `IN_CLOSE_WRITE`, `IN_MODIFY`, `IN_CREATE`, `IN_ATTRIB` (a mode change
//! decides the trust check), `IN_MOVED_FROM` / `IN_MOVED_TO` / `IN_DELETE` on entries,
//! `IN_DELETE_SELF` / `IN_MOVE_SELF` on a watched directory itself, `IN_IGNORED` when a watch
//! ended, `IN_Q_OVERFLOW` when events were lost (then the reload is due all the same).

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use log::{debug, error, warn};
use mio::event::Event;
use mio::{Interest, Registry};
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::component::{Component, Link};
use super::tokens::{POD_DIR_WATCH, Watched};
use crate::config::ConfigErrors;

/// A reload is due this long after the last event (an editor's save is a burst of them).
pub(super) const DEBOUNCE: Duration = Duration::from_millis(500);
/// However long a burst goes on, a reload is due this long after its first event.
const DEBOUNCE_AT_MOST: Duration = Duration::from_secs(5);

/// What the directory itself is watched for: its entries, and its own end.
const DIR_EVENTS: AddWatchFlags = AddWatchFlags::IN_CLOSE_WRITE
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR);

/// What the nearest existing parent is watched for: the entry on the way to the directory
/// made, renamed in or out, removed (and the parent's own end).
const PARENT_EVENTS: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR);

/// The directory watched, and when a reload is due.
pub(super) struct PodDirWatch {
    registry: Rc<Registry>,
    /// The directory and its watches (`None` inside when it could not be watched).
    watched: Option<(PathBuf, Option<Armed>)>,
    /// The first event of the burst not reloaded yet, and the reload's deadline.
    due: Option<(Instant, Instant)>,
    /// The inotify instance failed: it is made afresh after the reload.
    stale: bool,
}

/// The inotify instance and its watches of the directory and of its nearest existing parent.
struct Armed {
    inotify: Watched<Inotify>,
    /// The directory's own watch, when it exists.
    dir: Option<WatchDescriptor>,
    /// The nearest existing parent's watch, and the name in it on the way to the directory.
    parent: Option<(WatchDescriptor, OsString)>,
}

/// Whether an `inotify_add_watch` error means the path is not (or not yet) a directory.
fn absent(e: Errno) -> bool {
    matches!(e, Errno::ENOENT | Errno::ENOTDIR)
}

impl Armed {
    /// Watches the directory (when it exists) and its nearest existing parent, then drops
    /// the watches that are no longer either. Bounded: a round is one `inotify_add_watch` per
    /// path component at most, and another round is made only when the entry on the way
    /// appeared while the parents were looked at (at most once per component).
    fn arm(&mut self, dir: &Path) {
        let old: Vec<WatchDescriptor> = self
            .dir
            .take()
            .into_iter()
            .chain(self.parent.take().map(|(wd, _)| wd))
            .collect();
        let mut added: Vec<WatchDescriptor> = Vec::new();
        let rounds = dir.components().count() + 1;
        for _ in 0..rounds {
            let mut child = dir;
            let mut parent = None;
            let mut up = dir.parent();
            while let Some(p) = up {
                match self.inotify.add_watch(p, PARENT_EVENTS) {
                    Ok(wd) => {
                        added.push(wd);
                        parent = child.file_name().map(|n| (wd, n.to_os_string()));
                        break;
                    }
                    Err(e) if absent(e) => {
                        child = p;
                        up = p.parent();
                    }
                    Err(e) => {
                        warn!(
                            "pod_dir {}: cannot watch {} ({e}): a directory made there is \
                             seen at the next reload only",
                            dir.display(),
                            p.display()
                        );
                        break;
                    }
                }
            }
            self.parent = parent;
            if child == dir {
                // The parent is watched first: a directory made after this is an event.
                match self.inotify.add_watch(dir, DIR_EVENTS) {
                    Ok(wd) => {
                        added.push(wd);
                        self.dir = Some(wd);
                    }
                    Err(e) if absent(e) => {}
                    Err(e) => warn!(
                        "pod_dir {}: cannot watch it ({e}): its changes apply at the next \
                         reload only",
                        dir.display()
                    ),
                }
                break;
            }
            // A parent further up: the entry on the way may have been made meanwhile.
            if !child.exists() {
                break;
            }
        }
        let kept: Vec<WatchDescriptor> = self
            .dir
            .into_iter()
            .chain(self.parent.as_ref().map(|(wd, _)| *wd))
            .collect();
        for wd in old.into_iter().chain(added) {
            if !kept.contains(&wd) {
                // EINVAL: the kernel ended it already (the directory is gone).
                let _ = self.inotify.rm_watch(wd);
            }
        }
    }
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
    /// instance failed. A directory that cannot be watched is logged; its files are still
    /// read at every reload.
    pub(super) fn configure(&mut self, dir: Option<&Path>) {
        let same = self.watched.as_ref().map(|(d, _)| d.as_path()) == dir;
        if same && !self.stale {
            return;
        }
        self.stale = false;
        self.watched = dir.map(|d| (d.to_path_buf(), self.watch(d)));
    }

    fn watch(&self, dir: &Path) -> Option<Armed> {
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
        let inotify = match Watched::new(
            &self.registry,
            inotify,
            |i| i.as_fd(),
            POD_DIR_WATCH,
            Interest::READABLE,
        ) {
            Ok(w) => w,
            Err((_, e)) => {
                warn!(
                    "pod_dir {}: cannot poll its watch ({e}): its changes apply at the next \
                     reload only",
                    dir.display()
                );
                return None;
            }
        };
        let mut armed = Armed {
            inotify,
            dir: None,
            parent: None,
        };
        armed.arm(dir);
        Some(armed)
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

    /// Reads every queued event; a relevant one pushes the reload's deadline out. The watches
    /// are set again when the directory or its parent changed.
    fn drain(&mut self, now: Instant) {
        let Some((dir, Some(armed))) = &mut self.watched else {
            return;
        };
        let mut relevant = false;
        let mut rearm = false;
        // A parent made on the way to a directory that is not there yet changes nothing read.
        let had_dir = armed.dir.is_some();
        let ended =
            AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_IGNORED;
        loop {
            match armed.inotify.read_events() {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    for e in events {
                        if e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                            rearm = true;
                            relevant = true;
                        } else if armed.dir == Some(e.wd) {
                            if e.mask.intersects(ended) {
                                rearm = true;
                                relevant = true;
                            } else {
                                relevant |= e
                                    .name
                                    .as_deref()
                                    .is_some_and(crate::convert::pod_dir::is_pod_file);
                            }
                        } else if let Some((wd, on_the_way)) = &armed.parent
                            && *wd == e.wd
                            && (e.mask.intersects(ended)
                                || e.name.as_deref() == Some(on_the_way.as_os_str()))
                        {
                            rearm = true;
                        }
                        // Else a watch dropped by the last arm, or another entry of the parent.
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
        if rearm && !self.stale {
            armed.arm(dir);
            relevant |= had_dir || armed.dir.is_some();
            debug!(
                "pod_dir {}: watched again ({})",
                dir.display(),
                if armed.dir.is_some() {
                    "the directory"
                } else {
                    "its nearest existing parent"
                }
            );
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
            // Drop the failed instance now (its descriptor would stay readable); a new one is
            // made after the reload.
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

impl super::Shell {
    /// The `pod_dir` files refused at start, said as a reload's are once the core exists: each
    /// a Warning `PodFileRefused` on the object `supervisor` (its message the located problem),
    /// so `vigil events`, followers and `on_event` hooks see it, not only the start's log.
    pub fn record_refused_at_start(&mut self, refused: &ConfigErrors) {
        let now = Instant::now();
        for e in refused.iter() {
            self.core.record_pod_file_refused(now, e.to_string());
        }
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
