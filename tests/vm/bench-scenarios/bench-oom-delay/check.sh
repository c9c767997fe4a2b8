#!/bin/sh
SCENARIO=bench-oom-delay
. /usr/local/lib/vmcheck.sh
. /usr/local/lib/vmbench.sh
for i in 1 2 3 4 5; do
    wait_json 60 pods.name=o$i.containers.name=eater.state.terminated.reason OOMKilled >/dev/null
done
kclock
json=$(vigil status -o json)
# A terminated container has no cgroup in the status: derive the pods' from the checker's.
root=$(printf '%s' "$json" | vmh json pods.name=checker.containers.name=check.cgroup)
root=${root%/checker/check}
delays=
for i in 1 2 3 4 5; do
    c=pods.name=o$i.containers.name=eater
    fin=$(printf '%s' "$json" | vmh json $c.state.terminated.finished_at)
    memcg=${root#/sys/fs/cgroup}/o$i/eater
    t_kill=$(kts "oom-kill:.*oom_memcg=$memcg,")
    [ -n "$t_kill" ] || fail "no oom-kill line for $memcg in the kernel log"
    t_fin=$(wall_to_k "$(ts_of "$fin")")
    d=$(calc "($t_fin - $t_kill) * 1000")
    say "o$i: OOM kill at ${t_kill}s, finished_at ${t_fin}s: ${d} ms"
    delays="$delays $d"
done
stats=$(printf '%s\n' $delays | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f %.1f %.1f", v[1], v[int((NR + 1) / 2)], v[NR] }')
set -- $stats
bench oom_to_finished_median "$2" ms "kernel OOM kill to vigil's finished_at, 5 kills (min $1, max $3)"
pass
