//! The runtime shell: the one thread, the one `mio::Poll`, and the loop's clock: it reads the
//! clock for each turn's `now` (and for the poll timeout) and passes `now` to the core, which
//! never reads it (every other reader is listed in docs/architecture.md, "Who reads the
//! clock").
//!
//! Owns every file descriptor of a running supervisor (signal self-pipe, control socket,
//! container output pipes, cgroup event files, probe sockets) and the pid → owner table of the
//! reaper. Each loop turn: poll with the timeout the core asks for → read the clock once →
//! turn ready sources into [`Input`]s → `core.handle(now, …)` / `handle_timeout(now)` → drain
//! `poll_action()` into the runs component (`shell::runs`), whose outcomes go straight back in
//! as inputs. It must not make lifecycle decisions (restart, back-off, reasons): those are the
//! core's.

mod fault;
mod fdstore;
pub(crate) mod handoff;
pub(crate) mod harden;
pub(crate) mod holder;
mod pid1;
mod shell;
mod slots;
mod statefile;
mod stderr_log;
mod supervisor_reload;
mod trim;

use std::os::fd::AsRawFd;
use std::path::PathBuf;

use log::error;

use crate::config::select::Selection;

pub use pid1::is_pid1;

/// `vigil run`: load the config, supervise until shutdown, return the exit code.
/// `allow_missing_controllers` is `--allow-missing-controllers` (it turns the config key on),
/// `exit_with` is `--exit-with POD` ([`apply_exit_with`]), `selection` the pods named,
/// `--profile` and `--no-deps` ([`apply_selection`]).
pub fn run_main(
    config: Vec<PathBuf>,
    allow_missing_controllers: bool,
    exit_with: Option<String>,
    selection: Selection,
) -> i32 {
    run_source(
        crate::config::resolve_paths(config),
        allow_missing_controllers,
        exit_with,
        selection,
    )
}

/// The selection of this run (`run POD…`, `--profile`, `$VIGIL_PROFILES`, `--no-deps`) written
/// into `config`'s pods (`config::select`), at start and at every reload; `verbose` (at start)
/// logs which pods wait and the active profiles no pod lists.
pub fn apply_selection(
    config: &mut crate::config::spec::Config,
    selection: &Selection,
    verbose: bool,
) -> Result<(), String> {
    let decision = crate::config::select::apply(config, selection)?;
    if verbose {
        let waiting = decision.list(false);
        if !waiting.is_empty() {
            log::info!("not started (vigil start POD starts one): {waiting}");
        }
        for p in &decision.unused_profiles {
            log::warn!("profile {p:?} is active but no pod lists it");
        }
    }
    Ok(())
}

/// `run --exit-with POD`: that pod's `shutdown_on` becomes `"ended"`, whatever the file says
/// (at start and at every reload: the flag travels in vigil's argv, across an upgrade too).
/// An unknown pod is an error naming the pods there are.
pub fn apply_exit_with(config: &mut crate::config::spec::Config, pod: &str) -> Result<(), String> {
    match config.pods.iter_mut().find(|p| p.name == pod) {
        Some(p) => {
            p.shutdown_on = Some(crate::config::spec::ShutdownOn::Ended);
            Ok(())
        }
        None => {
            let names: Vec<&str> = config.pods.iter().map(|p| p.name.as_str()).collect();
            Err(format!(
                "run --exit-with {pod}: no pod {pod:?} in the config (its pods: {})",
                names.join(", ")
            ))
        }
    }
}

/// The POD of `--exit-with POD` (or `--exit-with=POD`) in vigil's own argv.
pub fn exit_with_flag(argv: &[String]) -> Option<&str> {
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == "--exit-with" {
            argv.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix("--exit-with=")
        }
    })
}

