//! Kubernetes Pod manifests in and out: `vigil convert --to kubernetes`, `vigil convert --from
//! kubernetes` and `vigil run -f pod.yaml` (the kubelet's static-pod use).
//!
//! Owns the mapping between a validated [`crate::config::spec::Config`] and the typed
//! Kubernetes objects of the `k8s-openapi` crate (`v1` Pod, `apps/v1` Deployment): what maps,
//! maps; what one side cannot express is named in a [`Warning`] with its path (a config path
//! such as `pods.web.containers[0].backoff` going out, a manifest path such as
//! `spec.containers[0].volumeMounts` coming in). Settings that only a host supervisor has
//! (back-off, `max_restarts`, rlimits, user names, `depends_on`, …) travel as `vigil/…`
//! annotations, so vigil → Kubernetes → vigil gives the same config.
//!
//! Must not run anything or touch the system beyond reading the files it is given; the
//! output of `--from` is always checked by `config::load_str` before it is printed or run.
//! The mapping is behind the default-on cargo feature `kubernetes` (the Kubernetes types are a
//! large crate); without it the subcommand and `run -f` say so and exit 1.
#![cfg_attr(not(feature = "kubernetes"), allow(dead_code))]

#[cfg(feature = "kubernetes")]
pub mod embed;
#[cfg(feature = "kubernetes")]
pub mod from_kube;
pub mod pod_dir;
#[cfg(feature = "kubernetes")]
pub mod strict;
#[cfg(feature = "kubernetes")]
pub mod to_kube;
#[cfg(feature = "kubernetes")]
pub mod yaml;

#[cfg(test)]
mod tests;

use std::fmt;
#[cfg(feature = "kubernetes")]
use std::io::Read;
#[cfg(feature = "kubernetes")]
use std::path::Path;
use std::path::PathBuf;

use clap::{ArgGroup, Args, ValueEnum};

#[cfg(feature = "kubernetes")]
use crate::config::{ConfigErrors, spec::Config};

/// Load and validate a config from wherever `source` says: a file or the bundled default
/// (`config::load_source`), or a Kubernetes manifest converted on every (re)load; then the
/// pods of its `pod_dir` ([`pod_dir`]). A refused `pod_dir` file is an error here (`vigil
/// check`, `convert --to`); `vigil run` and a reload use [`load`], which runs the rest.
pub fn load_source(
    source: &crate::config::ConfigSource,
) -> Result<crate::config::spec::Config, crate::config::ConfigErrors> {
    let loaded = load(source, None)?;
    if loaded.refused.is_empty() {
        Ok(loaded.config)
    } else {
        Err(loaded.refused)
    }
}

/// A config loaded with its `pod_dir`: the pods of the files that passed, and why the others
/// were refused (each error names its file; their pods as `previous` had them are kept).
#[derive(Debug)]
pub struct Loaded {
    pub config: crate::config::spec::Config,
    pub refused: crate::config::ConfigErrors,
}

/// The config of `source` and the pods of its `pod_dir`. An error of the config itself (not
/// of a `pod_dir` file) refuses the whole load. `previous`: the config running now (a
/// reload), whose `pod_dir` pods a refused file keeps and whose owner of a name keeps it in a
/// clash ([`pod_dir::add`]).
pub fn load(
    source: &crate::config::ConfigSource,
    previous: Option<&crate::config::spec::Config>,
) -> Result<Loaded, crate::config::ConfigErrors> {
    let main = main_sources(source)?;
    let config = main.check()?;
    Ok(pod_dir::add(config, &main, source, previous))
}

/// The files of `source`'s config, before `pod_dir`.
fn main_sources(
    source: &crate::config::ConfigSource,
) -> Result<crate::config::Sources, crate::config::ConfigErrors> {
    match source {
        #[cfg(feature = "kubernetes")]
        crate::config::ConfigSource::Manifest { manifest, config } => {
            manifest_sources(manifest, config.as_deref())
        }
        #[cfg(not(feature = "kubernetes"))]
        crate::config::ConfigSource::Manifest { manifest, .. } => {
            Err(crate::config::ConfigErrors::unlocated(
                manifest,
                "this vigil was built without the `kubernetes` feature: it cannot read manifests"
                    .to_string(),
            ))
        }
        other => crate::config::Sources::read(other),
    }
}

