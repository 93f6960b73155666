#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Installs Debian 11's kernel (5.10, package linux-image-5.10.0-N-amd64)
# beside Debian 12's, for tests/vm/run.sh's second boot: the oldest kernel
# family still on users' machines and CI runners (no Landlock, no UDP GSO on
# taps, no SO_PEEK_OFF for TCP). Debian 12 has no 5.10 package, so the
# package comes from Debian's own bullseye archive through a private apt
# state (the machine's sources and package lists stay as they are); dpkg
# installs it without an initrd (the VM boots with its own initramfs).
# Idempotent: does nothing when a /boot/vmlinuz-5.10.* is there.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root"; exit 1; }
if compgen -G '/boot/vmlinuz-5.10.*' >/dev/null; then exit 0; fi

STATE=$(mktemp -d /tmp/rknp-old-kernel.XXXXXX)
trap 'rm -rf "$STATE"' EXIT
mkdir -p "$STATE/lists/partial" "$STATE/cache/archives/partial"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
APT_PRIVATE=(-o Dir::Etc::SourceList="$STATE/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o Dir::State::Lists="$STATE/lists" -o Dir::Cache="$STATE/cache" -o APT::Sandbox::User=root)
# Bullseye's kernel updates come through its security suite; once the
# release is archived, archive.debian.org serves it.
for mirror in http://deb.debian.org http://archive.debian.org; do
    cat >"$STATE/sources.list" <<EOF
deb [signed-by=$KEYRING] $mirror/debian bullseye main
deb [signed-by=$KEYRING] $mirror/debian-security bullseye-security main
EOF
    apt-get "${APT_PRIVATE[@]}" update -qq >/dev/null 2>&1 || continue
    pkg=$(apt-cache "${APT_PRIVATE[@]}" pkgnames linux-image-5.10.0- |
        grep -E '^linux-image-5\.10\.0-[0-9]+-amd64$' | sort -V | tail -n1 || true)
    [ -n "$pkg" ] && break
done
[ -n "${pkg:-}" ] || { echo "no Debian 11 kernel package found (deb.debian.org, archive.debian.org)"; exit 1; }
(cd "$STATE" && apt-get "${APT_PRIVATE[@]}" download -qq "$pkg")
echo "installing $(basename "$STATE"/*.deb) (Debian 11's kernel, for tests/vm/run.sh)"
# INITRD=No: Debian's kernel hook then makes no initrd.
INITRD=No dpkg -i "$STATE"/*.deb >/dev/null
