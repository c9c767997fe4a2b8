# Sourced by the bench scenarios' /check.sh after vmcheck.sh: clocks and figures.
#
# Clocks: the kernel log's timestamps (dmesg, microseconds since boot by local_clock), which
# date the kernel's own events (exec of /sbin/init, OOM kills); vigil's status times (wall
# clock, RFC 3339 with milliseconds); process fork times (/proc/PID/stat starttime, CLOCK_BOOTTIME
# in 1/100 s). These need not agree (boot time and the kernel-log clock start apart), so
# `kclock` ties them: `vmh kmsg-now` reads the wall clock and CLOCK_BOOTTIME and writes both
# into the kernel log in one write(2). Everything is then put on the kernel-log clock.

# kts PATTERN: the dmesg timestamp (seconds since boot) of the first line matching PATTERN.
kts() { dmesg | grep -E -m1 -- "$1" | sed -e 's/^\[ *//' -e 's/\].*//'; }

# kclock: sets KWALL (wall clock minus kernel-log clock) and KBOOT (CLOCK_BOOTTIME minus
# kernel-log clock), in seconds.
kclock() {
    vmh kmsg-now VIGIL-BENCH-CAL || fail "vmh kmsg-now failed"
    _cal=$(dmesg | grep 'VIGIL-BENCH-CAL wall=' | tail -n1 |
        sed -e 's/^\[ *\([0-9.]*\)\].*wall=\([0-9.]*\) boot=\([0-9.]*\).*/\1 \2 \3/' |
        awk '{ printf "%.6f %.6f\n", $2 - $1, $3 - $1 }')
    KWALL=${_cal% *} KBOOT=${_cal#* }
    [ -n "$KWALL" ] && [ -n "$KBOOT" ] || fail "no calibration line in the kernel log"
}

# wall_to_k EPOCH_SECONDS / boot_to_k UPTIME_SECONDS: on the kernel-log clock (after kclock).
wall_to_k() { awk -v o="$KWALL" -v w="$1" 'BEGIN { printf "%.6f\n", w - o }'; }
boot_to_k() { awk -v o="$KBOOT" -v b="$1" 'BEGIN { printf "%.6f\n", b - o }'; }

# ts_of RFC3339: seconds since the epoch.
ts_of() { vmh ts "$1"; }

# The moment the kernel started /sbin/init (vigil), on the kernel-log clock.
init_ts() { kts 'Run /sbin/init as init process'; }

# vigil's (PID 1's) resident set, kB: rss, and its peak: hwm.
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' /proc/1/status; }
hwm_kb() { awk '$1 == "VmHWM:" { print $2 }' /proc/1/status; }

# bench NAME VALUE UNIT [NOTE…]: one figure, read by bench/vm.sh.
bench() { console "VIGIL-VM-BENCH: $*"; }

# calc EXPR: awk arithmetic, 3 decimals.
calc() { awk "BEGIN { printf \"%.3f\n\", $1 }"; }

# proc_start PID: when the process was forked, seconds since boot (/proc/PID/stat field 22,
# in clock ticks of 1/100 s; the comm field of the processes measured here has no spaces).
proc_start() { awk '{ printf "%.2f\n", $22 / 100 }' "/proc/$1/stat" 2>/dev/null; }

# container_pids: the pids of every running container except the checker, one a line.
container_pids() {
    vigil status -o json | grep -o '"pid": [0-9]*' | cut -d' ' -f2 | grep -v "^$$\$"
}
