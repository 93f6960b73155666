# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# The sid harness's shared settings (sourced by tests/sid/*.sh, run as
# root): where the Debian sid tree lives, what goes into it, the mirror it
# comes from, and entering it (enter.sh).
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
    uidmap passt
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
