# SPDX-License-Identifier: Apache-2.0
"""Markdown table of tests/bench/docker.sh's iperf3 results.

Usage: docker_report.py RESULTS_DIR ROUTE...
Reads RESULTS_DIR/docker-ROUTE-CASE-REPEAT.json (iperf3 -J from inside a
container; CASE is download, upload or udp_DIRECTION_RATE) and prints one
row per route: the median (min-max) Gbit/s the receiver counted, download
and upload, and the ratio of the median to the slirp4netns route's; for
UDP, a second table with the arrived rate and the median loss at each
offered rate. Runs that produced no result are listed as errors.
"""
import json
import pathlib
import statistics
import sys

DIRECTIONS = ("download", "upload")
REFERENCE = "slirp4netns"
LABELS = {
    "fork": "rknp plugin (TCP fast path)",
    "fork-slirp": "rknp plugin, --plugin-tcp=slirp",
    "stock": "stock rootlesskit + rknp-slirp4netns",
    "slirp4netns": "stock rootlesskit + slirp4netns",
}


def received(path):
    """(the receiver's Gbit/s, its loss % or None for TCP), or an error string."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"{path.name}: {e}"
    if "error" in data:
        return f"{path.name}: {data['error']}"
    try:
        got = data["end"]["sum_received"]
    except KeyError:
        return f"{path.name}: no end.sum_received"
    return got["bits_per_second"] / 1e9, got.get("lost_percent")


def udp_cases(samples):
    """The UDP cases present, by offered rate (as given: 1G, 10G...)."""
    rates = {c.rsplit("_", 1)[1] for _, c in samples if c.startswith("udp_")}
    return sorted(rates, key=lambda r: float(r.rstrip("GMK") or 0)
                  * {"G": 1e9, "M": 1e6, "K": 1e3}.get(r[-1:], 1))


def main():
    results = pathlib.Path(sys.argv[1])
    routes = sys.argv[2:]
    samples = {}  # (route, case): [Gbit/s], losses[(route, case)]: [%]
    losses = {}
    errors = []
    for path in sorted(results.glob("docker-*-*-*.json")):
        parts = path.stem.split("-")  # docker, route..., case, repeat
        route, case = "-".join(parts[1:-2]), parts[-2]
        if route not in routes:
            continue
        v = received(path)
        if isinstance(v, str):
            errors.append(v)
            continue
        samples.setdefault((route, case), []).append(v[0])
        if v[1] is not None:
            losses.setdefault((route, case), []).append(v[1])

    def median(route, case):
        s = samples.get((route, case), [])
        return statistics.median(s) if s else None

    def gbps_cell(r, case):
        s = samples.get((r, case))
        if not s:
            return "–"
        m, ref = statistics.median(s), median(REFERENCE, case)
        cell = f"**{m:.2f}** ({min(s):.2f}–{max(s):.2f})"
        if ref and r != REFERENCE:
            cell += f" ×{m / ref:.2f}"
        return cell

    if any(c in DIRECTIONS for _, c in samples):
        print("| route | download Gbit/s | upload Gbit/s |")
        print("|---|---|---|")
        for r in routes:
            cells = [gbps_cell(r, d) for d in DIRECTIONS]
            print(f"| {LABELS.get(r, r)} | {cells[0]} | {cells[1]} |")
    rates = udp_cases(samples)
    if rates:
        cases = [f"udp_{d}_{rate}" for rate in rates for d in DIRECTIONS]
        print("\nUDP (iperf3 -u, 1472-byte datagrams): arrived Gbit/s, "
              "median loss %\n")
        print("| route | " + " | ".join(
            c.split("_")[1] + " at " + c.split("_")[2] for c in cases) + " |")
        print("|---|" + "---|" * len(cases))
        for r in routes:
            cells = []
            for c in cases:
                cell = gbps_cell(r, c)
                if losses.get((r, c)):
                    cell += f", {statistics.median(losses[(r, c)]):.1f} %"
                cells.append(cell)
            print(f"| {LABELS.get(r, r)} | " + " | ".join(cells) + " |")
    if errors:
        print("\nErrors:")
        for e in errors:
            print(f"- {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
