//! `vigil convert --to kubernetes --embed`: the whole config as one Deployment whose container
//! runs vigil as PID 1, for what Kubernetes cannot express (per-container back-off and restart
//! limits, schedules beside services, ordered start and shutdown, exit codes that count as
//! success, a child's OOM as an event).
//!
//! Owns that mapping: a ConfigMap holding the config files as written (vigil reads them in the
//! pod, so nothing is translated and nothing is lost), an init container that copies the
//! vigil binary out of `--vigil-image` into a shared `emptyDir`, the container that runs it
//! with no arguments (vigil's PID 1 mode: `/etc/vigil/vigil.toml`, README "As PID 1") in the
//! image the config's containers name, `vigil health` as its readiness probe, and one Service
//! for every port the config's pods name or probe. What cannot work inside one container of
//! a cluster (host directories, `env_file`s, cgroup limits without a writable cgroup) is a
//! [`Warning`]. Must not read files or the system: `mod.rs` reads the config files.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, ExecAction,
    KeyToPath, PodSpec as KubePodSpec, PodTemplateSpec, Probe, SecretVolumeSource, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::to_kube::{Manifest, service_ports};
use super::{ConvertError, NAME_LABEL, Warning};
use crate::config::schema_join as join;
use crate::config::spec::Config;

/// Where the ConfigMap is mounted: vigil as PID 1 reads `/etc/vigil/vigil.toml` and its
/// `vigil.toml.d/` drop-ins.
pub const CONFIG_DIR: &str = "/etc/vigil";
/// Where the init container puts the vigil binary (an `emptyDir` shared with the container).
pub const BIN_DIR: &str = "/opt/vigil";

/// One file of the config as written, for the ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// Path under [`CONFIG_DIR`]: `vigil.toml`, `vigil.toml.d/10-web.toml`.
    pub path: String,
    pub text: String,
}

/// Options of `--embed`.
#[derive(Debug, Clone)]
pub struct EmbedOptions {
    /// Name of the Deployment, its ConfigMap (`NAME-config`) and its Service.
    pub name: String,
    /// `--vigil-image`: an image with `sh`, `cp` and `vigil` on its `PATH`.
    pub vigil_image: String,
    /// `--image`: the image the programs run in, over the containers' own.
    pub image: Option<String>,
}

/// A ConfigMap key for a file under [`CONFIG_DIR`]: keys take only letters, digits, `-`, `_`
/// and `.` (the API server's `IsConfigMapKey`), so `/` becomes `_`; `None` when the path has
/// any other character.
fn config_map_key(path: &str) -> Option<String> {
    let ok = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    (ok && !path.is_empty() && path.len() <= 253).then(|| path.replace('/', "_"))
}

