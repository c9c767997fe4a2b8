//! Followed streams: `vigil events -f` and `vigil logs -f` of one container or several, which
//! outlive a connection.
//!
//! Owns the follower's side of resuming (docs/interface.md §2.4): where a stream stands (the
//! event history and the last `seq` printed; the log ring and the offset of the next byte),
//! noticing that vigil went away (the connection ended, or the `busy` notice an upgrade sends
//! to open connections), reconnecting with bounded back-off for a bounded time while saying so
//! on stderr, and asking again from where it stood, so that what is printed across an upgrade
//! or a restart of vigil has no gap and no duplicate; and ending at once, exit 0, on the line a
//! clean shutdown sends its streams (`shutting_down`). Several containers (`logs -f --all`,
//! `logs -f web db`) are one stream each, on a thread each, whose lines the caller's thread
//! prints with a `pod/container` prefix ([`Prefixer`]).
//!
//! Must not: decide what is shown of an event or a log chunk beyond the prefix (that is
//! [`super::text`] and [`super::client`]), or retry forever: a vigil that does not come back
//! within [`RECONNECT_FOR`] ends the command (exit 2, as for any unreachable vigil).

use std::io::{self, BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::client::{ClientError, Terminal};
use super::protocol::RequestCmd;
use super::text;
use super::wire::{self, ErrorBody, ErrorKind};
use crate::format;

/// How long a follower waits for vigil to come back before it gives up.
pub const RECONNECT_FOR: Duration = Duration::from_secs(60);
/// The first wait before reconnecting; doubled after each failed try up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(2);

/// What a followed stream hands its printer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// Text for stdout (a chunk of output; an event's line).
    Text(String),
    /// A line for stderr (vigil went away, came back, what was lost).
    Note(String),
}

/// How a followed stream ended.
#[derive(Debug)]
pub enum End {
    /// The printer wanted no more (stdout closed), or vigil ended the stream as done.
    Done,
    /// vigil refused the request, or ended the stream with an error (the container removed).
    Refused(ErrorBody),
}

/// How events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventsAs {
    /// One fixed-width row each ([`text::event_follow_line`]).
    Rows,
    /// One JSON object a line.
    Json,
}

/// Where a stream stands: what it asks from when it reconnects.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Position {
    /// `events`: the history's id (from the stream's first line) and the last `seq` received.
    history: Option<String>,
    seq: Option<u64>,
    /// `logs`: the ring and the offset of the first byte not received.
    ring: Option<String>,
    next: Option<u64>,
}

impl Position {
    /// `request` asked again from here.
    fn resume(&self, request: &RequestCmd) -> RequestCmd {
        let mut r = request.clone();
        match &mut r {
            RequestCmd::Events { after, history, .. } => {
                if let Some(h) = &self.history {
                    *history = Some(h.clone());
                    *after = Some(self.seq.or(*after).unwrap_or(0));
                }
            }
            RequestCmd::Logs { ring, offset, .. } => {
                if let (Some(r), Some(n)) = (&self.ring, self.next) {
                    *ring = Some(r.clone());
                    *offset = Some(n);
                }
            }
            _ => {}
        }
        r
    }

    /// Where it stands, for the note after a reconnection.
    fn describe(&self) -> String {
        match (&self.seq, &self.next) {
            (Some(seq), _) => format!("after event {seq}"),
            (None, Some(n)) => format!("at byte {n} of the log"),
            (None, None) => "from the start".to_string(),
        }
    }
}

/// Why a connection ended while following.
enum Away {
    /// vigil closed it or it failed (`vigil upgrade`'s notice, a crash, a restart).
    Gone(String),
    /// The stream is over: the printer wants no more, or vigil refused.
    Over(End),
}

/// Follows `request` (an `events` or `logs` request with `follow`) on `socket`, handing each
/// item to `emit` (which returns false once it wants no more), reconnecting while vigil is
/// away. `quiet_not_found`: a `not_found` answer before the stream began is retried every
/// second instead of ending it (a container of `logs -f --all` that has not run yet).
pub fn follow(
    socket: &Path,
    request: &RequestCmd,
    events_as: EventsAs,
    terminal: Terminal,
    quiet_not_found: bool,
    emit: &mut dyn FnMut(Item) -> bool,
) -> Result<End, ClientError> {
    let mut pos = Position::default();
    if let RequestCmd::Events { after, .. } = request {
        pos.seq = *after;
    }
    let mut away: Option<(Instant, String)> = None;
    let mut delay = FIRST_RETRY;
    let mut connected_once = false;
    loop {
        let stream = match UnixStream::connect(socket) {
            Ok(s) => s,
            Err(source) if !connected_once => {
                return Err(ClientError::Connect {
                    path: socket.to_path_buf(),
                    source,
                });
            }
            Err(e) => {
                let since = away
                    .get_or_insert_with(|| (Instant::now(), e.to_string()))
                    .0;
                if since.elapsed() >= RECONNECT_FOR {
                    return Err(gave_up(socket, &e));
                }
                std::thread::sleep(delay);
                delay = (delay * 2).min(MAX_RETRY);
                continue;
            }
        };
        connected_once = true;
        let sent = pos.resume(request);
        let result = stream_once(&stream, &sent, &mut pos, events_as, terminal, &mut |item| {
            if away.take().is_some() {
                delay = FIRST_RETRY;
                emit(Item::Note(format!(
                    "vigil is back: going on {}",
                    pos_note(&sent)
                )));
            }
            emit(item)
        });
        match result {
            Away::Over(End::Refused(e))
                if quiet_not_found
                    && e.kind == ErrorKind::NotFound
                    && pos == Position::default() =>
            {
                std::thread::sleep(Duration::from_secs(1));
            }
            Away::Over(end) => return Ok(end),
            Away::Gone(why) => {
                if away.is_none() {
                    emit(Item::Note(format!(
                        "vigil went away ({why}); reconnecting for up to {}",
                        format::go_duration(RECONNECT_FOR)
                    )));
                    away = Some((Instant::now(), why));
                } else if away
                    .as_ref()
                    .is_some_and(|(t, _)| t.elapsed() >= RECONNECT_FOR)
                {
                    return Err(gave_up(socket, &io::Error::other(why)));
                }
                std::thread::sleep(delay);
                delay = (delay * 2).min(MAX_RETRY);
            }
        }
    }
}

