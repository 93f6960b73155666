#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The Debian packages end to end: builds the .debs from a clean copy of the
# tree (dpkg-buildpackage -us -uc -b), runs lintian
# (any error or warning fails), installs them, checks the installed files
# (hardening-check, pkg-config and CMake consumers, the man page) and runs
# the demo against the installed packages, not the build tree. Removes the
# packages again at the end. Run as root (tests/run-all.sh calls it).
#   PACKAGE_CHECK=1  build the tests too and run them in dh_auto_test (by
#                    default nocheck: the test command has run them on
#                    this tree already; this builds it as a distribution's
#                    nocheck build does, without the tests)
#   PACKAGE_DEMO=0   leave out the demo (it needs namespaces and the test user)
#   KEEP_WORK=1      keep the build directory (printed)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "run as root (installs packages)"; exit 1; }
WORK=$(mktemp -d /tmp/rknp-package.XXXXXX)
PACKAGES=(librknp1 librknp-dev rknp-slirp4netns rknp-pasta rknp-rootlesskit)
apt_locked() { flock /tmp/rknp-apt.lock env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
cleanup() {
    apt_locked purge -y -q "${PACKAGES[@]}" >/dev/null 2>&1 || true
    if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
step() { echo "== package: $* (${SECONDS}s so far)"; }
command -v go >/dev/null || export PATH=$PATH:/usr/local/go/bin

step "clean copy of the tree (tracked and new files, nothing ignored)"
mkdir "$WORK/rknp"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 tar -c --no-recursion) | tar -x -C "$WORK/rknp"

opts="parallel=$(nproc)"
[ "${PACKAGE_CHECK:-0}" = 1 ] || opts+=" nocheck"
step "dpkg-buildpackage -us -uc -b (DEB_BUILD_OPTIONS=\"$opts\")"
(cd "$WORK/rknp" && DEB_BUILD_OPTIONS="$opts" \
    dpkg-buildpackage -us -uc -b >"$WORK/build.log" 2>&1) || {
    tail -n 80 "$WORK/build.log"; echo "FAIL: dpkg-buildpackage (log: $WORK/build.log)"
    KEEP_WORK=1; exit 1; }
grep -E '^[0-9]+% tests passed|tests did not run|Skipped' "$WORK/build.log" || true
changes=$(ls "$WORK"/rknp_*.changes)

step "lintian (errors and warnings fail; overrides in debian/*.lintian-overrides)"
lintian --fail-on error,warning "$changes" 2> >(grep -v 'root privileges' >&2)

step "install"
debs=()
for p in "${PACKAGES[@]}"; do debs+=("$(ls "$WORK/${p}"_*.deb)"); done
apt_locked install -y -q --no-install-recommends "${debs[@]}" >"$WORK/install.log" 2>&1 ||
    { cat "$WORK/install.log"; exit 1; }
libdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
lib=$(readlink -f "$libdir/librknp.so.1")
rootlesskit=/usr/libexec/rknp/rootlesskit

step "hardening-check on the installed library and commands"
# --nocfprotection: Debian 12's glibc start files (crti.o, Scrt1.o) carry no
# IBT/SHSTK property, so the linker drops the note from every binary
# linked against them; that the code itself is built with -fcf-protection
# is checked below by the endbr64 at the exported entry point.
hardening-check --nocfprotection "$lib" /usr/bin/rknp-slirp4netns /usr/bin/rknp-pasta \
    /usr/bin/rknp-pesto "$rootlesskit"
if [ "$(uname -m)" = x86_64 ]; then
    objdump -d --disassemble=rknp_get_api "$lib" | grep -q endbr64 ||
        { echo "FAIL: rknp_get_api does not start with endbr64 (-fcf-protection)"; exit 1; }
fi

step "installed files: version, pkg-config and CMake consumers, man page"
rknp-slirp4netns --version | head -n 3
rknp-pasta --version | head -n 2
rknp-pesto --version | head -n 1
version=$(pkg-config --modversion rknp)
[ "$lib" = "$libdir/librknp.so.$version" ] || { echo "FAIL: $lib is not librknp.so.$version"; exit 1; }
read -ra consumer_flags <<<"$(pkg-config --cflags --libs rknp)"
cc -std=c99 -Wall -Werror "$ROOT/tests/abi/consumer.c" -o "$WORK/consumer" "${consumer_flags[@]}"
"$WORK/consumer"
cmake -S "$ROOT/tests/abi/cmake-consumer" -B "$WORK/cmake-consumer" >/dev/null
cmake --build "$WORK/cmake-consumer" >/dev/null
"$WORK/cmake-consumer/consumer"
test -e /usr/share/man/man1/rknp-slirp4netns.1.gz || { echo "FAIL: no man page"; exit 1; }
test -e /usr/share/man/man1/rknp-pasta.1.gz || { echo "FAIL: no rknp-pasta man page"; exit 1; }
test -e /usr/share/man/man1/rknp-pesto.1.gz || { echo "FAIL: no rknp-pesto man page"; exit 1; }
# The drop-in directory: what dockerd-rootless.sh, k3s and Podman 5 find
# by the name slirp4netns; --netns-type in --help is how the first picks it.
PATH=/usr/libexec/rknp/helpers:$PATH slirp4netns --help | grep -q -- --netns-type ||
    { echo "FAIL: /usr/libexec/rknp/helpers/slirp4netns is not rknp-slirp4netns"; exit 1; }
[ "$(readlink -f /usr/libexec/rknp/helpers/slirp4netns)" = /usr/bin/rknp-slirp4netns ] ||
    { echo "FAIL: the helpers link does not lead to rknp-slirp4netns"; exit 1; }
# Podman runs the program named pasta it finds first (helper_binaries_dir).
PATH=/usr/libexec/rknp/helpers:$PATH pasta --version | grep -q '^rknp-pasta ' ||
    { echo "FAIL: /usr/libexec/rknp/helpers/pasta is not rknp-pasta"; exit 1; }
# ...and the pesto beside it, for its port changes (rootless_port_forwarder).
PATH=/usr/libexec/rknp/helpers:$PATH pesto --version | grep -q '^rknp-pesto ' ||
    { echo "FAIL: /usr/libexec/rknp/helpers/pesto is not rknp-pesto"; exit 1; }
[ "$(readlink -f /usr/libexec/rknp/helpers/pesto)" = /usr/bin/rknp-pesto ] ||
    { echo "FAIL: the helpers link does not lead to rknp-pesto"; exit 1; }
test -e /usr/share/man/man1/rknp-rootlesskit.1.gz || { echo "FAIL: no rknp-rootlesskit man page"; exit 1; }

step "an external Go program builds against the module and loads the installed library"
# A bare name: the dynamic loader finds the installed librknp.so.1.
"$ROOT/tests/go-external/run.sh" librknp.so.1

if [ "${PACKAGE_DEMO:-1}" = 1 ]; then
    step "demo against the installed packages ($rootlesskit)"
    RKNP_INSTALLED=1 "$ROOT/tests/demo.sh"
fi
step "passed"
