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
# The metrics exposition counts the same OOM kill (docs/metrics.md).
m=$(vigil metrics 2>&1) || fail "vigil metrics failed: $m"
line=$(printf '%s\n' "$m" | grep '^vigil_container_oom_kills_total{pod="oom-main",container="eater"} ')
n=${line##* }
[ "${n:-0}" -ge 1 ] 2>/dev/null || fail "vigil metrics does not count the OOM kill: ${line:-no sample}"
printf '%s\n' "$m" | grep -q '^vigil_container_last_terminated_reason{pod="oom-main",container="eater",reason="OOMKilled"} 1$' \
    || fail "vigil metrics does not give OOMKilled as the last termination reason"
say "metrics: $line"
say "restart_count $(get $c.restart_count), oom_kills $(get $c.resources.oom_kills)"
pass
