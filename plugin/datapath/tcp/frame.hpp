// SPDX-License-Identifier: Apache-2.0

// TCP frames of the fast path: parsing a guest Ethernet/IPv4|IPv6/TCP frame
// into a validated view, and writing the headers of guest-bound segments
// (Ethernet + IP + TCP + SYN options) with a vnet header that makes the
// checksum partial and, for payloads longer than one MSS, asks the guest's
// kernel to treat the frame as a GSO super-frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "datapath/flows/endpoints.hpp"
#include "datapath/flows/ip_packet.hpp"
#include "datapath/offload.hpp"

namespace rknp::tcp {

inline constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08,
                         kAck = 0x10, kUrg = 0x20;

inline constexpr size_t kTcpLen = 20;
// Room for the headers of any segment we build: Ethernet, IPv6, TCP and the
// SYN-ACK's options (MSS 4 + NOP 1 + WS 3).
inline constexpr size_t kMaxHeaders = kEthLen + kIp6Len + kTcpLen + 8;
// Largest TCP payload in one frame: the IPv4 total length (16 bits) bounds
// it; IPv6 allows 20 bytes more, which we do not bother to use.
inline constexpr size_t kMaxPayload = 65535 - kIp4Len - kTcpLen;

// A guest segment, validated: every field lies inside the frame. IPv4
// addresses are held as IPv4-mapped IPv6 (::ffff:a.b.c.d) so one key type
// serves both families.
struct Segment {
    bool v6 = false;
    uint8_t src_mac[6]{};
    uint8_t src[16]{}, dst[16]{};
    uint16_t sport = 0, dport = 0;
    uint32_t seq = 0, ack = 0;
    uint8_t flags = 0;
    uint16_t window = 0; // as sent, unscaled
    uint16_t mss = 0;    // MSS option, 0 if absent
    int wscale = -1;     // window scale option, -1 if absent
    bool sack_ok = false;
    std::span<const uint8_t> payload;
};

// Parse (flows/ip_packet.hpp): NotMine, not an IPv4/IPv6 TCP segment we
// can look into; Malformed, it claims to be TCP but its lengths lie.
// Parses an Ethernet frame (no vnet header, checksums already complete or
// not checked: a guest that can compute a good checksum gains nothing from
// a bad one, and the tap never corrupts). IPv4 options are skipped; IPv4
// fragments and IPv6 extension headers are NotMine (libslirp's business);
// Ethernet padding after the IP datagram is ignored.
Parse parse_segment(std::span<const uint8_t> frame, Segment &out);

struct OutFields {
    uint32_t seq = 0, ack = 0;
    uint8_t flags = 0;
    uint16_t window = 0; // already scaled down
    uint16_t mss_opt = 0; // non-zero: MSS option (SYN-ACK)
    int ws_opt = -1;      // >= 0: window scale option (SYN-ACK)
    uint16_t ip_id = 0;
    // Data the guest's kernel acknowledges the moment it takes it (not
    // sent, only noted in the batch: GuestFrames::answer_due).
    bool acked_at_once = false;
};

// Writes the headers of a segment carrying payload_len bytes into hdr (at
// least kMaxHeaders bytes) and returns their length. vnet gets NEEDS_CSUM
// with the pseudo-header sum in the TCP checksum field (the payload is not
// read here: it may not be in place yet, and the guest's kernel does not
// need the sum for local delivery), plus GSO TCPV4/TCPV6 with gso_size =
// mss if the payload is longer than mss.
size_t build_segment(uint8_t *hdr, VnetHdr &vnet, const Endpoints &ep,
                     const OutFields &f, size_t payload_len, uint16_t mss);

} // namespace rknp::tcp
