#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# End-to-end tests of `rootlesskit --net=plugin` run by an unprivileged user,
# each case repeated with --net=slirp4netns (same binary) as the reference.
#
#   sudo tests/e2e/run.sh                 # uses $BUILD_DIR (default: build/)
#   E2E_DRIVERS=plugin E2E_CASES="dns ipv6" sudo -E tests/e2e/run.sh
#   E2E_PLUGIN_TCP=fast|slirp: --plugin-tcp=... for every plugin run (unset:
#   the plugin's default, the fast path)
#   E2E_PLUGIN_TCP_PEEK=auto|offset|discard: --plugin-tcp-peek=... for every
#   plugin run (unset: auto); ports_plugin checks the mode in force
#
# Needs: build/bin/rootlesskit, build/lib/librknp.so.1, build/bin/rootlessctl
# (ports_* cases; see go-bindings/README.md), slirp4netns, uidmap,
# iproute2, curl, python3, util-linux. Traffic goes only to loopback and to
# a network namespace this script creates. Prints one PASS/FAIL line per
# case and driver, and one for the check that no process it started is
# left; exits non-zero if any failed.
set -euo pipefail
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_start 900 "creates a user, namespaces and a DNS server on :53" "build first: see go-bindings/README.md" \
    "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/lib/librknp.so.1"
# shellcheck source=tests/e2e/cases.sh
. "$E2E_DIR/cases.sh"

NETNS_HOST=rknp-e2e-host
VETH_HOST=rknp-e2e-h
VETH_NS=rknp-e2e-n
DNS_NAME=rknp-e2e.test
DNS_IP=192.0.2.77

# A scratch tree the test user can read: copies of the artifacts (so a
# rebuild during the run cannot change them), served files, logs.
e2e_scratch e2e
e2e_copy_build rootlesskit
# rootlessctl (upstream's, built from go-bindings' module graph) is needed
# by the ports_* cases only; they fail with a hint when it is missing.
[ -e "$BUILD_DIR/bin/rootlessctl" ] && install -m 0755 "$BUILD_DIR/bin/rootlessctl" "$SCRATCH/bin/rootlessctl"
install -m 0755 "$E2E_DIR/port_helper.py" "$SCRATCH/bin/port_helper.py"
install -m 0755 "$E2E_DIR/udp_gso_helper.py" "$SCRATCH/bin/udp_gso_helper.py"
RK=$SCRATCH/bin/rootlesskit

e2e_test_user
e2e_loopback_servers
setup_netns_host
PORT_NS=18080
NS_IP6=fd52:6b6e:2::2
start_http 198.18.0.2 "$PORT_NS" "$SCRATCH/www" "$NETNS_HOST"
start_http "$NS_IP6" "$PORT_NS" "$SCRATCH/www" "$NETNS_HOST"
NS_LOG4=$SCRATCH/logs/http-198.18.0.2-$PORT_NS.log
NS_LOG6=$SCRATCH/logs/http-$NS_IP6-$PORT_NS.log
log "rootlesskit: $("$RK" --version)"
log "servers: 127.0.0.1:$PORT4 [::1]:$PORT6 198.18.0.2:$PORT_NS [$NS_IP6]:$PORT_NS dns $DNS_ADDR:53"

ALL_CASES="http_host_loopback http_disable_host_loopback dns detach_netns cidr mtu_1500 mtu_65520 udp_gso ipv6 ping ifname netns_host outbound_addr exit_code api_info port_builtin ports_plugin ports_builtin ports_plugin_dhl"
for c in ${E2E_CASES:-$ALL_CASES}; do
    for d in ${E2E_DRIVERS:-plugin slirp4netns}; do
        run_case "$c" "$d" "case_$c"
    done
done

stop_background
check_leftovers
echo "e2e: $PASSES passed, $FAILURES failed"
[ "$FAILURES" = 0 ]
