#!/bin/sh
SCENARIO=cpu-max
. /usr/local/lib/vmcheck.sh
c=pods.name=spin.containers.name=loop
wait_json 30 $c.state.running.started_at '!=' >/dev/null
cg=$(get $c.cgroup)
[ -n "$cg" ] && [ -d "$cg" ] || fail "status gives no cgroup directory for the loop: '$cg'"
say "loop cgroup $cg"
max=$(cat "$cg/cpu.max" 2>/dev/null)
[ "$max" = "20000 100000" ] || fail "cpu.max is '$max', expected '20000 100000'"
stat() { awk -v k="$1" '$1 == k { print $2 }' "$cg/cpu.stat"; }
# Let the loop run into its quota first, then measure over ~2 s of guest uptime.
sleep 0.5
u0=$(stat usage_usec) t0=$(uptime_s)
sleep 2
u1=$(stat usage_usec) t1=$(uptime_s)
share=$(awk -v u0="$u0" -v u1="$u1" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", (u1 - u0) / ((t1 - t0) * 1e6) * 100 }')
thr=$(stat nr_throttled)
say "usage $((u1 - u0)) us over $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s = ${share}% of a core; nr_throttled $thr"
awk -v s="$share" 'BEGIN { exit !(s >= 10 && s <= 30) }' || fail "the loop used ${share}% of a core, expected 10-30% under cpu_max = 0.2"
[ "${thr:-0}" -gt 0 ] || fail "cpu.stat nr_throttled is '${thr}', expected > 0"
expect_json $c.resources.cpu_usage_usec '>=1'
pass
