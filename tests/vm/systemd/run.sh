#!/usr/bin/env bash
# vigil under a real systemd: boot a minimal Debian root filesystem (systemd as PID 1) in QEMU
# with vigil installed as systemd/vigil.service (Delegate=yes), and let a checker unit verify
# the cgroup layout, `systemctl reload vigil`, `systemctl stop vigil`, and that a second instance
# (vigil-crash.service) killed with SIGKILL is restarted by systemd and reads its adopted container's
# output on from systemd's file-descriptor store, and that a third (vigil-http.service) killed with
# SIGKILL under HTTP load against a Python app fails no request and keeps its output. See
# systemd/README.md and tests/vm/README.md.
#
#   tests/vm/systemd/run.sh [-k]
#
# -k keeps the overlay initramfs. Environment: VM_TIMEOUT (seconds, default 600), VM_ACCEL
# (tcg | kvm, default tcg), VM_MEMORY (MiB, 2048), VIGIL_BIN (a static vigil to use instead of
# building one), DEBIAN_MIRROR (default: the first Debian mirror apt uses), VM_CACHE (shared
# with tests/vm/run.sh: the kernel and the static vigil build are reused from there).
#
# First run: ~40 s debootstrap + ~30 s packing a ~140 MB cpio (both cached), then ~20-60 s
# per boot. Exit 0 on PASS; on FAIL the console log is printed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CACHE=${VM_CACHE:-$REPO/tests/vm/.cache}
VM_TIMEOUT=${VM_TIMEOUT:-600}
VM_ACCEL=${VM_ACCEL:-tcg}
VM_MEMORY=${VM_MEMORY:-2048}
SUITE=bookworm
# python3: the HTTP app and its load (vigil-http.service, files/usr/local/lib/vigil-vm).
INCLUDE=systemd,systemd-sysv,dbus,python3
PACKAGES=(qemu-system-x86 cpio debootstrap)
SD=$CACHE/systemd

keep=0
case ${1:-} in
-k | --keep) keep=1 ;;
-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
'') ;;
*) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
esac

log() { printf '== %s\n' "$*" >&2; }
as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }

