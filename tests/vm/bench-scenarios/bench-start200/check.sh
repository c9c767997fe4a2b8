#!/bin/sh
SCENARIO=bench-start200
. /usr/local/lib/vmcheck.sh
. /usr/local/lib/vmbench.sh
# 200 containers plus this checker. Polled once a second: the figure comes from started_at,
# so polling slowly only keeps the checker from competing with vigil for the one CPU.
all_running() { [ "$(vigil status -o json | grep -c '"running": {')" -ge 201 ]; sleep 1; }
wait_until 300 "200 containers running" all_running
rss=$(rss_kb) hwm=$(hwm_kb)
kclock
t_init=$(init_ts)
[ -n "$t_init" ] || fail "no 'Run /sbin/init' line in the kernel log"
# Every container's fork time from /proc (status times are those of vigil's loop turn, one
# for all the spawns of a turn, so they cannot time the spawns themselves).
starts=$(container_pids | while read -r p; do boot_to_k "$(proc_start "$p")"; done | sort -n)
n=$(printf '%s\n' "$starts" | grep -c .)
[ "$n" -ge 200 ] || fail "only $n container processes found"
t_first=$(printf '%s\n' "$starts" | head -n1)
t_last=$(printf '%s\n' "$starts" | tail -n1)
cgs=$(vmh cgroups | grep -c .)
say "boottime - klog $KBOOT; init exec ${t_init}s, first fork ${t_first}s, last fork ${t_last}s, $n processes, $cgs cgroup lines"
bench start200_init_to_all "$(calc "$t_last - $t_init")" s "from exec of vigil to the 200th container forked"
bench start200_spawn_window "$(calc "$t_last - $t_first")" s "from the first to the last container forked (10 ms ticks)"
bench start200_rate "$(calc "200 / ($t_last - $t_first + 0.01)")" containers/s "200 / spawn window"
bench start200_rss "$rss" kB "vigil VmRSS with 200 containers (VmHWM $hwm kB)"
pass
