#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Podman 6.1 (Debian experimental) rootless with `--network pasta`, inside
# the Debian sid tree (tree.sh, entered with enter.sh), every case twice:
# with the tree's real pasta (the reference: must pass) and with
# rknp-pasta from BUILD_DIR (installed into the tree, found as `pasta`
# through containers.conf's helper_binaries_dir). The cases
# (podman_cases.sh): download from a test host, -p TCP/UDP from loopback,
# a remote client's address seen inside, the host's loopback through
# host.containers.internal, DNS through --dns-forward, a bridge network in
# Podman's rootless network namespace (with rootlessport, and with pasta
# and pesto as the port forwarder), podman info. The
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
sid_locked "${SID_TIMEOUT:-900}" "$@"

# The rknp cases that must pass: with an rknp-pasta that knows Podman 6's
# --map-guest-addr (pasta's address model: Podman 6 has no fallback
# without it), every case but `network_pesto`; with one that takes -6
# (ABI 1.7: the host's IPv6 network, IPv6 -a/-g/--map-guest-addr)
# `addresses` and the rootless network namespace's `network` (--address
# fc00::3) too; with one whose specs take a target address (its --help
# names ADDR/G: Podman's pesto names the container's bridge address,
# 0.0.0.0/HP:ADDR/CP) `network_pesto` too; before that, only `info`.
if [ -z "${SID_RKNP_EXPECT+set}" ]; then
    if "$BUILD_DIR/bin/rknp-pasta" --help 2>&1 | grep -q -- 'ADDR/G'; then
        SID_RKNP_EXPECT="addresses download download6 publish client_addr host_address host_loopback dns network network_pesto info"
    elif "$BUILD_DIR/bin/rknp-pasta" --help 2>&1 | grep -q -- --ipv6-only; then
        SID_RKNP_EXPECT="addresses download download6 publish client_addr host_address host_loopback dns network info"
    elif "$BUILD_DIR/bin/rknp-pasta" --help 2>&1 | grep -q -- --map-guest-addr; then
        SID_RKNP_EXPECT="download download6 publish client_addr host_address host_loopback dns info"
    else
        SID_RKNP_EXPECT="info"
    fi
fi
echo "# sid: rknp cases that must pass: $SID_RKNP_EXPECT" >&2

sid_rknp_built || exit 1
t0=$(date +%s)
"$SID_DIR/tree.sh" >/dev/null
t_tree=$(($(date +%s) - t0))

sid_install_rknp

echo "# sid: tree ready in $t_tree s ($(sed -n 2p "$SID_TREE/.rknp-sid-tree"))" >&2
t1=$(date +%s)
rc=0
sid_run_cases sid/podman_cases.sh || rc=$?
echo "# sid: tree $t_tree s, cases $(($(date +%s) - t1)) s" >&2
exit "$rc"
