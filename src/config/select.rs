//! The selection: which pods of a config one `vigil run` starts (docs/interface.md §4.0b,
//! compose's profile rules).
//!
//! Owns the rule and nothing else: [`decide`] reads a validated [`Config`] and a
//! [`Selection`] (`run POD…`, `--profile`, `$VIGIL_PROFILES`, `--no-deps`) and says, per pod,
//! whether it starts and why; [`apply`] writes that into each pod's `autostart`, which the
//! core honours (a pod that does not start shows `Pending`, reason `NotStarted`, until an
//! operator `start`). Pure: no I/O, no environment (the CLI reads `$VIGIL_PROFILES`).
//!
//! The rule, in order:
//! 1. With pods named (`vigil run POD…`), those pods start, whatever their `autostart` and
//!    `profiles` (naming a pod enables it); no other pod is chosen.
//! 2. Otherwise a pod starts when its `autostart` is true and it has no `profiles`, or one of
//!    them is active.
//! 3. Unless `--no-deps`, every pod a chosen pod depends on (`depends_on`, transitively) starts
//!    too. With `--no-deps`, a chosen pod's `depends_on` entries on pods that do not start are
//!    dropped for this run, so it starts at once rather than wait for a pod no one starts.

use std::collections::BTreeSet;

use super::spec::Config;
use super::values;

/// What one `vigil run` asked for. Kept by the runtime for every reload and carried across an
/// upgrade (`#[serde(default)]`: the empty selection is what a vigil without it ran with).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Active profiles (`--profile`, else `$VIGIL_PROFILES`).
    #[serde(default)]
    pub profiles: Vec<String>,
    /// `vigil run POD…`: only these pods (and their dependencies) start.
    #[serde(default)]
    pub pods: Vec<String>,
    /// `--no-deps`: dependencies are not pulled in.
    #[serde(default)]
    pub no_deps: bool,
}

/// Why a pod starts, or does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Named on the command line.
    Named,
    /// No profiles and `autostart` true (the default).
    Default,
    /// One of its profiles is active.
    Profile(String),
    /// A starting pod depends on it.
    NeededBy(String),
    /// `autostart = false`.
    AutostartOff,
    /// It has profiles and none is active.
    ProfilesInactive(Vec<String>),
    /// Pods were named on the command line and it was not one of them (nor needed by one).
    NotNamed,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Named => f.write_str("named on the command line"),
            Reason::Default => f.write_str("autostart"),
            Reason::Profile(p) => write!(f, "profile {p}"),
            Reason::NeededBy(p) => write!(f, "needed by {p}"),
            Reason::AutostartOff => f.write_str("autostart = false"),
            Reason::ProfilesInactive(ps) => write!(f, "profiles {} not active", ps.join(", ")),
            Reason::NotNamed => f.write_str("not named on the command line"),
        }
    }
}

/// One pod's lot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub pod: String,
    pub starts: bool,
    pub reason: Reason,
}

impl Choice {
    /// Starts for the plain reason (no profiles, autostart): nothing to report.
    pub fn is_default(&self) -> bool {
        self.reason == Reason::Default
    }
}

/// [`decide`]'s answer: every pod in config order, and the active profiles no pod lists (a
/// typo, most likely: a warning, not an error, as in compose).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub choices: Vec<Choice>,
    pub unused_profiles: Vec<String>,
}

impl Decision {
    /// Whether `pod` starts.
    pub fn starts(&self, pod: &str) -> bool {
        self.choices.iter().any(|c| c.pod == pod && c.starts)
    }

    /// `web, db (needed by web)`: the pods that start, or that do not, with why where it is
    /// not the default.
    pub fn list(&self, starts: bool) -> String {
        let items: Vec<String> = self
            .choices
            .iter()
            .filter(|c| c.starts == starts)
            .map(|c| match c.reason {
                Reason::Default => c.pod.clone(),
                _ => format!("{} ({})", c.pod, c.reason),
            })
            .collect();
        items.join(", ")
    }
}

