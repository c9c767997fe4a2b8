//! What `vigil top` shows and how keys change it, without a terminal: the rows built from the
//! last `status` and `events` replies, CPU % from two polls, the sort order, the selection, the
//! open view (table, describe, logs), a pending confirmation, and the status line.
//!
//! Owns only that state. Must not do I/O: [`App::on_key`] returns an [`Effect`] for the caller
//! (`top::run`) to carry out against the socket, and the caller feeds the answers back.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use crate::control::protocol::RequestCmd;
use crate::control::text;
use crate::control::wire::{self, State};
use crate::format;

/// A key, as far as `top` cares (the terminal layer maps crossterm's events to these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Enter,
    Esc,
    /// Ctrl-C: quit from anywhere.
    Interrupt,
}

/// The column rows are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Name,
    Status,
    Restarts,
    Age,
    Cpu,
    Memory,
}

impl SortKey {
    const ALL: [SortKey; 6] = [
        SortKey::Name,
        SortKey::Status,
        SortKey::Restarts,
        SortKey::Age,
        SortKey::Cpu,
        SortKey::Memory,
    ];

    pub fn title(self) -> &'static str {
        match self {
            SortKey::Name => "NAME",
            SortKey::Status => "STATUS",
            SortKey::Restarts => "RESTARTS",
            SortKey::Age => "AGE",
            SortKey::Cpu => "CPU%",
            SortKey::Memory => "MEMORY",
        }
    }

    fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }

    /// Name and status read best A→Z; figures best largest first.
    fn descending_by_default(self) -> bool {
        matches!(
            self,
            SortKey::Restarts | SortKey::Cpu | SortKey::Memory | SortKey::Age
        )
    }
}

/// A start, stop or restart asked for with its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start,
    Stop,
    Restart,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Restart => "restart",
        }
    }

    fn key(self) -> char {
        match self {
            Action::Start => 'u',
            Action::Stop => 'x',
            Action::Restart => 'r',
        }
    }
}

/// What the caller must do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    None,
    /// Draw again (the state changed).
    Redraw,
    Quit,
    /// Fetch the selected pod's `describe` now (the view was opened).
    Describe,
    /// Fetch the selected container's log now (the view was opened).
    Logs,
    /// Send this request (confirmed by the user); report its answer with [`App::set_message`].
    Request(RequestCmd),
}

/// The open view.
#[derive(Debug, Clone, PartialEq)]
pub enum View {
    Table,
    /// `describe POD` text, scrolled by `scroll` lines.
    Describe {
        pod: String,
        text: String,
        scroll: usize,
    },
    /// A container's log; `follow`: stays at the end as new output comes.
    Logs {
        pod: String,
        container: String,
        text: String,
        scroll: usize,
        follow: bool,
    },
}

/// Whether the user may start, stop or restart (the server's `version` answer says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admin {
    Yes,
    No,
    /// Not told (an older server): actions are offered, the server decides.
    Unknown,
}

/// One line of the table: a pod, or one of its containers.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub pod: String,
    /// `None`: the pod's own row.
    pub container: Option<String>,
    pub ready: String,
    pub status: String,
    pub restarts: u64,
    /// Since the pod was created, or the container's run started.
    pub age: Option<Duration>,
    /// Percent of one CPU since the previous poll; `None` before two polls or without figures.
    pub cpu: Option<f64>,
    pub memory: Option<u64>,
    /// `AGE Reason: message` of the newest event about it (age first: a narrow column still
    /// shows how old it is).
    pub last_event: String,
    /// A container's last sd_notify `STATUS=` line (`notify = true`), escaped.
    pub notify_status: Option<String>,
}

impl Row {
    pub fn name(&self) -> String {
        match &self.container {
            Some(c) => format!("  {c}"),
            None => self.pod.clone(),
        }
    }

    pub fn target(&self) -> String {
        match &self.container {
            Some(c) => format!("{}/{c}", self.pod),
            None => self.pod.clone(),
        }
    }
}

/// One CPU figure: cumulative usage at a poll, for the next poll's difference.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    pid: Option<u32>,
    usec: u64,
    at: Instant,
}

