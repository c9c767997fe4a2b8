#!/bin/sh
SCENARIO=oom-group
. /usr/local/lib/vmcheck.sh
c=pods.name=oom-group.containers.name=parent
wait_json 60 $c.state.terminated.reason OOMKilled >/dev/null
expect_json $c.state.terminated.signal 9
expect_json $c.restart_count 0
expect_json $c.resources.oom_kills '>=1'
# The shell died with its child: it never went on to exec sleep.
gone /bin/sleep 1000 || fail "the main shell survived the group OOM kill (sleep 1000 runs)"
gone /usr/local/bin/vmh memeat 100 || fail "the memory eater survived"
expect_json pods.name=oom-group.phase Failed
pass
