#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The whole test suite: shellcheck, build, unit + ABI + integration + reliability tests
# (ctest), valgrind, a bounded fuzz run, Go tests, the rootlesskit
# end-to-end tests (again with TCP through libslirp, and the fast-path
# cases again with the discard peek mode), faults mid-transfer, a 6-minute soak, some of them again on Debian
# 12's kernel 6.1 and Debian 11's 5.10 in a VM (tests/vm/run.sh) and the Debian packages
# (tests/package/run.sh). Run as root on a fresh machine (it installs the
# Debian packages it needs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
[ "$(id -u)" = 0 ] || { echo "run as root (tests create namespaces and a test user)"; exit 1; }
# shellcheck source=tests/lib/build.sh
source "$ROOT/tests/lib/build.sh"
# step TITLE: ends the step before (its time is printed) and starts TITLE;
# on exit every step's time and the total are listed.
STEPS=() TIMES=() T0=$SECONDS
step() {
    step_done
    STEPS+=("$1") STEP_T0=$SECONDS
    echo "== $1"
}
step_done() {
    [ ${#TIMES[@]} -lt ${#STEPS[@]} ] || return 0
    TIMES+=("$((SECONDS - STEP_T0))")
    echo "== ${TIMES[-1]} s: ${STEPS[-1]}"
}
times_summary() {
    local rc=$? i
    step_done
    echo "== time per step:"
    for i in "${!STEPS[@]}"; do printf '%6d s  %s\n' "${TIMES[i]}" "${STEPS[i]}"; done
    printf '%6d s  total%s\n' $((SECONDS - T0)) "$([ "$rc" = 0 ] || echo " (failed in the last step, status $rc)")"
}
trap times_summary EXIT
step "install-deps: the Debian packages the tests need"
"$ROOT/tests/install-deps.sh"
step "shellcheck: every shell script of the repository"
"$ROOT/tests/shellcheck.sh"
step "docs: every repository path, link and C++ name the docs cite exists"
python3 "$ROOT/tests/docs/check.py"
step "build: CMake (-Werror), rootlesskit, rootlessctl"
build_all "$BUILD"
step "ctest: unit, ABI, integration, reliability"
# Two at a time: the unit tests beside the namespace tests (those carry
# RESOURCE_LOCK rknp-namespaces and run one at a time among themselves).
ctest --test-dir "$BUILD" --output-on-failure --parallel 2
step "sanitizers: ASan+UBSan, then TSan (CMakePresets.json)"
# sanitizer_build PRESET: configures and builds it quietly; the build's output
# is shown only when it fails (ninja prints compiler errors on stdout).
sanitizer_build() {
    local log rc=0
    log=$(mktemp)
    (cd "$ROOT" && cmake --preset "$1" && cmake --build --preset "$1") >"$log" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { tail -n 60 "$log"; echo "sanitizer build ($1) failed"; }
    rm -f "$log"
    return "$rc"
}
# The presets run two tests at a time as the ctest step does, and the ASan
# preset shortens reliability-load's long transfers to 512 MiB down and
# 256 MiB up (REL_LONG_DOWN, REL_LONG_UP): the same code paths as the
# ctest step's 3 GiB and 1 GiB, whose volume there checks integrity;
# under ASan it only cost time (60 s of the step).
sanitizer_build asan
# The TSan build compiles while the ASan tests run: much of their time is
# spent waiting on sockets and children, and the step is the suite's longest.
sanitizer_build tsan &
tsan_build=$!
asan_rc=0
(cd "$ROOT" && ctest --preset asan) || asan_rc=$?
tsan_rc=0
wait "$tsan_build" || tsan_rc=$?
[ "$asan_rc" = 0 ] || { echo "ASan tests failed"; exit "$asan_rc"; }
[ "$tsan_rc" = 0 ] || exit "$tsan_rc"
(cd "$ROOT" && ctest --preset tsan)
step "valgrind: no leak from the library"
"$ROOT/tests/reliability/valgrind.sh" "$BUILD"
step "fuzzing: every target for a bounded time (clang, build-fuzz/)"
FUZZ_SECONDS=${FUZZ_SECONDS:-20} "$ROOT/tests/fuzz/run.sh"
step "Go: vet and tests"
(cd "$ROOT/go-bindings" && go vet ./... &&
    RKNP_PLUGIN=$BUILD/lib/librknp.so.1 go test -count=1 ./...)
step "Go: an external program builds against the module and loads the library"
"$ROOT/tests/go-external/run.sh" "$BUILD/lib/librknp.so.1"
step "end-to-end: rootlesskit --net=plugin (and slirp4netns as reference)"
BUILD_DIR=$BUILD "$ROOT/tests/e2e/run.sh"
step "end-to-end again with TCP through libslirp (--plugin-tcp=slirp): the cases that carry TCP"
BUILD_DIR=$BUILD E2E_DRIVERS=plugin E2E_PLUGIN_TCP=slirp \
    E2E_CASES="http_host_loopback http_disable_host_loopback detach_netns mtu_1500 mtu_65520 ipv6 netns_host outbound_addr ports_plugin ports_plugin_dhl" \
    "$ROOT/tests/e2e/run.sh"
step "end-to-end: the fast-path cases with the older kernels' peek method (--plugin-tcp-peek=discard)"
BUILD_DIR=$BUILD E2E_DRIVERS=plugin E2E_PLUGIN_TCP_PEEK=discard \
    E2E_CASES="http_host_loopback netns_host mtu_1500 ipv6 ports_plugin" "$ROOT/tests/e2e/run.sh"
step "flood: a guest opening 200k flows against rootlesskit's real fd limit"
BUILD_DIR=$BUILD "$ROOT/tests/e2e/flood.sh"
step "faults: rootlesskit's parent killed, the child's netns gone, rknp-slirp4netns out of memory"
BUILD_DIR=$BUILD "$ROOT/tests/e2e/faults.sh"
step "soak: 6 minutes of mixed traffic through three stacks, flows and fds back to where they started"
BUILD_DIR=$BUILD "$ROOT/tests/soak/run.sh" --duration 360 --plot
step "slirp4netns compatibility: stock rootlesskit with rknp-slirp4netns"
BUILD_DIR=$BUILD "$ROOT/tests/e2e/compat_slirp4netns.sh"
step "pasta compatibility: rknp-pasta as Podman runs pasta, and under rootlesskit v3 --net=pasta"
BUILD_DIR=$BUILD "$ROOT/tests/e2e/compat_pasta.sh"
step "Podman 6.1 from Debian sid/experimental in a sid tree: real pasta, then rknp-pasta"
BUILD_DIR=$BUILD "$ROOT/tests/sid/podman.sh"
step "rootlesskit 2.0, dockerd-rootless.sh 28.5 and a k3s-style program in the sid tree: real, then rknp"
BUILD_DIR=$BUILD "$ROOT/tests/sid/engines.sh"
step "rootless Docker (docker.io 20.10): NET=plugin, and stock rootlesskit with rknp-slirp4netns"
BUILD_DIR=$BUILD "$ROOT/tests/e2e/docker_rootless.sh"
step "Debian 12's kernel 6.1 in qemu: fast-path e2e cases, stream test, demo"
"$ROOT/tests/vm/run.sh" "$BUILD"
step "Debian 11's kernel 5.10 in qemu: the same"
RKNP_VM_SERIES=5.10 "$ROOT/tests/vm/run.sh" "$BUILD"
step "packages: .debs built, lintian, installed, hardening-check, demo against them"
"$ROOT/tests/package/run.sh"
echo "== all tests passed"
