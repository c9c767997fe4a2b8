#!/bin/sh
SCENARIO=bench-boot20
. /usr/local/lib/vmcheck.sh
. /usr/local/lib/vmbench.sh
# 20 containers plus this checker.
all_ready() { [ "$(vigil status -o json | grep -c '"ready": true')" -ge 21 ]; }
wait_until 120 "all 20 containers ready" all_ready
rss=$(rss_kb) hwm=$(hwm_kb)
kclock
t_init=$(init_ts)
[ -n "$t_init" ] || fail "no 'Run /sbin/init' line in the kernel log"
# Ready = running for these probe-less containers. Status times are those of vigil's loop
# turn (one for all the spawns of a turn), so the last container's fork time comes from /proc.
t_ready=$(container_pids | while read -r p; do boot_to_k "$(proc_start "$p")"; done | sort -n | tail -n1)
last=$(vigil status -o json | vmh json pods.name=p1.conditions.type=Ready.last_transition_time \
    pods.name=p2.conditions.type=Ready.last_transition_time \
    pods.name=p3.conditions.type=Ready.last_transition_time \
    pods.name=p4.conditions.type=Ready.last_transition_time | sort | tail -n1)
[ -n "$last" ] || fail "no Ready transition time in the status"
t_status=$(wall_to_k "$(ts_of "$last")")
say "init exec at ${t_init}s, last fork at ${t_ready}s, last Ready transition (turn time) ${t_status}s; wall - klog $KWALL, boottime - klog $KBOOT"
bench boot20_kernel_to_ready "$(calc "$t_ready")" s "from kernel start to the 20th container forked (ready: no probes)"
bench boot20_init_to_ready "$(calc "$t_ready - $t_init")" s "from exec of vigil as /sbin/init to the same"
bench boot20_rss "$rss" kB "vigil VmRSS with 20 containers (VmHWM $hwm kB)"
pass
