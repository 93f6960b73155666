// SPDX-License-Identifier: Apache-2.0

// The Ethernet and IP layers of a guest frame as the fast paths (TCP, UDP,
// ICMP echo) read them: one unfragmented IPv4 or IPv6 packet of a given
// transport protocol, its IP lengths checked against the frame and its
// addresses held as the flows hold them (IPv4-mapped unless IPv6).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rknp {

// What every frame parser of the paths answers (the IP layer's here, the
// TCP, UDP and echo parsers' on top of it): NotMine, a frame of another
// kind (other ethertypes and protocols, IPv4 fragments, IPv6 extension
// headers, frames too short for the IP header, what the parser does not
// look into: the next path's or libslirp's); Malformed, a frame of its
// kind whose lengths lie: drop; Ok.
enum class Parse { NotMine, Malformed, Ok };

// A validated packet: both spans lie inside the frame, header directly
// followed by l4.
struct IpPacket {
    bool v6 = false;
    uint8_t src[16]{}, dst[16]{};    // IPv4-mapped (::ffff:a.b.c.d) unless v6
    std::span<const uint8_t> header; // the IP header, IPv4 options included
    std::span<const uint8_t> l4;     // the IP payload: to the IPv4 total
                                     // length or the IPv6 payload length,
                                     // Ethernet padding left out; may be empty
};

// Parses the Ethernet frame eth_frame (no vnet header) as an IPv4 packet of
// protocol proto4 or an IPv6 packet whose next header is proto6. IPv4: the
// version, protocol and no fragment bits (MF, offset) decide NotMine; an IHL
// below 5 or a total length below the IHL or past the frame is Malformed;
// options are skipped, the header checksum is not checked. IPv6: the
// version and next header decide NotMine; a payload length past the frame is
// Malformed. out is set only on Ok.
Parse parse_ip(std::span<const uint8_t> eth_frame, uint8_t proto4, uint8_t proto6,
               IpPacket &out);

} // namespace rknp
