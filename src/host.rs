//! Where a validated config meets this host: the host checks run before anything starts
//! (`vigil check` and `vigil run` both make them), and the translation of config values into
//! the cgroup layer's own types ([`cgroup::Limits`], [`cgroup::RootSetting`]).
//!
//! Owns `vigil check`. Must not start anything, create a cgroup or keep state: the checks only
//! read the host. It exists so that [`config`](crate::config) reads nothing but its file and
//! [`cgroup`] knows nothing of the config or the core.

use std::path::PathBuf;

use crate::cgroup::{self, CgroupError, Controllers, Manager};
use crate::config::resolve_paths;
use crate::config::spec::{CgroupRoot, Config, Resources};
use crate::convert::load_source;

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

/// One problem `vigil check` found on this host (or a warning), located at `field` of the
/// config file when that key is written there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostProblem {
    /// The dotted key it concerns (`pods.web.containers[0].env_file`), or empty for the file.
    pub field: String,
    pub message: String,
    /// Reported, but `run` would not refuse it.
    pub warning: bool,
    /// Depends on this host (`--no-host` skips it; said as `on this host:`).
    pub host: bool,
}

impl HostProblem {
    fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        HostProblem {
            field: field.into(),
            message: message.into(),
            warning: false,
            host: true,
        }
    }
}

/// `parent.key` as config messages write it (a key that is not bare is quoted).
fn key(parent: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if parent.is_empty() {
        key
    } else {
        format!("{parent}.{key}")
    }
}

/// What `vigil run` would refuse on this host, each problem once, in config order
/// (docs/bad-input.md): as root, a config file (and every ancestor) others could change, a
/// socket directory or `log_dir` others could write (`crate::trust`); a `cgroup_root` not on
/// cgroup2, limits without cgroups, each pod whose limits need a missing controller; an
/// `env_file` that cannot be read or is not trusted; a `tls.ca_file` that is not a readable PEM
/// file of certificates. A probe or hook host that does not resolve is a warning: `run`
/// accepts it (the kubelet too; the name may resolve later) and the probe fails until it does.
pub fn host_problems(source: &crate::config::ConfigSource, config: &Config) -> Vec<HostProblem> {
    let mut out = Vec::new();
    if let Err(e) = crate::runtime::harden::check_config_source(source) {
        out.push(HostProblem::error("", e.to_string()));
    }
    if nix::unistd::Uid::effective().is_root() {
        let socket = config
            .supervisor
            .socket
            .clone()
            .unwrap_or_else(crate::control::default_socket_path);
        if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty())
            && let Err(e) =
                crate::trust::check("socket directory", dir, crate::trust::Target::PrivateDir)
        {
            out.push(HostProblem::error("supervisor.socket", e.to_string()));
        }
        if let Some(dir) = &config.supervisor.log_dir
            && let Err(e) = crate::trust::check("log_dir", dir, crate::trust::Target::SharedDir)
        {
            out.push(HostProblem::error("supervisor.log_dir", e.to_string()));
        }
    }
    cgroup_problems(config, &mut out);
    for pod in &config.pods {
        let p = key("pods", &pod.name);
        let all = [
            ("init_containers", &pod.init_containers),
            ("containers", &pod.containers),
        ];
        for (list, containers) in all {
            for (i, c) in containers.iter().enumerate() {
                let at = format!("{}[{i}]", key(&p, list));
                container_problems(c, &at, &mut out);
            }
        }
    }
    out
}

