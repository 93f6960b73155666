// SPDX-License-Identifier: Apache-2.0

// pasta's address options as an rknp_config (see network_model.hpp).
#include "network_model.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cmd/common/errors.hpp"

namespace pasta {

namespace {

// Without a default route on the host: rknp's own network.
constexpr uint32_t kFallbackAddr = (10u << 24) | (2u << 8) | 100; // 10.0.2.100

bool parse_v4(const std::string &s, uint32_t &out) {
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
    out = ntohl(a.s_addr);
    return true;
}

bool parse_v6(const std::string &s, in6_addr &out) {
    return inet_pton(AF_INET6, s.c_str(), &out) == 1;
}

std::string format_v4(uint32_t host_order) {
    in_addr a{htonl(host_order)};
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    return buf;
}

// fd00::N, rknp's IPv6 network's addresses.
bool is_fd00(const in6_addr &a, int last) {
    static const uint8_t prefix[8] = {0xfd, 0x00, 0, 0, 0, 0, 0, 0};
    if (std::memcmp(a.s6_addr, prefix, 8) != 0) return false;
    if (last < 0) return true;
    for (int i = 8; i < 15; i++)
        if (a.s6_addr[i] != 0) return false;
    return a.s6_addr[15] == last;
}

[[noreturn]] void refuse(const std::string &option, const std::string &value,
                         const std::string &why) {
    throw cmd::Failure(option + " " + value + ": " + why);
}

// -n: dot-decimal or a prefix length.
int parse_netmask(const std::string &s) {
    uint32_t m = 0;
    if (parse_v4(s, m)) {
        int len = __builtin_popcount(m);
        if (len > 0 && m == ~uint32_t(0) << (32 - len)) return len;
        refuse("-n/--netmask", s, "not a contiguous netmask");
    }
    char *end = nullptr;
    long len = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || len < 0 || len > 32)
        refuse("-n/--netmask", s, "neither a netmask nor a prefix length");
    return int(len);
}

// Without -n, as pasta does when the host has no matching address: the
// address's class (RFC 4632's historical blocks).
int classful_prefix(uint32_t a) {
    if ((a >> 31) == 0) return 8;
    if ((a >> 30) == 2) return 16;
    return 24;
}

} // namespace

std::string Upstream::cidr() const {
    return format_v4(address & mask()) + "/" + std::to_string(prefix);
}

std::optional<Upstream> host_upstream() {
    std::ifstream route("/proc/net/route");
    std::string line;
    std::getline(route, line); // header
    Upstream up;
    bool found = false;
    while (!found && std::getline(route, line)) {
        std::istringstream in(line);
        std::string iface, dest, gw;
        if (in >> iface >> dest >> gw && dest == "00000000" && iface.size() <= 15) {
            // The kernel prints the address's network-order word in hex.
            up.ifname = iface;
            up.gateway = ntohl(uint32_t(std::strtoul(gw.c_str(), nullptr, 16)));
            found = true;
        }
    }
    if (!found) return std::nullopt;
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return std::nullopt;
    bool have_addr = false;
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET ||
            i->ifa_netmask == nullptr || up.ifname != i->ifa_name)
            continue;
        uint32_t a = ntohl(reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr);
        uint32_t m = ntohl(reinterpret_cast<sockaddr_in *>(i->ifa_netmask)->sin_addr.s_addr);
        // The address whose network holds the gateway, else the first.
        if (have_addr && (up.gateway & m) != (a & m)) continue;
        up.address = a;
        up.prefix = __builtin_popcount(m);
        have_addr = true;
        if ((up.gateway & m) == (a & m)) break;
    }
    freeifaddrs(list);
    if (!have_addr) return std::nullopt;
    return up;
}