/// The whole state of `vigil top`.
#[derive(Debug)]
pub struct App {
    pub socket: String,
    pub rows: Vec<Row>,
    pub selected: usize,
    pub sort: SortKey,
    pub descending: bool,
    pub view: View,
    pub admin: Admin,
    /// An action waiting for `y`.
    pub confirm: Option<(Action, String)>,
    /// The status line: the answer to the last action, or why the last poll failed.
    pub message: String,
    pub updated: Option<SystemTime>,
    /// The memory note ([`App::memory_note`]) was shown once already.
    memory_noted: bool,
    pods: Vec<wire::Pod>,
    events: Vec<wire::Event>,
    cpu: HashMap<String, CpuSample>,
    cpu_percent: HashMap<String, f64>,
}

impl App {
    pub fn new(socket: String) -> App {
        App {
            socket,
            rows: Vec::new(),
            selected: 0,
            sort: SortKey::Name,
            descending: false,
            view: View::Table,
            admin: Admin::Unknown,
            confirm: None,
            message: String::new(),
            updated: None,
            memory_noted: false,
            pods: Vec::new(),
            events: Vec::new(),
            cpu: HashMap::new(),
            cpu_percent: HashMap::new(),
        }
    }

    /// A poll's answers: `now` is the monotonic time of the poll (CPU %), `wall` the clock
    /// (ages). The selection stays on the same pod/container when it still exists.
    pub fn update(
        &mut self,
        status: wire::StatusReply,
        events: Vec<wire::Event>,
        now: Instant,
        wall: SystemTime,
    ) {
        let keep = self.selected_row().map(|r| r.target());
        self.sample_cpu(&status.pods, now);
        self.pods = status.pods;
        self.events = events;
        self.updated = Some(wall);
        self.rebuild(wall);
        if !self.memory_noted
            && let Some(note) = self.memory_note()
        {
            self.memory_noted = true;
            if self.message.is_empty() {
                self.message = note.to_string();
            }
        }
        if let Some(target) = keep
            && let Some(i) = self.rows.iter().position(|r| r.target() == target)
        {
            self.selected = i;
        }
        self.clamp();
    }

    /// Records each running container's CPU usage; its percent is the difference to the
    /// previous sample of the same process over the time between them.
    fn sample_cpu(&mut self, pods: &[wire::Pod], now: Instant) {
        let mut next = HashMap::new();
        self.cpu_percent.clear();
        for p in pods {
            for c in p.init_containers.iter().chain(&p.containers) {
                let (Some(usec), Some(pid)) = (c.resources.cpu_usage_usec, c.pid) else {
                    continue;
                };
                let key = format!("{}/{}", p.name, c.name);
                let sample = CpuSample {
                    pid: Some(pid),
                    usec,
                    at: now,
                };
                if let Some(prev) = self.cpu.get(&key)
                    && prev.pid == sample.pid
                    && now > prev.at
                    && usec >= prev.usec
                {
                    let used = Duration::from_micros(usec - prev.usec).as_secs_f64();
                    let pct = 100.0 * used / now.duration_since(prev.at).as_secs_f64();
                    self.cpu_percent.insert(key.clone(), pct);
                }
                next.insert(key, sample);
            }
        }
        self.cpu = next;
    }

    fn rebuild(&mut self, wall: SystemTime) {
        let mut groups: Vec<(Row, Vec<Row>)> = Vec::new();
        for p in &self.pods {
            let mut children = Vec::new();
            for c in p.init_containers.iter().chain(&p.containers) {
                children.push(self.container_row(p, c, wall));
            }
            let columns = text::pod_columns(p);
            let sum_cpu = children.iter().filter_map(|r| r.cpu).reduce(|a, b| a + b);
            let sum_mem = children
                .iter()
                .filter_map(|r| r.memory)
                .reduce(|a, b| a + b);
            let row = Row {
                pod: p.name.clone(),
                container: None,
                ready: format!("{}/{}", columns.ready, columns.total),
                status: columns.status,
                restarts: columns.restarts,
                age: wall.duration_since(p.created_at.0).ok(),
                cpu: sum_cpu,
                memory: sum_mem,
                last_event: self.last_event(&p.name, true, wall),
                notify_status: None,
            };
            groups.push((row, children));
        }
        let (sort, desc) = (self.sort, self.descending);
        groups.sort_by(|a, b| compare(&a.0, &b.0, sort, desc));
        self.rows.clear();
        for (pod, mut children) in groups {
            // Within a pod, containers keep their config order unless sorted by a figure.
            if sort != SortKey::Name {
                children.sort_by(|a, b| compare(a, b, sort, desc));
            }
            self.rows.push(pod);
            self.rows.extend(children);
        }
    }

