//! Drawing `vigil top` from its [`App`] state with ratatui: a title line, the table (or the
//! describe / log text), the status line and the key help.
//!
//! Owns nothing; must not change the state (it takes `&App`) or do I/O beyond the frame.
//! Every size comes from the frame's area, so a resize only needs a redraw.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::state::{self, Admin, App, SortKey, View};

/// Lines the table or text area gets in a frame of `height` lines (title, status, help take
/// one each).
pub fn body_height(height: u16) -> usize {
    usize::from(height.saturating_sub(3))
}

/// The key help for the open view; every line fits 80 columns.
pub fn help_line(app: &App) -> String {
    match &app.view {
        View::Table => {
            let actions = match app.admin {
                Admin::No => "r/x/u: not an admin",
                Admin::Yes | Admin::Unknown => "r restart x stop u start",
            };
            format!("q quit j/k move s/S sort enter describe l logs {actions}")
        }
        View::Describe { .. } => "esc/q back  j/k/pgup/pgdn scroll  g/G top/end".to_string(),
        View::Logs { .. } => "esc/q back  j/k/pgup/pgdn scroll  G end (follow)  g top".to_string(),
    }
}

pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let [title, body, status, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(title_line(app)), title);
    match &app.view {
        View::Table => table(frame, app, body),
        View::Describe { text, scroll, .. } | View::Logs { text, scroll, .. } => {
            // Wrapped here as `App::fit` counted them, so the end is reachable.
            let shown: Vec<Line<'_>> = state::wrap(text, usize::from(body.width))
                .into_iter()
                .skip(*scroll)
                .take(usize::from(body.height))
                .map(Line::from)
                .collect();
            frame.render_widget(Paragraph::new(shown), body);
        }
    }
    let status_text = match &app.confirm {
        Some((action, target)) => format!("{} {target}? y/n", action.name()),
        None => app.status_line(),
    };
    let status_style = if app.confirm.is_some() {
        Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    };
    frame.render_widget(Paragraph::new(status_text).style(status_style), status);
    frame.render_widget(
        Paragraph::new(help_line(app)).style(Style::new().add_modifier(Modifier::DIM)),
        help,
    );
}

fn title_line(app: &App) -> Line<'static> {
    let pods = app.rows.iter().filter(|r| r.container.is_none()).count();
    let containers = app.rows.len() - pods;
    let order = if app.descending { "v" } else { "^" };
    let updated = app
        .updated
        .map(crate::control::time::rfc3339)
        .map(|t| t.get(11..19).unwrap_or_default().to_string())
        .unwrap_or_else(|| "-".to_string());
    let where_ = match &app.view {
        View::Table => String::new(),
        View::Describe { pod, .. } => format!(" | describe {pod} (esc: back)"),
        View::Logs {
            pod,
            container,
            follow,
            ..
        } => format!(
            " | logs {pod}/{container}{} (esc: back)",
            if *follow { ", following" } else { "" }
        ),
    };
    Line::from(format!(
        "vigil top | {} | {pods} pods, {containers} containers | sort {} {order} | {updated} UTC{where_}",
        app.socket,
        app.sort.title(),
    ))
    .style(Style::new().add_modifier(Modifier::BOLD))
}

fn table(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let name_width = app
        .rows
        .iter()
        .map(|r| r.name().chars().count())
        .max()
        .unwrap_or(4)
        // LAST EVENT keeps at least a quarter of a narrow screen.
        .clamp(4, usize::from(area.width / 4).clamp(12, 40));
    let titles = [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "CPU%",
        "MEMORY",
        "LAST EVENT",
    ];
    let sorted = match app.sort {
        SortKey::Name => 0,
        SortKey::Status => 2,
        SortKey::Restarts => 3,
        SortKey::Age => 4,
        SortKey::Cpu => 5,
        SortKey::Memory => 6,
    };
    let header = Row::new(titles.iter().enumerate().map(|(i, t)| {
        let cell = Cell::from(*t);
        if i == sorted {
            cell.style(Style::new().add_modifier(Modifier::UNDERLINED))
        } else {
            cell
        }
    }))
    .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = app.rows.iter().map(|r| {
        let row = Row::new(vec![
            Cell::from(r.name()),
            Cell::from(r.ready.clone()),
            Cell::from(r.status.clone()),
            Cell::from(r.restarts.to_string()),
            Cell::from(state::age_text(r.age)),
            Cell::from(state::cpu_text(r.cpu)),
            Cell::from(state::memory_text(r.memory)),
            Cell::from(r.last_event.clone()),
        ]);
        if r.container.is_none() {
            row.style(Style::new().add_modifier(Modifier::BOLD))
        } else {
            row
        }
    });
    let widths = [
        Constraint::Length(u16::try_from(name_width).unwrap_or(40)),
        Constraint::Length(5),
        Constraint::Length(18),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Fill(1),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut selection = TableState::default().with_selected(Some(app.selected));
    frame.render_stateful_widget(table, area, &mut selection);
}
