#!/bin/sh
# vigil (PID 1) upgrades to a binary that passes every check and its pre-flight, and whose
# exec then fails (fault injection: the execve(2) gets an argument longer than the kernel
# takes, E2BIG, refused before its point of no return). Nothing changes: PID 1 is the same
# process on the same binary, the caller is told in one plain line, every container keeps its
# pid and restart count, and the supervision goes on (signals taken again: a restart is seen
# and carried out, the probe passes); then a real upgrade works.
SCENARIO=upgrade-pid1-exec-fails
. /usr/local/lib/vmcheck.sh
snapshot

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
same_as_before "after the failed exec"
wait_json 30 $SVC.ready true >/dev/null

# Supervision goes on: a restart is carried out (SIGCHLD taken again after the exec held it).
restart_svc "after the failed exec"

upgrade_works "after the failed exec"
pass
