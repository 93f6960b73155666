# SPDX-License-Identifier: Apache-2.0
"""Markdown table of tests/bench/docker.sh's iperf3 results.

Usage: docker_report.py RESULTS_DIR ROUTE...
Reads RESULTS_DIR/docker-ROUTE-DIRECTION-REPEAT.json (iperf3 -J from inside
a container) and prints one row per route: the median (min-max) Gbit/s the
receiver counted, download and upload, and the ratio of the median to the
slirp4netns route's. Runs that produced no result are listed as errors.
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


def received_gbps(path):
    """The receiver's bits/s in Gbit/s, or an error string."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"{path.name}: {e}"
    if "error" in data:
        return f"{path.name}: {data['error']}"
    try:
        return data["end"]["sum_received"]["bits_per_second"] / 1e9
    except KeyError:
        return f"{path.name}: no end.sum_received"


def main():
    results = pathlib.Path(sys.argv[1])
    routes = sys.argv[2:]
    samples = {(r, d): [] for r in routes for d in DIRECTIONS}
    errors = []
    for path in sorted(results.glob("docker-*-*-*.json")):
        parts = path.stem.split("-")  # docker, route..., direction, repeat
        route, direction = "-".join(parts[1:-2]), parts[-2]
        if (route, direction) not in samples:
            continue
        v = received_gbps(path)
        if isinstance(v, str):
            errors.append(v)
        else:
            samples[(route, direction)].append(v)

    def median(route, direction):
        s = samples.get((route, direction), [])
        return statistics.median(s) if s else None

    print("| route | download Gbit/s | upload Gbit/s |")
    print("|---|---|---|")
    for r in routes:
        cells = []
        for d in DIRECTIONS:
            s = samples[(r, d)]
            if not s:
                cells.append("–")
                continue
            m, ref = statistics.median(s), median(REFERENCE, d)
            cell = f"**{m:.2f}** ({min(s):.2f}–{max(s):.2f})"
            if ref and r != REFERENCE:
                cell += f" ×{m / ref:.2f}"
            cells.append(cell)
        print(f"| {LABELS.get(r, r)} | {cells[0]} | {cells[1]} |")
    if errors:
        print("\nErrors:")
        for e in errors:
            print(f"- {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