/// Where a resumed request goes on, for the note.
fn pos_note(sent: &RequestCmd) -> String {
    let pos = match sent {
        RequestCmd::Events { after, .. } => Position {
            seq: *after,
            ..Position::default()
        },
        RequestCmd::Logs { offset, .. } => Position {
            next: *offset,
            ..Position::default()
        },
        _ => Position::default(),
    };
    pos.describe()
}

fn gave_up(socket: &Path, last: &io::Error) -> ClientError {
    ClientError::Connect {
        path: socket.to_path_buf(),
        source: io::Error::new(
            last.kind(),
            format!(
                "{last}; it did not come back within {}",
                format::go_duration(RECONNECT_FOR)
            ),
        ),
    }
}

/// One connection of a follow: sends `request`, reads its stream until it ends.
fn stream_once(
    stream: &UnixStream,
    request: &RequestCmd,
    pos: &mut Position,
    events_as: EventsAs,
    terminal: Terminal,
    emit: &mut dyn FnMut(Item) -> bool,
) -> Away {
    if let Err(e) = super::client::send_request(stream, request, true) {
        return Away::Gone(e.to_string());
    }
    let mut reader = BufReader::new(stream);
    loop {
        let mut buf = String::new();
        match reader.read_line(&mut buf) {
            Ok(0) => return Away::Gone("it closed the connection".to_string()),
            Ok(_) if !buf.ends_with('\n') => {
                return Away::Gone("it closed the connection mid-line".to_string());
            }
            Ok(_) => {}
            Err(e) => return Away::Gone(e.to_string()),
        }
        let reply: wire::ReplyLine = match serde_json::from_str(&buf) {
            Ok(r) => r,
            Err(e) => return Away::Gone(format!("an unreadable line: {e}")),
        };
        if !reply.ok {
            return match reply.error {
                // `vigil upgrade` closes open connections with this notice; a connection limit
                // answers a new one with it: both pass.
                Some(e) if e.kind == ErrorKind::Busy => Away::Gone(format::cell(&e.message)),
                // A clean shutdown's last line to every stream ("vigil shut down"): nothing
                // will come back to reconnect to; said on stderr, and the follow is over
                // (exit 0, docs/interface.md §1.5).
                Some(e) if e.kind == ErrorKind::ShuttingDown => {
                    emit(Item::Note(format::cell(&e.message)));
                    Away::Over(End::Done)
                }
                Some(e) => Away::Over(End::Refused(e)),
                None => Away::Gone("an error line without an error".to_string()),
            };
        }
        let item = if let Some(raw) = reply.event {
            let ev: wire::Event = match serde_json::from_str(raw.get()) {
                Ok(ev) => ev,
                Err(e) => return Away::Gone(format!("an unreadable event: {e}")),
            };
            pos.seq = Some(ev.seq);
            Some(Item::Text(match events_as {
                EventsAs::Json => format!("{}\n", raw.get()),
                EventsAs::Rows => text::event_follow_line(&ev, SystemTime::now()),
            }))
        } else if let Some(history) = reply.history {
            let note = if let Some(lost) = reply.lost {
                Some(format!(
                    "vigil restarted after a crash: events {}…{} it had sent are not in its \
                     record and cannot be shown again",
                    lost.after + 1,
                    lost.through
                ))
            } else if reply.new_history && pos.history.is_some() {
                Some(
                    "vigil restarted without the earlier events: what follows is its own \
                     history, from its first event"
                        .to_string(),
                )
            } else {
                None
            };
            pos.history = Some(history);
            note.map(Item::Note)
        } else if let Some(chunk) = reply.log {
            let fresh_ring = pos.ring.is_some() && reply.ring.is_some() && pos.ring != reply.ring;
            if reply.ring.is_some() {
                pos.ring = reply.ring;
            }
            if reply.next.is_some() {
                pos.next = reply.next;
            }
            if fresh_ring
                && !emit(Item::Note(
                    "the log ring is not the one followed before (vigil restarted without it, or \
                 the container was created again): going on from the oldest output it holds; \
                 output read in between may be missing"
                        .to_string(),
                ))
            {
                return Away::Over(End::Done);
            }
            (!chunk.is_empty()).then(|| {
                Item::Text(match terminal {
                    Terminal::Yes => format::escape_controls(&chunk, "\n\t").into_owned(),
                    Terminal::No => chunk,
                })
            })
        } else {
            return Away::Gone("a line this client does not understand".to_string());
        };
        if let Some(item) = item
            && !emit(item)
        {
            return Away::Over(End::Done);
        }
    }
}

