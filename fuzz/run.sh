#!/usr/bin/env bash
# Runs every vigil fuzz target with cargo-fuzz (libFuzzer + AddressSanitizer) for SECONDS each
# (default 25), starting from the committed corpus in fuzz/corpus/<target>/ (FUZZ_GROW=1 adds
# what it finds there; otherwise new inputs go to fuzz/target/scratch-corpus/).
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Works on the stable toolchain: RUSTC_BOOTSTRAP=1 lets stable rustc accept the
# -Zsanitizer / -Cpasses flags cargo-fuzz passes (a nightly toolchain works too; set
# FUZZ_TOOLCHAIN=nightly). Installs cargo-fuzz from crates.io if it is missing (about 2.5 min
# on a 2-core machine; building the targets the first time takes about 5 min more).
#
# A crash leaves its input in fuzz/artifacts/<target>/; copy it to fuzz/regressions/<target>/
# so `cargo test --test fuzz_replay` replays it forever, and add a unit test in the module
# that was at fault. Plain `cargo test` (CI) always replays the corpus and the regressions
# without cargo-fuzz.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-25}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(config control_request http_response grpc_response hpack cgroup_files core_sequence manifest metrics_request)
fi
toolchain=${FUZZ_TOOLCHAIN:-stable}
# cargo-fuzz optimises the targets as one codegen unit unless told otherwise: vigil's library
# then takes ~5 min alone to build on 2 cores. 16 units build it in parallel, at some cost in
# executions a second (FUZZ_CODEGEN_UNITS=1 for long runs by hand). `fuzz run` must be given
# the same flags as `fuzz build`, or it rebuilds.
opts=(-O --codegen-units "${FUZZ_CODEGEN_UNITS:-16}")
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: installing cargo-fuzz from crates.io" >&2
    cargo install --locked cargo-fuzz
fi

for t in "${targets[@]}"; do cargo "+$toolchain" fuzz build "${opts[@]}" "$t"; done

failed=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    # New inputs go to a scratch directory unless FUZZ_GROW=1 asks to grow the committed
    # corpus (then minimise it with `cargo fuzz cmin` before committing).
    if [ "${FUZZ_GROW:-0}" = 1 ]; then
        dirs=("corpus/$t")
    else
        scratch="target/scratch-corpus/$t"
        mkdir -p "$scratch"
        dirs=("$scratch" "corpus/$t")
    fi
    echo "== fuzz $t for ${seconds}s" >&2
    if ! cargo "+$toolchain" fuzz run "${opts[@]}" "$t" "${dirs[@]}" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
        2>"artifacts-$t.log"; then
        failed+=("$t")
        tail -n 40 "artifacts-$t.log" >&2
    else
        grep -E '^(stat::number_of_executed_units|stat::new_units_added|#[0-9]+.*DONE)' \
            "artifacts-$t.log" >&2 || true
    fi
    rm -f "artifacts-$t.log"
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz/run.sh: crashes in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz/run.sh: ${#targets[@]} targets ran ${seconds}s each without a crash"
