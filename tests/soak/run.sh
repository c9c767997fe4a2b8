#!/usr/bin/env bash
# vigil soak test (CI runs --quick): 10,000 restarts of crash-looping containers, 100,000
# tcp probes and 100,000 status queries against one vigil; prints vigil's RSS, open
# descriptors and pipes at start and end, and checks for zombies, leftover cgroups and
# orphans after shutdown. Needs python3; uses a scratch cgroup under the cgroup2 mount when
# writable (root), else runs without cgroups.
#
#   tests/soak/run.sh            # the full run (a few minutes)
#   tests/soak/run.sh --quick    # a tenth of everything, debug build (about a minute)
# Both build vigil for musl, as it ships.
#   tests/soak/run.sh --restarts N --probes N --queries N ...   (see soak.py --help)
set -euo pipefail
cd "$(dirname "$0")/../.."
args=()
profile=release
if [ "${1:-}" = "--quick" ]; then
    shift
    args=(--restarts 1000 --probes 10000 --queries 10000 --timeout 100)
    # The quick soak (CI's) runs a debug build: what it checks is that nothing grows, and a
    # release build would add minutes of link-time optimisation to CI for it. Either way for
    # musl, as vigil ships (README, "Memory and start-up"): the supervisor's allocator there is
    # not glibc's, and it is the one whose flatness counts (a debug build also runs its
    # consistency assertions).
    profile=debug
fi
target=x86_64-unknown-linux-musl
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"
if [ "$profile" = release ]; then cargo build --release --quiet --target "$target"
else cargo build --quiet --target "$target"; fi
exec python3 tests/soak/soak.py --vigil "target/$target/$profile/vigil" "${args[@]}" "$@"
