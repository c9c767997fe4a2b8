#!/usr/bin/env bash
# vigil benchmarks side by side with peer supervisors, in one run.
#
#   bench/run.sh                  # install the peers, build vigil (release), run everything
#                                 #   (~20 min), print tables; results in target/bench/results.json
#   bench/run.sh --quick --check  # a few seconds, vigil only: idle RSS, restart reaction and
#                                 #   status of 100 pods
#                                 #   against bench/budget.json (used by tests/run-all.sh)
#   bench/run.sh --with-horust    # also build Horust from crates.io (~3 min) and compare it
#   bench/run.sh --no-install     # use the peers already installed
#   bench/run.sh --rounds 1 --sizes 10,200 --tools vigil,runit ...   # see bench/bench.py --help
#   bench/run.sh --no-install --tools vigil --only probes        # the probe workload alone: 500/s and 5,000/s (~2 min)
#   bench/run.sh --no-install --tools vigil --only upgrade       # the loop's time away during
#                                                                #   vigil upgrade at 10/200/1000
#   bench/run.sh --no-install --tools vigil --only hostile       # restart gap, status latency and
#                                                                #   probe lateness with and without
#                                                                #   hostile clients
#   bench/run.sh --no-install --tools vigil --only logs          # log throughput into the ring
#                                                                #   and into log_dir files, with
#                                                                #   status latency meanwhile
#   bench/run.sh --no-install --tools vigil --only statefile     # vigil's CPU per second at 500
#                                                                #   containers without cgroups
#                                                                #   (the state file's scan);
#                                                                #   --statefile-against OLD_BIN
#                                                                #   measures another build too
#   bench/run.sh --no-install --tools vigil --only metrics       # GET /metrics with 1,000
#                                                                #   containers; restart gap and
#                                                                #   probe lateness, scraped or not
#   bench/run.sh --no-install --tools vigil --only frozen        # restart gap of a crash-looping
#                                                                #   bystander with 10 exec-probed
#                                                                #   containers unfrozen, then their
#                                                                #   cgroups frozen (issue 36; root)
#   bench/run.sh --no-install --tools vigil --only probes --probe-mix http-https-grpc
#                                 # the same with a third each of HTTP, HTTPS and gRPC probes
#
# Peers come from the package registries: supervisord (PyPI `supervisor`), runit and s6
# (Debian). Nothing of theirs is kept in the repository. Needs root for apt and for vigil's
# cgroups (without root vigil runs with cgroup_root = "none").
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 install=1 horust=0 release=0 pass=()
for a in "$@"; do
  case "$a" in
    --quick) quick=1; pass+=("$a") ;;
    --no-install) install=0 ;;
    --with-horust) horust=1; pass+=("$a") ;;
    --release) release=1 ;;
    *) pass+=("$a") ;;
  esac
done

