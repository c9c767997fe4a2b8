//! The control socket's reply types: one set of `Serialize`/`Deserialize` structs that the
//! server writes and the client reads (README, "Control socket" and "Status JSON").
//!
//! Owns the exact JSON shape of every reply. It must not know how a snapshot is taken or how a
//! reply is shown: `render` builds these from the core's snapshot (server side) and `format`
//! turns them into tables and text (client side). A field renamed here changes both ends at
//! once; a reply missing a field the client needs fails to deserialize instead of showing "".

use serde::{Deserialize, Serialize};

use crate::core::{CommandErrorKind, ReloadError};

/// Machine-readable error kinds of `{"ok": false, "error": {"kind": …}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The line is not a JSON object with a string `cmd` (or not UTF-8).
    BadRequest,
    /// `cmd` names no command.
    UnknownCommand,
    /// A field is missing, mistyped, empty or unknown, or the target does not accept the
    /// request now (e.g. starting an init container that is not the pod's current step).
    BadArgument,
    /// The request line is longer than the limit; the connection is closed.
    TooLarge,
    /// No pod or container of that name.
    NotFound,
    /// A mutating command from a peer that is not an admin.
    PermissionDenied,
    /// `reload` refused the new config; nothing changed.
    InvalidConfig,
    /// A shutdown is under way.
    ShuttingDown,
    /// vigil failed to answer (a bug); the message says what.
    Internal,
    /// The server refused the connection (connection limit reached).
    Busy,
}

impl ErrorKind {
    /// Every kind, in documentation order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::BadRequest,
        ErrorKind::UnknownCommand,
        ErrorKind::BadArgument,
        ErrorKind::NotFound,
        ErrorKind::PermissionDenied,
        ErrorKind::InvalidConfig,
        ErrorKind::ShuttingDown,
        ErrorKind::TooLarge,
        ErrorKind::Busy,
        ErrorKind::Internal,
    ];

    /// The wire spelling (`"not_found"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::UnknownCommand => "unknown_command",
            ErrorKind::BadArgument => "bad_argument",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::NotFound => "not_found",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::InvalidConfig => "invalid_config",
            ErrorKind::ShuttingDown => "shutting_down",
            ErrorKind::Internal => "internal",
            ErrorKind::Busy => "busy",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<CommandErrorKind> for ErrorKind {
    fn from(k: CommandErrorKind) -> ErrorKind {
        match k {
            CommandErrorKind::NotFound => ErrorKind::NotFound,
            CommandErrorKind::NotApplicable => ErrorKind::BadArgument,
            CommandErrorKind::ShuttingDown => ErrorKind::ShuttingDown,
        }
    }
}

impl From<&ReloadError> for ErrorKind {
    fn from(e: &ReloadError) -> ErrorKind {
        match e {
            ReloadError::InvalidConfig(_) => ErrorKind::InvalidConfig,
            ReloadError::Refused(c) => c.kind.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_serialize_as_their_documented_names() {
        for k in ErrorKind::ALL {
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, serde_json::Value::from(k.as_str()));
            assert_eq!(serde_json::from_value::<ErrorKind>(json).unwrap(), k);
        }
    }

    #[test]
    fn a_reload_refused_during_shutdown_is_shutting_down() {
        let e = ReloadError::Refused(crate::core::CommandError {
            kind: CommandErrorKind::ShuttingDown,
            message: "the supervisor is shutting down".into(),
        });
        assert_eq!(ErrorKind::from(&e), ErrorKind::ShuttingDown);
        let e = ReloadError::InvalidConfig("vigil.toml:3:1: unknown key".into());
        assert_eq!(ErrorKind::from(&e), ErrorKind::InvalidConfig);
    }
}
