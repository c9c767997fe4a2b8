//! The control surface: the Unix socket server's mechanics, the JSON-lines protocol, the reply
//! types both ends share, and the client.
//!
//! - [`wire`]: every reply's `Serialize`/`Deserialize` types and the error kinds;
//! - [`render`]: the core's snapshot → wire (server side; secrets redacted for non-admins);
//! - [`text`]: wire → kubectl-style tables and `describe` (client side);
//! - [`limits`]: the connection-limits core the socket and the metrics listener share;
//! - [`protocol`], [`server`]: request parsing and the socket; [`watch`]: noticing the socket
//!   file replaced; [`client`]: one exchange; [`follow`]: `events -f` and `logs -f`, which
//!   reconnect across an upgrade or a restart of vigil.
//!
//! Owns everything between a snapshot of the core and the bytes on the socket or the terminal.
//! It must not decide anything about pods: the runtime answers requests (it alone talks to the
//! core) and tells the server what to send. Nothing here imports the CLI.

pub mod client;
pub mod follow;
pub mod limits;
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
    socket_path_for(
        nix::unistd::geteuid().as_raw(),
        std::env::var_os("XDG_RUNTIME_DIR"),
    )
}

/// [`default_socket_path`] for effective uid `euid` and `$XDG_RUNTIME_DIR` = `runtime_dir`.
fn socket_path_for(euid: u32, runtime_dir: Option<std::ffi::OsString>) -> PathBuf {
    if euid == 0 {
        return PathBuf::from("/run/vigil/vigil.sock");
    }
    match runtime_dir {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("vigil").join("vigil.sock"),
        _ => PathBuf::from(format!("/tmp/vigil-{euid}/vigil.sock")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_uses_run_whatever_its_runtime_dir() {
        assert_eq!(
            socket_path_for(0, Some("/run/user/0".into())),
            PathBuf::from("/run/vigil/vigil.sock")
        );
        assert_eq!(
            socket_path_for(0, None),
            PathBuf::from("/run/vigil/vigil.sock")
        );
    }

    #[test]
    fn another_user_uses_its_runtime_dir_else_a_tmp_dir_named_by_its_uid() {
        assert_eq!(
            socket_path_for(1000, Some("/run/user/1000".into())),
            PathBuf::from("/run/user/1000/vigil/vigil.sock")
        );
        assert_eq!(
            socket_path_for(1000, Some("".into())),
            PathBuf::from("/tmp/vigil-1000/vigil.sock")
        );
        assert_eq!(
            socket_path_for(65534, None),
            PathBuf::from("/tmp/vigil-65534/vigil.sock")
        );
    }

    #[test]
    fn the_default_is_the_one_for_this_process() {
        assert_eq!(
            default_socket_path(),
            socket_path_for(
                nix::unistd::geteuid().as_raw(),
                std::env::var_os("XDG_RUNTIME_DIR")
            )
        );
    }
}
