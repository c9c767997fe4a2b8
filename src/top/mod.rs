//! `vigil top`: a live terminal view of the pods and containers — ready, status, restarts,
//! age, CPU %, memory, last event — refreshed from the control socket once a second, sortable,
//! with keys to describe a pod, follow a container's log, and (for an admin) start, stop or
//! restart it. Keys and columns: docs/interface.md §1.
//!
//! Split: [`state`] is everything the view holds and what a key does to it (no terminal, no
//! I/O: unit-tested); [`draw`] renders a state with ratatui; this file owns the terminal
//! (raw mode and the alternate screen, restored on every exit and on a panic, by
//! `ratatui::init`/`restore`) and the loop: poll the socket each [`REFRESH`], wait for a key
//! or a resize until then, carry out what a key asks for.
//!
//! Client side only: the supervisor never runs any of this (it is reached only from the
//! `top` subcommand); ratatui and crossterm are used nowhere else.
//! Must not: hold the socket open between polls (each request is one short connection, like
//! the other client commands), or act without the user's `y`.

pub mod draw;
pub mod state;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::control::client::{ClientError, one_result, typed};
use crate::control::protocol::RequestCmd;
use crate::control::{text, wire};
use state::{Admin, App, Effect, Key};

/// How often the status is polled.
pub const REFRESH: Duration = Duration::from_secs(1);
/// Lines of a container's log the log view fetches each refresh.
const LOG_TAIL: usize = 2000;

/// Runs `vigil top` against the socket at `socket`; returns the exit code (2 when vigil
/// cannot be reached at start, as the other client commands).
pub fn main(socket: PathBuf) -> i32 {
    use std::io::IsTerminal as _;
    if !std::io::stdout().is_terminal() {
        eprintln!("error: vigil top needs a terminal; use vigil status for a one-off table");
        return 1;
    }
    let mut app = App::new(socket.display().to_string());
    // Fail before touching the terminal when vigil is not there at all.
    if let Err(e) = refresh(&socket, &mut app) {
        eprintln!("error: {e}");
        return match e {
            ClientError::Connect { .. } => 2,
            _ => 1,
        };
    }
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot set up the terminal: {e}");
            return 1;
        }
    };
    let result = run(&mut terminal, &socket, &mut app);
    ratatui::restore();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: terminal: {e}");
            1
        }
    }
}

fn run(
    terminal: &mut ratatui::DefaultTerminal,
    socket: &Path,
    app: &mut App,
) -> std::io::Result<()> {
    let mut next_poll = Instant::now() + REFRESH;
    let mut dirty = true;
    loop {
        let size = terminal.size()?;
        let height = size.height;
        if dirty {
            app.fit(draw::body_height(height), usize::from(size.width));
            terminal.draw(|f| draw::draw(f, app))?;
            dirty = false;
        }
        let now = Instant::now();
        if now >= next_poll {
            if let Err(e) = refresh(socket, app) {
                app.set_message(format!("{e} (retrying)"));
            }
            next_poll = Instant::now() + REFRESH;
            dirty = true;
            continue;
        }
        if !event::poll(next_poll - now)? {
            continue;
        }
        let key = match event::read()? {
            Event::Resize(..) => {
                dirty = true;
                continue;
            }
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                match map_key(k.code, k.modifiers) {
                    Some(key) => key,
                    None => continue,
                }
            }
            _ => continue,
        };
        match app.on_key(key, draw::body_height(height)) {
            Effect::None => {}
            Effect::Redraw => dirty = true,
            Effect::Quit => return Ok(()),
            Effect::Describe | Effect::Logs => {
                if let Err(e) = refresh_view(socket, app) {
                    app.set_message(e.to_string());
                }
                dirty = true;
            }
            Effect::Request(request) => {
                let answer = act(socket, &request);
                app.set_message(answer);
                // Show the effect at once rather than up to a second later.
                if let Err(e) = refresh(socket, app) {
                    app.set_message(format!("{e} (retrying)"));
                }
                next_poll = Instant::now() + REFRESH;
                dirty = true;
            }
        }
    }
}

fn map_key(code: KeyCode, modifiers: KeyModifiers) -> Option<Key> {
    Some(match code {
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Key::Interrupt,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        _ => return None,
    })
}

/// One poll: whether the user is an admin, the status, the events, and the open view's text.
fn refresh(socket: &Path, app: &mut App) -> Result<(), ClientError> {
    if let Ok(v) = ask(socket, RequestCmd::Version)? {
        let version: wire::VersionReply = typed(socket, &v)?;
        app.admin = match version.admin {
            Some(true) => Admin::Yes,
            Some(false) => Admin::No,
            None => Admin::Unknown,
        };
    }
    let status: wire::StatusReply = match ask(socket, RequestCmd::Status { pod: None })? {
        Ok(v) => typed(socket, &v)?,
        Err(e) => {
            app.set_message(e.message);
            return Ok(());
        }
    };
    let events = match ask(
        socket,
        RequestCmd::Events {
            follow: false,
            pod: None,
            after: None,
            history: None,
        },
    )? {
        Ok(v) => typed::<wire::EventsReply>(socket, &v)?.events,
        Err(_) => Vec::new(),
    };
    app.update(status, events, Instant::now(), SystemTime::now());
    refresh_view(socket, app)
}

/// The describe or log view's text, when one is open.
fn refresh_view(socket: &Path, app: &mut App) -> Result<(), ClientError> {
    if let Some(pod) = app.describe_target() {
        match ask(socket, RequestCmd::Describe { pod: pod.clone() })? {
            Ok(v) => {
                let reply: wire::DescribeReply = typed(socket, &v)?;
                app.set_describe(&pod, text::describe_text(&reply, SystemTime::now()));
            }
            Err(e) => app.set_describe(&pod, e.message),
        }
    }
    if let Some((pod, container)) = app.log_target() {
        let request = RequestCmd::Logs {
            pod: pod.clone(),
            container: Some(container.clone()),
            follow: false,
            tail: Some(LOG_TAIL),
            previous: false,
            timestamps: false,
            since_seconds: None,
            since_time: None,
            ring: None,
            offset: None,
        };
        match ask(socket, request)? {
            Ok(v) => {
                let reply: wire::LogsReply = typed(socket, &v)?;
                let shown = crate::format::escape_controls(&reply.log, "\n\t").into_owned();
                app.set_log(&pod, &container, shown);
            }
            Err(e) => app.set_log(&pod, &container, e.message),
        }
    }
    Ok(())
}

fn ask(
    socket: &Path,
    request: RequestCmd,
) -> Result<Result<serde_json::Value, wire::ErrorBody>, ClientError> {
    one_result(&crate::control::client::ClientCommand {
        socket: socket.to_path_buf(),
        request,
        output: crate::control::client::Output::Json,
        wait: None,
        several: None,
    })
}

/// Sends a confirmed start/stop/restart; the line for the status bar.
fn act(socket: &Path, request: &RequestCmd) -> String {
    let name = request.name();
    match ask(socket, request.clone()) {
        Ok(Ok(v)) => match typed::<wire::MessageReply>(socket, &v) {
            Ok(m) => format!("{name}: {}", m.message),
            Err(e) => format!("{name}: {e}"),
        },
        Ok(Err(e)) => format!("{name} refused: {}", e.message),
        Err(e) => format!("{name}: {e}"),
    }
}