NetworkModel::NetworkModel(const Options &o, const std::optional<Upstream> &up) {
    if (rknp_config_init(&cfg_, sizeof cfg_) != RKNP_OK)
        throw cmd::Failure("rknp_config_init failed");
    // IPv4: the namespace's address and network; by default the host's
    // upstream interface's (pasta's default), else rknp's 10.0.2.100/24.
    uint32_t addr = up ? up->address : kFallbackAddr;
    int prefix = up ? up->prefix : 24;
    bool have_v4 = false;
    for (const auto &a : o.addresses) {
        in6_addr a6{};
        uint32_t v4 = 0;
        if (parse_v4(a, v4)) {
            if (have_v4) refuse("-a/--address", a, "a second IPv4 address");
            addr = v4;
            prefix = up && up->contains(v4) ? up->prefix : classful_prefix(v4);
            have_v4 = true;
        } else if (parse_v6(a, a6)) {
            if (!ipv6_.empty()) refuse("-a/--address", a, "a second IPv6 address");
            if (!is_fd00(a6, -1))
                refuse("-a/--address", a,
                       "rknp-pasta's IPv6 network is fd00::/64; other IPv6 "
                       "addresses are not supported");
            ipv6_ = a;
        } else {
            refuse("-a/--address", a, "not an IPv4 or IPv6 address");
        }
    }
    if (o.netmask) prefix = parse_netmask(*o.netmask);
    if (prefix < 1 || prefix > 30)
        refuse("-n/--netmask", o.netmask.value_or(std::to_string(prefix)),
               "rknp-pasta needs a prefix length of 1-30");
    const uint32_t mask = ~uint32_t(0) << (32 - prefix);
    const uint32_t network = addr & mask;
    auto in_net = [&](uint32_t a) { return (a & mask) == network; };
    cidr_ = format_v4(network) + "/" + std::to_string(prefix);
    cfg_.cidr = cidr_.c_str();
    // pasta's model where the namespace is on the host's network: its other
    // addresses are the host's neighbours. An address elsewhere (what
    // rootlesskit passes: 10.0.2.100/24) makes a network the host does not
    // have: libslirp's virtual one, as slirp4netns's, so that nothing meant
    // for it (the gateway with --no-map-gw) leaves the host.
    const bool host_network = up && up->contains(addr) && up->prefix == prefix;
    cfg_.network_model = host_network ? RKNP_NETWORK_MODEL_HOST : RKNP_NETWORK_MODEL_SLIRP;
    const std::string why_host =
        up ? "needs the namespace on the host's network " + up->cidr() +
                 " (no -a, or an address of it)"
           : std::string("needs the namespace on the host's network, and the host "
                         "has no IPv4 default route");
    address_ = format_v4(addr);
    cfg_.guest_address = address_.c_str();

    // The gateway: -g, else the host's when it lies in the network, else
    // the network's 2nd address (as rknp's network has it).
    uint32_t gw = up && in_net(up->gateway) && up->gateway != addr ? up->gateway
                                                                   : network + 2;
    if (gw == addr) gw = network + 1;
    for (const auto &g : o.gateways) {
        uint32_t v4 = 0;
        in6_addr a6{};
        if (parse_v4(g, v4)) {
            gw = v4;
        } else if (parse_v6(g, a6)) {
            if (!is_fd00(a6, 2))
                refuse("-g/--gateway", g, "rknp-pasta's IPv6 gateway is fd00::2");
        } else {
            refuse("-g/--gateway", g, "not an IPv4 or IPv6 address");
        }
    }
    if (!in_net(gw) || gw == addr || gw == network || gw == (network | ~mask))
        refuse("-g/--gateway", format_v4(gw),
               gw == addr ? "the namespace's own address"
                          : "not a host of the network " + cidr_);
    gateway_ = format_v4(gw);
    cfg_.gateway = gateway_.c_str();

    for (const auto &d : o.dns_forward) {
        uint32_t v4 = 0;
        in6_addr a6{};
        if (parse_v4(d, v4)) {
            if (!host_network && !in_net(v4))
                refuse("--dns-forward", d, "outside " + cidr_ + ", " + why_host);
            dns_ = d;
            cfg_.dns_address = dns_.c_str();
        } else if (parse_v6(d, a6)) {
            if (!is_fd00(a6, 3))
                refuse("--dns-forward", d,
                       "rknp-pasta forwards IPv6 DNS at fd00::3 only");
        } else {
            refuse("--dns-forward", d, "not an IPv4 or IPv6 address");
        }
    }
    // pasta answers DNS only where --dns-forward says.
    cfg_.disable_dns = o.dns_forward.empty();

    auto mapped = [&](const char *option, const std::optional<std::string> &v,
                      std::string &keep, const char *&field) {
        if (!v || *v == "none") return;
        uint32_t v4 = 0;
        in6_addr a6{};
        if (parse_v6(*v, a6))
            refuse(option, *v, "IPv6 mappings are not supported yet");
        if (!parse_v4(*v, v4)) refuse(option, *v, "not an IPv4 address");
        if (!host_network) refuse(option, *v, why_host);
        keep = *v;
        field = keep.c_str();
    };
    mapped("--map-guest-addr", o.map_guest_addr, map_guest_, cfg_.map_guest_addr);
    mapped("--map-host-loopback", o.map_host_loopback, map_loopback_,
           cfg_.map_host_loopback);

    cfg_.enable_ipv6 = !o.ipv4_only;
    if (o.ipv4_only && !ipv6_.empty())
        refuse("-a/--address", ipv6_, "an IPv6 address with -4/--ipv4-only");
    if (!ipv6_.empty()) cfg_.ipv6_address = ipv6_.c_str();

    for (const auto &a : o.outbound) {
        uint32_t v4 = 0;
        in6_addr a6{};
        if (parse_v4(a, v4)) {
            outbound_ = a;
            cfg_.outbound_addr = outbound_.c_str();
        } else if (parse_v6(a, a6)) {
            outbound6_ = a;
            cfg_.outbound_addr6 = outbound6_.c_str();
        } else {
            refuse("-o/--outbound", a, "not an IPv4 or IPv6 address");
        }
    }

    cfg_.mtu = o.mtu;
    ifname_ = o.ifname ? *o.ifname : up ? up->ifname : "tap0";
    cfg_.ifname = ifname_.c_str();
    if (o.ns_mac) {
        mac_ = *o.ns_mac;
        cfg_.mac_address = mac_.c_str();
    }
    cfg_.disable_host_loopback = o.no_map_gw;
    // Without --config-net the namespace configures itself: pasta answers
    // DHCP (and NDP), so libslirp's DHCP server does, unless --no-dhcp
    // (rootlesskit 2.0-2.2 configure the interface themselves).
    cfg_.enable_dhcp = o.config_net || o.no_dhcp ? 0 : 1;
    // libslirp advertises rknp's IPv6 network with no way to stop it; with
    // IPv6 off there is nothing to advertise.
    if (o.no_ra && !o.ipv4_only)
        throw cmd::Failure("--no-ra: rknp-pasta's IPv6 network is configured by "
                           "router advertisements; add -4/--ipv4-only");
}

} // namespace pasta
