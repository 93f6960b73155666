# SPDX-License-Identifier: Apache-2.0

"""What is measured: the rootlesskit drivers and the two references.

A Target knows how to wrap the agent command line so the agent runs inside
the network under test, where the servers must listen, which address the
agent dials, and which processes carry the stack (for CPU and RSS).
Every address used here is loopback or inside namespaces made by Veth.
"""
import os
import subprocess

PY = "/usr/bin/python3"

# Address inside each driver's network that rootlesskit maps to the host's
# 127.0.0.1 (also checked to be the default gateway by the agent).
GATEWAY = {"plugin": "10.0.2.2", "plugin-fast": "10.0.2.2", "plugin-fast-ref": "10.0.2.2",
           "plugin-ports": "10.0.2.2", "plugin-ports-ref": "10.0.2.2",
           "plugin-ports-builtin": "10.0.2.2",
           "plugin-fast-nopeekoff": "10.0.2.2", "plugin-udp-slirp": "10.0.2.2",
           "slirp4netns": "10.0.2.2", "rknp-slirp4netns": "10.0.2.2",
           "pasta": "10.0.2.2", "gvisor-tap-vsock": "10.0.2.1"}
# The plugin's drivers: --plugin-tcp, and --plugin-tcp-peek where forced.
# plugin-fast-nopeekoff is the fast path without SO_PEEK_OFF (the discard
# peek mode of kernels before 6.9), measured on this kernel.
# plugin-fast-ref is plugin-fast with another build of the library (the
# bench's --ref-lib, e.g. the commit before a change): an A/B of a change in
# one series, its runs interleaved with the others'.
# plugin-udp-slirp is the TCP fast path with UDP forced through libslirp
# (--plugin-udp=slirp), the reference of the UDP fast path; UDP in the
# other plugin drivers is the plugin's default.
PLUGIN_FLAGS = {"plugin": ["--plugin-tcp=slirp"],
                "plugin-fast": ["--plugin-tcp=fast"],
                "plugin-fast-ref": ["--plugin-tcp=fast"],
                "plugin-fast-nopeekoff": ["--plugin-tcp=fast",
                                          "--plugin-tcp-peek=discard"],
                "plugin-udp-slirp": ["--plugin-tcp=fast", "--plugin-udp=slirp"],
                "plugin-ports": ["--plugin-tcp=fast"],
                "plugin-ports-ref": ["--plugin-tcp=fast"],
                "plugin-ports-builtin": ["--plugin-tcp=fast"]}
# Published ports through rootlesskit (issue 38): the fast path with each
# port driver, the container's iperf3 and rknp-udp-rr behind `-p`, clients
# on the host's loopback and on a test host a veth away (PUB_NS, dialing
# the host's end PUB_IP[0]). plugin-ports-ref is plugin-ports with --ref-lib.
# builtin's copy runs in rootlesskit's parent (Go io.Copy: splice between
# the host's socket and one rootlesskit's child connected in the child's
# network and passed over a socketpair), so the parent's CPU is both's.
PORT_DRIVERS = {"plugin-ports": "plugin", "plugin-ports-ref": "plugin",
                "plugin-ports-builtin": "builtin"}
PUB_NS = "rknpb-p"
PUB_IP = ("10.199.1.1", "10.199.1.2")
# Drivers whose flags an older rootlesskit may not have: tried once before
# the run (probe_flags), and listed as unsupported if rootlesskit refuses.
PROBED = ("plugin-udp-slirp",)
# Stack helper processes by driver (None: the stack is in rootlesskit itself).
HELPERS = {"slirp4netns": ("slirp4netns",),
           # comm is cut at 15 characters; exe is matched by basename too
           "rknp-slirp4netns": ("rknp-slirp4netns", "rknp-slirp4netn"),
           "pasta": ("pasta", "passt", "pasta.avx2", "passt.avx2")}

# Rootless Podman's `--network pasta` with the real pasta or rknp-pasta.
PODMAN_TARGETS = ("podman-real", "podman-rknp", "podman-real-wan", "podman-rknp-wan")

# The container's ports behind the published-port tests' `podman run -p`.
PUB_TCP_PORT, PUB_UDP_PORT = 5201, 7007

VETH_NS = ("rknpb-a", "rknpb-b")
VETH_IP = ("10.199.0.1", "10.199.0.2")


