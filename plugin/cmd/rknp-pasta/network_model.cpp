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
#include <utility>
#include <vector>

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

std::string format_v6(const in6_addr &a) {
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &a, buf, sizeof buf);
    return buf;
}

bool is_link_local(const in6_addr &a) {
    return a.s6_addr[0] == 0xfe && (a.s6_addr[1] & 0xc0) == 0x80;
}

bool is_global(const in6_addr &a) {
    return !IN6_IS_ADDR_UNSPECIFIED(&a) && !IN6_IS_ADDR_LOOPBACK(&a) &&
           !IN6_IS_ADDR_MULTICAST(&a) && !IN6_IS_ADDR_V4MAPPED(&a) && !is_link_local(a);
}

// An IPv6 address and prefix length.
struct Ipv6Net {
    in6_addr address;
    int prefix;

    bool contains(const in6_addr &a) const {
        for (int bit = 0; bit < prefix; ++bit) {
            const uint8_t m = uint8_t(0x80u >> (bit % 8));
            if ((a.s6_addr[bit / 8] & m) != (address.s6_addr[bit / 8] & m)) return false;
        }
        return true;
    }
    in6_addr network() const {
        in6_addr n = address;
        for (int bit = prefix; bit < 128; ++bit)
            n.s6_addr[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
        return n;
    }
};

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

bool Upstream6::contains(const in6_addr &a) const {
    return Ipv6Net{address, prefix}.contains(a);
}

std::optional<Upstream6> parse_ipv6_default_route(const std::string &text) {
    constexpr unsigned long kRtfUp = 0x1, kRtfGateway = 0x2, kRtfReject = 0x200;
    std::istringstream lines(text);
    std::string line;
    std::optional<Upstream6> best;
    unsigned long best_metric = 0;
    while (std::getline(lines, line)) {
        std::istringstream in(line);
        std::string dest, dest_len, src, src_len, hop, metric, refs, use, flags, iface;
        if (!(in >> dest >> dest_len >> src >> src_len >> hop >> metric >> refs >> use >>
              flags >> iface))
            continue;
        const unsigned long f = std::strtoul(flags.c_str(), nullptr, 16);
        if (dest != std::string(32, '0') || dest_len != "00" || iface == "lo" ||
            iface.size() > 15 || hop.size() != 32 || (f & kRtfReject) ||
            (f & (kRtfUp | kRtfGateway)) != (kRtfUp | kRtfGateway))
            continue;
        const unsigned long m = std::strtoul(metric.c_str(), nullptr, 16);
        if (best && m >= best_metric) continue;
        Upstream6 up;
        up.ifname = iface;
        for (int i = 0; i < 16; ++i)
            up.gateway.s6_addr[i] =
                uint8_t(std::strtoul(hop.substr(size_t(i) * 2, 2).c_str(), nullptr, 16));
        best = up;
        best_metric = m;
    }
    return best;
}

std::optional<Upstream6> host_upstream6() {
    std::ifstream route("/proc/net/ipv6_route");
    std::stringstream text;
    text << route.rdbuf();
    std::optional<Upstream6> up = parse_ipv6_default_route(text.str());
    if (!up) return std::nullopt;
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return std::nullopt;
    bool have_addr = false;
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET6 ||
            i->ifa_netmask == nullptr || up->ifname != i->ifa_name)
            continue;
        const in6_addr a = reinterpret_cast<sockaddr_in6 *>(i->ifa_addr)->sin6_addr;
        const in6_addr m = reinterpret_cast<sockaddr_in6 *>(i->ifa_netmask)->sin6_addr;
        if (!is_global(a)) continue;
        int len = 0;
        for (uint8_t b : m.s6_addr) len += __builtin_popcount(b);
        // The address whose network holds the gateway, else the first.
        const bool holds_gateway = Ipv6Net{a, len}.contains(up->gateway);
        if (have_addr && !holds_gateway) continue;
        up->address = a;
        up->prefix = len;
        have_addr = true;
        if (holds_gateway) break;
    }
    freeifaddrs(list);
    if (!have_addr) return std::nullopt;
    return up;
}