/// `vigil convert`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("direction").required(true).args(["to", "from"])))]
pub struct ConvertArgs {
    /// Print the config's pods as manifests of this kind of system.
    #[arg(long, value_enum)]
    pub to: Option<System>,
    /// Read FILE, a manifest of this kind of system, and print a vigil config.
    #[arg(long, value_enum, requires = "file")]
    pub from: Option<System>,
    /// The config for --to (default: $VIGIL_CONFIG, /etc/vigil/vigil.toml, else the bundled
    /// default).
    #[arg(short, long, env = "VIGIL_CONFIG")]
    pub config: Option<PathBuf>,
    /// The manifest for --from: a Pod, a Deployment, or several YAML documents (`-`: stdin).
    pub file: Option<PathBuf>,
    /// Output format of --to.
    #[arg(short, long, value_enum, default_value_t = ManifestFormat::Yaml)]
    pub output: ManifestFormat,
    /// Image for containers that have no `image` key (--to).
    #[arg(long)]
    pub image: Option<String>,
    /// Kind of object (--to): KIND for every pod, or POD=KIND for one (repeatable); KIND is
    /// Pod, Deployment, StatefulSet, Job or CronJob. Unset, each pod gets the kind that fits
    /// it (docs/kubernetes.md).
    #[arg(long, value_name = "[POD=]KIND", value_parser = parse_kind_arg)]
    pub kind: Vec<KindArg>,
    /// Image of the init containers that wait for a dependency's Service (--to; it needs `sh`
    /// and `nc`).
    #[arg(long, value_name = "IMAGE")]
    pub wait_image: Option<String>,
    /// Write one file per object into DIR, and a `kustomization.yaml` listing them, instead
    /// of printing them (--to; YAML only).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["from", "output"])]
    pub output_dir: Option<PathBuf>,
    /// Make every warning an error: print the warnings, write nothing, exit 1 (--to; for CI).
    #[arg(long, conflicts_with = "from")]
    pub strict: bool,
    /// Run the whole config under vigil inside one Deployment (--to): the config files in a
    /// ConfigMap, vigil as the container's PID 1, `vigil health` as its readiness probe.
    #[arg(long, requires = "vigil_image", conflicts_with_all = ["from", "kind", "wait_image"])]
    pub embed: bool,
    /// The image --embed copies vigil from (it needs `sh`, `cp` and `vigil` on its PATH).
    #[arg(long, value_name = "IMAGE", requires = "embed")]
    pub vigil_image: Option<String>,
}

/// One `--kind`: for every pod, or for the pod named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindArg {
    pub pod: Option<String>,
    #[cfg(feature = "kubernetes")]
    pub kind: to_kube::Kind,
    #[cfg(not(feature = "kubernetes"))]
    pub kind: String,
}

fn parse_kind_arg(text: &str) -> Result<KindArg, String> {
    let (pod, kind) = match text.split_once('=') {
        Some((p, k)) => (Some(p.trim().to_string()), k),
        None => (None, text),
    };
    #[cfg(feature = "kubernetes")]
    let kind = to_kube::Kind::parse(kind).ok_or_else(|| {
        format!("unknown kind {kind:?}: expected Pod, Deployment, StatefulSet, Job or CronJob")
    })?;
    #[cfg(not(feature = "kubernetes"))]
    let kind = kind.to_string();
    Ok(KindArg { pod, kind })
}

/// The systems vigil converts to and from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum System {
    #[value(alias = "k8s")]
    Kubernetes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ManifestFormat {
    #[default]
    Yaml,
    Json,
}

/// `vigil convert`: exit 0, or 1 with every error on stderr.
pub fn main(args: ConvertArgs) -> i32 {
    #[cfg(feature = "kubernetes")]
    {
        if args.from.is_some() {
            let file = args.file.unwrap_or_else(|| PathBuf::from("-"));
            return from_kube_main(&file);
        }
        let mut opts = to_kube::Options {
            image: args.image,
            ..to_kube::Options::default()
        };
        if let Some(w) = args.wait_image {
            opts.wait_image = w;
        }
        for k in args.kind {
            match k.pod {
                Some(pod) => {
                    opts.kinds.insert(pod, k.kind);
                }
                None => opts.kind = Some(k.kind),
            }
        }
        let out = match args.output_dir {
            Some(dir) => Output::Dir(dir),
            None if args.output == ManifestFormat::Json => Output::Json,
            None => Output::Yaml,
        };
        let embed = args.vigil_image.filter(|_| args.embed);
        to_kube_main(args.config, &opts, embed, &out, args.strict)
    }
    #[cfg(not(feature = "kubernetes"))]
    {
        let _ = args;
        eprintln!("error: this vigil was built without the `kubernetes` feature");
        1
    }
}

