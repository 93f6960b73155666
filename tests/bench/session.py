# SPDX-License-Identifier: Apache-2.0

"""One session: servers up, agent started inside a target, tests run, all down.

Per session the agent is started once (that start gives the start-up time),
then each test is one agent command; the stack processes' CPU time is read
right before and after each command, so CPU per GB covers only that test.
"""
import json
import os
import select
import socket
import subprocess
import time

import procs
from agent import flood_result, run_iperf3, udp_rr
from targets import PUB_TCP_PORT, PUB_UDP_PORT, PY

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "@@BENCH "


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


IDLE_FLOWS = 4000
# Offered rates of the UDP iperf3 steps (iperf3 -b), in Gbit/s.
UDP_RATES = (1, 5, 10)


def udp_len(mtu, opts):
    """Datagram size of the UDP steps: the largest that fits one frame
    (MTU - 28: no IP fragmentation anywhere), capped at opts.udp_len_max
    (32000 by default; README.md says why)."""
    return min(mtu - 28, opts.udp_len_max)


def udp_tests(mtu, opts):
    """The UDP scenario: iperf3 -u both ways at each offered rate, both
    ways with ends that batch (rknp-udp-flood), then the request/response
    latency of small datagrams (rknp-udp-rr)."""
    d = opts.duration
    buf = ["-w", opts.udp_buffer] if opts.udp_buffer else []
    t = []
    for name, extra in (("c2h", []), ("h2c", ["-R"])):
        for rate in UDP_RATES:
            t.append(("udp_%s_%dg" % (name, rate),
                      {"op": "iperf3", "duration": d,
                       "args": ["-u", "-b", "%dG" % rate,
                                "-l", str(udp_len(mtu, opts))] + buf + extra}))
    # The stacks' own bound: both ends move 64 datagrams a call.
    for name, role in (("c2h", "source"), ("h2c", "sink")):
        t.append(("udp_flood_" + name,
                  {"op": "udp_flood", "role": role, "tool": opts.udp_flood,
                   "len": udp_len(mtu, opts), "duration": d}))
    t.append(("udp_rr", {"op": "udp_rr", "tool": opts.udp_rr,
                         "count": 500 if opts.quick else 3000, "size": 64,
                         "limit": 3}))
    return t


def publish_tests(opts):
    """The published-port tests (targets with publish: Podman's `run
    -p`): the agent serves iperf3 and rknp-udp-rr in the container, the
    clients run on the host, from its loopback (lo) and from the test host
    a veth away (remote: a non-loopback client), both ways (up: client to
    container; down: container to client, iperf3 -R), then 64 B UDP
    request/response through a published UDP port."""
    t = []
    for where in ("lo", "remote"):
        for way, extra in (("up", []), ("down", ["-R"])):
            t.append(("pub_%s_%s" % (where, way),
                      {"op": "host_iperf3", "where": where, "args": extra,
                       "duration": opts.duration}))
        t.append(("pub_udp_rr_" + where,
                  {"op": "host_udp_rr", "where": where, "size": 64, "limit": 3,
                   "count": 500 if opts.quick else 3000}))
    return t


def tests_for(mtu, opts):
    """(name, agent command) of every test this session runs; host_* are
    run by the session itself (published ports), the rest by the agent."""
    if opts.scenario == "udp":
        return udp_tests(mtu, opts)
    if opts.scenario == "publish":
        return publish_tests(opts)
    d = opts.duration
    t = [("tcp_c2h", {"op": "iperf3", "args": [], "duration": d}),
         ("tcp_h2c", {"op": "iperf3", "args": ["-R"], "duration": d})]
    if not opts.quick:
        t.append(("tcp_c2h_p4", {"op": "iperf3", "args": ["-P", "4"],
                                 "duration": d}))
    if opts.scenario == "all":
        t += udp_tests(mtu, opts)
    t.append(("rr", {"op": "pingpong", "count": 500 if opts.quick else 3000,
                     "size": 64, "limit": 3}))
    t.append(("conn", {"op": "connrate", "seconds": 1 if opts.quick else 2}))
    # Scale: the same ping-pong with IDLE_FLOWS idle connections open (the
    # cost of a loop iteration must not grow with the number of flows).
    t.append(("idle_open", {"op": "open_idle", "count": IDLE_FLOWS}))
    t.append(("rr_idle", {"op": "pingpong", "count": 500 if opts.quick else 3000,
                          "size": 64, "limit": 3}))
    t.append(("idle_close", {"op": "close_idle"}))
    return t + publish_tests(opts)


