#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Helper of compat_pasta.sh: rknp-pasta run the way Podman runs pasta.

    unshare -rm compat_pasta_helper.py podman BINARY DIR WWW HOST_PORT \
        LAN_PORT DNS_QUERY DNS_NAME

Run as the unprivileged test user under `unshare -rm` (root of a user
namespace with its own mount namespace, as Podman's rootless user
namespace is), in compat_pasta.sh's world netns. Creates a network
namespace bound to DIR/netns (as Podman's netns files are), runs BINARY
with Podman 6.1's argument list, and prints one "key=value" line per
observation:

    exit, returned_in (seconds until the command returned *and* its
    stdout/stderr reached EOF), output, pid_comm, addr/route lines of the
    namespace, neighbour_sha/outside_sha/host_sha (WWW/file fetched from
    inside from a LAN host, a host behind the gateway and the host itself
    at --map-guest-addr, all on LAN_PORT), dns (DNS_NAME resolved inside
    through --dns-forward by DNS_QUERY), sha (of WWW/file fetched from the
    host's 127.0.0.1:HOST_PORT, served inside on port 80),
    exited_after_delete (the background process gone within 5 s of the
    netns file's unmount and removal).

    unshare -rm compat_pasta_helper.py podman-pesto BINARY PESTO DIR WWW \
        TCP_PORT UDP_PORT BUSY_PORT

Podman 6's rootless network namespace with rootless_port_forwarder=
"pasta", likewise: BINARY with its -c socket (DIR/pasta.sock) and no
ports, then PESTO --add/--delete -t 0.0.0.0/PORT -t [::]/PORT SOCK (and
-u) as Podman runs it, with WWW served inside on TCP_PORT and a UDP echo
on UDP_PORT. Prints exit, output, one "NAME=RC OUTPUT" line per pesto run
(add, add_udp, again, busy: a port the helper holds, delete, delete_udp,
delete_again), sha4/sha6 (WWW/file through 127.0.0.1 and [::1] while
forwarded, and after_sha4 once deleted), udp4/udp6/after_udp (the
echo's view of the client, "" without a reply) and mismatch (rknp-pasta's
reply to a request in protocol version 2).

    unshare -rm compat_pasta_helper.py podman-bridge BINARY PESTO DIR WWW \
        TCP_PORT PEER_PORT
    unshare -rm compat_pasta_helper.py podman-bridge6 BINARY PESTO DIR WWW \
        TCP_PORT PEER_PORT

Podman 6's bridge network in that namespace with pasta as the port
forwarder: BINARY with -c as above; inside its namespace a second one
(the container) on a veth, 10.89.0.2/24 behind the namespace's
10.89.0.1 (forwarding on, as netavark sets it), serving WWW on port
8000 and peer-echo on 8001 (TCP and UDP; servers_up: both listen).
Then, as Podman 6.1 does,
PESTO --add -t 0.0.0.0/TCP_PORT:10.89.0.2/8000 (and PEER_PORT to 8001,
-t and -u). Prints exit, add (the pesto run), sha (WWW/file through
127.0.0.1:TCP_PORT), tcp_peer/udp_peer (what the container saw of a
loopback client), "ready" and waits (60 s at most) for DIR/done while the
caller asks from elsewhere, then delete and after_sha/after_udp (nothing
once deleted). podman-bridge6: the same over IPv6, a dual-stack bridge's
IPv6 side: the container at fd00:aaaa::2/64 behind fd00:aaaa::1, PESTO
--add -t [::]/TCP_PORT:[fd00:aaaa::2]/8000 ..., the clients on ::1
(rknp-pasta with --map-host-loopback fd19::99, where they come from).

    unshare -rm compat_pasta_helper.py dns6 BINARY DIR DNS_QUERY DNS_NAME

rknp-pasta in pasta's IPv6 model with --dns-forward fd99::53: prints exit,
output, dns6 (DNS_NAME resolved from inside through fd99::53 by
DNS_QUERY) and exited_after_delete.

    compat_pasta_helper.py ask HOST PORT [UDP_PORT [SRC]]
    compat_pasta_helper.py peer-echo PORT DONE_FILE [BIND_ADDRESS]

The peer address a TCP and a UDP server see (peer-echo, on PORT of
BIND_ADDRESS, default 0.0.0.0, until DONE_FILE exists), as ask (from SRC
if given) prints it (tcp=, udp=).

    compat_pasta_helper.py lo-echo TCP_PORT UDP_PORT DONE_FILE
    compat_pasta_helper.py lo-client TCP_PORT UDP_PORT

-T/-U: lo-echo serves on the host's 127.0.0.1 and ::1 until DONE_FILE
exists: a TCP connection's bytes read to end of file are answered with
their sha256 and then themselves reversed; a datagram with itself
reversed. lo-client, inside the namespace, sends 1 MiB of random bytes
over two TCP connections in turn and three datagrams, to 127.0.0.1 and
to ::1 at the namespace's ports, and prints tcp4_1 tcp4_2 udp4 tcp6_1
tcp6_2 udp6 = ok or what went wrong.
"""
import hashlib
import os
import select
import socket
import subprocess
import sys
import time
import urllib.request


def wait_for(cond, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def fetch_sha(url, prefix=()):
    """sha256 of url's body fetched by a python3 run under prefix ("" on failure)."""
    code = ("import hashlib,sys,urllib.request\n"
            "print(hashlib.sha256(urllib.request.urlopen(sys.argv[1], timeout=10).read())"
            ".hexdigest())")
    p = subprocess.run(list(prefix) + [sys.executable, "-c", code, url], capture_output=True,
                       text=True, timeout=30)
    return p.stdout.strip()


def ip_lines(inside, *args):
    """The lines `ip ARGS` prints inside the namespace."""
    return subprocess.run(inside + ["ip", *args], capture_output=True,
                          text=True).stdout.splitlines()


def netns_file(workdir):
    """A new network namespace bound to workdir/netns, as Podman's are."""
    nsfile = os.path.join(workdir, "netns")
    holder = subprocess.Popen(["unshare", "-n", "sleep", "600"])
    mine = os.readlink("/proc/self/ns/net")
    wait_for(lambda: os.readlink(f"/proc/{holder.pid}/ns/net") != mine, 5)
    open(nsfile, "w").close()
    subprocess.check_call(["mount", "--bind", f"/proc/{holder.pid}/ns/net", nsfile])
    holder.kill()
    holder.wait()
    return nsfile


def podman(binary, workdir, www, host_port, lan_port, dns_query, dns_name):
    """Podman 6.1's argument list (createPastaArgs) against a netns file, in
    a world whose upstream is 198.19.0.5/24 via 198.19.0.1 and fd19::5/64
    via fe80::1 (LAN hosts .1 and .7, fd19::1 and fd19::7, an outside host
    203.0.113.9 and fd13::9 behind the gateway, the resolver at
    198.19.0.1). A second --map-guest-addr, fd99::2, as a user's
    pasta_options would add it, maps the host for IPv6."""
    nsfile = netns_file(workdir)
    # A service on the host itself, for host.containers.internal.
    host_srv = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "::",
                                 "--directory", www, str(lan_port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    pid_file = os.path.join(workdir, "pasta.pid")
    argv = [binary, "--config-net", "-t", f"{host_port}-{host_port}:80-80",
            "--dns-forward", "169.254.1.1", "-u", "none", "-T", "none", "-U", "none",
            "--no-map-gw", "--quiet", "--pid", pid_file, "--map-guest-addr", "fd99::2",
            "--map-guest-addr", "169.254.1.2", "--netns", nsfile]
    t0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, timeout=60)
    print(f"exit={p.returncode}")
    print(f"returned_in={time.monotonic() - t0:.1f}")
    print(f"output={p.stdout.decode(errors='replace')!r}")
    pid = int(open(pid_file).read().strip() or 0)
    try:
        comm = open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        comm = "(gone)"
    print(f"pid_comm={comm}")
    inside = ["nsenter", f"--net={nsfile}"]
    for line in ip_lines(inside, "-o", "-4", "addr"):
        print(f"addr={' '.join(line.split())}")
    for line in ip_lines(inside, "route"):
        print(f"route={line}")
    addr6 = ip_lines(inside, "-o", "-6", "addr", "show", "scope", "global")
    for line in addr6:
        print(f"addr6={' '.join(line.split())}")
    print(f"addr6_count={len(addr6)}")
    for line in ip_lines(inside, "-6", "route", "show", "default"):
        print(f"route6={line}")
    # Out from the container: a LAN neighbour (ARP answered, not libslirp's
    # loopback alias), a host behind the gateway, the host itself through
    # --map-guest-addr, DNS through --dns-forward to the host's resolver.
    print(f"neighbour_sha={fetch_sha(f'http://198.19.0.7:{lan_port}/file', inside)}")
    print(f"outside_sha={fetch_sha(f'http://203.0.113.9:{lan_port}/file', inside)}")
    print(f"host_sha={fetch_sha(f'http://169.254.1.2:{lan_port}/file', inside)}")
    # IPv6 in pasta's model: NDP answered for the neighbour and the
    # link-local gateway, the traffic carried to the real hosts.
    print(f"neighbour6_sha={fetch_sha(f'http://[fd19::7]:{lan_port}/file', inside)}")
    print(f"outside6_sha={fetch_sha(f'http://[fd13::9]:{lan_port}/file', inside)}")
    print(f"host6_sha={fetch_sha(f'http://[fd99::2]:{lan_port}/file', inside)}")
    q = subprocess.run(inside + [sys.executable, dns_query, "169.254.1.1", dns_name],
                       capture_output=True, text=True, timeout=30)
    print(f"dns={q.stdout.strip()}")
    host_srv.kill()
    host_srv.wait()

    server = subprocess.Popen(inside + [sys.executable, "-m", "http.server", "--bind",
                                        "0.0.0.0", "--directory", www, "80"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sha = ""
    end = time.monotonic() + 10
    while time.monotonic() < end and not sha:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{host_port}/file",
                                        timeout=10) as r:
                sha = hashlib.sha256(r.read()).hexdigest()
        except OSError:
            time.sleep(0.2)
    print(f"sha={sha}")
    server.kill()
    server.wait()

    subprocess.check_call(["umount", nsfile])
    os.unlink(nsfile)
    gone = wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 5)
    print(f"exited_after_delete={gone}")


def ipv6_only(binary, workdir, lan_port):
    """-6 in the world of podman(): the host's IPv6 address, prefix and
    link-local gateway, no IPv4 at all; IPv6 hosts reached, IPv4 not."""
    nsfile = netns_file(workdir)
    pid_file = os.path.join(workdir, "pasta6.pid")
    argv = [binary, "--config-net", "-6", "-t", "none", "-u", "none", "--quiet",
            "--pid", pid_file, "--netns", nsfile]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, timeout=60)
    print(f"exit={p.returncode}")
    print(f"output={p.stdout.decode(errors='replace')!r}")
    pid = int(open(pid_file).read().strip() or 0)
    inside = ["nsenter", f"--net={nsfile}"]
    addr4 = ip_lines(inside, "-o", "-4", "addr", "show", "scope", "global")
    print(f"addr4_count={len(addr4)}")
    print(f"route4_count={len(ip_lines(inside, '-4', 'route', 'show', 'default'))}")
    for line in ip_lines(inside, "-o", "-6", "addr", "show", "scope", "global"):
        print(f"addr6={' '.join(line.split())}")
    for line in ip_lines(inside, "-6", "route", "show", "default"):
        print(f"route6={line}")
    print(f"neighbour6_sha={fetch_sha(f'http://[fd19::7]:{lan_port}/file', inside)}")
    print(f"outside6_sha={fetch_sha(f'http://[fd13::9]:{lan_port}/file', inside)}")
    print(f"neighbour4_sha={fetch_sha(f'http://198.19.0.7:{lan_port}/file', inside) or 'none'}")
    subprocess.check_call(["umount", nsfile])
    os.unlink(nsfile)
    print(f"exited_after_delete={wait_for(lambda: not os.path.exists(f'/proc/{pid}'), 5)}")


def http_sha(url, seconds):
    """sha256 of url's body, retried for a few seconds ("" if never)."""
    end = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return hashlib.sha256(r.read()).hexdigest()
        except OSError:
            if time.monotonic() >= end:
                return ""
            time.sleep(0.2)


def rootless_netns(binary, workdir, extra=()):
    """Podman 6's rootless netns: BINARY with its -c socket and no ports, as
    Podman starts it with rootless_port_forwarder="pasta" (and EXTRA, as a
    user's pasta_options); prints exit and output, returns the netns file,
    the socket and the --pid file."""
    nsfile = netns_file(workdir)
    sock = os.path.join(workdir, "pasta.sock")
    pid_file = os.path.join(workdir, "rootless-netns-conn.pid")
    argv = [binary, "--config-net", *extra, "--pid", pid_file, "-c", sock, "--dns-forward",
            "169.254.1.1", "-t", "none", "-u", "none", "-T", "none", "-U", "none",
            "--no-map-gw", "--quiet", "--netns", nsfile, "--map-guest-addr", "169.254.1.2"]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, timeout=60)
    print(f"exit={p.returncode}")
    print(f"output={p.stdout.decode(errors='replace')!r}", flush=True)
    return nsfile, sock, pid_file


def end_rootless_netns(done_file, procs, nsfile, pid_file):
    """Stops the servers (done_file, then procs killed), deletes the netns
    file and prints whether the pasta of --pid exited within 5 s."""
    open(done_file, "w").close()
    for proc in procs:
        proc.kill()
        proc.wait()
    pid = int(open(pid_file).read().strip() or 0)
    subprocess.check_call(["umount", nsfile])
    os.unlink(nsfile)
    print(f"exited_after_delete={wait_for(lambda: not os.path.exists(f'/proc/{pid}'), 5)}")


def podman_pesto(binary, pesto, workdir, www, tcp_port, udp_port, busy_port):
    """Podman 6's rootless netns: rknp-pasta with -c, ports through pesto."""
    nsfile, sock, pid_file = rootless_netns(binary, workdir)
    inside = ["nsenter", f"--net={nsfile}"]
    done_file = os.path.join(workdir, "echo-done")
    servers = [
        subprocess.Popen(inside + [sys.executable, "-m", "http.server", "--bind", "0.0.0.0",
                                   "--directory", www, str(tcp_port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(inside + [sys.executable, __file__, "peer-echo", str(udp_port),
                                   done_file]),
    ]
    busy = socket.socket()
    busy.bind(("127.0.0.1", busy_port))
    busy.listen()

    def run_pesto(name, *args):
        r = subprocess.run([pesto, *args, sock], capture_output=True, text=True, timeout=30)
        print(f"{name}={r.returncode} {(r.stdout + r.stderr).strip()}")

    run_pesto("add", "--add", "-t", f"0.0.0.0/{tcp_port}", "-t", f"[::]/{tcp_port}")
    run_pesto("add_udp", "--add", "-u", f"0.0.0.0/{udp_port}", "-u", f"[::]/{udp_port}")
    print(f"sha4={http_sha(f'http://127.0.0.1:{tcp_port}/file', 10)}")
    print(f"sha6={http_sha(f'http://[::1]:{tcp_port}/file', 10)}")
    print(f"udp4={udp_peer('127.0.0.1', udp_port, 10)}")
    print(f"udp6={udp_peer('::1', udp_port, 10)}")
    run_pesto("again", "--add", "-t", f"0.0.0.0/{tcp_port}")
    run_pesto("busy", "--add", "-t", f"127.0.0.1/{busy_port}")
    run_pesto("delete", "--delete", "-t", f"0.0.0.0/{tcp_port}", "-t", f"[::]/{tcp_port}")
    run_pesto("delete_udp", "--delete", "-u", f"0.0.0.0/{udp_port}", "-u", f"[::]/{udp_port}")
    print(f"after_sha4={http_sha(f'http://127.0.0.1:{tcp_port}/file', 0)}")
    print(f"after_udp={udp_peer('127.0.0.1', udp_port, 1)}")
    run_pesto("delete_again", "--delete", "-t", f"0.0.0.0/{tcp_port}")
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(10)
        c.connect(sock)
        c.sendall(b"rknp-pesto 2\nadd tcp 0.0.0.0/1\nend\n")
        c.shutdown(socket.SHUT_WR)
        print(f"mismatch={c.makefile('rb').read().decode(errors='replace')!r}")
    busy.close()
    end_rootless_netns(done_file, servers, nsfile, pid_file)


# The container's side of podman_bridge: (bridge, container, prefix
# length, forwarding sysctl, rknp-pasta's extra options, the host's
# loopback) for IPv4 and for IPv6 (a dual-stack bridge's IPv6 side). IPv6
# loopback clients need a routable address to come from: the namespace's
# gateway is link-local there, so --map-host-loopback names one.
BRIDGE = {
    False: ("10.89.0.1", "10.89.0.2", "24", "net.ipv4.ip_forward=1", (), "127.0.0.1"),
    True: ("fd00:aaaa::1", "fd00:aaaa::2", "64", "net.ipv6.conf.all.forwarding=1",
           ("--map-host-loopback", "fd19::99"), "::1"),
}


def podman_bridge(binary, pesto, workdir, www, tcp_port, peer_port, v6=False):
    """Podman 6's bridge network behind rknp-pasta's namespace, pesto mode."""
    bridge, ctr_addr, plen, forwarding, extra, lo = BRIDGE[v6]
    nsfile, sock, pid_file = rootless_netns(binary, workdir, extra)
    inside = ["nsenter", f"--net={nsfile}"]
    # The container: a netns of its own on a veth, as netavark makes it.
    ctr = subprocess.Popen(inside + ["unshare", "-n", "sleep", "600"])
    wait_for(lambda: os.readlink(f"/proc/{ctr.pid}/ns/net") !=
             os.readlink("/proc/self/ns/net"), 5)
    time.sleep(0.2)
    in_ctr = ["nsenter", f"--net=/proc/{ctr.pid}/ns/net"]
    for cmd in (inside + ["ip", "link", "add", "rbr0", "type", "veth", "peer", "name", "eth0",
                          "netns", str(ctr.pid)],
                inside + ["ip", "addr", "add", f"{bridge}/{plen}", "dev", "rbr0", "nodad"],
                inside + ["ip", "link", "set", "rbr0", "up"],
                inside + ["sysctl", "-qw", forwarding],
                in_ctr + ["ip", "addr", "add", f"{ctr_addr}/{plen}", "dev", "eth0", "nodad"],
                in_ctr + ["ip", "link", "set", "eth0", "up"],
                in_ctr + ["ip", "link", "set", "lo", "up"],
                in_ctr + ["ip", "route", "add", "default", "via", bridge]):
        subprocess.check_call(cmd)
    done_file = os.path.join(workdir, "echo-done")
    servers = [
        subprocess.Popen(in_ctr + [sys.executable, "-m", "http.server", "--bind", ctr_addr,
                                   "--directory", www, "8000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(in_ctr + [sys.executable, __file__, "peer-echo", "8001", done_file,
                                   "::" if v6 else "0.0.0.0"]),
    ]

    def run_pesto(name, *args):
        r = subprocess.run([pesto, *args, sock], capture_output=True, text=True, timeout=30)
        print(f"{name}={r.returncode} {(r.stdout + r.stderr).strip()}", flush=True)

    def listening():  # ports 8000 and 8001 (1F40, 1F41) in state 0A
        with open(f"/proc/{ctr.pid}/net/tcp6" if v6 else f"/proc/{ctr.pid}/net/tcp") as f:
            ports = {ln.split()[1][-4:] for ln in f.read().splitlines()[1:]
                     if ln.split()[3] == "0A"}
        return {"1F40", "1F41"} <= ports

    # Podman publishes once the container runs; a loaded machine takes
    # seconds to start python.
    print(f"servers_up={wait_for(listening, 30)}")
    # Podman's pesto specs: [::]/P:[ADDR]/CP for IPv6.
    host_any, target = ("[::]", f"[{ctr_addr}]") if v6 else ("0.0.0.0", ctr_addr)
    run_pesto("add", "--add", "-t", f"{host_any}/{tcp_port}:{target}/8000",
              "-t", f"{host_any}/{peer_port}:{target}/8001",
              "-u", f"{host_any}/{peer_port}:{target}/8001")
    url = f"http://[{lo}]:{tcp_port}/file" if v6 else f"http://{lo}:{tcp_port}/file"
    print(f"sha={http_sha(url, 20)}", flush=True)
    tcp_seen = ""
    for _ in range(50):
        try:
            with socket.create_connection((lo, peer_port), timeout=2) as c:
                tcp_seen = c.makefile().readline().strip()
            break
        except OSError:
            time.sleep(0.2)
    print(f"tcp_peer={tcp_seen}")
    print(f"udp_peer={udp_peer(lo, peer_port, 10)}")
    print("ready", flush=True)
    wait_for(lambda: os.path.exists(os.path.join(workdir, "done")), 60)
    run_pesto("delete", "--delete", "-t", f"{host_any}/{tcp_port}:{target}/8000",
              "-t", f"{host_any}/{peer_port}:{target}/8001",
              "-u", f"{host_any}/{peer_port}:{target}/8001")
    print(f"after_sha={http_sha(url, 0)}")
    print(f"after_udp={udp_peer(lo, peer_port, 1)}")
    end_rootless_netns(done_file, servers + [ctr], nsfile, pid_file)


def dns6(binary, workdir, dns_query, dns_name):
    """rknp-pasta in pasta's IPv6 model with an IPv6 --dns-forward: the
    name resolved from inside through that address (the host's resolver,
    as its resolv.conf names it), printed as dns6; exit and
    exited_after_delete as for podman."""
    nsfile = netns_file(workdir)
    pid_file = os.path.join(workdir, "pasta.pid")
    argv = [binary, "--config-net", "--dns-forward", "fd99::53", "-t", "none", "-u", "none",
            "-T", "none", "-U", "none", "--quiet", "--pid", pid_file, "--netns", nsfile]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, timeout=60)
    print(f"exit={p.returncode}")
    print(f"output={p.stdout.decode(errors='replace')!r}")
    inside = ["nsenter", f"--net={nsfile}"]
    q = subprocess.run(inside + [sys.executable, dns_query, "fd99::53", dns_name],
                       capture_output=True, text=True, timeout=30)
    print(f"dns6={q.stdout.strip()}{q.stderr.strip()}")
    pid = int(open(pid_file).read().strip() or 0)
    subprocess.check_call(["umount", nsfile])
    os.unlink(nsfile)
    print(f"exited_after_delete={wait_for(lambda: not os.path.exists(f'/proc/{pid}'), 5)}")


def peer_echo(port, done_file, host="0.0.0.0"):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    tcp = socket.socket(family)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((host, port))
    tcp.listen()
    udp = socket.socket(family, socket.SOCK_DGRAM)
    udp.bind((host, port))
    end = time.monotonic() + 60
    while not os.path.exists(done_file) and time.monotonic() < end:
        ready, _, _ = select.select([tcp, udp], [], [], 0.1)
        if tcp in ready:
            c, addr = tcp.accept()
            c.sendall(addr[0].encode() + b"\n")
            c.close()
        if udp in ready:
            _, addr = udp.recvfrom(2048)
            udp.sendto(addr[0].encode(), addr)


def udp_peer(host, port, seconds, src=None):
    """What peer-echo on host:port says the client is ("" if no reply),
    asked from src if given."""
    end = time.monotonic() + seconds
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    while True:
        with socket.socket(family, socket.SOCK_DGRAM) as u:
            u.settimeout(0.5)
            if src:
                u.bind((src, 0))
            try:
                u.sendto(b"who", (host, port))
                return u.recvfrom(2048)[0].decode()
            except OSError:
                pass
        if time.monotonic() >= end:
            return ""
        time.sleep(0.2)


def ask(host, port, udp_port, src=None):
    end = time.monotonic() + 10
    tcp_seen = udp_seen = ""
    while time.monotonic() < end and not (tcp_seen and udp_seen):
        if not tcp_seen:
            try:
                with socket.create_connection((host, port), timeout=2,
                                              source_address=(src, 0) if src else None) as c:
                    tcp_seen = c.makefile().readline().strip()
            except OSError:
                pass
        if not udp_seen:
            udp_seen = udp_peer(host, udp_port, 0, src)
        if not (tcp_seen and udp_seen):
            time.sleep(0.2)
    print(f"tcp={tcp_seen}")
    print(f"udp={udp_seen}")


def recv_to_eof(conn):
    data = b""
    while True:
        b = conn.recv(65536)
        if not b:
            return data
        data += b


def lo_echo(tcp_port, udp_port, done_file):
    socks = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        t = socket.socket(family)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.bind((host, tcp_port))
        t.listen()
        u = socket.socket(family, socket.SOCK_DGRAM)
        u.bind((host, udp_port))
        socks += [t, u]
    end = time.monotonic() + 120
    while not os.path.exists(done_file) and time.monotonic() < end:
        ready, _, _ = select.select(socks, [], [], 0.1)
        for s in ready:
            if s.type == socket.SOCK_DGRAM:
                data, addr = s.recvfrom(65536)
                s.sendto(data[::-1], addr)
                continue
            c, _ = s.accept()
            with c:
                c.settimeout(10)
                data = recv_to_eof(c)
                c.sendall(hashlib.sha256(data).hexdigest().encode() + b"\n" + data[::-1])


def echo_verdict(data, back):
    """lo-echo's and peer-bytes' answer (after peer-bytes' first line):
    the sha256 of what arrived, a newline, the data reversed."""
    digest, _, rest = back.partition(b"\n")
    if digest.decode() != hashlib.sha256(data).hexdigest():
        return f"sent bytes differ ({len(back)} back)"
    if rest != data[::-1]:
        return f"received bytes differ ({len(rest)})"
    return "ok"


def lo_client(tcp_port, udp_port):
    for tag, host in (("4", "127.0.0.1"), ("6", "::1")):
        for n in (1, 2):
            data = os.urandom(1 << 20)
            verdict = "ok"
            try:
                with socket.create_connection((host, tcp_port), timeout=10) as c:
                    c.sendall(data)
                    c.shutdown(socket.SHUT_WR)
                    back = recv_to_eof(c)
                verdict = echo_verdict(data, back)
            except OSError as e:
                verdict = f"error {e}"
            print(f"tcp{tag}_{n}={verdict}")
        family = socket.AF_INET6 if tag == "6" else socket.AF_INET
        verdict = "ok"
        with socket.socket(family, socket.SOCK_DGRAM) as u:
            u.settimeout(3)
            try:
                for i in range(3):
                    msg = os.urandom(1000 + i)
                    u.sendto(msg, (host, udp_port))
                    if u.recvfrom(65536)[0] != msg[::-1]:
                        verdict = f"datagram {i} differs"
            except OSError as e:
                verdict = f"error {e}"
        print(f"udp{tag}={verdict}")


def peer_bytes(port, done_file):
    """On [::]:port, IPv4 too: each connection read to end of file, then
    answered with the client's address, the data's sha256 and the data
    reversed, one connection at a time."""
    t = socket.socket(socket.AF_INET6)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    t.bind(("::", port))
    t.listen()
    end = time.monotonic() + 120
    while not os.path.exists(done_file) and time.monotonic() < end:
        ready, _, _ = select.select([t], [], [], 0.1)
        if not ready:
            continue
        c, addr = t.accept()
        with c:
            c.settimeout(10)
            try:
                data = recv_to_eof(c)
                peer = addr[0].removeprefix("::ffff:")
                c.sendall(f"{peer}\n{hashlib.sha256(data).hexdigest()}\n".encode() + data[::-1])
            except OSError:
                pass


def bytes_client(host, port):
    """1 MiB to peer-bytes on host:port and back: peer= what the server
    saw, bytes= ok or what went wrong."""
    data = os.urandom(1 << 20)
    peer, verdict = "", "ok"
    try:
        with socket.create_connection((host, port), timeout=10) as c:
            c.sendall(data)
            c.shutdown(socket.SHUT_WR)
            back = recv_to_eof(c)
        peer, _, rest = back.partition(b"\n")
        peer = peer.decode()
        verdict = echo_verdict(data, rest)
    except OSError as e:
        verdict = f"error {e}"
    print(f"peer={peer}")
    print(f"bytes={verdict}")


def first_read(host, port):
    """Connects and reads: read= reset, eof, data or timeout."""
    try:
        with socket.create_connection((host, port), timeout=5) as c:
            c.settimeout(5)
            print("read=" + ("data" if c.recv(16) else "eof"))
    except ConnectionResetError:
        print("read=reset")
    except socket.timeout:
        print("read=timeout")
    except OSError as e:
        print(f"read=error {e}")


if __name__ == "__main__":
    if sys.argv[1] == "podman":
        podman(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),
               sys.argv[7], sys.argv[8])
    elif sys.argv[1] == "ipv6-only":
        ipv6_only(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "peer-echo":
        peer_echo(int(sys.argv[2]), sys.argv[3], *sys.argv[4:5])
    elif sys.argv[1] == "podman-pesto":
        podman_pesto(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]),
                     int(sys.argv[7]), int(sys.argv[8]))
    elif sys.argv[1] in ("podman-bridge", "podman-bridge6"):
        podman_bridge(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]),
                      int(sys.argv[7]), sys.argv[1] == "podman-bridge6")
    elif sys.argv[1] == "dns6":
        dns6(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif sys.argv[1] == "lo-echo":
        lo_echo(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "lo-client":
        lo_client(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "peer-bytes":
        peer_bytes(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "bytes-client":
        bytes_client(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "first-read":
        first_read(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "ask":
        ask(sys.argv[2], int(sys.argv[3]), int(sys.argv[4] if len(sys.argv) > 4 else sys.argv[3]),
            sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