class Target:
    kind = "driver"
    server_prefix = ()          # how to run servers (e.g. ip netns exec)
    server_addr = "127.0.0.1"   # where servers listen
    dial = None                 # address the agent connects to
    gateway = ""                # expected default gateway inside ("" = skip)
    parent_name = None          # process whose CPU/RSS is the stack's
    helpers = ()
    skip_tests = ()             # session tests this target leaves out
    # Published-port tests: {"lo"|"remote": (client prefix, address it
    # dials)}, None without them; publish_ports = (TCP, UDP) host ports,
    # set by the session before wrap.
    publish = None
    publish_ports = None

    def __init__(self, name):
        self.name = name

    def setup(self, mtu):
        pass

    def teardown(self):
        pass

    def wrap(self, user, mtu, agent_argv):
        raise NotImplementedError


class RootlesskitDriver(Target):
    def __init__(self, name, rootlesskit, plugin_lib):
        super().__init__(name)
        self.rk = rootlesskit
        self.plugin_lib = plugin_lib
        self.dial = self.gateway = GATEWAY[name]
        self.parent_name = "rootlesskit"
        self.helpers = HELPERS.get(name, ())
        self.port_driver = PORT_DRIVERS.get(name)
        if self.port_driver:
            self.publish = {"lo": ((), "127.0.0.1"),
                            "remote": (("ip", "netns", "exec", PUB_NS), PUB_IP[0])}

    def setup(self, mtu):
        if self.port_driver:
            pub_host_setup(mtu)

    def teardown(self):
        if self.port_driver:
            pub_host_teardown()

    def wrap(self, user, mtu, agent_argv):
        net = ["--net=" + self.name]
        if self.name in PLUGIN_FLAGS:
            # Both TCP paths by name, whatever the plugin's default (the
            # fast path since rknp 1.3).
            net = (["--net=plugin", "--net-plugin=" + self.plugin_lib] +
                   PLUGIN_FLAGS[self.name])
        if self.port_driver:
            net += ["--port-driver=" + self.port_driver] + publish_flags(
                self.port_driver, self.publish_ports)
        return (["runuser", "-u", user, "--", self.rk] + net +
                ["--mtu=%d" % mtu, "--"] + agent_argv)


def publish_flags(port_driver, ports):
    """rootlesskit's -p flags: the container's TCP and UDP ports on the
    host's 127.0.0.1 and on its end of the test host's veth, the same host
    port on both. builtin is told to dial the child's 127.0.0.1: without a
    child IP it dials the parent IP itself inside the child's network."""
    tcp, udp = ports
    child = "127.0.0.1:" if port_driver == "builtin" else ""
    flags = []
    for proto, host, port in (("tcp", tcp, PUB_TCP_PORT), ("udp", udp, PUB_UDP_PORT)):
        flags += ["-p", "127.0.0.1:%d:%d/%s" % (host, port, proto),
                  "-p", "%s:%d:%s%d/%s" % (PUB_IP[0], host, child, port, proto)]
    return flags


def pub_host_teardown():
    """Removes the pair, then the netns: a deleted netns frees its veth
    end later, so the host's end would still be there for the next session."""
    for cmd in (["ip", "link", "del", "rknpp0"], ["ip", "netns", "del", PUB_NS]):
        subprocess.run(cmd, stderr=subprocess.DEVNULL)


def pub_host_setup(mtu):
    """The published-port tests' test host: netns PUB_NS joined to the
    host's own network by a veth pair (host end PUB_IP[0], test host
    PUB_IP[1], /24), both ends at the session's MTU."""
    pub_host_teardown()
    sh("ip", "netns", "add", PUB_NS)
    sh("ip", "link", "add", "rknpp0", "mtu", str(mtu), "type", "veth",
       "peer", "name", "rknpp1", "mtu", str(mtu), "netns", PUB_NS)
    sh("ip", "addr", "add", PUB_IP[0] + "/24", "dev", "rknpp0")
    sh("ip", "link", "set", "rknpp0", "up")
    sh("ip", "-n", PUB_NS, "link", "set", "lo", "up")
    sh("ip", "-n", PUB_NS, "addr", "add", PUB_IP[1] + "/24", "dev", "rknpp1")
    sh("ip", "-n", PUB_NS, "link", "set", "rknpp1", "up")