ensure_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    ((${#missing[@]} == 0)) && return 0
    log "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Debian's kernel package, unpacked into the same cache place as tests/vm/run.sh uses.
ensure_kernel() {
    local pkg dir
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image/ {print $2; exit}')
    [[ -n $pkg ]] || { as_root apt-get update -qq; pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image/ {print $2; exit}'); }
    dir=$CACHE/kernel/$pkg
    if ! compgen -G "$dir/boot/vmlinuz-*" >/dev/null; then
        log "downloading kernel $pkg"
        rm -rf "$CACHE/debs" "$dir.tmp"
        mkdir -p "$CACHE/debs" "$CACHE/kernel"
        (cd "$CACHE/debs" && apt-get download -qq "$pkg" 2>&1 | grep -v 'unsandboxed as root' || true)
        dpkg-deb -x "$CACHE"/debs/"${pkg}"_*.deb "$dir.tmp"
        mv "$dir.tmp" "$dir"
        rm -rf "$CACHE/debs"
    fi
    KERNEL=$(compgen -G "$dir/boot/vmlinuz-*" | head -n1)
}

# The static vigil, built as tests/vm/run.sh builds it (tests/vm/build-vigil.sh, same target dir).
ensure_vigil() {
    if [[ -n ${VIGIL_BIN:-} ]]; then VIGIL=$VIGIL_BIN; return; fi
    log "building vigil (static, musl, profile ${VM_PROFILE:-vm})"
    VIGIL=$(VM_CACHE=$CACHE "$HERE/../build-vigil.sh")
}

mirror() {
    if [[ -n ${DEBIAN_MIRROR:-} ]]; then echo "$DEBIAN_MIRROR"; return; fi
    local m
    m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}')
    [[ -z $m ]] && m=$(awk '$1 == "deb" && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    echo "${m:-http://deb.debian.org/debian}"
}

# The Debian root filesystem and its packed cpio, built once: systemd as /init, no getty on the
# serial console (no udev here: it would wait 90 s for the device).
ensure_base() {
    local stamp="$SUITE $INCLUDE"
    if [[ ! -f $SD/base.cpio.gz || $(cat "$SD/base.stamp" 2>/dev/null) != "$stamp" ]]; then
        if [[ ! -d $SD/rootfs || $(cat "$SD/rootfs.stamp" 2>/dev/null) != "$stamp" ]]; then
            log "debootstrap $SUITE ($INCLUDE) from $(mirror)"
            rm -rf "$SD/rootfs" "$SD/rootfs.tmp"
            mkdir -p "$SD"
            as_root debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$SD/rootfs.tmp" "$(mirror)" >"$SD/debootstrap.log" 2>&1 ||
                { tail -n 30 "$SD/debootstrap.log" >&2; exit 1; }
            mv "$SD/rootfs.tmp" "$SD/rootfs"
            echo "$stamp" >"$SD/rootfs.stamp"
        fi
        log "packing the root filesystem"
        ln -sfn /lib/systemd/systemd "$SD/rootfs/init"
        ln -sfn /dev/null "$SD/rootfs/etc/systemd/system/serial-getty@ttyS0.service"
        echo vigil-vm >"$SD/rootfs/etc/hostname"
        (cd "$SD/rootfs" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -1 >"$SD/base.cpio.gz.tmp"
        mv "$SD/base.cpio.gz.tmp" "$SD/base.cpio.gz"
        echo "$stamp" >"$SD/base.stamp"
    fi
}

# What this test adds: vigil, the repository's unit file unchanged, the config, the checker.
# A second cpio appended to the first: the kernel unpacks both, the later one on top.
pack_overlay() {
    local root=$SD/overlay
    rm -rf "$root"
    mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system/multi-user.target.wants"
    cp -a "$HERE/files/." "$root/"
    install -m 755 "$VIGIL" "$root/usr/local/bin/vigil"
    install -m 644 "$REPO/systemd/vigil.service" "$root/etc/systemd/system/vigil.service"
    # The same unit again, for the kill -9 check (its drop-in: files/…/vigil-crash.service.d).
    install -m 644 "$REPO/systemd/vigil.service" "$root/etc/systemd/system/vigil-crash.service"
    # And again for the kill -9 under HTTP load (files/…/vigil-http.service.d).
    install -m 644 "$REPO/systemd/vigil.service" "$root/etc/systemd/system/vigil-http.service"
    chmod 644 "$root/etc/vigil/vigil.toml" "$root/etc/vigil/crash.toml" "$root/etc/vigil/http.toml" \
        "$root/etc/systemd/system/vigil-check.service" "$root/etc/systemd/system/vigil-crash.service.d/crash.conf" \
        "$root/etc/systemd/system/vigil-http.service.d/http.conf" "$root"/usr/local/lib/vigil-vm/*.py
    chmod 755 "$root/usr/local/sbin/vigil-check"
    ln -s ../vigil.service "$root/etc/systemd/system/multi-user.target.wants/vigil.service"
    ln -s ../vigil-check.service "$root/etc/systemd/system/multi-user.target.wants/vigil-check.service"
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$SD/overlay.cpio.gz"
    cat "$SD/base.cpio.gz" "$SD/overlay.cpio.gz" >"$SD/initrd.cpio.gz"
    ((keep)) || rm -rf "$root"
}

boot() {
    local accel=(-accel tcg)
    [[ $VM_ACCEL == kvm ]] && accel=(-accel kvm -cpu host)
    mkdir -p "$CACHE/logs"
    BOOT_RC=0
    timeout -k 5 "$VM_TIMEOUT" qemu-system-x86_64 "${accel[@]}" -m "$VM_MEMORY" -smp 2 \
        -nographic -no-reboot -net none \
        -kernel "$KERNEL" -initrd "$SD/initrd.cpio.gz" \
        -append "console=ttyS0 quiet panic=-1 systemd.show_status=0" \
        </dev/null 2>&1 | tr -d '\r' >"$CACHE/logs/systemd.log" || BOOT_RC=${PIPESTATUS[0]}
    ((keep)) || rm -f "$SD/initrd.cpio.gz" "$SD/overlay.cpio.gz"
}

start=$SECONDS
ensure_packages
ensure_kernel
ensure_vigil
ensure_base
log "kernel $(basename "$KERNEL"), accel $VM_ACCEL, $((SECONDS - start))s of setup"
t0=$SECONDS
pack_overlay
boot
logf=$CACHE/logs/systemd.log
grep '^check\[systemd\]' "$logf" || true
if grep -q '^VIGIL-VM-RESULT: PASS systemd' "$logf"; then
    echo "PASS systemd ($((SECONDS - t0))s boot and checks, $((SECONDS - start))s in all)"
    exit 0
fi
why=$(grep -o 'VIGIL-VM-RESULT: FAIL systemd.*' "$logf" | head -n1 || true)
((BOOT_RC == 124 || BOOT_RC == 137)) && why="${why:+$why; }the guest did not power off within VM_TIMEOUT=${VM_TIMEOUT}s"
echo "---- console ($logf, last 200 lines) ----"
tail -n 200 "$logf"
echo "---- end ----"
echo "FAIL systemd: ${why:-no verdict line}"
exit 1
