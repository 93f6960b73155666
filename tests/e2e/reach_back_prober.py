#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""A hostile container's root that sees the host's pids, reaching back.

    unshare -r -n reach_back_prober.py probe COMM STOP_FILE REPORT_FILE SEEN_FILE
    reach_back_prober.py summary REPORT_FILE MAINS_FILE

Run as root of a fresh user namespace (so its own pid is the target a
network command is started for) in the host's pid namespace. Until
STOP_FILE exists (at most 120 s) it scans /proc for processes whose comm
starts with COMM and, for each, tries what a container must never manage
on a process of the host: open /proc/PID/root, read /proc/PID/environ,
PTRACE_ATTACH (detached again at once). REPORT_FILE gets one JSON object,
rewritten as it goes:

    {"pids": {PID: {"role": "main"|"child", "ppid": PPID, "tries": N,
                    "root": N, "environ": N, "ptrace": N}}}

"child" is a process whose parent also matches COMM (the hand-over
child), "main" any other; root/environ/ptrace count the successes.
SEEN_FILE gets a "PID PPID" line when a process is first seen.

summary: MAINS_FILE has "PID MODE" lines, the main processes started and
how; prints one line per mode and role: "MODE ROLE: N processes, T tries,
reached root R, environ E, ptrace P".
"""
import ctypes
import json
import os
import signal
import sys
import time

PTRACE_ATTACH = 16
PTRACE_DETACH = 17
WALL = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]


def comm_and_ppid(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None, None
    # pid (comm) state ppid ...: comm may hold spaces and parentheses.
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    ppid = int(stat[stat.rindex(")") + 2:].split()[1])
    return comm, ppid


def try_root(pid):
    try:
        fd = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    os.close(fd)
    return True


def try_environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return len(f.read()) > 0
    except OSError:
        return False


def try_ptrace(pid):
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        return False
    sig = 0
    try:
        _, status = os.waitpid(pid, WALL)
        if os.WIFSTOPPED(status) and os.WSTOPSIG(status) != signal.SIGSTOP:
            # Another signal (the test's SIGTERM) stopped it first: hand it
            # back on detach, and drop the attach's SIGSTOP still pending
            # (a SIGCONT discards it). Detaching with 0 dropped the SIGTERM
            # and the process never ended: the case timed out.
            sig = os.WSTOPSIG(status)
            os.kill(pid, signal.SIGCONT)
    except (ChildProcessError, ProcessLookupError):
        pass
    libc.ptrace(PTRACE_DETACH, pid, None, ctypes.c_void_p(sig))
    return True


def probe(comm, stop, report, seen_file):
    me = os.getpid()
    seen = {}
    deadline = time.monotonic() + 120
    last_write = 0.0
    while not os.path.exists(stop) and time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            pid = int(name)
            c, ppid = comm_and_ppid(pid)
            if c is None or not c.startswith(comm):
                continue
            pc, _ = comm_and_ppid(ppid)
            if str(pid) not in seen:
                with open(seen_file, "a") as f:
                    f.write(f"{pid} {ppid}\n")
            entry = seen.setdefault(str(pid), {
                "role": "child" if pc is not None and pc.startswith(comm) else "main",
                "ppid": ppid,
                "tries": 0, "root": 0, "environ": 0, "ptrace": 0})
            entry["tries"] += 1
            entry["root"] += try_root(pid)
            entry["environ"] += try_environ(pid)
            entry["ptrace"] += try_ptrace(pid)
        now = time.monotonic()
        if now - last_write > 0.2:
            write(report, seen)
            last_write = now
    write(report, seen)


def write(path, seen):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pids": seen}, f)
    os.rename(tmp, path)


def summary(report, mains):
    pids = json.load(open(report))["pids"]
    mode_of = dict(line.split() for line in open(mains))
    rows = {}
    for pid, e in pids.items():
        mode = mode_of.get(pid if e["role"] == "main" else str(e["ppid"]))
        if mode is None:
            continue
        row = rows.setdefault((mode, e["role"]), [0, 0, 0, 0, 0])
        row[0] += 1
        row[1] += e["tries"]
        for i, k in enumerate(("root", "environ", "ptrace")):
            row[2 + i] += e[k]
    for mode in sorted(set(mode_of.values())):
        for role in ("main", "child"):
            n, t, r, env, pt = rows.get((mode, role), [0] * 5)
            print(f"{mode} {role}: {n} processes, {t} tries, "
                  f"reached root {r}, environ {env}, ptrace {pt}")


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        probe(*sys.argv[2:6])
    else:
        summary(*sys.argv[2:4])
