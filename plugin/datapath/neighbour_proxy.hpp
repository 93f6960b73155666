// SPDX-License-Identifier: Apache-2.0

// ARP answers for the host's neighbours in pasta's model
// (RKNP_NETWORK_MODEL_HOST): the guest's network is the host's, so the
// guest asks ARP for any address of it, a LAN host as much as the gateway.
// libslirp answers only for its own addresses (gateway, DNS); this answers
// for every address of the network but the guest's own, with the MAC
// libslirp gives the gateway, so that all the guest's unicast frames come
// to the fast paths, which carry them to the real hosts.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "common/addr.hpp"

namespace rknp {

inline constexpr size_t kArpFrameLen = 42; // Ethernet + ARP for IPv4

// If frame is an Ethernet/IPv4 ARP request for an address of net other
// than net.guest() (and not a guest's announcement of its own address),
// writes the reply into reply and returns true.
bool answer_neighbour_arp(std::span<const uint8_t> frame, const Ipv4Cidr &net,
                          std::array<uint8_t, kArpFrameLen> &reply);

} // namespace rknp
