//! Schedules across the supervisor (`core::schedule` decides per pod): the wall clock the
//! shell hands in, each scheduled pod's look and when to look again, `trigger`, and the
//! schedule in a pod's status.

use super::commands::{invalid, not_found, shutting_down};
use super::*;

/// While a schedule runs, how long the core goes at most without looking at the wall clock
/// (docs/behaviour.md §6.6: a clock set forward is seen within a minute).
const WALL_CHECK: Duration = Duration::from_secs(60);

impl Supervisor {
    /// The wall-clock time at `now`, as the shell reads it once per loop turn (the core reads
    /// no clock). Schedules compute in it; the first reading, and a reading more than a second
    /// from what the monotonic clock predicts (the clock was set), make them look again.
    pub fn set_wall_clock(&mut self, now: Time, wall: jiff::Timestamp) {
        let scheduled = (self.timed.iter()).any(|&p| self.pods[p].spec.schedule.is_some());
        if self.wall.set(now, wall) && scheduled {
            self.refresh(now);
        }
    }

    /// Looks at every schedule (`core::schedule::drive`) and sets when to look again;
    /// returns whether a pod changed.
    pub(super) fn drive_schedules(&mut self, now: Time) -> bool {
        self.schedule_wake = None;
        let Some(wall) = self.wall.at(now) else {
            return false;
        };
        if self.shutdown.is_some() {
            return false;
        }
        let timed = self.timed.clone();
        let clock = self.wall;
        let (pods, mut out) = self.split(now);
        let mut changed = false;
        let mut wake: Option<Time> = None;
        for p in timed {
            let pod = &mut pods[p];
            if pod.spec.schedule.is_none() || pod.next != Next::Keep {
                continue;
            }
            changed |= schedule::drive(pod, wall, &mut out);
            let suspended = pod.schedule.as_ref().is_some_and(|s| s.suspended);
            let next = schedule::wake(pod, &clock, now);
            let check = (!suspended).then(|| crate::instant::saturating_add(now, WALL_CHECK));
            wake = [wake, next, check].into_iter().flatten().min();
        }
        self.schedule_wake = wake;
        changed
    }

    /// `trigger POD`: a new run of a pod at rest, now (docs/behaviour.md §6.6).
    pub(super) fn trigger(&mut self, now: Time, pod_name: &str) -> Result<String, CommandError> {
        if self.shutdown.is_some() {
            return Err(shutting_down());
        }
        let Some(p) = self
            .pods
            .iter()
            .position(|p| p.name() == pod_name && p.next == Next::Keep)
        else {
            return Err(not_found(format!("pod {pod_name:?} not found")));
        };
        if let Some(why) = &self.pods[p].refused {
            return Err(invalid(format!(
                "pod {pod_name} was refused at start and cannot run: {why}"
            )));
        }
        if schedule::run_active(&self.pods[p]) {
            return Err(invalid(format!(
                "pod {pod_name} has a run under way: wait for it to end, or stop it first"
            )));
        }
        let (pods, mut out) = self.split(now);
        schedule::start_run(
            &mut pods[p],
            None,
            "Started a run by request (trigger)",
            &mut out,
        );
        Ok(format!("triggered a run of pod {pod_name}"))
    }

    /// One pod's snapshot, its schedule included (computed at the last wall-clock reading).
    pub(super) fn status_of(&self, pod: &Pod) -> PodStatus {
        let mut status = pod.status();
        status.schedule = schedule::status(pod, &self.wall);
        status.rollout = (pod.spec.replica.as_ref()).and_then(|r| self.rollout(&r.set));
        status
    }
}
