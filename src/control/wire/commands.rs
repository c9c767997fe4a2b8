//! Every socket command defined once: its wire name and who may send it (docs/interface.md §2).
//!
//! Owns the table [`DEFS`]: `protocol::COMMANDS` (the names an unknown command's error lists,
//! and the wire reference's request list) and the access check ([`RequestCmd::access`], from
//! which `is_mutating` follows) are derived from it. Must not parse arguments (`request.rs`)
//! or answer a command (the server). A new command is a row here and a variant of
//! [`RequestCmd`]; a test fails when the two disagree.
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

/// One socket command.
#[derive(Debug, Clone, Copy)]
pub struct CommandDef {
    /// The `cmd` field's value.
    pub name: &'static str,
    /// Who may send it (an argument may ask for more: `upgrade`'s `binary` needs
    /// [`Access::Root`]).
    pub access: Access,
    /// Whether it takes `wait_ms`: its reply then waits, on the server, until the target is in
    /// the state asked for (control/waiters.rs) or that long has passed.
    pub waits: bool,
}

const fn def(name: &'static str, access: Access) -> CommandDef {
    CommandDef {
        name,
        access,
        waits: false,
    }
}

const fn waiting(name: &'static str, access: Access) -> CommandDef {
    CommandDef {
        name,
        access,
        waits: true,
    }
}

/// Every command, in the order the wire reference and the unknown-command error list them.
pub const DEFS: &[CommandDef] = &[
    def("status", Access::Read),
    def("describe", Access::Read),
    def("events", Access::Read),
    def("logs", Access::Read),
    waiting("start", Access::Admin),
    waiting("stop", Access::Admin),
    waiting("restart", Access::Admin),
    def("reload", Access::Admin),
    def("scale", Access::Admin),
    def("shutdown", Access::Admin),
    def("version", Access::Read),
    def("upgrade", Access::Admin),
    def("metrics", Access::Read),
    def("health", Access::Read),
    def("wait", Access::Read),
    def("trigger", Access::Admin),
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

/// The definition of the command named `name`.
pub fn find(name: &str) -> Option<&'static CommandDef> {
    DEFS.iter().find(|d| d.name == name)
}
