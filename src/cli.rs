//! Command line: argv → subcommand. Owns the clap definition (also used for completions),
//! turning a client subcommand into a [`ClientCommand`] (target parsing, socket lookup), and
//! the mapping to exit codes: 0 success, 1 error or bad usage, 2 supervisor unreachable.
//!
//! The top of the layering: it calls the runtime, `check` and the client; nothing imports it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::control::client::{self, ClientCommand, Several};
use crate::control::protocol::RequestCmd;
use crate::control::wire::commands;

#[derive(Debug, Parser)]
#[command(
    name = "vigil",
    version,
    about = "A process supervisor: pods, probes, restart back-off, cgroup v2"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

/// Output format of client commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Output {
    #[default]
    Table,
    Wide,
    Json,
}

impl From<Output> for client::Output {
    fn from(o: Output) -> client::Output {
        match o {
            Output::Table => client::Output::Table,
            Output::Wide => client::Output::Wide,
            Output::Json => client::Output::Json,
        }
    }
}

/// Output format of `vigil config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfigFormat {
    Toml,
    Json,
}

/// Options every client command shares.
#[derive(Debug, Clone, Default, Args)]
pub struct ClientOpts {
    /// Control socket path (default: the `socket =` of the config given with -c or
    /// $VIGIL_CONFIG, else /run/vigil/vigil.sock for root, $XDG_RUNTIME_DIR/vigil/vigil.sock
    /// otherwise).
    #[arg(long, env = "VIGIL_SOCKET", global = true)]
    pub socket: Option<PathBuf>,
    /// The supervisor's config file: its `socket =` is where to connect.
    #[arg(short, long, env = "VIGIL_CONFIG", global = true)]
    pub config: Option<PathBuf>,
}

/// Which pods start (`run` and `check`): docs/interface.md §4.2.
#[derive(Debug, Clone, Default, Args)]
pub struct SelectOpts {
    /// Start only these pods and the pods they depend on (naming a pod starts it whatever
    /// its autostart and profiles say); the others wait for `vigil start`.
    #[arg(value_name = "POD")]
    pub pods: Vec<String>,
    /// Activate a profile: pods listing it in `profiles` start too. Repeatable; without it,
    /// $VIGIL_PROFILES (comma-separated).
    #[arg(
        long = "profile",
        value_name = "PROFILE",
        env = "VIGIL_PROFILES",
        value_delimiter = ','
    )]
    pub profiles: Vec<String>,
    /// Do not start the pods the chosen ones depend on; the chosen ones start without
    /// waiting for them.
    #[arg(long)]
    pub no_deps: bool,
}

impl SelectOpts {
    /// The selection these options ask for (profiles trimmed, blanks dropped).
    pub fn selection(self) -> crate::config::select::Selection {
        crate::config::select::Selection {
            profiles: self
                .profiles
                .iter()
                .flat_map(|p| crate::config::select::split_profiles(p))
                .collect(),
            pods: self.pods,
            no_deps: self.no_deps,
        }
    }

    /// As PID 1 without a subcommand: `$VIGIL_PROFILES` only.
    fn from_env() -> crate::config::select::Selection {
        let profiles = std::env::var("VIGIL_PROFILES").unwrap_or_default();
        crate::config::select::Selection {
            profiles: crate::config::select::split_profiles(&profiles),
            ..Default::default()
        }
    }
}

/// `--wait [--timeout]` of `start`, `stop` and `restart`.
#[derive(Debug, Clone, Default, Args)]
pub struct WaitOpts {
    /// Return once the state is reached: stopped; running and ready (or completed); for
    /// restart, a new run running and ready. A target that fails meanwhile is an error.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait may take: 30s, 2m, 500ms, or seconds (default 30s). Implies --wait.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
}

impl WaitOpts {
    fn wait(&self) -> Option<Duration> {
        match (self.wait, self.timeout) {
            (_, Some(t)) => Some(t),
            (true, None) => Some(DEFAULT_WAIT),
            (false, None) => None,
        }
    }
}

/// `--timeout` when only `--wait` is given (kubectl wait's default).
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// An RFC 3339 time (`2026-11-23T13:40:47Z`, `…+01:00`, fractions allowed) as Unix
/// nanoseconds.
fn parse_since_time(text: &str) -> Result<i64, String> {
    let t: jiff::Timestamp = text.trim().parse().map_err(|e| {
        format!("{text:?}: expected an RFC 3339 time such as 2026-11-23T13:40:47Z ({e})")
    })?;
    i64::try_from(t.as_nanosecond()).map_err(|_| format!("{text:?}: out of range"))
}

