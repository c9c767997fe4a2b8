//! The handoff format: round trip, refusals, and each version's fixture
//! (`tests/data/handoff-v1.bin`, `tests/data/handoff-v2.bin`), which every later vigil must
//! still read.

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
    let (mut meta, (a, b), prev) = ring.parts();
    let current = blobs.push(&[a, b]);
    let previous = blobs.push(&[prev]);
    // As an upgrade writes them (since format 2): the stamps in the blob area.
    if meta.stamps.is_empty() {
        meta.stamps = vec![(0, 1_700_000_000_000_000_000)];
    }
    let stamps = stamps_blob(&mut blobs, &std::mem::take(&mut meta.stamps));
    let previous_stamps = stamps_blob(&mut blobs, &std::mem::take(&mut meta.previous_stamps));
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
            stamps,
            previous_stamps,
            run: Some(RunState {
                generation: gen_of(web),
                pid: Some(1001),
                cgroup: Some("/sys/fs/cgroup/vigil/web/app".into()),
                oom_baseline: OomCounters::default(),
                oom_seen: OomCounters::default(),
                exited: false,
                message_stamp: None,
                cgroup_fds: Some(CgroupFds {
                    dir: 15,
                    procs: 16,
                    events: 17,
                    memory_events: None,
                }),
                proc_start: Some(777),
                notify_fd: Some(19),
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
        statefile_text: Some("1001 777 web/app\n".into()),
        hooks: Vec::new(),
        deferred_spawns: Vec::new(),
        probe_stats: Vec::new(),
        pid: Some(4242),
        cgroup_subtree: None,
        selection: Default::default(),
        conns: Vec::new(),
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
fn assert_is_the_sample(state: State, blobs: &[u8], version: u32) {
    assert_eq!(state.version, version);
    assert_eq!(state.config.pods.len(), 2);
    assert_eq!(state.listener_fd, 5);
    assert_eq!(state.requester.as_ref().map(|r| r.id.as_str()), Some("7"));
    let (mut core, rest) = state.split_core();
    core.after_handoff();
    let pods = core.pods();
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
    if version >= 2 {
        let run = rest.slots[0].run.as_ref().unwrap();
        assert_eq!(run.cgroup_fds.map(|f| f.events), Some(17));
        assert_eq!(run.proc_start, Some(777));
        assert_eq!(
            stamps_of(blobs, slot.stamps).unwrap(),
            vec![(0, 1_700_000_000_000_000_000)]
        );
        assert!(rest.statefile_text.is_some());
    }
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
    // A run's sd_notify socket goes with it (a state written before the field has none).
    let run = back.slots[0].run.as_ref().unwrap();
    assert_eq!(run.notify_fd, Some(19));
    assert!(back.handed_fds().contains(&19), "{:?}", back.handed_fds());
    assert_is_the_sample(back, &area, FORMAT_VERSION);
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
    assert!(msg.contains("99") && msg.contains("versions 1, 2"), "{msg}");
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

/// The state of `version` in `tests/data/handoff-vN.bin`, written by that version's build
/// (by `VIGIL_WRITE_HANDOFF_FIXTURE=1 cargo test handoff` when missing; never rewritten).
fn fixture(version: u32) -> Vec<u8> {
    let path = format!(
        "{}/tests/data/handoff-v{version}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    if version == FORMAT_VERSION
        && std::env::var_os("VIGIL_WRITE_HANDOFF_FIXTURE").is_some()
        && !Path::new(&path).exists()
    {
        let (state, blobs) = sample(Instant::now());
        std::fs::write(&path, bytes_of(&state, blobs)).unwrap();
    }
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The state written by the first handoff version: every later vigil reads it (add a new
/// version to `READS` and a conversion, never drop this one).
#[test]
fn the_first_versions_state_is_still_read() {
    let (state, area) = parse(&fixture(1)).unwrap();
    assert_is_the_sample(state, &area, 1);
}

/// The state written by the second version (each definition once): read by every later vigil.
#[test]
fn the_second_versions_state_is_still_read() {
    let bytes = fixture(2);
    let json_len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    assert!(bytes[16..].starts_with(br#"{"version":2,"specs":["#));
    let (state, area) = parse(&bytes).unwrap();
    assert_eq!(area.len(), bytes.len() - 16 - json_len);
    assert_is_the_sample(state, &area, 2);
}

/// Format 2 writes each distinct container definition once, whichever of the config, the
/// core's pods, the core's slots and the shell's slots holds it; the reader gives the core's
/// slot and the shell's slot one shared definition again, equal to the config's.
#[test]
fn a_version_2_state_holds_each_definition_once_and_reads_back_equal() {
    let (state, blobs) = sample(Instant::now());
    let bytes = bytes_of(&state, blobs);
    let json_len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let doc: serde_json::Value = serde_json::from_slice(&bytes[16..16 + json_len]).unwrap();
    let table = doc["specs"].as_array().unwrap();
    // Two containers, two definitions: not one per place that holds them.
    assert_eq!(table.len(), 2, "{table:?}");
    let text = String::from_utf8_lossy(&bytes[16..16 + json_len]);
    assert_eq!(text.matches(r#""stop_signal_name":"#).count(), 2, "{text}");
    let (back, _) = parse(&bytes).unwrap();
    assert_eq!(back.config, state.config);
    let shell_spec = back.slots[0].spec.clone();
    assert_eq!(*shell_spec, *state.config.pods[1].containers[0]);
    let (core, _) = back.split_core();
    let pods = core.pods();
    let web = &pods.iter().find(|p| p.name == "web").unwrap().containers[0];
    assert!(Arc::ptr_eq(&web.spec, &shell_spec));
    let crash = &pods.iter().find(|p| p.name == "crash").unwrap().containers[0];
    assert_eq!(*crash.spec, *state.config.pods[0].containers[0]);
}

/// Outside a handoff (no table on the thread) a definition is written and read in full, as
/// before: the config's other uses of serde are unchanged.
#[test]
fn outside_a_handoff_definitions_are_written_in_full() {
    let (state, _) = sample(Instant::now());
    let pod = &state.config.pods[0];
    let json = serde_json::to_string(pod).unwrap();
    assert!(json.contains(r#""command":"#), "{json}");
    let back: crate::config::spec::PodSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, pod);
    // An index where no table is: a clear error, not a definition made up.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["containers"] = serde_json::json!([0]);
    let e = serde_json::from_value::<crate::config::spec::PodSpec>(v).unwrap_err();
    assert!(e.to_string().contains("index"), "{e}");
}

/// An index past the end of the table is refused (a corrupt state), naming it.
#[test]
fn an_index_past_the_table_is_refused() {
    let (state, blobs) = sample(Instant::now());
    let bytes = bytes_of(&state, blobs);
    let json_len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let mut v: serde_json::Value = serde_json::from_slice(&bytes[16..16 + json_len]).unwrap();
    v["state"]["slots"][0]["spec"] = 7.into();
    let json = serde_json::to_vec(&v).unwrap();
    let mut other = MAGIC.to_vec();
    other.extend_from_slice(&(json.len() as u64).to_le_bytes());
    other.extend_from_slice(&json);
    let e = parse(&other).unwrap_err();
    assert!(matches!(e, ReadError::Parse { version: 2, .. }), "{e}");
    assert!(e.to_string().contains("definition 7"), "{e}");
}

/// A probe attempt in flight at the upgrade is lost with the old process: the new instance
/// runs it again at once (as a restarted kubelet starts its probe workers afresh), and the
/// lost attempt's result, should one ever arrive, counts for nothing — a failure is never
/// counted twice.
#[test]
fn a_probe_attempt_lost_in_the_upgrade_runs_again_and_its_stale_result_counts_for_nothing() {
    use crate::config::spec::ProbeKind;
    use crate::core::{Action, ProbeOutcome};
    let now = Instant::now();
    let config = crate::config::load_str(CONFIG, Path::new("/etc/vigil/vigil.toml")).unwrap();
    let mut core = Supervisor::new(&config, now);
    let web = core.container_key("web", "app").unwrap();
    let spawns: Vec<_> = std::iter::from_fn(|| core.poll_action())
        .filter_map(|a| match a {
            Action::Spawn {
                key, generation, ..
            } => Some((key, generation)),
            _ => None,
        })
        .collect();
    for (i, (key, generation)) in spawns.iter().enumerate() {
        core.handle(
            now,
            Input::Spawned {
                key: *key,
                generation: *generation,
                pid: 2000 + i as u32,
            },
        );
    }
    core.handle_timeout(now);
    let start_probe = |core: &mut Supervisor| {
        std::iter::from_fn(|| core.poll_action()).find_map(|a| match a {
            Action::StartProbe {
                key,
                generation,
                kind: ProbeKind::Readiness,
                seq,
                ..
            } if key == web => Some((generation, seq)),
            _ => None,
        })
    };
    let (generation, lost) = start_probe(&mut core).expect("the first readiness attempt");
    // The upgrade: the attempt is in flight.
    let (mut state, blobs) = sample(now);
    state.config = config;
    state.core = core;
    let (back, _) = parse(&bytes_of(&state, blobs)).unwrap();
    let (mut core, _) = back.split_core();
    core.after_handoff();
    core.handle_timeout(now + Duration::from_millis(1));
    let (_, again) = start_probe(&mut core).expect("the attempt run again at once");
    assert_ne!(again, lost);
    let recent = |core: &Supervisor| {
        let pods = core.pods();
        let c = &pods.iter().find(|p| p.name == "web").unwrap().containers[0];
        c.probes[0].recent.len()
    };
    let fail = |seq| Input::ProbeResult {
        key: web,
        generation,
        kind: ProbeKind::Readiness,
        seq,
        outcome: ProbeOutcome::Failure("exit 1".into()),
        duration: Duration::ZERO,
    };
    core.handle(now + Duration::from_millis(2), fail(lost));
    assert_eq!(recent(&core), 0, "the lost attempt's result was counted");
    core.handle(now + Duration::from_millis(3), fail(again));
    assert_eq!(recent(&core), 1);
    // And only once, whatever comes later for either attempt.
    core.handle(now + Duration::from_millis(4), fail(lost));
    core.handle(now + Duration::from_millis(5), fail(again));
    assert_eq!(recent(&core), 1);
}

/// A container start waiting for its previous cgroup's removal travels with the state (its
/// definition by index, its retry time).
#[test]
fn a_deferred_start_round_trips_with_its_definition() {
    let now = Instant::now();
    let (mut state, blobs) = sample(now);
    let spec = state.config.pods[0].containers[0].clone();
    let key = state.core.container_key("crash", "loop").unwrap();
    state.deferred_spawns.push(DeferredSpawn {
        key,
        generation: 3,
        pod: "crash".into(),
        container: spec.clone(),
        init: false,
        at: now + Duration::from_millis(5),
    });
    state.hooks.push(HookAttempt {
        key,
        generation: 3,
        seq: 9,
        pid: 4242,
        pipe_fd: Some(21),
        output: Blob::default(),
        cgroup: Some("/sys/fs/cgroup/vigil/crash/loop/probe-hook".into()),
        cgroup_fds: None,
        started: now,
    });
    let (back, _) = parse(&bytes_of(&state, blobs)).unwrap();
    let d = &back.deferred_spawns[0];
    assert_eq!((d.key, d.generation, d.pod.as_str()), (key, 3, "crash"));
    assert_eq!(*d.container, *spec);
    assert_eq!(
        mono::to_nanos(d.at),
        mono::to_nanos(now + Duration::from_millis(5))
    );
    let h = &back.hooks[0];
    assert_eq!((h.seq, h.pid, h.pipe_fd), (9, 4242, Some(21)));
}
