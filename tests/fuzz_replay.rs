//! Replays the fuzz corpus through every fuzz target under plain `cargo test`, so the CI run
//! (stable toolchain, no cargo-fuzz) checks every input the fuzzer ever kept and every crash
//! it ever found. The targets live in `fuzz/src/lib.rs`; the full fuzz run is `fuzz/run.sh`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../fuzz/src/lib.rs"]
mod harness;

use std::path::Path;

/// Every file under `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut out = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file() {
                let data = std::fs::read(&path).unwrap();
                out.push((path.display().to_string(), data));
            }
        }
    }
    out.sort();
    out
}

fn replay(target: &str) {
    let (_, run) = harness::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .expect("known target");
    let inputs = inputs(target);
    assert!(!inputs.is_empty(), "no corpus for fuzz target {target}");
    for (path, data) in &inputs {
        if let Err(panic) = std::panic::catch_unwind(|| run(data)) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("fuzz target {target} panicked on {path}: {msg}");
        }
    }
    println!("{target}: {} inputs replayed", inputs.len());
}

#[test]
fn config_corpus_replays_without_panic() {
    replay("config");
}

#[test]
fn control_request_corpus_replays_without_panic() {
    replay("control_request");
}

#[test]
fn http_response_corpus_replays_without_panic() {
    replay("http_response");
}

#[test]
fn grpc_response_corpus_replays_without_panic() {
    replay("grpc_response");
}

#[test]
fn hpack_corpus_replays_without_panic() {
    replay("hpack");
}

#[test]
fn metrics_request_corpus_replays_without_panic() {
    replay("metrics_request");
}

#[test]
fn cgroup_files_corpus_replays_without_panic() {
    replay("cgroup_files");
}

#[test]
fn core_sequence_corpus_replays_without_panic() {
    replay("core_sequence");
}

#[test]
fn core_harness_drives_restarts() {
    // Spawn answered, process exits, time passes to the next deadline — repeated.
    let data: Vec<u8> = [4u8, 0, 0, 4, 0, 0, 4, 0, 0, 6, 0, 0, 0, 2, 2].repeat(30);
    let spawns = harness::core_sequence_spawns(&data);
    assert!(
        spawns >= 10,
        "the crash-loop input spawned only {spawns} runs"
    );
}

#[test]
fn core_harness_adopts_running_containers_and_ends_them_with_an_unknown_status() {
    // Adopt always/app, onfailure/job, never/one and never/two; then let them exit and time
    // pass, repeatedly.
    let mut data = vec![0xAD, 0x0F, 5, 1, 6, 2, 7, 0, 8, 3];
    data.extend([6u8, 0, 0, 0, 2, 4, 0, 0].repeat(20));
    let (spawns, adopted) = harness::core_sequence_counts(&data);
    assert!(adopted >= 3, "only {adopted} runs adopted");
    assert!(
        spawns > adopted,
        "nothing restarted after the adopted runs ended"
    );
}

#[cfg(feature = "kubernetes")]
#[test]
fn manifest_corpus_replays_without_panic() {
    replay("manifest");
}
