//! The handoff format: round trip, refusals, and the first version's fixture
//! (`tests/data/handoff-v1.bin`), which every later vigil must still read.

use std::path::Path;
use std::time::{Duration, Instant};

use super::*;
use crate::core::{ContainerState, ExitInfo, Input};

const CONFIG: &str = r#"
[supervisor]
socket = "/run/vigil-test/vigil.sock"

[pods.crash]
[[pods.crash.containers]]
name = "loop"
command = ["/bin/sh", "-c", "exit 3"]

[pods.web]
[[pods.web.containers]]
name = "app"
command = ["/bin/sleep", "1000"]
[pods.web.containers.readiness_probe]
exec = { command = ["/bin/true"] }
period_seconds = 5
"#;

/// A state as an upgrade writes it: `crash/loop` in back-off after one failed run,
/// `web/app` running with a probe schedule, a log ring with a line in it.
fn sample(now: Instant) -> (State, Blobs) {
    let config = crate::config::load_str(CONFIG, Path::new("/etc/vigil/vigil.toml")).unwrap();
    let mut core = Supervisor::new(&config, now);
    let mut spawned = Vec::new();
    while let Some(a) = core.poll_action() {
        if let crate::core::Action::Spawn {
            key, generation, ..
        } = a
        {
            spawned.push((key, generation));
        }
    }
    for (i, (key, generation)) in spawned.iter().enumerate() {
        core.handle(
            now,
            Input::Spawned {
                key: *key,
                generation: *generation,
                pid: 1000 + i as u32,
            },
        );
    }
    let crash = core.container_key("crash", "loop").unwrap();
    let web = core.container_key("web", "app").unwrap();
    let gen_of = |k| spawned.iter().find(|(key, _)| *key == k).unwrap().1;
    core.handle(
        now + Duration::from_millis(10),
        Input::Exited {
            key: crash,
            generation: gen_of(crash),
            exit: ExitInfo {
                code: Some(3),
                ..ExitInfo::default()
            },
        },
    );
    // The first restart is at once; the second failure goes into back-off.
    let mut again = None;
    while let Some(a) = core.poll_action() {
        if let crate::core::Action::Spawn { generation, .. } = a {
            again = Some(generation);
        }
    }
    let again = again.unwrap();
    let later = now + Duration::from_millis(20);
    core.handle(
        later,
        Input::Spawned {
            key: crash,
            generation: again,
            pid: 1100,
        },
    );
    core.handle(
        later + Duration::from_millis(10),
        Input::Exited {
            key: crash,
            generation: again,
            exit: ExitInfo {
                code: Some(3),
                ..ExitInfo::default()
            },
        },
    );
    while core.poll_action().is_some() {}
    let mut blobs = Blobs::default();
    let mut ring = crate::logs::LogBuffer::new(1024);
    ring.new_run();
    ring.push(b"hello from web/app\n");
    let (meta, (a, b), prev) = ring.parts();
    let current = blobs.push(&[a, b]);
    let previous = blobs.push(&[prev]);
    let spec = config.pods[1].containers[0].clone();
    let state = State {
        version: FORMAT_VERSION,
        written_by: "0.1.0".to_string(),
        loop_left_at: mono::to_nanos(now),
        source: ConfigSource::File("/etc/vigil/vigil.toml".into()),
        config: config.clone(),
        exe_path: "/usr/bin/vigil".into(),
        previous_exe_path: Some("/usr/bin/vigil.old".into()),
        argv: vec!["vigil".into(), "run".into()],
        core,
        slots: vec![SlotState {
            key: web,
            pod: "web".into(),
            name: "app".into(),
            spec,
            spec_hash: 42,
            ring: meta,
            current,
            previous,
            run: Some(RunState {
                generation: gen_of(web),
                pid: Some(1001),
                cgroup: Some("/sys/fs/cgroup/vigil/web/app".into()),
                oom_baseline: OomCounters::default(),
                oom_seen: OomCounters::default(),
                exited: false,
                message_stamp: None,
            }),
        }],
        pipes: vec![PipeState {
            key: web,
            pid: 1001,
            stderr: true,
            run: Some(gen_of(web)),
            fd: 11,
        }],
        mains: vec![MainPid {
            pid: 1001,
            key: web,
            generation: gen_of(web),
        }],
        adopted: vec![AdoptedRun {
            key: crash,
            generation: 9,
            pidfd: 14,
        }],
        probe_pids: vec![],
        dying_cgroups: vec![],
        gone_pods: vec![],
        listener_fd: 5,
        requester: Some(Requester {
            fd: 12,
            id: "7".into(),
        }),
        clients: vec![13],
        journal_seq: 3,
        stop_signals: 0,
        started_at: now - Duration::from_secs(60),
        upgrades: 1,
    };
    (state, blobs)
}

