//! Host names for network probes, resolved without blocking the loop.
//!
//! Owns: one helper thread (`vigil-resolver`) that calls getaddrinfo(3) — so `/etc/hosts`,
//! `nsswitch.conf` and `resolv.conf` are honoured exactly as for any other program — and a
//! cache of its answers. A probe whose host is an IP literal or `localhost` never reaches
//! the thread; a name found in the cache is answered at once; any other name is queued and
//! the probe waits on an eventfd(2) that the thread signals when the answer is in. The
//! eventfd is a mio source like the probe's socket, registered under the probe's token.
//!
//! Cache: getaddrinfo does not report TTLs, so answers are kept [`POSITIVE_TTL`] and
//! failures [`NEGATIVE_TTL`] (a name that starts resolving is seen within that time), at
//! most [`MAX_ENTRIES`] names. The monotonic clock is read here for those expiries only.
//!
//! Must not: block the loop thread. The loop only takes the cache lock, which the helper
//! thread holds for a map insert, never across a lookup. Lookups are serial on the one
//! thread: a slow name delays the ones queued after it, and the probe's own timeout bounds
//! what the user waits.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::eventfd::{EfdFlags, EventFd};

use super::ProbeError;

/// How long a resolved address is reused.
pub const POSITIVE_TTL: Duration = Duration::from_secs(30);
/// How long a failed lookup is remembered.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(5);
/// Cache bound; expired entries are dropped first, then the cache is cleared.
pub const MAX_ENTRIES: usize = 4096;

/// At most this many addresses of a name are kept (tried in order).
pub const MAX_ADDRESSES: usize = 8;

/// The answer for a host: its addresses in getaddrinfo's order (never empty), or why there
/// are none (getaddrinfo's text).
type Answer = Result<Vec<IpAddr>, String>;

/// What [`lookup`] knows now.
#[derive(Debug)]
pub enum Lookup {
    /// The addresses, in the order to try them (never empty).
    Ready(Vec<IpAddr>),
    Failed(ProbeError),
    /// Queued on the helper thread; wait for [`Pending::fd`] to become readable.
    Pending(Pending),
}

/// A queued lookup. Dropping it abandons the answer (the thread still caches it).
#[derive(Debug)]
pub struct Pending {
    host: String,
    done: Arc<EventFd>,
    slot: Arc<Mutex<Option<Answer>>>,
}

impl Pending {
    /// The descriptor that becomes readable when the answer is in.
    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&*self.done)
    }

    /// The answer once the thread has given it; `None` while it is still working.
    pub fn take(&self) -> Option<Result<Vec<IpAddr>, ProbeError>> {
        let answer = self.slot.lock().ok()?.take()?;
        Some(answer.map_err(|reason| ProbeError::Lookup {
            host: self.host.clone(),
            reason,
        }))
    }
}

struct Request {
    host: String,
    done: Arc<EventFd>,
    slot: Arc<Mutex<Option<Answer>>>,
}

struct Entry {
    expires: Instant,
    answer: Answer,
}

fn cache() -> &'static Mutex<HashMap<String, Entry>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The queue to the helper thread, started on first use; `Err` if it could not start.
fn queue() -> Result<Sender<Request>, String> {
    static QUEUE: OnceLock<Result<Sender<Request>, String>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Request>();
            std::thread::Builder::new()
                .name("vigil-resolver".to_string())
                .spawn(move || {
                    // Signals are the loop's business (signal-hook's self-pipe): never here.
                    let _ = nix::sys::signal::SigSet::all().thread_block();
                    for req in rx {
                        answer(req);
                    }
                })
                .map(|_| tx)
                .map_err(|e| format!("cannot start the resolver thread: {e}"))
        })
        .clone()
}

/// An IP literal (IPv6 with or without brackets), `localhost`, or `None` for a name.
pub fn literal(host: &str) -> Option<IpAddr> {
    let trimmed = host.trim();
    if trimmed.eq_ignore_ascii_case("localhost") {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    trimmed
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(trimmed)
        .parse::<IpAddr>()
        .ok()
}

/// The address of `host` now, or a pending lookup on the helper thread.
pub fn lookup(host: &str) -> Lookup {
    if let Some(ip) = literal(host) {
        return Lookup::Ready(vec![ip]);
    }
    let failed = |reason: String| {
        Lookup::Failed(ProbeError::Lookup {
            host: host.to_string(),
            reason,
        })
    };
    if let Some(answer) = cached(host, Instant::now()) {
        return match answer {
            Ok(ips) => Lookup::Ready(ips),
            Err(reason) => failed(reason),
        };
    }
    submit(host)
}

/// Queues `host` on the helper thread, whatever it is.
fn submit(host: &str) -> Lookup {
    let failed = |reason: String| {
        Lookup::Failed(ProbeError::Lookup {
            host: host.to_string(),
            reason,
        })
    };
    let done = match EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK) {
        Ok(fd) => Arc::new(fd),
        Err(e) => return failed(format!("eventfd: {}", e.desc().to_lowercase())),
    };
    let slot = Arc::new(Mutex::new(None));
    let request = Request {
        host: host.to_string(),
        done: done.clone(),
        slot: slot.clone(),
    };
    match queue() {
        Ok(tx) => {
            if tx.send(request).is_err() {
                return failed("the resolver thread has stopped".to_string());
            }
        }
        Err(reason) => return failed(reason),
    }
    Lookup::Pending(Pending {
        host: host.to_string(),
        done,
        slot,
    })
}

