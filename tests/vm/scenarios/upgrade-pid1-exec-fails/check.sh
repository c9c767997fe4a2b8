#!/bin/sh
# vigil (PID 1) upgrades to a binary that passes every check and its pre-flight, and whose
# exec then fails (fault injection: the execve(2) gets an argument longer than the kernel
# takes, E2BIG, refused before its point of no return). Nothing changes: PID 1 is the same
# process on the same binary, the caller is told in one plain line, every container keeps its
# pid and restart count, and the supervision goes on (signals taken again: a restart is seen
# and carried out, the probe passes); then a real upgrade works.
SCENARIO=upgrade-pid1-exec-fails
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

: >/tmp/fail-exec
out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) && fail "an exec that failed was reported done: $out"
say "refused: $out"
case $out in
*"exec of /tmp/vigil-next failed: Argument list too long"*"; vigil continues unchanged"*) ;;
*) fail "unexpected answer: $out" ;;
esac
[ -e /tmp/fail-exec ] && fail "the old instance never looked at the flag file"
exe=$(readlink /proc/1/exe)
[ "$exe" = /bin/vigil ] || fail "after the failed exec PID 1 runs $exe, expected /bin/vigil"
[ "$(get $svc.pid)" = "$pid" ] || fail "svc/main pid $(get $svc.pid), was $pid"
[ "$(get $crash.restart_count)" = "$rc" ] || fail "crash/loop restart count $(get $crash.restart_count), was $rc"
expect_json $crash.state.waiting.reason CrashLoopBackOff
[ "$(get pods.name=checker.containers.name=check.pid)" = "$checker" ] || fail "the checker's own pid changed"
wait_json 30 $svc.ready true >/dev/null

# Supervision goes on: a restart is carried out (SIGCHLD taken again after the exec held it).
vigil restart svc >/dev/null 2>&1 || fail "restart svc after the failed exec failed"
wait_json 30 $svc.pid "!=$pid" >/dev/null
wait_json 30 $svc.ready true >/dev/null
pid=$(get $svc.pid)

out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) || fail "upgrade after the failed exec: $out"
say "$out"
[ "$(readlink /proc/1/exe)" = /tmp/vigil-next ] || fail "PID 1 runs $(readlink /proc/1/exe), expected /tmp/vigil-next"
[ "$(get $svc.pid)" = "$pid" ] || fail "svc/main pid changed by the upgrade"
pass
