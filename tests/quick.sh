#!/usr/bin/env bash
# The quick tier, for every commit: formatting, lint and every cargo test (the root-only ones
# included, so run it as root), after the same installs as the full run. Under 10 minutes on
# 2 cores with a warm target/; the full run (tests/run-all.sh, CI's) adds the benchmark budget,
# fuzzing, the soak and the VM suites.
set -euo pipefail
cd "$(dirname "$0")/.."
SKIP_BUDGET=1 SKIP_FUZZ=1 SKIP_SOAK=1 SKIP_VM=1 exec tests/run-all.sh "$@"
