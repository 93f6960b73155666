#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Podman 6.1 (Debian experimental) rootless with `--network pasta`, inside
# the Debian sid tree (tree.sh, entered with enter.sh), every case twice:
# with the tree's real pasta (the reference: must pass) and with
# rknp-pasta from BUILD_DIR (installed into the tree, found as `pasta`
# through containers.conf's helper_binaries_dir). The cases
# (podman_cases.sh): download from a test host, -p TCP/UDP from loopback,
# a remote client's address seen inside, the host's loopback through
# host.containers.internal, DNS through --dns-forward, podman info. The
# argv Podman passes to pasta is printed under each result.
#
#   sudo tests/sid/podman.sh                     # BUILD_DIR (build-sid/)
#   SID_CASES="download dns" SID_ENGINES=rknp sudo -E tests/sid/podman.sh
#
#   SID_CASES        the cases (default: all, in podman_cases.sh's order)
#   SID_ENGINES      `real rknp` (default), or one of them
#   SID_RKNP_EXPECT  the rknp cases that must pass (default below); the
#                    others print XFAIL (or XPASS) and do not fail the run
#   SID_VERBOSE=1    every case's log, not only the failures
#   SID_KEEP=1       keeps the results directory (logs, argv)
#   SID_TIMEOUT      bounds the whole run (default 900 s, after the lock)
#
# The world: a network namespace whose only way out is eth0, a veth to a
# second namespace (the test host, 198.18.5.2 and fd52:5::2, also the
# default gateway; the world is 198.18.5.1/24 and fd52:5::1/64);
# Podman, its pasta and the test's servers run in the world (DNS on its
# 127.0.0.1:53). No traffic leaves these namespaces, and nothing outside
# them is shared with other suites (the tree has its own user and
# resolv.conf); two runs of this script wait for each other
# (/run/lock/rknp-sid.lock).
set -euo pipefail
# shellcheck source=tests/sid/lib.sh
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, the sid tree)" >&2; exit 1; }
if [ -z "${_SID_LOCKED:-}" ]; then
    exec env _SID_LOCKED=1 flock /run/lock/rknp-sid.lock \
        timeout -k 10 "${SID_TIMEOUT:-900}" bash "$0" "$@"
fi

# The rknp cases that must pass: with an rknp-pasta that knows Podman 6's
# --map-guest-addr (pasta's address model: Podman 6 has no fallback
# without it), every case but `addresses` (rknp-pasta gives the container
# its own IPv6 prefix, not the host's); before that, only `info`.
if [ -z "${SID_RKNP_EXPECT+set}" ]; then
    if "$BUILD_DIR/bin/rknp-pasta" --help 2>&1 | grep -q -- --map-guest-addr; then
        SID_RKNP_EXPECT="download download6 publish client_addr host_address host_loopback dns info"
    else
        SID_RKNP_EXPECT="info"
    fi
fi
echo "# sid: rknp cases that must pass: $SID_RKNP_EXPECT" >&2

for f in "$BUILD_DIR/bin/rknp-pasta" "$BUILD_DIR/bin/rknp-slirp4netns" "$BUILD_DIR/lib/librknp.so.1"; do
    [ -e "$f" ] || { echo "missing $f (source tests/lib/build.sh; build_all $BUILD_DIR)" >&2; exit 1; }
done

t0=$(date +%s)
"$SID_DIR/tree.sh" >/dev/null
t_tree=$(($(date +%s) - t0))

# rknp into the tree: the commands and the library in /usr/local (the
# commands find the library through their $ORIGIN/../lib rpath, and
# ldconfig knows it), and a helpers directory of links under the names
# the engines look for.
install -D -m 0755 "$BUILD_DIR/bin/rknp-pasta" "$SID_TREE/usr/local/bin/rknp-pasta"
install -D -m 0755 "$BUILD_DIR/bin/rknp-slirp4netns" "$SID_TREE/usr/local/bin/rknp-slirp4netns"
install -D -m 0755 "$(readlink -f "$BUILD_DIR/lib/librknp.so.1")" "$SID_TREE/usr/local/lib/librknp.so.1"
helpers=$SID_TREE/usr/local/libexec/rknp/helpers
mkdir -p "$helpers"
ln -sfn /usr/local/bin/rknp-pasta "$helpers/pasta"
ln -sfn /usr/local/bin/rknp-slirp4netns "$helpers/slirp4netns"
if [ -e "$BUILD_DIR/bin/rknp-pesto" ]; then
    install -D -m 0755 "$BUILD_DIR/bin/rknp-pesto" "$SID_TREE/usr/local/bin/rknp-pesto"
    ln -sfn /usr/local/bin/rknp-pesto "$helpers/pesto"
fi
chroot "$SID_TREE" /sbin/ldconfig

WORLD=rknp-sid-world
REMOTE=rknp-sid-remote
OUT=$(mktemp -d /tmp/rknp-sid.XXXXXX)
chmod 0755 "$OUT"
# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
    ip netns del "$WORLD" 2>/dev/null || true
    ip netns del "$REMOTE" 2>/dev/null || true
    if [ -n "${SID_KEEP:-}" ]; then echo "# results kept in $OUT" >&2; else rm -rf "$OUT"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns del "$WORLD" 2>/dev/null || true
ip netns del "$REMOTE" 2>/dev/null || true
ip netns add "$WORLD"
ip netns add "$REMOTE"
ip -n "$WORLD" link add eth0 type veth peer name eth0 netns "$REMOTE"
ip -n "$WORLD" addr add 198.18.5.1/24 dev eth0
ip -n "$WORLD" addr add fd52:5::1/64 dev eth0 nodad
ip -n "$REMOTE" addr add 198.18.5.2/24 dev eth0
ip -n "$REMOTE" addr add fd52:5::2/64 dev eth0 nodad
for ns in "$WORLD" "$REMOTE"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
done
ip -n "$WORLD" route add default via 198.18.5.2 dev eth0
ip -n "$WORLD" -6 route add default via fd52:5::2 dev eth0

echo "# sid: tree ready in $t_tree s ($(sed -n 2p "$SID_TREE/.rknp-sid-tree"))" >&2
t1=$(date +%s)
rc=0
"$SID_DIR/enter.sh" --netns "$WORLD" \
    --bind "$SID_REPO/tests:/rknp/tests:ro" --bind "$OUT:/rknp/out" \
    --bind "/run/netns/$REMOTE:/rknp/remote.netns" \
    --env "SID_CASES=${SID_CASES:-}" --env "SID_ENGINES=${SID_ENGINES:-}" \
    --env "SID_RKNP_EXPECT=$SID_RKNP_EXPECT" --env "SID_VERBOSE=${SID_VERBOSE:-}" \
    -- bash /rknp/tests/sid/podman_cases.sh || rc=$?
echo "# sid: tree $t_tree s, cases $(($(date +%s) - t1)) s" >&2
exit "$rc"
