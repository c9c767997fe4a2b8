#!/bin/sh
SCENARIO=grandchild
. /usr/local/lib/vmcheck.sh
c=pods.name=grandchild.containers.name=main
wait_until 60 "the grandchild sleep 1000" running /bin/sleep 1000
gc=$(vmh pids /bin/sleep 1000 | head -n1)
ppid=$(awk '{ print $4 }' /proc/$gc/stat)
sid=$(awk '{ print $6 }' /proc/$gc/stat)
[ "$ppid" = 1 ] || fail "grandchild $gc has parent $ppid, expected 1 (re-parented)"
[ "$sid" = "$gc" ] || fail "grandchild $gc is not a session leader (session $sid)"
grep -q grandchild/main /proc/$gc/cgroup || fail "grandchild $gc is not in the container's cgroup: $(cat /proc/$gc/cgroup)"
vigil stop grandchild >/dev/null || fail "vigil stop grandchild: exit $?"
wait_json 30 $c.state.terminated.reason Stopped >/dev/null
wait_until 10 "no sleep 1000 left" gone /bin/sleep 1000
[ -z "$(vmh pids /bin/sleep 2000)" ] || fail "the main process survived the stop"
pass
