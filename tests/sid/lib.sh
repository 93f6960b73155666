# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# The sid harness's shared settings (sourced by tests/sid/*.sh, run as
# root): where the Debian sid tree lives, what goes into it, the mirror it
# comes from, rknp installed into it, and the cases' two network
# namespaces.
#
#   BUILD_DIR   the rknp build (default $ROOT/build-sid)
#   SID_TREE    the tree (default $BUILD_DIR/sid-tree)
#   SID_MIRROR  the Debian mirror (default: the host's apt sources)

SID_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SID_REPO=$(cd "$SID_DIR/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$SID_REPO/build-sid}
SID_TREE=${SID_TREE:-$BUILD_DIR/sid-tree}
# shellcheck disable=SC2034 # used by the scripts that source this file
{
# The unprivileged user inside the tree (the tree's own /etc/passwd: not
# the host's test user) and its subordinate id range.
SID_USER=rknp
SID_UID=1000
SID_SUBIDS=100000:65536

# What the tree holds. From experimental, pinned (sid_prefs): Podman 6.1
# and the two packages whose experimental versions belong to it; all else
# from sid. Recommends are off, so the engines' helpers are named here.
SID_PACKAGES=(
    # Podman 6.1 (experimental) and what rootless Podman runs.
    podman golang-github-containers-common netavark conmon crun catatonit
    uidmap passt aardvark-dns nftables iptables
    # Rootless Docker 28.5 and rootlesskit 2.0 (sid), for later cases.
    docker.io docker-cli containerd runc rootlesskit slirp4netns
    systemd-standalone-sysusers
    # The harness: servers, clients, the container image's busybox.
    iproute2 python3 iperf3 curl busybox-static procps mount
    # What the rknp commands built on the host link against.
    libslirp0 libnl-3-200 libnl-route-3-200 libseccomp2 libglib2.0-0t64
    libstdc++6
)
}
SID_EXPERIMENTAL=(podman golang-github-containers-common netavark)

# sid_prefs: apt's preferences: experimental never wins on its own (it is
# NotAutomatic already; said again here), except for SID_EXPERIMENTAL.
sid_prefs() {
    printf 'Package: *\nPin: release a=experimental\nPin-Priority: 1\n\n'
    printf 'Package: %s\nPin: release a=experimental\nPin-Priority: 990\n' "${SID_EXPERIMENTAL[*]}"
}

# sid_mirror: SID_MIRROR, else the first Debian archive URI in the host's
# apt sources (deb822 `URIs:` or one-line `deb URI ...`) ending in /debian.
sid_mirror() {
    if [ -n "${SID_MIRROR:-}" ]; then
        echo "$SID_MIRROR"
        return 0
    fi
    local m
    m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -nE 's/^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)//p' |
        tr ' ' '\n' | grep -E '^https?://.*/debian/?$' | head -n1)
    [ -n "$m" ] || { echo "no Debian mirror in the host's apt sources: set SID_MIRROR" >&2; return 1; }
    echo "${m%/}"
}

# sid_locked SECONDS ARGS...: run as root, the calling script runs again
# (with ARGS) once no other sid run holds /run/lock/rknp-sid.lock, bounded
# by SECONDS; returns in that second run.
sid_locked() {
    [ "$(id -u)" = 0 ] || { echo "run as root (namespaces, the sid tree)" >&2; exit 1; }
    if [ -z "${_SID_LOCKED:-}" ]; then
        exec env _SID_LOCKED=1 flock /run/lock/rknp-sid.lock \
            timeout -k 10 "$1" bash "$0" "${@:2}"
    fi
}

# sid_rknp_built: BUILD_DIR holds what sid_install_rknp installs (checked
# before the tree is made: that can take two minutes).
sid_rknp_built() {
    local f
    for f in "$BUILD_DIR/bin/rknp-pasta" "$BUILD_DIR/bin/rknp-slirp4netns" "$BUILD_DIR/lib/librknp.so.1"; do
        [ -e "$f" ] || { echo "missing $f (source tests/lib/build.sh; build_all $BUILD_DIR)" >&2; return 1; }
    done
}

