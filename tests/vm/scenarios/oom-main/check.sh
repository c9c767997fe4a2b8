#!/bin/sh
SCENARIO=oom-main
. /usr/local/lib/vmcheck.sh
c=pods.name=oom-main.containers.name=eater
wait_json 60 $c.restart_count '>=1' >/dev/null
# The record of the last run (while the next one runs, is in back-off, or is being OOM-killed).
expect_json $c.last_state.terminated.reason OOMKilled
expect_json $c.last_state.terminated.signal 9
expect_json $c.resources.memory_max 20971520
expect_json $c.resources.oom_kills '>=1'
wait_json 60 $c.restart_count '>=2' >/dev/null
expect_json $c.last_state.terminated.reason OOMKilled
expect_json pods.name=oom-main.phase Running
say "restart_count $(get $c.restart_count), oom_kills $(get $c.resources.oom_kills)"
pass
