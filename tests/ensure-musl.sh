#!/usr/bin/env bash
# Makes this machine able to build vigil as it ships, for x86_64-unknown-linux-musl: Rust's
# musl target (rustup) and musl's C compiler wrapper, `musl-gcc` from Debian's musl-tools, which
# the `cc` crate falls back to when no x86_64-linux-musl-gcc exists (ring builds C and assembly).
# Idempotent and quiet when both are there; called by tests/run-all.sh, tests/vm/build-vigil.sh,
# tests/soak/run.sh and bench/run.sh, so each works on a fresh machine on its own.
set -euo pipefail
target=x86_64-unknown-linux-musl
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target" >&2
if ! command -v x86_64-linux-musl-gcc >/dev/null 2>&1 && ! command -v musl-gcc >/dev/null 2>&1; then
    as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }
    echo "ensure-musl: installing musl-tools (apt), musl's C compiler for the musl build" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends musl-tools >/dev/null 2>&1 ||
        { as_root apt-get update -qq >/dev/null &&
          as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends musl-tools >/dev/null; }
fi
