#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The fast-path e2e cases, the reliability stream test and the demo on a
# real old kernel: boots Debian 12's own kernel (linux-image-amd64, 6.1), or
# Debian 11's (5.10, tests/vm/install-old-kernel.sh) with RKNP_VM_SERIES=5.10, in
# qemu (TCG: KVM hangs at boot under nested virtualisation) with this
# machine's root file system shared read-only over 9p, runs tests/vm/guest.sh
# there, and fails unless every step passed on the expected kernel. Reports
# the kernel that ran and the plugin's start lines (TCP path, sandbox, tap
# offloads). Run as root; tests/install-deps.sh installs what it needs.
#
#   sudo tests/vm/run.sh [BUILD_DIR]      # default $BUILD_DIR, else build/
#
#   RKNP_VM_SERIES   kernel series to boot: 6.1 (default) or 5.10
#   RKNP_VM_KERNEL   vmlinuz to boot (default: the newest /boot/vmlinuz-SERIES.*)
#   RKNP_VM_EXPECT   required prefix of the guest's `uname -r` (default SERIES.)
#   RKNP_VM_STEPS    "features demo e2e rel_stream" (default: all; demo checks
#                    the plugin's log against what features found)
#   RKNP_VM_E2E_CASES  e2e cases (default: see E2E_CASES below)
#   RKNP_VM_TIMEOUT  seconds for the whole VM run (default 1200)
#   RKNP_VM_BOOT_TIMEOUT  seconds a boot may take to start the guest script
#                    (default 120) before it is killed and booted once more
#   RKNP_VM_TEST_HANG=1  the first boot hangs (init is `sleep`): for
#                    tests/vm/boot_retry.sh, the test of that retry
#   RKNP_VM_CPUS / RKNP_VM_MEM  (default 2 / 2048 MiB)
#   RKNP_VM_KEEP=1   keep the work directory (initramfs, logs)
#
# The VM has no network device: its traffic stays on its loopback and in the
# namespaces the tests create inside it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(readlink -f "${1:-${BUILD_DIR:-$ROOT/build}}")
[ "$(id -u)" = 0 ] || { echo "run as root (qemu shares / with a root guest)"; exit 1; }

SERIES=${RKNP_VM_SERIES:-6.1}
KERNEL=${RKNP_VM_KERNEL:-$(find /boot -maxdepth 1 -name "vmlinuz-$SERIES.*" | sort -V | tail -n1)}
EXPECT=${RKNP_VM_EXPECT:-$SERIES.}
STEPS=${RKNP_VM_STEPS:-features demo e2e rel_stream}
# Outbound TCP downloads with sha256 (host loopback, a netns "remote" host,
# the largest MTU) and published ports (the plugin port driver, whose TCP
# forwards must be on the fast path).
E2E_CASES=${RKNP_VM_E2E_CASES:-http_host_loopback netns_host mtu_65520 ports_plugin}
TIMEOUT=${RKNP_VM_TIMEOUT:-1200}
if [ -z "$KERNEL" ] || [ ! -r "$KERNEL" ]; then
    echo "no $SERIES kernel to boot: tests/install-deps.sh installs 6.1 and 5.10"
    exit 1
