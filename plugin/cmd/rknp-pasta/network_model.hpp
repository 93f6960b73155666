// SPDX-License-Identifier: Apache-2.0

// pasta's address options (-a, -n, -g, --dns-forward, --map-guest-addr,
// --map-host-loopback, -4, -o, -I, -m, --ns-mac-addr, --no-map-gw,
// --config-net) as an rknp_config in pasta's model
// (RKNP_NETWORK_MODEL_HOST): by default the namespace gets the host's
// upstream interface's name, IPv4 address, prefix and gateway, and the
// network's other addresses are the host's neighbours. An -a outside the
// host's network (rootlesskit's 10.0.2.100/24) gets libslirp's virtual
// network instead (RKNP_NETWORK_MODEL_SLIRP), where --map-guest-addr and a
// --dns-forward outside the network are refused by name. IPv6 stays rknp's
// fd00::/64 (gateway ::2, DNS ::3).
#pragma once

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

// An rknp_config together with the strings it points into.
class NetworkModel {
public:
    // Throws cmd::Failure naming the option and the value on a bad or an
    // unsupported value.
    // up: the host's upstream interface (host_upstream()), if any.
    NetworkModel(const Options &o, const std::optional<Upstream> &up);
    NetworkModel(const NetworkModel &) = delete;
    NetworkModel &operator=(const NetworkModel &) = delete;

    const rknp_config &get() const { return cfg_; }

private:
    rknp_config cfg_{};
    std::string cidr_, address_, gateway_, dns_, map_guest_, map_loopback_,
        ifname_, ipv6_, mac_, outbound_, outbound6_;
};



} // namespace pasta
