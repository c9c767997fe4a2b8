#!/bin/sh
SCENARIO=oom-child
. /usr/local/lib/vmcheck.sh
c=pods.name=oom-child.containers.name=parent
wait_json 60 $c.resources.oom_kills '>=1' >/dev/null
# The shell goes on to exec sleep: the container never terminated.
wait_until 30 "the main process to exec sleep 1000" running /bin/sleep 1000
expect_json $c.state.running.started_at '!='
expect_json $c.restart_count 0
expect_json $c.last_state '{}'
expect_json pods.name=oom-child.phase Running
has_oom_event() {
    # One event object per line, whatever the JSON layout.
    vigil events -o json 2>/dev/null | tr -d '\n' | tr '}' '\n' | grep '"OOMKilling"' | grep -q 'oom-child/parent'
}
wait_until 30 "an OOMKilling event for oom-child/parent in vigil events -o json" has_oom_event
if vigil events -o json 2>/dev/null | grep -q '"OOMKilled"'; then
    fail "an event says OOMKilled although only a child was killed"
fi
pass
