//! `[[supervisor.on_event]]`: a hook's filter (reasons typed against [`EventReason`]), its one
//! action (`exec` or `webhook`) and its bounds.

use toml::Spanned;

use super::{Checker, span};
use crate::config::keys::{RawOnEvent, RawWebhook};
use crate::config::on_event::{
    DEFAULT_MAX_CONCURRENT, DEFAULT_QUEUE_SIZE, DEFAULT_RETRIES, DEFAULT_TIMEOUT, EventKind,
    EventReason, MAX_CONCURRENT, MAX_QUEUE_SIZE, MAX_RETRIES, OnEventAction, OnEventSpec, Webhook,
};
use crate::config::schema::join;
use crate::config::spec::HttpScheme;
use crate::config::values;

impl Checker<'_> {
    /// One hook, `index` in the file's list, at `path` (`supervisor.on_event[0]`).
    pub(super) fn on_event(
        &mut self,
        raw_s: &Spanned<RawOnEvent>,
        index: usize,
        path: &str,
    ) -> Option<OnEventSpec> {
        let raw = raw_s.get_ref();
        let before = self.out.len();
        let name = match &raw.name {
            Some(v) => match values::check_name(v.get_ref(), "on_event hook") {
                Ok(()) => v.get_ref().clone(),
                Err(m) => {
                    self.err(span(v), &join(path, "name"), m);
                    String::new()
                }
            },
            None => format!("on_event-{index}"),
        };
        let mut reasons = Vec::new();
        for (i, v) in raw.reasons.iter().flatten().enumerate() {
            let field = format!("{}[{i}]", join(path, "reasons"));
            match reason(v.get_ref()) {
                Ok(r) => reasons.push(r),
                Err(m) => self.err(span(v), &field, m),
            }
        }
        let mut pods = Vec::new();
        for (i, v) in raw.pods.iter().flatten().enumerate() {
            match values::check_name(v.get_ref(), "pod") {
                Ok(()) => pods.push(v.get_ref().clone()),
                Err(m) => self.err(span(v), &format!("{}[{i}]", join(path, "pods")), m),
            }
        }
        let kind = raw.kind.as_ref().and_then(|v| match v.get_ref().as_str() {
            "Normal" => Some(EventKind::Normal),
            "Warning" => Some(EventKind::Warning),
            other => {
                self.err(
                    span(v),
                    &join(path, "type"),
                    format!("invalid type {other:?}; expected \"Normal\" or \"Warning\""),
                );
                None
            }
        });
        let action = match (&raw.exec, &raw.webhook) {
            (Some(exec), None) => {
                let command = self.argv(exec, &join(path, "exec"));
                let user = raw
                    .user
                    .as_ref()
                    .and_then(|v| self.id_or_name(v, &join(path, "user")));
                let group = raw
                    .group
                    .as_ref()
                    .and_then(|v| self.id_or_name(v, &join(path, "group")));
                if let Some(v) = &raw.retries {
                    self.err(
                        span(v),
                        &join(path, "retries"),
                        "retries applies to a webhook only (an exec hook runs once per event)",
                    );
                }
                Some(OnEventAction::Exec {
                    command,
                    user,
                    group,
                })
            }
            (None, Some(hook)) => {
                for (key, v) in [("user", &raw.user), ("group", &raw.group)] {
                    if let Some(v) = v {
                        self.err(
                            span(v),
                            &join(path, key),
                            format!("{key} applies to an exec hook only"),
                        );
                    }
                }
                self.webhook(hook, &join(path, "webhook"))
                    .map(OnEventAction::Webhook)
            }
            (Some(_), Some(_)) => {
                self.err(
                    span(raw_s),
                    path,
                    "on_event hook has both exec and webhook; keep exactly one",
                );
                None
            }
            (None, None) => {
                self.err(
                    span(raw_s),
                    path,
                    "on_event hook needs an action: exec = [...] or webhook = { url = \"...\" }",
                );
                None
            }
        };
        let timeout = self.opt_seconds(
            &raw.timeout_seconds,
            &join(path, "timeout_seconds"),
            true,
            DEFAULT_TIMEOUT,
        );
        let bounded = |c: &mut Self, v: &Option<Spanned<i64>>, key: &str, lo: u32, hi: u32| {
            v.as_ref()
                .and_then(|v| c.int(v, &join(path, key), i64::from(lo), i64::from(hi)))
                .and_then(|n| u32::try_from(n).ok())
        };
        let max_concurrent = bounded(
            self,
            &raw.max_concurrent,
            "max_concurrent",
            1,
            MAX_CONCURRENT,
        )
        .unwrap_or(DEFAULT_MAX_CONCURRENT);
        let queue_size = bounded(self, &raw.queue_size, "queue_size", 0, MAX_QUEUE_SIZE)
            .unwrap_or(DEFAULT_QUEUE_SIZE);
        let retries =
            bounded(self, &raw.retries, "retries", 0, MAX_RETRIES).unwrap_or(DEFAULT_RETRIES);
        let action = action?;
        if self.out.len() > before {
            return None;
        }
        let retries = match action {
            OnEventAction::Exec { .. } => 0,
            OnEventAction::Webhook(_) => retries,
        };
        Some(OnEventSpec {
            name,
            reasons,
            pods,
            kind,
            action,
            timeout,
            max_concurrent,
            queue_size,
            retries,
        })
    }

    /// `webhook = { url, headers, tls }`: an `http://` or `https://` URL with a host.
    fn webhook(&mut self, raw_s: &Spanned<RawWebhook>, path: &str) -> Option<Webhook> {
        let raw = raw_s.get_ref();
        let Some(url) = &raw.url else {
            self.err(span(raw_s), path, "missing required key \"url\" in webhook");
            return None;
        };
        let field = join(path, "url");
        let text = url.get_ref().trim();
        let Some(target) = parse_url(text) else {
            self.err(
                span(url),
                &field,
                format!(
                    "invalid url {text:?}; expected http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH"
                ),
            );
            return None;
        };
        let scheme = if target.https {
            HttpScheme::Https
        } else {
            HttpScheme::Http
        };
        let tls = self.tls(raw.tls.as_ref(), scheme, &join(path, "tls"));
        let headers = self.headers(raw.headers.as_ref(), &join(path, "headers"));
        Some(Webhook {
            url: text.to_string(),
            https: target.https,
            host: target.host,
            port: target.port,
            path: target.path,
            headers,
            tls,
        })
    }
}