class StockRootlesskitCompat(Target):
    """rknp-slirp4netns behind stock rootlesskit (Debian's): the route of
    users who keep their rootlesskit, `--net=slirp4netns
    --slirp4netns-binary=rknp-slirp4netns` (no sandbox or seccomp, as the
    slirp4netns driver is run here)."""

    def __init__(self, rootlesskit, binary):
        super().__init__("rknp-slirp4netns")
        self.rk = rootlesskit
        self.binary = binary
        self.dial = self.gateway = GATEWAY[self.name]
        self.parent_name = "rootlesskit"
        self.helpers = HELPERS[self.name]

    def wrap(self, user, mtu, agent_argv):
        return (["runuser", "-u", user, "--", self.rk, "--net=slirp4netns",
                 "--slirp4netns-binary=" + self.binary, "--mtu=%d" % mtu, "--"]
                + agent_argv)


class HarnessPlugin(Target):
    """The plugin through build/bin/rknp-harness (no rootlesskit yet)."""

    def __init__(self, harness):
        super().__init__("plugin")
        self.harness = harness
        self.dial = self.gateway = "10.0.2.2"
        self.parent_name = "rknp-harness"

    def wrap(self, user, mtu, agent_argv):
        return ["runuser", "-u", user, "--", self.harness, "--mtu", str(mtu),
                "--"] + agent_argv


class Loopback(Target):
    """Client and server both on the host's 127.0.0.1 (lo, MTU 65536)."""
    kind = "reference"

    def __init__(self):
        super().__init__("loopback")
        self.dial = "127.0.0.1"

    def wrap(self, user, mtu, agent_argv):
        return ["runuser", "-u", user, "--"] + agent_argv


def sh(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


class Veth(Target):
    """Two rootful netns joined by a veth pair: the kernel's own limit."""
    kind = "reference"

    def __init__(self):
        super().__init__("veth")
        self.dial = VETH_IP[1]
        self.server_addr = VETH_IP[1]
        self.server_prefix = ("ip", "netns", "exec", VETH_NS[1])

    def setup(self, mtu):
        self.teardown()
        a, b = VETH_NS
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
        sh("ip", "link", "add", "rknpb0", "netns", a, "type", "veth",
           "peer", "name", "rknpb1", "netns", b)
        for ns, dev, ip in ((a, "rknpb0", VETH_IP[0]), (b, "rknpb1", VETH_IP[1])):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", dev, "mtu", str(mtu), "up")
            sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", dev)

    def teardown(self):
        for ns in VETH_NS:  # deleting a netns deletes its veth end
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)

    def wrap(self, user, mtu, agent_argv):
        return ["ip", "netns", "exec", VETH_NS[0],
                "runuser", "-u", user, "--"] + agent_argv


class PodmanPasta(Target):
    """A rootless Podman 6.1 container with `--network pasta` inside the
    Debian sid tree (tests/bench/podman.sh), with the tree's pasta
    (podman-real) or rknp-pasta (podman-rknp) found as `pasta` through
    containers.conf's helper_binaries_dir. The servers run on the sid
    world's test host (a veth away, also the world's gateway, which pasta
    copies into the container). The -wan twins' servers run on the WAN
    bed's test host (40 ms away), reached through that gateway. With
    BENCH_PODMAN_WORLD (the host's address on the veth), the container
    publishes ports for the published-port tests (not the -wan twins).
    podman_env:
    BENCH_PODMAN_* as tests/bench/podman_inside.sh exports them."""

    def __init__(self, name, podman_env):
        super().__init__(name)
        self.env = podman_env
        self.engine = name.split("-")[1]
        where = "WAN" if name.endswith("-wan") else "REMOTE"
        self.dial = self.server_addr = podman_env["BENCH_PODMAN_" + where]
        self.server_prefix = ("nsenter", "--net=" + podman_env["BENCH_PODMAN_%s_NS" % where])
        self.gateway = podman_env["BENCH_PODMAN_REMOTE"]
        if where == "WAN":  # 4000 connections 40 ms away outlast the agent's bound
            self.skip_tests = ("idle_open", "rr_idle", "idle_close")
        elif "BENCH_PODMAN_WORLD" in podman_env:
            # Clients of the published ports: on the host's loopback, and
            # on the test host dialing the host's address on their veth.
            self.publish = {"lo": ((), "127.0.0.1"),
                            "remote": (self.server_prefix, podman_env["BENCH_PODMAN_WORLD"])}
        self.helpers = HELPERS["pasta"] + ("rknp-pasta",)

    def wrap(self, user, mtu, agent_argv):
        e = self.env
        home = e["BENCH_PODMAN_HOME"]
        pub = []
        if self.publish:
            pub = ["-p", "%d:%d" % (self.publish_ports[0], PUB_TCP_PORT),
                   "-p", "%d:%d/udp" % (self.publish_ports[1], PUB_UDP_PORT)]
            if e.get("BENCH_PODMAN_UDP_RR"):  # the container's rknp-udp-rr server
                pub += ["-v", "%s:%s:ro" % (e["BENCH_PODMAN_UDP_RR"], e["BENCH_PODMAN_UDP_RR"])]
        return (["setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups",
                 "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home,
                 "XDG_RUNTIME_DIR=" + e["BENCH_PODMAN_RUNTIME_DIR"], "LANG=C.UTF-8",
                 "CONTAINERS_CONF_OVERRIDE=%s/engine-%s.conf" % (home, self.engine),
                 "podman", "run", "-i", "--rm", "--network", "pasta:--mtu,%d" % mtu,
                 "-v", "%s:%s:ro" % (e["BENCH_PODMAN_TESTS"], e["BENCH_PODMAN_TESTS"])] +
                pub + [e["BENCH_PODMAN_IMAGE"]] + agent_argv)


