#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots a soak run (tests/soak/run.sh --plot, or afterwards):

  plot.py OUT [PNG]     OUT/samples-*.csv -> PNG (default OUT/soak.png)

Four panels over the run's minutes, one line per stack: RSS (MiB), fds,
host sockets (TCP solid, UDP dashed, dotted: sockets already closed that
the stack has not released yet, procstat.py's sock_unlisted), CPU of the stack thread (% of a
core); the traffic's start and end are marked. Needs matplotlib (Debian:
python3-matplotlib, tests/install-deps.sh).
"""

import csv
import glob
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out = sys.argv[1]
    png = sys.argv[2] if len(sys.argv) > 2 else os.path.join(out, "soak.png")
    runs = {}
    for f in sorted(glob.glob(os.path.join(out, "samples-*.csv"))):
        runs[os.path.basename(f)[8:-4]] = list(csv.DictReader(open(f)))
    if not runs:
        print(f"no samples in {out}", file=sys.stderr)
        return 1
    t0 = min(float(r[0]["time"]) for r in runs.values() if r)
    fig, ax = plt.subplots(4, 1, figsize=(11, 12), sharex=True)
    panels = [("rss_kib", "RSS (MiB)", 1 / 1024), ("fds", "fds", 1), (None, "host sockets", 1),
              ("stack_cpu_pct", "stack thread CPU (% of a core)", 1)]
    for i, (stack, rows) in enumerate(runs.items()):
        color = f"C{i}"
        t = [(float(r["time"]) - t0) / 60 for r in rows]

        def col(k, rows=rows):
            return [float(r[k]) if r[k] != "" else float("nan") for r in rows]
        for a, (k, label, scale) in zip(ax, panels):
            if k is None:
                a.plot(t, col("tcp"), color=color, label=f"{stack} TCP")
                a.plot(t, col("udp"), color=color, linestyle="--", label=f"{stack} UDP")
                a.plot(t, col("sock_unlisted"), color=color, linestyle=":", label=f"{stack} closed, held")
            else:
                a.plot(t, [v * scale for v in col(k)], color=color, label=stack)
            a.set_ylabel(label)
        for ph, style in (("traffic", ":"), ("drain", "-.")):
            first = next((tt for tt, r in zip(t, rows) if r["phase"] == ph), None)
            if first is not None:
                for a in ax:
                    a.axvline(first, color=color, linestyle=style, linewidth=0.8)
    for a in ax:
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8, loc="upper left")
    ax[-1].set_xlabel("minutes (dotted: traffic starts, dash-dot: it stops)")
    fig.suptitle(f"rknp soak: {os.path.abspath(out)}")
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
