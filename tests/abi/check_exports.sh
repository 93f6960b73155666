#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The shared library must export exactly the ABI baseline, all under the
# RKNP_1 version node, and carry the SONAME librknp.so.1.
set -euo pipefail
lib=$1
baseline=$2
actual=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sort)
unversioned=$(grep -v '@@RKNP_1$' <<<"$actual" || true)
names=${actual//@@RKNP_1/}
if [ -n "$unversioned" ]; then
    echo "symbols outside the RKNP_1 version node:"; echo "$unversioned"; exit 1
fi
if ! diff -u <(sort "$baseline") <(echo "$names"); then
    echo "exported symbols differ from $baseline"; exit 1
fi
readelf -d "$lib" | grep -q 'Library soname: \[librknp.so.1\]' || {
    echo "SONAME is not librknp.so.1"; exit 1; }
echo "exports match $baseline ($(wc -l <"$baseline") symbols)"
