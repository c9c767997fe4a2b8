#!/bin/sh
# How the schedule is checked: the status is sampled as fast as the guest allows. A sample
# taken while the container waits in CrashLoopBackOff with restart_count n has, as
# last_state.terminated, run n+1's record (started_at, finished_at): the run that just ended.
# (Samples taken while a run is running are ignored: their last_state is the run before.) For two samples with restart counts n-1 and n, the delay of restart
# n is started_at(run n+1) - finished_at(run n). Expected: restart 1 immediate (0), then
# initial × 2^(n-2) capped at max: 0.2, 0.4, 0.8, 1.6, 1.6 … Tolerance: not more than 10 ms early
# (timestamp rounding), not more than 50 ms late (scheduling in an emulated guest). At least
# one delay on the doubling part (0.2 to 0.8; it lasts 1.4 s, long enough for the checker to
# sample however late it starts) and one at the cap must have been observed.
SCENARIO=backoff
. /usr/local/lib/vmcheck.sh
c=pods.name=backoff.containers.name=crash
wait_json 60 $c.restart_count '>=1' >/dev/null
samples=/tmp/samples
: >$samples.raw
: >$samples
last=
waiting_seen=
deadline=$(awk -v u="$(uptime_s)" 'BEGIN { print u + 30 }')
while :; do
    s=$(vigil status -o json 2>/dev/null) || continue
    set -- $(printf '%s' "$s" | vmh json -d - $c.restart_count \
        $c.last_state.terminated.started_at $c.last_state.terminated.finished_at \
        $c.last_state.terminated.exit_code $c.state.waiting.reason)
    if [ "$5" = CrashLoopBackOff ] && [ "$2" != - ] && [ "$3" != - ]; then
        waiting_seen=1
        [ "$4" = 3 ] || fail "last_state.terminated.exit_code is $4, expected 3"
        line="$1 $2 $3"
        [ "$line" = "$last" ] || echo "$line" >>$samples.raw
        last=$line
    fi
    [ "$1" -ge 7 ] && break
    awk -v u="$(uptime_s)" -v d="$deadline" 'BEGIN { exit !(u > d) }' && fail "restart_count stayed below 7 for 30 s"
done
# Timestamps to seconds only now, to keep the sampling loop fast.
while read -r n st fin; do
    echo "$n $(vmh ts "$st") $(vmh ts "$fin")" >>$samples || fail "bad timestamps: '$st' '$fin'"
done <$samples.raw
[ -n "$waiting_seen" ] || fail "never saw state.waiting.reason CrashLoopBackOff"
case $(get $c.last_state.terminated.started_at) in
*.*) ;;
*) fail "timestamps lack sub-second precision: cannot check a 0.1 s schedule" ;;
esac
report=$(awk -v initial=0.2 -v max=1.6 '
    { rc[NR] = $1; st[NR] = $2; fin[NR] = $3 }
    END {
        bad = 0; doubling = 0; cap = 0
        for (i = 2; i <= NR; i++) {
            if (rc[i] != rc[i - 1] + 1) continue
            n = rc[i]
            want = 0
            if (n >= 2) { want = initial; for (k = 2; k < n; k++) want *= 2; if (want > max) want = max }
            got = st[i] - fin[i - 1]
            ok = (got >= want - 0.010 && got <= want + 0.050)
            if (!ok) bad++
            if (want > 0 && want < max) doubling++
            if (want == max) cap++
            printf "restart %d: delay %.3fs, expected %.1fs%s\n", n, got, want, ok ? "" : " <- OUT OF TOLERANCE"
        }
        printf "checked on doubling: %d, at cap: %d\n", doubling, cap
        exit (bad > 0 || doubling == 0 || cap == 0)
    }' $samples)
ok=$?
printf '%s\n' "$report" | while IFS= read -r l; do say "$l"; done
[ $ok = 0 ] || fail "back-off schedule: $(printf '%s' "$report" | tr '\n' ';')"
pass
