#!/bin/sh
SCENARIO=forkbomb
. /usr/local/lib/vmcheck.sh
c=pods.name=forkbomb.containers.name=bomb
wait_json 30 $c.state.running.started_at '!=' >/dev/null
cg=$(get $c.cgroup)
[ -n "$cg" ] && [ -d "$cg" ] || fail "status gives no cgroup directory for the bomb: '$cg'"
say "bomb cgroup $cg"
at_limit() { [ "$(cat "$cg/pids.current" 2>/dev/null || echo 0)" -ge 32 ]; }
wait_until 60 "pids.current to reach pids.max = 32" at_limit
max_hit() { [ "$(awk '$1 == "max" { print $2 }' "$cg/pids.events")" -gt 0 ]; }
wait_until 30 "pids.events max > 0" max_hit
# The supervisor still answers, several times in a row, while the bomb presses on its limit.
for i in 1 2 3 4 5; do
    expect_json $c.state.running.started_at '!='
done
expect_json $c.resources.pids_current '>=32'
vigil stop forkbomb >/dev/null || fail "vigil stop forkbomb: exit $?"
wait_json 30 $c.state.terminated.reason Stopped >/dev/null
empty() { [ ! -e "$cg/cgroup.procs" ] || [ -z "$(cat "$cg/cgroup.procs" 2>/dev/null)" ]; }
wait_until 10 "the bomb's cgroup.procs to be empty or gone" empty
[ -z "$(vmh pids /usr/local/bin/vmh forkbomb)" ] || fail "forkbomb processes remain: $(vmh pids /usr/local/bin/vmh forkbomb | tr '\n' ' ')"
sleep 1 # a stopped pod is not restarted: it must still be Stopped a moment later
expect_json $c.state.terminated.reason Stopped
pass
