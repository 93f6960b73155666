# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# build_all BUILD_DIR: the C/C++ tree with CMake, then the Go command with
# the freshly built plugin as its default --net-plugin, and upstream's
# rootlessctl client for the API-socket tests (sourced).
build_all() {
    local build=$1 root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    cmake -S "$root" -B "$build" -G Ninja -DRKNP_WERROR=ON
    cmake --build "$build"
    (cd "$root/go-bindings" && go build \
        -ldflags "-X main.DefaultPluginPath=$build/lib/librknp.so.1" \
        -o "$build/bin/rootlesskit" ./cmd/rootlesskit &&
        go build -o "$build/bin/rootlessctl" \
            github.com/rootless-containers/rootlesskit/v3/cmd/rootlessctl)
}
