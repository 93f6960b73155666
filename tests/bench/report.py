# SPDX-License-Identifier: Apache-2.0

"""Turns results.json samples into the Markdown summary and the PNG charts."""
import statistics

from session import UDP_RATES
from targets import PUB_IP


def _t(s, name, key):
    v = s.get("tests", {}).get(name, {})
    return None if "error" in v else v.get(key)


def _gbps(name):
    return lambda s: None if _t(s, name, "bps") is None else _t(s, name, "bps") / 1e9


def _cpu_per_gb(name):
    def f(s):
        v = s.get("tests", {}).get(name, {})
        if "error" in v or not v.get("cpu_s") or not v.get("bytes"):
            return None
        return sum(v["cpu_s"].values()) / (v["bytes"] / 1e9)
    return f


def _udp_rows():
    """Arrived rate and loss of every UDP step, child→host then host→child."""
    rows = []
    for d, label in (("c2h", "child→host"), ("h2c", "host→child")):
        for rate in UDP_RATES:
            name = "udp_%s_%dg" % (d, rate)
            rows.append((name, "UDP %s, %d Gbit/s offered: arrived (Gbit/s)"
                         % (label, rate), "up", _gbps(name)))
            rows.append((name + "_loss", "UDP %s, %d Gbit/s offered: loss (%%)"
                         % (label, rate), "down",
                         lambda s, n=name: _t(s, n, "lost_percent")))
        name = "udp_flood_" + d
        rows.append((name, "UDP %s, both ends batched: arrived (Gbit/s)" % label,
                     "up", _gbps(name)))
    return rows


def _publish_rows():
    """The published-port tests (Podman's `run -p`): rate and stack CPU
    per GB each way from each client, then UDP request/response."""
    rows = []
    for where, who in (("lo", "loopback client"), ("remote", "veth client")):
        for way, label in (("up", "%s→container" % who), ("down", "container→%s" % who)):
            name = "pub_%s_%s" % (where, way)
            rows.append((name, "Published port, %s (Gbit/s)" % label, "up", _gbps(name)))
    for where, who in (("lo", "loopback client"), ("remote", "veth client")):
        for way, label in (("up", "%s→container" % who), ("down", "container→%s" % who)):
            name = "pub_%s_%s" % (where, way)
            rows.append(("cpu_" + name, "Stack CPU per GB, published port, %s (s)" % label,
                         "down", _cpu_per_gb(name)))
    for where, who in (("lo", "loopback client"), ("remote", "veth client")):
        name = "pub_udp_rr_" + where
        for q in ("p50", "p99"):
            rows.append(("%s_%s" % (name, q), "Published UDP port, %s, 64 B "
                         "request/response %s (µs)" % (who, q), "down",
                         lambda s, n=name, k=q + "_us": _t(s, n, k)))
    return rows


def _rss(roles):
    def f(s):
        r = s.get("rss_kib") or {}
        vals = [r[k] for k in roles if r.get(k)]
        return sum(vals) / 1024 if vals else None
    return f


def _stack_rss(s):
    r = s.get("rss_kib") or {}
    v = r.get("helper") or r.get("parent")
    return v / 1024 if v else None


def _ms(s):
    return s["startup_s"] * 1000 if "startup_s" in s else None


