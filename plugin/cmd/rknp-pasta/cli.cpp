// SPDX-License-Identifier: Apache-2.0

// Command line of rknp-pasta (see cli.hpp).
#include "cli.hpp"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cmd/common/errors.hpp"
#include "cmd/common/version.hpp"

namespace pasta {

namespace {

using cmd::usage_error;

void usage(const char *argv0) {
    std::printf(
        "Usage: %s [OPTION]... PID\n"
        "       %s [OPTION]... --netns PATH|NAME\n"
        "pasta-compatible user-mode networking for an existing network\n"
        "namespace, on rknp (libslirp and rknp's TCP/UDP fast paths).\n\n"
        "  -d, --debug             be verbose\n"
        "      --trace             the same as --debug\n"
        "  -q, --quiet             don't print informational messages\n"
        "  -f, --foreground        don't run in background\n"
        "  -e, --stderr            log to stderr too (until in background)\n"
        "  -l, --log-file PATH     log (only) to PATH\n"
        "  -h, --help              display this help message and exit\n"
        "      --version           show version and exit\n"
        "  -P, --pid FILE          write the background process's PID to FILE\n"
        "  -c, --conf-path PATH    take port changes from rknp-pesto on the\n"
        "                          unix socket PATH (mode 0600)\n"
        "  -I, --ns-ifname NAME    namespace interface name (default tap0)\n"
        "  -m, --mtu MTU           interface MTU, 68-65520 (default 65520)\n"
        "  -a, --address ADDR      namespace IPv4 or IPv6 address (default: the\n"
        "                          host's upstream interface's)\n"
        "  -n, --netmask MASK      IPv4 netmask, dot-decimal or bits (default:\n"
        "                          the host's, or the class of -a's address)\n"
        "  -g, --gateway ADDR      IPv4 or IPv6 gateway (default: the host's)\n"
        "      --dns-forward ADDR  forward DNS queries sent to ADDR to the\n"
        "                          host's first nameserver (once for IPv4,\n"
        "                          once for IPv6)\n"
        "      --map-guest-addr ADDR  ADDR reaches the host at the namespace's\n"
        "                          address (once for IPv4, once for IPv6);\n"
        "                          none: no such address\n"
        "      --map-host-loopback ADDR  ADDR reaches the host's loopback,\n"
        "                          besides the gateway (once for IPv4, once\n"
        "                          for IPv6); none: no such address\n"
        "  -o, --outbound ADDR     bind outbound sockets to ADDR\n"
        "      --ns-mac-addr ADDR  MAC address of the namespace interface\n"
        "      --no-map-gw         don't map the gateway address to the host's\n"
        "                          loopback: it is the host's gateway\n"
        "      --map-gw            map it (the default)\n"
        "  -4, --ipv4-only         IPv4 only (default: IPv6 too)\n"
        "  -6, --ipv6-only         IPv6 only (needs an IPv6 address and route\n"
        "                          on the host, or -a, and --config-net)\n"
        "      --config-net        configure the interface (address, route,\n"
        "                          link up); else it is left to DHCP/SLAAC\n"
        "      --no-dhcp           no DHCP server (the caller configures the\n"
        "                          interface, as rootlesskit 2.0-2.2 does)\n"
        "      --no-ra             no router advertisements (refused where\n"
        "                          rknp's fd00::/64 needs them)\n"
        "      --host-lo-to-ns-lo  with -t/-u auto, a port the namespace\n"
        "                          listens on only at its loopback is reached\n"
        "                          from the host's loopback, the client seen\n"
        "                          inside as from the namespace's loopback;\n"
        "                          with --splice, -t's loopback clients go to\n"
        "                          its loopback\n"
        "      --splice            (rknp's own) -t's loopback clients past the\n"
        "                          tap, seen inside at the namespace's own\n"
        "                          address, as pasta does by default; less CPU\n"
        "                          out of the namespace, but slower into it at\n"
        "                          MTU 65520 here (README)\n"
        "      --no-splice         -t's loopback clients through the stack,\n"
        "                          seen inside at the gateway (the default)\n"
        "  -t, --tcp-ports SPEC    TCP ports to forward to the namespace:\n"
        "                          none, auto, or [ADDR[%%IF]/]PORTS, PORTS a\n"
        "                          list of N, N-M, N:G, N-M:G-H, ~N, ~N-M;\n"
        "                          G may be ADDR/G or [ADDR6]/G, an address\n"
        "                          in the namespace (a bridge network's\n"
        "                          container)\n"
        "                          (default auto: what the namespace binds,\n"
        "                          rescanned every second)\n"
        "  -u, --udp-ports SPEC    the same for UDP\n"
        "  -T, --tcp-ns SPEC       TCP ports of the namespace's loopback to\n"
        "                          forward to the host's loopback: none, auto\n"
        "                          (what the host listens on at its loopback or\n"
        "                          any address, rescanned every second), or\n"
        "                          [127.0.0.1|::1/]PORTS as for -t (N:G listens\n"
        "                          on N inside, reaches G on the host); default\n"
        "                          none\n"
        "  -U, --udp-ns SPEC       the same for UDP\n"
        "      --userns PATH       user namespace to join (default: PID's)\n"
        "      --netns PATH|NAME   network namespace to join (NAME: /run/netns)\n"
        "      --netns-only        join only the network namespace\n"
        "      --no-netns-quit     don't exit when the namespace is deleted\n",
        argv0, argv0);
}

void version() {
    std::printf("rknp-pasta %s (pasta compatible, on rknp)\n",
                cmd::rknp_version());
    cmd::print_library_versions();
}

bool parse_unsigned(const char *s, unsigned long max, unsigned long &out) {
    char *end = nullptr;
    errno = 0;
    out = std::strtoul(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && *s != '-' && out <= max;
}

enum : int {
    kTrace = 1000,
    kVersion,
    kDnsForward,
    kNsMacAddr,
    kNoMapGw,
    kMapGw,
    kMapGuestAddr,
    kMapHostLoopback,
    kConfigNet,
    kNoDhcp,
    kNoRa,
    kHostLoToNsLo,
    kNoSplice,
    kSplice,
    kUserns,
    kNetns,
    kNetnsOnly,
    kNoNetnsQuit,
    kUnsupported, // pasta's, not honoured: refused by name
};

// pasta options rknp-pasta refuses by name (they exist in pasta, so an
// "unrecognized option" would mislead).
constexpr const char *kUnsupportedLong[] = {
    "log-size", "runas", "fd", "pcap", "mac-addr", "interface",
    "outbound-if4", "outbound-if6", "dns", "search", "dhcp-dns",
    "dhcp-search", "no-tcp", "no-udp", "no-icmp", "no-ndp",
    "no-dhcpv6", "socket", "socket-path",
    "splice-only", "freebind", "no-copy-routes", "no-copy-addrs",
};

} // namespace

Options parse_args(int argc, char *const argv[]) {
    std::vector<option> longopts = {
        {"debug", no_argument, nullptr, 'd'},
        {"trace", no_argument, nullptr, kTrace},
        {"quiet", no_argument, nullptr, 'q'},
        {"foreground", no_argument, nullptr, 'f'},
        {"stderr", no_argument, nullptr, 'e'},
        {"log-file", required_argument, nullptr, 'l'},
        {"help", no_argument, nullptr, 'h'},
        {"version", no_argument, nullptr, kVersion},
        {"pid", required_argument, nullptr, 'P'},
        {"conf-path", required_argument, nullptr, 'c'},
        {"ns-ifname", required_argument, nullptr, 'I'},
        {"mtu", required_argument, nullptr, 'm'},
        {"address", required_argument, nullptr, 'a'},
        {"netmask", required_argument, nullptr, 'n'},
        {"gateway", required_argument, nullptr, 'g'},
        {"outbound", required_argument, nullptr, 'o'},
        {"dns-forward", required_argument, nullptr, kDnsForward},
        {"ns-mac-addr", required_argument, nullptr, kNsMacAddr},
        {"no-map-gw", no_argument, nullptr, kNoMapGw},
        {"map-gw", no_argument, nullptr, kMapGw},
        {"map-guest-addr", required_argument, nullptr, kMapGuestAddr},
        {"map-host-loopback", required_argument, nullptr, kMapHostLoopback},
        {"ipv4-only", no_argument, nullptr, '4'},
        {"ipv6-only", no_argument, nullptr, '6'},
        {"config-net", no_argument, nullptr, kConfigNet},
        {"no-dhcp", no_argument, nullptr, kNoDhcp},
        {"no-ra", no_argument, nullptr, kNoRa},
        // rootlesskit probes it with --version and passes it on exit 0.
        {"host-lo-to-ns-lo", no_argument, nullptr, kHostLoToNsLo},
        {"no-splice", no_argument, nullptr, kNoSplice},
        {"splice", no_argument, nullptr, kSplice},
        {"tcp-ports", required_argument, nullptr, 't'},
        {"udp-ports", required_argument, nullptr, 'u'},
        {"tcp-ns", required_argument, nullptr, 'T'},
        {"udp-ns", required_argument, nullptr, 'U'},
        {"userns", required_argument, nullptr, kUserns},
        {"netns", required_argument, nullptr, kNetns},
        {"netns-only", no_argument, nullptr, kNetnsOnly},
        {"no-netns-quit", no_argument, nullptr, kNoNetnsQuit},
    };
    for (const char *name : kUnsupportedLong)
        longopts.push_back({name, optional_argument, nullptr, kUnsupported});
    longopts.push_back({nullptr, 0, nullptr, 0});

    Options o;
    unsigned long n = 0;
    int opt, index = -1;
    // Short options pasta has and rknp-pasta refuses: -F -p -M -i -D -S.
    const char *shorts = "dqfel:hP:c:I:m:a:n:g:o:4t:u:T:U:F:p:M:i:D:S:6";
    while ((opt = getopt_long(argc, argv, shorts, longopts.data(), &index)) != -1) {
        switch (opt) {
        case 'd':
        case kTrace:
            o.debug = true;
            break;
        case 'q':
            o.quiet = true;
            break;
        case 'f':
            o.foreground = true;
            break;
        case 'e':
            break; // stderr is where messages go until in background
        case 'l':
            o.log_file = optarg;
            break;
        case 'h':
            usage(argv[0]);
            std::exit(EXIT_SUCCESS);
        case kVersion:
            version();
            std::exit(EXIT_SUCCESS);
        case 'P':
            o.pid_file = optarg;
            break;
        case 'c':
            // Checked when bound: rootlesskit probes --conf-path=/dev/null
            // --version, which must exit 0.
            o.conf_path = optarg;
            break;
        case 'I':
            if (!*optarg || std::strlen(optarg) > 15 || std::strchr(optarg, '/'))
                usage_error(std::string("invalid interface name: ") + optarg);
            o.ifname = optarg;
            break;
        case 'm':
            if (!parse_unsigned(optarg, 65520, n) || n < 68)
                usage_error(std::string("invalid MTU: ") + optarg +
                            " (68-65520; 0, no MTU assignment, is not supported)");
            o.mtu = unsigned(n);
            break;
        case 'a':
            o.addresses.push_back(optarg);
            break;
        case 'n':
            o.netmask = optarg;
            break;
        case 'g':
            o.gateways.push_back(optarg);
            break;
        case 'o':
            o.outbound.push_back(optarg);
            break;
        case kDnsForward:
            o.dns_forward.push_back(optarg);
            break;
        case kNsMacAddr:
            o.ns_mac = optarg;
            break;
        case kNoMapGw:
            o.no_map_gw = true;
            break;
        case kMapGw:
            o.no_map_gw = false;
            break;
        case kMapGuestAddr:
            o.map_guest_addr.push_back(optarg);
            break;
        case kMapHostLoopback:
            o.map_host_loopback.push_back(optarg);
            break;
        case '4':
            o.ipv4_only = true;
            break;
        case '6':
            o.ipv6_only = true;
            break;
        case kConfigNet:
            o.config_net = true;
            break;
        case kNoDhcp:
            o.no_dhcp = true;
            break;
        case kNoRa:
            o.no_ra = true;
            break;
        case kHostLoToNsLo:
            o.host_lo_to_ns_lo = true;
            break;
        case kNoSplice:
            o.no_splice = true;
            break;
        case kSplice:
            o.splice = true;
            break;
        case 't':
            o.tcp.push_back(optarg);
            break;
        case 'u':
            o.udp.push_back(optarg);
            break;
        case 'T':
            o.tcp_ns.push_back(optarg);
            break;
        case 'U':
            o.udp_ns.push_back(optarg);
            break;
        case kUserns:
            o.userns = optarg;
            break;
        case kNetns:
            o.netns = std::strchr(optarg, '/') ? std::string(optarg)
                                               : "/run/netns/" + std::string(optarg);
            break;
        case kNetnsOnly:
            o.netns_only = true;
            break;
        case kNoNetnsQuit:
            o.no_netns_quit = true;
            break;
        case kUnsupported: {
            const std::string name = longopts[size_t(index)].name;
            usage_error("option '--" + name + "' is not supported by rknp-pasta");
        }
        case 'F':
        case 'p':
        case 'M':
        case 'i':
        case 'D':
        case 'S':
            usage_error(std::string("option '-") + char(opt) +
                        "' is not supported by rknp-pasta");
        default: // getopt_long printed "unrecognized option '--x'" etc.
            std::exit(EXIT_FAILURE);
        }
        index = -1;
    }
    int rest = argc - optind;
    if (rest > 1 || (rest == 1 && o.netns))
        usage_error("give either a PID or --netns, and no command");
    if (rest == 1) {
        if (!parse_unsigned(argv[optind], 0x7fffffff, n) || n == 0)
            usage_error(std::string("running a command is not supported by "
                                    "rknp-pasta; give a PID or --netns, not '") +
                        argv[optind] + "'");
        o.target_pid = pid_t(n);
    }
    if (rest == 0 && !o.netns)
        usage_error("a target is needed: a PID or --netns (rknp-pasta does "
                    "not create namespaces or run commands)");
    if (o.ipv4_only && o.ipv6_only)
        usage_error("-4/--ipv4-only and -6/--ipv6-only exclude each other");
    if (o.no_splice && o.host_lo_to_ns_lo)
        usage_error("--host-lo-to-ns-lo is incompatible with --no-splice");
    if (o.no_splice && o.splice)
        usage_error("--splice and --no-splice exclude each other");
    if (o.netns_only && o.userns)
        usage_error("--netns-only and --userns exclude each other");
    return o;
}

} // namespace pasta
