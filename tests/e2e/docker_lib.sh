# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# Rootless Docker routes (sourced after lib.sh, as root): Debian's docker.io
# started with its own dockerd-rootless.sh as the test user, an image
# imported without a registry, a test host behind a veth pair. Shared by
# tests/e2e/docker_rootless.sh and tests/bench/docker.sh. The caller sets
# SCRATCH (with bin/, fork-bin/, lib/, logs/, image/), BUILD_DIR,
# DOCKERD_TIMEOUT and IMAGE, and calls install_route_binaries. Routes:
#   fork        DOCKERD_ROOTLESS_ROOTLESSKIT_NET=plugin: this repository's
#               rootlesskit, installed as `docker-rootlesskit` first on
#               PATH, the plugin from --net-plugin (TCP fast path);
#   fork-slirp  the same with --plugin-tcp=slirp (TCP through libslirp);
#   stock       Debian's rootlesskit 1.1.0, NET=slirp4netns with
#               --slirp4netns-binary=rknp-slirp4netns;
#   slirp4netns Debian's rootlesskit and slirp4netns as shipped (reference).

DOCKERD_ROOTLESS=/usr/share/docker.io/contrib/dockerd-rootless.sh
# Debian's own programs only (/usr/local may hold other rootlesskits or
# docker CLIs); the fork routes put their bin dir in front.
SYS_PATH=/usr/sbin:/usr/bin:/sbin:/bin
DOCKER_TEST_NET=198.18.77 # the test host is .2, the host's end .1
USERNS_FILE=$SCRATCH/userns-inodes # user namespaces of the dockerds started
declare -A DOCKERD_PID=()

# install_route_binaries: copies of rknp-slirp4netns, librknp.so.1 and this
# repository's rootlesskit (as `docker-rootlesskit`, the name
# dockerd-rootless.sh looks for first) into SCRATCH, so a rebuild during the
# run cannot change them; sets S4N and LIB. rknp-slirp4netns finds the
# library through its $ORIGIN/../lib rpath, rootlesskit from --net-plugin.
install_route_binaries() {
    e2e_copy_build rknp-slirp4netns
    install -m 0755 "$BUILD_DIR/bin/rootlesskit" "$SCRATCH/fork-bin/docker-rootlesskit"
    S4N=$SCRATCH/bin/rknp-slirp4netns
}

# make_image TAR [PROGRAM...]: a rootfs tarball for `docker import`:
# Debian's static busybox with a symlink per applet, plus each PROGRAM with
# the shared libraries ldd lists for it, at their paths.
make_image() {
    local tar=$1 root f lib
    shift
    root=$(mktemp -d "$SCRATCH/image/rootfs.XXXXXX")
    mkdir -p "$root/bin" "$root/tmp" "$root/etc"
    cp /bin/busybox "$root/bin/busybox"
    for f in $(/bin/busybox --list); do
        [ "$f" = busybox ] || ln -s busybox "$root/bin/$f"
    done
    for f in "$@"; do
        for lib in "$f" $(ldd "$f" | grep -oE '/[^ ]+'); do
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
    done
    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$tar" .
    rm -rf "$root"
    chmod a+r "$tar"
}

# setup_docker_test_host NETNS: a namespace behind a veth pair
# (rknp-dk-h / rknp-dk-n), the test host at $DOCKER_TEST_NET.2.
setup_docker_test_host() {
    ip netns del "$1" 2>/dev/null || true
    ip link del rknp-dk-h 2>/dev/null || true
    ip netns add "$1"
    # shellcheck disable=SC2034 # both read by e2e_cleanup (tests/e2e/lib.sh)
    NETNS_CREATED=$1 VETH_HOST=rknp-dk-h
    ip link add rknp-dk-h type veth peer name rknp-dk-n
    ip link set rknp-dk-n netns "$1"
    ip addr add "$DOCKER_TEST_NET.1/24" dev rknp-dk-h
    ip link set rknp-dk-h up
    ip -n "$1" addr add "$DOCKER_TEST_NET.2/24" dev rknp-dk-n
    ip -n "$1" link set rknp-dk-n up
    ip -n "$1" link set lo up
}

# userns_procs INODE...: "pid comm" of every process in one of these user
# namespaces (containers carry no run marker; their namespace finds them).
userns_procs() {
    local p ns i
    for p in /proc/[0-9]*; do
        ns=$(readlink "$p/ns/user" 2>/dev/null) || continue
        for i in "$@"; do
            [ "$ns" = "$i" ] && echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null)"
        done
    done
    return 0
}

# docker_cleanup: after an early exit, whatever a route left running.
docker_cleanup() {
    [ -s "$USERNS_FILE" ] || return 0
    local left
    # shellcheck disable=SC2046
    left=$(userns_procs $(cat "$USERNS_FILE"))
    [ -n "$left" ] || return 0
    echo "# ending what rootless Docker left:" >&2
    echo "$left" >&2
    # shellcheck disable=SC2046
    kill -9 $(cut -d' ' -f1 <<<"$left") 2>/dev/null || true
}

