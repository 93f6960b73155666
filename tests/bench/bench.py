#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0

"""rknp benchmark: every rootlesskit network driver side by side.

Run through tests/bench/run.sh (root: it prepares the test user and
/dev/net/tun). Sessions are interleaved round-robin: repeat 1 of every
(MTU, driver), then repeat 2, ... so slow drifts of the machine hit all
drivers alike. Writes results.json (every raw sample), results.md (medians,
min-max, ratio to slirp4netns) and throughput.png into the results dir.
"""
import argparse
import datetime
import json
import os
import platform
import pwd
import signal
import sys
import time

import report
import session
import targets

DRIVERS = ["plugin", "plugin-fast", "plugin-fast-nopeekoff", "plugin-udp-slirp",
           "rknp-slirp4netns", "slirp4netns", "pasta", "gvisor-tap-vsock"]
REFS = ["loopback", "veth"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="iperf3 -t seconds")
    ap.add_argument("--quick", action="store_true",
                    help="1 repeat, 2 s runs, no -P 4, shorter latency tests")
    ap.add_argument("--mtu", type=int, action="append",
                    help="MTU to test (repeatable; default 1500 and 65520)")
    ap.add_argument("--only", action="append",
                    help="driver or reference to run (repeatable)")
    ap.add_argument("--rootlesskit", default=os.path.join(ROOT, "build/bin/rootlesskit"))
    ap.add_argument("--plugin-lib", default=os.path.join(ROOT, "build/lib/librknp.so.1"))
    ap.add_argument("--ref-lib",
                    help="another build of the library for drivers plugin-fast-ref and"
                    " plugin-ports-ref (--only)")
    ap.add_argument("--stock-rootlesskit", default="/usr/bin/rootlesskit",
                    help="stock rootlesskit running rknp-slirp4netns")
    ap.add_argument("--s4n-binary", default=os.path.join(ROOT, "build/bin/rknp-slirp4netns"),
                    help="passed as --slirp4netns-binary for rknp-slirp4netns")
    ap.add_argument("--harness", default=os.path.join(ROOT, "build/bin/rknp-harness"),
                    help="used for the plugin if rootlesskit lacks --net=plugin")
    ap.add_argument("--scenario", choices=("all", "tcp", "udp", "publish"), default="all",
                    help="tests to run: all (default), tcp (everything but the"
                    " UDP steps and UDP latency), udp (only those), publish"
                    " (only the published-port tests of targets that publish)")
    ap.add_argument("--udp-only", dest="scenario", action="store_const",
                    const="udp", help="same as --scenario udp")
    ap.add_argument("--udp-rr", default=os.path.join(ROOT, "build/bin/rknp-udp-rr"),
                    help="the UDP latency tool (client inside, server on the host)")
    ap.add_argument("--udp-flood", default=os.path.join(ROOT, "build/bin/rknp-udp-flood"),
                    help="the batched UDP rate tool (both ends: inside and on the host)")
    ap.add_argument("--udp-len-max", type=int, default=32000,
                    help="UDP datagram size cap (default 32000; else MTU-28)")
    ap.add_argument("--udp-buffer",
                    help="iperf3 -w for the UDP steps (both ends' socket"
                    " buffers, e.g. 4M; default: the system's)")
    ap.add_argument("--user", default=os.environ.get("RKNP_TEST_USER", "rknptest"))
    ap.add_argument("--results", help="output dir (default tests/bench/results/<date>)")
    ap.add_argument("--base", default="slirp4netns",
                    help="the driver every cell's ratio is to (default slirp4netns)")
    o = ap.parse_args(argv)
    if o.quick:
        o.repeat, o.duration = 1, min(o.duration, 2)
    o.mtu = o.mtu or [1500, 65520]
    o.uid = pwd.getpwnam(o.user).pw_uid
    if not o.results:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M%S")
        o.results = os.path.join(ROOT, "tests/bench/results", stamp)
    return o


def schedule(tgts, mtus, repeat):
    """Round-robin order. The loopback reference has one MTU (lo's 65536)."""
    for rep in range(repeat):
        for mtu in mtus:
            for t in tgts:
                if t.name == "loopback" and mtu != max(mtus):
                    continue
                yield rep, mtu, t


def save(doc, results):
    tmp = os.path.join(results, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, os.path.join(results, "results.json"))


def main(argv):
    o = parse_args(argv)
    # SIGTERM unwinds like an exception, so every session's finally cleans up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(o.results, exist_ok=True)
    log, logf = session.open_log(os.path.join(o.results, "bench.log"))

    rk = o.rootlesskit if os.access(o.rootlesskit, os.X_OK) else None
    if not rk:
        log("no rootlesskit at %s" % o.rootlesskit)
    harness = o.harness if os.access(o.harness, os.X_OK) else None
    stock = o.stock_rootlesskit if os.access(o.stock_rootlesskit, os.X_OK) else None
    s4n = o.s4n_binary if os.access(o.s4n_binary, os.X_OK) else None
    unsupported = {}
    tgts = targets.make_targets(o.only or DRIVERS + REFS, rk, o.plugin_lib,
                                harness, log, stock, s4n, o.user, unsupported, o.ref_lib)
    if not tgts:
        log("nothing to measure: no driver or reference of %s can run here (see above)"
            % " ".join(o.only or DRIVERS + REFS))
        return 2
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "machine": {"kernel": platform.release(), "cpus": os.cpu_count()},
           "options": {"repeat": o.repeat, "duration": o.duration,
                       "quick": o.quick, "mtus": o.mtu, "rootlesskit": rk,
                       "scenario": o.scenario, "udp_len_max": o.udp_len_max,
                       "udp_rr": o.udp_rr, "udp_flood": o.udp_flood,
                       "udp_buffer": o.udp_buffer, "base": o.base,
                       "stock_rootlesskit": stock, "s4n_binary": s4n,
                       "plugin_via": next((type(t).__name__ for t in tgts
                                           if t.name == "plugin"), None)},
           "targets": [t.name for t in tgts], "unsupported": unsupported,
           "samples": []}
    t_start = time.monotonic()
    for rep, mtu, t in schedule(tgts, o.mtu, o.repeat):
        log("run %d/%d  mtu %-5d %s" % (rep + 1, o.repeat, mtu, t.name))
        t1 = time.monotonic()
        rec = session.run_session(t, mtu, o, logf)
        rec.update({"target": t.name, "kind": t.kind, "mtu": mtu, "repeat": rep,
                    "wall_s": time.monotonic() - t1})
        doc["samples"].append(rec)
        log("    " + report.one_line(rec))
        doc["wall_s"] = time.monotonic() - t_start
        save(doc, o.results)  # after every session: an interrupted run keeps its data
    md = report.markdown(doc)
    with open(os.path.join(o.results, "results.md"), "w") as f:
        f.write(md)
    pngs = [f for f, keys in report.CHARTS.items()
            if report.chart(doc, os.path.join(o.results, f), keys)]
    print(md)
    log("results in %s (%s); wall %.0f s"
        % (o.results, ", ".join(pngs) or "no chart", doc["wall_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