    fn container_row(&self, p: &wire::Pod, c: &wire::Container, wall: SystemTime) -> Row {
        let target = format!("{}/{}", p.name, c.name);
        let (status, age) = match &c.state {
            State::Waiting(w) => (w.reason.to_string(), None),
            State::Running(r) if r.terminating.is_some() => (
                "Terminating".to_string(),
                wall.duration_since(r.started_at.0).ok(),
            ),
            State::Running(r) => (
                "Running".to_string(),
                wall.duration_since(r.started_at.0).ok(),
            ),
            State::Terminated(t) => (t.reason.as_str().to_string(), None),
        };
        Row {
            pod: p.name.clone(),
            container: Some(c.name.clone()),
            ready: if c.ready { "1/1" } else { "0/1" }.to_string(),
            status,
            restarts: u64::from(c.restart_count),
            age,
            cpu: self.cpu_percent.get(&target).copied(),
            memory: c.resources.memory_current,
            last_event: self.last_event(&target, false, wall),
            notify_status: c
                .notify
                .as_ref()
                .and_then(|n| n.status.as_deref())
                .map(format::cell),
        }
    }

    /// The newest event about `object` (a pod: also its containers'), with how long ago it
    /// was last seen (kubectl's `LAST SEEN`).
    fn last_event(&self, object: &str, pod: bool, wall: SystemTime) -> String {
        let prefix = format!("{object}/");
        self.events
            .iter()
            .rev()
            .find(|e| e.object == object || (pod && e.object.starts_with(&prefix)))
            .map(|e| {
                let age = wall.duration_since(e.last_timestamp.0).unwrap_or_default();
                format!(
                    "{} {}: {}",
                    format::human_duration(age),
                    e.reason,
                    format::cell(&e.message)
                )
            })
            .unwrap_or_default()
    }