fn cached(host: &str, now: Instant) -> Option<Answer> {
    let map = cache().lock().ok()?;
    map.get(host)
        .filter(|e| e.expires > now)
        .map(|e| e.answer.clone())
}

/// Runs on the helper thread: the cache (filled meanwhile by an earlier request for the
/// same name) or getaddrinfo, then the answer into the slot and a wake-up of the loop.
fn answer(req: Request) {
    let answer = match cached(&req.host, Instant::now()) {
        Some(a) => a,
        None => {
            let a = resolve_blocking(&req.host);
            let ttl = if a.is_ok() {
                POSITIVE_TTL
            } else {
                NEGATIVE_TTL
            };
            store(&req.host, a.clone(), Instant::now() + ttl);
            a
        }
    };
    if let Ok(mut slot) = req.slot.lock() {
        *slot = Some(answer);
    }
    // The probe may have been cancelled and its end of the eventfd dropped: then this is
    // the last reference and the write goes nowhere.
    let _ = req.done.write(1);
}

fn store(host: &str, answer: Answer, expires: Instant) {
    let Ok(mut map) = cache().lock() else {
        return;
    };
    if map.len() >= MAX_ENTRIES {
        let now = Instant::now();
        map.retain(|_, e| e.expires > now);
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
    }
    map.insert(host.to_string(), Entry { expires, answer });
}

/// getaddrinfo through std: the distinct addresses in the order it returns them (RFC 6724
/// as configured in gai.conf), at most [`MAX_ADDRESSES`].
fn resolve_blocking(host: &str) -> Answer {
    match (host, 0u16).to_socket_addrs() {
        Ok(addrs) => {
            let mut ips: Vec<IpAddr> = Vec::new();
            for ip in addrs.map(|a| a.ip()) {
                if !ips.contains(&ip) && ips.len() < MAX_ADDRESSES {
                    ips.push(ip);
                }
            }
            if ips.is_empty() {
                Err("no addresses".to_string())
            } else {
                Ok(ips)
            }
        }
        Err(e) => Err(lookup_reason(&e)),
    }
}

/// std wraps getaddrinfo's message as `failed to lookup address information: Name or
/// service not known`; keep the part after the colon, lower-cased like Go's resolver.
fn lookup_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    let tail = text.rsplit(": ").next().unwrap_or(&text).trim();
    let mut chars = tail.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "lookup failed".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_localhost_need_no_lookup() {
        assert_eq!(literal("127.0.0.1"), Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(
            literal(" LocalHost "),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        assert_eq!(literal("[::1]"), "::1".parse().ok());
        assert_eq!(literal("::1"), "::1".parse().ok());
        assert_eq!(literal("db.internal"), None);
    }

    #[test]
    fn a_cached_answer_is_used_until_it_expires() {
        let now = Instant::now();
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        store(
            "cached.vigil.test",
            Ok(vec![ip]),
            now + Duration::from_secs(60),
        );
        assert_eq!(cached("cached.vigil.test", now), Some(Ok(vec![ip])));
        assert!(matches!(lookup("cached.vigil.test"), Lookup::Ready(a) if a == [ip]));
        store("stale.vigil.test", Ok(vec![ip]), now);
        assert_eq!(cached("stale.vigil.test", now), None);
    }

    fn wait(p: &Pending) -> Result<Vec<IpAddr>, ProbeError> {
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(&*p.done),
            nix::poll::PollFlags::POLLIN,
        )];
        nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(20_000u16)).unwrap();
        p.take().expect("answer after the eventfd fired")
    }

    #[test]
    fn names_from_etc_hosts_resolve_on_the_helper_thread() {
        // getaddrinfo answers "localhost" from /etc/hosts; `submit` skips the fast path.
        match submit("localhost") {
            Lookup::Pending(p) => {
                let ips = wait(&p).unwrap();
                assert!(ips.iter().all(|ip| ip.is_loopback()), "{ips:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_name_fails_with_a_message_naming_it() {
        let err = match lookup("no-such-host.invalid") {
            Lookup::Pending(p) => wait(&p).unwrap_err(),
            Lookup::Failed(e) => e,
            Lookup::Ready(ips) => panic!("resolved to {ips:?}"),
        };
        let text = err.to_string();
        assert!(
            text.starts_with("dial tcp: lookup no-such-host.invalid: "),
            "{text}"
        );
    }
}
