#!/bin/bash
# bench/starttl.sh BIN N [ROUNDS]: the start-up of N sleeper containers (cgroups on, like the
# idle workload of bench.py) as a timeline from the kernel's own tracepoints
# (sched_process_fork/exec, `perf record -a`): vigil's exec -> its first clone, the spacing of
# its clones, the last child's exec, and vigil's CPU time and minor faults once all N run.
# Needs root and perf. It polls with `pgrep -P` every 10 ms only to know when to stop, so it
# perturbs the start less than the bench's /proc scan; the bench's figure stays the one to quote.
# vigil's run-queue wait (schedstat) and involuntary context switches say whether it waited for
# a CPU. WRAP runs vigil under a command, e.g. WRAP="chrt -R -f 1" (SCHED_FIFO for vigil, its
# children reset to SCHED_OTHER): how far the start goes when vigil is never preempted.
bin=$(readlink -f "$1"); n=${2:-200}; rounds=${3:-3}; wrap=${WRAP:-}
d=/tmp/starttl-$$; mkdir -p $d
cc -O2 -o $d/vbsleep -x c - <<'C'
#include <unistd.h>
#include <stdlib.h>
int main(int c, char **v) { sleep(c > 1 ? atoi(v[1]) : 100000); return 0; }
C
{
echo '[supervisor]'
echo "socket = \"$d/vigil.sock\""
echo 'cgroup_root = "auto"'
echo "cgroup_name = \"vigil-starttl-$$\""
echo 'log_forward = false'
for i in $(seq -w 0 $((n-1))); do
  echo "[pods.svc$i]"
  echo 'restart_policy = "Always"'
  echo "[[pods.svc$i.containers]]"
  echo 'name = "c"'
  echo "command = [\"$d/vbsleep\", \"100000\"]"
done
} > $d/vigil.toml
for r in $(seq 1 $rounds); do
  rm -f $d/vigil.sock
  perf record -q -a -e sched:sched_process_exec -e sched:sched_process_fork -o $d/tl.data -- \
    bash -c "cd $d; $wrap $bin run --config vigil.toml >$d/out.log 2>&1 & p=\$!; echo \$p > $d/pid;
      for i in \$(seq 1 1000); do c=\$(pgrep -c -P \$p -x vbsleep); [ \"\$c\" -ge $n ] && break; sleep 0.01; done;
      awk '{print \$1, \$2}' /proc/\$p/schedstat > $d/cpu; awk '/^nonvoluntary_ctxt_switches/ {print \$2}' /proc/\$p/status > $d/nvcsw; awk '{print \$10}' /proc/\$p/stat > $d/minflt;
      kill -TERM \$p; wait \$p" 2>/dev/null
  perf script -i $d/tl.data -F comm,pid,time,event,trace 2>/dev/null > $d/tl.txt
  python3 - "$d" "$n" "$(basename "$bin" | cut -c1-15)" <<'PY'
import re, sys
d, n, comm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
vpid = int(open(f"{d}/pid").read())
t0 = None; forks = []; execs = []
for l in open(f"{d}/tl.txt"):
    m = re.match(r"\s*(\S+)\s+(\d+)\s+([\d.]+):\s+(\S+):\s+(.*)", l)
    if not m: continue
    comm, pid, t, ev, tr = m.groups(); t = float(t); pid = int(pid)
    if ev.endswith("exec") and pid == vpid and not forks: t0 = t  # the last exec before its first clone (after WRAP)
    elif t0 and ev.endswith("fork") and pid == vpid and f"comm={comm} pid={vpid}" in tr: forks.append(t)
    elif t0 and ev.endswith("exec") and "vbsleep" in tr: execs.append(t)
if t0 is None or not forks or not execs:
    print("no timeline"); raise SystemExit
ms = lambda x: (x - t0) * 1000
cpu, wait = (int(x) / 1e6 for x in open(f"{d}/cpu").read().split())
flt = int(open(f"{d}/minflt").read()); nv = int(open(f"{d}/nvcsw").read())
print(f"N={n}: first clone {ms(forks[0]):6.1f} ms, last clone {ms(forks[-1]):6.1f} ms "
      f"({(forks[-1]-forks[0])*1e6/max(1,len(forks)-1):.0f} us apart), last child exec {ms(max(execs)):6.1f} ms; "
      f"vigil cpu {cpu:.1f} ms, waiting for a cpu {wait:.1f} ms ({nv} preemptions), minor faults {flt}; "
      f"load {open('/proc/loadavg').read().split()[0]}")
PY
  sleep 0.5
done
rmdir /sys/fs/cgroup/unified/vigil-starttl-$$/* /sys/fs/cgroup/unified/vigil-starttl-$$ 2>/dev/null
rm -rf $d
