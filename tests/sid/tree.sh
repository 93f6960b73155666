#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Makes the Debian sid tree the sid harness runs its engines in (Podman 6.1
# from experimental; passt, docker.io 28.5, rootlesskit 2.0 from sid; see
# SID_PACKAGES in lib.sh), with mmdebstrap from the host's Debian mirror,
# or reuses the one made before when it is complete and made from the same
# recipe (this file, lib.sh's package list, user and pins, and the mirror:
# the stamp file). A new tree is
# made beside the old one and moved into place only once complete.
#
#   sudo tests/sid/tree.sh          # SID_TREE (default build-sid/sid-tree)
#   SID_TREE_REMAKE=1 ...           # make it again even if complete
#
# The tree holds: /etc/resolv.conf naming 127.0.0.1 only (the tests run
# their DNS server there), the unprivileged user `rknp` (uid 1000) with a
# subordinate id range. Prints the path of the tree last.
set -euo pipefail
# shellcheck source=tests/sid/lib.sh
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root (mmdebstrap in root mode)" >&2; exit 1; }
command -v mmdebstrap >/dev/null ||
    { echo "mmdebstrap missing (tests/install-deps.sh installs it)" >&2; exit 1; }
# One maker at a time (a second one waits, then finds the tree made).
if [ -z "${_SID_TREE_LOCKED:-}" ]; then
    exec env _SID_TREE_LOCKED=1 flock /run/lock/rknp-sid-tree.lock bash "$0" "$@"
fi

MIRROR=$(sid_mirror)
STAMP_FILE=.rknp-sid-tree
stamp=$( (cat "$SID_DIR/tree.sh"; declare -p SID_PACKAGES SID_EXPERIMENTAL SID_USER SID_UID SID_SUBIDS
    sid_prefs; echo "$MIRROR") | sha256sum | cut -d' ' -f1)
if [ -z "${SID_TREE_REMAKE:-}" ] && [ -f "$SID_TREE/$STAMP_FILE" ] &&
    [ "$(head -n1 "$SID_TREE/$STAMP_FILE")" = "$stamp" ]; then
    echo "# sid tree: reusing $SID_TREE ($(sed -n 2p "$SID_TREE/$STAMP_FILE"))" >&2
    echo "$SID_TREE"
    exit 0
fi

mkdir -p "$(dirname "$SID_TREE")"
new=$SID_TREE.new
rm -rf "$new"
work=$(mktemp -d /tmp/rknp-sid-tree.XXXXXX)
trap 'rm -rf "$work" "$new"' EXIT
sid_prefs >"$work/preferences"
t0=$(date +%s)
echo "# sid tree: mmdebstrap sid + experimental from $MIRROR into $new" >&2
includes=$(IFS=,; echo "${SID_PACKAGES[*]}")
# The snapshot's Release files are past their Valid-Until. Documentation
# and locales are left out (smaller, faster). In root mode the maintainer
# scripts run in the tree, services are not started (mmdebstrap's
# policy-rc.d).
# mmdebstrap's hooks run apt's `cat >&N` under dash, which takes only
# one-digit fds: the fds this script inherited (the callers' locks) are
# closed first so that mmdebstrap's own stay below 10.
# shellcheck disable=SC2016 # the hooks' $1 is mmdebstrap's (the tree)
(
for fd in "/proc/$BASHPID/fd/"*; do
    fd=${fd##*/}
    [ "$fd" -gt 2 ] && eval "exec $fd>&-"
done
exec mmdebstrap --mode=root --variant=apt --components=main \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --setup-hook="install -D -m 0644 '$work/preferences' \"\$1/etc/apt/preferences.d/rknp-experimental\"" \
    --include="$includes" \
    --customize-hook='echo "nameserver 127.0.0.1" >"$1/etc/resolv.conf"' \
    --customize-hook="chroot \"\$1\" useradd --create-home --uid $SID_UID --shell /bin/bash $SID_USER" \
    --customize-hook="echo $SID_USER:$SID_SUBIDS >\"\$1/etc/subuid\"; echo $SID_USER:$SID_SUBIDS >\"\$1/etc/subgid\"" \
    --customize-hook='printf "127.0.0.1 localhost\n::1 localhost\n" >"$1/etc/hosts"' \
    sid "$new" \
    "deb $MIRROR sid main" "deb $MIRROR experimental main"
) >"$work/mmdebstrap.log" 2>&1 ||
    { tail -n 40 "$work/mmdebstrap.log" >&2; echo "mmdebstrap failed" >&2; exit 1; }
t1=$(date +%s)
# shellcheck disable=SC2016 # dpkg-query's format
versions=$(chroot "$new" dpkg-query -W -f='${Package} ${Version}\n' podman passt docker.io rootlesskit |
    tr '\n' ' ')
printf '%s\n%s, made in %s s, %s\n' "$stamp" "$(date -u +%FT%TZ)" "$((t1 - t0))" "$versions" \
    >"$new/$STAMP_FILE"
rm -rf "$SID_TREE"
mv "$new" "$SID_TREE"
echo "# sid tree: made in $((t1 - t0)) s, $(du -sh "$SID_TREE" | cut -f1): $versions" >&2
echo "$SID_TREE"