/// `vigil run` on a resolved config source (`run -f MANIFEST` passes a manifest source).
pub fn run_source(
    source: crate::config::ConfigSource,
    allow_missing_controllers: bool,
    exit_with: Option<String>,
    selection: Selection,
) -> i32 {
    init_logger();
    // The output pipes a service manager kept for an earlier vigil (before any thread or
    // process is started: the LISTEN_* variables are removed from the environment here).
    let stored = fdstore::take_listen_fds();
    report_plain_paths();
    let pid1 = pid1::is_pid1();
    if pid1 {
        pid1::mount_api_filesystems();
        install_pid1_panic_hook();
    }
    let code = match crate::convert::load(&source, None) {
        Err(errors) => {
            for e in errors.iter() {
                error!("{e}");
            }
            1
        }
        Ok(loaded) => {
            // A refused `pod_dir` file is said and left out; the rest runs.
            for e in loaded.refused.iter() {
                error!("pod_dir: {e}");
            }
            let refused = loaded.refused;
            let mut config = loaded.config;
            config.supervisor.allow_missing_controllers |= allow_missing_controllers;
            if let Some(pod) = &exit_with
                && let Err(e) = apply_exit_with(&mut config, pod)
            {
                error!("{e}");
                return 1;
            }
            if let Err(e) = apply_selection(&mut config, &selection, true) {
                error!("run: {e}");
                return 1;
            }
            match shell::Shell::new(config, source, stored, selection) {
                Ok(mut shell) => {
                    shell.record_refused_at_start(&refused);
                    shell.run()
                }
                Err(e) => {
                    error!("cannot start: {e}");
                    1
                }
            }
        }
    };
    if pid1 {
        finish_as_pid1(code);
    }
    code
}

/// Says at start which performance tricks `VIGIL_PLAIN` turned off, and which of its names
/// are no trick (src/tricks.rs).
fn report_plain_paths() {
    use crate::tricks::{Trick, on, unknown};
    let off: Vec<&str> = Trick::ALL
        .iter()
        .filter(|t| !on(**t))
        .map(|t| t.name())
        .collect();
    if !off.is_empty() {
        log::info!("VIGIL_PLAIN: plain paths for {}", off.join(", "));
    }
    for name in unknown() {
        let known: Vec<&str> = Trick::ALL.iter().map(|t| t.name()).collect();
        log::warn!(
            "VIGIL_PLAIN: {name:?} is no trick, ignored (the tricks: {}, or all)",
            known.join(", ")
        );
    }
}

/// `vigil --handoff-version`, or this process is the new instance of a `vigil upgrade`
/// (whatever its arguments): the exit code; `None` for everything else.
pub fn handoff_entry() -> Option<i32> {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "--handoff-version")
    {
        let info = handoff::VersionInfo::ours();
        println!("{}", serde_json::to_string(&info).unwrap_or_default());
        return Some(0);
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "--handoff-check")
    {
        return Some(handoff_check());
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == handoff::guard::ARG)
    {
        init_logger();
        return Some(handoff::guard::main());
    }
    let inherited = handoff::inherited()?;
    Some(resume_main(inherited))
}

/// `vigil --handoff-check`, the pre-flight of `vigil upgrade` (run by the old vigil as a
/// child, with the real state on `VIGIL_HANDOFF_FD` and nothing else handed over): reads the
/// state as a takeover would, and exits 0 printing the `--handoff-version` line when it could
/// take it over; else says why on stderr and exits 1. Changes nothing.
#[inline(never)]
#[cold]
fn handoff_check() -> i32 {
    init_logger();
    let Some(inh) = handoff::inherited() else {
        error!("--handoff-check: no handoff state (VIGIL_HANDOFF_FD is not an open descriptor)");
        return 1;
    };
    match handoff::read(&inh.state) {
        Err(e) => {
            error!("--handoff-check: {e}");
            1
        }
        Ok((state, _blobs)) => {
            log::debug!(
                "--handoff-check: a state of vigil {} with {} containers, readable",
                state.written_by,
                state.slots.len()
            );
            let info = handoff::VersionInfo::ours();
            println!("{}", serde_json::to_string(&info).unwrap_or_default());
            0
        }
    }
}

