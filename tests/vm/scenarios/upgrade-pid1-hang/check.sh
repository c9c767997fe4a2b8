#!/bin/sh
# vigil (PID 1) upgrades to a binary that hangs in the middle of its takeover (fault injection:
# after the components took the descriptors handed over, before the caller is answered). There
# is no guardian as PID 1; the new instance's alarm ends the hang after 10 s and it executes the
# old binary again with the same state: the guest does not panic, PID 1 runs the old binary,
# the containers kept running throughout and keep their pids and restart counts, the caller
# is told in one plain line; then a real upgrade works.
SCENARIO=upgrade-pid1-hang
. /usr/local/lib/vmcheck.sh
snapshot

: >/tmp/hang-takeover
start=$(uptime_s)
out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) && fail "a takeover that hung was reported done: $out"
took=$(awk -v a="$start" -v b="$(uptime_s)" 'BEGIN { printf "%d", b - a }')
say "fell back after ${took}s: $out"
case $out in
*"upgrade failed, vigil continues unchanged: the new vigil could not take over: the new vigil was not ready 10 s after the exec"*) ;;
*) fail "unexpected answer: $out" ;;
esac
[ "$took" -ge 9 ] || fail "the answer came after ${took}s, before the takeover's 10 s alarm"
[ -e /tmp/hang-takeover ] && fail "the new instance never looked at the flag file"
kill -0 "$PID" 2>/dev/null || fail "svc/main (pid $PID) did not survive the hang"
exe=$(readlink /proc/1/exe)
[ "$exe" = /bin/vigil ] || fail "after the way back PID 1 runs $exe, expected /bin/vigil"
same_as_before "after the way back"
wait_json 30 $SVC.ready true >/dev/null

# Supervision goes on: a restart is carried out (its exit seen, a new process started).
restart_svc "after the way back"

upgrade_works "after the way back"
pass
