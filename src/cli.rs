//! Command line: argv → subcommand. Owns the clap definition (also used for completions)
//! and the mapping to exit codes: 0 success, 1 error or bad usage, 2 supervisor unreachable.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

/// Options every client command shares.
#[derive(Debug, Clone, Args)]
pub struct ClientOpts {
    /// Control socket path (default: /run/vigil/vigil.sock for root,
    /// $XDG_RUNTIME_DIR/vigil/vigil.sock otherwise).
    #[arg(long, env = "VIGIL_SOCKET", global = true)]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run the supervisor in the foreground.
    Run {
        /// Config file (default: $VIGIL_CONFIG, /etc/vigil/vigil.toml, else the bundled default).
        #[arg(short, long, env = "VIGIL_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Validate a config file; print every problem as FILE:LINE:COL: message.
    Check {
        #[arg(short, long, env = "VIGIL_CONFIG")]
        config: Option<PathBuf>,
    },
    /// List pods like `kubectl get pods`.
    Status {
        pod: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Show one pod in detail like `kubectl describe pod`.
    Describe {
        pod: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Show events, oldest first.
    Events {
        /// Keep printing new events.
        #[arg(short, long)]
        follow: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Print a container's captured output.
    Logs {
        /// POD or POD/CONTAINER.
        target: String,
        #[arg(short, long)]
        follow: bool,
        /// Only the last N lines.
        #[arg(long)]
        tail: Option<usize>,
        /// The previous run's output.
        #[arg(short, long)]
        previous: bool,
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Start a stopped pod or container.
    Start {
        /// POD or POD/CONTAINER.
        target: String,
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Stop a pod or container (reason Stopped; not restarted).
    Stop {
        target: String,
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Restart a pod or container.
    Restart {
        target: String,
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Re-read the config file (like SIGHUP).
    Reload {
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Stop everything gracefully and exit (like SIGTERM).
    Shutdown {
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Print the supervisor's version.
    Version {
        #[command(flatten)]
        client: ClientOpts,
    },
    /// Print shell completions.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Entry point used by `main`: returns the process exit code.
pub fn main() -> i32 {
    // Started by the kernel as init (`/sbin/init`, `rdinit=`), vigil gets no subcommand — and
    // possibly stray kernel command-line words as arguments: behave as `vigil run`.
    if crate::runtime::is_pid1() {
        let first = std::env::args().nth(1);
        let known = first.as_deref().is_some_and(|a| {
            use clap::CommandFactory;
            a.starts_with('-') || Cli::command().find_subcommand(a).is_some()
        });
        if !known {
            return crate::runtime::run_main(None);
        }
    }
    // interface.md: bad usage exits 1 (2 means "cannot reach the supervisor").
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    match cli.command {
        Cmd::Run { config } => crate::runtime::run_main(config),
        Cmd::Check { config } => crate::host::check_main(config),
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "vigil", &mut std::io::stdout());
            0
        }
        other => crate::control::client::main(other),
    }
}
