// SPDX-License-Identifier: Apache-2.0

// Translates slirp4netns options (CIDR, MTU, MAC, outbound address or
// interface name, ...) into an rknp_config, with slirp4netns' messages.
#pragma once

#include <string>

#include "cli.hpp"
#include "rknp.h"

namespace s4n {

// An rknp_config together with the strings it points into.
class NetworkConfig {
public:
    // Throws Failure with slirp4netns' wording on a bad value.
    explicit NetworkConfig(const Options &o);
    NetworkConfig(const NetworkConfig &) = delete;
    NetworkConfig &operator=(const NetworkConfig &) = delete;

    const rknp_config &get() const { return cfg_; }
    // Guest address slirp4netns recommends (network + 100), dotted quad.
    const std::string &recommended_guest() const { return guest_; }

private:
    rknp_config cfg_{};
    std::string cidr_, ifname_, mac_, outbound_, outbound6_, guest_;
};

} // namespace s4n