/// Prefix of the annotations that carry what Kubernetes cannot express.
pub const ANNOTATION_PREFIX: &str = "vigil/";
/// Pod annotation holding `depends_on` as `pod=condition,pod=condition`.
pub const DEPENDS_ON_ANNOTATION: &str = "vigil/depends-on";
/// Label that ties a Deployment's selector to its pod template.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// Something one side cannot express, at `path` (a config path or a manifest path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub path: String,
    pub message: String,
}

impl Warning {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Warning {
        Warning {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "warning: {}: {}", self.path, self.message)
    }
}

/// A problem that stops a conversion: where (document index for multi-document input, path
/// inside it) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertError {
    /// 1-based YAML document number, when the input has documents.
    pub document: Option<usize>,
    /// Manifest path (`spec.containers[0].command`) or config path (`pods.web`); may be empty.
    pub path: String,
    pub message: String,
}

impl ConvertError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> ConvertError {
        ConvertError {
            document: None,
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = self.document {
            write!(f, "document {d}: ")?;
        }
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

// ---- CPU weight ↔ requests.cpu, by the kubelet's own conversion -----------------------------
//
// The kubelet turns `requests.cpu` into cgroup v1 shares with `MilliCPUToShares`
// (pkg/kubelet/cm/helpers_linux.go: `milli * 1024 / 1000`, clamped to 2..=262144) and, on
// cgroup v2, shares into `cpu.weight` with `CpuSharesToCpuWeight`
// (pkg/kubelet/cm/cgroup_manager_linux.go, KEP-2254: `1 + (shares - 2) * 9999 / 262142`),
// integer division throughout.

const MIN_SHARES: u64 = 2;
const MAX_SHARES: u64 = 262_144;

/// The kubelet's `MilliCPUToShares`.
pub fn milli_cpu_to_shares(milli: u64) -> u64 {
    if milli == 0 {
        return MIN_SHARES;
    }
    (milli.saturating_mul(1024) / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// The kubelet's `CpuSharesToCpuWeight`.
pub fn shares_to_cpu_weight(shares: u64) -> u32 {
    let shares = shares.clamp(MIN_SHARES, MAX_SHARES);
    (1 + (shares - 2) * 9999 / 262_142) as u32
}

/// `cpu.weight` the kubelet gives a container that requests `milli` millicores.
pub fn milli_cpu_to_weight(milli: u64) -> u32 {
    shares_to_cpu_weight(milli_cpu_to_shares(milli))
}

/// The smallest `requests.cpu` (millicores) for which the kubelet sets exactly `weight`
/// (1..=10000). Both conversions round down, so the inverse is a search, not a formula; the
/// answer exists for every weight (each weight covers about 26 shares, each share about one
/// millicore).
pub fn cpu_weight_to_milli(weight: u32) -> u64 {
    let weight = weight.clamp(1, 10_000);
    // Start from the kubelet's inverse (`CpuWeightToCpuShares`) and walk to the exact value.
    let shares = ((u64::from(weight) - 1) * 262_142) / 9999 + 2;
    let mut milli = (shares * 1000).div_ceil(1024).saturating_sub(64);
    while milli_cpu_to_weight(milli) < weight && milli < 1_000_000 {
        milli += 1;
    }
    milli.max(1)
}

// ---- quantities ------------------------------------------------------------------------------

/// Bytes as a Kubernetes quantity: the largest binary suffix that divides it exactly.
pub fn bytes_quantity(bytes: u64) -> String {
    for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        let unit = 1u64 << shift;
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// A Kubernetes CPU quantity (`2`, `500m`, `0.5`, `1.25`) in millicores; rounds up below one
/// millicore, as the API server does.
pub fn parse_cpu_milli(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let bad = || {
        format!(
            "invalid CPU quantity {text:?}: expected cores (\"2\", \"0.5\") or millicores (\"500m\")"
        )
    };
    if let Some(m) = s.strip_suffix('m') {
        return m.parse::<u64>().map_err(|_| bad());
    }
    let cores: f64 = s.parse().map_err(|_| bad())?;
    if !(0.0..=1e9).contains(&cores) {
        return Err(bad());
    }
    Ok((cores * 1000.0).ceil() as u64)
}

/// A Kubernetes memory quantity in bytes: vigil's own parser (`Ki Mi Gi … k M G …`), plus the
/// exponent form (`1e9`) Kubernetes also accepts.
pub fn parse_memory_bytes(text: &str) -> Result<u64, String> {
    if let Ok(b) = crate::config::values::parse_quantity(text) {
        return Ok(b);
    }
    let s = text.trim();
    if let Some((m, e)) = s.split_once(['e', 'E'])
        && let (Ok(m), Ok(e)) = (m.parse::<u64>(), e.parse::<u32>())
        && let Some(b) = 10u64.checked_pow(e).and_then(|p| p.checked_mul(m))
    {
        return Ok(b);
    }
    crate::config::values::parse_quantity(text)
}

// ---- entry points ----------------------------------------------------------------------------

#[cfg(feature = "kubernetes")]
/// Read a manifest file, `-` meaning standard input.
fn read_input(path: &Path) -> Result<String, String> {
    if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("<stdin>: cannot read: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))
    }
}

/// Where `vigil convert --to` puts the manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// YAML documents on stdout.
    Yaml,
    /// JSON on stdout.
    Json,
    /// One YAML file per object in this directory, and a `kustomization.yaml` (`--output-dir`).
    Dir(PathBuf),
}

#[cfg(feature = "kubernetes")]
/// `vigil convert --to kubernetes`: print the manifests on stdout (or write them into a
/// directory), warnings on stderr. With `strict`, a warning is an error: nothing is printed or
/// written. Exit 0, or 1 with every error on stderr.
pub fn to_kube_main(
    config: Option<PathBuf>,
    opts: &to_kube::Options,
    embed: Option<String>,
    out: &Output,
    strict: bool,
) -> i32 {
    let source = crate::config::resolve_path(config);
    let shown = source.display_path();
    let config = match load_source(&source) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let mut warnings = Vec::new();
    let converted = match embed {
        None => to_kube::convert(&config, opts, &mut warnings),
        Some(vigil_image) => match embed_files(&source) {
            Ok((name, files)) => {
                let eopts = embed::EmbedOptions {
                    name,
                    vigil_image,
                    image: opts.image.clone(),
                };
                embed::embed(&config, &files, &eopts, &mut warnings)
            }
            Err(e) => Err(vec![ConvertError::new("", e)]),
        },
    };
    let manifests = match converted {
        Ok(m) => m,
        Err(errors) => {
            for e in errors {
                eprintln!("{}: {e}", shown.display());
            }
            return 1;
        }
    };
    for w in &warnings {
        eprintln!("{}: {w}", shown.display());
    }
    if !strict && !warnings.is_empty() {
        eprintln!(
            "{}: {} warning{}: what the manifests do not carry as the config says, each with \
             what to do (--strict makes them errors)",
            shown.display(),
            warnings.len(),
            if warnings.len() == 1 { "" } else { "s" },
        );
    }
    if strict && !warnings.is_empty() {
        eprintln!(
            "{}: error: {} warning{} and --strict: nothing {}",
            shown.display(),
            warnings.len(),
            if warnings.len() == 1 { "" } else { "s" },
            if matches!(out, Output::Dir(_)) {
                "written"
            } else {
                "printed"
            }
        );
        return 1;
    }
    let written = match out {
        Output::Yaml => to_kube::to_yaml(&manifests).map(|t| print!("{t}")),
        Output::Json => to_kube::to_json(&manifests).map(|t| print!("{t}")),
        Output::Dir(dir) => {
            to_kube::kustomize_files(&manifests).and_then(|files| write_files(dir, &files))
        }
    };
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{}: {e}", shown.display());
            1
        }
    }
}

#[cfg(feature = "kubernetes")]
/// `--embed`'s object name (the config file's name without `.toml`, as a DNS label; `vigil`
/// for the bundled default) and the config as one file: `vigil config`'s rendering (drop-ins
/// merged, variables expanded here, relative paths made absolute), with every `$` doubled so
/// that vigil in the pod reads each value as it is here (docs/interface.md §4.1).
fn embed_files(
    source: &crate::config::ConfigSource,
) -> Result<(String, Vec<embed::ConfigFile>), String> {
    use crate::config::ConfigSource;
    let name = match source {
        ConfigSource::File(p) => {
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().to_ascii_lowercase())
                .unwrap_or_default();
            let name: String = stem
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let name: String = name.trim_matches('-').chars().take(50).collect();
            let name = name.trim_end_matches('-').to_string();
            if name.is_empty() {
                "vigil".to_string()
            } else {
                name
            }
        }
        _ => "vigil".to_string(),
    };
    let shown = crate::config::show(
        source,
        crate::config::ShowOptions {
            json: false,
            origin: false,
        },
    )
    .map_err(|e| e.to_string())?;
    let file = embed::ConfigFile {
        path: "vigil.toml".to_string(),
        text: shown.replace('$', "$$"),
    };
    Ok((name, vec![file]))
}

#[cfg(feature = "kubernetes")]
/// Write `files` (name, content) into `dir`, creating it when missing; a file of the same
/// name is replaced, nothing else in `dir` is touched. Each file is written beside its final
/// name and renamed over it, so a reader never sees half a file.
fn write_files(dir: &Path, files: &[(String, String)]) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create the directory: {e}", dir.display()))?;
    for (name, text) in files {
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).map_err(|e| format!("{}: cannot write: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("{}: cannot write: {e}", path.display())
        })?;
    }
    Ok(())
}

