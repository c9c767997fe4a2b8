//! Configuration: TOML → raw serde mirror → validated [`spec::Config`].
//!
//! Owns parsing, validation with located messages (`FILE:LINE:COL: message`) and defaults,
//! the config-file lookup order and the bundled default.
//! Must not touch the system beyond reading the file: user names are resolved by the process
//! layer at spawn, and cgroup controllers are checked by [`crate::host`] (`vigil check`, and
//! `vigil run` at start). It names no other layer of vigil, only the leaves (`tests/floors.rs`
//! checks it).
//!
//! Pipeline: `toml::de::DeTable::parse` (syntax; one located error) → [`schema`] walk (every
//! unknown key and wrongly typed value, all at once) → serde into the raw tables of [`keys`]
//! (spanned values) → [`validate`] (ranges, names, references; every problem) →
//! [`spec::Config`].
//!
//! # How to add a config key
//!
//! 1. **Declare it once** in its table in `keys.rs` (`name: Kind`, in the place it should have
//!    in "expected one of: …"): that gives the schema walk (unknown keys, wrong types, "did
//!    you mean") and the raw serde field. A new table is a new `RawX { … }` entry there, named
//!    from its parent with `Table(RawX)` / `Tables(RawX)`.
//! 2. **Check it** in `validate/` (the file of its table: `supervisor.rs`, `pod.rs`,
//!    `probe.rs`): read the raw field, report a bad value with `self.err(span, field, message)`
//!    naming the field through `join(path, "key")`, and store the result in its `spec` struct
//!    (`spec.rs`, with the default in that struct's `Default` when the key is optional; a
//!    container key's default also goes into `ContainerSpec::new`, which every test fixture
//!    starts from). The handoff and the state file serialise the spec structs: a new field
//!    needs `#[serde(default)]` (or `default = "…"`) so a handoff or state file written by
//!    the version before still reads (`tests/data/handoff-v*.bin` must keep parsing).
//! 3. **Use it** where it acts. A `[supervisor]` key also goes into
//!    `runtime::supervisor_reload::plan` (applied live on reload, or needs a restart).
//!    Shown to clients: `control::render` / `control::wire` (then regenerate
//!    docs/wire-reference.md); exported to Kubernetes: `convert`.
//! 4. **Document and test it**: a row in docs/interface.md §4 (the test
//!    `every_config_key_is_documented_in_interface_md` fails otherwise), a row in
//!    docs/bad-input.md if a value can be refused, a use in `tests::KITCHEN_SINK` (the test
//!    `every_key_deserializes` fails otherwise), and a test of each refusal's message.

pub mod envfile;
mod error;
pub mod intern;
mod interpolate;
mod keys;
mod layers;
mod locate;
pub mod on_event;
mod raw;
pub mod replicas;
pub mod schedule;
mod schema;
pub mod select;
mod show;
pub mod spec;
mod validate;
pub mod values;

pub use error::{ConfigError, ConfigErrors};
pub use locate::{locate_field, locate_in_source};
/// `parent.key` with TOML quoting, as config paths are written in messages.
pub(crate) use schema::join as schema_join;
pub use show::{Relocate, ShowOptions, show, show_sources};

use std::path::{Path, PathBuf};

use error::Problem;
use layers::SourceMap;
use spec::Config;
use toml::de::DeTable;

/// The default config compiled into the binary, used by `vigil run` when no file is given
/// and `/etc/vigil/vigil.toml` does not exist.
pub const BUNDLED_DEFAULT: &str = include_str!("../../config/default.toml");

/// The system-wide config file looked up after `-c` and `$VIGIL_CONFIG`.
pub const SYSTEM_CONFIG: &str = "/etc/vigil/vigil.toml";

/// The longest duration any `*_seconds` key accepts: 10 years, far beyond any wait vigil
/// makes, and far below what a deadline (`Instant` + duration) can hold.
pub const MAX_SECONDS: u64 = 10 * 365 * 24 * 3600;

/// The name the bundled default goes by in messages and `Config::source`.
pub const BUNDLED_NAME: &str = "<bundled default>";

/// Where a config comes from.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// One config file (`-c FILE`, `$VIGIL_CONFIG` or the system file) and its drop-ins.
    File(PathBuf),
    /// `-c` given more than once: each file and its drop-ins, in that order.
    Layers(Vec<PathBuf>),
    /// [`BUNDLED_DEFAULT`].
    Bundled,
    /// `vigil run -f MANIFEST [-c CONFIG]`: a Kubernetes manifest converted on every (re)load,
    /// with the `[supervisor]` table and pods of `config` when given (see `convert`).
    Manifest {
        manifest: PathBuf,
        config: Option<PathBuf>,
    },
}