    /// Why the MEMORY column is blank, when it is for every running container: vigil reads no
    /// memory figures (docs/hosts.md). `None` while any running container has them, or none
    /// runs.
    pub fn memory_note(&self) -> Option<&'static str> {
        let mut running = self
            .pods
            .iter()
            .flat_map(|p| p.init_containers.iter().chain(&p.containers))
            .filter(|c| matches!(c.state, State::Running(_)))
            .peekable();
        running.peek()?;
        if running.any(|c| c.resources.memory_current.is_some()) {
            return None;
        }
        Some(
            "MEMORY is blank: vigil has no memory figures (no memory controller in its cgroup2, \
             or no cgroups; see docs/hosts.md)",
        )
    }

    /// The status line when no action or poll has anything to say: the selected row's newest
    /// event in full (the LAST EVENT column may be cut at 80 columns), after a container's
    /// sd_notify `STATUS=` line when it has one.
    pub fn status_line(&self) -> String {
        if !self.message.is_empty() || self.view != View::Table {
            return self.message.clone();
        }
        match self.selected_row() {
            Some(r) => match (&r.notify_status, r.last_event.is_empty()) {
                (Some(st), true) => format!("{}: STATUS={st}", r.target()),
                (Some(st), false) => format!("{}: STATUS={st} · {}", r.target(), r.last_event),
                (None, false) => format!("{}: {}", r.target(), r.last_event),
                (None, true) => String::new(),
            },
            None => String::new(),
        }
    }

    fn clamp(&mut self) {
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    fn select(&mut self, row: usize) {
        self.selected = row;
        self.message.clear();
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.rows.get(self.selected)
    }

    /// The answer to an action, or a failed poll (`""` clears it).
    pub fn set_message(&mut self, message: impl Into<String>) {
        self.message = message.into();
    }

    /// The describe view's text, when it is open on `pod`.
    pub fn set_describe(&mut self, for_pod: &str, new: String) {
        if let View::Describe { pod, text, .. } = &mut self.view
            && pod == for_pod
        {
            *text = new;
        }
    }

    /// The log view's text, when it is open on `pod/container`; following keeps it at the end.
    pub fn set_log(&mut self, for_pod: &str, for_container: &str, new: String) {
        if let View::Logs {
            pod,
            container,
            text,
            ..
        } = &mut self.view
            && pod == for_pod
            && container == for_container
        {
            *text = new;
        }
    }

    /// The (pod, container) the open log view shows.
    pub fn log_target(&self) -> Option<(String, String)> {
        match &self.view {
            View::Logs { pod, container, .. } => Some((pod.clone(), container.clone())),
            _ => None,
        }
    }

    /// The pod the open describe view shows.
    pub fn describe_target(&self) -> Option<String> {
        match &self.view {
            View::Describe { pod, .. } => Some(pod.clone()),
            _ => None,
        }
    }

    /// Keeps the describe or log view's scroll within its text for a view `height` lines
    /// tall and `width` columns wide (long lines wrap: [`wrap`]); a following log view stays
    /// at its end. Called before each draw.
    pub fn fit(&mut self, height: usize, width: usize) {
        let (text, scroll, follow) = match &mut self.view {
            View::Table => return,
            View::Describe { text, scroll, .. } => (text, scroll, false),
            View::Logs {
                text,
                scroll,
                follow,
                ..
            } => (text, scroll, *follow),
        };
        let end = wrap(text, width).len().saturating_sub(height);
        *scroll = if follow { end } else { (*scroll).min(end) };
    }

    /// Whether start/stop/restart are offered.
    pub fn actions_enabled(&self) -> bool {
        self.admin != Admin::No
    }

    /// Handles one key; `page` is how many rows (or lines) a page holds now.
    pub fn on_key(&mut self, key: Key, page: usize) -> Effect {
        if key == Key::Interrupt {
            return Effect::Quit;
        }
        if let Some((action, target)) = self.confirm.take() {
            return match key {
                Key::Char('y') | Key::Char('Y') => {
                    self.message = format!("{} {target}: sent", action.name());
                    Effect::Request(request(action, &target))
                }
                _ => {
                    self.message = format!("{} {target}: cancelled", action.name());
                    Effect::Redraw
                }
            };
        }
        match &mut self.view {
            View::Table => self.table_key(key, page.max(1)),
            View::Describe { scroll, .. } => {
                scroll_key(key, scroll, page.max(1), &mut None).unwrap_or_else(|| self.close(key))
            }
            View::Logs { scroll, follow, .. } => {
                let mut f = Some(follow);
                scroll_key(key, scroll, page.max(1), &mut f).unwrap_or_else(|| self.close(key))
            }
        }
    }

    /// A key the describe or log view does not scroll with: Esc or q goes back to the table.
    fn close(&mut self, key: Key) -> Effect {
        match key {
            Key::Esc | Key::Char('q') => {
                self.view = View::Table;
                Effect::Redraw
            }
            _ => Effect::None,
        }
    }

    fn table_key(&mut self, key: Key, page: usize) -> Effect {
        let last = self.rows.len().saturating_sub(1);
        match key {
            Key::Char('q') => return Effect::Quit,
            // Moving the selection clears the status line for the selected row's last event.
            Key::Up | Key::Char('k') => self.select(self.selected.saturating_sub(1)),
            Key::Down | Key::Char('j') => self.select((self.selected + 1).min(last)),
            Key::PageUp => self.select(self.selected.saturating_sub(page)),
            Key::PageDown => self.select((self.selected + page).min(last)),
            Key::Home | Key::Char('g') => self.select(0),
            Key::End | Key::Char('G') => self.select(last),
            Key::Char('s') => {
                self.sort = self.sort.next();
                self.descending = self.sort.descending_by_default();
                self.resort();
            }
            Key::Char('S') => {
                self.descending = !self.descending;
                self.resort();
            }
            Key::Enter | Key::Char('d') => {
                let Some(row) = self.selected_row() else {
                    return Effect::None;
                };
                self.view = View::Describe {
                    pod: row.pod.clone(),
                    text: String::new(),
                    scroll: 0,
                };
                return Effect::Describe;
            }
            Key::Char('l') => {
                let Some(row) = self.selected_row() else {
                    return Effect::None;
                };
                let container = match &row.container {
                    Some(c) => c.clone(),
                    None => match self.first_container(&row.pod) {
                        Some(c) => c,
                        None => return Effect::None,
                    },
                };
                self.view = View::Logs {
                    pod: row.pod.clone(),
                    container,
                    text: String::new(),
                    scroll: 0,
                    follow: true,
                };
                return Effect::Logs;
            }
            Key::Char(c) => {
                let Some(action) = [Action::Start, Action::Stop, Action::Restart]
                    .into_iter()
                    .find(|a| a.key() == c)
                else {
                    return Effect::None;
                };
                let Some(target) = self.selected_row().map(Row::target) else {
                    return Effect::None;
                };
                if !self.actions_enabled() {
                    self.message = format!(
                        "{} is disabled: vigil says you are not an admin (root, vigil's uid, admin_uids/admin_gids)",
                        action.name()
                    );
                } else {
                    self.confirm = Some((action, target));
                }
            }
            _ => return Effect::None,
        }
        Effect::Redraw
    }

    fn first_container(&self, pod: &str) -> Option<String> {
        self.pods
            .iter()
            .find(|p| p.name == pod)
            .and_then(|p| p.containers.first())
            .map(|c| c.name.clone())
    }

    fn resort(&mut self) {
        let keep = self.selected_row().map(|r| r.target());
        self.rebuild(self.updated.unwrap_or_else(SystemTime::now));
        if let Some(target) = keep
            && let Some(i) = self.rows.iter().position(|r| r.target() == target)
        {
            self.selected = i;
        }
        self.clamp();
    }
}

