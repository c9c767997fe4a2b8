#!/usr/bin/env bash
# Builds the static vigil the VM suites boot and the quick soak runs, and prints its path.
#
#   tests/vm/build-vigil.sh      # -> tests/vm/.cache/target-vigil/x86_64-unknown-linux-musl/vm/vigil
#
# For musl, as vigil ships (docs/performance.md, "Memory and start-up"): a static-pie whose supervisor
# allocates from dlmalloc. Profile VM_PROFILE: `vm` (the default: the release's settings, without
# the fat link-time optimisation that took more than half of a cold build) or `dist`
# (bench/vm.sh, which measures what ships). With the test-only `fault-injection` feature, whose
# hooks act only when their VIGIL_FAULT_* variables are set. Its own target dir in the VM
# cache (VM_CACHE), so `target/` is untouched and every caller after the first finds it built.
# Cargo's output goes to stderr; stdout is the path alone.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${VM_CACHE:-$HERE/.cache}
target=x86_64-unknown-linux-musl
profile=${VM_PROFILE:-vm}
"$REPO/tests/ensure-musl.sh" >&2
RUSTFLAGS="" CARGO_TARGET_DIR=$CACHE/target-vigil \
    cargo build --quiet --profile "$profile" --locked --target "$target" \
    --manifest-path "$REPO/Cargo.toml" --bin vigil --features fault-injection >&2
echo "$CACHE/target-vigil/$target/$profile/vigil"
