#!/bin/sh
# Optional /init (VM_SHIM=1): does the PID-1 mounts itself, then becomes vigil. For a vigil
# whose PID-1 mode does not mount /proc, /sys, /dev and cgroup2 yet.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /run/vigil
exec /bin/vigil run
