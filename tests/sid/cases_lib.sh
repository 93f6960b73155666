# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# What the sid cases scripts (podman_cases.sh, engines_cases.sh) share
# inside the tree: the case runner (one result line per case and engine,
# PASS/FAIL or, for rknp cases not yet expected to pass, XFAIL/XPASS), the
# run's loop and summary, and the checks every case uses. Sourced after
# the script has set OUT, ARGV_DIR, CASE_TIMEOUT, SID_CASES, SID_ENGINES,
# SID_RKNP_EXPECT and defined setup, versions (the set-up's log line) and
# case_end (run after each case: what a hung engine left).
FAILURES=0
RESULTS=()
BG=()

log() { echo "# $*" >&2; }

# fail REASON: fails the case with REASON (a case's REASON lines make its
# result line's reason).
fail() {
    echo "REASON: $*"
    return 1
}

# sha_is WHAT GOT: GOT (a sha256sum line or a bare sum) is the file's sum.
sha_is() {
    local got=${2%% *}
    [ "$got" = "$FILE_SHA" ] || fail "$1: sha256 ${got:-<nothing>} != file's $FILE_SHA"
    echo "ok $1: sha256 matches"
}

# fetch_sha_retry URL [SECONDS]: the sha256 of URL, fetched (for up to
# SECONDS, default 15) until it is the file's.
fetch_sha_retry() {
    local sha=""
    for _ in $(seq $((${2:-15} * 5))); do
        sha=$(curl -sS --max-time 10 "$1" 2>/dev/null | sha256sum | cut -d' ' -f1) || true
        [ "$sha" = "$FILE_SHA" ] && break
        sleep 0.2
    done
    echo "$sha"
}

# run_case NAME ENGINE: one result line (and the argv lines the engine's
# wrappers logged during the case, each once: the probes repeat); the log
# to $OUT/NAME.ENGINE.log. Sets ENGINE and CASE for the case.
run_case() {
    local name=$1 log="$OUT/$1.$2.log" rc t0 t1 secs before reason status expected=1
    # shellcheck disable=SC2034 # CASE: for the cases (engines_cases.sh)
    ENGINE=$2 CASE=$1
    [ "$ENGINE" = rknp ] && [[ " $SID_RKNP_EXPECT " != *" $name "* ]] && expected=0
    before=$(wc -l <"$ARGV_DIR/$ENGINE.log")
    t0=$(date +%s.%N)
    set +e
    (set -euo pipefail; "case_$name") >"$log" 2>&1
    rc=$?
    set -e
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    reason=$(grep '^REASON: ' "$log" | cut -c9- | paste -sd';' | sed 's/;/; /g') || true
    [ "$rc" = 124 ] && reason="timed out after $CASE_TIMEOUT s${reason:+ ($reason)}"
    [ -n "$reason" ] || reason="exit $rc: $(tail -n1 "$log")"
    if [ "$rc" = 0 ]; then
        status=PASS
        [ "$expected" = 1 ] || status="XPASS"
    else
        status=FAIL
        [ "$expected" = 1 ] || status="XFAIL"
    fi
    case $status in
    PASS) echo "PASS $name [$ENGINE] ${secs} s" ;;
    XPASS) echo "XPASS $name [$ENGINE] ${secs} s (passes; not yet in SID_RKNP_EXPECT)" ;;
    FAIL) echo "FAIL $name [$ENGINE] ${secs} s: $reason"; FAILURES=$((FAILURES + 1)) ;;
    XFAIL) echo "XFAIL $name [$ENGINE] ${secs} s (not expected to pass yet): $reason" ;;
    esac
    if [ "$status" = FAIL ] || [ -n "${SID_VERBOSE:-}" ]; then
        sed 's/^/    | /' "$log" | tail -n 20
    fi
    tail -n +"$((before + 1))" "$ARGV_DIR/$ENGINE.log" |
        awk '{ if (!($0 in n)) o[++k] = $0; n[$0]++ }
             END { for (i = 1; i <= k; i++) print "    argv: " o[i] (n[o[i]] > 1 ? "  (" n[o[i]] " times)" : "") }'
    case_end
    RESULTS+=("$status $name $ENGINE $secs")
}

# run_all: set-up, every case with every engine, the results file; fails
# if a case that must pass failed.
run_all() {
    local t0 c e
    t0=$(date +%s)
    setup
    log "set-up in $(($(date +%s) - t0)) s; $(versions)"
    for c in $SID_CASES; do
        for e in $SID_ENGINES; do
            run_case "$c" "$e"
        done
    done
    cp "$ARGV_DIR"/*.log "$OUT/" 2>/dev/null || true
    printf '%s\n' "${RESULTS[@]}" >"$OUT/results"
    kill "${BG[@]}" 2>/dev/null || true
    [ "$FAILURES" = 0 ] || { echo "$FAILURES case(s) failed"; return 1; }
    echo "all cases that must pass passed"
}
