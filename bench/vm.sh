#!/usr/bin/env bash
# vigil's figures on a real kernel: boots the QEMU guests of tests/vm/bench-scenarios through
# the VM harness (tests/vm/run.sh, which it accepts the options and environment of) and prints
# a table of what their checkers measured (VIGIL-VM-BENCH lines on the guest console).
#
#   bench/vm.sh [BENCH…]        # bench-boot20 bench-start200 bench-oom-delay (default: all)
#   BENCH_RUNS=3 bench/vm.sh    # boot each one 3 times: one table row per run
#
# The guest has one CPU under TCG emulation, so the absolute figures are those of a slow
# machine; compare them between vigil versions on the same host. See tests/vm/README.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
VM=$REPO/tests/vm
CACHE=${VM_CACHE:-$VM/.cache}
RUNS=${BENCH_RUNS:-1}
export VM_SCENARIOS=$VM/bench-scenarios
# The figures are those of the build as it ships (profile dist; the test scenarios use the
# quicker `vm` profile, the release's settings without fat LTO).
export VM_PROFILE=${VM_PROFILE:-dist}

names=()
opts=()
for a in "$@"; do
    case $a in
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    -*) opts+=("$a") ;;
    *) names+=("$a") ;;
    esac
done
if ((${#names[@]} == 0)); then
    for d in "$VM_SCENARIOS"/*/; do names+=("$(basename "$d")"); done
fi

rows=()
for ((run = 1; run <= RUNS; run++)); do
    "$VM/run.sh" "${opts[@]}" "${names[@]}" >&2 || { echo "bench/vm.sh: a bench scenario failed (see above)" >&2; exit 1; }
    for n in "${names[@]}"; do
        while IFS= read -r line; do
            rows+=("$run|${line#*VIGIL-VM-BENCH: }")
        done < <(grep -a 'VIGIL-VM-BENCH: ' "$CACHE/logs/$n.log" | tr -d '\r')
    done
done

echo
printf '%-3s  %-26s %10s  %-13s %s\n' run figure value unit note
printf '%s\n' "${rows[@]}" | while IFS='|' read -r run rest; do
    read -r name value unit note <<<"$rest"
    printf '%-3s  %-26s %10s  %-13s %s\n' "$run" "$name" "$value" "$unit" "$note"
done
