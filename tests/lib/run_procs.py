#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Finds the processes one test run started: those whose environment holds
RKNP_TEST_RUN=MARKER (tests/lib/run_marker.sh exports a fresh MARKER per
run), so a run's leftover check ignores a concurrent run on the machine.
This process and its ancestors (the suite's own shells) are never listed.

  run_procs.py list MARKER [--grace S] [--comm NAME]
      prints "pid comm args" of each such process still alive after up to
      S seconds (default 0; lets processes being torn down finish), only
      those named NAME with --comm; exits 1 if any is listed.
  run_procs.py kill MARKER
      SIGTERM to each, SIGKILL to those left after 2 s; prints what it ended.
"""
import os
import signal
import sys
import time


def ancestors():
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as f:
                # The ppid follows the ")" that ends the (free-form) comm.
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def marked(marker, comm=None):
    """{pid: "comm args"} of live processes carrying the marker."""
    want = ("RKNP_TEST_RUN=" + marker).encode()
    skip = ancestors()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue  # zombies read as empty: they are not listed
            with open("/proc/%s/comm" % name) as f:
                c = f.read().strip()
            with open("/proc/%s/cmdline" % name, "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # gone meanwhile, or a kernel thread
        if comm is None or c == comm:
            found[int(name)] = "%s %s" % (c, args)
    return found


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("list", "kill"):
        print(__doc__, file=sys.stderr)
        return 2
    marker, opts = sys.argv[2], sys.argv[3:]
    if not marker:
        print("run_procs.py: empty marker", file=sys.stderr)
        return 2
    if sys.argv[1] == "list":
        grace = float(opts[opts.index("--grace") + 1]) if "--grace" in opts else 0.0
        comm = opts[opts.index("--comm") + 1] if "--comm" in opts else None
        deadline = time.monotonic() + grace
        procs = marked(marker, comm)
        while procs and time.monotonic() < deadline:
            time.sleep(0.1)
            procs = marked(marker, comm)
        for pid, desc in sorted(procs.items()):
            print(pid, desc)
        return 1 if procs else 0
    procs = marked(marker)
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 1.0)):
        for pid, desc in sorted(procs.items()):
            print("ending (%s) %d %s" % (sig.name, pid, desc))
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while procs and time.monotonic() < deadline:
            time.sleep(0.1)
            procs = {p: d for p, d in marked(marker).items() if p in procs}
    return 0


if __name__ == "__main__":
    sys.exit(main())