/// The whole config as a ConfigMap, a Deployment running vigil as PID 1, and a Service when
/// a pod names or probes a port. Errors (no image for the programs, a file name a ConfigMap
/// cannot hold) are all collected.
pub fn embed(
    config: &Config,
    files: &[ConfigFile],
    opts: &EmbedOptions,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Manifest>, Vec<ConvertError>> {
    let mut errors = Vec::new();
    let name = &opts.name;
    let labels = BTreeMap::from([(NAME_LABEL.to_string(), name.clone())]);
    let config_map_name = format!("{name}-config");

    // The ConfigMap: every file as written.
    let mut data = BTreeMap::new();
    let mut items = Vec::new();
    for f in files {
        match config_map_key(&f.path) {
            Some(key) => {
                data.insert(key.clone(), f.text.clone());
                items.push(KeyToPath {
                    key,
                    path: f.path.clone(),
                    ..KeyToPath::default()
                });
            }
            None => errors.push(ConvertError::new(
                format!("{CONFIG_DIR}/{}", f.path),
                "a ConfigMap key takes only letters, digits, '-', '_' and '.': rename the \
                 drop-in file",
            )),
        }
    }

    // One image for every program: they all run in the one container.
    let all = || {
        config
            .pods
            .iter()
            .flat_map(|p| p.init_containers.iter().chain(p.containers.iter()))
    };
    let mut images: Vec<&str> = all().filter_map(|c| c.image.as_deref()).collect();
    images.sort_unstable();
    images.dedup();
    let image = opts
        .image
        .clone()
        .or_else(|| images.first().map(|s| s.to_string()));
    match (&image, images.len()) {
        (None, _) => errors.push(ConvertError::new(
            "pods",
            "--embed runs every program in one container and no container has an image: pass \
             --image with an image that holds the programs the config runs",
        )),
        (Some(i), n) if n > 1 || (n == 1 && images[0] != i) => warnings.push(Warning::new(
            "pods",
            format!(
                "--embed runs every program in one container, of image {i}; the config names \
                 {}: {i} must hold the programs of all of them",
                images.join(", ")
            ),
        )),
        _ => {}
    }

    let mut volumes = vec![
        Volume {
            name: "vigil-config".to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map_name.clone(),
                items: Some(items),
                default_mode: Some(0o444),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "vigil-bin".to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    ];
    let mut mounts = vec![
        VolumeMount {
            name: "vigil-config".to_string(),
            mount_path: CONFIG_DIR.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: "vigil-bin".to_string(),
            mount_path: BIN_DIR.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    ];

    // What each container needs from the host, and the ports of the Service.
    let mut ports: Vec<(String, u16)> = Vec::new();
    for pod in &config.pods {
        let path = join("pods", &pod.name);
        for (field, list) in [
            ("init_containers", &pod.init_containers),
            ("containers", &pod.containers),
        ] {
            for (i, c) in list.iter().enumerate() {
                let cpath = format!("{}[{i}]", join(&path, field));
                if let Some(file) = &c.env_file {
                    let secret = format!("{}-{}-env", pod.name, c.name);
                    let volume = format!("env-{}-{}", pod.name, c.name);
                    let shown = file.display();
                    warnings.push(Warning::new(
                        join(&cpath, "env_file"),
                        format!(
                            "{shown} is a file of this host: the pod mounts it there from \
                             Secret {secret:?}, whose values are not copied; create it with \
                             `kubectl create secret generic {secret} --from-file=env={shown}`"
                        ),
                    ));
                    volumes.push(Volume {
                        name: volume.clone(),
                        secret: Some(SecretVolumeSource {
                            secret_name: Some(secret),
                            items: Some(vec![KeyToPath {
                                key: "env".to_string(),
                                path: "env".to_string(),
                                ..KeyToPath::default()
                            }]),
                            default_mode: Some(0o400),
                            ..SecretVolumeSource::default()
                        }),
                        ..Volume::default()
                    });
                    mounts.push(VolumeMount {
                        name: volume,
                        mount_path: file.to_string_lossy().into_owned(),
                        sub_path: Some("env".to_string()),
                        read_only: Some(true),
                        ..VolumeMount::default()
                    });
                }
                if let Some(dir) = &c.working_dir {
                    warnings.push(Warning::new(
                        join(&cpath, "working_dir"),
                        format!(
                            "{} is a directory of this host: check that the image has it \
                             (or mount a volume there)",
                            dir.display()
                        ),
                    ));
                }
                if c.resources.any() {
                    warnings.push(Warning::new(
                        join(&cpath, "resources"),
                        "vigil sets cgroup limits only in a cgroup it can write, which a \
                         container gets only when privileged or when the cluster delegates \
                         it; without one vigil refuses to start: drop them (and give the \
                         Deployment's container resources instead), or run privileged",
                    ));
                }
            }
        }
        for (port_name, port) in service_ports(pod) {
            if ports.iter().any(|(_, p)| *p == port) {
                continue;
            }
            // Port names are unique in a container and at most 15 characters.
            let port_name = if ports.iter().any(|(n, _)| *n == port_name) || port_name.len() > 15 {
                format!("port-{port}")
            } else {
                port_name
            };
            ports.push((port_name, port));
        }
    }

    let vigil = format!("{BIN_DIR}/vigil");
    let config_file = format!("{CONFIG_DIR}/vigil.toml");
    let install = Container {
        name: "vigil-install".to_string(),
        image: Some(opts.vigil_image.clone()),
        command: Some(vec![
            "sh".to_string(),
            "-c".to_string(),
            format!("cp \"$(command -v vigil)\" {BIN_DIR}/vigil && chmod 0555 {BIN_DIR}/vigil"),
        ]),
        volume_mounts: Some(vec![VolumeMount {
            name: "vigil-bin".to_string(),
            mount_path: BIN_DIR.to_string(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    let main = Container {
        name: "vigil".to_string(),
        image,
        // No arguments: vigil as PID 1 runs /etc/vigil/vigil.toml.
        command: Some(vec![vigil.clone()]),
        ports: (!ports.is_empty()).then(|| {
            ports
                .iter()
                .map(|(n, p)| ContainerPort {
                    name: Some(n.clone()),
                    container_port: i32::from(*p),
                    protocol: Some("TCP".to_string()),
                    ..ContainerPort::default()
                })
                .collect()
        }),
        readiness_probe: Some(Probe {
            exec: Some(ExecAction {
                command: Some(vec![
                    vigil,
                    "health".to_string(),
                    "-c".to_string(),
                    config_file,
                ]),
            }),
            period_seconds: Some(10),
            timeout_seconds: Some(5),
            ..Probe::default()
        }),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    // vigil's own stop budget: the longest pod grace, and a little for vigil itself.
    let grace = config
        .pods
        .iter()
        .map(|p| p.termination_grace.as_secs() + u64::from(p.termination_grace.subsec_nanos() > 0))
        .max()
        .unwrap_or(30)
        .saturating_add(5);
    let deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                match_expressions: None,
            },
            // One vigil at a time: a rolling update would run every program twice.
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_string()),
                rolling_update: None,
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(KubePodSpec {
                    init_containers: Some(vec![install]),
                    containers: vec![main],
                    volumes: Some(volumes),
                    termination_grace_period_seconds: Some(
                        i64::try_from(grace).unwrap_or(i64::MAX),
                    ),
                    ..KubePodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    };
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    let mut out = vec![
        Manifest::ConfigMap(Box::new(config_map)),
        Manifest::Deployment(Box::new(deployment)),
    ];
    if !ports.is_empty() {
        out.push(Manifest::Service(Box::new(super::to_kube::service(
            name, &ports, &labels,
        ))));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}
