# Shared by every scenario's /check.sh (busybox sh): `. /usr/local/lib/vmcheck.sh` after
# setting SCENARIO. The checker runs as a vigil container; it prints exactly one verdict line
#   VIGIL-VM-RESULT: PASS <scenario>     or     VIGIL-VM-RESULT: FAIL <scenario>: <why>
# on the console, then asks vigil to shut down (which powers the guest off).

export PATH=/bin:/sbin:/usr/bin:/usr/local/bin:$PATH
# VMCHECK_OUT and VMCHECK_NO_WAIT exist to try a checker outside the guest with a fake vigil.
VMCHECK_OUT=${VMCHECK_OUT:-/dev/console}
: "${SCENARIO:?set SCENARIO before sourcing vmcheck.sh}"

# Written to /dev/console directly, so the verdict does not depend on vigil forwarding
# container output; falls back to stdout.
console() {
    if [ -w "$VMCHECK_OUT" ]; then
        printf '%s\n' "$*" >>"$VMCHECK_OUT"
    else
        printf '%s\n' "$*"
    fi
}

say() { console "check[$SCENARIO]: $*"; }

# Seconds since boot with centiseconds: the guest's monotonic clock for deadlines.
uptime_s() { cut -d' ' -f1 /proc/uptime; }

finish() {
    vigil shutdown >/dev/null 2>&1 || say "vigil shutdown failed (exit $?)"
    [ -n "${VMCHECK_NO_WAIT:-}" ] && exit 0
    # vigil stops this container as part of the shutdown; do not race it with our own exit.
    sleep 1000
}

pass() {
    dmesg -n 1 2>/dev/null # keep kernel chatter from splitting the verdict line
    console "VIGIL-VM-RESULT: PASS $SCENARIO"
    finish
}

# fail WHY…: print the verdict, then what helps to understand it.
fail() {
    dmesg -n 1 2>/dev/null
    console "VIGIL-VM-RESULT: FAIL $SCENARIO: $*"
    {
        echo "---- vigil status -o wide"
        vigil status -o wide 2>&1
        echo "---- vigil status -o json"
        vigil status -o json 2>&1
        echo "---- vigil events"
        vigil events 2>&1
        echo "---- vmh cgroups"
        vmh cgroups 2>&1
        echo "---- ps"
        ps 2>&1
    } | while IFS= read -r l; do console "diag[$SCENARIO]: $l"; done
    finish
}

status_json() { vigil status -o json; }

# get PATH: the value at a dotted path of `vigil status -o json` (empty if absent).
get() { vigil status -o json 2>/dev/null | vmh json "$1" 2>/dev/null; }

# wait_json SECS PATH EXPECTED: poll the status until PATH matches EXPECTED (see vmh wait-json:
# `>=1`, `!=x` … allowed), or fail the scenario with what was last seen.
wait_json() {
    _out=$(vmh wait-json "$1" vigil status -o json -- "$2" "$3" 2>&1) || fail "$_out"
    printf '%s\n' "$_out"
}

# expect_json PATH EXPECTED: a one-shot check of the status.
expect_json() { wait_json 0 "$1" "$2" >/dev/null; }

# wait_until SECS DESCRIPTION CMD…: run CMD every 0.1 s until it succeeds, or fail.
wait_until() {
    _secs=$1 _what=$2
    shift 2
    _deadline=$(awk -v u="$(uptime_s)" -v s="$_secs" 'BEGIN { print u + s }')
    until "$@"; do
        if awk -v u="$(uptime_s)" -v d="$_deadline" 'BEGIN { exit !(u > d) }'; then
            fail "timed out after ${_secs}s waiting for: $_what"
        fi
        sleep 0.1
    done
}

# running CMDLINE… / gone CMDLINE…: whether a process with exactly this command line exists
# (for wait_until, which re-runs its command: a "$(…)" argument would be expanded only once).
running() { [ -n "$(vmh pids "$@")" ]; }
gone() { [ -z "$(vmh pids "$@")" ]; }

# The supervisor is answering and lists this checker.
wait_json 30 pods.name=checker.name checker >/dev/null
say "vigil answers; checking"
