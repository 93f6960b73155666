#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Demo: builds rknp and the rootlesskit-compatible command, then, as an
# unprivileged user, runs `rootlesskit --net=plugin` whose child fetches a
# page from a web server on the host's 127.0.0.1 (reached as 10.0.2.2).
# Run as root on a fresh machine; it installs what it needs.
# RKNP_INSTALLED=1: no build; the installed packages' command
# (/usr/libexec/rknp/rootlesskit from rknp-rootlesskit) and its default
# plugin (librknp1's /usr/lib/<multiarch>/librknp.so.1) instead.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
INSTALLED=${RKNP_INSTALLED:-0}
[ "$(id -u)" = 0 ] || { echo "run as root (it creates a test user)"; exit 1; }
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
# shellcheck source=tests/lib/build.sh
source "$ROOT/tests/lib/build.sh"

"$ROOT/tests/install-deps.sh"
if [ "$INSTALLED" = 1 ]; then
    ROOTLESSKIT=/usr/libexec/rknp/rootlesskit
    PLUGIN=$("$ROOTLESSKIT" --help | sed -n 's/.*--net-plugin .*(default: "\(.*\)").*/\1/p')
    case $PLUGIN in /usr/lib/*/librknp.so.1) ;; *)
        echo "$ROOTLESSKIT's default plugin is '$PLUGIN', not librknp1's"; exit 1 ;; esac
else
    build_all "$BUILD"
    chmod o+rx "$BUILD" "$BUILD/bin" "$BUILD/lib"
    ROOTLESSKIT=$BUILD/bin/rootlesskit PLUGIN=$BUILD/lib/librknp.so.1
fi
setup_test_user
make_scratch demo
trap 'stop_background; rm -rf "$SCRATCH"' EXIT
echo "<h1>Hello from the host, through rknp</h1>" >"$SCRATCH/index.html"
PORT=$(free_port 127.0.0.1)
start_http 127.0.0.1 "$PORT" "$SCRATCH"

echo "== rootlesskit --net=plugin ($ROOTLESSKIT, plugin: $PLUGIN)"
as_user "$ROOTLESSKIT" --net=plugin --copy-up=/etc -- sh -c "
    echo '-- inside: id'; id
    echo '-- inside: ip addr show tap0'; ip addr show tap0
    echo '-- inside: ip route'; ip route
    echo '-- inside: curl http://10.0.2.2:$PORT/'
    curl -fsS -m 10 http://10.0.2.2:$PORT/"
echo "== demo finished: the page above came from the host's 127.0.0.1:$PORT"