mkdir -p target/bench
stamp=target/bench/vbstamp
probesrv=target/bench/vbprobesrv
logflood=target/bench/vblogflood
logfloor=target/bench/vblogfloor
statusload=target/bench/vbstatusload
spawnfloor=target/bench/vbspawnfloor
cc_bin=$(command -v cc || command -v gcc || true)
build_stamp() {
  # The C helpers (bench/*.c): the restart stamp, the probe benchmark's listener, the log
  # producer and the ring's floor, the status clients and the start-up floor.
  if [ -n "$cc_bin" ]; then
    if [ ! -x "$stamp" ] || [ bench/stamp.c -nt "$stamp" ]; then
      "$cc_bin" -O2 -static -o "$stamp" bench/stamp.c 2>/dev/null ||
        "$cc_bin" -O2 -o "$stamp" bench/stamp.c
    fi
    echo "--stamp=$stamp"
    if [ "$quick" = 0 ]; then
      if [ ! -x "$probesrv" ] || [ bench/probesrv.c -nt "$probesrv" ]; then
        "$cc_bin" -O2 -static -o "$probesrv" bench/probesrv.c 2>/dev/null ||
          "$cc_bin" -O2 -o "$probesrv" bench/probesrv.c
      fi
      echo "--probesrv=$probesrv"
      # The log workload's producer and the 8-client status load (bench/logflood.c,
      # bench/statusload.c): compiled, so the figure is vigil's, not the load generator's.
      if [ ! -x "$logflood" ] || [ bench/logflood.c -nt "$logflood" ]; then
        "$cc_bin" -O2 -static -o "$logflood" bench/logflood.c 2>/dev/null ||
          "$cc_bin" -O2 -o "$logflood" bench/logflood.c
      fi
      echo "--logflood=$logflood"
      # The ring figure's floor: a reader of the same producer that does nothing else.
      if [ ! -x "$logfloor" ] || [ bench/logfloor.c -nt "$logfloor" ]; then
        "$cc_bin" -O2 -static -o "$logfloor" bench/logfloor.c 2>/dev/null ||
          "$cc_bin" -O2 -o "$logfloor" bench/logfloor.c
      fi
      echo "--logfloor=$logfloor"
      if [ ! -x "$statusload" ] || [ bench/statusload.c -nt "$statusload" ]; then
        "$cc_bin" -O2 -pthread -static -o "$statusload" bench/statusload.c 2>/dev/null ||
          "$cc_bin" -O2 -pthread -o "$statusload" bench/statusload.c
      fi
      echo "--statusload=$statusload"
      # The start-up floor of the idle workload: plain fork+exec of the same children.
      if [ ! -x "$spawnfloor" ] || [ bench/spawnfloor.c -nt "$spawnfloor" ]; then
        "$cc_bin" -O2 -static -o "$spawnfloor" bench/spawnfloor.c 2>/dev/null ||
          "$cc_bin" -O2 -o "$spawnfloor" bench/spawnfloor.c
      fi
      echo "--spawnfloor=$spawnfloor"
    fi
  fi
}

# The build as it ships (README, "Quick tour"): profile dist (fat LTO), a static-pie for musl.
# bench.py's `--profile release` names the budget class (an optimised build), not cargo's profile.
release_target=x86_64-unknown-linux-musl
release_vigil=target/$release_target/dist/vigil
build_release() {
  tests/ensure-musl.sh
  cargo build --profile dist --quiet --target "$release_target"
}

if [ "$quick" = 1 ]; then
  # The quick check uses the debug build that `cargo test` just made, unless --release.
  if [ "$release" = 1 ]; then profile=release; build_release; vigil=$release_vigil
  else profile=debug; cargo build --quiet; vigil=target/debug/vigil; fi
  exec python3 bench/bench.py --vigil "$vigil" --profile "$profile" \
    $(build_stamp) "${pass[@]}"
fi

if [ "$install" = 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    need=()
    command -v runsvdir >/dev/null || need+=(runit)
    command -v s6-svscan >/dev/null || need+=(s6)
    command -v cc >/dev/null || need+=(gcc libc6-dev)
    if [ ${#need[@]} -gt 0 ]; then
      echo "installing ${need[*]} (apt)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; } ||
        echo "apt could not install ${need[*]}; those peers are skipped"
    fi
  fi
  if ! command -v supervisord >/dev/null; then
    echo "installing supervisor (pip)"
    python3 -m pip install -q supervisor || echo "pip could not install supervisor; skipped"
    command -v pyenv >/dev/null && pyenv rehash || true
  fi
  if ! python3 -c 'import grpc, grpc_health.v1.health' 2>/dev/null; then
    echo "installing grpcio and grpcio-health-checking (pip; the mixed probe workload's gRPC listener)"
    python3 -m pip install -q grpcio grpcio-health-checking || echo "pip could not install grpcio"
  fi
  if [ "$horust" = 1 ] && ! command -v horust >/dev/null; then
    echo "building horust from crates.io (about 3 min)"
    cargo install --locked -q horust horustctl || echo "horust did not build; skipped"
  fi
fi
cc_bin=$(command -v cc || command -v gcc || true)
build_release
exec python3 bench/bench.py --vigil "$release_vigil" --profile release $(build_stamp) "${pass[@]}"