NetworkModel::NetworkModel(const Options &o, const std::optional<Upstream> &up,
                           const std::optional<Upstream6> &up6) {
    if (rknp_config_init(&cfg_, sizeof cfg_) != RKNP_OK)
        throw cmd::Failure("rknp_config_init failed");
    // -6: the IPv4 options have no effect (as in pasta: Podman passes its
    // IPv4 --dns-forward and --map-guest-addr whatever the user's -6).
    const bool v4 = !o.ipv6_only;
    // IPv4: the namespace's address and network; by default the host's
    // upstream interface's (pasta's default), else rknp's 10.0.2.100/24.
    uint32_t addr = up ? up->address : kFallbackAddr;
    int prefix = up ? up->prefix : 24;
    bool have_v4 = false;
    for (const auto &a : o.addresses) {
        in6_addr a6{};
        uint32_t v4addr = 0;
        if (parse_v4(a, v4addr)) {
            if (have_v4) refuse("-a/--address", a, "a second IPv4 address");
            addr = v4addr;
            prefix = up && up->contains(v4addr) ? up->prefix : classful_prefix(v4addr);
            have_v4 = true;
        } else if (parse_v6(a, a6)) {
            if (!ipv6_.empty()) refuse("-a/--address", a, "a second IPv6 address");
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
    // for it (the gateway with --no-map-gw) leaves the host. -6 has no
    // IPv4 network to leak from: pasta's model for IPv6.
    const bool host_network =
        (up && up->contains(addr) && up->prefix == prefix) || o.ipv6_only;
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
        uint32_t v4gw = 0;
        in6_addr a6{};
        if (parse_v4(g, v4gw)) {
            gw = v4gw;
        } else if (parse_v6(g, a6)) {
            gateway6_ = g; // checked with the IPv6 network
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
        uint32_t v4dns = 0;
        in6_addr a6{};
        if (parse_v4(d, v4dns)) {
            if (!v4) continue;
            if (!host_network && !in_net(v4dns))
                refuse("--dns-forward", d, "outside " + cidr_ + ", " + why_host);
            dns_ = d;
            cfg_.dns_address = dns_.c_str();
        } else if (!parse_v6(d, a6)) {
            refuse("--dns-forward", d, "not an IPv4 or IPv6 address");
        }
    }
    // pasta answers DNS only where --dns-forward says.
    cfg_.disable_dns = cfg_.dns_address == nullptr;

    // One IPv4 and one IPv6 address each; the IPv6 ones with the network.
    auto mapped = [&](const char *option, const std::vector<std::string> &values,
                      std::string &keep, const char *&field) {
        bool seen = false;
        for (const auto &v : values) {
            uint32_t v4map = 0;
            in6_addr a6{};
            if (v == "none" || parse_v6(v, a6)) continue;
            if (!parse_v4(v, v4map)) refuse(option, v, "not an IPv4 or IPv6 address");
            if (seen) refuse(option, v, "a second IPv4 address");
            seen = true;
            if (!v4) continue;
            if (!host_network) refuse(option, v, why_host);
            keep = v;
            field = keep.c_str();
        }
    };
    mapped("--map-guest-addr", o.map_guest_addr, map_guest_, cfg_.map_guest_addr);
    mapped("--map-host-loopback", o.map_host_loopback, map_loopback_,
           cfg_.map_host_loopback);

    if (o.ipv4_only && !ipv6_.empty())
        refuse("-a/--address", ipv6_, "an IPv6 address with -4/--ipv4-only");
    apply_ipv6(o, up6, host_network);

    for (const auto &a : o.outbound) {
        uint32_t v4out = 0;
        in6_addr a6{};
        if (parse_v4(a, v4out)) {
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
    ifname_ = o.ifname ? *o.ifname : up ? up->ifname : up6 ? up6->ifname : "tap0";
    cfg_.ifname = ifname_.c_str();
    if (o.ns_mac) {
        mac_ = *o.ns_mac;
        cfg_.mac_address = mac_.c_str();
    }
    cfg_.disable_host_loopback = o.no_map_gw;
    // Without --config-net the namespace configures itself: pasta answers
    // DHCP (and NDP), so libslirp's DHCP server does, unless --no-dhcp
    // (rootlesskit 2.0-2.2 configure the interface themselves).
    cfg_.enable_dhcp = o.config_net || o.no_dhcp || o.ipv6_only ? 0 : 1;
    // libslirp advertises rknp's fd00::/64 with no way to stop it; pasta's
    // model for IPv6 sends no advertisements, and without IPv6 there is
    // nothing to advertise.
    if (o.no_ra && cfg_.enable_ipv6 && cfg_.ipv6_network == nullptr)
        throw cmd::Failure("--no-ra: rknp-pasta's IPv6 network fd00::/64 is "
                           "configured by router advertisements; add "
                           "-4/--ipv4-only");
}

void NetworkModel::apply_ipv6(const Options &o, const std::optional<Upstream6> &up6,
                              bool host_network) {
    in6_addr a6{}, gw6{};
    // rknp's fd00::/64 (libslirp's, SLAAC or -a's address in it): the
    // virtual IPv4 network's companion, and the one without --config-net
    // (pasta's model has no router advertisements or DHCPv6 to configure
    // the namespace with).
    const bool fd00 = !o.ipv6_only &&
                      (!host_network || !o.config_net ||
                       (!ipv6_.empty() && parse_v6(ipv6_, a6) && is_fd00(a6, -1)));
    std::string ipv6_dns;
    for (const auto &d : o.dns_forward)
        if (parse_v6(d, a6)) ipv6_dns = d;
    std::vector<std::pair<const char *, std::string>> mapped6;
    for (const auto &[option, values] :
         {std::pair{"--map-guest-addr", &o.map_guest_addr},
          std::pair{"--map-host-loopback", &o.map_host_loopback}}) {
        std::string seen;
        for (const auto &v : *values)
            if (parse_v6(v, a6)) {
                if (!seen.empty()) refuse(option, v, "a second IPv6 address");
                seen = v;
            }
        mapped6.emplace_back(option, seen);
    }
    if (o.ipv4_only) return; // enable_ipv6 stays 0
    if (o.ipv6_only && !o.config_net)
        throw cmd::Failure("-6/--ipv6-only: needs --config-net (rknp-pasta has no "
                           "router advertisements or DHCPv6 for the host's IPv6 "
                           "network)");
    if (fd00) {
        in6_addr mine{};
        if (!ipv6_.empty() && parse_v6(ipv6_, mine) && !is_fd00(mine, -1))
            refuse("-a/--address", ipv6_,
                   host_network ? "without --config-net rknp-pasta's IPv6 network "
                                  "is fd00::/64 (no DHCPv6)"
                                : "rknp-pasta's IPv6 network is fd00::/64 beside an "
                                  "IPv4 network the host does not have");
        if (!gateway6_.empty() && !(parse_v6(gateway6_, gw6) && is_fd00(gw6, 2)))
            refuse("-g/--gateway", gateway6_, "rknp-pasta's IPv6 gateway is fd00::2");
        if (!ipv6_dns.empty() && !(parse_v6(ipv6_dns, a6) && is_fd00(a6, 3)))
            refuse("--dns-forward", ipv6_dns, "rknp-pasta forwards IPv6 DNS at fd00::3 only");
        for (const auto &[option, v] : mapped6)
            if (!v.empty())
                refuse(option, v, "IPv6 mappings need pasta's IPv6 model (the "
                                  "host's IPv6 network, --config-net)");
        cfg_.enable_ipv6 = 1;
        if (!ipv6_.empty()) cfg_.ipv6_address = ipv6_.c_str();
        return;
    }
    // pasta's model: the host's IPv6 address, prefix and gateway, or -a's
    // address (the host's prefix when in its network, else /64, pasta's)
    // and -g's gateway.
    in6_addr guest{};
    int prefix = 64;
    if (!ipv6_.empty()) {
        parse_v6(ipv6_, guest);
        if (up6 && up6->contains(guest)) prefix = up6->prefix;
    } else if (up6) {
        guest = up6->address;
        prefix = up6->prefix;
        ipv6_ = format_v6(guest);
    } else {
        // As pasta: no IPv6 address on the host, none in the namespace.
        if (o.ipv6_only)
            throw cmd::Failure("-6/--ipv6-only: the host has no global IPv6 address "
                               "with a default route; give -a and -g");
        for (const auto &[option, v] : mapped6)
            if (!v.empty()) refuse(option, v, "the host has no global IPv6 address");
        if (!gateway6_.empty())
            refuse("-g/--gateway", gateway6_, "the host has no global IPv6 address");
        return;
    }
    if (o.mtu < 1280) refuse("-m/--mtu", std::to_string(o.mtu), "IPv6 needs 1280 or more");
    Ipv6Net net{guest, prefix};
    network6_ = format_v6(net.network()) + "/" + std::to_string(prefix);
    if (!gateway6_.empty()) {
        parse_v6(gateway6_, gw6);
        if (!(is_link_local(gw6) || net.contains(gw6)) ||
            std::memcmp(&gw6, &guest, sizeof gw6) == 0)
            refuse("-g/--gateway", gateway6_,
                   std::memcmp(&gw6, &guest, sizeof gw6) == 0
                       ? "the namespace's own address"
                       : "neither in " + network6_ + " nor link-local");
    } else if (up6 && (is_link_local(up6->gateway) || net.contains(up6->gateway))) {
        gateway6_ = format_v6(up6->gateway);
    } else if (prefix > 126) {
        refuse("-a/--address", ipv6_,
               "a prefix longer than /126 and no host gateway in it: give -g");
    }
    cfg_.enable_ipv6 = 1;
    cfg_.ipv6_address = ipv6_.c_str();
    cfg_.ipv6_network = network6_.c_str();
    if (!gateway6_.empty()) cfg_.ipv6_gateway = gateway6_.c_str();
    // DNS to it answered through the host's resolver configuration.
    if (!ipv6_dns.empty()) {
        dns6_ = ipv6_dns;
        cfg_.dns_address6 = dns6_.c_str();
    }
    for (auto &[option, v] : mapped6) {
        if (v.empty()) continue;
        std::string &keep = option == std::string("--map-guest-addr") ? map_guest6_
                                                                      : map_loopback6_;
        keep = v;
        (option == std::string("--map-guest-addr") ? cfg_.map_guest_addr6
                                                   : cfg_.map_host_loopback6) = keep.c_str();
    }
    if (o.ipv6_only) cfg_.disable_ipv4 = 1;
}

std::string NetworkModel::ipv6_summary() const {
    if (cfg_.ipv6_network == nullptr) return "";
    const std::string len = std::strchr(cfg_.ipv6_network, '/') + 1;
    return std::string(cfg_.ipv6_address) + "/" + len + " via " +
           (cfg_.ipv6_gateway ? cfg_.ipv6_gateway : "the network's ::1");
}

} // namespace pasta