# sid_install_rknp: rknp into the tree: the commands and the library in
# /usr/local (the commands find the library through their $ORIGIN/../lib
# rpath, and ldconfig knows it), and a helpers directory of links under
# the names the engines look for (pasta, pesto, slirp4netns).
sid_install_rknp() {
    local helpers=$SID_TREE/usr/local/libexec/rknp/helpers
    install -D -m 0755 "$BUILD_DIR/bin/rknp-pasta" "$SID_TREE/usr/local/bin/rknp-pasta"
    install -D -m 0755 "$BUILD_DIR/bin/rknp-slirp4netns" "$SID_TREE/usr/local/bin/rknp-slirp4netns"
    install -D -m 0755 "$(readlink -f "$BUILD_DIR/lib/librknp.so.1")" "$SID_TREE/usr/local/lib/librknp.so.1"
    mkdir -p "$helpers"
    ln -sfn /usr/local/bin/rknp-pasta "$helpers/pasta"
    ln -sfn /usr/local/bin/rknp-slirp4netns "$helpers/slirp4netns"
    if [ -e "$BUILD_DIR/bin/rknp-pesto" ]; then
        install -D -m 0755 "$BUILD_DIR/bin/rknp-pesto" "$SID_TREE/usr/local/bin/rknp-pesto"
        ln -sfn /usr/local/bin/rknp-pesto "$helpers/pesto"
    fi
    chroot "$SID_TREE" /sbin/ldconfig
}

# The cases' network: the world, a namespace whose only way out is eth0, a
# veth to the test host (a second namespace, also the default gateway).
# The world is 198.18.5.1/24 and fd52:5::1/64, the test host 198.18.5.2
# and fd52:5::2. No traffic leaves these two namespaces.
SID_WORLD=rknp-sid-world
SID_REMOTE=rknp-sid-remote

# sid_world_down: the two namespaces gone (also when they never were).
sid_world_down() {
    ip netns del "$SID_WORLD" 2>/dev/null || true
    ip netns del "$SID_REMOTE" 2>/dev/null || true
}

# sid_world_up: the two namespaces made afresh (SID_WORLD_MADE=1).
sid_world_up() {
    local ns
    sid_world_down
    SID_WORLD_MADE=1
    ip netns add "$SID_WORLD"
    ip netns add "$SID_REMOTE"
    ip -n "$SID_WORLD" link add eth0 type veth peer name eth0 netns "$SID_REMOTE"
    ip -n "$SID_WORLD" addr add 198.18.5.1/24 dev eth0
    ip -n "$SID_WORLD" addr add fd52:5::1/64 dev eth0 nodad
    ip -n "$SID_REMOTE" addr add 198.18.5.2/24 dev eth0
    ip -n "$SID_REMOTE" addr add fd52:5::2/64 dev eth0 nodad
    for ns in "$SID_WORLD" "$SID_REMOTE"; do
        ip -n "$ns" link set lo up
        ip -n "$ns" link set eth0 up
    done
    ip -n "$SID_WORLD" route add default via 198.18.5.2 dev eth0
    ip -n "$SID_WORLD" -6 route add default via fd52:5::2 dev eth0
}

# sid_run_cases SCRIPT [enter.sh OPTIONS...]: SCRIPT (a path under tests/,
# e.g. sid/podman_cases.sh) run inside the tree as root in the world, with tests/
# at /rknp/tests (read-only), a results directory at /rknp/out (kept with
# SID_KEEP=1), the test host's namespace at /rknp/remote.netns, and the
# SID_* settings; the world is made first (unless the caller made it
# with sid_world_up) and removed at exit (then sid_cleanup_hook runs, if
# the caller defined it). Returns the cases' status.
sid_run_cases() {
    local script=$1 rc=0
    shift
    SID_OUT=$(mktemp -d /tmp/rknp-sid.XXXXXX)
    chmod 0755 "$SID_OUT"
    trap sid_cleanup EXIT
    trap 'exit 130' INT TERM
    [ -n "${SID_WORLD_MADE:-}" ] || sid_world_up
    "$SID_DIR/enter.sh" --netns "$SID_WORLD" \
        --bind "$SID_REPO/tests:/rknp/tests:ro" --bind "$SID_OUT:/rknp/out" \
        --bind "/run/netns/$SID_REMOTE:/rknp/remote.netns" "$@" \
        --env "SID_CASES=${SID_CASES:-}" --env "SID_ENGINES=${SID_ENGINES:-}" \
        --env "SID_RKNP_EXPECT=${SID_RKNP_EXPECT:-}" --env "SID_VERBOSE=${SID_VERBOSE:-}" \
        -- bash "/rknp/tests/$script" || rc=$?
    return "$rc"
}

# sid_cleanup: the EXIT trap of sid_run_cases.
# shellcheck disable=SC2317 # run by the trap
sid_cleanup() {
    if declare -F sid_cleanup_hook >/dev/null; then sid_cleanup_hook; fi
    sid_world_down
    if [ -n "${SID_KEEP:-}" ]; then echo "# results kept in $SID_OUT" >&2; else rm -rf "$SID_OUT"; fi
}