# key, label, better ("up"/"down"), extractor
METRICS = [
    ("tcp_c2h", "TCP child→host, 1 stream (Gbit/s)", "up", _gbps("tcp_c2h")),
    ("tcp_h2c", "TCP host→child, 1 stream (Gbit/s)", "up", _gbps("tcp_h2c")),
    ("tcp_c2h_p4", "TCP child→host, 4 streams (Gbit/s)", "up", _gbps("tcp_c2h_p4")),
    # The single UDP run of results before the UDP steps (-b 10G, -l MTU-28).
    ("udp_c2h", "UDP child→host (Gbit/s)", "up", _gbps("udp_c2h")),
    ("udp_loss", "UDP loss (%)", "down", lambda s: _t(s, "udp_c2h", "lost_percent")),
] + _udp_rows() + [
    ("rr_p50", "TCP 64 B ping-pong p50 (µs)", "down", lambda s: _t(s, "rr", "p50_us")),
    ("rr_p99", "TCP 64 B ping-pong p99 (µs)", "down", lambda s: _t(s, "rr", "p99_us")),
    ("udp_rr_p50", "UDP 64 B request/response p50 (µs)", "down",
     lambda s: _t(s, "udp_rr", "p50_us")),
    ("udp_rr_p99", "UDP 64 B request/response p99 (µs)", "down",
     lambda s: _t(s, "udp_rr", "p99_us")),
    ("udp_rr_lost", "UDP request/response: requests unanswered in 200 ms", "down",
     lambda s: _t(s, "udp_rr", "lost")),
    ("conn", "New TCP connections (/s)", "up", lambda s: _t(s, "conn", "per_s")),
    ("rr_idle_p50", "Ping-pong p50 with 4000 idle connections (µs)", "down",
     lambda s: _t(s, "rr_idle", "p50_us")),
    ("rr_idle_p99", "Ping-pong p99 with 4000 idle connections (µs)", "down",
     lambda s: _t(s, "rr_idle", "p99_us")),
    ("cpu_c2h", "Stack CPU per GB, TCP child→host (s)", "down", _cpu_per_gb("tcp_c2h")),
    ("cpu_h2c", "Stack CPU per GB, TCP host→child (s)", "down", _cpu_per_gb("tcp_h2c")),
    ("cpu_udp_c2h", "Stack CPU per GB, UDP child→host at 1 Gbit/s (s)", "down",
     _cpu_per_gb("udp_c2h_1g")),
    ("cpu_udp_h2c", "Stack CPU per GB, UDP host→child at 1 Gbit/s (s)", "down",
     _cpu_per_gb("udp_h2c_1g")),
] + _publish_rows() + [
    ("rss_stack", "Peak RSS, stack process (MiB)", "down", _stack_rss),
    ("rss_total", "Peak RSS, rootlesskit parent + helper (MiB)", "down",
     _rss(("parent", "helper"))),
    ("startup", "Start to first TCP connection (ms)", "down", _ms),
]
BASE = "slirp4netns"
# What the progress line of each session shows.
ONE_LINE = ("tcp_c2h", "tcp_h2c", "tcp_c2h_p4", "udp_c2h", "udp_loss",
            "udp_c2h_1g_loss", "udp_c2h_10g", "udp_h2c_1g_loss", "udp_h2c_10g",
            "udp_flood_c2h", "udp_flood_h2c",
            "rr_p50", "rr_p99", "udp_rr_p50", "udp_rr_p99", "conn",
            "rr_idle_p50", "rr_idle_p99", "pub_lo_up", "pub_lo_down",
            "pub_remote_up", "pub_remote_down", "pub_udp_rr_lo_p50",
            "pub_udp_rr_remote_p50")
# The charts: file name -> series (METRICS keys), one bar group per driver.
CHARTS = {"throughput.png": ("tcp_c2h", "tcp_h2c", "tcp_c2h_p4", "udp_c2h"),
          "udp.png": tuple("udp_%s_%dg" % (d, r) for d in ("c2h", "h2c")
                           for r in UDP_RATES) + ("udp_flood_c2h", "udp_flood_h2c")}


def _fmt(v):
    if v is None:
        return "–"
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.2f" % v


def values(doc, target, mtu, fn):
    out = []
    for s in doc["samples"]:
        if s["target"] == target and s["mtu"] == mtu:
            v = fn(s)
            if v is not None:
                out.append(v)
    return out


def cell(vals, base):
    if not vals:
        return "–"
    med = statistics.median(vals)
    txt = _fmt(med)
    if len(vals) > 1:
        txt += " (%s–%s)" % (_fmt(min(vals)), _fmt(max(vals)))
    if base and med is not None:
        b = statistics.median(base)
        if b:
            txt += " ×%.2f" % (med / b)
    return txt