class Agent:
    def __init__(self, argv, log):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=log,
                                  text=True, start_new_session=True)
        self.buf = ""

    def read(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            while "\n" in self.buf:
                line, self.buf = self.buf.split("\n", 1)
                if line.startswith(PREFIX):
                    return json.loads(line[len(PREFIX):])
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("agent silent for %ds" % timeout)
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536).decode()
                if not chunk:
                    raise EOFError("agent exited (rc=%s)" % self.p.wait())
                self.buf += chunk

    def ask(self, cmd, timeout):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        return self.read(timeout)

    def stop(self):
        try:
            self.ask({"op": "quit"}, 10)
        except (OSError, EOFError, TimeoutError, ValueError):
            pass
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, 9)
            self.p.wait()


def start_servers(target, iperf_port, echo_port, log, udp_rr=None, udp_port=0):
    """iperf3 and the TCP echo server where the target's test host is;
    the UDP request/response server too when udp_rr names the tool."""
    pre = list(target.server_prefix)
    servers = [
        subprocess.Popen(pre + ["iperf3", "-s", "-B", target.server_addr,
                                "-p", str(iperf_port)],
                         stdout=subprocess.DEVNULL, stderr=log),
        subprocess.Popen(pre + [PY, os.path.join(HERE, "echo_server.py"),
                                target.server_addr, str(echo_port)],
                         stdout=subprocess.DEVNULL, stderr=log)]
    if udp_rr and os.access(udp_rr, os.X_OK):
        servers.append(subprocess.Popen(
            pre + [udp_rr, "server", target.server_addr, str(udp_port)],
            stdout=subprocess.DEVNULL, stderr=log))
    time.sleep(0.3)
    return servers


def host_flood(target, cmd, port, log):
    """The host's end of a udp_flood test, started before the agent's:
    a sink for child->host, a source waiting for the child's hello for
    host->child. Returns the process once it said ready, else None."""
    if cmd["role"] == "source":  # the child sends: the host counts
        argv = [cmd["tool"], "sink", target.server_addr, str(port)]
    else:
        argv = [cmd["tool"], "source", target.server_addr, str(port),
                str(cmd["len"]), str(cmd["duration"]), "--wait-hello"]
    p = subprocess.Popen(list(target.server_prefix) + argv, stdout=subprocess.PIPE,
                         stderr=log, text=True)
    r, _, _ = select.select([p.stdout], [], [], 10)
    if r and p.stdout.readline().strip() == "ready":
        return p
    p.kill()
    p.wait()
    return None


def host_flood_output(p):
    """What the host's end printed once it is done (a sink ends a second
    after the last datagram); killed if it is not within 30 s."""
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return out


def flood_merge(agent_res, host_out):
    """One udp_flood result from both ends: arrived from the sink,
    offered from the source."""
    res = dict(agent_res)
    res.update(flood_result(host_out))
    if "error" not in res and "bps" not in res:
        res["error"] = "the sink printed no count"
    return res


def start_published(agent, target, tests, opts):
    """The container's servers of the published-port tests, if any of
    them runs: None if they are up, else why not. rknp-udp-rr is run at
    the host's path (PodmanPasta mounts it there)."""
    if not any(cmd["op"].startswith("host_") for _, cmd in tests):
        return None
    tool = opts.udp_rr if os.access(opts.udp_rr, os.X_OK) else None
    res = agent.ask({"op": "serve", "iperf_port": PUB_TCP_PORT,
                     "udp_port": PUB_UDP_PORT, "tool": tool}, 30)
    return res.get("error")


def host_test(target, cmd, opts):
    """A published-port test's client, run here (the host's loopback) or
    on the test host (target.publish says how and where it dials)."""
    prefix, addr = target.publish[cmd["where"]]
    tcp_port, udp_port = target.publish_ports
    if cmd["op"] == "host_iperf3":
        return run_iperf3(addr, tcp_port, cmd["args"] + ["--get-server-output"],
                          cmd["duration"], prefix)
    if not os.access(opts.udp_rr, os.X_OK):
        return {"error": "no rknp-udp-rr at %s (build it)" % opts.udp_rr}
    return udp_rr(addr, udp_port, opts.udp_rr, cmd["count"], cmd["size"],
                  cmd["limit"], prefix)


def stack_usage(pids):
    out = {}
    for role, pid in pids.items():
        try:
            out[role] = procs.cpu_seconds(pid)
        except OSError:
            pass
    return out


