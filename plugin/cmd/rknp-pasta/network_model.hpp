// SPDX-License-Identifier: Apache-2.0

// pasta's address options (-a, -n, -g, --dns-forward, --map-guest-addr,
// --map-host-loopback, -4, -6, -o, -I, -m, --ns-mac-addr, --no-map-gw,
// --config-net) as an rknp_config in pasta's model
// (RKNP_NETWORK_MODEL_HOST): by default the namespace gets the host's
// upstream interfaces' name, IPv4 and IPv6 addresses, prefixes and
// gateways, and the networks' other addresses are the host's neighbours.
// An IPv4 -a outside the host's network (rootlesskit's 10.0.2.100/24) gets
// libslirp's virtual network instead (RKNP_NETWORK_MODEL_SLIRP), where
// --map-guest-addr and a --dns-forward outside the network are refused by
// name, and IPv6 is rknp's fd00::/64 (gateway ::2, DNS ::3), as it is
// without --config-net. A host without a global IPv6 address gives the
// namespace no IPv6, as pasta does.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string>

#include "cli.hpp"
#include "rknp.h"

namespace pasta {

// The host's interface with the first IPv4 default route (/proc/net/route):
// pasta's default for the namespace's interface name, address, prefix and
// gateway. The address is the interface's one whose network holds the
// gateway, else its first.
struct Upstream {
    std::string ifname;
    uint32_t address = 0, gateway = 0; // host byte order
    int prefix = 0;

    uint32_t mask() const { return prefix == 0 ? 0 : ~uint32_t(0) << (32 - prefix); }
    bool contains(uint32_t a) const { return (a & mask()) == (address & mask()); }
    std::string cidr() const; // "192.0.2.0/24"
};
std::optional<Upstream> host_upstream();

// The host's interface with the first IPv6 default route via a gateway
// (/proc/net/ipv6_route, the lowest metric) and its global address: the
// one whose network holds the gateway, else the first.
struct Upstream6 {
    std::string ifname;
    in6_addr address{}, gateway{}; // the gateway may be link-local
    int prefix = 64;

    bool contains(const in6_addr &a) const;
};
std::optional<Upstream6> host_upstream6();
// /proc/net/ipv6_route's text: the default route's interface, gateway and
// metric (the lowest metric's), without the addresses.
std::optional<Upstream6> parse_ipv6_default_route(const std::string &text);

// An rknp_config together with the strings it points into.
class NetworkModel {
public:
    // Throws cmd::Failure naming the option and the value on a bad or an
    // unsupported value.
    // up, up6: the host's upstream interfaces (host_upstream(),
    // host_upstream6()), if any.
    NetworkModel(const Options &o, const std::optional<Upstream> &up,
                 const std::optional<Upstream6> &up6 = std::nullopt);
    NetworkModel(const NetworkModel &) = delete;
    NetworkModel &operator=(const NetworkModel &) = delete;

    const rknp_config &get() const { return cfg_; }

    // IPv6 in pasta's model: "ADDR/LEN via GATEWAY"; empty otherwise.
    std::string ipv6_summary() const;

private:
    // The IPv6 fields: rknp's fd00::/64, pasta's model or none.
    void apply_ipv6(const Options &o, const std::optional<Upstream6> &up6,
                    bool host_network);

    rknp_config cfg_{};
    std::string cidr_, address_, gateway_, dns_, map_guest_, map_loopback_,
        ifname_, ipv6_, mac_, outbound_, outbound6_, network6_, gateway6_,
        map_guest6_, map_loopback6_, dns6_;
};

} // namespace pasta
