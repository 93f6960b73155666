#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a network stack's process holds, from /proc (tests/soak/run.sh).

  procstat.py find TOP EXE                    the shallowest process under
                                              TOP (itself included) running EXE
  procstat.py snapshot PID [--compared]       one JSON line (only what
                                              wait-equal compares)
  procstat.py sample PID CHILD_PID CSV CTL INTERVAL
                                              a CSV row every INTERVAL s
                                              until PID exits or CTL/end
  procstat.py wait-equal PID BASELINE.json SECONDS OUT.json
                                              until PID holds what the
                                              baseline held (exit 0), or
                                              SECONDS pass (exit 1)

Neither rootlesskit's API nor rknp-slirp4netns' tells the stack's
counters (rknp_parent_stats: host_sockets, tcp_fast_flows, ...), so the
flows are counted from the process's sockets: each fd that is a socket is
looked up in the process's /proc/PID/net tables (its network namespace:
the host's), by protocol and, for TCP, by state. Every guest flow on the
TCP and UDP fast paths, every libslirp TCP/UDP socket and every ICMP echo
socket is one of them (forwarded ports: one listener each; their clients
hold no socket of their own). udp_unconn (a part of udp) are the UDP
sockets connected to no peer: the published ports' and libslirp's (which
sends with sendto: on every stack its DNS forwarding, the guest's queries
to 10.0.2.3); the UDP fast path's flows are the connected ones. A socket in none of the tables is counted
as sock_unlisted: mostly TCP sockets already closed or reset that the
stack has not released yet (libslirp keeps a closed connection's socket
until its own timers end it: hundreds of them under this traffic).