/// `500ms`, `30s`, `2m`, `1h`, or a number of seconds (fractions allowed).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{text:?}: expected e.g. 500ms, 30s, 2m or 1h")),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected e.g. 500ms, 30s, 2m or 1h"))?;
    Duration::try_from_secs_f64(n * scale).map_err(|e| format!("{text:?}: {e}"))
}

/// `ready`, `completed`, `stopped` (any case), or kubectl's `condition=Ready`.
fn parse_wait_for(text: &str) -> Result<crate::control::wire::wait::WaitFor, String> {
    use crate::control::wire::wait::WaitFor;
    let t = text.trim().to_ascii_lowercase();
    match t.strip_prefix("condition=").unwrap_or(&t) {
        "ready" => Ok(WaitFor::Ready),
        "completed" | "complete" => Ok(WaitFor::Completed),
        "stopped" => Ok(WaitFor::Stopped),
        _ => Err(format!("{text:?}: expected ready, completed or stopped")),
    }
}

impl ClientOpts {
    /// `--socket`/`$VIGIL_SOCKET`, else the `socket =` of `-c`/`$VIGIL_CONFIG`, else the
    /// default path. A config named but unreadable or invalid is an error (naming it).
    pub fn socket_path(&self) -> Result<PathBuf, String> {
        if let Some(s) = &self.socket {
            return Ok(s.clone());
        }
        if let Some(path) = &self.config {
            let config = crate::config::load(path).map_err(|e| e.to_string())?;
            if let Some(s) = config.supervisor.socket {
                return Ok(s);
            }
        }
        Ok(crate::control::default_socket_path())
    }
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run the supervisor in the foreground.
    Run {
        /// Config file (default: $VIGIL_CONFIG, /etc/vigil/vigil.toml, else the bundled default),
        /// read with its drop-ins FILE.d/*.toml; given more than once, the files merge in order.
        #[arg(short, long, env = "VIGIL_CONFIG")]
        config: Vec<PathBuf>,
        /// Run the pods of a Kubernetes manifest (Pod, Deployment); with -c, that config's
        /// [supervisor] table and pods too.
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
        /// On a host whose cgroup2 lacks a controller some pod's limits need, refuse only
        /// those pods and start the others (as [supervisor] allow_missing_controllers = true).
        #[arg(long)]
        allow_missing_controllers: bool,
        /// When pod POD ends (Succeeded or Failed), stop everything in the usual order and
        /// exit with its exit code (as the pod key shutdown_on = "ended"; for CI and PID 1).
        #[arg(long, value_name = "POD")]
        exit_with: Option<String>,
        #[command(flatten)]
        select: SelectOpts,
    },
    /// Convert between a vigil config and Kubernetes manifests.
    Convert(crate::convert::ConvertArgs),
    /// Validate a config file; print every problem as FILE:LINE:COL: message.
    Check {
        /// Config file, read with its drop-ins FILE.d/*.toml; more than once: merged in order.
        #[arg(short, long, env = "VIGIL_CONFIG")]
        config: Vec<PathBuf>,
        /// Check the file alone (for another machine): skip what depends on this host —
        /// file trust, cgroups, env_file, tls.ca_file, probe host names.
        #[arg(long)]
        no_host: bool,
        /// The pods `run` with these options would start, and why the others would not.
        #[command(flatten)]
        select: SelectOpts,
    },
    /// Print the merged, resolved config: drop-ins and -c layers merged, variables expanded,
    /// relative paths resolved (as `docker compose config`).
    Config {
        /// Config file, read with its drop-ins FILE.d/*.toml; more than once: merged in order.
        #[arg(short, long, env = "VIGIL_CONFIG")]
        config: Vec<PathBuf>,
        /// One line per key with the file, line and column that set it.
        #[arg(long)]
        origin: bool,
        /// toml (the merged config as a file vigil reads), or json.
        #[arg(short, long, value_enum, default_value_t = ConfigFormat::Toml)]
        output: ConfigFormat,
    },
    #[command(about = commands::STATUS.help)]
    Status {
        /// Only this pod.
        pod: Option<String>,
        /// table (NAME READY STATUS RESTARTS AGE), wide (adds PID MEMORY CPU), or json (the
        /// status reply).
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::DESCRIBE.help)]
    Describe {
        /// The pod.
        pod: String,
        /// table (kubectl describe's text; wide is the same), or json (the describe reply).
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::EVENTS.help)]
    Events {
        /// Only this pod's events (its own and its containers').
        pod: Option<String>,
        /// Keep printing new events; across an upgrade or a restart of vigil it reconnects
        /// and goes on after the last event it printed.
        #[arg(short, long)]
        follow: bool,
        /// Only events after this sequence number (an event's "seq" in -o json).
        #[arg(long, value_name = "SEQ")]
        after: Option<u64>,
        /// table (LAST SEEN TYPE REASON OBJECT MESSAGE), or json (one event a line).
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::LOGS.help)]
    Logs {
        /// POD or POD/CONTAINER; several PODs show each one's containers together.
        #[arg(value_name = "TARGET", required_unless_present = "all")]
        targets: Vec<String>,
        /// Every container of every pod, each line prefixed with its pod/container (in a
        /// colour of its own on a terminal, unless NO_COLOR is set).
        #[arg(long, conflicts_with_all = ["targets", "previous"])]
        all: bool,
        /// Keep printing new output; across an upgrade or a restart of vigil it reconnects
        /// and goes on where it was.
        #[arg(short, long)]
        follow: bool,
        /// Only the last N lines (of each container).
        #[arg(long, value_name = "N")]
        tail: Option<usize>,
        /// The previous run's output.
        #[arg(short, long)]
        previous: bool,
        /// Prefix each line with when vigil read it (RFC 3339, nanoseconds, UTC).
        #[arg(long)]
        timestamps: bool,
        /// Only lines newer than this: 5s, 2m, 3h (rounded up to whole seconds).
        #[arg(long, value_parser = parse_duration, conflicts_with = "since_time")]
        since: Option<Duration>,
        /// Only lines read at or after this RFC 3339 time (2026-11-23T13:40:47Z).
        #[arg(long, value_parser = parse_since_time)]
        since_time: Option<i64>,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::START.help)]
    Start {
        /// POD or POD/CONTAINER.
        target: String,
        /// Start the whole pod now, without waiting for its depends_on (as systemd's
        /// --job-mode=ignore-dependencies); its dependencies are not started either.
        #[arg(long)]
        ignore_dependencies: bool,
        #[command(flatten)]
        wait: WaitOpts,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::STOP.help)]
    Stop {
        /// POD or POD/CONTAINER.
        target: String,
        #[command(flatten)]
        wait: WaitOpts,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::RESTART.help)]
    Restart {
        /// POD or POD/CONTAINER (with --rolling: a pod with replicas, as named in the config).
        target: String,
        /// Restart the replicas a batch at a time, highest index first, each batch after the
        /// previous one is Ready again; with --wait, return when every replica is replaced.
        #[arg(long)]
        rolling: bool,
        /// With --rolling: replicas restarted at once, 1 to 1000 (default: the pod's
        /// max_unavailable, else 1).
        #[arg(long, requires = "rolling", value_parser = clap::value_parser!(u32).range(1..=1000))]
        max_unavailable: Option<u32>,
        #[command(flatten)]
        wait: WaitOpts,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::SCALE.help)]
    Scale {
        /// The pod with replicas (as named in the config: web, not web-0).
        pod: String,
        /// How many replicas, 1 to 1000.
        replicas: u32,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::TRIGGER.help)]
    Trigger {
        /// The pod.
        pod: String,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::RELOAD.help)]
    Reload {
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::SHUTDOWN.help)]
    Shutdown {
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::UPGRADE.help)]
    Upgrade {
        /// The vigil binary to execute (default: the path the supervisor was started from).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
        /// Only say whether the upgrade would work (the binary is checked and asked which
        /// handoff format it reads); change nothing.
        #[arg(long)]
        check: bool,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::METRICS.help)]
    Metrics {
        /// OpenMetrics 1.0 instead of the Prometheus text format 0.0.4.
        #[arg(long)]
        openmetrics: bool,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::HEALTH.help)]
    Health {
        /// Only these pods (each judged even if not expected to run: left out, stopped).
        #[arg(value_name = "POD")]
        pods: Vec<String>,
        /// table (a summary, or the reasons on stderr), or json (the health reply).
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::WAIT.help)]
    Wait {
        /// The pods.
        #[arg(value_name = "POD", required = true)]
        pods: Vec<String>,
        /// ready (its Ready condition), completed (ran to completion), or stopped (nothing of
        /// it runs, starts or backs off); kubectl's condition=Ready is ready.
        #[arg(long = "for", value_name = "CONDITION", value_parser = parse_wait_for)]
        condition: crate::control::wire::wait::WaitFor,
        /// How long to wait: 30s, 2m, 500ms, or seconds (default 30s); 0 looks once.
        #[arg(long, value_parser = parse_duration)]
        timeout: Option<Duration>,
        /// table (one line a pod), or json (the wait reply).
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    #[command(about = commands::VERSION.help)]
    Version {
        #[command(flatten)]
        client: ClientOpts,
    },
    /// A live view of pods and containers (CPU, memory, restarts, events) with keys to
    /// describe, follow logs, start, stop and restart (keys: docs/interface.md).
    Top {
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Print shell completions.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Entry point used by `main`: returns the process exit code.
pub fn main() -> i32 {
    // `--handoff-version`, or the new instance of `vigil upgrade` (src/runtime/handoff).
    if let Some(code) = crate::runtime::handoff_entry() {
        return code;
    }
    // vigil's output holder (src/runtime/holder.rs), started by a running vigil.
    if let Some(code) = crate::runtime::holder::entry() {
        return code;
    }
    // Started by the kernel as init (`/sbin/init`, `rdinit=`), vigil gets no subcommand — and
    // possibly stray kernel command-line words as arguments: behave as `vigil run`.
    if crate::runtime::is_pid1() {
        let first = std::env::args_os()
            .nth(1)
            .and_then(|a| a.into_string().ok());
        let known = first.as_deref().is_some_and(|a| {
            use clap::CommandFactory;
            a.starts_with('-') || Cli::command().find_subcommand(a).is_some()
        });
        if !known {
            return crate::runtime::run_main(Vec::new(), false, None, SelectOpts::from_env());
        }
    }
    // docs/interface.md §1.3: bad usage exits 1 (2 means "cannot reach the supervisor").
    let cli = match parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    match cli.command {
        Cmd::Run {
            config,
            file: Some(_),
            ..
        } if config.len() > 1 => {
            eprintln!("error: run -f takes at most one -c");
            1
        }
        Cmd::Run {
            config,
            file: Some(manifest),
            allow_missing_controllers,
            exit_with,
            select,
        } => crate::runtime::run_source(
            crate::config::ConfigSource::Manifest {
                manifest,
                config: config.into_iter().next(),
            },
            allow_missing_controllers,
            exit_with,
            select.selection(),
        ),
        Cmd::Run {
            config,
            file: None,
            allow_missing_controllers,
            exit_with,
            select,
        } => crate::runtime::run_main(
            config,
            allow_missing_controllers,
            exit_with,
            select.selection(),
        ),
        Cmd::Convert(args) => crate::convert::main(args),
        Cmd::Check {
            config,
            no_host,
            select,
        } => crate::host::check_main(config, !no_host, &select.selection()),
        Cmd::Config {
            config,
            origin,
            output,
        } => {
            let opts = crate::config::ShowOptions {
                json: output == ConfigFormat::Json,
                origin,
            };
            match crate::convert::pod_dir::show(&crate::config::resolve_paths(config), opts) {
                Ok(text) => {
                    print!("{text}");
                    0
                }
                Err(errors) => {
                    eprintln!("{errors}");
                    1
                }
            }
        }
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "vigil", &mut std::io::stdout());
            0
        }
        Cmd::Top { client } => match client.socket_path() {
            Ok(socket) => crate::top::main(socket),
            Err(message) => {
                eprintln!("error: {message}");
                1
            }
        },
        other => match client_command(other) {
            Ok(cmd) => client::main(cmd),
            Err(message) => {
                eprintln!("error: {message}");
                1
            }
        },
    }
}

