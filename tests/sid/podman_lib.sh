# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# Rootless Podman 6.1 inside the sid tree, as the sid cases
# (podman_cases.sh) and the Podman benchmark (tests/bench/podman_inside.sh)
# run it: the tree's user with a containers.conf of its own (cgroups
# disabled: the host is cgroup v1; cgroupfs, vfs), per engine (`real`: the
# tree's pasta and pesto; `rknp`: rknp's, through the helpers directory) a
# containers.conf override whose helper_binaries_dir starts with wrappers
# that log the argv Podman passes, and a container image imported from the
# tree's files (busybox, python3, iperf3, sid_helper.py), never pulled.
# Sourced as root inside the tree after T (tests/, mounted) is set.

IMG=localhost/rknp-sid:1
USER_NAME=rknp
HOME_DIR=/tmp/rknp-home
WRAP_DIR=/run/rknp-sid
ARGV_DIR=/tmp/rknp-argv
# shellcheck disable=SC2034 # PY: for the scripts that source this file
PY=/usr/bin/python3
HELPER=$T/sid/sid_helper.py
CASE_TIMEOUT=${SID_CASE_TIMEOUT:-90}

# as_user CMD...: CMD as the tree's unprivileged user, with ENGINE's
# containers.conf override (CONF_VARIANT=-pesto: the one with pasta as the
# rootless port forwarder), bounded by CASE_TIMEOUT.
CONF_VARIANT=
as_user() {
    timeout -k 5 "$CASE_TIMEOUT" setpriv --reuid="$USER_NAME" --regid="$USER_NAME" --init-groups \
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$HOME_DIR" \
        XDG_RUNTIME_DIR="/run/user/$(id -u "$USER_NAME")" LANG=C.UTF-8 \
        CONTAINERS_CONF_OVERRIDE="$HOME_DIR/engine-${ENGINE:-real}$CONF_VARIANT.conf" "$@"
}
pod() { as_user podman "$@"; }

# gcc_s: the path of the tree's libgcc_s.so.1.
gcc_s() { ldconfig -p | awk '$1 == "libgcc_s.so.1" { print $NF; exit }'; }

# podman_setup: the user's configuration, the engines' wrappers and
# overrides, the argv logs ($ARGV_DIR/ENGINE.log) and the image.
podman_setup() {
    local r f lib engine target prog
    mkdir -p "$HOME_DIR/.config/containers" "$ARGV_DIR"
    chmod 1777 "$ARGV_DIR"
    touch "$ARGV_DIR/real.log" "$ARGV_DIR/rknp.log"
    chmod 0666 "$ARGV_DIR/real.log" "$ARGV_DIR/rknp.log"
    cat >"$HOME_DIR/.config/containers/containers.conf" <<'EOF'
[containers]
cgroups = "disabled"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
    printf '[storage]\ndriver = "vfs"\n' >"$HOME_DIR/.config/containers/storage.conf"
    # Per engine: a directory holding only `pasta` and `pesto`, wrappers
    # logging their argv (one line, shell-quoted) before exec'ing the
    # engine's binary, first in helper_binaries_dir; Podman's own helpers
    # after it. A second override per engine also makes pasta the port
    # forwarder of rootless bridge networks (pesto mode).
    for engine in real rknp; do
        mkdir -p "$WRAP_DIR/helpers-$engine"
        for prog in pasta pesto; do
            case $engine in
            real) target=/usr/bin/$prog ;;
            rknp) target=/usr/local/libexec/rknp/helpers/$prog ;;
            esac
            cat >"$WRAP_DIR/helpers-$engine/$prog" <<EOF
#!/bin/bash
{ printf '$prog'; printf ' %q' "\$@"; echo; } >>$ARGV_DIR/$engine.log
exec $target "\$@"
EOF
            chmod 0755 "$WRAP_DIR/helpers-$engine/$prog"
        done
        printf '[engine]\nhelper_binaries_dir = ["%s", "/usr/libexec/podman", "/usr/lib/podman"]\n' \
            "$WRAP_DIR/helpers-$engine" >"$HOME_DIR/engine-$engine.conf"
        { cat "$HOME_DIR/engine-$engine.conf"; printf '\n[network]\nrootless_port_forwarder = "pasta"\n'; } \
            >"$HOME_DIR/engine-$engine-pesto.conf"
    done
    chown -R "$USER_NAME:" "$HOME_DIR"
    # The image: Debian's static busybox (an applet link each), python3
    # with its standard library, iperf3, and sid_helper.py.
    r=/tmp/image
    mkdir -p "$r/bin" "$r/tmp" "$r/etc" "$r/usr/local/bin"
    chmod 1777 "$r/tmp"
    cp /usr/bin/busybox "$r/bin/busybox"
    for f in $(busybox --list); do
        [ -e "$r/bin/$f" ] || ln -s busybox "$r/bin/$f"
    done
    f=$(readlink -f /usr/bin/python3)
    # libgcc_s: glibc loads it when iperf3 cancels its threads.
    for lib in "$f" /usr/bin/iperf3 "$(gcc_s)" $(ldd "$f"; ldd /usr/bin/iperf3); do
        [[ $lib == /* ]] || continue
        mkdir -p "$r$(dirname "$lib")"
        cp -L "$lib" "$r$lib"
    done
    ln -s "$(basename "$f")" "$r/usr/bin/python3"
    mkdir -p "$r/usr/lib"
    cp -a "/usr/lib/$(basename "$(readlink -f /usr/bin/python3)")" "$r/usr/lib/"
    cp "$HELPER" "$r/usr/local/bin/sid_helper.py"
    tar --numeric-owner --owner=0 --group=0 -C "$r" -cf /tmp/image.tar .
    chmod a+r /tmp/image.tar
    rm -rf "$r"
    pod import -q /tmp/image.tar "$IMG" >/dev/null
}
