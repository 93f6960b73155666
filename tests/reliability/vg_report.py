#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Reads valgrind logs; fails on definite leaks or memory errors whose stack
passes through the library (librknp, rknp:: or rknp_ frames). Leaks that
are entirely libc's, glib's or the test program's are listed, not fatal.
usage: vg_report.py LOG..."""
import re
import sys

OURS = re.compile(r"librknp\.so|rknp::|\brknp_[a-z_]+ \(|/plugin/")
bad = 0
for path in sys.argv[1:]:
    text = open(path, errors="replace").read()
    # Blocks are separated by lines holding only "==pid==".
    for block in re.split(r"\n==\d+== ?\n", text):
        head = block.strip().splitlines()[0] if block.strip() else ""
        definite = "definitely lost in loss record" in block
        error = re.search(r"Invalid (read|write|free)|uninitialised|Mismatched free|"
                          r"Source and destination overlap", head)
        if not (definite or error):
            continue
        if OURS.search(block):
            bad += 1
            print("%s: library %s:\n%s\n" % (path, "leak" if definite else "error", block))
        elif definite:
            print("%s: (not the library) %s" % (path, head.split("== ", 1)[-1]))
    for m in re.finditer(r"definitely lost: ([\d,]+) bytes", text):
        print("%s: definitely lost %s bytes in total" % (path, m.group(1)))
sys.exit(1 if bad else 0)