fn bytes_of(state: &State, blobs: Blobs) -> Vec<u8> {
    let fd = write(state, blobs).unwrap();
    let mut f = File::from(fd);
    let mut out = Vec::new();
    f.read_to_end(&mut out).unwrap();
    out
}

/// What every readable state must show of the sample (whatever version wrote it).
fn assert_is_the_sample(state: State, blobs: &[u8]) {
    assert_eq!(state.version, 1);
    assert_eq!(state.config.pods.len(), 2);
    assert_eq!(state.listener_fd, 5);
    assert_eq!(state.requester.as_ref().map(|r| r.id.as_str()), Some("7"));
    let (mut core, rest) = state.split_core();
    core.after_handoff();
    let pods = core.pods(Instant::now());
    let crash = &pods.iter().find(|p| p.name == "crash").unwrap().containers[0];
    assert_eq!(crash.restart_count, 1);
    assert!(
        matches!(&crash.state, ContainerState::Waiting { reason, .. } if reason.as_str() == "CrashLoopBackOff"),
        "{:?}",
        crash.state
    );
    assert_eq!(crash.last_state.as_ref().map(|t| t.exit_code), Some(3));
    let web = &pods.iter().find(|p| p.name == "web").unwrap().containers[0];
    assert_eq!(web.pid, Some(1001));
    assert!(matches!(web.state, ContainerState::Running { .. }));
    // The back-off deadline (and the probe schedule) is a deadline of the core's again.
    assert!(core.poll_timeout().is_some());
    let slot = &rest.slots[0];
    let ring = crate::logs::LogBuffer::from_parts(
        slot.ring.clone(),
        blob(blobs, slot.current).unwrap().to_vec(),
        blob(blobs, slot.previous).unwrap().to_vec(),
    )
    .unwrap();
    assert_eq!(ring.tail_lines(None, false), b"hello from web/app\n");
    assert_eq!(rest.mains[0].pid, 1001);
    assert_eq!(rest.slots[0].spec_hash, 42);
    assert_eq!(rest.adopted[0].pidfd, 14);
}

#[test]
fn a_state_round_trips_through_the_memory_file() {
    let now = Instant::now();
    let (state, blobs) = sample(now);
    let bytes = bytes_of(&state, blobs);
    let (back, area) = parse(&bytes).unwrap();
    assert_eq!(
        mono::to_nanos(back.started_at),
        mono::to_nanos(state.started_at)
    );
    assert_is_the_sample(back, &area);
}

#[test]
fn a_state_of_an_unknown_version_is_refused_naming_both_versions() {
    let (state, blobs) = sample(Instant::now());
    let bytes = bytes_of(&state, blobs);
    let json_len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let mut v: serde_json::Value = serde_json::from_slice(&bytes[16..16 + json_len]).unwrap();
    v["version"] = 99.into();
    let json = serde_json::to_vec(&v).unwrap();
    let mut other = MAGIC.to_vec();
    other.extend_from_slice(&(json.len() as u64).to_le_bytes());
    other.extend_from_slice(&json);
    let e = parse(&other).unwrap_err();
    assert!(matches!(e, ReadError::Version { found: 99 }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("99") && msg.contains("version 1"), "{msg}");
}

#[test]
fn truncated_or_foreign_bytes_are_refused() {
    assert!(matches!(parse(b""), Err(ReadError::Framing { .. })));
    assert!(matches!(
        parse(b"VIGILHO\n\xff\xff\xff\xff\x00\x00\x00\x00{}"),
        Err(ReadError::Framing { .. })
    ));
    let mut no_version = MAGIC.to_vec();
    no_version.extend_from_slice(&2u64.to_le_bytes());
    no_version.extend_from_slice(b"{}");
    assert!(matches!(parse(&no_version), Err(ReadError::Framing { .. })));
    let mut bad = MAGIC.to_vec();
    bad.extend_from_slice(&14u64.to_le_bytes());
    bad.extend_from_slice(br#"{"version": 1}"#);
    assert!(matches!(
        parse(&bad),
        Err(ReadError::Parse { version: 1, .. })
    ));
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/handoff-v1.bin");

/// The state written by the first handoff version: every later vigil reads it (add a new
/// version to `READS` and a conversion, never drop this one). Written once by
/// `VIGIL_WRITE_HANDOFF_FIXTURE=1 cargo test handoff` when missing; never rewritten.
#[test]
fn the_first_versions_state_is_still_read() {
    if std::env::var_os("VIGIL_WRITE_HANDOFF_FIXTURE").is_some() && !Path::new(FIXTURE).exists() {
        let (state, blobs) = sample(Instant::now());
        std::fs::write(FIXTURE, bytes_of(&state, blobs)).unwrap();
    }
    let bytes = std::fs::read(FIXTURE).unwrap();
    let (state, area) = parse(&bytes).unwrap();
    assert_is_the_sample(state, &area);
}
