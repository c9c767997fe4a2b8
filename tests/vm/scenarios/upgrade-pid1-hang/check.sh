#!/bin/sh
# vigil (PID 1) upgrades to a binary that hangs in the middle of its takeover (fault injection:
# after the components took the descriptors handed over, before the caller is answered). There
# is no guardian as PID 1; the new instance's alarm ends the hang after 10 s and it executes the
# old binary again with the same state: the guest does not panic, PID 1 runs the old binary,
# the containers kept running throughout and keep their pids and restart counts, the caller
# is told in one plain line; then a real upgrade works.
SCENARIO=upgrade-pid1-hang
. /usr/local/lib/vmcheck.sh
svc=pods.name=svc.containers.name=main
crash=pods.name=crash.containers.name=loop
wait_json 60 $svc.ready true >/dev/null
wait_json 60 $crash.state.waiting.reason CrashLoopBackOff >/dev/null
pid=$(get $svc.pid)
rc=$(get $crash.restart_count)
checker=$(get pods.name=checker.containers.name=check.pid)
[ -n "$pid" ] && [ -n "$rc" ] || fail "no pid or restart count before the upgrade"
cp /bin/vigil /tmp/vigil-next || fail "cannot copy /bin/vigil"
chmod 755 /tmp/vigil-next

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
kill -0 "$pid" 2>/dev/null || fail "svc/main (pid $pid) did not survive the hang"
exe=$(readlink /proc/1/exe)
[ "$exe" = /bin/vigil ] || fail "after the way back PID 1 runs $exe, expected /bin/vigil"
[ "$(get $svc.pid)" = "$pid" ] || fail "svc/main pid $(get $svc.pid), was $pid"
[ "$(get $crash.restart_count)" = "$rc" ] || fail "crash/loop restart count $(get $crash.restart_count), was $rc"
expect_json $crash.state.waiting.reason CrashLoopBackOff
[ "$(get pods.name=checker.containers.name=check.pid)" = "$checker" ] || fail "the checker's own pid changed"
wait_json 30 $svc.ready true >/dev/null

# Supervision goes on: a restart is carried out (its exit seen, a new process started).
vigil restart svc >/dev/null 2>&1 || fail "restart svc after the way back failed"
wait_json 30 $svc.pid "!=$pid" >/dev/null
wait_json 30 $svc.ready true >/dev/null
pid=$(get $svc.pid)

out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) || fail "upgrade after the way back: $out"
say "$out"
[ "$(readlink /proc/1/exe)" = /tmp/vigil-next ] || fail "PID 1 runs $(readlink /proc/1/exe), expected /tmp/vigil-next"
[ "$(get $svc.pid)" = "$pid" ] || fail "svc/main pid changed by the upgrade"
pass
