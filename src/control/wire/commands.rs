//! Every socket command defined once: its wire name, who may send it, its arguments, its
//! one-line help text and how the client shows its reply (docs/interface.md §2), one row per
//! command in the manner of ripgrep's `crates/core/flags/defs.rs`.
//!
//! Owns the table [`DEFS`]. Derived from it: `protocol::COMMANDS` (the names an unknown
//! command's error lists), the access check ([`RequestCmd::access`], from which `is_mutating`
//! follows), whether a command takes `wait_ms` (`protocol`), the CLI's help line for the
//! subcommand (`cli.rs`, `about = …`), the client's choice of renderer (`client.rs`) and the
//! wire reference's request list (docs/wire-reference.md, generated in `wire.rs`); the
//! server's handler is found by the row's index ([`row_of`], `RequestCmd::row`) in the shell's
//! table of them (`runtime/shell/control/handlers.rs`: `control` must not name `runtime`).
//! Tests fail when the request enum ([`RequestCmd`]), a CLI subcommand, the handler table,
//! docs/interface.md or the wire reference disagree with a row.
//!
//! Must not parse arguments (`request.rs` does, naming the field in its errors) or answer a
//! command (the server). The recipe for a new command is in docs/architecture.md.
//!
//! [`RequestCmd`]: super::RequestCmd
//! [`RequestCmd::access`]: super::RequestCmd::access

/// Who may send a command, weakest first. The peer is judged from `SO_PEERCRED` when it
/// connects (control/server/admission.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Any peer the socket's mode lets connect: the command reads and changes nothing.
    Read,
    /// An admin (root, vigil's own uid, or a uid/gid in `admin_uids`/`admin_gids`): the
    /// command changes what runs.
    Admin,
    /// Root or vigil's own uid alone, whatever `admin_uids`/`admin_gids` say: `upgrade
    /// --binary` runs a file of the asker's choosing as vigil's user (issue 43).
    Root,
}

/// What an argument's value is on the wire (`request.rs` checks it, naming the field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A non-empty string: a pod, a container, a path.
    Text,
    /// An id a stream handed out, as a string of decimal digits.
    Id,
    /// An RFC 3339 time, as a string.
    Time,
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// `true` or `false`.
    Flag,
    /// A non-negative integer.
    Count,
    /// A number of seconds, fractions allowed.
    Seconds,
    /// An array of non-empty names.
    Names,
}

impl ArgKind {
    /// The JSON type of the value, as the wire reference names it.
    pub fn json_type(self) -> &'static str {
        match self {
            ArgKind::Text | ArgKind::Id | ArgKind::Time | ArgKind::Choice(_) => "string",
            ArgKind::Flag => "boolean",
            ArgKind::Count => "integer",
            ArgKind::Seconds => "number",
            ArgKind::Names => "array",
        }
    }
}

/// One argument of a command: a field of the request object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgDef {
    /// The field's name.
    pub name: &'static str,
    /// What its value is.
    pub kind: ArgKind,
    /// Whether a request without it is refused.
    pub required: bool,
    /// The id of the CLI argument it is made from (clap's, which is the field's name in
    /// `cli.rs`), or `None` when the client sets it itself (resuming a stream).
    pub cli: Option<&'static str>,
}

const fn opt(name: &'static str, kind: ArgKind) -> ArgDef {
    ArgDef {
        name,
        kind,
        required: false,
        cli: Some(name),
    }
}

const fn req(name: &'static str, kind: ArgKind) -> ArgDef {
    ArgDef {
        required: true,
        ..opt(name, kind)
    }
}

impl ArgDef {
    /// Made from the CLI argument `id` rather than one of the field's name.
    const fn on_cli(self, id: &'static str) -> ArgDef {
        ArgDef {
            cli: Some(id),
            ..self
        }
    }

    /// Set by the client itself, not on the command line.
    const fn by_client(self) -> ArgDef {
        ArgDef { cli: None, ..self }
    }
}

