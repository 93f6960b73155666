// SPDX-License-Identifier: Apache-2.0

// What the fast paths (TCP and UDP) share about one flow's addresses: the
// Endpoints that guest-bound frames carry, IPv4 held as IPv4-mapped IPv6 so
// one key type serves both families, the gateway MACs libslirp uses, and
// the header lengths of the frames they build.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rknp {

inline constexpr size_t kEthLen = 14;
inline constexpr size_t kIp4Len = 20, kIp6Len = 40;

// Addresses and MACs of one flow as guest-bound frames carry them.
struct Endpoints {
    bool v6 = false;
    uint8_t guest_mac[6]{};
    uint8_t gw_mac[6]{};
    uint8_t guest[16]{};  // destination of our frames
    uint8_t remote[16]{}; // source of our frames (what the guest dialled)
    uint16_t guest_port = 0, remote_port = 0;
};

// The source MAC libslirp gives its emulated hosts (slirp.c if_encap4 and
// ip6.h in6_compute_ethaddr), so the guest's neighbour tables see one MAC
// for the gateway whichever stack answers: IPv4 52:55:<gateway IPv4>,
// IPv6 52:56:<last 4 bytes of the frame's source address>.
void gateway_mac4(const uint8_t gw4[4], uint8_t mac[6]);
void gateway_mac6(const uint8_t src6[16], uint8_t mac[6]);

// The ARP request a fast path sends when it has a frame for a guest whose
// MAC it has not learnt: "who has guest4? tell gateway4", broadcast, from
// the gateway's MAC as libslirp asks (the guest's answer reaches libslirp
// too, which learns from it). 42 bytes: Ethernet + ARP for IPv4.
inline constexpr size_t kArpRequestLen = 42;
void gateway_arp_request(uint32_t gateway4, const uint8_t guest4[4],
                         uint8_t frame[kArpRequestLen]);

// The guest's MAC as a fast path learns it, from the source of each guest
// frame (the guest may change it): kept in mac, known set, when unicast
// and not zero. True when it was learnt anew (first, or changed).
bool learn_guest_mac(std::span<const uint8_t> eth_frame, uint8_t mac[6], bool &known);

// IPv4-mapped helpers.
void map_v4(const uint8_t v4[4], uint8_t out[16]);
bool is_mapped_v4(const uint8_t a[16]);

// The IPv4 address (host byte order) in the last four bytes of an
// IPv4-mapped address, and the four bytes of one in network order.
uint32_t ipv4_of(const uint8_t mapped[16]);
std::array<uint8_t, 4> ipv4_bytes(uint32_t host_order);


} // namespace rknp