/// `cgroup_root` and limits: one line for the root or for cgroups as a whole, else one per
/// pod whose limits need a controller this host lacks.
fn cgroup_problems(config: &Config, out: &mut Vec<HostProblem>) {
    let root = &config.supervisor.cgroup_root;
    let Err(e) = preflight(config) else {
        return;
    };
    if matches!(e, CgroupError::LimitsWithoutCgroups(_)) {
        // A problem of the file, not of this host: `check_main` reports it either way.
        return;
    }
    if matches!(e, CgroupError::ControllersMissing { .. }) {
        for pod in &config.pods {
            let needs = pod_controllers(pod);
            if let Err(e) = Manager::preflight(&root.into(), needs) {
                let at = pod
                    .init_containers
                    .iter()
                    .map(|c| ("init_containers", c))
                    .enumerate()
                    .chain(pod.containers.iter().map(|c| ("containers", c)).enumerate())
                    .find(|(_, (_, c))| {
                        !Controllers::from_limits(&(&c.resources).into()).is_empty()
                    })
                    .map(|(i, (list, _))| {
                        format!("{}[{i}].resources", key(&key("pods", &pod.name), list))
                    })
                    .unwrap_or_else(|| key("pods", &pod.name));
                out.push(missing_controllers_problem(config, &pod.name, at, &e));
            }
        }
        return;
    }
    out.push(HostProblem::error("supervisor.cgroup_root", e.to_string()));
}

/// A pod whose limits need a controller this host lacks: what `run` does with it, and the ways
/// out. `run` refuses to start unless `allow_missing_controllers` is set; with it, `run` refuses
/// this pod and starts the others, so `check` warns and passes.
fn missing_controllers_problem(
    config: &Config,
    pod: &str,
    at: String,
    e: &CgroupError,
) -> HostProblem {
    if config.supervisor.allow_missing_controllers {
        return HostProblem {
            field: at,
            message: format!(
                "{e}; pod {pod} will be refused at start and the other pods started \
                 (allow_missing_controllers)"
            ),
            warning: true,
            host: true,
        };
    }
    HostProblem::error(
        at,
        format!(
            "{e}; remove the limits of pod {pod}, or set [supervisor] \
             allow_missing_controllers = true to start the other pods without it"
        ),
    )
}

fn container_problems(
    c: &crate::config::spec::ContainerSpec,
    at: &str,
    out: &mut Vec<HostProblem>,
) {
    use crate::config::spec::{Hook, ProbeAction};
    for e in crate::process::check_start(c) {
        out.push(HostProblem {
            field: key(at, e.key()),
            message: e.to_string(),
            warning: !e.is_certain(),
            host: true,
        });
    }
    let probes = [
        ("startup_probe", c.startup_probe.as_ref().map(|p| &p.action)),
        (
            "liveness_probe",
            c.liveness_probe.as_ref().map(|p| &p.action),
        ),
        (
            "readiness_probe",
            c.readiness_probe.as_ref().map(|p| &p.action),
        ),
    ];
    let hooks = [
        ("lifecycle.post_start", c.lifecycle.post_start.as_ref()),
        ("lifecycle.pre_stop", c.lifecycle.pre_stop.as_ref()),
    ]
    .map(|(name, h)| {
        (
            name,
            match h {
                Some(Hook::Action(a)) => Some(a),
                _ => None,
            },
        )
    });
    for (name, action) in probes.into_iter().chain(hooks) {
        let Some(action) = action else {
            continue;
        };
        let at = format!("{at}.{name}");
        let (kind, host, port) = match action {
            ProbeAction::HttpGet {
                host, port, tls, ..
            } => {
                if let Some(ca) = &tls.ca_file
                    && let Err(why) = crate::probe::check_ca_file(ca)
                {
                    out.push(HostProblem::error(
                        format!("{at}.http_get.tls.ca_file"),
                        why,
                    ));
                }
                ("http_get", host, *port)
            }
            ProbeAction::TcpSocket { host, port } => ("tcp_socket", host, *port),
            ProbeAction::Grpc { host, port, .. } => ("grpc", host, *port),
            ProbeAction::Exec { .. } => continue,
        };
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if literal.parse::<std::net::IpAddr>().is_ok() {
            continue;
        }
        use std::net::ToSocketAddrs as _;
        if let Err(e) = (host.as_str(), port).to_socket_addrs() {
            out.push(HostProblem {
                field: format!("{at}.{kind}.host"),
                message: format!(
                    "host {host:?} does not resolve here ({e}); the probe will fail until it does"
                ),
                warning: true,
                host: true,
            });
        }
    }
}
/// The warning `check` and `run` give for a `metrics_address` others can reach: any address
/// but a loopback one (`0.0.0.0`, `[::]`, a LAN address). The endpoint has no authentication,
/// so whoever reaches the port reads the metrics (pod and container names, restart counts,
/// resource figures). `None` for a loopback address.
pub fn metrics_exposure(addr: std::net::SocketAddr) -> Option<String> {
    if addr.ip().to_canonical().is_loopback() {
        return None;
    }
    Some(format!(
        "{addr} is not a loopback address: anyone who can reach this host on port {} can read \
         the metrics, which have no authentication; use 127.0.0.1 or [::1] unless a firewall \
         or a scraper's network is meant to be the boundary",
        addr.port()
    ))
}

