// SPDX-License-Identifier: Apache-2.0

// pasta's address options (-a, -n, -g, --dns-forward, -4, -o, -I, -m,
// --ns-mac-addr, --no-map-gw, --config-net) as an rknp_config. rknp's
// network puts the namespace at the 100th address of an IPv4 network, the
// gateway at the 2nd, the DNS forwarder at the 3rd (fd00::/64, ::2, ::3 for
// IPv6), which is what rootlesskit passes; any other placement is refused
// by option name.
#pragma once

#include <string>

#include "cli.hpp"
#include "rknp.h"

namespace pasta {

// An rknp_config together with the strings it points into.
class NetworkModel {
public:
    // Throws cmd::Failure naming the option and the value on a bad or an
    // unsupported value.
    explicit NetworkModel(const Options &o);
    NetworkModel(const NetworkModel &) = delete;
    NetworkModel &operator=(const NetworkModel &) = delete;

    const rknp_config &get() const { return cfg_; }

private:
    rknp_config cfg_{};
    std::string cidr_, ifname_, ipv6_, mac_, outbound_, outbound6_;
};

// The name of the host's interface with the first IPv4 default route
// (/proc/net/route), pasta's default namespace interface name; "tap0" if
// there is none.
std::string default_route_interface();

} // namespace pasta
