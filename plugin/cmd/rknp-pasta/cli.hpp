// SPDX-License-Identifier: Apache-2.0

// Command line of rknp-pasta: pasta's options as Podman and rootlesskit
// pass them (--help, --version, usage errors). Options pasta has that
// rknp-pasta cannot honour are refused by name; options pasta does not
// have are refused with getopt's "unrecognized option" (Podman retries
// without --map-guest-addr on exactly that text).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace pasta {

struct Options {
    pid_t target_pid = 0;                 // PID operand
    std::optional<std::string> netns;     // --netns (a NAME: /run/netns/NAME)
    std::optional<std::string> userns;    // --userns
    bool netns_only = false;              // --netns-only
    bool no_netns_quit = false;           // --no-netns-quit

    bool foreground = false;              // -f
    bool quiet = false;                   // -q
    bool debug = false;                   // -d, --trace
    std::optional<std::string> log_file;  // -l
    std::optional<std::string> pid_file;  // -P
    std::optional<std::string> conf_path; // -c, rknp-pesto's socket

    std::optional<std::string> ifname;    // -I
    unsigned mtu = 65520;                 // -m
    std::vector<std::string> addresses;   // -a, at most one IPv4, one IPv6
    std::optional<std::string> netmask;   // -n
    std::vector<std::string> gateways;    // -g
    std::vector<std::string> dns_forward; // --dns-forward
    std::optional<std::string> ns_mac;    // --ns-mac-addr
    std::vector<std::string> outbound;    // -o
    bool no_map_gw = false;               // --no-map-gw (--map-gw: false)
    // --map-guest-addr, --map-host-loopback: one IPv4 and one IPv6 each
    // at most, or "none"
    std::vector<std::string> map_guest_addr, map_host_loopback;
    bool ipv4_only = false;               // -4
    bool ipv6_only = false;               // -6
    bool config_net = false;              // --config-net
    bool no_dhcp = false;                 // --no-dhcp
    bool no_ra = false;                   // --no-ra (only with -4)
    bool host_lo_to_ns_lo = false;        // --host-lo-to-ns-lo
    bool no_splice = false;               // --no-splice
    bool splice = false;                  // --splice (rknp's own)

    // -t, -u, -T, -U as given (several of each accumulate); none given:
    // pasta's default, "auto" for -t and -u.
    std::vector<std::string> tcp, udp, tcp_ns, udp_ns;
};

// Parses argv like pasta: --help and --version print and exit 0; a usage
// error prints "rknp-pasta: ..." (or getopt's message) on stderr and exits
// 1. Values are checked later (network_model, forwards).
Options parse_args(int argc, char *const argv[]);

} // namespace pasta
