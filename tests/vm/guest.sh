#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# PID 1 inside the test VM (tests/vm/run.sh boots it; see tests/vm/README.md):
# makes the read-only 9p view of the host's root usable (tmpfs where tests
# write, a private copy of /etc for the test user), loads the modules the
# tests need, then runs the steps named in the parameters file the host
# left in the shared output directory, and powers the VM off. Each step's
# output goes to the console (the host shows it) and to OUT/steps/<name>.log;
# OUT/result gets "rc=<status>" last, which the host checks.
set -euo pipefail
# The sign of life run.sh waits for (it boots again a guest that never says it).
echo "rknp-vm: guest script started"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The kernel's boot messages went to the console log; from here on only
# warnings and worse, as with `quiet`.
dmesg -n 4
export LANG=C.UTF-8
OUT=/run/rknp-vm-out

power_off() {
    sync
    echo o >/proc/sysrq-trigger
    sleep 60 # the kernel powers off meanwhile; PID 1 must not exit first
}
# Whatever happens, the VM ends (PID 1 exiting would panic it) and the
# host finds a status: a missing one means the script died early.
finish() {
    local rc=$?
    [ -d "$OUT" ] && echo "rc=$rc" >"$OUT/result"
    echo "rknp-vm: guest finished, rc=$rc"
    power_off
}
trap finish EXIT

# ---- the file system: the host's root is read-only 9p
mount -t tmpfs -o mode=0755 tmpfs /run
# flock's lock files (tests/lib/common.sh setup_test_user), as on Debian.
install -d -m 1777 /run/lock
mkdir -p "$OUT"
mount -t 9p -o trans=virtio,version=9p2000.L,rw,msize=512000 rknpout "$OUT"
# shellcheck source=/dev/null # written by run.sh: REPO, BUILD, STEPS, ...
source "$OUT/params"
mount -t tmpfs -o mode=1777 tmpfs /tmp
for d in /var/tmp /var/log; do mount -t tmpfs -o mode=0755 tmpfs "$d"; done
chmod 1777 /var/tmp
mkdir -p /dev/pts /dev/shm
# What udev or systemd would make; bash's process substitution needs /dev/fd.
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# A checkout or build under one of these tmpfs (/tmp, /run, ...) is hidden
# now: run.sh shares both by their own devices, mounted back at their path.
unhide() { # TAG PATH
    [ -d "$2" ] && return 0
    mkdir -p "$2"
    mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 "$1" "$2"
    echo "rknp-vm: $2 (under a tmpfs here) mounted from its own share"
}
unhide rknprepo "$REPO"
unhide rknpbuild "$BUILD"
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null || true
# The subid files and e2e's setup_user write to /etc: an overlay with its
# changes in tmpfs (a copy over 9p takes half a minute under TCG). run.sh
# created the test user on the host: its home is read-only here.
modprobe overlay
mkdir -p /run/etc-changes/upper /run/etc-changes/work
mount -t overlay -o lowerdir=/etc,upperdir=/run/etc-changes/upper,workdir=/run/etc-changes/work \
    overlay /etc
export HOME=/tmp/rknp-vm-root
mkdir -m 0700 "$HOME"

echo "rknp-vm: kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print $2/1024 " MiB"}' /proc/meminfo)"
uname -r >"$OUT/uname"

# ---- kernel pieces: no network device except loopback (qemu has no NIC)
hostname rknp-vm
ip link set lo up
modprobe tun
modprobe veth
# What the tests expect of a distribution (Debian's default is 1 already).
[ -e /proc/sys/kernel/unprivileged_userns_clone ] && echo 1 >/proc/sys/kernel/unprivileged_userns_clone
chmod 0666 /dev/net/tun

# The build's artifacts, copied where the scripts may chmod them.
GUEST_BUILD=/tmp/rknp-vm-build
mkdir -p "$GUEST_BUILD/bin" "$GUEST_BUILD/lib"
for f in rootlesskit rootlessctl rknp-rel-driver rknp-rel-stream; do
    [ -e "$BUILD/bin/$f" ] && cp "$BUILD/bin/$f" "$GUEST_BUILD/bin/"
done
cp -a "$BUILD"/lib/librknp.so* "$GUEST_BUILD/lib/"
LIB=$GUEST_BUILD/lib/librknp.so.1

# ---- the steps
echo "rknp-vm: ready for the steps after $(cut -d' ' -f1 /proc/uptime) s of uptime"
mkdir -p "$OUT/steps"
failed=()
# step NAME CMD...: runs CMD in a subshell, its output to the console and
# the step's log. In the background and awaited, not `CMD || rc=$?`: bash
# ignores errexit inside a function whose status a || list tests.
step() {
    local name=$1 t0=$SECONDS rc=0
    shift
    echo "== vm step: $name"
    ("$@") > >(tee "$OUT/steps/$name.log") 2>&1 &
    wait $! || rc=$?
    echo "== vm step: $name: $([ "$rc" = 0 ] && echo PASS || echo "FAIL rc=$rc") ($((SECONDS - t0)) s)"
    [ "$rc" = 0 ] || failed+=("$name")
}