/// How the client shows a command's reply (`client.rs`): each reads the `result` into its
/// wire type first, so a reply it cannot read fails loudly, with `-o json` too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// A `StatusReply` as `kubectl get pods`' table (`-o wide`: more columns).
    Status,
    /// A `DescribeReply` as `kubectl describe pod`'s text.
    Describe,
    /// An `EventsReply` as a table, one line an event when following, or one object a line.
    Events,
    /// A `LogsReply`'s output, verbatim (control sequences escaped on a terminal).
    Logs,
    /// A `VersionReply` as the `Server Version:` line.
    Version,
    /// A `MetricsReply`'s exposition text.
    Metrics,
    /// A `HealthReply` as JSON (the verdict is printed by `health`'s own loop).
    Health,
    /// A `WaitReply` as JSON (the verdict is printed by `wait`'s own loop).
    Wait,
    /// A `MessageReply`'s message line.
    Message,
}

/// One socket command.
#[derive(Debug, Clone, Copy)]
pub struct CommandDef {
    /// The `cmd` field's value, and the CLI subcommand's name.
    pub name: &'static str,
    /// The CLI subcommand's one-line help.
    pub help: &'static str,
    /// Who may send it (an argument may ask for more: `upgrade`'s `binary` needs
    /// [`Access::Root`]).
    pub access: Access,
    /// Whether it takes `wait_ms` (the CLI's `--wait`/`--timeout`): its reply then waits, on
    /// the server, until the target is in the state asked for (`wire/wait.rs`, decided at
    /// each loop turn) or that long has passed.
    pub waits: bool,
    /// Its arguments, in the order the wire reference lists them.
    pub args: &'static [ArgDef],
    /// How the client shows the reply.
    pub render: Render,
}

use ArgKind::{Choice, Count, Flag, Id, Names, Seconds, Text, Time};

/// `pod`, required.
const POD: ArgDef = req("pod", Text);
/// The CLI's `POD[/CONTAINER]` target as `pod` and `container`.
const TARGET: [ArgDef; 2] = [
    req("pod", Text).on_cli("target"),
    opt("container", Text).on_cli("target"),
];

pub const STATUS: CommandDef = CommandDef {
    name: "status",
    help: "List pods like `kubectl get pods`",
    access: Access::Read,
    waits: false,
    args: &[opt("pod", Text)],
    render: Render::Status,
};

pub const DESCRIBE: CommandDef = CommandDef {
    name: "describe",
    help: "Show one pod in detail like `kubectl describe pod`",
    access: Access::Read,
    waits: false,
    args: &[POD],
    render: Render::Describe,
};

pub const EVENTS: CommandDef = CommandDef {
    name: "events",
    help: "Show events, oldest first",
    access: Access::Read,
    waits: false,
    args: &[
        opt("pod", Text),
        opt("follow", Flag),
        opt("after", Count),
        opt("history", Id).by_client(),
    ],
    render: Render::Events,
};

pub const LOGS: CommandDef = CommandDef {
    name: "logs",
    help: "Print a container's captured output; of several pods (or --all), every \
           container's, each line prefixed with its pod/container",
    access: Access::Read,
    waits: false,
    args: &[
        req("pod", Text).on_cli("targets"),
        opt("container", Text).on_cli("targets"),
        opt("follow", Flag),
        opt("tail", Count),
        opt("previous", Flag),
        opt("timestamps", Flag),
        opt("since_seconds", Count).on_cli("since"),
        opt("since_time", Time),
        opt("ring", Id).by_client(),
        opt("offset", Count).by_client(),
    ],
    render: Render::Logs,
};

pub const START: CommandDef = CommandDef {
    name: "start",
    help: "Start a stopped pod or container",
    access: Access::Admin,
    waits: true,
    args: &[TARGET[0], TARGET[1], opt("ignore_dependencies", Flag)],
    render: Render::Message,
};

pub const STOP: CommandDef = CommandDef {
    name: "stop",
    help: "Stop a pod or container (reason Stopped; not restarted)",
    access: Access::Admin,
    waits: true,
    args: &TARGET,
    render: Render::Message,
};

