#!/usr/bin/env bash
# Real-kernel tests of vigil: boot a QEMU guest per scenario with vigil as PID 1 and read the
# verdict from the serial console. See tests/vm/README.md.
#
#   tests/vm/run.sh [-k] [--smoke] [SCENARIO…]
#
# Environment: VM_TIMEOUT (seconds per boot, default 180), VM_ACCEL (tcg | kvm; default tcg:
# a KVM guest was seen to hang at boot on the CI kind of machine), VM_MEMORY (MiB, 512),
# VM_SHIM=1 (boot through a small /init that mounts /proc, /sys, /dev, cgroup2 and then
# execs `vigil run`, for a vigil without its PID-1 mounts), VIGIL_BIN (use this static vigil
# instead of building one), VM_JOBS (guests booted at a time, default the host's CPUs),
# VM_PROFILE (cargo profile of the vigil it builds: vm, the default, or dist, as it ships),
# VM_LOG_LINES (console lines printed for a failure, default 400),
# VM_SCENARIOS (the scenario directory, default tests/vm/scenarios; bench/vm.sh points it at
# tests/vm/bench-scenarios).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${VM_CACHE:-$HERE/.cache}
SCENARIOS=$(cd "${VM_SCENARIOS:-$HERE/scenarios}" && pwd)
VM_TIMEOUT=${VM_TIMEOUT:-180}
VM_ACCEL=${VM_ACCEL:-tcg}
VM_MEMORY=${VM_MEMORY:-512}
VM_SHIM=${VM_SHIM:-0}
VM_LOG_LINES=${VM_LOG_LINES:-400}
# vigil is built as it ships, for musl (tests/vm/build-vigil.sh); the helper for glibc with a
# static C runtime.
HELPER_TARGET=x86_64-unknown-linux-gnu
STATIC_RUSTFLAGS="-C target-feature=+crt-static"
PACKAGES=(qemu-system-x86 busybox-static cpio)

keep=0
names=()
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
    echo "Scenarios: $(cd "$SCENARIOS" && echo *)"
}
while (($#)); do
    case $1 in
    -k | --keep) keep=1 ;;
    --smoke) names+=(smoke) ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) names+=("$1") ;;
    esac
    shift
