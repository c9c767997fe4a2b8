//! `vigil top`'s state without a terminal: rows from replies, CPU % from two polls, sorting,
//! selection, views, and the admin gate on actions.

use super::*;
use crate::control::wire::{Pod, Running, StatusReply, Terminated, Timestamp, Waiting};

type C<'a> = (&'a str, bool, u32, Option<u32>, Option<u64>, Option<u64>);

/// The renderer's sample pod (so every wire field is filled as the server fills it), its
/// containers replaced by `containers` (name, ready, restarts, pid, CPU usec, memory), each
/// running since 00:00:00, the pod defined then.
fn pod(name: &str, containers: &[C<'_>]) -> Pod {
    use crate::control::render::{self, Secrets, fixtures::*};
    let mono = Instant::now();
    let reply = render::status(
        &[sample_pod(mono)],
        &observed(),
        &clock(mono),
        Secrets::Shown,
    );
    let mut p = reply.pods[0].clone();
    let template = p.containers[0].clone();
    let t0 = Timestamp(crate::control::time::parse_rfc3339("2026-01-01T00:00:00.000Z").unwrap());
    p.name = name.to_string();
    p.created_at = t0;
    p.init_containers.clear();
    p.containers = containers
        .iter()
        .map(|(n, ready, restarts, pid, cpu, mem)| {
            let mut c = template.clone();
            c.name = n.to_string();
            c.ready = *ready;
            c.restart_count = *restarts;
            c.pid = *pid;
            c.state = State::Running(Running {
                started_at: t0,
                terminating: None,
            });
            c.resources.cpu_usage_usec = *cpu;
            c.resources.memory_current = *mem;
            c
        })
        .collect();
    p
}

fn event(object: &str, reason: &str, message: &str) -> wire::Event {
    let t = Timestamp(wall());
    wire::Event {
        seq: 1,
        kind: crate::core::EventType::Normal,
        reason: reason.into(),
        object: object.into(),
        message: message.into(),
        count: 1,
        first_timestamp: t,
        last_timestamp: t,
    }
}

fn wall() -> SystemTime {
    crate::control::time::parse_rfc3339("2026-01-01T00:01:00.000Z").unwrap()
}

fn names(app: &App) -> Vec<String> {
    app.rows.iter().map(Row::target).collect()
}

fn two_pods(cpu_a: u64, cpu_b: u64) -> StatusReply {
    StatusReply {
        pods: vec![
            pod(
                "web",
                &[
                    ("app", true, 2, Some(10), Some(cpu_a), Some(50 << 20)),
                    ("side", false, 0, Some(11), Some(0), Some(1 << 20)),
                ],
            ),
            pod(
                "db",
                &[("pg", true, 0, Some(12), Some(cpu_b), Some(200 << 20))],
            ),
        ],
    }
}

#[test]
fn rows_are_pods_then_their_containers_with_ready_restarts_age_memory_and_last_event() {
    let mut app = App::new("s".into());
    let events = vec![
        event("web/app", "Started", "started"),
        event("web/side", "Unhealthy", "readiness probe failed"),
    ];
    app.update(two_pods(0, 0), events, Instant::now(), wall());
    assert_eq!(names(&app), ["db", "db/pg", "web", "web/app", "web/side"]);
    let web = &app.rows[2];
    assert_eq!(web.ready, "1/2");
    assert_eq!(web.restarts, 2);
    assert_eq!(web.memory, Some(51 << 20));
    assert_eq!(web.age, Some(Duration::from_secs(60)));
    assert_eq!(
        web.last_event, "0s Unhealthy: readiness probe failed",
        "newest of its containers"
    );
    let app_row = &app.rows[3];
    assert_eq!(
        (app_row.ready.as_str(), app_row.status.as_str()),
        ("1/1", "Running")
    );
    assert_eq!(app_row.last_event, "0s Started: started");
    assert_eq!(app_row.cpu, None, "no CPU % before a second poll");
    assert_eq!(memory_text(app_row.memory), "50Mi");
}

#[test]
fn cpu_percent_is_the_usage_difference_over_the_time_between_polls_and_resets_with_the_pid() {
    let mut app = App::new("s".into());
    let t0 = Instant::now();
    app.update(two_pods(1_000_000, 0), vec![], t0, wall());
    // 0.5 s of CPU in 2 s: 25 %; db/pg used 3 s in 2 s: 150 % (two CPUs busy).
    app.update(
        two_pods(1_500_000, 3_000_000),
        vec![],
        t0 + Duration::from_secs(2),
        wall(),
    );
    let cpu = |app: &App, t: &str| app.rows.iter().find(|r| r.target() == t).unwrap().cpu;
    assert_eq!(cpu(&app, "web/app"), Some(25.0));
    assert_eq!(cpu(&app, "db/pg"), Some(150.0));
    assert_eq!(cpu(&app, "web"), Some(25.0), "a pod sums its containers");
    assert_eq!(cpu_text(cpu(&app, "web/app")), "25.0");
    // A restart: new pid, usage from zero — no difference across runs.
    let mut restarted = two_pods(100, 3_000_000);
    restarted.pods[0].containers[0].pid = Some(99);
    app.update(restarted, vec![], t0 + Duration::from_secs(3), wall());
    assert_eq!(cpu(&app, "web/app"), None);
}

#[test]
fn s_cycles_the_sort_column_and_capital_s_reverses_it_keeping_the_selection() {
    let mut app = App::new("s".into());
    let t0 = Instant::now();
    app.update(two_pods(0, 0), vec![], t0, wall());
    app.update(
        two_pods(100_000, 900_000),
        vec![],
        t0 + Duration::from_secs(1),
        wall(),
    );
    app.selected = 3; // web/app
    assert_eq!(app.selected_row().unwrap().target(), "web/app");
    let sort_by = |app: &mut App, key: SortKey| {
        while app.sort != key {
            assert_eq!(app.on_key(Key::Char('s'), 10), Effect::Redraw);
        }
    };
    sort_by(&mut app, SortKey::Restarts);
    assert!(app.descending, "figures sort largest first");
    assert_eq!(names(&app), ["web", "web/app", "web/side", "db", "db/pg"]);
    assert_eq!(
        app.selected_row().unwrap().target(),
        "web/app",
        "selection follows the row"
    );
    sort_by(&mut app, SortKey::Cpu);
    assert_eq!(names(&app), ["db", "db/pg", "web", "web/app", "web/side"]);
    app.on_key(Key::Char('S'), 10);
    assert!(!app.descending);
    assert_eq!(names(&app), ["web", "web/side", "web/app", "db", "db/pg"]);
    sort_by(&mut app, SortKey::Memory);
    assert_eq!(names(&app)[0], "db");
    sort_by(&mut app, SortKey::Name);
    assert_eq!(names(&app), ["db", "db/pg", "web", "web/app", "web/side"]);
}

#[test]
fn movement_stays_within_the_rows_and_a_poll_keeps_the_selected_row() {
    let mut app = App::new("s".into());
    app.update(two_pods(0, 0), vec![], Instant::now(), wall());
    app.on_key(Key::Up, 10);
    assert_eq!(app.selected, 0);
    app.on_key(Key::End, 10);
    assert_eq!(app.selected, 4);
    app.on_key(Key::Down, 10);
    assert_eq!(app.selected, 4);
    app.on_key(Key::PageUp, 3);
    assert_eq!(app.selected, 1);
    app.on_key(Key::Char('j'), 3);
    assert_eq!(app.selected_row().unwrap().target(), "web");
    // The db pod goes away: the selection stays on web.
    let mut fewer = two_pods(0, 0);
    fewer.pods.pop();
    app.update(fewer, vec![], Instant::now(), wall());
    assert_eq!(app.selected_row().unwrap().target(), "web");
    // Everything goes: no row, no panic, keys do nothing harmful.
    app.update(StatusReply { pods: vec![] }, vec![], Instant::now(), wall());
    assert_eq!(app.selected, 0);
    assert_eq!(app.on_key(Key::Enter, 3), Effect::None);
    assert_eq!(app.on_key(Key::Char('r'), 3), Effect::None);
    assert!(app.confirm.is_none());
}

#[test]
fn an_action_asks_first_and_sends_only_after_y() {
    let mut app = App::new("s".into());
    app.admin = Admin::Yes;
    app.update(two_pods(0, 0), vec![], Instant::now(), wall());
    app.selected = 3;
    assert_eq!(app.on_key(Key::Char('r'), 10), Effect::Redraw);
    assert_eq!(app.confirm, Some((Action::Restart, "web/app".to_string())));
    assert_eq!(
        app.on_key(Key::Char('y'), 10),
        Effect::Request(RequestCmd::Restart {
            pod: "web".into(),
            container: Some("app".into()),
            rolling: false,
            max_unavailable: None,
        })
    );
    assert!(app.confirm.is_none());
    // Any other key cancels.
    app.on_key(Key::Char('x'), 10);
    assert_eq!(app.on_key(Key::Char('n'), 10), Effect::Redraw);
    assert!(app.message.contains("cancelled"), "{}", app.message);
    // On a pod row the action is the pod's.
    app.selected = 2;
    app.on_key(Key::Char('u'), 10);
    assert_eq!(
        app.on_key(Key::Char('y'), 10),
        Effect::Request(RequestCmd::Start {
            pod: "web".into(),
            container: None,
            ignore_dependencies: false,
        })
    );
}

#[test]
fn a_user_who_is_not_an_admin_gets_no_action_and_is_told_why() {
    let mut app = App::new("s".into());
    app.admin = Admin::No;
    app.update(two_pods(0, 0), vec![], Instant::now(), wall());
    for k in ['r', 'x', 'u'] {
        assert_eq!(app.on_key(Key::Char(k), 10), Effect::Redraw);
        assert!(app.confirm.is_none());
        assert!(app.message.contains("not an admin"), "{}", app.message);
        assert_eq!(
            app.on_key(Key::Char('y'), 10),
            Effect::None,
            "y alone does nothing"
        );
    }
}

#[test]
fn describe_and_logs_open_on_the_selection_scroll_and_close_with_esc() {
    let mut app = App::new("s".into());
    app.update(two_pods(0, 0), vec![], Instant::now(), wall());
    app.selected = 2; // the web pod: logs of its first container
    assert_eq!(app.on_key(Key::Char('l'), 10), Effect::Logs);
    assert_eq!(app.log_target(), Some(("web".into(), "app".into())));
    let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
    app.set_log("web", "app", text.clone());
    app.set_log("web", "side", "not shown".into());
    app.fit(10, 80);
    let View::Logs {
        scroll,
        follow,
        text: shown,
        ..
    } = &app.view
    else {
        panic!()
    };
    assert_eq!((*scroll, *follow), (90, true), "following: at the end");
    assert_eq!(shown, &text);
    app.on_key(Key::PageUp, 10);
    app.fit(10, 80);
    let View::Logs { scroll, follow, .. } = &app.view else {
        panic!()
    };
    assert_eq!(
        (*scroll, *follow),
        (80, false),
        "scrolling up stops following"
    );
    app.on_key(Key::Char('G'), 10);
    app.fit(10, 80);
    let View::Logs { scroll, follow, .. } = &app.view else {
        panic!()
    };
    assert_eq!((*scroll, *follow), (90, true));
    assert_eq!(app.on_key(Key::Esc, 10), Effect::Redraw);
    assert_eq!(app.view, View::Table);
    assert_eq!(
        app.on_key(Key::Esc, 10),
        Effect::None,
        "Esc in the table does not quit"
    );
    // q in a view goes back; q in the table quits.
    app.selected = 3;
    assert_eq!(app.on_key(Key::Enter, 10), Effect::Describe);
    assert_eq!(app.describe_target(), Some("web".into()));
    app.set_describe("web", "Name: web\n".into());
    app.on_key(Key::Down, 10);
    app.fit(10, 80);
    let View::Describe { scroll, .. } = &app.view else {
        panic!()
    };
    assert_eq!(*scroll, 0, "a short text does not scroll");
    assert_eq!(app.on_key(Key::Char('q'), 10), Effect::Redraw);
    assert_eq!(app.on_key(Key::Char('q'), 10), Effect::Quit);
    assert_eq!(app.on_key(Key::Interrupt, 10), Effect::Quit);
}

#[test]
fn waiting_and_terminated_containers_show_their_reason_and_no_age() {
    let mut app = App::new("s".into());
    let mut reply = two_pods(0, 0);
    reply.pods[0].containers[0].state = State::Waiting(Waiting {
        reason: crate::core::WaitingReason::CrashLoopBackOff,
        message: "back-off 10s".into(),
    });
    let t = Timestamp(wall());
    reply.pods[0].containers[1].state = State::Terminated(Terminated {
        exit_code: 1,
        signal: None,
        reason: crate::core::TerminationReason::Error,
        message: String::new(),
        started_at: Some(t),
        finished_at: t,
    });
    app.update(reply, vec![], Instant::now(), wall());
    let row = |t: &str| app.rows.iter().find(|r| r.target() == t).unwrap().clone();
    assert_eq!(row("web/app").status, "CrashLoopBackOff");
    assert_eq!(row("web/app").age, None);
    assert_eq!(row("web/side").status, "Error");
}

#[test]
fn the_last_event_says_how_long_ago_it_was_seen_and_the_status_line_shows_it_in_full() {
    let mut app = App::new("s".into());
    let mut old = event(
        "web/app",
        "BackOff",
        &"back-off restarting failed container ".repeat(4),
    );
    old.last_timestamp = Timestamp(wall() - Duration::from_secs(75));
    app.update(two_pods(0, 0), vec![old], Instant::now(), wall());
    let i = app
        .rows
        .iter()
        .position(|r| r.target() == "web/app")
        .unwrap();
    assert!(
        app.rows[i].last_event.starts_with("75s BackOff: back-off"),
        "{}",
        app.rows[i].last_event
    );
    app.set_message("restart web: sent");
    app.selected = i - 1;
    assert_eq!(app.status_line(), "restart web: sent", "a message wins");
    app.on_key(Key::Down, 10);
    assert_eq!(app.selected, i);
    assert_eq!(
        app.status_line(),
        format!("web/app: {}", app.rows[i].last_event),
        "moving the selection clears the message for the row's whole event"
    );
}

#[test]
fn memory_blank_for_every_running_container_is_explained_once() {
    let mut app = App::new("s".into());
    let mut reply = two_pods(0, 0);
    for p in &mut reply.pods {
        for c in &mut p.containers {
            c.resources.memory_current = None;
        }
    }
    app.update(reply.clone(), vec![], Instant::now(), wall());
    assert!(
        app.message.contains("no memory controller"),
        "{}",
        app.message
    );
    assert!(app.message.contains("docs/hosts.md"), "{}", app.message);
    app.on_key(Key::Down, 10);
    app.update(reply, vec![], Instant::now(), wall());
    assert_eq!(app.message, "", "said once, not at every poll");

    let mut with_figures = App::new("s".into());
    with_figures.update(two_pods(0, 0), vec![], Instant::now(), wall());
    assert_eq!(with_figures.memory_note(), None);
    assert_eq!(with_figures.message, "");
}

#[test]
fn long_log_lines_wrap_and_following_reaches_the_last_piece() {
    let mut app = App::new("s".into());
    app.update(two_pods(0, 0), vec![], Instant::now(), wall());
    app.selected = 2;
    app.on_key(Key::Char('l'), 10);
    let long = format!("{}END", "x".repeat(200));
    app.set_log("web", "app", format!("short\n{long}\n"));
    app.fit(2, 80);
    let View::Logs { text, scroll, .. } = &app.view else {
        panic!()
    };
    let pieces = wrap(text, 80);
    assert_eq!(pieces.len(), 4, "{pieces:?}");
    assert!(pieces.iter().all(|p| p.chars().count() <= 80));
    assert_eq!(pieces[1..].concat(), long, "nothing lost in the cut");
    assert_eq!(*scroll, 2, "following shows the last two pieces");
    assert!(pieces[*scroll + 1].ends_with("END"));
    assert_eq!(wrap("", 80), Vec::<&str>::new());
    assert_eq!(wrap("ab\n\ncd", 1), ["a", "b", "", "c", "d"]);
}

#[test]
fn every_key_line_fits_80_columns() {
    let mut app = App::new("s".into());
    app.update(two_pods(0, 0), vec![], Instant::now(), wall());
    for admin in [Admin::Yes, Admin::No, Admin::Unknown] {
        app.admin = admin;
        for view in ['-', 'l', '\n'] {
            app.view = View::Table;
            match view {
                'l' => {
                    app.on_key(Key::Char('l'), 10);
                }
                '\n' => {
                    app.on_key(Key::Enter, 10);
                }
                _ => {}
            }
            let line = crate::top::draw::help_line(&app);
            assert!(line.chars().count() <= 80, "{} columns: {line}", line.len());
        }
    }
}

#[test]
fn at_80_by_24_the_table_keeps_the_key_line_and_the_last_events_age() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let mut app = App::new("/run/vigil/vigil.sock".into());
    let mut old = event(
        "web/app",
        "BackOff",
        "back-off 40s restarting failed container",
    );
    old.last_timestamp = Timestamp(wall() - Duration::from_secs(42));
    app.update(two_pods(0, 0), vec![old], Instant::now(), wall());
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal.draw(|f| crate::top::draw::draw(f, &app)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let line = |y: u16| -> String {
        (0..80)
            .map(|x| buffer[(x, y)].symbol().to_string())
            .collect()
    };
    assert!(line(23).starts_with("q quit"), "key line: {:?}", line(23));
    assert!(line(23).trim_end().ends_with("u start"), "{:?}", line(23));
    let app_line = (0..24).map(line).find(|l| l.contains("  app")).unwrap();
    assert!(app_line.contains("42s BackOff"), "{app_line:?}");
}

#[test]
fn a_containers_notify_status_is_shown_escaped_on_the_status_line() {
    let mut app = App::new("s".into());
    let mut reply = two_pods(0, 0);
    let c = reply.pods[0]
        .containers
        .iter_mut()
        .find(|c| c.name == "app")
        .unwrap();
    c.notify = Some(wire::Notify {
        ready: true,
        status: Some("serving \x1b[2J3 clients".into()),
        stopping: false,
    });
    app.update(reply, vec![], Instant::now(), wall());
    let i = app
        .rows
        .iter()
        .position(|r| r.target() == "web/app")
        .unwrap();
    app.selected = i;
    assert_eq!(
        app.status_line(),
        "web/app: STATUS=serving \\x1b[2J3 clients"
    );
}