# route_env ROUTE: sets R_* (the route's directories) and R_ENV (the
# variables dockerd-rootless.sh runs with).
route_env() {
    R_DIR=$SCRATCH/$1
    R_RUN=$R_DIR/run # XDG_RUNTIME_DIR
    R_SOCK=$R_RUN/docker.sock
    case $1 in
    fork | fork-slirp)
        local tcp=""
        [ "$1" = fork-slirp ] && tcp=" --plugin-tcp=slirp"
        R_ENV=(PATH="$SCRATCH/fork-bin:$SYS_PATH"
            DOCKERD_ROOTLESS_ROOTLESSKIT_NET=plugin
            DOCKERD_ROOTLESS_ROOTLESSKIT_MTU=65520
            DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS="--net-plugin=$LIB$tcp")
        ;;
    stock)
        R_ENV=(PATH="$SYS_PATH"
            DOCKERD_ROOTLESS_ROOTLESSKIT_NET=slirp4netns
            DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS="--slirp4netns-binary=$S4N")
        ;;
    slirp4netns)
        R_ENV=(PATH="$SYS_PATH" DOCKERD_ROOTLESS_ROOTLESSKIT_NET=slirp4netns)
        ;;
    *) echo "unknown route $1" >&2; return 1 ;;
    esac
}

# dk ROUTE ARGS...: the docker CLI (Debian's) as the test user against the
# route's dockerd.
dk() {
    route_env "$1"
    shift
    as_user env HOME="$R_DIR/home" DOCKER_HOST="unix://$R_SOCK" /usr/bin/docker "$@"
}

# start_dockerd ROUTE IMAGE_TAR: dockerd-rootless.sh as the test user in
# the background (pid in DOCKERD_PID[ROUTE]), until the API answers and
# IMAGE_TAR is imported as $IMAGE. The data root is the route's own,
# storage vfs (no overlay needed), a config file of its own (nothing from
# the user's home), cgroupfs (dockerd picks the systemd driver on cgroup v2
# hosts running systemd, which needs the user's systemd instance; the test
# has none).
start_dockerd() {
    route_env "$1"
    mkdir -p "$R_DIR"/{home,run,data,tmp}
    echo '{}' >"$R_DIR/daemon.json"
    chown -R "$RKNP_TEST_USER" "$R_DIR"
    chmod 0700 "$R_RUN"
    local ARGV
    ARGV=(timeout -k 5 "$DOCKERD_TIMEOUT" setpriv --reuid="$RKNP_TEST_USER" --regid="$RKNP_TEST_USER" --init-groups
        env -i HOME="$R_DIR/home" TMPDIR="$R_DIR/tmp" XDG_RUNTIME_DIR="$R_RUN"
        RKNP_TEST_RUN="$RKNP_TEST_RUN" "${R_ENV[@]}"
        sh "$DOCKERD_ROOTLESS" --data-root="$R_DIR/data" --storage-driver=vfs
        --config-file="$R_DIR/daemon.json" --exec-opt native.cgroupdriver=cgroupfs)
    "${ARGV[@]}" >"$SCRATCH/logs/dockerd.$1.log" 2>&1 &
    DOCKERD_PID[$1]=$!
    local i
    for i in $(seq 150); do
        [ -S "$R_SOCK" ] && dk "$1" version >/dev/null 2>&1 && break
        kill -0 "${DOCKERD_PID[$1]}" 2>/dev/null || break
        sleep 0.2
    done
    if ! dk "$1" version >/dev/null 2>&1; then
        echo "dockerd did not come up:"
        tail -n 30 "$SCRATCH/logs/dockerd.$1.log"
        return 1
    fi
    readlink "/proc/$(cat "$R_RUN/docker.pid")/ns/user" >>"$USERNS_FILE"
    dk "$1" import "$2" "$IMAGE" >/dev/null
    echo "ok dockerd up, $IMAGE imported"
}

# stop_dockerd ROUTE (in the shell whose child dockerd is): SIGTERM to
# rootlesskit's parent only, which passes it on to its child and that to
# dockerd, as systemd's stop does. Not through `timeout`: it signals its
# whole process group, and dockerd, signalled directly and again by each
# rootlesskit process, counts three and quits "without cleanup". The exit
# status goes to the route's exit-status file.
stop_dockerd() {
    local rc=0 rk pid=${DOCKERD_PID[$1]}
    route_env "$1"
    rk=$(pgrep -P "$pid" | head -n1 || true)
    kill -TERM "${rk:-$pid}" 2>/dev/null || true
    wait "$pid" || rc=$?
    echo "$rc" >"$R_DIR/exit-status"
}
