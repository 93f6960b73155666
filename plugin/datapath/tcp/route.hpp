// SPDX-License-Identifier: Apache-2.0

// Routing of guest SYNs (which destinations the fast path carries, which
// stay libslirp's) and the IPv4 address tests it and the forwards share.
#pragma once

#include <array>
#include <cstdint>

#include "datapath/tcp/fastpath_config.hpp"
#include "datapath/tcp/frame.hpp"

namespace rknp::tcp {

// Where a guest SYN's destination goes.
enum class Route {
    NotMine,  // libslirp's (DNS, virtual network, non-unicast, v6 disabled)
    Host,     // connect to the destination itself
    Loopback, // the gateway: connect to 127.0.0.1 / ::1
    Refuse,   // the gateway with disable_host_loopback: RST
};
Route classify(const FastPathConfig &cfg, const Segment &s);

// The IPv4 address (host byte order) in the last four bytes of an
// IPv4-mapped address, and the four bytes of one in network order.
uint32_t ipv4_of(const uint8_t mapped[16]);
std::array<uint8_t, 4> ipv4_bytes(uint32_t host_order);

// A unicast IPv4 address a host socket may sensibly talk to or from.
bool is_unicast4(uint32_t host_order);

} // namespace rknp::tcp
