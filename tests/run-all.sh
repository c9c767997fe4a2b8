#!/usr/bin/env bash
# Every test of vigil, from a fresh Debian 12 machine: installs what the tests need (python3,
# systemd-analyze, util-linux, tmux, redis-server and kubectl (Debian's kubernetes-client, for
# `kubectl kustomize`) for the native tests; QEMU, busybox, cpio and Debian's
# kernel for the VM suite; Rust's musl target and musl-tools, which vigil ships for), then runs formatting and
# lint checks, the unit and integration tests, and the real-kernel VM scenarios.
#
# Tests that need root or a cgroup2 mount are #[ignore = "needs …"]; this script runs them too
# (--include-ignored), so run it as root: a need that is not met then fails the test, naming
# the need, instead of passing it untested.
#
#   tests/run-all.sh            # everything (17-24 min from a fresh clone on 2 cores, by host)
#   tests/quick.sh              # the quick tier: only the lints and the cargo tests (< 10 min warm)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's header says how long the run has taken so far (CI allows 30 minutes on 2 cores).
step() { printf '\n== %s\n   (%dm%02ds into the run)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

step "toolchain"
cargo --version
for component in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component" || true
done
# vigil as it ships (a static-pie for musl): the soak and the VM suite build for it, and need
# Rust's musl target and musl's C compiler (musl-tools), for ring.
tests/ensure-musl.sh

step "host programs the native tests use"
# package:program pairs; installed only when the program is missing.
missing=()
# redis-server: a real daemon that speaks sd_notify (Debian builds it with libsystemd;
# tests/it/notify.rs runs it under vigil with `notify = true`).
for pp in python3:python3 systemd:systemd-analyze util-linux:prlimit util-linux:setpriv \
          prometheus:prometheus prometheus:promtool \
          util-linux:unshare tmux:tmux kubernetes-client:kubectl redis-server:redis-server; do
    command -v "${pp#*:}" >/dev/null 2>&1 || missing+=("${pp%%:*}")
done
if ((${#missing[@]})); then
    as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }
    as_root apt-get update -qq
    # Packages with a service (redis-server, prometheus) must not start it: the tests run their
    # own. invoke-rc.d asks policy-rc.d(8), and exit 101 means "not allowed"; one is put in
    # place only for the install when the machine has none (a container image often has one).
    own_policy=
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        own_policy=1
        printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
        as_root chmod 755 /usr/sbin/policy-rc.d
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
    if [[ -n $own_policy ]]; then as_root rm -f /usr/sbin/policy-rc.d; fi
fi

step "test servers: openssl CLI (HTTPS probe tests), grpcio + grpcio-health-checking (gRPC probe tests)"
command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; }
# Debian's python3 comes without pip (package python3-pip).
python3 -m pip --version >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq python3-pip; }
if ! python3 -c 'import grpc, grpc_health.v1.health' 2>/dev/null; then
  python3 -m pip install --quiet grpcio grpcio-health-checking \
    || python3 -m pip install --quiet --break-system-packages grpcio grpcio-health-checking
fi

step "sdnotify (Python's sd_notify client: tests/it/notify.rs; systemd-notify comes with the systemd package above)"
if ! python3 -c 'import sdnotify' 2>/dev/null; then
  python3 -m pip install --quiet sdnotify \
    || python3 -m pip install --quiet --break-system-packages sdnotify
fi

step "PyYAML (python3-yaml: reads vigil convert's YAML back as a YAML 1.1 parser would)"
python3 -c 'import yaml' 2>/dev/null || { apt-get update -qq && apt-get install -y -qq python3-yaml; }

step "Kubernetes OpenAPI schema validator (kubernetes-validate: checks vigil convert's manifests)"
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  python3 -m pip install --quiet kubernetes-validate \
    || python3 -m pip install --quiet --break-system-packages kubernetes-validate
fi

step "format and lint"
cargo fmt --all -- --check
cargo clippy --all-targets --quiet -- -D warnings
cargo clippy --all-targets --quiet --features fault-injection -- -D warnings

step "unit and integration tests"
cargo test --all-targets -- --include-ignored 2>&1 | tee target/test-output.txt

step "plain paths: the lifecycle and spawn tests again with every performance trick off (VIGIL_PLAIN=all)"
# docs/performance.md: each trick has a switch, and its plain path is tested on every run.
VIGIL_PLAIN=all cargo test --test it -- --include-ignored lifecycle:: spawn::
# the quick benchmark budget check (a few seconds; generous bounds, never tight timings)
if [ "${SKIP_BUDGET:-0}" != 1 ] && [ -x bench/run.sh ]; then
  step "benchmark budget (quick)"
  bench/run.sh --quick --check
fi

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  step "fuzzing, ${FUZZ_SECONDS:-8}s per target (cargo-fuzz, libFuzzer + AddressSanitizer)"
  fuzz/run.sh "${FUZZ_SECONDS:-8}"
fi

if [ "${SKIP_SOAK:-0}" != 1 ]; then
  step "soak (quick): restarts, probes and status queries; RSS, fds and pipes must stay flat"
  tests/soak/run.sh --quick
fi

if [ "${SKIP_VM:-0}" != 1 ]; then
  step "real-kernel scenarios in a VM (vigil as PID 1)"
  tests/vm/run.sh
fi
step "all tests passed"
