#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0

"""rknp WAN benchmark: one TCP stream to a test host behind an emulated WAN.

Run through tests/bench/wan.sh (root). For every cell (RTT, loss) the WAN
bed (tests/lib/wan_bed.sh) is brought up with RTT/2 of delay each way and
the loss rate, then every driver runs iperf3 download (the test host
sends, -R) and upload against the test host, for each rootlesskit MTU,
round-robin over the repeats (repeat 1 of every (MTU, driver), then
repeat 2, ..., each starting one later) so that drifts of the machine hit
all drivers alike. The
host kernel's own iperf3 (no rootlesskit, the host's netns) is the
reference of every cell. Writes wan.json (every run), wan.md (each run's
figure, ratio to the host kernel) and wan.png into the results dir.
"""
import argparse
import datetime
import json
import os
import platform
import pwd
import signal
import subprocess
import sys
import time

import procs
import session
import targets
import wan_report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WAN_BED = os.path.join(ROOT, "tests/lib/wan_bed.sh")
DRIVERS = ["host", "plugin-fast", "plugin", "rknp-slirp4netns", "slirp4netns", "pasta"]
# Run only when asked for (--driver): the fast path with the discard peek
# mode (no SO_PEEK_OFF), as on kernels before 6.9; the fast path with the
# library given by --ref-lib (an A/B of a change).
OPTIONAL_DRIVERS = ["plugin-fast-nopeekoff", "plugin-fast-ref"]
DIRECTIONS = {"download": ["-R"], "upload": []}


