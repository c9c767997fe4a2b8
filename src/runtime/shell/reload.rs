//! A reload of the config (SIGHUP, `vigil reload`, a change in `pod_dir`) and `vigil scale`:
//! what a reload would load, checked as a start checks a config; the config handed to the
//! core; the live `[supervisor]` changes of one the core accepted. It works on the parts of
//! the shell it changes ([`Parts`], borrowed one by one); the router then runs the core's
//! actions.
//!
//! Owns nothing. Must not: change anything before the new config passed every check (a
//! refused reload changes nothing), or decide what the pods do with it (the core's
//! `Command::Reload`).

use std::time::{Instant, SystemTime};

use log::{error, info};

use super::LastReload;
use super::control::{self, Control};
use super::event_hooks::EventHooks;
use super::metrics::{MetricsListener, prune_probe_stats};
use super::notifier::Notifier;
use super::pod_dir::{self, PodDirWatch};
use super::runs::Runs;
use super::startup::{forward_destination, needed_controllers, set_oom_score_adj, set_sched_slice};
use crate::cgroup::{Controllers, Manager};
use crate::config::select::Selection;
use crate::config::spec::Config;
use crate::config::{ConfigErrors, ConfigSource};
use crate::control::wire::ErrorKind;
use crate::core::{Command, ReloadError, Supervisor};
use crate::metrics::probes::ProbeStats;
use crate::runtime::supervisor_reload::{self, Plan};

/// What vigil runs from: the config and what it was made of, which a reload reads again and
/// replaces (and an upgrade hands over, but for the pods refused at start and the last
/// reload's outcome, which the new instance finds again itself).
pub(super) struct Loaded {
    pub config: Config,
    pub source: ConfigSource,
    /// Which pods this run starts (`run POD…`, `--profile`, `--no-deps`): applied to the
    /// config at every reload, carried across an upgrade.
    pub selection: Selection,
    /// Pods refused at start for limits this host cannot give (`allow_missing_controllers`).
    pub refused_at_start: Vec<String>,
    /// The last reload's outcome (metrics).
    pub last_reload: LastReload,
}

/// What a reload or a scale reads and changes of the shell (the fields borrowed one by one).
pub(super) struct Parts<'a> {
    pub core: &'a mut Supervisor,
    pub loaded: &'a mut Loaded,
    /// vigil's argv (`--allow-missing-controllers`, `--exit-with`).
    pub argv: &'a [String],
    pub runs: &'a mut Runs,
    pub control: &'a mut Control,
    pub metrics: &'a mut Option<MetricsListener>,
    pub event_hooks: &'a mut EventHooks,
    pub probe_stats: &'a mut ProbeStats,
    pub notifier: &'a mut Notifier,
    pub pod_dir: &'a mut PodDirWatch,
}

/// Reloads the config: the new one ([`load`]) handed to the core, and once the core took it,
/// its `[supervisor]` changes applied and it made the running config. The `pod_dir` watch is
/// set up again either way (the directory may be another, or its watch went stale). The
/// router then runs the core's actions and [`log`]s the outcome.
pub(super) fn reload(now: Instant, parts: &mut Parts<'_>) -> Result<String, ReloadError> {
    parts.notifier.reloading();
    let loaded = &mut *parts.loaded;
    let current = Current {
        config: &loaded.config,
        source: &loaded.source,
        argv: parts.argv,
        cgroups: parts.runs.cgroups.as_ref(),
        refused_at_start: &loaded.refused_at_start,
        selection: &loaded.selection,
    };
    let result = load(&current).and_then(|(new, plan, refused)| {
        let r = parts
            .core
            .command(now, Command::Reload(Box::new(new.clone())))
            .map_err(ReloadError::Refused);
        if r.is_ok() {
            apply_supervisor(&plan, &new, parts.runs, parts.control, parts.metrics);
            parts.event_hooks.reconfigure(&new.supervisor.on_event);
            loaded.config = new;
            prune_probe_stats(parts.probe_stats, parts.core);
        }
        if r.is_ok() {
            for e in refused.iter() {
                parts.core.record_pod_file_refused(now, e.to_string());
            }
        }
        r.map(|msg| msg + &plan.summary() + &pod_dir::refused_summary(&refused))
    });
    parts.notifier.reloaded();
    parts
        .pod_dir
        .configure(loaded.config.supervisor.pod_dir.as_deref());
    loaded.last_reload.successful = result.is_ok();
    if result.is_ok() {
        loaded.last_reload.success_at = SystemTime::now();
    }
    result
}

