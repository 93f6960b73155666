// SPDX-License-Identifier: Apache-2.0

// Neighbour advertisements for the host's IPv6 neighbours in pasta's model
// (rknp_config.ipv6_network): the guest's IPv6 network is the host's, so
// the guest solicits any address of it, a LAN host as much as the gateway
// (often link-local). libslirp's IPv6 is off there; this answers every
// solicitation for an address of the network or a link-local one, but the
// guest's own and a duplicate address detection probe, with the MAC the
// fast paths send that address's frames from (gateway_mac6), so that all
// the guest's unicast IPv6 frames come to the fast paths, which carry them
// to the real hosts. The IPv6 counterpart of neighbour_proxy.hpp (ARP).
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <span>

#include "common/addr.hpp"

namespace rknp {

// Ethernet + IPv6 + neighbour advertisement + target link-layer option.
inline constexpr size_t kNdpAdvertLen = 14 + 40 + 24 + 8;

// The network the answers are for.
struct NdpNetwork {
    Ipv6Prefix prefix; // the host's IPv6 network
    in6_addr guest{};  // never answered for: the guest's own address
    in6_addr gateway{}; // answered as a router (the R flag)
};

// If frame is a well-formed Ethernet/IPv6 neighbour solicitation (hop limit
// 255, valid ICMPv6 checksum, no extension headers) from a unicast or
// link-local source for a target in net.prefix or link-local, other than
// net.guest and the source itself, writes the solicited advertisement into
// reply and returns true.
bool answer_neighbour_ndp(std::span<const uint8_t> frame, const NdpNetwork &net,
                          std::array<uint8_t, kNdpAdvertLen> &reply);

} // namespace rknp
