//! The control surface: the Unix socket server's mechanics, the JSON-lines protocol, the reply
//! types both ends share, and the client.
//!
//! - [`wire`]: every reply's `Serialize`/`Deserialize` types and the error kinds;
//! - [`render`]: the core's snapshot → wire (server side; secrets redacted for non-admins);
//! - [`text`]: wire → kubectl-style tables and `describe` (client side);
//! - [`protocol`], [`server`]: request parsing and the socket; [`watch`]: noticing the socket
//!   file replaced; [`client`]: one exchange.
//!
//! Owns everything between a snapshot of the core and the bytes on the socket or the terminal.
//! It must not decide anything about pods: the runtime answers requests (it alone talks to the
//! core) and tells the server what to send. Nothing here imports the CLI.

pub mod client;
pub mod protocol;
pub mod render;
pub mod server;
pub mod text;
pub mod time;
pub mod watch;
pub mod wire;

use std::path::PathBuf;

/// The default control socket: `/run/vigil/vigil.sock` for root,
/// `$XDG_RUNTIME_DIR/vigil/vigil.sock` otherwise, else `/tmp/vigil-<uid>/vigil.sock`.
pub fn default_socket_path() -> PathBuf {
    let euid = nix::unistd::geteuid();
    if euid.is_root() {
        return PathBuf::from("/run/vigil/vigil.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("vigil").join("vigil.sock"),
        _ => PathBuf::from(format!("/tmp/vigil-{}/vigil.sock", euid.as_raw())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_socket_path_depends_on_euid() {
        let p = default_socket_path();
        if nix::unistd::geteuid().is_root() {
            assert_eq!(p, PathBuf::from("/run/vigil/vigil.sock"));
        } else {
            assert!(
                p.ends_with("vigil/vigil.sock") || p.ends_with("vigil.sock"),
                "{p:?}"
            );
        }
    }
}
