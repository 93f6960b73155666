#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Runs a command as root inside the sid tree (tree.sh): in a private mount
# namespace whose root is the tree, entered with pivot_root (the kernel
# refuses to create user namespaces inside a chroot, which rootless engines
# need), and a new PID namespace (the command is PID 1's only child, under
# the tree's catatonit: when it exits, everything started inside ends).
#
#   sudo tests/sid/enter.sh [--netns NAME] [--bind SRC:DST[:ro]]...
#                           [--env NAME=VALUE]... [--] CMD [ARG...]
#
# Network: the network namespace /run/netns/NAME, else a new one with only
# `lo` (never the host's). Mounted in the tree: a fresh /proc, /sys (of that
# network namespace) with cgroup2 on /sys/fs/cgroup (this host runs cgroup
# v1: rootless Podman runs with --cgroups=disabled), a tmpfs /dev with its
# own null/zero/full/random/urandom/tty/net/tun nodes (all 0666) and a new
# devpts, tmpfs on /tmp, /run (with /run/user/UID for the tree's user) and
# /dev/shm, and the --bind mounts. The tree's /etc/resolv.conf names
# 127.0.0.1 (tree.sh). The environment is cleared but for PATH, HOME,
# TERM, LANG, RKNP_TEST_RUN and the --env values. Exit status: CMD's.
set -euo pipefail
# shellcheck source=tests/sid/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

netns="" binds=() envs=()
parse() {
    while [ $# -gt 0 ]; do
        case $1 in
        --netns) netns=$2; shift 2 ;;
        --bind) binds+=("$2"); shift 2 ;;
        --env) envs+=("$2"); shift 2 ;;
        --) shift; break ;;
        -*) echo "enter.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
        esac
    done
    [ $# -gt 0 ] || { echo "usage: enter.sh [--netns NAME] [--bind SRC:DST[:ro]]... [--env K=V]... [--] CMD..." >&2; exit 2; }
    CMD=("$@")
}

# inner: runs in the new namespaces (PID 1 of the new PID namespace), still
# with the host's root: mounts under the tree, then pivot_root into it.
inner() {
    local t=$SID_TREE b src dst opt d
    mount --make-rprivate /
    mount --bind "$t" "$t"
    mount -t proc -o nosuid,nodev,noexec proc "$t/proc"
    mount -t sysfs -o nosuid,nodev,noexec sysfs "$t/sys"
    mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$t/sys/fs/cgroup"
    mount -t tmpfs -o nosuid,mode=0755,size=64k dev "$t/dev"
    mknod -m 0666 "$t/dev/null" c 1 3
    mknod -m 0666 "$t/dev/zero" c 1 5
    mknod -m 0666 "$t/dev/full" c 1 7
    mknod -m 0666 "$t/dev/random" c 1 8
    mknod -m 0666 "$t/dev/urandom" c 1 9
    mknod -m 0666 "$t/dev/tty" c 5 0
    mkdir -m 0755 "$t/dev/net" "$t/dev/pts" "$t/dev/shm"
    mknod -m 0666 "$t/dev/net/tun" c 10 200
    mount -t devpts -o newinstance,nosuid,noexec,ptmxmode=0666,mode=0620,gid=5 devpts "$t/dev/pts"
    ln -s pts/ptmx "$t/dev/ptmx"
    ln -s /proc/self/fd "$t/dev/fd"
    ln -s /proc/self/fd/0 "$t/dev/stdin"
    ln -s /proc/self/fd/1 "$t/dev/stdout"
    ln -s /proc/self/fd/2 "$t/dev/stderr"
    mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$t/dev/shm"
    mount -t tmpfs -o nosuid,nodev,mode=1777 tmp "$t/tmp"
    mount -t tmpfs -o nosuid,nodev,mode=0755 run "$t/run"
    mkdir -p "$t/run/lock" "$t/run/user/$SID_UID"
    chmod 1777 "$t/run/lock"
    chown "$SID_UID:$SID_UID" "$t/run/user/$SID_UID"
    chmod 0700 "$t/run/user/$SID_UID"
    for b in "${binds[@]}"; do
        IFS=: read -r src dst opt <<<"$b"
        if [ -d "$src" ]; then mkdir -p "$t$dst"; else
            mkdir -p "$t$(dirname "$dst")"; [ -e "$t$dst" ] || touch "$t$dst"
        fi
        mount --bind "$src" "$t$dst"
        [ "${opt:-}" = ro ] && mount -o remount,bind,ro "$t$dst"
    done
    ip link set lo up
    d=$t/.oldroot
    mkdir -p "$d"
    cd "$t"
    pivot_root . .oldroot
    # From here on every program is the tree's.
    cd /
    umount -l /.oldroot
    # Shared, as on a systemd host (rootless Podman warns otherwise); the
    # namespace is private to this run all the same.
    mount --make-rshared /
    exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 RKNP_TEST_RUN="${RKNP_TEST_RUN:-}" \
        "${envs[@]}" /usr/bin/catatonit -- "${CMD[@]}"
}

parse "$@"
if [ -n "${_SID_ENTER_INNER:-}" ]; then
    inner
fi
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, mounts)" >&2; exit 1; }
[ -x "$SID_TREE/usr/bin/podman" ] || { echo "no sid tree at $SID_TREE (tests/sid/tree.sh)" >&2; exit 1; }
pre=() new_net=()
if [ -n "$netns" ]; then
    case $netns in /*) ;; *) netns=/run/netns/$netns ;; esac
    pre=(nsenter "--net=$netns")
else
    new_net=(--net)
fi
exec "${pre[@]}" unshare --mount --pid --fork --kill-child "${new_net[@]}" \
    env _SID_ENTER_INNER=1 SID_TREE="$SID_TREE" bash "${BASH_SOURCE[0]}" "$@"
