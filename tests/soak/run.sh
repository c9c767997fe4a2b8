#!/usr/bin/env bash
# vigil soak test (CI runs --quick): 10,000 restarts of crash-looping containers, 100,000
# tcp probes and 100,000 status queries against one vigil; prints vigil's RSS, open
# descriptors and pipes at start and end, and checks for zombies, leftover cgroups and
# orphans after shutdown. Needs python3; uses a scratch cgroup under the cgroup2 mount when
# writable (root), else runs without cgroups.
#
#   tests/soak/run.sh            # the full run (a few minutes)
#   tests/soak/run.sh --quick    # a tenth of everything, the VM suite's build (about a minute)
#   tests/soak/run.sh --restarts N --probes N --queries N ...   (see soak.py --help)
#
# Both run vigil built for musl, as it ships.
set -euo pipefail
cd "$(dirname "$0")/../.."
args=()
profile=release
if [ "${1:-}" = "--quick" ]; then
    shift
    args=(--restarts 1000 --probes 10000 --queries 10000 --timeout 100)
    # The quick soak (CI's) runs the static musl build the VM suite boots
    # (tests/vm/build-vigil.sh: the release's optimisation without link-time optimisation, with
    # fault-injection hooks that act only when their variables are set): one build for both
    # steps, and the supervisor's allocator is the release's, whose flatness is what counts.
    profile=vm
fi
if [ "$profile" = vm ]; then
    vigil=$(tests/vm/build-vigil.sh)
else
    # The full soak: the build as it ships (profile dist; README, "Quick tour").
    target=x86_64-unknown-linux-musl
    tests/ensure-musl.sh
    cargo build --profile dist --quiet --target "$target"
    vigil=target/$target/dist/vigil
fi
exec python3 tests/soak/soak.py --vigil "$vigil" "${args[@]}" "$@"