CPU: the process's utime+stime and the stack thread's, in percent of one
core over the interval. The stack thread is the one task under a seccomp
filter (rknp's sandbox filters only the stack thread in rootlesskit's
parent); in rknp-slirp4netns, filtered as a whole, it is the filtered task
other than the main thread that used most CPU in the interval.
"""

import json
import os
import sys
import time

TCP_STATES = {1: "estab", 2: "syn_sent", 3: "syn_recv", 4: "fin_wait1", 5: "fin_wait2",
              6: "time_wait", 7: "close", 8: "close_wait", 9: "last_ack", 10: "listen",
              11: "closing"}
TABLES = (("tcp", "tcp"), ("tcp6", "tcp"), ("udp", "udp"), ("udp6", "udp"),
          ("udplite", "udp"), ("udplite6", "udp"), ("icmp", "icmp"), ("icmp6", "icmp"),
          ("raw", "raw"), ("raw6", "raw"), ("unix", "unix"), ("netlink", "netlink"),
          ("packet", "packet"))
COMPARED = ["fds", "fds_other", "tcp", "udp", "udp_unconn", "icmp", "raw", "unix", "netlink", "packet",
            "sock_unlisted"] + ["tcp_" + s for s in TCP_STATES.values() if s != "time_wait"]
CSV_FIELDS = ["time", "t_s", "phase", "rss_kib", "fds", "fds_other", "tcp", "udp", "udp_unconn", "icmp",
              "raw", "unix", "netlink", "packet", "sock_unlisted"] + \
    ["tcp_" + s for s in TCP_STATES.values() if s != "time_wait"] + \
    ["threads", "cpu_pct", "stack_cpu_pct", "stack_tid", "tap_rx_mb", "tap_tx_mb",
     "tap_rx_mbps", "tap_tx_mbps"]
HZ = os.sysconf("SC_CLK_TCK")


def inodes_by_kind(pid):
    kinds = {}
    for name, kind in TABLES:
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for ln in lines:
            p = ln.split()
            if kind == "unix":
                ino = p[6] if len(p) > 6 else None
                st = None
            elif kind in ("netlink", "packet"):
                ino, st = p[-1], None
            else:
                if len(p) < 10:
                    continue
                ino, st = p[9], int(p[3], 16)
                if kind == "udp" and p[2].endswith(":0000"):
                    st = "unconn"
            if ino is not None:
                kinds[ino] = (kind, st)
    return kinds


def snapshot(pid):
    fds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed meanwhile
    kinds = inodes_by_kind(pid)
    s = {k: 0 for k in COMPARED}
    s["fds"] = len(fds)
    for link in fds:
        if not link.startswith("socket:["):
            s["fds_other"] += 1
            continue
        kind, st = kinds.get(link[8:-1], ("sock_unlisted", None))
        s[kind] += 1
        if kind == "tcp" and st in TCP_STATES and TCP_STATES[st] != "time_wait":
            s["tcp_" + TCP_STATES[st]] += 1
        elif kind == "udp" and st == "unconn":
            s["udp_unconn"] += 1
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                s["rss_kib"] = int(ln.split()[1])
            elif ln.startswith("Threads:"):
                s["threads"] = int(ln.split()[1])
    return s


def cpu_ticks(path):
    with open(path) as f:
        p = f.read().rsplit(")", 1)[1].split()
    return int(p[11]) + int(p[12])  # utime, stime (fields 14, 15)


def stack_tasks(pid):
    """{tid: cpu ticks} of the candidates for the stack thread: the tasks
    under a seccomp filter (without the main thread where more are)."""
    filtered = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                if any(ln.split() == ["Seccomp:", "2"] for ln in f):
                    filtered[int(tid)] = cpu_ticks(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            pass
    if len(filtered) > 1:
        filtered.pop(int(pid), None)
    return filtered


def tap_bytes(child):
    try:
        with open(f"/proc/{child}/net/dev") as f:
            for ln in f:
                name, _, rest = ln.partition(":")
                if name.strip().startswith("tap") and rest:
                    p = rest.split()
                    return int(p[0]), int(p[8])
    except OSError:
        pass
    return None


def phase(ctl):
    ph = "idle"
    for flag, name in (("pool", "pool"), ("churn", "traffic"), ("stop-churn", "drain"),
                       ("stop-pool", "end")):
        if os.path.exists(os.path.join(ctl, flag)):
            ph = name
    return ph


def sample(pid, child, csv_path, ctl, interval):
    interval = float(interval)
    t0 = time.time()
    last = None
    new = not os.path.exists(csv_path)
    with open(csv_path, "a") as out:
        if new:
            out.write(",".join(CSV_FIELDS) + "\n")
        while os.path.exists(f"/proc/{pid}") and not os.path.exists(os.path.join(ctl, "end")):
            now = time.time()
            try:
                s = snapshot(pid)
                proc = cpu_ticks(f"/proc/{pid}/stat")
                tasks = stack_tasks(pid)
            except (OSError, ValueError, IndexError):
                break  # the process ended
            tap = tap_bytes(child) or (0, 0)
            row = dict(s, time=f"{now:.1f}", t_s=f"{now - t0:.1f}", phase=phase(ctl),
                       tap_rx_mb=f"{tap[0] / 1e6:.1f}", tap_tx_mb=f"{tap[1] / 1e6:.1f}")
            if last:
                dt = now - last[0]
                row["cpu_pct"] = f"{100 * (proc - last[1]) / HZ / dt:.1f}"
                d = {t: v - last[2].get(t, v) for t, v in tasks.items()}
                tid = max(d, key=d.get, default=None)
                row["stack_tid"] = tid or ""
                row["stack_cpu_pct"] = f"{100 * d[tid] / HZ / dt:.1f}" if tid else ""
                row["tap_rx_mbps"] = f"{8 * (tap[0] - last[3][0]) / 1e6 / dt:.1f}"
                row["tap_tx_mbps"] = f"{8 * (tap[1] - last[3][1]) / 1e6 / dt:.1f}"
            else:
                for k in ("cpu_pct", "stack_cpu_pct", "stack_tid", "tap_rx_mbps", "tap_tx_mbps"):
                    row[k] = ""
            last = (now, proc, tasks, tap)
            out.write(",".join(str(row.get(k, "")) for k in CSV_FIELDS) + "\n")
            out.flush()
            time.sleep(max(0.0, interval - (time.time() - now)))
    return 0


def diff(a, b):
    return {k: (a.get(k), b.get(k)) for k in COMPARED if a.get(k) != b.get(k)}


def wait_equal(pid, baseline, seconds, out_path):
    base = json.load(open(baseline))
    t0 = time.monotonic()
    while True:
        s = snapshot(pid)
        d = diff(base, s)
        waited = time.monotonic() - t0
        if not d or waited >= float(seconds):
            s["waited_s"] = round(waited, 1)
            s["diff"] = {k: {"baseline": v[0], "now": v[1]} for k, v in d.items()}
            with open(out_path, "w") as f:
                json.dump(s, f, sort_keys=True)
            print(json.dumps({"waited_s": s["waited_s"], "diff": s["diff"]}))
            return 0 if not d else 1
        time.sleep(1)


def find(top, exe):
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = f.read().rsplit(")", 1)[1].split()[1]
            except OSError:
                continue
            children.setdefault(ppid, []).append(p)
    level = [top]
    while level:
        for p in level:
            try:
                if os.readlink(f"/proc/{p}/exe") == exe:
                    print(p)
                    return 0
            except OSError:
                pass
        level = [c for p in level for c in children.get(p, [])]
    return 1


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "find":
        return find(*a)
    if cmd == "snapshot":
        s = snapshot(a[0])
        if a[1:] == ["--compared"]:
            s = {k: s[k] for k in COMPARED}
        print(json.dumps(s, sort_keys=True))
        return 0
    if cmd == "sample":
        return sample(*a)
    if cmd == "wait-equal":
        return wait_equal(*a)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