pub const RESTART: CommandDef = CommandDef {
    name: "restart",
    help: "Restart a pod or container; with --rolling, the replicas of a pod with replicas a \
           batch at a time, each after the previous one is Ready",
    access: Access::Admin,
    waits: true,
    args: &[
        TARGET[0],
        TARGET[1],
        opt("rolling", Flag),
        opt("max_unavailable", Count),
    ],
    render: Render::Message,
};

pub const RELOAD: CommandDef = CommandDef {
    name: "reload",
    help: "Re-read the config file (like SIGHUP)",
    access: Access::Admin,
    waits: false,
    args: &[],
    render: Render::Message,
};

pub const SCALE: CommandDef = CommandDef {
    name: "scale",
    help: "Run N replicas of a pod with `replicas`: new ones start, the highest-numbered stop",
    access: Access::Admin,
    waits: false,
    args: &[POD, req("replicas", Count)],
    render: Render::Message,
};

pub const SHUTDOWN: CommandDef = CommandDef {
    name: "shutdown",
    help: "Stop everything gracefully and exit (like SIGTERM)",
    access: Access::Admin,
    waits: false,
    args: &[],
    render: Render::Message,
};

pub const VERSION: CommandDef = CommandDef {
    name: "version",
    help: "Print the supervisor's version",
    access: Access::Read,
    waits: false,
    args: &[],
    render: Render::Version,
};

pub const UPGRADE: CommandDef = CommandDef {
    name: "upgrade",
    help: "Re-execute the supervisor in place (a new binary, or the same one) keeping every \
           container running: same PIDs, logs, restart counts, back-off and probe schedules",
    access: Access::Admin,
    waits: false,
    args: &[opt("binary", Text), opt("check", Flag)],
    render: Render::Message,
};

pub const METRICS: CommandDef = CommandDef {
    name: "metrics",
    help: "Print the metrics exposition (what `GET /metrics` on `metrics_address` serves)",
    access: Access::Read,
    waits: false,
    args: &[opt("format", Choice(&["prometheus", "openmetrics"])).on_cli("openmetrics")],
    render: Render::Metrics,
};

pub const HEALTH: CommandDef = CommandDef {
    name: "health",
    help: "Exit 0 when every pod named (default: every pod expected to run) is Ready or \
           Completed, else 1 with each other pod and why on stderr (for a Docker HEALTHCHECK \
           or systemd's ExecStartPost)",
    access: Access::Read,
    waits: false,
    args: &[opt("pods", Names)],
    render: Render::Health,
};

pub const WAIT: CommandDef = CommandDef {
    name: "wait",
    help: "Wait until every pod named is ready, completed or stopped (as kubectl wait): exit 0 \
           once it is, 1 when the timeout passes first (each pod not there yet on stderr)",
    access: Access::Read,
    waits: false,
    args: &[
        req("pods", Names),
        req("for", Choice(&["ready", "completed", "stopped"])).on_cli("condition"),
        opt("timeout_seconds", Seconds).on_cli("timeout"),
    ],
    render: Render::Wait,
};

pub const TRIGGER: CommandDef = CommandDef {
    name: "trigger",
    help: "Start a new run of a scheduled (or any) pod at rest now, as its schedule would (as \
           kubectl create job --from=cronjob/…); not counted as a trigger of the schedule",
    access: Access::Admin,
    waits: false,
    args: &[POD],
    render: Render::Message,
};

/// Every command, in the order the wire reference and the unknown-command error list them.
pub const DEFS: &[CommandDef] = &[
    STATUS, DESCRIBE, EVENTS, LOGS, START, STOP, RESTART, RELOAD, SCALE, SHUTDOWN, VERSION,
    UPGRADE, METRICS, HEALTH, WAIT, TRIGGER,
];

/// Every command name, in [`DEFS`]' order.
pub const COMMANDS: [&str; DEFS.len()] = names();

const fn names() -> [&'static str; DEFS.len()] {
    let mut out = [""; DEFS.len()];
    let mut i = 0;
    while i < DEFS.len() {
        out[i] = DEFS[i].name;
        i += 1;
    }
    out
}

