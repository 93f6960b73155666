#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Installs the Debian packages rknp builds and tests with (idempotent).
set -euo pipefail
PACKAGES=(
    build-essential cmake ninja-build pkg-config
    libslirp-dev libglib2.0-dev libnl-3-dev libnl-route-3-dev doctest-dev
    iproute2 util-linux uidmap procps curl python3 iperf3 binutils
    slirp4netns passt valgrind clang-14 libclang-rt-14-dev
    rootlesskit nlohmann-json3-dev libseccomp-dev
    docker.io busybox-static
    # Packaging (tests/package/run.sh), the ABI check and the man page.
    debhelper dpkg-dev fakeroot devscripts lintian abigail-tools help2man
    # Every shell script is checked (tests/shellcheck.sh).
    shellcheck
    # tests/vm/run.sh: Debian 12's own kernel (6.1) booted in qemu (TCG),
    # the 9p modules found with modprobe, busybox-static as its initramfs.
    linux-image-amd64 qemu-system-x86 kmod
    # tests/sid/tree.sh: the Debian sid tree with the modern engines.
    mmdebstrap
    # tests/soak/plot.py: the soak run's PNG.
    python3-matplotlib
)
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Go (>= 1.26, for rootlesskit v3) comes with the machine, not from Debian.
command -v go >/dev/null || echo "warning: no go on PATH; Go parts will fail" >&2
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
# tests/vm/run.sh's second kernel: Debian 11's 5.10 (not in Debian 12).
"$(dirname "$0")/vm/install-old-kernel.sh"
[ ${#missing[@]} -eq 0 ] && exit 0
# docker.io and containerd are only for the rootless Docker test, which
# starts its own unprivileged daemons: the system-wide root daemons that the
# packages just enabled (where systemd runs) are stopped and disabled.
if [[ " ${missing[*]} " == *" docker.io "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now docker.socket docker.service containerd.service || true
fi
