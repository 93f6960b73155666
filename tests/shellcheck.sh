#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Runs shellcheck on every shell script of the repository: the tracked *.sh
# files and the tracked files whose first line is a sh or bash shebang
# (outside a git checkout: the same files found on disk, build trees left
# out). It runs from the repository root, where the scripts' `source=`
# directives point; sourced libraries name their shell
# (`# shellcheck shell=bash`). Part of tests/run-all.sh.
#   tests/shellcheck.sh [FILE...]   (default: every shell script)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null ||
    { echo "shellcheck missing (tests/install-deps.sh installs it)" >&2; exit 1; }

# is_shell_script FILE: a *.sh file, or a file starting with a sh/bash shebang.
is_shell_script() {
    case $1 in *.sh) return 0 ;; esac
    head -n 1 "$1" 2>/dev/null | grep -Eq '^#!.*[/ ](ba)?sh( |$)'
}

if [ $# -gt 0 ]; then
    scripts=("$@")
else
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        mapfile -t candidates < <(git ls-files)
    else
        mapfile -t candidates < <(find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||')
    fi
    scripts=()
    for f in "${candidates[@]}"; do
        [ -f "$f" ] && is_shell_script "$f" && scripts+=("$f")
    done
fi
echo "shellcheck: ${#scripts[@]} scripts"
shellcheck -x "${scripts[@]}"
echo "shellcheck: clean"