def reap_helper(pid, names):
    """pasta outlives rootlesskit (it daemonizes and keeps the netns): stop
    it by pid once rootlesskit is gone, after checking it is still ours."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() not in names:
                    return
        except OSError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, 15)
    except OSError:
        pass


def open_log(path):
    """(log, logf): log(msg) prints msg with the time and appends it to
    the file at path; logf is that file, for what the sessions log."""
    logf = open(path, "a")

    def log(msg):
        line = "[%s] %s" % (time.strftime("%H:%M:%S"), msg)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()
    return log, logf


def end_session(agent, pids, helpers, servers):
    """Ends what a session started: the agent, a helper that outlives
    rootlesskit (pasta), the servers (killed if they take over 5 s)."""
    if agent:
        agent.stop()
    if "helper" in pids:
        reap_helper(pids["helper"], helpers)
    for s in servers:
        s.terminate()
    for s in servers:
        try:
            s.wait(5)
        except subprocess.TimeoutExpired:
            s.kill()
            s.wait()


def run_session(target, mtu, opts, log):
    """Returns {"startup_s", "tests": {name: result}, "rss_kib", "pids"}."""
    iperf_port, echo_port = free_port(), free_port()
    udp_port = free_port(socket.SOCK_DGRAM)
    if target.publish:  # the host's ports, published at the agent's start
        target.publish_ports = (free_port(), free_port(socket.SOCK_DGRAM))
    tests = [(n, c) for n, c in tests_for(mtu, opts)
             if n not in target.skip_tests and
             (target.publish or not c["op"].startswith("host_"))]
    target.setup(mtu)
    servers = start_servers(target, iperf_port, echo_port, log,
                            udp_rr=opts.udp_rr if opts.scenario != "tcp" else None,
                            udp_port=udp_port)
    agent_argv = [PY, os.path.join(HERE, "agent.py"), target.dial,
                  str(echo_port), str(iperf_port), target.gateway]
    with open("/proc/loadavg") as f:  # other load on the machine skews runs
        rec = {"tests": {}, "load1": float(f.read().split()[0])}
    agent = None
    pids = {}
    try:
        t0 = time.monotonic()
        agent = Agent(target.wrap(opts.user, mtu, agent_argv), log)
        ready = agent.read(60)
        if "error" in ready:
            rec["error"] = ready["error"]
            return rec
        rec["startup_s"] = ready["ready"] - t0
        if target.parent_name or target.helpers:
            pids = procs.find_stack(agent.p.pid, opts.uid, target.helpers,
                                    target.parent_name)
        rec["pids"] = pids
        not_served = start_published(agent, target, tests, opts)
        for name, cmd in tests:
            if not_served and cmd["op"].startswith("host_"):
                rec["tests"][name] = {"error": "published-port servers: " + not_served}
                continue
            if name == "rr_idle" and "error" in rec["tests"].get("idle_open", {}):
                rec["tests"][name] = {"error": "idle connections not opened"}
                continue
            if cmd["op"] == "udp_rr":
                if not os.access(opts.udp_rr, os.X_OK):
                    rec["tests"][name] = {"error": "no rknp-udp-rr at %s (build it)"
                                          % opts.udp_rr}
                    continue
                cmd = dict(cmd, port=udp_port)
            flood = None
            if cmd["op"] == "udp_flood":
                if not os.access(opts.udp_flood, os.X_OK):
                    rec["tests"][name] = {"error": "no rknp-udp-flood at %s (build it)"
                                          % opts.udp_flood}
                    continue
                cmd = dict(cmd, port=free_port(socket.SOCK_DGRAM))
                flood = host_flood(target, cmd, cmd["port"], log)
                if flood is None:
                    rec["tests"][name] = {"error": "the host's rknp-udp-flood did not start"}
                    continue
            before = stack_usage(pids)
            try:
                res = (host_test(target, cmd, opts) if cmd["op"].startswith("host_")
                       else agent.ask(cmd, opts.duration + 60))
            finally:
                out = host_flood_output(flood) if flood is not None else ""
            if flood is not None:
                res = flood_merge(res, out)
            after = stack_usage(pids)
            if pids:
                res["cpu_s"] = {r: after[r] - before[r] for r in after
                                if r in before}
            rec["tests"][name] = res
        rec["rss_kib"] = {}
        for role, pid in pids.items():
            try:
                rec["rss_kib"][role] = procs.vm_hwm_kib(pid)
            except OSError:
                pass
    except (EOFError, TimeoutError, OSError, ValueError) as e:
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        end_session(agent, pids, target.helpers, servers)
        target.teardown()
    return rec