#[cfg(feature = "kubernetes")]
/// `vigil convert --from kubernetes FILE`: print a vigil config on stdout, warnings on stderr.
pub fn from_kube_main(file: &Path) -> i32 {
    let text = match read_input(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    match from_kube::convert(&text, file) {
        Ok(out) => {
            for w in &out.warnings {
                eprintln!("{}: {w}", file.display());
            }
            // The printed config is read back from a file, where `${…}` and `$$` in string
            // values are config variables (docs/interface.md §4.1): every `$` is doubled so a
            // manifest's `$$`, `${VAR}` and `$(VAR)` reach the container as written. Only
            // string values hold a `$` here (pod, container and variable names cannot).
            print!("{}", out.toml.replace('$', "$$"));
            0
        }
        Err(errors) => {
            for e in errors {
                eprintln!("{}: {e}", file.display());
            }
            1
        }
    }
}

#[cfg(feature = "kubernetes")]
/// The config `vigil run -f MANIFEST [-c CONFIG]` runs (and re-reads on reload): the
/// manifest's pods, plus the `[supervisor]` table and pods of `config` when given. A pod
/// defined in both is an error. Warnings are logged.
pub fn load_manifest(manifest: &Path, config: Option<&Path>) -> Result<Config, ConfigErrors> {
    manifest_sources(manifest, config)?.check()
}

#[cfg(feature = "kubernetes")]
/// The files of [`load_manifest`]'s config: `config` and its drop-ins, then the manifest
/// converted (taken literally).
fn manifest_sources(
    manifest: &Path,
    config: Option<&Path>,
) -> Result<crate::config::Sources, ConfigErrors> {
    let unlocated = |m: String| ConfigErrors::unlocated(manifest, m);
    let text = read_input(manifest).map_err(unlocated)?;
    let out = from_kube::convert(&text, manifest).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        unlocated(lines.join("\n"))
    })?;
    for w in &out.warnings {
        log::warn!("{}: {w}", manifest.display());
    }
    let Some(config_path) = config else {
        return Ok(crate::config::Sources::default().then_literal(manifest, out.toml));
    };
    let base = crate::config::load(config_path)?;
    for pod in &out.pod_names {
        if base.pods.iter().any(|p| &p.name == pod) {
            return Err(unlocated(format!(
                "pod {pod:?} is defined both here and in {}",
                config_path.display()
            )));
        }
    }
    // The config with its drop-ins and variables, then the manifest's pods taken literally.
    Ok(
        crate::config::Sources::read_files(std::slice::from_ref(&config_path.to_path_buf()))?
            .then_literal(manifest, out.toml),
    )
}
