#!/bin/sh
# vigil (PID 1) re-executes itself: first a copy of its binary at another path through
# `vigil upgrade --binary`, then (SIGUSR2) the path it now runs from. Each time: PID 1 still
# runs (the guest did not panic), the containers keep their pids, the crash loop its restart
# count and back-off, the probe keeps the service ready; a binary that is not vigil is refused
# and changes nothing; a new instance that cannot take over goes back to the old binary.
SCENARIO=upgrade-pid1
. /usr/local/lib/vmcheck.sh
snapshot

out=$(vigil upgrade --check --binary /tmp/vigil-next 2>&1) || fail "upgrade --check: $out"
say "$out"
out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) || fail "upgrade: $out"
say "$out"
exe=$(readlink /proc/1/exe)
[ "$exe" = /tmp/vigil-next ] || fail "PID 1 runs $exe, expected /tmp/vigil-next"
same_as_before "after the upgrade"

out=$(vigil upgrade --binary /bin/busybox 2>&1) && fail "busybox was accepted: $out"
say "refused: $out"
[ "$(readlink /proc/1/exe)" = /tmp/vigil-next ] || fail "a refused upgrade changed PID 1's binary"

# A new instance that cannot take the state over goes back to the old binary, which carries on
# and tells the caller (fault injection: the flag file makes the new instance refuse).
cp /bin/vigil /tmp/vigil-third && chmod 755 /tmp/vigil-third
: >/tmp/refuse-handoff
out=$(vigil upgrade --binary /tmp/vigil-third 2>&1) && fail "a refused handoff was reported done: $out"
say "fell back: $out"
case $out in *"could not take over"*) ;; *) fail "unexpected answer: $out" ;; esac
[ -e /tmp/refuse-handoff ] && fail "the new instance never looked at the flag file"
exe=$(readlink /proc/1/exe)
[ "$exe" = /tmp/vigil-next ] || fail "after the way back PID 1 runs $exe, expected /tmp/vigil-next"
same_as_before "after the way back"

kill -USR2 1 || fail "kill -USR2 1"
# The second upgrade is done once vigil answers again (connections made meanwhile wait).
sleep 1
wait_json 30 $SVC.ready true >/dev/null
same_as_before "after SIGUSR2"
exe=$(readlink /proc/1/exe)
[ "$exe" = /tmp/vigil-next ] || fail "SIGUSR2 executed $exe, expected /tmp/vigil-next (the binary before the refused upgrade)"
pass
