#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The test of tests/vm/run.sh's boot retry: with RKNP_VM_TEST_HANG=1 the
# first boot's init is `sleep` (the kernel runs, the guest script never
# starts), so run.sh must kill that boot after RKNP_VM_BOOT_TIMEOUT s
# (60 here), show its console (the kernel's last lines), boot once more and
# pass the features step there. Run as root, like run.sh.
#
#   sudo tests/vm/boot_retry.sh [BUILD_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
RKNP_VM_TEST_HANG=1 RKNP_VM_BOOT_TIMEOUT=${RKNP_VM_BOOT_TIMEOUT:-60} RKNP_VM_STEPS=features \
    "$ROOT/tests/vm/run.sh" "$@" 2>&1 | tee "$log" || rc=$?
bad=0
# expect WHAT PATTERN: a line of run.sh's output matches PATTERN.
expect() {
    if grep -Eq -- "$2" "$log"; then echo "ok $1"; else echo "FAIL $1 (/$2/)"; bad=1; fi
}
expect "boot 1 killed for want of a sign of life" "^== vm: boot 1: no sign of the guest script after [0-9]+ s"
expect "boot 1's console shown: the kernel ran sleep as init" "^  console-1\| .*Run /bin/sleep as init process"
expect "boot 2's guest script started" "^== vm: boot 2: the guest script started after [0-9]+ s"
expect "run.sh passed on boot 2" "^== vm: all steps passed on "
[ "$rc" = 0 ] || { echo "FAIL run.sh exit status $rc"; bad=1; }
[ "$bad" = 0 ] && echo "PASS vm boot retry" || echo "FAIL vm boot retry"
exit "$bad"