/// The index of `def`'s row in [`DEFS`] (its name's), for tables kept in `DEFS`' order (the
/// server's handlers); evaluated at compile time, where a definition missing from `DEFS`
/// fails the build.
pub const fn row_of(def: &CommandDef) -> usize {
    let mut i = 0;
    while i < DEFS.len() {
        if same(DEFS[i].name.as_bytes(), def.name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("a command definition is missing from commands::DEFS")
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The definition of the command named `name`.
pub fn find(name: &str) -> Option<&'static CommandDef> {
    DEFS.iter().find(|d| d.name == name)
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::*;
    use crate::control::wire::{ArgError, RequestCmd};

    /// A value of `kind` the parser takes.
    fn value(kind: ArgKind) -> Value {
        match kind {
            ArgKind::Text => json!("web"),
            ArgKind::Id => json!("17"),
            ArgKind::Time => json!("2026-11-23T13:40:47Z"),
            ArgKind::Choice(choices) => json!(choices[choices.len() - 1]),
            ArgKind::Flag => json!(true),
            ArgKind::Count => json!(3),
            ArgKind::Seconds => json!(1.5),
            ArgKind::Names => json!(["web"]),
        }
    }

    /// Arguments the parser takes only beside another (`request.rs`' `from_fields`).
    fn partner(cmd: &str, arg: &str) -> Option<&'static str> {
        match (cmd, arg) {
            ("events", "history") => Some("after"),
            ("logs", "ring") => Some("offset"),
            ("logs", "offset") => Some("ring"),
            _ => None,
        }
    }

    fn parse(def: &CommandDef, args: &[&ArgDef]) -> Result<RequestCmd, ArgError> {
        let mut fields = Map::new();
        fields.insert("cmd".into(), json!(def.name));
        for arg in args {
            fields.insert(arg.name.into(), value(arg.kind));
        }
        RequestCmd::from_fields(fields)
    }

    /// The fields the request enum's variant for `def` takes, from serde's own list of them in
    /// the error for an unknown one ("unknown field `…`, expected one of `a`, `b`").
    fn fields_of_variant(def: &CommandDef) -> Vec<String> {
        let err = match serde_json::from_value::<RequestCmd>(json!({"cmd": def.name, "x…": 1})) {
            // A unit variant takes any field in serde; `from_fields` refuses them (tested
            // above with a typo).
            Ok(_) => return Vec::new(),
            Err(e) => e.to_string(),
        };
        match err.split_once("expected ") {
            Some((_, list)) => list
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect(),
            None => panic!("{}: {err}", def.name),
        }
    }

    #[test]
    fn each_rows_arguments_are_the_fields_its_request_takes_with_the_same_kinds_and_needs() {
        for def in DEFS {
            let required: Vec<&ArgDef> = def.args.iter().filter(|a| a.required).collect();
            let cmd = parse(def, &required)
                .unwrap_or_else(|e| panic!("{}: its required arguments alone: {e}", def.name));
            assert_eq!(cmd.name(), def.name, "the variant's row");
            for gone in &required {
                let fewer: Vec<&ArgDef> = required
                    .iter()
                    .copied()
                    .filter(|a| a.name != gone.name)
                    .collect();
                assert!(
                    parse(def, &fewer).is_err(),
                    "{}: taken without {:?}, which the row says is required",
                    def.name,
                    gone.name
                );
            }
            for arg in def.args.iter().filter(|a| !a.required) {
                let mut more = required.clone();
                more.push(arg);
                if let Some(with) = partner(def.name, arg.name) {
                    more.extend(def.args.iter().filter(|a| a.name == with));
                }
                if let Err(e) = parse(def, &more) {
                    panic!("{}: the row's {:?} refused: {e}", def.name, arg.name);
                }
            }
            let mut unknown = required.clone();
            let typo = ArgDef {
                name: "contaner",
                ..opt("", ArgKind::Text)
            };
            unknown.push(&typo);
            assert_eq!(
                parse(def, &unknown),
                Err(ArgError::UnknownField("contaner".into())),
                "{}",
                def.name
            );
            let mut fields = fields_of_variant(def);
            let mut args: Vec<String> = def.args.iter().map(|a| a.name.to_string()).collect();
            fields.sort_unstable();
            args.sort_unstable();
            assert_eq!(
                fields, args,
                "{}: the variant's fields are the row's",
                def.name
            );
        }
    }

    /// The rows of docs/interface.md §2.2's request table: the command names of the first
    /// cell, and the whole row.
    fn interface_md_request_rows(doc: &str) -> Vec<(Vec<String>, String)> {
        let start = doc
            .find("\n### 2.2 Requests")
            .expect("docs/interface.md has §2.2");
        let section = &doc[start + 1..];
        let section = &section[..section[1..].find("\n#").map_or(section.len(), |e| e + 1)];
        section
            .lines()
            .filter_map(|line| {
                let first = line.strip_prefix("| ")?.split(" |").next()?;
                let names: Vec<String> = first
                    .split(", ")
                    .map(|n| n.trim_matches('`').to_string())
                    .collect();
                Some((names, line.to_string()))
            })
            // The table's head and its rule.
            .filter(|(names, _)| names[0] != "cmd" && !names[0].starts_with("---"))
            .collect()
    }

    /// docs/interface.md §2.2 has a row per command (as config/tests.rs holds §4 to the config
    /// keys), and §1 a `vigil NAME` row: a command added to `DEFS` without them fails here,
    /// and so does a row naming a command that does not exist, a row that leaves out one of
    /// the command's arguments, or one whose "needs admin" cell disagrees with the row's
    /// access.
    #[test]
    fn every_command_has_its_row_in_interface_md_naming_its_arguments_and_access() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/interface.md");
        let doc = std::fs::read_to_string(&path).expect("read docs/interface.md");
        let rows = interface_md_request_rows(&doc);
        let mut wrong = Vec::new();
        for (names, _) in &rows {
            for name in names {
                if find(name).is_none() {
                    wrong.push(format!("{name:?}: documented, but no row of DEFS"));
                }
            }
        }
        for def in DEFS {
            let mut mine = rows
                .iter()
                .filter(|(names, _)| names.iter().any(|n| n == def.name));
            let Some((_, line)) = mine.next() else {
                wrong.push(format!("{}: no row in docs/interface.md §2.2", def.name));
                continue;
            };
            if mine.next().is_some() {
                wrong.push(format!("{}: more than one row", def.name));
            }
            let cells: Vec<&str> = line.split(" | ").collect();
            let (args, admin) = (cells[1], cells[2]);
            for arg in def.args {
                if !args.contains(&format!("`{}`", arg.name)) {
                    wrong.push(format!(
                        "{}: argument {:?} not documented",
                        def.name, arg.name
                    ));
                }
            }
            if def.waits && !args.contains("`wait_ms`") {
                wrong.push(format!("{}: `wait_ms` not documented", def.name));
            }
            if !doc.contains(&format!("\n| `vigil {}", def.name)) {
                wrong.push(format!("{}: no `vigil {}` row in §1", def.name, def.name));
            }
            let says_admin = admin.starts_with("yes");
            if says_admin != (def.access >= Access::Admin) || (!says_admin && admin != "no") {
                wrong.push(format!(
                    "{}: \"needs admin\" is {admin:?}, the row's access {:?}",
                    def.name, def.access
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "docs/interface.md §2.2 disagrees with commands::DEFS:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn a_choice_takes_each_of_its_values_and_nothing_else() {
        for def in DEFS {
            for arg in def.args {
                let ArgKind::Choice(choices) = arg.kind else {
                    continue;
                };
                let others: Vec<&ArgDef> = def
                    .args
                    .iter()
                    .filter(|a| a.required && a.name != arg.name)
                    .collect();
                for choice in choices.iter().chain(&["neither"]) {
                    let mut fields = Map::new();
                    fields.insert("cmd".into(), json!(def.name));
                    for other in &others {
                        fields.insert(other.name.into(), value(other.kind));
                    }
                    fields.insert(arg.name.into(), json!(choice));
                    assert_eq!(
                        RequestCmd::from_fields(fields).is_ok(),
                        *choice != "neither",
                        "{} {}={choice}",
                        def.name,
                        arg.name
                    );
                }
            }
        }
    }
}