def markdown(doc):
    o = doc["options"]
    base_name = o.get("base") or BASE
    lines = ["# rknp benchmark, %s" % doc["started"], "",
             "%d repeat(s), iperf3 -t %d, kernel %s, %d CPUs, %.0f s wall. "
             "Cells: median (min–max) ×ratio to %s at the same MTU; "
             "↑/↓ marks which way is better; – = not measured or failed. "
             "loopback runs once, at lo's own MTU 65536, listed under the "
             "largest MTU." % (o["repeat"], o["duration"], doc["machine"]["kernel"],
                               doc["machine"]["cpus"], doc.get("wall_s", 0), base_name), ""]
    if o.get("plugin_via") == "HarnessPlugin":
        lines += ["**plugin ran through rknp-harness, not rootlesskit.**", ""]
    if o.get("scenario", "all") != "all":
        lines += ["Scenario: %s only." % o["scenario"], ""]
    if o.get("scenario", "all") != "tcp" and any(
            "udp_c2h_1g" in s.get("tests", {}) for s in doc["samples"]):
        mtus = o["mtus"]
        lines += ["UDP steps: iperf3 -u -b %s%s, datagrams of %s; arrived = "
                  "what the receiver counted; CPU per GB over the bytes that "
                  "arrived. Both ends batched: rknp-udp-flood, as many "
                  "datagrams as fast as the stack takes them, 64 a "
                  "sendmmsg/recvmmsg call, no UDP_GRO. Request/response: rknp-udp-rr, 64 B, one "
                  "outstanding, 200 ms until a request counts as unanswered."
                  % ("/".join("%dG" % r for r in UDP_RATES),
                     " -w " + o["udp_buffer"] if o.get("udp_buffer") else "",
                     ", ".join("%d B at MTU %d"
                               % (min(m - 28, o.get("udp_len_max", 32000)), m)
                               for m in mtus)), ""]
    for name, why in sorted((doc.get("unsupported") or {}).items()):
        lines += ["**%s: unsupported** (not measured): %s" % (name, why), ""]
    for mtu in o["mtus"]:
        names = [t for t in doc["targets"]
                 if any(s["target"] == t and s["mtu"] == mtu for s in doc["samples"])]
        lines += ["## MTU %d" % mtu, "",
                  "| metric | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        for _, label, better, fn in METRICS:
            base = values(doc, base_name, mtu, fn)
            row = [cell(values(doc, n, mtu, fn), base) for n in names]
            if all(c == "–" for c in row):
                continue
            arrow = "↑" if better == "up" else "↓"
            lines.append("| %s %s | %s |" % (label, arrow, " | ".join(row)))
        lines.append("")
    lines += _peers(doc)
    errs = [s for s in doc["samples"] if s.get("error") or any(
        "error" in v for v in s.get("tests", {}).values())]
    if errs:
        lines += ["## Failures", ""]
        for s in errs:
            what = s.get("error") or "; ".join(
                "%s: %s" % (k, v["error"]) for k, v in s["tests"].items() if "error" in v)
            lines.append("- %s mtu %d run %d: %s" % (s["target"], s["mtu"],
                                                     s["repeat"] + 1, what))
        lines.append("")
    return "\n".join(lines)


def _peers(doc):
    """Which client address the container's iperf3 saw on each published
    port (its accepted connection): the client's own, or one the port
    driver put in its place. Every distinct answer is listed."""
    rows = []
    for mtu in doc["options"]["mtus"]:
        for t in doc["targets"]:
            seen = {}
            for s in doc["samples"]:
                if s["target"] != t or s["mtu"] != mtu:
                    continue
                for where in ("lo", "remote"):
                    for way in ("up", "down"):
                        p = s.get("tests", {}).get("pub_%s_%s" % (where, way), {}).get("peer")
                        if p:
                            seen.setdefault(where, set()).add(p)
            if seen:
                rows.append("| %d | %s | %s | %s |" % (
                    mtu, t, ", ".join(sorted(seen.get("lo", ()))) or "–",
                    ", ".join(sorted(seen.get("remote", ()))) or "–"))
    if not rows:
        return []
    return ["## Client address seen in the container", "",
            "The address the container's iperf3 server saw the published port's "
            "client come from (iperf3 --get-server-output); for rootlesskit's drivers the veth client is %s."
            % PUB_IP[1], "",
            "| MTU | driver | loopback client | veth client |", "|---|---|---|---|"] + rows + [""]


def one_line(s):
    if s.get("error"):
        return "FAILED: " + s["error"]
    parts = []
    for key, _, _, fn in METRICS:
        if key not in ONE_LINE:
            continue
        v = fn(s)
        if v is not None:
            parts.append("%s=%s" % (key, _fmt(v)))
    return " ".join(parts)


def chart(doc, path, keys):
    """Grouped bars of the keys' throughputs per driver, one panel per MTU.
    False if matplotlib is missing or none of the keys was measured."""
    series = [m for m in METRICS if m[0] in keys]
    series = [m for m in series if any(m[3](s) is not None for s in doc["samples"])]
    if not series:
        return False
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    mtus = doc["options"]["mtus"]
    # One linear scale for every MTU, so panels compare at a glance.
    fig, axes = plt.subplots(1, len(mtus), figsize=(7 * len(mtus), 4.8),
                             squeeze=False, sharey=True)
    for ax, mtu in zip(axes[0], mtus):
        names = [t for t in doc["targets"]
                 if any(s["target"] == t and s["mtu"] == mtu for s in doc["samples"])]
        width = 0.8 / len(series)
        for i, (key, label, _, fn) in enumerate(series):
            med, lo, hi = [], [], []
            for n in names:
                v = values(doc, n, mtu, fn) or [float("nan")]
                m = statistics.median(v)
                med.append(m)
                lo.append(m - min(v))
                hi.append(max(v) - m)
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(names))]
            bars = ax.bar(xs, med, width, yerr=[lo, hi], capsize=2,
                          label=label.split(" (")[0])
            ax.bar_label(bars, labels=["" if m != m else "%.1f" % m for m in med],
                         fontsize=7, padding=2)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=20)
        ax.set_ylabel("Gbit/s (bars = median, whiskers = min–max)")
        ax.set_title("MTU %d" % mtu)
        ax.grid(axis="y", alpha=0.3, which="both")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True
