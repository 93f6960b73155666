#!/bin/sh
# SPDX-License-Identifier: Apache-2.0

# /init of the test VM's initramfs (busybox sh, built by tests/vm/run.sh):
# loads the 9p modules listed in /modules/order, mounts the host's root
# file system (9p, read-only, tag "hostroot") and hands over to the guest
# script named on the kernel command line (RKNP_VM_GUEST=..., which the
# kernel passes to init as an environment variable).
set -eu
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec >/dev/console 2>&1
fail() {
    echo "rknp-vm-init: $*"
    echo "virtio devices: $(ls /sys/bus/virtio/devices 2>/dev/null)"
    dmesg | tail -n 20
    # No way on: power off so the host sees the missing result at once.
    echo o >/proc/sysrq-trigger
    sleep 60
}
while read -r module; do
    insmod "/modules/$module" || fail "insmod $module failed"
done </modules/order
mkdir -p /newroot
# cache=loose: the shared tree does not change under the VM in a way the
# tests care about, and it makes executing host binaries much faster.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /newroot ||
    fail "cannot mount the host's root over 9p"
if [ -z "${RKNP_VM_GUEST:-}" ] || [ ! -r "/newroot$RKNP_VM_GUEST" ]; then
    fail "no guest script '${RKNP_VM_GUEST:-}' on the host's root"
fi
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash "$RKNP_VM_GUEST"