impl ConfigSource {
    /// The path shown in messages (`<bundled default>` for the bundled one).
    pub fn display_path(&self) -> PathBuf {
        match self {
            ConfigSource::File(p) => p.clone(),
            ConfigSource::Layers(ps) => ps.first().cloned().unwrap_or_default(),
            ConfigSource::Bundled => PathBuf::from(BUNDLED_NAME),
            ConfigSource::Manifest { manifest, .. } => manifest.clone(),
        }
    }
}

/// docs/interface.md §1.1: an explicit `-c FILE` (clap also fills it from `$VIGIL_CONFIG`), else
/// `/etc/vigil/vigil.toml` if it exists, else the bundled default.
pub fn resolve_path(explicit: Option<PathBuf>) -> ConfigSource {
    resolve_path_in(explicit, Path::new(SYSTEM_CONFIG))
}

/// [`resolve_path`] for `-c` given any number of times: more than once is
/// [`ConfigSource::Layers`].
pub fn resolve_paths(mut explicit: Vec<PathBuf>) -> ConfigSource {
    if explicit.len() > 1 {
        return ConfigSource::Layers(explicit);
    }
    resolve_path(explicit.pop())
}

/// [`resolve_path`] with the system file location as a parameter (for tests).
pub fn resolve_path_in(explicit: Option<PathBuf>, system: &Path) -> ConfigSource {
    match explicit {
        Some(p) => ConfigSource::File(p),
        None if system.exists() => ConfigSource::File(system.to_path_buf()),
        None => ConfigSource::Bundled,
    }
}

/// Load and validate a config from a file or the bundled default. A manifest source is the
/// layer above's (`convert::load_source` reads all three): config must not call `convert`.
pub fn load_source(source: &ConfigSource) -> Result<Config, ConfigErrors> {
    match source {
        ConfigSource::File(p) => load(p),
        ConfigSource::Layers(ps) => load_files(ps),
        ConfigSource::Bundled => {
            let mut map = SourceMap::default();
            map.push_bundled(PathBuf::from(BUNDLED_NAME), BUNDLED_DEFAULT.to_string());
            check(&map)
        }
        ConfigSource::Manifest { manifest, .. } => Err(ConfigErrors::unlocated(
            manifest,
            "a Kubernetes manifest is read by convert::load_source, not config::load_source"
                .to_string(),
        )),
    }
}

/// Read and validate a config file and its drop-ins. An unreadable file is one unlocated
/// error naming the path and the OS error.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    load_files(std::slice::from_ref(&path.to_path_buf()))
}

/// Read and validate the config made of `mains`, each followed by its drop-ins
/// (docs/interface.md §4.0).
pub fn load_files(mains: &[PathBuf]) -> Result<Config, ConfigErrors> {
    check(&read_files(mains)?)
}

/// Read every file of a config: each of `mains` (checked by the caller before it asked, as
/// the config file always was) then its drop-ins (checked here like the config file when
/// vigil runs as root).
fn read_files(mains: &[PathBuf]) -> Result<SourceMap, ConfigErrors> {
    let mut map = SourceMap::default();
    for main in mains {
        for (i, path) in layers::with_drop_ins(main)?.into_iter().enumerate() {
            let text = layers::read_file(&path, "config drop-in", i > 0)?;
            map.push_file(path, text);
        }
    }
    Ok(map)
}

/// The files of one config read into memory, to be checked alone or with more layers merged
/// after them: a converted manifest (`run -f`), a `pod_dir` file (`convert::pod_dir`).
#[derive(Debug, Clone, Default)]
pub struct Sources(SourceMap);

impl Sources {
    /// The files of `source`: each main file and its drop-ins, or the bundled default. A
    /// manifest source is the layer above's (`convert`).
    pub fn read(source: &ConfigSource) -> Result<Sources, ConfigErrors> {
        match source {
            ConfigSource::File(p) => Self::read_files(std::slice::from_ref(p)),
            ConfigSource::Layers(ps) => Self::read_files(ps),
            ConfigSource::Bundled => {
                let mut map = SourceMap::default();
                map.push_bundled(PathBuf::from(BUNDLED_NAME), BUNDLED_DEFAULT.to_string());
                Ok(Sources(map))
            }
            ConfigSource::Manifest { manifest, .. } => Err(ConfigErrors::unlocated(
                manifest,
                "a Kubernetes manifest is read by convert, not config::Sources::read".to_string(),
            )),
        }
    }

