# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# Marks every process a test suite starts, so the suite can prove it left
# none running (sourced by common.sh and tests/e2e/lib.sh).
# RKNP_TEST_RUN is fresh per suite run and exported, so every program the
# suite runs inherits it (keep it when clearing the environment, e.g. in
# `env -i`). Identifying leftovers by this marker, not by process name or
# user, keeps two suites running on one machine out of each other's checks.
# Bash's own subshells are not marked (/proc/PID/environ is the environment
# a program was started with), nor is the suite's shell.

RKNP_TEST_RUN=$(cat /proc/sys/kernel/random/uuid)
export RKNP_TEST_RUN
RUN_PROCS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run_procs.py

# run_leftovers: lists this run's processes still alive after a 3 s grace
# for ones being torn down; fails if there are any.
run_leftovers() {
    python3 "$RUN_PROCS" list "$RKNP_TEST_RUN" --grace 3
}

# run_leftovers_named NAME: the same for this run's processes named NAME.
run_leftovers_named() {
    python3 "$RUN_PROCS" list "$RKNP_TEST_RUN" --grace 3 --comm "$1"
}

# kill_run_processes: ends whatever this run still has running; the last
# resort of a suite's cleanup, after its leftover check has had its say.
kill_run_processes() {
    python3 "$RUN_PROCS" kill "$RKNP_TEST_RUN"
}