# The demo's core (tests/demo.sh without its build): as the test user,
# rootlesskit --net=plugin fetches a page from the host's 127.0.0.1. With
# --debug rootlesskit shows the library's log lines (start, TCP path,
# sandbox, tap offloads), kept in OUT/plugin-start.log for the report.
demo() {
    # shellcheck source=tests/lib/common.sh
    source "$REPO/tests/lib/common.sh"
    setup_test_user
    make_scratch vm-demo
    trap 'stop_background; rm -rf "$SCRATCH"' EXIT # a subshell (step)
    local page="Hello from the VM host, through rknp" port out
    echo "<h1>$page</h1>" >"$SCRATCH/index.html"
    port=$(free_port 127.0.0.1)
    start_http 127.0.0.1 "$port" "$SCRATCH"
    out=$(as_user "$GUEST_BUILD/bin/rootlesskit" --debug --net=plugin --net-plugin="$LIB" \
        --copy-up=/etc -- sh -c "ip -o addr show tap0; curl -fsS -m 60 http://10.0.2.2:$port/" 2>"$OUT/plugin-start.log")
    echo "$out"
    grep -q "$page" <<<"$out" || { echo "the page did not come through"; cat "$OUT/plugin-start.log"; return 1; }
    logged_as_probed
}

# feature NAME: its value in the features step's output.
feature() { awk -F': ' -v k="$1" '$1 == k {print $2}' "$OUT/kernel-features.txt"; }

# expect_logged WHAT PATTERN: the plugin logged a line matching PATTERN.
expect_logged() {
    local line
    if line=$(grep -F 'network/plugin' "$OUT/plugin-start.log" | grep -Em1 -- "$2"); then
        echo "ok $1: ${line#*msg=}"
    else
        echo "FAIL $1: no plugin log line /$2/"
        return 1
    fi
}

# Item 4 of issue 20: each kernel feature the plugin probes is either in
# force or off with a log line saying so, as the kernel's answers (the
# features step) require; the plugin logged no error.
logged_as_probed() {
    [ -s "$OUT/kernel-features.txt" ] || { echo "no features step output"; return 1; }
    local bad=0
    if [[ $(feature "Landlock ABI") == [0-9]* ]]; then
        expect_logged "Landlock ABI $(feature "Landlock ABI"): in force" "Landlock on" || bad=1
    else
        expect_logged "no Landlock: said so" "Landlock off \\(" || bad=1
    fi
    if [ "$(feature "seccomp(2) RET_ERRNO")" = yes ]; then
        expect_logged "seccomp: in force" "seccomp on" || bad=1
    else
        expect_logged "no seccomp: said so" "seccomp off \\(" || bad=1
    fi
    local tso="TUNSETOFFLOAD csum+TSO4+TSO_ECN (rknp below MTU 65520)"
    if [ "$(feature "$tso")" = yes ]; then
        expect_logged "tap offloads: on" "attached \\(offloads on\\)" || bad=1
    else
        expect_logged "no tap offloads: said so" "tap offloads unavailable" || bad=1
    fi
    # The TCP fast path runs either way; its peek mode says which.
    if [ "$(feature "SO_PEEK_OFF on TCP")" = yes ]; then
        expect_logged "SO_PEEK_OFF: the fast path peeks with it" "peek mode offset" || bad=1
    else
        expect_logged "no SO_PEEK_OFF: the fast path's discard mode" \
            "peek mode discard \\(the kernel has no SO_PEEK_OFF" || bad=1
    fi
    # UDP: GSO frames to the guest only where the tap takes them (6.2+).
    if [ "$(feature "TUNSETOFFLOAD USO4+USO6 (UDP GSO frames to the guest)")" = yes ]; then
        expect_logged "UDP GSO to the guest: on" "reach the guest as one GSO frame" || bad=1
    else
        expect_logged "no UDP GSO to the guest: said so" "one frame a datagram to the guest" || bad=1
    fi
    # ICMP echo: ping sockets or libslirp, either way said once.
    expect_logged "ICMP echo: its path said" "ICMP echo: (ping sockets|libslirp)" || bad=1
    if grep -F 'network/plugin' "$OUT/plugin-start.log" | grep -E 'level=(error|fatal)'; then
        echo "FAIL the plugin logged errors"
        bad=1
    fi
    [ "$bad" = 0 ]
}

for s in $STEPS; do
    case $s in
    features)
        step features "$REPO/tests/vm/kernel_features.py"
        cp "$OUT/steps/features.log" "$OUT/kernel-features.txt"
        ;;
    demo) step demo demo ;;
    e2e)
        # USER_TIMEOUT bounds each command run as the test user, the whole
        # of a ports case's rootlesskit included: 60 s is too tight under
        # TCG on a busy host (ports_plugin lost its API socket at ~60 s).
        step e2e env BUILD_DIR="$GUEST_BUILD" E2E_DRIVERS=plugin E2E_CASES="$E2E_CASES" \
            USER_TIMEOUT=180 "$REPO/tests/e2e/run.sh"
        ;;
    rel_stream)
        step rel_stream env REL_CONNS="$REL_CONNS" REL_LONG_DOWN="$REL_LONG_DOWN" \
            REL_LONG_UP="$REL_LONG_UP" "$REPO/tests/reliability/load.sh" "$GUEST_BUILD" fast
        ;;
    *) echo "unknown step $s"; failed+=("$s") ;;
    esac
done
echo "rknp-vm: steps failed: ${failed[*]:-none}"
[ ${#failed[@]} = 0 ]
