# SPDX-License-Identifier: Apache-2.0

"""Turns the WAN benchmark's runs (wan.json) into wan.md and wan.png.

Every run's figure is listed, not only a median: a driver that is fast in
most runs and collapses in some (bimodal) must show. Each cell also gives
the driver's median and worst run as a ratio to the host kernel's median in
the same (RTT, loss, direction) cell.

Usage (re-render a results dir): wan_report.py RESULTS_DIR
"""
import json
import os
import statistics
import sys

REFERENCE = "host"
LABELS = {
    "host": "host kernel",
    "plugin-fast": "plugin (fast path)",
    "plugin-fast-nopeekoff": "plugin (fast path, --plugin-tcp-peek=discard)",
    "plugin-fast-ref": "plugin (fast path, --ref-lib)",
    "plugin": "plugin --plugin-tcp=slirp",
    "rknp-slirp4netns": "rknp-slirp4netns (stock rootlesskit)",
    "slirp4netns": "slirp4netns",
    "pasta": "pasta",
}
# The fast path's target (issue 19): >= 0.9 of the host kernel in every run.
TARGET_RATIO = 0.9


def save(doc, results):
    tmp = os.path.join(results, "wan.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, os.path.join(results, "wan.json"))


def _mbps(v):
    return "%.0f" % v if v >= 10 else "%.1f" % v


def runs_of(doc, rtt, loss, direction, target, mtu):
    """Runs of one cell in repeat order; mtu is ignored for the reference."""
    return [r for r in doc["runs"]
            if r["rtt_ms"] == rtt and r["loss_percent"] == loss
            and r["direction"] == direction and r["target"] == target
            and (target == REFERENCE or r["mtu"] == mtu)]


def figures(runs):
    return [r["bps"] / 1e6 for r in runs if "bps" in r]


def jain(rates):
    """Jain's fairness index of the rates: 1 when all are equal, 1/n when
    one stream has it all."""
    total = sum(rates)
    squares = sum(r * r for r in rates)
    return total * total / (len(rates) * squares) if squares else 0.0


def _run_text(r):
    """One run's figure; with several streams, their fairness too."""
    txt = _mbps(r["bps"] / 1e6)
    if len(r.get("stream_bps") or []) > 1:
        txt += " (J %.2f)" % jain(r["stream_bps"])
    return txt


def cell(runs, host_median):
    vals = figures(runs)
    failed = sum(1 for r in runs if "bps" not in r)
    if not vals and not failed:
        return "–"
    txt = ", ".join(_run_text(r) for r in runs if "bps" in r)
    if failed:
        txt += (", " if vals else "") + "%d failed" % failed
    retried = sum(1 for r in runs if r.get("first_error"))
    if retried:
        # A first attempt that failed (e.g. a stalled transfer's timeout)
        # is part of what a user would see: not hidden by the retry.
        txt += " [%d retried after a failure]" % retried
    if vals and host_median:
        med, worst = statistics.median(vals) / host_median, min(vals) / host_median
        txt += " — ×%.2f" % med
        if len(vals) > 1 and worst < med:
            txt += " (min ×%.2f)" % worst
    return txt


def cells(doc):
    o = doc["options"]
    for rtt in o["rtt_ms"]:
        for loss in o["loss_percent"]:
            for direction in o["directions"]:
                yield rtt, loss, direction


def load_line(doc):
    loads = [r["load1"] for r in doc["runs"] if "load1" in r]
    if not loads:
        return ""
    return ("Load average (1 min) when the runs started: %.1f–%.1f (other work on the "
            "machine skews runs)." % (min(loads), max(loads)))


def markdown(doc):
    o = doc["options"]
    lines = [
        "# rknp WAN benchmark, %s" % doc["started"], "",
        "%s (-t %d) between the rootless child and a test host behind "
        "the WAN bed (tests/lib/wan_bed.sh; link MTU %d; RTT = 2 x one-way delay; loss "
        "per packet each way%s, seed %d, %s); %s socket sysctls; %d repeat(s); kernel %s, "
        "%d CPUs; %.0f s wall." % (
            "One iperf3 stream" if o.get("parallel", 1) <= 1 else
            "iperf3 -P %d (that many concurrent streams; J = Jain's fairness index "
            "among them, 1 = equal shares)" % o["parallel"],
            o["seconds"], o["link_mtu"],
            ", reordering %g%%" % o["reorder_percent"] if o.get("reorder_percent") else "",
            o["seed"],
            "draws going on from run to run" if o.get("fresh_draws", True)
            else "the draws restarted from it for every run, so every run meets the same losses",
            "Debian's default" if o["debian_sysctls"] else "the machine's own",
            o["repeat"], doc["machine"]["kernel"], doc["machine"]["cpus"],
            doc.get("wall_s", 0)), "",
        load_line(doc), "",
        "Download = the test host sends to the child (iperf3 -R), upload = the child "
        "sends. Cells: every run's receiver figure in Mbit/s, in run order, then "
        "— ×median ratio to the host kernel's median in the same row (min ×: the "
        "worst run's ratio). The host kernel column is the reference (no "
        "rootlesskit, the same in both MTU tables).", ""]
    others = [t for t in doc["targets"] if t != REFERENCE]
    for mtu in o["mtus"]:
        names = ([REFERENCE] if REFERENCE in doc["targets"] else []) + others
        lines += ["## rootlesskit --mtu %d" % mtu, "",
                  "| RTT | loss | direction | " +
                  " | ".join(LABELS.get(n, n) for n in names) + " |",
                  "|---|---|---|" + "---|" * len(names)]
        for rtt, loss, direction in cells(doc):
            host = figures(runs_of(doc, rtt, loss, direction, REFERENCE, None))
            host_median = statistics.median(host) if host else None
            row = []
            for n in names:
                runs = runs_of(doc, rtt, loss, direction, n, mtu)
                row.append(cell(runs, None if n == REFERENCE else host_median))
            lines.append("| %g ms | %g%% | %s | %s |" % (rtt, loss, direction, " | ".join(row)))
        lines.append("")
    lines += targets_section(doc)
    lines += verified_section(doc)
    failed = [r for r in doc["runs"] if "bps" not in r or r.get("first_error")]
    if failed:
        lines += ["## Failures and retries", ""]
        for r in failed:
            what = r.get("error") or "retried after: " + r["first_error"]
            lines.append("- RTT %g loss %g %s mtu %s %s run %d: %s" % (
                r["rtt_ms"], r["loss_percent"], r["target"], r["mtu"] or "-",
                r["direction"], r["repeat"] + 1, what))
        lines.append("")
    return "\n".join(lines)


def verified_section(doc):
    """The echo transfers compared byte for byte after each session of a
    cell with loss or reordering."""
    ver = doc.get("verified", [])
    if not ver:
        return []
    bad = [v for v in ver if not v.get("equal")]
    n = doc["options"].get("verify_bytes", 0)
    lines = ["## Bytes verified", "",
             "After each session of a cell with loss or reordering, %d bytes through the "
             "test host's echo server and back on one connection, sha256 compared." % n, ""]
    if not bad:
        lines.append("All %d transfers equal." % len(ver))
    else:
        lines.append("%d of %d transfers equal; not equal:" % (len(ver) - len(bad), len(ver)))
        lines.append("")
    for v in bad:
        lines.append("- RTT %g loss %g %s mtu %s run %d: %s" % (
            v["rtt_ms"], v["loss_percent"], v["target"], v["mtu"] or "-", v["repeat"] + 1,
            v.get("error") or "%d of %d bytes back, not equal" % (v.get("bytes", 0), n)))
    lines.append("")
    return lines


def targets_section(doc):
    """Issue 19's target for the fast path: every run >= 0.9 x the host
    kernel's median, and never below slirp4netns's worst run."""
    if "plugin-fast" not in doc["targets"] or REFERENCE not in doc["targets"]:
        return []
    misses = []
    for mtu in doc["options"]["mtus"]:
        for rtt, loss, direction in cells(doc):
            host = figures(runs_of(doc, rtt, loss, direction, REFERENCE, None))
            fast = figures(runs_of(doc, rtt, loss, direction, "plugin-fast", mtu))
            s4n = figures(runs_of(doc, rtt, loss, direction, "slirp4netns", mtu))
            if not host or not fast:
                continue
            h = statistics.median(host)
            low = [v for v in fast if v < TARGET_RATIO * h or (s4n and v < min(s4n))]
            if low:
                misses.append("- mtu %d, RTT %g ms, loss %g%%, %s: %s of %d run(s) below "
                              "%.0f Mbit/s (×%.1f host %.0f)%s: %s" % (
                                  mtu, rtt, loss, direction, len(low), len(fast),
                                  TARGET_RATIO * h, TARGET_RATIO, h,
                                  " or slirp4netns's worst %.0f" % min(s4n) if s4n else "",
                                  ", ".join(_mbps(v) for v in low)))
    head = ["## Fast path against its target", "",
            "Target: every run ≥ %.1f × the host kernel's median and ≥ slirp4netns's "
            "worst run in the same cell." % TARGET_RATIO, ""]
    return head + (misses or ["All runs meet it."]) + [""]


def chart(doc, path):
    """One panel per (direction, MTU): every run as a dot, per cell and
    driver; log scale, so a collapse stands out next to the host kernel."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    o = doc["options"]
    combos = [(d, m) for d in o["directions"] for m in o["mtus"]]
    xcells = [(rtt, loss) for rtt in o["rtt_ms"] for loss in o["loss_percent"]]
    names = doc["targets"]
    fig, axes = plt.subplots(1, len(combos), figsize=(max(5, 1.6 * len(xcells)) * len(combos), 4.8),
                             squeeze=False, sharey=True)
    width = 0.8 / max(1, len(names))
    for ax, (direction, mtu) in zip(axes[0], combos):
        for i, n in enumerate(names):
            xs, ys = [], []
            for j, (rtt, loss) in enumerate(xcells):
                vals = figures(runs_of(doc, rtt, loss, direction, n, mtu))
                x = j + (i - (len(names) - 1) / 2) * width
                xs += [x] * len(vals)
                ys += vals
            ax.scatter(xs, ys, s=160 if n == REFERENCE else 18, label=LABELS.get(n, n),
                       marker="_" if n == REFERENCE else "o",
                       color="black" if n == REFERENCE else None,
                       linewidths=2 if n == REFERENCE else None, zorder=3)
        ax.set_xticks(range(len(xcells)))
        ax.set_xticklabels(["%g ms\n%g%% loss" % c for c in xcells], fontsize=8)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_title("%s, rootlesskit --mtu %d" % (direction, mtu), fontsize=10)
        ax.grid(axis="y", alpha=0.3, which="both")
    axes[0][0].set_ylabel("Mbit/s, each run a dot (log)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv):
    results = argv[0]
    with open(os.path.join(results, "wan.json")) as f:
        doc = json.load(f)
    md = markdown(doc)
    with open(os.path.join(results, "wan.md"), "w") as f:
        f.write(md)
    chart(doc, os.path.join(results, "wan.png"))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
