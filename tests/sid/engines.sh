#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The engines that run pasta or slirp4netns from Debian's packages, inside
# the Debian sid tree (tree.sh, entered with enter.sh), every case twice:
# with the tree's real pasta and slirp4netns (the reference: must pass)
# and with rknp-pasta and rknp-slirp4netns from BUILD_DIR, installed into
# the tree as podman.sh installs them (found through the helpers
# directory /usr/local/libexec/rknp/helpers). The cases
# (engines_cases.sh): rootlesskit 2.0.2 --net=pasta --pasta-binary
# --port-driver=implicit (download, published TCP/UDP ports, DNS through
# --dns-forward, SIGTERM); docker.io 28.5's dockerd-rootless.sh with
# NET=pasta and with the slirp4netns route it picks itself (download
# from a container, `-p`, stop); a k3s-style Go program (k3slike/)
# embedding rootlesskit v2.3.6's slirp4netns driver, with the builtin and
# the slirp4netns port drivers. The argv each engine was run with is
# printed under each result.
#
#   sudo tests/sid/engines.sh                     # BUILD_DIR (build-sid/)
#   SID_CASES="docker_pasta" SID_ENGINES=rknp sudo -E tests/sid/engines.sh
#
#   SID_CASES        the cases (default: all, in engines_cases.sh's order)
#   SID_ENGINES      `real rknp` (default), or one of them
#   SID_RKNP_EXPECT  the rknp cases that must pass (default below); the
#                    others print XFAIL (or XPASS) and do not fail the run
#   SID_VERBOSE=1    every case's log, not only the failures
#   SID_KEEP=1       keeps the results directory (logs, argv)
#   SID_TIMEOUT      bounds the whole run (default 600 s, after the lock)
#
# k3slike is built with the Go toolchain into BUILD_DIR/sid/k3slike (the
# module proxy gives rootlesskit v2.3.6 the first time). The network is
# podman.sh's: a world namespace whose only way out is a veth to the test
# host (198.18.5.2, the default gateway); the engines and the test's
# servers (DNS on the world's 127.0.0.1:53) run in the world. No traffic
# leaves the two namespaces; runs of this script and of podman.sh wait for
# each other (/run/lock/rknp-sid.lock).
set -euo pipefail
# shellcheck source=tests/sid/lib.sh
. "$(dirname "$0")/lib.sh"
sid_locked "${SID_TIMEOUT:-600}" "$@"

# The rknp cases that must pass: every case, but rootlesskit 2.0's pasta
# route (the rootlesskit_* cases and docker_pasta, whose rootlesskit is
# the same 2.0.2) while rknp-pasta refuses the options rootlesskit 2.0
# passes (--foreground --no-dhcp --no-ra; rootlesskit 2.3+ passes
# --config-net instead; 2.0 to 2.2 pass these).
if [ -z "${SID_RKNP_EXPECT+set}" ]; then
    SID_RKNP_EXPECT="docker_slirp4netns k3s_builtin k3s_slirp4netns"
    if "$BUILD_DIR/bin/rknp-pasta" --foreground --no-dhcp --no-ra --version >/dev/null 2>&1; then
        SID_RKNP_EXPECT="rootlesskit_download rootlesskit_publish rootlesskit_dns rootlesskit_exit docker_pasta $SID_RKNP_EXPECT"
    fi
fi
echo "# sid engines: rknp cases that must pass: $SID_RKNP_EXPECT" >&2

sid_rknp_built || exit 1
t0=$(date +%s)
"$SID_DIR/tree.sh" >/dev/null
t_tree=$(($(date +%s) - t0))

# The k3s-style program: static (the tree's libc is not the host's).
t0=$(date +%s)
K3SLIKE=$BUILD_DIR/sid/k3slike
mkdir -p "$BUILD_DIR/sid"
(cd "$SID_DIR/k3slike" && CGO_ENABLED=0 go build -trimpath -o "$K3SLIKE" .) ||
    { echo "building $SID_DIR/k3slike failed" >&2; exit 1; }
t_go=$(($(date +%s) - t0))

sid_install_rknp

echo "# sid engines: tree ready in $t_tree s ($(sed -n 2p "$SID_TREE/.rknp-sid-tree")), k3slike built in $t_go s" >&2
t1=$(date +%s)
rc=0
sid_run_cases sid/engines_cases.sh --bind "$K3SLIKE:/rknp/k3slike:ro" || rc=$?
echo "# sid engines: tree $t_tree s, k3slike $t_go s, cases $(($(date +%s) - t1)) s" >&2
exit "$rc"