def supported_nets(rootlesskit):
    """Network drivers the rootlesskit binary lists in --help."""
    try:
        out = subprocess.run([rootlesskit, "--help"], capture_output=True,
                             text=True, timeout=20).stdout
    except OSError:
        return set()
    for line in out.splitlines():
        if line.strip().startswith("--net "):
            inner = line[line.find("[") + 1:line.find("]")]
            return {w.split("(")[0].strip() for w in inner.split(",")}
    return set()


def probe_flags(rootlesskit, plugin_lib, name, user):
    """None if rootlesskit starts the plugin with name's flags (running
    `true` inside), else why not (the last line rootlesskit printed)."""
    argv = ([rootlesskit, "--net=plugin", "--net-plugin=" + plugin_lib] +
            PLUGIN_FLAGS[name] + ["--", "true"])
    if user:
        argv = ["runuser", "-u", user, "--"] + argv
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "%s: %s" % (type(e).__name__, e)
    if p.returncode == 0:
        return None
    # The error line, not the usage text an unknown flag also prints.
    lines = [ln.strip() for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower() or "incorrect" in ln.lower()]
    why = (errs or lines or [""])[-1]
    return "rootlesskit %s exits %d: %s" % (" ".join(PLUGIN_FLAGS[name]),
                                           p.returncode, why)


def make_targets(names, rootlesskit, plugin_lib, harness, log,
                 stock_rootlesskit=None, s4n_binary=None, user=None,
                 unsupported=None, ref_lib=None):
    """Builds the Target list; logs and skips what this machine cannot run.
    Drivers this rootlesskit refuses (PROBED) go to unsupported {name: why}.
    plugin-fast-ref and plugin-ports-ref run with ref_lib instead of plugin_lib."""
    nets = supported_nets(rootlesskit) if rootlesskit else set()
    out = []
    for n in names:
        if n in PROBED and "plugin" in nets:
            why = probe_flags(rootlesskit, plugin_lib, n, user)
            if why:
                log("skipping %s: unsupported: %s" % (n, why))
                if unsupported is not None:
                    unsupported[n] = why
                continue
        if n == "rknp-slirp4netns":
            if stock_rootlesskit and s4n_binary:
                out.append(StockRootlesskitCompat(stock_rootlesskit, s4n_binary))
            else:
                log("skipping %s: needs --stock-rootlesskit and --s4n-binary"
                    " (found: %s, %s)" % (n, stock_rootlesskit, s4n_binary))
        elif n.endswith("-ref") and not ref_lib:
            log("skipping %s: needs --ref-lib (the library to compare with)" % n)
        elif n in PODMAN_TARGETS:
            env = {k: v for k, v in os.environ.items() if k.startswith("BENCH_PODMAN_")}
            if "BENCH_PODMAN_IMAGE" in env and (
                    not n.endswith("-wan") or "BENCH_PODMAN_WAN" in env):
                out.append(PodmanPasta(n, env))
            else:
                log("skipping %s: runs inside the sid tree (tests/bench/podman.sh)" % n)
        elif n == "loopback":
            out.append(Loopback())
        elif n == "veth":
            out.append(Veth())
        elif n in nets or (n in PLUGIN_FLAGS and "plugin" in nets):
            lib = ref_lib if n.endswith("-ref") else plugin_lib
            out.append(RootlesskitDriver(n, rootlesskit, lib))
        elif n == "plugin" and harness:
            log("rootlesskit %s has no --net=plugin: plugin runs via %s"
                % (rootlesskit, harness))
            out.append(HarnessPlugin(harness))
        else:
            log("skipping %s: not supported by %s" % (n, rootlesskit))
    return out