/// Scheme, host, port and path of an absolute `http(s)://` URL (no user info, no NUL, no
/// whitespace).
struct Url {
    https: bool,
    host: String,
    port: u16,
    path: String,
}

fn parse_url(text: &str) -> Option<Url> {
    if text.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let (https, rest) = if lower.starts_with("http://") {
        (false, &text[7..])
    } else if lower.starts_with("https://") {
        (true, &text[8..])
    } else {
        return None;
    };
    let rest = rest.split('#').next().unwrap_or("");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(end);
    if auth.contains('@') {
        return None;
    }
    let default_port = if https { 443 } else { 80 };
    let (host, port) = if let Some(v6) = auth.strip_prefix('[') {
        let close = v6.find(']')?;
        let port = match &v6[close + 1..] {
            "" => default_port,
            p => p.strip_prefix(':')?.parse().ok()?,
        };
        (v6[..close].to_string(), port)
    } else {
        match auth.split_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().ok()?),
            None => (auth.to_string(), default_port),
        }
    };
    if host.is_empty() || port == 0 {
        return None;
    }
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    Some(Url {
        https,
        host,
        port,
        path,
    })
}

/// A `reasons` entry: one of [`EventReason::ALL`], not one of the hooks' own.
fn reason(text: &str) -> Result<EventReason, String> {
    if let Some(r) = EventReason::parse(text) {
        if r.is_hook_machinery() {
            return Err(format!(
                "{text} is the hooks' own event: a hook never receives it (a hook never \
                 triggers itself)"
            ));
        }
        return Ok(r);
    }
    let hint = match text {
        "OOMKilled" => " (OOMKilled is a termination reason: an OOM kill of the main process \
                        records Exited, of another process OOMKilling)"
            .to_string(),
        "CrashLoopBackOff" => {
            " (CrashLoopBackOff is a waiting reason: its event is BackOff)".to_string()
        }
        _ => EventReason::ALL
            .iter()
            .filter(|r| !r.is_hook_machinery())
            .map(|r| {
                (
                    values::edit_distance(
                        &text.to_ascii_lowercase(),
                        &r.as_str().to_ascii_lowercase(),
                    ),
                    r,
                )
            })
            .filter(|(d, _)| *d <= 2)
            .min_by_key(|(d, _)| *d)
            .map(|(_, r)| format!("; did you mean {:?}?", r.as_str()))
            .unwrap_or_default(),
    };
    let known: Vec<&str> = EventReason::ALL
        .iter()
        .filter(|r| !r.is_hook_machinery())
        .map(|r| r.as_str())
        .collect();
    if hint.starts_with(';') {
        Err(format!("unknown event reason {text:?}{hint}"))
    } else {
        Err(format!(
            "unknown event reason {text:?}{hint}; expected one of: {}",
            known.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_both_schemes_parse_with_default_ports_and_paths() {
        let u = parse_url("https://hooks.example.test/x?y=1").expect("parses");
        assert!(u.https);
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("hooks.example.test", 443, "/x?y=1")
        );
        let u = parse_url("http://[::1]:8080").expect("parses");
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 8080, "/")
        );
        for bad in [
            "ftp://x/",
            "http://",
            "http://u:p@host/",
            "http://h:0/",
            "http://h x/",
            "h/x",
        ] {
            assert!(parse_url(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn an_unknown_reason_gets_a_near_miss_or_the_list() {
        assert!(
            reason("Backoff")
                .unwrap_err()
                .contains("did you mean \"BackOff\"")
        );
        let e = reason("OOMKilled").unwrap_err();
        assert!(
            e.contains("termination reason") && e.contains("OOMKilling"),
            "{e}"
        );
        assert!(
            reason("Nonsense")
                .unwrap_err()
                .contains("expected one of: Started,")
        );
        assert!(
            reason("EventHookFailed")
                .unwrap_err()
                .contains("never triggers itself")
        );
    }
}
