//! Where a validated config meets this host: the host checks run before anything starts
//! (`vigil check` and `vigil run` both make them), and the translation of config values into
//! the cgroup layer's own types ([`cgroup::Limits`], [`cgroup::RootSetting`]).
//!
//! Owns `vigil check`. Must not start anything, create a cgroup or keep state: the checks only
//! read the host. It exists so that [`config`](crate::config) reads nothing but its file and
//! [`cgroup`] knows nothing of the config or the core.

use std::path::PathBuf;

use crate::cgroup::{self, CgroupError, Controllers, Manager};
use crate::config::spec::{CgroupRoot, Config, Resources};
use crate::config::{load_source, resolve_path};

impl From<&Resources> for cgroup::Limits {
    fn from(r: &Resources) -> cgroup::Limits {
        cgroup::Limits {
            memory_max: r.memory_max,
            memory_high: r.memory_high,
            swap_max: r.swap_max,
            pids_max: r.pids_max,
            cpu_max: r.cpu_max,
            cpu_weight: r.cpu_weight,
            oom_group: r.oom_group,
        }
    }
}

impl From<&CgroupRoot> for cgroup::RootSetting {
    fn from(r: &CgroupRoot) -> cgroup::RootSetting {
        match r {
            CgroupRoot::Auto => cgroup::RootSetting::Auto,
            CgroupRoot::None => cgroup::RootSetting::None,
            CgroupRoot::Path(p) => cgroup::RootSetting::Path(p.clone()),
        }
    }
}

/// The controllers every limit in `config` needs (init containers included): what
/// [`Manager::setup`] and [`Manager::check_controllers`] are given.
pub fn needed_controllers(config: &Config) -> Controllers {
    config
        .pods
        .iter()
        .flat_map(|p| p.init_containers.iter().chain(p.containers.iter()))
        .fold(Controllers::NONE, |acc, c| {
            acc | Controllers::from_limits(&(&c.resources).into())
        })
}

/// The controllers the limits of one pod need (init containers included).
pub fn pod_controllers(pod: &crate::config::spec::PodSpec) -> Controllers {
    pod.init_containers
        .iter()
        .chain(pod.containers.iter())
        .fold(Controllers::NONE, |acc, c| {
            acc | Controllers::from_limits(&(&c.resources).into())
        })
}

/// Whether this host can give `config` what its limits need, without changing anything
/// ([`Manager::preflight`]).
pub fn preflight(config: &Config) -> Result<(), CgroupError> {
    if config.supervisor.cgroup_root == CgroupRoot::None
        && let Some(conflict) = limits_without_cgroups(config)
    {
        return Err(CgroupError::LimitsWithoutCgroups(conflict));
    }
    Manager::preflight(
        &(&config.supervisor.cgroup_root).into(),
        needed_controllers(config),
    )
}

/// With `cgroup_root = "none"`, the conflict with the limits the config sets, naming each
/// container and key (issue 14.10): `None` when no container sets one.
fn limits_without_cgroups(config: &Config) -> Option<String> {
    let set = containers_with_limits(config);
    if set.is_empty() {
        return None;
    }
    Some(format!(
        "cgroup_root = \"none\" conflicts with resource limits, which need cgroups: {}; \
         remove those keys or set cgroup_root to \"auto\" or a path",
        set.join("; ")
    ))
}

/// Each container that sets a resource limit, as `pod/container sets resources.KEY, …`.
pub fn containers_with_limits(config: &Config) -> Vec<String> {
    let mut set = Vec::new();
    for pod in &config.pods {
        for c in pod.init_containers.iter().chain(pod.containers.iter()) {
            let r = &c.resources;
            let keys: Vec<String> = [
                ("memory_max", r.memory_max.is_some()),
                ("memory_high", r.memory_high.is_some()),
                ("swap_max", r.swap_max.is_some()),
                ("pids_max", r.pids_max.is_some()),
                ("cpu_max", r.cpu_max.is_some()),
                ("cpu_weight", r.cpu_weight.is_some()),
                ("oom_group", r.oom_group),
            ]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(k, _)| format!("resources.{k}"))
            .collect();
            if !keys.is_empty() {
                set.push(format!("{}/{} sets {}", pod.name, c.name, keys.join(", ")));
            }
        }
    }
    set
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `vigil check`: validate and print every problem to stderr (exit 1), or
/// `FILE: ok (N pods, M containers)` to stdout (exit 0). Containers count init containers too.
/// A valid file whose limits this host cannot give (a missing controller) is an error too,
/// said now rather than at start.
pub fn check_main(path: Option<PathBuf>) -> i32 {
    let source = resolve_path(path);
    let shown = source.display_path();
    match load_source(&source) {
        Ok(config) => {
            if let Err(e) = preflight(&config) {
                eprintln!("{}: {e}", shown.display());
                return 1;
            }
            let containers: usize = config
                .pods
                .iter()
                .map(|p| p.init_containers.len() + p.containers.len())
                .sum();
            println!(
                "{}: ok ({}, {})",
                shown.display(),
                plural(config.pods.len(), "pod"),
                plural(containers, "container")
            );
            0
        }
        Err(errors) => {
            eprintln!("{errors}");
            1
        }
    }
}