/// Prefixes each line of several streams with its `pod/container`, padded to the longest
/// name, in a colour of its own on a terminal (as `docker compose logs` does); a line is
/// printed whole, so lines of two containers never mix.
pub struct Prefixer {
    prefixes: Vec<String>,
    partial: Vec<String>,
}

/// The colours a prefix may have (ANSI foreground: cyan, yellow, green, magenta, blue, and
/// their bright forms), picked by a hash of the name so a container keeps its colour.
const COLOURS: [u8; 10] = [36, 33, 32, 35, 34, 96, 93, 92, 95, 94];

impl Prefixer {
    /// `names` are `pod/container`; `colour`: on a terminal and without `NO_COLOR`.
    pub fn new(names: &[String], colour: bool) -> Prefixer {
        let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        let prefixes = names
            .iter()
            .map(|n| {
                let padded = format!("{n:<width$} | ");
                if colour {
                    format!("\x1b[{}m{padded}\x1b[0m", COLOURS[colour_of(n)])
                } else {
                    padded
                }
            })
            .collect();
        Prefixer {
            prefixes,
            partial: vec![String::new(); names.len()],
        }
    }

    /// The whole lines of stream `i` that `chunk` completes, each prefixed.
    pub fn push(&mut self, i: usize, chunk: &str) -> String {
        let mut out = String::new();
        let (Some(prefix), Some(partial)) = (self.prefixes.get(i), self.partial.get_mut(i)) else {
            return out;
        };
        partial.push_str(chunk);
        while let Some(nl) = partial.find('\n') {
            out.push_str(prefix);
            out.push_str(&partial[..=nl]);
            partial.drain(..=nl);
        }
        out
    }

    /// What is left of stream `i` (a last line without a newline), with a newline.
    pub fn finish(&mut self, i: usize) -> String {
        match (self.prefixes.get(i), self.partial.get_mut(i)) {
            (Some(prefix), Some(partial)) if !partial.is_empty() => {
                let line = format!("{prefix}{partial}\n");
                partial.clear();
                line
            }
            _ => String::new(),
        }
    }
}

/// The colour of `name`: FNV-1a of its bytes, so the same name has the same colour in every
/// run of the command.
fn colour_of(name: &str) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h as usize) % COLOURS.len()
}

/// Whether prefixes are coloured: on a terminal, unless `NO_COLOR` is set and not empty
/// (no-color.org).
pub fn use_colour(terminal: Terminal) -> bool {
    terminal == Terminal::Yes && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_several_streams_are_prefixed_whole_and_padded() {
        let names = vec!["web/app".to_string(), "db/postgres".to_string()];
        let mut p = Prefixer::new(&names, false);
        assert_eq!(p.push(0, "GET /"), "");
        assert_eq!(p.push(1, "ready\nchec"), "db/postgres | ready\n");
        assert_eq!(
            p.push(0, " 200\nGET /x 404\n"),
            "web/app     | GET / 200\nweb/app     | GET /x 404\n"
        );
        assert_eq!(p.finish(1), "db/postgres | chec\n");
        assert_eq!(p.finish(0), "");
    }

    #[test]
    fn a_prefix_keeps_its_colour_and_has_none_without_one() {
        let names = vec!["web/app".to_string()];
        let a = Prefixer::new(&names, true).push(0, "x\n");
        let b = Prefixer::new(&names, true).push(0, "x\n");
        assert_eq!(a, b);
        assert!(
            a.starts_with("\x1b[") && a.contains("web/app | \x1b[0mx\n"),
            "{a:?}"
        );
        assert!(!Prefixer::new(&names, false).push(0, "x\n").contains('\x1b'));
    }

    #[test]
    fn a_resumed_request_asks_from_where_the_stream_stood() {
        let events = RequestCmd::Events {
            follow: true,
            pod: Some("web".into()),
            after: None,
            history: None,
        };
        let mut pos = Position::default();
        assert_eq!(pos.resume(&events), events);
        pos.history = Some("77".into());
        pos.seq = Some(12);
        assert_eq!(
            pos.resume(&events),
            RequestCmd::Events {
                follow: true,
                pod: Some("web".into()),
                after: Some(12),
                history: Some("77".into()),
            }
        );
    }
}