/// A reload's outcome in vigil's log: `ORIGIN: reload: …` or `ORIGIN: reload failed, nothing
/// changed:` and the problems.
pub(super) fn log(origin: &str, result: &Result<String, ReloadError>) {
    match result {
        Ok(msg) => info!("{origin}: reload: {msg}"),
        Err(e) => error!("{origin}: reload failed, nothing changed:\n{e}"),
    }
}

/// `vigil scale POD N` (docs/behaviour.md §14): the running config with the set at `N`
/// replicas, applied as a reload applies a config — the replicas kept are unchanged
/// definitions, the new ones are added, the highest-numbered removed. The count it had
/// before; the router then runs the core's actions and answers with [`scaled`].
pub(super) fn scale(
    now: Instant,
    pod: &str,
    replicas: u32,
    parts: &mut Parts<'_>,
) -> Result<u32, (ErrorKind, String)> {
    let config = &mut parts.loaded.config;
    let Some(before) = config.replica_set(pod).map(|s| s.replicas) else {
        let kind = if config.pods.iter().any(|p| p.name == pod) {
            ErrorKind::BadArgument
        } else {
            ErrorKind::NotFound
        };
        return Err((kind, format!("pod {pod:?} has no replicas to scale")));
    };
    let new = config
        .scaled(pod, replicas)
        .map_err(|e| (ErrorKind::BadArgument, e))?;
    parts
        .core
        .command(now, Command::Reload(Box::new(new.clone())))
        .map_err(|e| (e.kind.into(), e.message))?;
    *config = new;
    prune_probe_stats(parts.probe_stats, parts.core);
    Ok(before)
}

/// What `vigil scale` answers, and logs, once the pod went from `before` to `replicas`.
pub(super) fn scaled(pod: &str, before: u32, replicas: u32) -> String {
    let names = |range: std::ops::Range<u32>| {
        range
            .map(|i| crate::config::replicas::replica_name(pod, i))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let message = match replicas.cmp(&before) {
        std::cmp::Ordering::Equal => format!("pod {pod} already has {replicas} replicas"),
        std::cmp::Ordering::Greater => format!(
            "scaled pod {pod} from {before} to {replicas} replicas: starting {}",
            names(before..replicas)
        ),
        std::cmp::Ordering::Less => format!(
            "scaled pod {pod} from {before} to {replicas} replicas: stopping {}",
            names(replicas..before)
        ),
    };
    info!("control socket: scale: {message}");
    message
}

/// What a reload is checked against: what runs now.
pub(super) struct Current<'a> {
    pub config: &'a Config,
    pub source: &'a ConfigSource,
    /// vigil's argv (`--allow-missing-controllers`, `--exit-with`).
    pub argv: &'a [String],
    pub cgroups: Option<&'a Manager>,
    /// Pods refused at start for limits this host cannot give.
    pub refused_at_start: &'a [String],
    /// Which pods this run starts (`run POD…`, `--profile`, `--no-deps`).
    pub selection: &'a crate::config::select::Selection,
}

/// The config a reload reads from the source vigil started with, checked as a start checks
/// it, its `[supervisor]` changes, and the `pod_dir` files refused (their pods as they were:
/// `convert::pod_dir`); or why it is refused (nothing changed).
pub(super) fn load(current: &Current<'_>) -> Result<(Config, Plan, ConfigErrors), ReloadError> {
    let source = current.source;
    let mut refused = ConfigErrors(Vec::new());
    let new = reread_refusal(source)
        .map_or(Ok(()), |e| Err(ReloadError::InvalidConfig(e)))
        .and_then(|()| {
            crate::runtime::harden::check_config_source(source)
                .map_err(|e| ReloadError::InvalidConfig(e.to_string()))
        })
        .map_err(|e| ReloadError::InvalidConfig(e.to_string()))
        .and_then(|()| {
            crate::convert::load(source, Some(current.config))
                .map(|loaded| {
                    refused = loaded.refused;
                    loaded.config
                })
                .map_err(|errors| ReloadError::InvalidConfig(errors.to_string()))
        })
        .map(|mut new| {
            // `run --allow-missing-controllers` turns the key on whatever the file says
            // (interface.md §1): a file without it is not a change of it.
            new.supervisor.allow_missing_controllers |= allow_missing_flag(current.argv);
            new
        })
        .and_then(
            |mut new| match crate::runtime::exit_with_flag(current.argv) {
                Some(pod) => crate::runtime::apply_exit_with(&mut new, pod)
                    .map(|()| new)
                    .map_err(ReloadError::InvalidConfig),
                None => Ok(new),
            },
        )
        .and_then(|mut new| {
            // The selection of this run holds for the pods a reload adds or changes.
            crate::runtime::apply_selection(&mut new, current.selection, false)
                .map(|()| new)
                .map_err(ReloadError::InvalidConfig)
        })
        // A `vigil scale` holds until the file's own count changes (behaviour.md §14).
        .map(|new| new.keeping_scale_of(current.config))
        .and_then(|new| {
            crate::runtime::harden::check_config_paths(&new)
                .map(|()| new)
                .map_err(|e| ReloadError::InvalidConfig(e.to_string()))
        })?;
    let plan = supervisor_reload::plan(&current.config.supervisor, &new.supervisor)
        .map_err(|e| ReloadError::InvalidConfig(e.to_string()))?;
    if let Err(e) = control::access_of(&new) {
        // An unknown socket_group must refuse the reload before anything changed, not fail
        // in apply_supervisor after the pods were reloaded.
        return Err(ReloadError::InvalidConfig(e.to_string()));
    }
    if let Some(m) = current.cgroups
        && let Err(e) = m.check_controllers(reload_needs(current, &new))
    {
        return Err(ReloadError::InvalidConfig(e.to_string()));
    }
    if let Some(e) = limits_without_cgroups(current.cgroups.is_some(), &new) {
        // At start such a config is refused; a reload must not let it in unenforced.
        return Err(ReloadError::InvalidConfig(e));
    }
    Ok((new, plan, refused))
}

