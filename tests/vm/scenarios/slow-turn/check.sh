#!/bin/sh
# vigil (PID 1) with a loop turn held 300 ms by one of its chores (fault injection, while
# /tmp/slow-turn exists; at most once a second): the self-watchdog names the chore and the
# turn's length on the console (see `expect`), vigil keeps answering meanwhile, and once the
# file is gone supervision goes on: a restart of svc is carried out.
SCENARIO=slow-turn
. /usr/local/lib/vmcheck.sh

wait_json 60 $SVC.ready true >/dev/null
PID=$(get $SVC.pid)
[ -n "$PID" ] || fail "no pid for svc/main"

: >/tmp/slow-turn
say "slow chore on"
# The probe and these requests make turns; a few of them are slow.
i=0
while [ $i -lt 6 ]; do
    [ "$(get $SVC.ready)" = true ] || fail "svc/main not ready while the turns were slow"
    sleep 0.5
    i=$((i + 1))
done
rm -f /tmp/slow-turn
say "slow chore off"

# Supervision goes on: a restart is carried out (its exit seen, a new process started, ready).
restart_svc "after the slow turns"
pass
