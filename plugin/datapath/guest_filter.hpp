// SPDX-License-Identifier: Apache-2.0

// What of a guest frame may reach libslirp. The guest is untrusted and
// libslirp runs inside rootlesskit: only ARP, IPv4 and IPv6 get through
// (libslirp 4.7 would also parse NC-SI and more), and TCP's urgent
// mechanism is removed before libslirp sees it (4.7.0's sosendoob sends
// bytes past its buffered data for a large urgent pointer, fixed in 4.9.2).
// Spoofed source addresses are refused: each new source costs libslirp a
// host socket and buffers, so a guest cycling through them would exhaust
// rootlesskit's fds and memory.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>

#include "common/addr.hpp"

namespace rknp {

// Whether the frame's source address is one the guest may use: IPv4 and
// ARP senders inside net or 0.0.0.0 (DHCP, ARP probes); IPv6 inside the
// prefix6 (/64 unless prefix6_len says), link-local (neighbour discovery) or :: (duplicate address
// detection). Frames of other ethertypes and truncated headers: false.
bool guest_source_allowed(std::span<const uint8_t> frame, const Ipv4Cidr &net,
                          const in6_addr &prefix6, uint32_t prefix6_len = 64);

// True for frames of an ethertype libslirp serves: ARP, IPv4, IPv6.
bool libslirp_ethertype(std::span<const uint8_t> frame);

// True for an ICMPv6 router advertisement or redirect (no extension
// headers: libslirp would not look past them either). A guest has no
// router to announce; libslirp only warns about each one, so a guest
// sending them in a loop would flood rootlesskit's log.
bool router_message_from_guest(std::span<const uint8_t> frame);

// Clears URG and the urgent pointer of an unfragmented TCP segment in an
// Ethernet frame, keeping its checksum as valid (or as invalid) as it was
// (RFC 1624 incremental update). Other frames are left alone. Returns
// whether the segment was changed.
bool strip_urgent(std::span<uint8_t> frame);

} // namespace rknp