/// Decide which pods of `config` start under `selection`. An error names what is wrong with
/// the selection itself: an unknown pod (with the pods there are) or a malformed profile name.
pub fn decide(config: &Config, selection: &Selection) -> Result<Decision, String> {
    for p in &selection.profiles {
        values::check_profile(p).map_err(|m| format!("--profile / $VIGIL_PROFILES: {m}"))?;
    }
    // A pod with replicas is named by its own name (all its replicas) or a replica's.
    let names: Vec<&str> = config
        .pods
        .iter()
        .filter(|p| p.replica.is_none())
        .map(|p| p.name.as_str())
        .chain(config.replica_sets.iter().map(|s| s.name.as_str()))
        .collect();
    for named in &selection.pods {
        if !names.contains(&named.as_str()) && !config.pods.iter().any(|p| p.name == *named) {
            let hint = values::closest_name(named, names.iter().copied())
                .map(|n| format!("did you mean {n:?}? "))
                .unwrap_or_default();
            return Err(format!(
                "no pod {named:?} in the config ({hint}its pods: {})",
                names.join(", ")
            ));
        }
    }
    let active = |p: &String| selection.profiles.contains(p);
    let mut choices: Vec<Choice> = config
        .pods
        .iter()
        .map(|pod| {
            let (starts, reason) = if !selection.pods.is_empty() {
                if selection.pods.iter().any(|n| pod.answers_to(n)) {
                    (true, Reason::Named)
                } else {
                    (false, Reason::NotNamed)
                }
            } else if !pod.autostart {
                (false, Reason::AutostartOff)
            } else if pod.profiles.is_empty() {
                (true, Reason::Default)
            } else if let Some(p) = pod.profiles.iter().find(|p| active(p)) {
                (true, Reason::Profile(p.clone()))
            } else {
                (false, Reason::ProfilesInactive(pod.profiles.clone()))
            };
            Choice {
                pod: pod.name.clone(),
                starts,
                reason,
            }
        })
        .collect();
    if !selection.no_deps {
        // Pull dependencies in until nothing changes (each pass adds at least one pod, or
        // stops: at most one pass per pod).
        for _ in 0..=config.pods.len() {
            let mut added = false;
            for (i, pod) in config.pods.iter().enumerate() {
                if !choices[i].starts {
                    continue;
                }
                for dep in &pod.depends_on {
                    for (c, target) in choices.iter_mut().zip(&config.pods) {
                        if target.answers_to(&dep.pod) && !c.starts {
                            c.starts = true;
                            c.reason = Reason::NeededBy(pod.name.clone());
                            added = true;
                        }
                    }
                }
            }
            if !added {
                break;
            }
        }
    }
    let listed: BTreeSet<&String> = config.pods.iter().flat_map(|p| &p.profiles).collect();
    let unused_profiles = selection
        .profiles
        .iter()
        .filter(|p| !listed.contains(p))
        .cloned()
        .collect();
    Ok(Decision {
        choices,
        unused_profiles,
    })
}

/// [`decide`], then write the answer into `config`: each pod's `autostart` says whether it
/// starts, and under `--no-deps` a starting pod forgets its `depends_on` entries on pods that
/// do not.
pub fn apply(config: &mut Config, selection: &Selection) -> Result<Decision, String> {
    let decision = decide(config, selection)?;
    let starting: BTreeSet<String> = decision
        .choices
        .iter()
        .filter(|c| c.starts)
        .map(|c| c.pod.clone())
        .collect();
    let starts = |dep: &str, pods: &[super::spec::PodSpec]| {
        pods.iter()
            .any(|p| p.answers_to(dep) && starting.contains(&p.name))
    };
    let pods = config.pods.clone();
    for pod in &mut config.pods {
        pod.autostart = starting.contains(&pod.name);
        if selection.no_deps && pod.autostart {
            pod.depends_on.retain(|d| starts(&d.pod, &pods));
        }
    }
    // A replica `vigil scale` adds later starts as the set's first one does.
    for set in &mut config.replica_sets {
        let first = pods
            .iter()
            .find(|p| p.replica.as_ref().is_some_and(|r| r.set == set.name));
        if let Some(first) = first {
            set.template.autostart = starting.contains(&first.name);
            if selection.no_deps && set.template.autostart {
                set.template.depends_on.retain(|d| starts(&d.pod, &pods));
            }
        }
    }
    Ok(decision)
}