fi
KVER=${KERNEL##*/vmlinuz-}
[ -d "/lib/modules/$KVER" ] || { echo "no /lib/modules/$KVER for $KERNEL"; exit 1; }
for f in "$BUILD/lib/librknp.so.1" "$BUILD/bin/rootlesskit" "$BUILD/bin/rootlessctl" \
    "$BUILD/bin/rknp-rel-driver" "$BUILD/bin/rknp-rel-stream"; do
    [ -e "$f" ] || { echo "missing $f (build first: tests/lib/build.sh build_all)"; exit 1; }
done
for t in qemu-system-x86_64 busybox modprobe gzip; do
    command -v "$t" >/dev/null || { echo "missing $t (tests/install-deps.sh)"; exit 1; }
done

# The test user, created on the host: its home and the user database are
# read-only (or a throw-away copy) in the guest.
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
setup_test_user

WORK=$(mktemp -d /tmp/rknp-vm.XXXXXX)
chmod 0755 "$WORK"
# shellcheck disable=SC2317 # the EXIT trap calls it
cleanup() {
    if [ "${RKNP_VM_KEEP:-0}" = 1 ]; then echo "vm: work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
OUT=$WORK/out # shared read-write with the guest (tag rknpout)
mkdir -p "$OUT" "$WORK/initramfs"/{bin,modules,proc,sys,dev,newroot}

# ---- the initramfs: static busybox, the 9p modules and their dependencies,
# tests/vm/initramfs-init.sh as /init.
make_initramfs() {
    local dir=$WORK/initramfs a m seen=" "
    cp "$(command -v busybox)" "$dir/bin/busybox"
    for a in sh mount insmod mkdir sleep switch_root ls dmesg tail; do ln -s busybox "$dir/bin/$a"; done
    install -m 0755 "$ROOT/tests/vm/initramfs-init.sh" "$dir/init"
    # In dependency order; a module the kernel has built in prints "builtin".
    for m in $(modprobe -a -S "$KVER" --show-depends virtio_pci 9pnet_virtio 9p |
        awk '$1 == "insmod" {print $2}'); do
        [[ $seen == *" $m "* ]] && continue
        seen+="$m "
        cp "$m" "$dir/modules/"
        basename "$m" >>"$dir/modules/order"
    done
    (cd "$dir" && find . | busybox cpio -o -H newc 2>/dev/null) | gzip -1 >"$WORK/initramfs.gz"
}
make_initramfs

# What guest.sh sources.
{
    printf 'REPO=%q\nBUILD=%q\nSTEPS=%q\nE2E_CASES=%q\n' "$ROOT" "$BUILD" "$STEPS" "$E2E_CASES"
    # A bounded stream test: TCG runs at a few percent of native speed.
    printf 'REL_CONNS=%q\nREL_LONG_DOWN=%q\nREL_LONG_UP=%q\n' "${REL_CONNS:-16}" \
        "${REL_LONG_DOWN:-33554432}" "${REL_LONG_UP:-8388608}"
} >"$OUT/params"

# boot N [KERNEL_ARGS]: boot N, its console in WORK/console-N.log (shown
# here without the kernel's boot messages, which go there too: they tell
# where a boot that hangs stopped; guest.sh then lowers the console's
# log level to warnings, as `quiet` did). A boot whose guest script has not said its
# first line within BOOT_TIMEOUT s is killed. Sets qemu_rc and alive (the
# seconds the guest script took to start, empty if it never did).
BOOT_TIMEOUT=${RKNP_VM_BOOT_TIMEOUT:-120}
# shellcheck disable=SC2016 # sed's $ (the last line)
show_console() {
    sed -un -e '/^rknp-vm: guest script started/,${s/^/  vm| /p;b' -e '}' \
        -e '/^\[ *[0-9]*\.[0-9]*\] /!s/^/  vm| /p'
}
boot() {
    local n=$1 console=$WORK/console-$1.log t0=$SECONDS pid
    rm -f "$OUT/uname" "$OUT/result" "$WORK/qemu.pid"
    : >"$console"
    (
        set -o pipefail
        # The repository and the build are shared again by their own
        # devices: guest.sh mounts them where its tmpfs hides them (a
        # checkout under /tmp).
        timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
            -machine q35,accel=tcg -cpu max -smp "${RKNP_VM_CPUS:-2}" -m "${RKNP_VM_MEM:-2048}" \
            -nodefaults -no-user-config -display none -no-reboot -nic none \
            -pidfile "$WORK/qemu.pid" -kernel "$KERNEL" -initrd "$WORK/initramfs.gz" \
            -append "console=ttyS0 panic=-1 printk.time=1 RKNP_VM_GUEST=$ROOT/tests/vm/guest.sh${2:+ $2}" \
            -serial stdio \
            -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
            -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
            -fsdev local,id=repo,path="$ROOT",security_model=none,readonly=on,multidevs=remap \
            -device virtio-9p-pci,fsdev=repo,mount_tag=rknprepo \
            -fsdev local,id=build,path="$BUILD",security_model=none,readonly=on,multidevs=remap \
            -device virtio-9p-pci,fsdev=build,mount_tag=rknpbuild \
            -fsdev local,id=out,path="$OUT",security_model=none \
            -device virtio-9p-pci,fsdev=out,mount_tag=rknpout \
            </dev/null 2>&1 | sed -u 's/\r$//' | tee "$console" | show_console
    ) &
    pid=$!
    alive=""
    while kill -0 "$pid" 2>/dev/null; do
        if grep -q '^rknp-vm: guest script started' "$console"; then
            alive=$((SECONDS - t0))
            break
        fi
        if [ $((SECONDS - t0)) -ge "$BOOT_TIMEOUT" ]; then
            echo "== vm: boot $n: no sign of the guest script after $BOOT_TIMEOUT s: killing qemu"
            kill "$(cat "$WORK/qemu.pid" 2>/dev/null)" 2>/dev/null || true
            break
        fi
        sleep 1
    done
    [ -n "$alive" ] && echo "== vm: boot $n: the guest script started after $alive s"
    qemu_rc=0
    wait "$pid" || qemu_rc=$?
    echo "== vm: boot $n: qemu ended after $((SECONDS - t0)) s (status $qemu_rc)"
}

# console_tail N: the last lines boot N's console had, kernel lines too.
console_tail() {
    echo "== vm: the last lines of boot $1's console:"
    tail -n 30 "$WORK/console-$1.log" | sed 's/^/  console-'"$1"'| /'
    [ -s "$WORK/console-$1.log" ] || echo "  console-$1| (nothing)"
}

echo "== vm: booting $KERNEL (TCG, ${RKNP_VM_CPUS:-2} CPUs) with / shared read-only; steps: $STEPS"
t0=$SECONDS
# A boot that hangs before the guest script starts (once seen under TCG:
# no output for 13 minutes, then two boots in a row ran) is tried once more.
boot 1 ${RKNP_VM_TEST_HANG:+"rdinit=/bin/sleep -- 86400"}
boots=1
if [ -z "$alive" ]; then
    console_tail 1
    echo "== vm: booting once more"
    boot 2
    boots=2
fi
cp "$WORK/console-$boots.log" "$WORK/console.log"
echo "== vm: $boots boot(s), $((SECONDS - t0)) s in all"

# ---- the verdict
rc=0
kernel_ran=$(cat "$OUT/uname" 2>/dev/null || echo "unknown (the guest never got to its script)")
echo "== vm: kernel inside: $kernel_ran (booted $KERNEL, expected ${EXPECT}*)"
if [ "$kernel_ran" != "$KVER" ] || [[ $kernel_ran != "$EXPECT"* ]]; then
    echo "FAIL vm: the guest did not run the expected kernel"
    rc=1
fi
echo "== vm: the plugin's start lines (rootlesskit --debug, demo step):"
if [ -s "$OUT/plugin-start.log" ]; then
    # "level=L msg="[rootlesskit:parent] network/plugin: MSG" driver=plugin"
    # shown as "L: MSG": every line the library logged at start.
    grep -F 'network/plugin' "$OUT/plugin-start.log" |
        sed -E 's/.*level=([a-z]+) msg="\[[^]]*\] network\/plugin(\(child\))?: (.*)" driver=.*/    \1: \3/'
else
    echo "    (no log: the demo step did not run)"
fi
result=$(cat "$OUT/result" 2>/dev/null || true)
if [ "$qemu_rc" != 0 ] || [ "$result" != "rc=0" ]; then
    echo "FAIL vm: qemu status $qemu_rc, guest ${result:-gave no result (timeout after ${TIMEOUT} s or an early failure)}"
    [ -z "$alive" ] && console_tail "$boots"
    rc=1
fi
grep -h '^== vm step: .*: \(PASS\|FAIL\)' "$WORK/console.log" | sed 's/^/    /' || true
[ "$rc" = 0 ] && echo "== vm: all steps passed on $kernel_ran" || echo "== vm: FAILED"
exit "$rc"