/// Scrolling keys of the describe and log views (`follow`: the log view's, turned off by
/// scrolling up and on by End); `None` for any other key.
fn scroll_key(
    key: Key,
    scroll: &mut usize,
    page: usize,
    follow: &mut Option<&mut bool>,
) -> Option<Effect> {
    let mut set_follow = |on: bool| {
        if let Some(f) = follow.as_deref_mut() {
            *f = on;
        }
    };
    match key {
        Key::Up | Key::Char('k') => {
            *scroll = scroll.saturating_sub(1);
            set_follow(false);
        }
        Key::Down | Key::Char('j') => *scroll += 1,
        Key::PageUp => {
            *scroll = scroll.saturating_sub(page);
            set_follow(false);
        }
        Key::PageDown => *scroll += page,
        Key::Home | Key::Char('g') => {
            *scroll = 0;
            set_follow(false);
        }
        Key::End | Key::Char('G') => {
            *scroll = usize::MAX;
            set_follow(true);
        }
        _ => return None,
    }
    Some(Effect::Redraw)
}

fn request(action: Action, target: &str) -> RequestCmd {
    let (pod, container) = match target.split_once('/') {
        Some((p, c)) => (p.to_string(), Some(c.to_string())),
        None => (target.to_string(), None),
    };
    match action {
        Action::Start => RequestCmd::Start {
            pod,
            container,
            ignore_dependencies: false,
        },
        Action::Stop => RequestCmd::Stop { pod, container },
        Action::Restart => RequestCmd::Restart {
            pod,
            container,
            rolling: false,
            max_unavailable: None,
        },
    }
}

/// Orders two rows by `key`; ties (and `Name`) by name, so the order is stable between polls.
fn compare(a: &Row, b: &Row, key: SortKey, descending: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let by = match key {
        SortKey::Name => Ordering::Equal,
        SortKey::Status => a.status.cmp(&b.status),
        SortKey::Restarts => a.restarts.cmp(&b.restarts),
        SortKey::Age => a.age.cmp(&b.age),
        SortKey::Cpu => a.cpu.unwrap_or(-1.0).total_cmp(&b.cpu.unwrap_or(-1.0)),
        SortKey::Memory => a.memory.cmp(&b.memory),
    };
    let by = if key == SortKey::Name {
        a.name().cmp(&b.name())
    } else {
        by
    };
    let by = if descending { by.reverse() } else { by };
    by.then_with(|| a.name().cmp(&b.name()))
}

/// `12.5`, `0.0`; blank without a figure.
pub fn cpu_text(cpu: Option<f64>) -> String {
    cpu.map(|c| format!("{c:.1}")).unwrap_or_default()
}

pub fn memory_text(memory: Option<u64>) -> String {
    memory.map(format::human_bytes).unwrap_or_default()
}

/// `text`'s lines cut into pieces of at most `width` characters, so that a long log or
/// describe line wraps instead of running off the screen, and scrolling counts the lines the
/// screen shows. A character counts one column (wide characters may overrun by one).
pub fn wrap(text: &str, width: usize) -> Vec<&str> {
    let width = width.max(1);
    let mut out = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        loop {
            match rest.char_indices().nth(width) {
                Some((cut, _)) => {
                    out.push(&rest[..cut]);
                    rest = &rest[cut..];
                }
                None => {
                    out.push(rest);
                    break;
                }
            }
        }
    }
    out
}

pub fn age_text(age: Option<Duration>) -> String {
    age.map(format::human_duration).unwrap_or_default()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
