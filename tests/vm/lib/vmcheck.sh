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

# The upgrade scenarios (upgrade-pid1*): what an upgrade, or a way back after a failed one,
# must not change. Their config has svc/main (ready through an exec probe), crash/loop (in a
# 60 s back-off) and this checker.
SVC=pods.name=svc.containers.name=main
CRASH=pods.name=crash.containers.name=loop
CHECKER=pods.name=checker.containers.name=check

# snapshot: once svc/main is ready and crash/loop in its back-off, keep svc/main's pid (PID),
# crash/loop's restart count (RC) and the checker's pid, and put a copy of /bin/vigil at
# /tmp/vigil-next (mode 755) to upgrade to.
snapshot() {
    wait_json 60 $SVC.ready true >/dev/null
    wait_json 60 $CRASH.state.waiting.reason CrashLoopBackOff >/dev/null
    PID=$(get $SVC.pid)
    RC=$(get $CRASH.restart_count)
    _checker=$(get $CHECKER.pid)
    [ -n "$PID" ] && [ -n "$RC" ] && [ -n "$_checker" ] || fail "no pid or restart count before the upgrade"
    cp /bin/vigil /tmp/vigil-next || fail "cannot copy /bin/vigil"
    chmod 755 /tmp/vigil-next
}

# same_as_before WHEN: svc/main has the pid PID and crash/loop the restart count RC and its
# back-off, the checker its pid, as at the snapshot (or since PID was last set); WHEN ("after
# the way back") names the moment in the failure.
same_as_before() {
    [ "$(get $SVC.pid)" = "$PID" ] || fail "$1: svc/main pid $(get $SVC.pid), was $PID"
    [ "$(get $CRASH.restart_count)" = "$RC" ] || fail "$1: crash/loop restart count $(get $CRASH.restart_count), was $RC"
    expect_json $CRASH.state.waiting.reason CrashLoopBackOff
    [ "$(get $CHECKER.pid)" = "$_checker" ] || fail "$1: the checker's own pid $(get $CHECKER.pid), was $_checker"
}

# restart_svc WHEN: supervision goes on: a restart of svc is carried out (its exit seen, a new
# process started and ready); PID becomes the new pid.
restart_svc() {
    vigil restart svc >/dev/null 2>&1 || fail "restart svc $1 failed"
    wait_json 30 $SVC.pid "!=$PID" >/dev/null
    wait_json 30 $SVC.ready true >/dev/null
    PID=$(get $SVC.pid)
}

# upgrade_works WHEN: a real upgrade to /tmp/vigil-next succeeds: PID 1 runs it and svc/main
# keeps its pid.
upgrade_works() {
    _out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) || fail "upgrade $1: $_out"
    say "$_out"
    [ "$(readlink /proc/1/exe)" = /tmp/vigil-next ] || fail "PID 1 runs $(readlink /proc/1/exe) $1, expected /tmp/vigil-next"
    [ "$(get $SVC.pid)" = "$PID" ] || fail "svc/main pid changed by the upgrade $1"
}

# The supervisor is answering and lists this checker.
wait_json 30 pods.name=checker.name checker >/dev/null
say "vigil answers; checking"