/// The variables options are read from (clap's `env =`). docs/interface.md §1.1: one set to
/// the empty string is the same as unset — as kubectl treats an empty `$KUBECONFIG` and the
/// XDG base directory specification its variables, and as `VIGIL_CONFIG=` in a systemd unit
/// or an env file is written to clear it.
const OPTION_VARIABLES: [&str; 2] = ["VIGIL_CONFIG", "VIGIL_SOCKET"];

/// argv through clap, the options of [`OPTION_VARIABLES`] that are set but empty left unset
/// (clap itself would take the empty value and refuse it: "a value is required").
fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let empty: Vec<&str> = OPTION_VARIABLES
        .into_iter()
        .filter(|v| std::env::var_os(v).is_some_and(|x| x.is_empty()))
        .collect();
    let mut cmd = without_env(Cli::command(), &empty);
    let mut matches = cmd.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
}

/// `cmd` with no option of it or of its subcommands read from the variables `names`.
fn without_env(cmd: clap::Command, names: &[&str]) -> clap::Command {
    if names.is_empty() {
        return cmd;
    }
    let strip = |arg: clap::Arg| {
        if arg.get_env().is_some_and(|e| names.iter().any(|n| e == *n)) {
            arg.env(None)
        } else {
            arg
        }
    };
    cmd.mut_args(strip)
        .mut_subcommands(|sub| sub.mut_args(strip))
}