done
if ((${#names[@]} == 0)); then
    for d in "$SCENARIOS"/*/; do names+=("$(basename "$d")"); done
fi
for n in "${names[@]}"; do
    [[ -d $SCENARIOS/$n ]] || { echo "run.sh: no scenario '$n' in $SCENARIOS" >&2; exit 2; }
done

log() { printf '== %s\n' "$*" >&2; }
as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }

# --- host packages: installed only when missing --------------------------------------------
apt_updated=0
apt_update() {
    ((apt_updated)) && return 0
    log "apt-get update"
    as_root apt-get update -qq
    apt_updated=1
}
ensure_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    apt_update
    log "installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --- the kernel: Debian's package, downloaded and unpacked, never installed -----------------
kernel_package() {
    apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image/ {print $2; exit}'
}
ensure_kernel() {
    local pkg
    pkg=$(kernel_package)
    if [[ -z $pkg ]]; then
        apt_update
        pkg=$(kernel_package)
    fi
    [[ -n $pkg ]] || { echo "run.sh: cannot resolve linux-image-amd64 with apt-cache" >&2; exit 1; }
    local dir=$CACHE/kernel/$pkg
    if ! compgen -G "$dir/boot/vmlinuz-*" >/dev/null; then
        log "downloading kernel $pkg"
        rm -rf "$CACHE/debs" "$dir.tmp"
        mkdir -p "$CACHE/debs" "$CACHE/kernel"
        # apt-get download writes to the current directory.
        (cd "$CACHE/debs" && apt-get download -qq "$pkg" 2>&1 | grep -v 'unsandboxed as root' || true)
        compgen -G "$CACHE/debs/${pkg}_*.deb" >/dev/null || { echo "run.sh: apt-get download $pkg failed" >&2; exit 1; }
        dpkg-deb -x "$CACHE"/debs/"${pkg}"_*.deb "$dir.tmp"
        mv "$dir.tmp" "$dir"
        rm -rf "$CACHE/debs"
    fi
    KERNEL=$(compgen -G "$dir/boot/vmlinuz-*" | head -n1)
}

# --- static binaries ------------------------------------------------------------------------
ensure_helpers() {
    log "building vmh (static)"
    RUSTFLAGS=$STATIC_RUSTFLAGS CARGO_TARGET_DIR=$CACHE/target-helpers \
        cargo build --quiet --release --locked --target "$HELPER_TARGET" --manifest-path "$HERE/helpers/Cargo.toml"
    VMH=$CACHE/target-helpers/$HELPER_TARGET/release/vmh
}
ensure_vigil() {
    if [[ -n ${VIGIL_BIN:-} ]]; then
        VIGIL=$VIGIL_BIN
        return
    fi
    # For musl as it ships, profile VM_PROFILE (`vm` for the test scenarios, `dist` for
    # bench/vm.sh), with the test-only fault-injection hooks (e.g.
    # VIGIL_FAULT_PANIC_AFTER_SECS for `panic`): tests/vm/build-vigil.sh.
    log "building vigil (static, musl, profile ${VM_PROFILE:-vm})"
    VIGIL=$(VM_CACHE=$CACHE "$HERE/build-vigil.sh")
}

# --- one scenario ---------------------------------------------------------------------------
needs_vigil() { [[ -f $SCENARIOS/$1/vigil.toml ]]; }

# Stage and pack the scenario's initramfs; sets RDINIT.
pack() {
    local name=$1 sdir=$SCENARIOS/$1 work=$CACHE/work/$1
    local root=$work/root
    rm -rf "$work"
    mkdir -p "$root"/{bin,sbin,etc/vigil,proc,sys,dev,run,tmp,root,var/log,usr/local/bin,usr/local/lib}
    chmod 1777 "$root/tmp"
    cp /bin/busybox "$root/bin/busybox"
    # Applet links made now, so that the guest needs no `busybox --install` (and no shell) at boot.
    local applet
    for applet in $(/bin/busybox --list); do
        case $applet in busybox | init | linuxrc) continue ;; esac
        ln -s busybox "$root/bin/$applet"
    done
    # The kernel opens /dev/console for PID 1's stdio before anything mounts devtmpfs.
    mknod -m 600 "$root/dev/console" c 5 1
    mknod -m 666 "$root/dev/null" c 1 3
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    cp "$VMH" "$root/usr/local/bin/vmh"
    cp "$HERE"/lib/vm*.sh "$root/usr/local/lib/"
    if needs_vigil "$name"; then
        cp "$VIGIL" "$root/bin/vigil"
        ln -s ../bin/vigil "$root/sbin/init"
        cp "$sdir/vigil.toml" "$root/etc/vigil/vigil.toml"
    fi
    if [[ -f $sdir/check.sh ]]; then
        install -m 755 "$sdir/check.sh" "$root/check.sh"
    fi
    if [[ -d $sdir/files ]]; then
        cp -a "$sdir/files/." "$root/"
    fi
    RDINIT=/sbin/init
    if [[ -f $sdir/init ]]; then
        install -m 755 "$sdir/init" "$root/init"
        RDINIT=/init
    elif ((VM_SHIM)); then
        install -m 755 "$HERE/lib/shim-init.sh" "$root/init"
        RDINIT=/init
    fi
    (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$work/initramfs.cpio.gz"
    ((keep)) || rm -rf "$root"
}

# Boot it; the console goes to $CACHE/logs/<name>.log. Sets BOOT_RC (124: timed out).
boot() {
    local name=$1 accel=(-accel tcg) extra=
    # A scenario's `cmdline`: more kernel parameters; NAME=VALUE ones become init's environment.
    if [[ -f $SCENARIOS/$name/cmdline ]]; then
        extra=" $(grep -v '^#' "$SCENARIOS/$name/cmdline" | tr '\n' ' ' | sed 's/ *$//')"
    fi
    [[ $VM_ACCEL == kvm ]] && accel=(-accel kvm -cpu host)
    mkdir -p "$CACHE/logs"
    BOOT_RC=0
    timeout -k 5 "$VM_TIMEOUT" qemu-system-x86_64 "${accel[@]}" -m "$VM_MEMORY" -smp 1 \
        -nographic -no-reboot -net none \
        -kernel "$KERNEL" -initrd "$CACHE/work/$name/initramfs.cpio.gz" \
        -append "console=ttyS0 quiet panic=-1 rdinit=$RDINIT$extra" \
        </dev/null 2>&1 | tr -d '\r' >"$CACHE/logs/$name.log" || BOOT_RC=${PIPESTATUS[0]}
    ((keep)) || rm -f "$CACHE/work/$name/initramfs.cpio.gz"
}

# Decide; sets WHY (empty: passed).
judge() {
    local name=$1 sdir=$SCENARIOS/$1 logf=$CACHE/logs/$1.log
    local tag="VIGIL-VM-RESULT: (PASS|FAIL) $name"
    WHY=
    local failed
    failed=$(grep -E -o "VIGIL-VM-RESULT: FAIL $name(:.*)?$" "$logf" | head -n1 || true)
    if [[ -n $failed ]]; then
        WHY=${failed#VIGIL-VM-RESULT: FAIL "$name"}
        WHY="checker: ${WHY#: }"
        return
    fi
    # A verdict line is required when the scenario has a checker (check.sh or its own init);
    # a scenario with only vigil.toml + expect is judged by its expect patterns alone.
    if [[ -f $sdir/check.sh || -f $sdir/init ]] && ! grep -E -q "$tag( |:|$)" "$logf"; then
        WHY="no verdict line"
    fi
    if [[ -f $sdir/expect ]]; then
        local pat
        while IFS= read -r pat; do
            [[ -z $pat || $pat == \#* ]] && continue
            if [[ $pat == !* ]]; then # `!PATTERN`: the console must not contain it
                ! grep -E -q -- "${pat#!}" "$logf" || WHY="${WHY:+$WHY; }console has /${pat#!}/"
                continue
            fi
            grep -E -q -- "$pat" "$logf" || WHY="${WHY:+$WHY; }console lacks /$pat/"
        done <"$sdir/expect"
    fi
    # When PID 1 exits, the kernel panics and says how: exitcode is a wait(2) status.
    local code
    code=$(grep -E -o 'Attempted to kill init! exitcode=0x[0-9a-f]+' "$logf" | head -n1 | sed 's/.*=//' || true)
    if [[ -n $WHY && -n $code ]]; then
        if ((code & 0x7f)); then
            WHY="$WHY; PID 1 died of signal $((code & 0x7f))"
        else
            WHY="$WHY; PID 1 exited with status $(((code >> 8) & 0xff))"
        fi
    fi
    if ((BOOT_RC == 124 || BOOT_RC == 137)); then
        WHY="${WHY:+$WHY; }the guest did not power off within VM_TIMEOUT=${VM_TIMEOUT}s"
    elif ((BOOT_RC != 0)); then
        WHY="${WHY:+$WHY; }qemu exited with status $BOOT_RC"
    fi
}

# --- main -----------------------------------------------------------------------------------
start=$SECONDS
mkdir -p "$CACHE"
ensure_packages
ensure_kernel
ensure_helpers
for n in "${names[@]}"; do
    if needs_vigil "$n"; then ensure_vigil; break; fi
done
log "kernel $(basename "$KERNEL"), accel $VM_ACCEL, timeout ${VM_TIMEOUT}s, $((SECONDS - start))s of setup"

# One scenario from packing to verdict, its verdict line in $CACHE/verdicts/<name>.
scenario() {
    local n=$1 t0 secs
    t0=$(date +%s.%N)
    pack "$n"
    boot "$n"
    judge "$n"
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [[ -z $WHY ]]; then
        echo "PASS $n (${secs}s)"
    else
        echo "FAIL $n (${secs}s): $WHY"
    fi >"$CACHE/verdicts/$n"
    cat "$CACHE/verdicts/$n"
}

# Each guest is one vCPU under TCG, so one host CPU: VM_JOBS guests boot at a time (default:
# the host's CPUs), each scenario in a subshell of its own (its work dir, console log and
# verdict file are its own).
rm -rf "$CACHE/verdicts"
mkdir -p "$CACHE/verdicts"
# A scenario with a `solo` file (one that measures time, e.g. the back-off schedule) boots
# alone, after the others: a second guest on the same CPUs would skew what it measures.
jobs_max=${VM_JOBS:-$(nproc)}
running=0
solo=()
for n in "${names[@]}"; do
    if [[ -f $SCENARIOS/$n/solo ]]; then
        solo+=("$n")
        continue
    fi
    if ((running >= jobs_max)); then
        wait -n || true
        running=$((running - 1))
    fi
    scenario "$n" &
    running=$((running + 1))
done
wait || true
for n in "${solo[@]}"; do
    scenario "$n" || true
done

passed=0
failures=()
for n in "${names[@]}"; do
    if grep -q '^PASS ' "$CACHE/verdicts/$n" 2>/dev/null; then
        passed=$((passed + 1))
    else
        [[ -s $CACHE/verdicts/$n ]] || echo "FAIL $n: no verdict (the scenario's runner died)"
        failures+=("$n")
    fi
done

for n in "${failures[@]}"; do
    logf=$CACHE/logs/$n.log
    echo
    echo "---- console of $n ($logf, last $VM_LOG_LINES lines) ----"
    tail -n "$VM_LOG_LINES" "$logf"
    echo "---- end of $n ----"
done
echo
echo "total $((SECONDS - start))s"
echo "$passed passed, ${#failures[@]} failed"
((${#failures[@]} == 0))
