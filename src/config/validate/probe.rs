//! Probes and lifecycle hooks: exactly one action each (exec, HTTP GET, TCP socket, gRPC; a
//! hook: exec, HTTP GET or sleep), the action's own rules (ports, hosts, TLS, headers), and a
//! probe's timing and thresholds.

use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::{Checker, has_nul, span};
use crate::config::keys::{RawExec, RawGrpc, RawHook, RawHttpGet, RawProbe, RawTcpSocket, RawTls};
use crate::config::raw::StrMap;
use crate::config::schema::join;
use crate::config::spec::{Hook, HttpScheme, ProbeAction, ProbeKind, ProbeSpec, TlsSpec};

impl Checker<'_> {
    /// A lifecycle hook: exactly one of `exec`, `http_get` (checked as a probe's) or `sleep`.
    pub(super) fn hook(&mut self, raw_s: &Spanned<RawHook>, path: &str) -> Option<Hook> {
        let raw = raw_s.get_ref();
        let present: Vec<&str> = [
            raw.exec.as_ref().map(|_| "exec"),
            raw.http_get.as_ref().map(|_| "http_get"),
            raw.sleep.as_ref().map(|_| "sleep"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if present.len() != 1 {
            let message = if present.is_empty() {
                "hook needs exactly one action: exec, http_get or sleep".to_string()
            } else {
                format!(
                    "hook has more than one action ({}); keep exactly one",
                    present.join(", ")
                )
            };
            self.err(span(raw_s), path, message);
            return None;
        }
        if let Some(s) = &raw.sleep {
            let field = join(&join(path, "sleep"), "seconds");
            return match &s.get_ref().seconds {
                Some(v) => self.seconds(v, &field, false).map(Hook::Sleep),
                None => {
                    self.err(span(s), &field, "missing required key \"seconds\" in sleep");
                    None
                }
            };
        }
        let actions = Actions {
            exec: raw.exec.as_ref(),
            http_get: raw.http_get.as_ref(),
            tcp_socket: None,
            grpc: None,
        };
        self.action(actions, path).map(Hook::Action)
    }

    pub(super) fn probe(
        &mut self,
        raw_s: &Spanned<RawProbe>,
        path: &str,
        kind: ProbeKind,
    ) -> Option<ProbeSpec> {
        let raw = raw_s.get_ref();
        let mut actions: Vec<(&str, Range<usize>)> = Vec::new();
        if let Some(e) = &raw.exec {
            actions.push(("exec", span(e)));
        }
        if let Some(h) = &raw.http_get {
            actions.push(("http_get", span(h)));
        }
        if let Some(t) = &raw.tcp_socket {
            actions.push(("tcp_socket", span(t)));
        }
        if let Some(g) = &raw.grpc {
            actions.push(("grpc", span(g)));
        }
        if actions.is_empty() {
            self.err(
                span(raw_s),
                path,
                "probe needs exactly one action: exec, http_get, tcp_socket or grpc",
            );
        }
        if actions.len() > 1 {
            let names: Vec<&str> = actions.iter().map(|a| a.0).collect();
            let (second, sp) = actions[1].clone();
            self.err(
                sp,
                &join(path, second),
                format!(
                    "probe has more than one action ({}); keep exactly one",
                    names.join(", ")
                ),
            );
        }
        let actions = Actions {
            exec: raw.exec.as_ref(),
            http_get: raw.http_get.as_ref(),
            tcp_socket: raw.tcp_socket.as_ref(),
            grpc: raw.grpc.as_ref(),
        };
        let action = self.action(actions, path);
        let initial_delay = self.opt_seconds(
            &raw.initial_delay_seconds,
            &join(path, "initial_delay_seconds"),
            false,
            Duration::ZERO,
        );
        let period = self.opt_seconds(
            &raw.period_seconds,
            &join(path, "period_seconds"),
            true,
            Duration::from_secs(10),
        );
        let timeout = self.opt_seconds(
            &raw.timeout_seconds,
            &join(path, "timeout_seconds"),
            true,
            Duration::from_secs(1),
        );
        let success_threshold = match &raw.success_threshold {
            Some(v) => {
                let field = join(path, "success_threshold");
                let n = self.u32_count(v, &field, 1);
                if kind != ProbeKind::Readiness && n.is_some_and(|n| n != 1) {
                    self.err(
                        span(v),
                        &field,
                        format!(
                            "must be 1 for {} probes, got {}",
                            kind.as_str(),
                            v.get_ref()
                        ),
                    );
                }
                n.unwrap_or(1)
            }
            None => 1,
        };
        let failure_threshold = raw
            .failure_threshold
            .as_ref()
            .and_then(|v| self.u32_count(v, &join(path, "failure_threshold"), 1))
            .unwrap_or(3);
        let termination_grace = raw
            .termination_grace_period_seconds
            .as_ref()
            .and_then(|v| self.seconds(v, &join(path, "termination_grace_period_seconds"), false));
        Some(ProbeSpec {
            action: action?,
            initial_delay,
            period,
            timeout,
            success_threshold,
            failure_threshold,
            termination_grace,
        })
    }

    /// The action of a probe or a hook. Every action present is checked, so a second problem
    /// is not hidden by the first; the caller has said if there is not exactly one.
    fn action(&mut self, actions: Actions, path: &str) -> Option<ProbeAction> {
        let exec = actions.exec.and_then(|e| {
            let field = join(&join(path, "exec"), "command");
            match &e.get_ref().command {
                Some(c) => Some(ProbeAction::Exec {
                    command: self.argv(c, &field),
                }),
                None => {
                    self.err(span(e), &field, "missing required key \"command\" in exec");
                    None
                }
            }
        });
        let http = actions.http_get.map(|h| {
            let p = join(path, "http_get");
            let hr = h.get_ref();
            let port = self.port(hr.port.as_ref(), span(h), &p);
            let host = self.host(hr.host.as_ref(), &p);
            let path_s = match &hr.path {
                Some(v) if v.get_ref().starts_with('/') => v.get_ref().clone(),
                Some(v) => {
                    self.err(
                        span(v),
                        &join(&p, "path"),
                        format!("must start with '/', got {:?}", v.get_ref()),
                    );
                    String::new()
                }
                None => "/".to_string(),
            };
            let scheme = match &hr.scheme {
                None => HttpScheme::Http,
                Some(v) => match v.get_ref().as_str() {
                    "http" | "HTTP" => HttpScheme::Http,
                    "https" | "HTTPS" => HttpScheme::Https,
                    other => {
                        self.err(
                            span(v),
                            &join(&p, "scheme"),
                            format!("unsupported scheme {other:?}; use \"HTTP\" or \"HTTPS\""),
                        );
                        HttpScheme::Http
                    }
                },
            };
            let tls = self.tls(hr.tls.as_ref(), scheme, &join(&p, "tls"));
            let headers = self.headers(hr.headers.as_ref(), &join(&p, "headers"));
            ProbeAction::HttpGet {
                host,
                port: port.unwrap_or(0),
                path: path_s,
                headers,
                scheme,
                tls,
            }
        });
        let tcp = actions.tcp_socket.map(|t| {
            let p = join(path, "tcp_socket");
            let tr = t.get_ref();
            let port = self.port(tr.port.as_ref(), span(t), &p);
            let host = self.host(tr.host.as_ref(), &p);
            ProbeAction::TcpSocket {
                host,
                port: port.unwrap_or(0),
            }
        });
        let grpc = actions.grpc.map(|g| {
            let p = join(path, "grpc");
            let gr = g.get_ref();
            let port = self.port(gr.port.as_ref(), span(g), &p);
            let host = self.host(gr.host.as_ref(), &p);
            let service = match &gr.service {
                Some(v) if self.no_nul(v, &join(&p, "service")) => v.get_ref().clone(),
                _ => String::new(),
            };
            ProbeAction::Grpc {
                host,
                port: port.unwrap_or(0),
                service,
            }
        });
        exec.or(http).or(tcp).or(grpc)
    }

    pub(super) fn port(
        &mut self,
        v: Option<&Spanned<i64>>,
        table: Range<usize>,
        path: &str,
    ) -> Option<u16> {
        match v {
            Some(v) => self.int(v, &join(path, "port"), 1, 65535).map(|p| p as u16),
            None => {
                self.err(table, &join(path, "port"), "missing required key \"port\"");
                None
            }
        }
    }

    /// `http_get.tls`: only for HTTPS; `ca_file` absolute; `server_name` a DNS name or an
    /// IP address (the forms rustls accepts as a server name).
    pub(super) fn tls(
        &mut self,
        raw: Option<&Spanned<RawTls>>,
        scheme: HttpScheme,
        path: &str,
    ) -> TlsSpec {
        let Some(raw) = raw else {
            return TlsSpec::default();
        };
        if scheme != HttpScheme::Https {
            self.err(
                span(raw),
                path,
                "tls applies to scheme = \"HTTPS\" only; remove it or set the scheme",
            );
        }
        let r = raw.get_ref();
        let ca_file = r
            .ca_file
            .as_ref()
            .and_then(|v| self.abs_path(v, &join(path, "ca_file")));
        let server_name = r.server_name.as_ref().and_then(|v| {
            let name = v.get_ref().trim();
            if rustls::pki_types::ServerName::try_from(name).is_err() {
                self.err(
                    span(v),
                    &join(path, "server_name"),
                    format!("must be a DNS name or an IP address, got {:?}", v.get_ref()),
                );
                return None;
            }
            Some(name.to_string())
        });
        TlsSpec {
            ca_file,
            server_name,
        }
    }

    pub(super) fn host(&mut self, v: Option<&Spanned<String>>, path: &str) -> String {
        match v {
            Some(h) if h.get_ref().trim().is_empty() || has_nul(h.get_ref()) => {
                self.err(
                    span(h),
                    &join(path, "host"),
                    "must be a non-empty host name or address",
                );
                String::new()
            }
            Some(h) => h.get_ref().trim().to_string(),
            None => "127.0.0.1".to_string(),
        }
    }

    /// Header names are RFC 9110 tokens; values must not smuggle line breaks.
    pub(super) fn headers(&mut self, raw: Option<&StrMap>, path: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v) in raw.into_iter().flatten() {
            let field = join(path, k.get_ref());
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if k.get_ref().is_empty() || !k.get_ref().chars().all(token) {
                self.err(
                    span(k),
                    &field,
                    format!("invalid header name {:?}", k.get_ref()),
                );
            } else if v.get_ref().contains(['\r', '\n', '\0']) {
                self.err(
                    span(v),
                    &field,
                    "header value must not contain line breaks or NUL",
                );
            } else {
                out.push((k.get_ref().clone(), v.get_ref().clone()));
            }
        }
        out
    }
}

/// The action tables of a probe, or of a hook (which has no `tcp_socket` or `grpc`).
struct Actions<'r> {
    exec: Option<&'r Spanned<RawExec>>,
    http_get: Option<&'r Spanned<RawHttpGet>>,
    tcp_socket: Option<&'r Spanned<RawTcpSocket>>,
    grpc: Option<&'r Spanned<RawGrpc>>,
}