/// Applies the live `[supervisor]` changes of an accepted reload (see `supervisor_reload`;
/// the admin lists and the shutdown timeout need nothing here: they are read from the config
/// and the core when used).
pub(super) fn apply_supervisor(
    plan: &Plan,
    new: &Config,
    runs: &mut Runs,
    control: &mut Control,
    metrics: &mut Option<MetricsListener>,
) {
    let sup = &new.supervisor;
    if plan.changes("log_buffer_bytes")
        || plan.changes("log_max_file_bytes")
        || plan.changes("log_max_files")
    {
        for slot in runs.slots.values_mut() {
            slot.log.set_limits(sup);
        }
    }
    if plan.changes("log_forward") || plan.changes("log_forward_to") {
        runs.capture.flush();
        runs.capture.set_forwarding(forward_destination(new));
    }
    if plan.changes("oom_score_adj")
        && let Some(adj) = sup.oom_score_adj
    {
        set_oom_score_adj(adj);
    }
    if plan.changes("sched_slice_microseconds")
        && let Some(micros) = sup.sched_slice_micros
    {
        set_sched_slice(micros);
    }
    // Socket mode/group, admin lists and client limits: to the socket file and the open
    // connections at once.
    if let Err(e) = control.apply_settings(new) {
        error!("reload: control socket settings not applied: {e}");
    }
    // The clients' descriptor shares follow the config's containers and probes.
    if let Some(m) = metrics {
        m.set_share(control.metrics_share());
    }
    if !plan.keys.is_empty() {
        info!("reload: [supervisor] {} applied", plan.keys.join(", "));
    }
}

/// Why a reload cannot read `source` again, if so: `run -f -` read its manifest from
/// standard input, once, at start.
fn reread_refusal(source: &ConfigSource) -> Option<String> {
    match source {
        ConfigSource::Manifest { manifest, .. } if manifest.as_os_str() == "-" => Some(
            "the pods came from standard input (`vigil run -f -`), which cannot be read again: \
             nothing changed; to change them, restart vigil, or run it with -f FILE to reload"
                .to_string(),
        ),
        _ => None,
    }
}

/// Whether vigil was started with `run --allow-missing-controllers` (its argv travels across
/// an upgrade, so this holds after one too).
fn allow_missing_flag(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "--allow-missing-controllers")
}

/// Without cgroups, the limits `new` sets (which could not be enforced), as a refusal.
fn limits_without_cgroups(cgroups: bool, new: &Config) -> Option<String> {
    if cgroups {
        return None;
    }
    let set = crate::host::containers_with_limits(new);
    (!set.is_empty()).then(|| {
        format!(
            "vigil runs without cgroups, so resource limits cannot be enforced: {}; remove \
             those keys, or restart vigil with cgroups (cgroup_root)",
            set.join("; ")
        )
    })
}

/// The controllers a reload to `new` needs: every pod's, except (with
/// `allow_missing_controllers`) those of pods refused at start that the reload leaves
/// unchanged — they stay refused. A new or changed pod whose limits need a missing controller
/// still refuses the reload.
fn reload_needs(current: &Current<'_>, new: &Config) -> Controllers {
    if !current.config.supervisor.allow_missing_controllers {
        return needed_controllers(new);
    }
    new.pods
        .iter()
        .filter(|p| {
            let kept = current.refused_at_start.contains(&p.name)
                && current.config.pods.iter().any(|old| old == *p);
            !kept
        })
        .fold(Controllers::NONE, |acc, p| {
            acc | crate::host::pod_controllers(p)
        })
}
