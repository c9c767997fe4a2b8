#!/bin/sh
# vigil (PID 1) upgrades to a binary that aborts in the middle of its takeover (fault
# injection: after the components took the descriptors handed over, before the caller is
# answered). There is no guardian as PID 1; the new instance keeps the way back itself and
# executes the old binary again with the same state: the guest does not panic, PID 1 runs the
# old binary, the containers keep their pids and restart counts, the caller is told; then a
# real upgrade works.
SCENARIO=upgrade-pid1-abort
. /usr/local/lib/vmcheck.sh
snapshot

: >/tmp/abort-takeover
out=$(vigil upgrade --binary /tmp/vigil-next 2>&1) && fail "a takeover that aborted was reported done: $out"
say "fell back: $out"
case $out in *"killed by signal 6"*) ;; *) fail "unexpected answer: $out" ;; esac
[ -e /tmp/abort-takeover ] && fail "the new instance never looked at the flag file"
exe=$(readlink /proc/1/exe)
[ "$exe" = /bin/vigil ] || fail "after the way back PID 1 runs $exe, expected /bin/vigil"
same_as_before "after the way back"
wait_json 30 $SVC.ready true >/dev/null

upgrade_works "after the way back"
pass
