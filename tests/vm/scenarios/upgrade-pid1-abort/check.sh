#!/bin/sh
# vigil (PID 1) upgrades to a binary that aborts in the middle of its takeover (fault
# injection: after the components took the descriptors handed over, before the caller is
# answered). There is no guardian as PID 1; the new instance keeps the way back itself and
# executes the old binary again with the same state: the guest does not panic, PID 1 runs the
# old binary, the containers keep their pids and restart counts, the caller is told; then a
# real upgrade works.
SCENARIO=upgrade-pid1-abort
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

: >/tmp/abort-takeover
out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) && fail "a takeover that aborted was reported done: $out"
say "fell back: $out"
case $out in *"killed by signal 6"*) ;; *) fail "unexpected answer: $out" ;; esac
[ -e /tmp/abort-takeover ] && fail "the new instance never looked at the flag file"
exe=$(readlink /proc/1/exe)
[ "$exe" = /bin/vigil ] || fail "after the way back PID 1 runs $exe, expected /bin/vigil"
[ "$(get $svc.pid)" = "$pid" ] || fail "svc/main pid $(get $svc.pid), was $pid"
[ "$(get $crash.restart_count)" = "$rc" ] || fail "crash/loop restart count $(get $crash.restart_count), was $rc"
expect_json $crash.state.waiting.reason CrashLoopBackOff
[ "$(get pods.name=checker.containers.name=check.pid)" = "$checker" ] || fail "the checker's own pid changed"
wait_json 30 $svc.ready true >/dev/null

out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) || fail "upgrade after the way back: $out"
say "$out"
[ "$(readlink /proc/1/exe)" = /tmp/vigil-next ] || fail "PID 1 runs $(readlink /proc/1/exe), expected /tmp/vigil-next"
[ "$(get $svc.pid)" = "$pid" ] || fail "svc/main pid changed by the upgrade"
pass