    /// Each of `mains` followed by its drop-ins (as [`load_files`] reads them).
    pub fn read_files(mains: &[PathBuf]) -> Result<Sources, ConfigErrors> {
        read_files(mains).map(Sources)
    }

    /// These files, then `text` (shown as `path`) taken literally: no variables, paths as
    /// written (a converted manifest).
    pub fn then_literal(&self, path: &Path, text: String) -> Sources {
        let mut map = self.0.clone();
        map.push_literal(path.to_path_buf(), text);
        Sources(map)
    }

    /// These files, then the file `path` whose contents are `text`, as a drop-in is read:
    /// variables expanded, relative paths against its directory.
    pub fn then_file(&self, path: &Path, text: String) -> Sources {
        let mut map = self.0.clone();
        map.push_file(path.to_path_buf(), text);
        Sources(map)
    }

    /// The whole pipeline on these files, merged in order.
    pub fn check(&self) -> Result<Config, ConfigErrors> {
        check(&self.0)
    }
}

/// Validate config text; `source` is used for messages and `Config::source`. The text is taken
/// literally: no variables, no drop-ins, paths as written (a converted manifest, tests).
pub fn load_str(text: &str, source: &Path) -> Result<Config, ConfigErrors> {
    let mut map = SourceMap::default();
    map.push_literal(source.to_path_buf(), text.to_string());
    check(&map)
}

/// Parse every file of `map` and merge them in order: the tree, and the problems of `override`
/// keys. A syntax error in any file stops here (with the syntax errors of every file).
fn compose(map: &SourceMap) -> Result<(DeTable<'_>, Vec<Problem>), ConfigErrors> {
    let mut syntax = Vec::new();
    let mut problems = Vec::new();
    let mut merged: Option<DeTable<'_>> = None;
    for file in map.files() {
        match layers::parse(&file.text, map.base_of(file)) {
            Err(p) => syntax.push(p),
            Ok(mut doc) => {
                let replace = layers::take_overrides(&mut doc, &mut problems);
                match &mut merged {
                    None => merged = Some(doc),
                    Some(m) => layers::merge(m, doc, &replace),
                }
            }
        }
    }
    if !syntax.is_empty() {
        return Err(map.errors(syntax));
    }
    Ok((merged.unwrap_or_default(), problems))
}

/// The merged tree of `map` with variables expanded and relative paths resolved, and the
/// problems found so far (`override` keys, variables).
fn resolved(map: &SourceMap) -> Result<(DeTable<'_>, Vec<Problem>), ConfigErrors> {
    let (mut doc, mut problems) = compose(map)?;
    let vars = interpolate::vars(&doc, map, &mut problems)?;
    interpolate::resolve_tree(&mut doc, map, &vars, &mut problems);
    Ok((doc, problems))
}

/// The whole pipeline on the files of `map`: compose, variables and paths, schema walk, serde,
/// validate.
fn check(map: &SourceMap) -> Result<Config, ConfigErrors> {
    let source = map
        .files()
        .first()
        .map_or_else(PathBuf::new, |f| f.path.clone());
    let (doc, mut problems) = resolved(map)?;
    // A value whose variables did not resolve is reported once, not again by `validate`.
    let unresolved: Vec<String> = problems.iter().map(|p| p.field.clone()).collect();
    let mut doc = toml::Spanned::new(0..0, doc);
    let walk = schema::check_document(doc.get_mut());
    problems.extend(walk.problems.iter().cloned());
    let raw: keys::RawConfig =
        match serde::Deserialize::deserialize(toml::de::Deserializer::from(doc)) {
            Ok(raw) => raw,
            Err(e) => {
                // The schema walk should have made this impossible; report serde's view too.
                let span = e.span().unwrap_or(0..0);
                let message = e.message().trim_end().to_string();
                problems.push(Problem::new(span, "", message));
                return Err(map.errors(problems));
            }
        };
    let mut checked = Vec::new();
    let config = validate::validate(&raw, &source, &mut checked);
    // A value the walk removed shows up again as "missing"; it has been reported already.
    problems.extend(
        checked
            .into_iter()
            .filter(|p| !walk.explains(&p.field) && !unresolved.contains(&p.field)),
    );
    match config {
        Some(config) if problems.is_empty() => Ok(config),
        _ => Err(map.errors(problems)),
    }
}

#[cfg(test)]
mod tests;