/// `vigil check`: validate and print every problem to stderr (exit 1), or
/// `FILE: ok (N pods, M containers)` to stdout (exit 0). Containers count init containers too.
/// With `host` (the default), also what `run` would refuse on this host ([`host_problems`]),
/// each `FILE:LINE:COL: field: on this host: message` — all of them, not just the first —
/// and warnings (`… warning: …`) that do not change the exit code; `--no-host` checks the
/// file alone, for another machine.
pub fn check_main(
    paths: Vec<PathBuf>,
    host: bool,
    selection: &crate::config::select::Selection,
) -> i32 {
    let source = resolve_paths(paths);
    let shown = source.display_path();
    match load_source(&source) {
        Ok(config) => {
            let decision = match crate::config::select::decide(&config, selection) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("{}: {e}", shown.display());
                    return 1;
                }
            };
            let mut problems = Vec::new();
            for p in &decision.unused_profiles {
                problems.push(HostProblem {
                    field: String::new(),
                    message: format!("profile {p:?} is active but no pod lists it"),
                    warning: true,
                    host: false,
                });
            }
            if config.supervisor.cgroup_root == CgroupRoot::None
                && let Some(conflict) = limits_without_cgroups(&config)
            {
                problems.push(HostProblem {
                    field: "supervisor.cgroup_root".to_string(),
                    message: conflict,
                    warning: false,
                    host: false,
                });
            }
            if let Some(w) = config.supervisor.metrics_address.and_then(metrics_exposure) {
                problems.push(HostProblem {
                    field: "supervisor.metrics_address".to_string(),
                    message: w,
                    warning: true,
                    host: false,
                });
            }
            if host {
                problems.extend(host_problems(&source, &config));
            }
            let mut failed = false;
            for p in &problems {
                let located = Some(&p.field)
                    .filter(|f| !f.is_empty())
                    .and_then(|f| crate::config::locate_in_source(&source, f));
                let line = match located {
                    Some((file, l, c)) => format!("{}:{l}:{c}", file.display()),
                    None => shown.display().to_string(),
                };
                let mut line = line;
                if !p.field.is_empty() {
                    line.push_str(&format!(": {}", p.field));
                }
                let kind = if p.warning { "warning: " } else { "" };
                let here = if p.host { "on this host: " } else { "" };
                eprintln!("{line}: {kind}{here}{}", p.message);
                failed |= !p.warning;
            }
            if failed {
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
            // Which pods `run` would start (with the same POD…, --profile, --no-deps).
            if decision.choices.iter().any(|c| !c.is_default()) {
                println!("starts: {}", decision.list(true));
                let waiting = decision.list(false);
                if !waiting.is_empty() {
                    println!("not started: {waiting}");
                }
            }
            0
        }
        Err(errors) => {
            eprintln!("{errors}");
            1
        }
    }
}