/// `$VIGIL_PROFILES`'s form, `a,b`: the profiles, empty entries and spaces around names
/// dropped.
pub fn split_profiles(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        match super::super::load_str(text, std::path::Path::new("t.toml")) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    const STACK: &str = r#"
[pods.web]
depends_on = { db = "started" }
[[pods.web.containers]]
name = "w"
command = ["true"]

[pods.db]
[[pods.db.containers]]
name = "d"
command = ["true"]

[pods.debug]
profiles = ["debug"]
depends_on = { web = "started" }
[[pods.debug.containers]]
name = "x"
command = ["true"]

[pods.migrate]
autostart = false
depends_on = { db = "started" }
[[pods.migrate.containers]]
name = "m"
command = ["true"]

[pods.cache]
profiles = ["perf", "debug"]
[[pods.cache.containers]]
name = "c"
command = ["true"]
"#;

    fn starting(d: &Decision) -> Vec<&str> {
        d.choices
            .iter()
            .filter(|c| c.starts)
            .map(|c| c.pod.as_str())
            .collect()
    }

    #[test]
    fn without_a_selection_pods_without_profiles_start_and_the_rest_wait() {
        let d = decide(&config(STACK), &Selection::default()).unwrap();
        assert_eq!(starting(&d), ["db", "web"]);
        assert_eq!(
            d.list(false),
            "cache (profiles perf, debug not active), debug (profiles debug not active), migrate (autostart = false)"
        );
    }

    #[test]
    fn an_active_profile_starts_every_pod_that_lists_it() {
        let sel = Selection {
            profiles: vec!["debug".into()],
            ..Selection::default()
        };
        let d = decide(&config(STACK), &sel).unwrap();
        assert_eq!(starting(&d), ["cache", "db", "debug", "web"]);
        assert!(d.unused_profiles.is_empty());
    }

    #[test]
    fn a_named_pod_starts_with_its_dependencies_whatever_its_autostart() {
        let sel = Selection {
            pods: vec!["migrate".into()],
            ..Selection::default()
        };
        let d = decide(&config(STACK), &sel).unwrap();
        assert_eq!(starting(&d), ["db", "migrate"]);
        assert_eq!(
            d.list(true),
            "db (needed by migrate), migrate (named on the command line)"
        );
    }

    #[test]
    fn dependencies_are_pulled_in_transitively_even_from_inactive_profiles() {
        let sel = Selection {
            pods: vec!["debug".into()],
            ..Selection::default()
        };
        let d = decide(&config(STACK), &sel).unwrap();
        assert_eq!(starting(&d), ["db", "debug", "web"]);
    }

    #[test]
    fn no_deps_starts_only_the_named_pods_and_drops_their_waits_on_the_others() {
        let mut c = config(STACK);
        let sel = Selection {
            pods: vec!["web".into()],
            no_deps: true,
            ..Selection::default()
        };
        let d = apply(&mut c, &sel).unwrap();
        assert_eq!(starting(&d), ["web"]);
        let web = c.pods.iter().find(|p| p.name == "web").unwrap();
        assert!(web.autostart);
        assert!(web.depends_on.is_empty());
        let db = c.pods.iter().find(|p| p.name == "db").unwrap();
        assert!(!db.autostart);
    }

    #[test]
    fn an_unknown_pod_is_refused_naming_the_pods_there_are() {
        let sel = Selection {
            pods: vec!["webb".into()],
            ..Selection::default()
        };
        let e = decide(&config(STACK), &sel).unwrap_err();
        assert!(e.contains("no pod \"webb\""), "{e}");
        assert!(e.contains("did you mean \"web\""), "{e}");
        assert!(e.contains("cache, db, debug, migrate, web"), "{e}");
    }

    #[test]
    fn a_profile_no_pod_lists_is_reported_and_a_malformed_one_refused() {
        let sel = Selection {
            profiles: vec!["debgu".into()],
            ..Selection::default()
        };
        let d = decide(&config(STACK), &sel).unwrap();
        assert_eq!(d.unused_profiles, ["debgu"]);
        let sel = Selection {
            profiles: vec!["a b".into()],
            ..Selection::default()
        };
        assert!(
            decide(&config(STACK), &sel)
                .unwrap_err()
                .contains("invalid profile name")
        );
    }

    #[test]
    fn the_environment_form_splits_on_commas_and_drops_blanks() {
        assert_eq!(split_profiles(" debug, perf,,"), ["debug", "perf"]);
        assert!(split_profiles("").is_empty());
    }
}