/// `POD` or `POD/CONTAINER`.
pub fn parse_target(target: &str) -> Result<(String, Option<String>), String> {
    let mut parts = target.split('/');
    let pod = parts.next().unwrap_or("");
    let container = parts.next();
    if pod.is_empty() || parts.next().is_some() || container.is_some_and(str::is_empty) {
        return Err(format!(
            "invalid target {target:?}: expected POD or POD/CONTAINER"
        ));
    }
    Ok((pod.to_string(), container.map(str::to_string)))
}

/// A client subcommand as the request the client sends, where to send it and how to show the
/// answer. `run`, `check` and `completions` are not client commands.
pub fn client_command(cmd: Cmd) -> Result<ClientCommand, String> {
    let mut wait = None;
    let mut several = None;
    let (request, client, output) = match cmd {
        Cmd::Status {
            pod,
            output,
            client,
        } => (RequestCmd::Status { pod }, client, output),
        Cmd::Describe {
            pod,
            output,
            client,
        } => (RequestCmd::Describe { pod }, client, output),
        Cmd::Events {
            pod,
            follow,
            after,
            output,
            client,
        } => {
            let request = RequestCmd::Events {
                follow,
                pod,
                after,
                history: None,
            };
            (request, client, output)
        }
        Cmd::Logs {
            targets,
            all,
            follow,
            tail,
            previous,
            timestamps,
            since,
            since_time,
            client,
        } => {
            several = match (all, targets.as_slice()) {
                (true, _) => Some(Several::All),
                (false, [_]) => None,
                (false, more) => {
                    if let Some(t) = more.iter().find(|t| t.contains('/')) {
                        return Err(format!(
                            "{t:?}: several targets are whole pods (every container of each is \
                             shown); name one POD/CONTAINER alone"
                        ));
                    }
                    Some(Several::Pods(more.to_vec()))
                }
            };
            let (pod, container) = match several {
                Some(_) => (String::new(), None),
                None => parse_target(targets.first().map_or("", String::as_str))?,
            };
            // kubectl: `--since` is sent as whole seconds, rounded up; `0s` means all output.
            let since_seconds = match (since, since_time) {
                (Some(d), None) if !d.is_zero() => {
                    Some(d.as_nanos().div_ceil(1_000_000_000) as u64)
                }
                _ => None,
            };
            let since_time = since_time.map(crate::logs::rfc3339_nano);
            let request = RequestCmd::Logs {
                pod,
                container,
                follow,
                tail,
                previous,
                timestamps,
                since_seconds,
                since_time,
                ring: None,
                offset: None,
            };
            (request, client, Output::Table)
        }
        Cmd::Start {
            target,
            ignore_dependencies,
            wait: w,
            client,
        } => {
            let (pod, container) = parse_target(&target)?;
            wait = w.wait();
            let request = RequestCmd::Start {
                pod,
                container,
                ignore_dependencies,
            };
            (request, client, Output::Table)
        }
        Cmd::Stop {
            target,
            wait: w,
            client,
        } => {
            let (pod, container) = parse_target(&target)?;
            wait = w.wait();
            (RequestCmd::Stop { pod, container }, client, Output::Table)
        }
        Cmd::Restart {
            target,
            rolling,
            max_unavailable,
            wait: w,
            client,
        } => {
            let (pod, container) = parse_target(&target)?;
            if rolling && let Some(c) = &container {
                return Err(format!(
                    "--rolling restarts the replicas of a pod, not one container ({pod}/{c})"
                ));
            }
            wait = w.wait();
            let request = RequestCmd::Restart {
                pod,
                container,
                rolling,
                max_unavailable,
            };
            (request, client, Output::Table)
        }
        Cmd::Trigger { pod, client } => (RequestCmd::Trigger { pod }, client, Output::Table),
        Cmd::Reload { client } => (RequestCmd::Reload, client, Output::Table),
        Cmd::Scale {
            pod,
            replicas,
            client,
        } => (RequestCmd::Scale { pod, replicas }, client, Output::Table),
        Cmd::Shutdown { client } => (RequestCmd::Shutdown, client, Output::Table),
        Cmd::Version { client } => (RequestCmd::Version, client, Output::Table),
        Cmd::Health {
            pods,
            output,
            client,
        } => (RequestCmd::Health { pods }, client, output),
        Cmd::Wait {
            pods,
            condition,
            timeout,
            output,
            client,
        } => {
            let request = RequestCmd::Wait {
                pods,
                condition,
                timeout_seconds: Some(crate::control::protocol::Seconds(
                    timeout.unwrap_or(DEFAULT_WAIT),
                )),
            };
            (request, client, output)
        }
        Cmd::Upgrade {
            binary,
            check,
            client,
        } => {
            // The supervisor needs an absolute path: a relative one is the caller's.
            let binary = match binary {
                Some(b) => Some(
                    std::path::absolute(&b)
                        .map_err(|e| format!("--binary {}: {e}", b.display()))?
                        .to_string_lossy()
                        .into_owned(),
                ),
                None => None,
            };
            (RequestCmd::Upgrade { binary, check }, client, Output::Table)
        }
        Cmd::Metrics {
            openmetrics,
            client,
        } => (
            RequestCmd::Metrics {
                format: if openmetrics {
                    crate::metrics::Format::OpenMetrics
                } else {
                    crate::metrics::Format::Prometheus
                },
            },
            client,
            Output::Table,
        ),
        Cmd::Run { .. }
        | Cmd::Check { .. }
        | Cmd::Config { .. }
        | Cmd::Convert(_)
        | Cmd::Top { .. }
        | Cmd::Completions { .. } => {
            return Err("not a client command".to_string());
        }
    };
    Ok(ClientCommand {
        socket: client.socket_path()?,
        request,
        output: output.into(),
        wait,
        several,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_and_option_of_every_command_has_help_text() {
        use clap::CommandFactory as _;
        let top = Cli::command();
        let mut missing = Vec::new();
        for cmd in top.get_subcommands() {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{} {id}", cmd.get_name()));
                }
            }
        }
        assert!(missing.is_empty(), "without help text: {missing:?}");
    }

    #[test]
    fn every_socket_command_is_a_subcommand_with_the_tables_help_and_arguments() {
        use crate::control::wire::commands::DEFS;
        use clap::CommandFactory as _;
        /// The subcommands that send no socket command.
        const LOCAL: [&str; 6] = ["run", "convert", "check", "config", "top", "completions"];
        let top = Cli::command();
        let mut subcommands: Vec<&str> = top
            .get_subcommands()
            .map(clap::Command::get_name)
            .filter(|n| !LOCAL.contains(n))
            .collect();
        let mut rows: Vec<&str> = DEFS.iter().map(|d| d.name).collect();
        subcommands.sort_unstable();
        rows.sort_unstable();
        assert_eq!(subcommands, rows, "a subcommand per row of commands::DEFS");
        for def in DEFS {
            let sub = top.find_subcommand(def.name).unwrap();
            assert_eq!(
                sub.get_about().map(ToString::to_string).as_deref(),
                Some(def.help),
                "{}: the help line is the row's",
                def.name
            );
            assert!(sub.get_long_about().is_none(), "{}", def.name);
            let ids: Vec<&str> = sub.get_arguments().map(|a| a.get_id().as_str()).collect();
            for arg in def.args {
                if let Some(id) = arg.cli {
                    assert!(
                        ids.contains(&id),
                        "{}: the row's argument {:?} is made from --{id}, which the subcommand \
                         lacks",
                        def.name,
                        arg.name
                    );
                }
            }
            // What the client uses itself: where to connect, how to show the reply, how long
            // to wait, and `logs --all`'s fan-out over pods.
            let clients_own = |id: &str| {
                matches!(id, "socket" | "config" | "output" | "help")
                    || (def.waits && matches!(id, "wait" | "timeout"))
                    || (def.name == "logs" && id == "all")
            };
            for id in ids {
                assert!(
                    clients_own(id) || def.args.iter().any(|a| a.cli == Some(id)),
                    "{}: the subcommand's argument {id:?} is no argument of the row",
                    def.name
                );
            }
        }
    }

    /// The clap subcommand and its arm of `client_command` are written by hand beside the row
    /// of `commands::DEFS` (deriving them would lose clap's typed, documented options): each
    /// subcommand must send its own row's request, and every argument the row says is made
    /// from the command line must reach the request. Per command: the bare command line, then
    /// command lines that set every other CLI argument of the row.
    #[test]
    fn each_subcommand_sends_its_rows_request_with_every_cli_argument() {
        use crate::control::wire::commands::DEFS;
        const SAMPLES: &[(&[&str], &[&[&str]])] = &[
            (&["status"], &[&["status", "web"]]),
            (&["describe", "web"], &[]),
            (&["events"], &[&["events", "web", "-f", "--after", "3"]]),
            (
                &["logs", "web"],
                &[
                    &[
                        "logs",
                        "web/app",
                        "-f",
                        "--tail",
                        "3",
                        "-p",
                        "--timestamps",
                        "--since",
                        "5s",
                    ],
                    &["logs", "web", "--since-time", "2026-11-23T13:40:47Z"],
                ],
            ),
            (
                &["start", "web"],
                &[
                    &["start", "web/app"],
                    &["start", "web", "--ignore-dependencies"],
                ],
            ),
            (&["stop", "web"], &[&["stop", "web/app"]]),
            (
                &["restart", "web"],
                &[
                    &["restart", "web/app"],
                    &["restart", "web", "--rolling", "--max-unavailable", "2"],
                ],
            ),
            (&["reload"], &[]),
            (&["scale", "web", "3"], &[]),
            (&["shutdown"], &[]),
            (&["version"], &[]),
            (
                &["upgrade"],
                &[&["upgrade", "--binary", "/bin/true", "--check"]],
            ),
            (&["metrics"], &[&["metrics", "--openmetrics"]]),
            (&["health"], &[&["health", "web"]]),
            (
                &["wait", "--for=ready", "web"],
                &[&["wait", "--for=ready", "web", "--timeout", "5s"]],
            ),
            (&["trigger", "web"], &[]),
        ];
        let request = |argv: &[&str]| {
            let args = ["vigil", argv[0], "--socket", "/run/test.sock"]
                .into_iter()
                .chain(argv[1..].iter().copied())
                .map(std::ffi::OsString::from);
            let cli = parse(args).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let sent = client_command(cli.command).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            sent.request
        };
        let mut sampled: Vec<&str> = SAMPLES.iter().map(|(bare, _)| bare[0]).collect();
        let mut rows: Vec<&str> = DEFS.iter().map(|d| d.name).collect();
        sampled.sort_unstable();
        rows.sort_unstable();
        assert_eq!(
            sampled, rows,
            "a sample command line per row of commands::DEFS"
        );
        for (bare, full) in SAMPLES {
            let def = crate::control::wire::commands::find(bare[0]).unwrap();
            let plain = request(bare);
            assert_eq!(
                plain.name(),
                def.name,
                "`vigil {}` sends its row's request",
                def.name
            );
            let plain = plain.to_json();
            let sent: Vec<_> = full.iter().map(|argv| request(argv)).collect();
            for (argv, req) in full.iter().zip(&sent) {
                assert_eq!(req.name(), def.name, "{argv:?}");
            }
            for arg in def.args.iter().filter(|a| a.cli.is_some()) {
                let given = |fields: &serde_json::Map<String, serde_json::Value>| {
                    fields.get(arg.name).cloned()
                };
                let reached = if arg.required {
                    given(&plain).is_some()
                } else {
                    sent.iter()
                        .any(|r| given(&r.to_json()).is_some_and(|v| Some(v) != given(&plain)))
                };
                assert!(
                    reached,
                    "{}: the row's {:?} (from the CLI argument {:?}) does not reach the request",
                    def.name,
                    arg.name,
                    arg.cli.unwrap_or_default()
                );
            }
        }
    }

    #[test]
    fn targets_parse_pod_and_container() {
        assert_eq!(parse_target("web"), Ok(("web".into(), None)));
        assert_eq!(
            parse_target("web/app"),
            Ok(("web".into(), Some("app".into())))
        );
        for bad in ["", "/app", "web/", "a/b/c"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wait_timeouts_parse_and_imply_wait() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["", "s", "5d", "-1s", "1e400"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let w = |wait, timeout| WaitOpts { wait, timeout }.wait();
        assert_eq!(w(false, None), None);
        assert_eq!(w(true, None), Some(DEFAULT_WAIT));
        assert_eq!(
            w(false, Some(Duration::from_secs(5))),
            Some(Duration::from_secs(5))
        );
    }

    #[test]
    fn a_rolling_restart_takes_a_pod_and_a_batch_size_within_range() {
        let args = |a: &[&str]| parse(a.iter().map(std::ffi::OsString::from));
        let Ok(Cli {
            command: cmd @ Cmd::Restart { .. },
        }) = args(&[
            "vigil",
            "restart",
            "web",
            "--rolling",
            "--max-unavailable",
            "2",
        ])
        else {
            panic!("parsed");
        };
        let sent = client_command(cmd).unwrap();
        assert_eq!(
            sent.request,
            RequestCmd::Restart {
                pod: "web".into(),
                container: None,
                rolling: true,
                max_unavailable: Some(2),
            }
        );
        for bad in [
            &["vigil", "restart", "web", "--max-unavailable", "2"][..],
            &[
                "vigil",
                "restart",
                "web",
                "--rolling",
                "--max-unavailable",
                "0",
            ],
            &[
                "vigil",
                "restart",
                "web",
                "--rolling",
                "--max-unavailable",
                "1001",
            ],
        ] {
            assert!(args(bad).is_err(), "{bad:?}");
        }
        let e = client_command(Cmd::Restart {
            target: "web/app".into(),
            rolling: true,
            max_unavailable: None,
            wait: WaitOpts::default(),
            client: ClientOpts::default(),
        })
        .unwrap_err();
        assert!(e.contains("not one container"), "{e}");
    }

    #[test]
    fn an_option_variable_set_but_empty_is_dropped_from_every_subcommand() {
        use clap::CommandFactory as _;
        let cmd = without_env(Cli::command(), &["VIGIL_CONFIG"]);
        let mut seen = 0;
        for sub in cmd.get_subcommands() {
            for arg in sub.get_arguments() {
                match arg.get_id().as_str() {
                    "config" => assert_eq!(arg.get_env(), None, "{}", sub.get_name()),
                    "socket" => {
                        seen += 1;
                        assert_eq!(
                            arg.get_env(),
                            Some(std::ffi::OsStr::new("VIGIL_SOCKET")),
                            "{}",
                            sub.get_name()
                        );
                    }
                    _ => {}
                }
            }
        }
        assert!(seen > 5, "client commands with --socket: {seen}");
        // Before: every `-c` of run, check, convert and the client commands reads it.
        let before = Cli::command();
        let with_env = before
            .get_subcommands()
            .filter(|sub| {
                sub.get_arguments()
                    .any(|a| a.get_env() == Some(std::ffi::OsStr::new("VIGIL_CONFIG")))
            })
            .count();
        assert!(with_env > 5, "{with_env}");
    }

    #[test]
    fn bad_target_is_a_usage_error() {
        let e = client_command(Cmd::Restart {
            target: "a/b/c".into(),
            rolling: false,
            max_unavailable: None,
            wait: WaitOpts::default(),
            client: ClientOpts::default(),
        })
        .unwrap_err();
        assert!(e.contains("POD or POD/CONTAINER"), "{e}");
    }

    #[test]
    fn the_socket_comes_from_the_flag_then_the_config_then_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("vigil.toml");
        std::fs::write(
            &config,
            "[supervisor]\nsocket = \"/somewhere/else.sock\"\n\n[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/true\"]\n",
        )
        .unwrap();
        let opts = |socket: Option<&str>, config: Option<&std::path::Path>| ClientOpts {
            socket: socket.map(PathBuf::from),
            config: config.map(std::path::Path::to_path_buf),
        };
        assert_eq!(
            opts(Some("/x.sock"), Some(&config)).socket_path(),
            Ok(PathBuf::from("/x.sock"))
        );
        assert_eq!(
            opts(None, Some(&config)).socket_path(),
            Ok(PathBuf::from("/somewhere/else.sock"))
        );
        assert_eq!(
            opts(None, None).socket_path(),
            Ok(crate::control::default_socket_path())
        );
        let missing = dir.path().join("missing.toml");
        let e = opts(None, Some(&missing)).socket_path().unwrap_err();
        assert!(
            e.contains("missing.toml") && e.contains("cannot read"),
            "{e}"
        );
    }
}