class HostKernel(targets.Target):
    """iperf3 as the test user in the host's netns: the kernel's own TCP
    over the same path, what every driver is compared with."""
    kind = "reference"

    def __init__(self):
        super().__init__("host")

    def wrap(self, user, mtu, agent_argv):
        return ["runuser", "-u", user, "--"] + agent_argv


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rtt", type=float, action="append",
                    help="round-trip time in ms (repeatable; default 10 40 100)")
    ap.add_argument("--loss", type=float, action="append",
                    help="loss in percent per packet, each way (repeatable; default 0 0.5)")
    ap.add_argument("--mtu", type=int, action="append",
                    help="rootlesskit --mtu (repeatable; default 1500 65520)")
    ap.add_argument("--driver", action="append",
                    help="driver to run (repeatable; default all: %s; also: %s)"
                    % (" ".join(DRIVERS), " ".join(OPTIONAL_DRIVERS)))
    ap.add_argument("--direction", action="append", choices=sorted(DIRECTIONS),
                    help="download and/or upload (default both)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=6, help="iperf3 -t")
    ap.add_argument("--parallel", type=int, default=1,
                    help="iperf3 -P: concurrent streams per run (the report adds"
                    " Jain's fairness index among them; at most 128)")
    ap.add_argument("--link-mtu", type=int, default=1500, help="the bed's link MTU")
    ap.add_argument("--no-debian-sysctls", action="store_true",
                    help="keep the machine's socket sysctls (default: Debian's for the run)")
    ap.add_argument("--bed-id", type=int, default=40, help="wan_bed.sh --id")
    ap.add_argument("--seed", type=int, default=1, help="the delay line's loss seed")
    ap.add_argument("--reorder", type=float, default=0,
                    help="reordering in percent per packet, each way, in every cell")
    ap.add_argument("--verify-bytes", type=int, default=2 << 20,
                    help="bytes sent through the test host's echo server and compared "
                    "(sha256) after each session of a cell with loss or reordering; 0: none")
    ap.add_argument("--fresh-draws", action="store_true",
                    help="let each run go on with the delay line's random draws (default: "
                    "every run starts them from the seed, so runs meet the same losses)")
    ap.add_argument("--rootlesskit", default=os.path.join(ROOT, "build/bin/rootlesskit"))
    ap.add_argument("--plugin-lib", default=os.path.join(ROOT, "build/lib/librknp.so.1"))
    ap.add_argument("--ref-lib",
                    help="another build of the library for driver plugin-fast-ref")
    ap.add_argument("--stock-rootlesskit", default="/usr/bin/rootlesskit")
    ap.add_argument("--s4n-binary", default=os.path.join(ROOT, "build/bin/rknp-slirp4netns"))
    ap.add_argument("--user", default=os.environ.get("RKNP_TEST_USER", "rknptest"))
    ap.add_argument("--results", help="output dir (default tests/bench/results/wan-<date>)")
    o = ap.parse_args(argv)
    o.rtt = o.rtt or [10, 40, 100]
    o.loss = o.loss if o.loss is not None else [0, 0.5]
    o.mtu = o.mtu or [1500, 65520]
    o.driver = o.driver or DRIVERS
    o.direction = o.direction or ["download", "upload"]
    unknown = set(o.driver) - set(DRIVERS + OPTIONAL_DRIVERS)
    if unknown:
        ap.error("unknown driver(s): %s" % " ".join(sorted(unknown)))
    if "plugin-fast-ref" in o.driver and not o.ref_lib:
        ap.error("driver plugin-fast-ref needs --ref-lib")
    o.uid = pwd.getpwnam(o.user).pw_uid
    if not o.results:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M%S")
        o.results = os.path.join(ROOT, "tests/bench/results", "wan-" + stamp)
    return o


class Bed:
    """The WAN bed of one cell, through wan_bed.sh's CLI."""

    def __init__(self, o, log):
        self.o = o
        self.log = log
        self.test_host = "198.19.%d.2" % o.bed_id
        self.netns = "rkwan%d-th" % o.bed_id
        self.rtt_ms = 0
        self.loss = 0

    def up(self, rtt, loss):
        self.rtt_ms = rtt
        self.loss = loss
        args = [WAN_BED, "up", "--id", str(self.o.bed_id), "--delay-ms", "%g" % (rtt / 2),
                "--loss", "%g" % loss, "--reorder", "%g" % self.o.reorder,
                "--seed", str(self.o.seed),
                "--mtu", str(self.o.link_mtu)]
        if not self.o.no_debian_sysctls:
            args.append("--debian-sysctls")
        p = subprocess.run(args, capture_output=True, text=True)
        self.log("bed: " + (p.stderr.strip().splitlines() or ["?"])[-1])
        if p.returncode:
            raise RuntimeError("wan_bed.sh up failed: " + p.stderr[-500:])

    def reseed(self):
        """The delay line draws from the seed again: the next run meets the
        same losses as every other (common random numbers), so the loss
        process's own spread does not hide the stacks' difference."""
        if (self.loss == 0 and self.o.reorder == 0) or self.o.fresh_draws:
            return
        p = subprocess.run([WAN_BED, "reseed", "--id", str(self.o.bed_id)],
                           capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("wan_bed.sh reseed failed: " + p.stderr[-300:])

    def down(self):
        p = subprocess.run([WAN_BED, "down", "--id", str(self.o.bed_id)],
                           capture_output=True, text=True)
        for line in p.stderr.strip().splitlines():
            self.log("bed: " + line)


def run_session(target, mtu, bed, o, logf):
    """One rootlesskit (or host) session: agent up, each direction's
    iperf3 against the test host, all down. Returns per-direction results."""
    iperf_port, echo_port = session.free_port(), session.free_port()
    target.server_prefix = ("ip", "netns", "exec", bed.netns)
    target.server_addr = bed.test_host
    servers = session.start_servers(target, iperf_port, echo_port, logf)
    agent_argv = [targets.PY, os.path.join(HERE, "agent.py"), bed.test_host,
                  str(echo_port), str(iperf_port), target.gateway]
    out = {}
    agent = None
    pids = {}
    try:
        agent = session.Agent(target.wrap(o.user, mtu, agent_argv), logf)
        ready = agent.read(60)
        if "error" in ready:
            return {"error": ready["error"]}
        if target.helpers:
            pids = procs.find_stack(agent.p.pid, o.uid, target.helpers, target.parent_name)
        for i, direction in enumerate(o.direction):
            if i:
                # iperf3's server finishes the previous test a round trip
                # after the client: a new one right away is refused.
                time.sleep(0.5 + 2 * bed.rtt_ms / 1000)
            par = ["-P", str(o.parallel)] if o.parallel > 1 else []
            cmd = {"op": "iperf3", "args": DIRECTIONS[direction] + par,
                   "duration": o.seconds}
            bed.reseed()
            res = agent.ask(cmd, o.seconds + 60)
            if "error" in res:
                # The server may still be closing the previous test: one
                # retry, the first error kept next to the result.
                time.sleep(1)
                first = res["error"]
                bed.reseed()
                res = agent.ask(cmd, o.seconds + 60)
                res["first_error"] = first
            out[direction] = res
        if (bed.loss or o.reorder) and o.verify_bytes:
            # Every byte through the lossy link and back, compared: iperf3
            # counts bytes but does not check them.
            bed.reseed()
            out["verify"] = agent.ask({"op": "echo_verify", "bytes": o.verify_bytes,
                                       "limit": 300}, 360)
    except (EOFError, TimeoutError, OSError, ValueError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        session.end_session(agent, pids, target.helpers, servers)
    return out


def make_targets(o, log):
    rk = o.rootlesskit if os.access(o.rootlesskit, os.X_OK) else None
    stock = o.stock_rootlesskit if os.access(o.stock_rootlesskit, os.X_OK) else None
    s4n = o.s4n_binary if os.access(o.s4n_binary, os.X_OK) else None
    rk_names = [d for d in o.driver if d != "host"]
    # No harness fallback: the WAN figures are about what users run.
    tgts = targets.make_targets(rk_names, rk, o.plugin_lib, None, log, stock, s4n,
                                ref_lib=o.ref_lib)
    if "host" in o.driver:
        tgts.insert(0, HostKernel())
    return tgts


def schedule(o, tgts):
    """Cells outermost (one bed each), then repeats, then (MTU, driver).
    The host reference has no rootlesskit MTU: once per repeat. Each
    repeat starts one (MTU, driver) later than the one before, so that
    none always runs right after the same other (what one leaves behind
    on the bed, e.g. the test host's cached route metrics, or the CPU's
    state, would otherwise always favour or slow the same driver)."""
    for rtt in o.rtt:
        for loss in o.loss:
            one = [(None, t) for t in tgts if t.name == "host"]
            one += [(mtu, t) for t in tgts if t.name != "host" for mtu in o.mtu]
            runs = []
            for rep in range(o.repeat):
                k = rep % len(one)
                runs += [(rep, mtu, t) for mtu, t in one[k:] + one[:k]]
            yield rtt, loss, runs


def main(argv):
    o = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(o.results, exist_ok=True)
    log, logf = session.open_log(os.path.join(o.results, "wan.log"))

    tgts = make_targets(o, log)
    if not tgts:
        log("nothing to measure: no driver of %s can run here (see above)"
            % " ".join(o.driver))
        return 2
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "machine": {"kernel": platform.release(), "cpus": os.cpu_count()},
           "options": {"rtt_ms": o.rtt, "loss_percent": o.loss, "mtus": o.mtu,
                       "directions": o.direction, "repeat": o.repeat,
                       "seconds": o.seconds, "parallel": o.parallel, "link_mtu": o.link_mtu,
                       "debian_sysctls": not o.no_debian_sysctls, "seed": o.seed,
                       "reorder_percent": o.reorder, "verify_bytes": o.verify_bytes,
                       "fresh_draws": o.fresh_draws},
           "targets": [t.name for t in tgts], "runs": []}
    bed = Bed(o, log)
    t_start = time.monotonic()
    try:
        for rtt, loss, runs in schedule(o, tgts):
            bed.up(rtt, loss)
            try:
                for rep, mtu, t in runs:
                    with open("/proc/loadavg") as f:
                        load1 = float(f.read().split()[0])
                    res = run_session(t, mtu, bed, o, logf)
                    for direction in o.direction:
                        r = res.get(direction, {"error": res.get("error", "not run")})
                        rec = {"rtt_ms": rtt, "loss_percent": loss, "target": t.name,
                               "kind": t.kind, "mtu": mtu, "direction": direction,
                               "repeat": rep, "load1": load1}
                        rec.update({k: r[k] for k in ("bps", "bytes", "sent_bytes",
                                                      "interval_bps", "retransmits", "stream_bps",
                                                      "error", "first_error") if k in r})
                        doc["runs"].append(rec)
                        log("rtt %g loss %g run %d/%d %-16s mtu %-5s %-8s %s"
                            % (rtt, loss, rep + 1, o.repeat, t.name, mtu or "-", direction,
                               "%.0f Mbit/s" % (r["bps"] / 1e6) if "bps" in r
                               else "FAILED: " + r.get("error", "?")))
                    if "verify" in res:
                        v = {"rtt_ms": rtt, "loss_percent": loss, "target": t.name,
                             "mtu": mtu, "repeat": rep}
                        v.update(res["verify"])
                        doc.setdefault("verified", []).append(v)
                        log("rtt %g loss %g run %d/%d %-16s mtu %-5s bytes %s"
                            % (rtt, loss, rep + 1, o.repeat, t.name, mtu or "-",
                               "equal (%d, sha256)" % v["bytes"] if v.get("equal")
                               else "DIFFER: %s" % v))
                    doc["wall_s"] = time.monotonic() - t_start
                    wan_report.save(doc, o.results)
            finally:
                bed.down()
    finally:
        doc["wall_s"] = time.monotonic() - t_start
        wan_report.save(doc, o.results)
    md = wan_report.markdown(doc)
    with open(os.path.join(o.results, "wan.md"), "w") as f:
        f.write(md)
    png = wan_report.chart(doc, os.path.join(o.results, "wan.png"))
    print(md)
    log("results in %s (%s); wall %.0f s"
        % (o.results, "chart written" if png else "no chart", doc["wall_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