/// The new instance: take the state over and supervise on; if it cannot, go back to the old
/// binary with the same state (it continues unchanged and tells the caller). Never inlined:
/// its frame (the state being read, ~17 KB) would otherwise be [`handoff_entry`]'s, and every
/// `vigil status` would fault in four stack pages only to return `None` (issue 20).
#[inline(never)]
#[cold]
fn resume_main(inh: handoff::Inherited) -> i32 {
    init_logger();
    let exec_done = std::time::Instant::now();
    let pid1 = pid1::is_pid1();
    if pid1 {
        install_pid1_panic_hook();
    }
    // As PID 1 no guardian can rescue a takeover that dies or hangs: the way back is kept
    // here from the start until the takeover is done (not on the way back itself: nothing to
    // go back to then).
    let mut armed = match (&inh.exe, pid1 && inh.error.is_none()) {
        (Some(exe), true) => handoff::fallback::arm(exe, &inh.state),
        _ => None,
    };
    let code = match handoff::read(&inh.state) {
        _ if fault::refuse_handoff(inh.error.is_some()) => fall_back(
            &inh,
            &[],
            "fault injection: VIGIL_FAULT_HANDOFF_REFUSE_FILE was there",
        ),
        Err(e) => fall_back(&inh, &[], &e.to_string()),
        Ok((state, blobs)) => {
            log::debug!(
                "upgrade: state read in {:.1} ms ({} bytes of logs), {:.1} ms after the old loop left",
                exec_done.elapsed().as_secs_f64() * 1e3,
                blobs.len(),
                (handoff::mono::raw_now() - i128::from(state.loop_left_at)) as f64 / 1e6
            );
            // Nothing started before the components take them (the output holder) may
            // inherit what was handed over.
            let handed = state.handed_fds();
            if let Some(a) = &mut armed {
                a.keep(&handed);
            }
            handoff::exec::mark_handed(&handed, true);
            resume(inh, state, &blobs, &handed, armed.take())
        }
    };
    // Any way back has failed by now: given up before PID 1's final sweep, so that the exit
    // after it does not try it again.
    drop(armed);
    if pid1 {
        finish_as_pid1(code);
    }
    code
}

fn resume(
    mut inh: handoff::Inherited,
    state: handoff::State,
    blobs: &[u8],
    handed: &[std::os::fd::RawFd],
    armed: Option<handoff::fallback::Armed>,
) -> i32 {
    match shell::Shell::resume(state, blobs, inh.error.as_deref()) {
        Ok(shell) => {
            // Everything is taken over: the upgrade's guardian may go, and PID 1's own way
            // back is given up.
            if let Some(ready) = inh.ready.take() {
                handoff::guard::report_ready(ready);
            }
            if let Some(a) = armed {
                a.disarm();
            }
            drop(inh);
            shell.run()
        }
        Err(e) => {
            // The descriptors as they were handed over, whatever the start did to them.
            if let Some(a) = &armed {
                a.restore();
            }
            // Should the exec fail, the way back is given up here (`armed` dropped) before
            // anything else: an exit must not try it again after PID 1's final sweep.
            fall_back(&inh, handed, &format!("cannot start: {e}"))
        }
    }
}

/// Back to the binary that wrote the state. Returns only if that is impossible.
fn fall_back(inh: &handoff::Inherited, handed: &[std::os::fd::RawFd], why: &str) -> i32 {
    error!("upgrade: this vigil cannot take over: {why}; going back to the previous binary");
    if inh.error.is_some() {
        error!(
            "upgrade: the previous binary cannot take its own state back either; its containers are left running unsupervised"
        );
        return 1;
    }
    match &inh.exe {
        Some(exe) => {
            let ready = inh.ready.as_ref().map(AsRawFd::as_raw_fd);
            let e = handoff::exec::back_to_old(exe, inh.state.as_raw_fd(), ready, handed, why);
            error!("upgrade: cannot execute the previous binary again: {e}");
        }
        None => error!("upgrade: the previous binary was not handed over"),
    }
    1
}

/// Logging to stderr (the journal under systemd, the console as PID 1), never blocking the
/// loop ([`stderr_log`]). `VIGIL_LOG` or `RUST_LOG` set the filter; the default is `info`.
/// Colours on a terminal unless `NO_COLOR` is set.
fn init_logger() {
    use std::io::IsTerminal;
    let filter = std::env::var("VIGIL_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_string());
    let mut builder = env_logger::Builder::new();
    builder.parse_filters(&filter);
    builder.format_target(false);
    builder.target(env_logger::Target::Pipe(Box::new(stderr_log::Sink)));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    builder.write_style(if colour {
        env_logger::WriteStyle::Always
    } else {
        env_logger::WriteStyle::Never
    });
    let _ = builder.try_init();
}

/// As PID 1, the end of `run` is the end of the system: sweep what is left, sync, and power
/// off (VM) — or just exit with the code inside a container's PID namespace.
fn finish_as_pid1(code: i32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    pid1::sweep_and_sync(deadline);
    log::info!("vigil: exiting with code {code}");
    if pid1::in_initial_pid_namespace() {
        pid1::power_off();
    }
}

/// A panic in PID 1 must not take the system down silently: log it, then bring everything
/// down cleanly (sweep, sync, power off). The loop also catches panics per turn where it can.
fn install_pid1_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        error!("vigil (pid 1) panicked: {info}");
        // During an upgrade's takeover: back to the previous binary, before unwinding.
        handoff::fallback::on_panic();
        default(info);
    }));
}
