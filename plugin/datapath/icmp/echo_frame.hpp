// SPDX-License-Identifier: Apache-2.0

// ICMP echo frames: parsing a guest Ethernet/IPv4|IPv6/ICMP echo request
// into a validated view, checking its checksums, and writing the
// guest-bound echo reply (Ethernet + IP + ICMP, every checksum complete,
// IPv4 replies longer than the guest's MTU in fragments), and the
// destination-unreachable error for a request that could not be sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "datapath/flows/ip_packet.hpp"
#include "datapath/guest_sink.hpp"

namespace rknp::icmp {

inline constexpr size_t kEthLen = 14, kIp4Len = 20, kIp6Len = 40, kIcmpLen = 8;
inline constexpr uint8_t kEchoRequest4 = 8, kEchoReply4 = 0;
inline constexpr uint8_t kEchoRequest6 = 128, kEchoReply6 = 129;
// The longest ICMP message an IPv6 payload length allows (IPv4's total
// length leaves 20 bytes less).
inline constexpr size_t kMaxMessage = 65535;
inline constexpr size_t kMaxMessage4 = 65535 - kIp4Len;
// Room write_reply needs in front of a message: Ethernet and IPv6 headers.
inline constexpr size_t kHeadroom = kEthLen + kIp6Len;

// A guest echo request, its lengths validated: every field lies inside the
// frame. IPv4 addresses are held as IPv4-mapped IPv6 (::ffff:a.b.c.d), as
// the TCP fast path holds them.
struct EchoRequest {
    bool v6 = false;
    uint8_t src_mac[6]{};
    uint8_t src[16]{}, dst[16]{};
    uint16_t id = 0, seq = 0;
    std::span<const uint8_t> message; // the ICMP header and payload
    std::span<const uint8_t> packet;  // the IP packet, headers and all
};

// Parse (flows/ip_packet.hpp): NotMine, not an IPv4/IPv6 echo request we
// can look into; Malformed, an echo request whose lengths, code or IPv4
// header checksum lie.
// Parses an Ethernet frame without vnet header. Anything but an ICMP echo
// request (other ICMP types, NDP among them), IPv4 fragments and IPv6
// packets with extension headers are NotMine (libslirp's business); IPv4
// options are skipped; Ethernet padding after the IP packet is ignored.
Parse parse_echo_request(std::span<const uint8_t> frame, EchoRequest &out);

// Whether the request's ICMP checksum is right (ICMPv6: with the
// pseudo-header). The kernel computes a new one when the message is sent
// on: a bad one must be caught here, as libslirp's icmp_input does.
bool echo_checksum_ok(const EchoRequest &r);

// Addresses of a guest-bound reply.
struct ReplyEnds {
    bool v6 = false;
    uint8_t guest_mac[6]{};
    uint8_t gw_mac[6]{};
    uint8_t guest[16]{};  // destination
    uint8_t remote[16]{}; // source: the address the guest pinged
    uint16_t guest_id = 0;
};

// Writes the reply carrying the ICMP message msg[0, len) (as a ping socket
// returned it: an echo reply with the socket's own id) to sink: the id
// becomes the guest's, the checksum is computed in full, and the headers
// are written into the kHeadroom bytes before msg (which must be
// writable). An IPv4 reply longer than mtu goes in fragments of at most
// mtu bytes; an IPv6 one longer than mtu, or any too long for its IP
// header, is dropped. Returns the frames written (0: dropped).
size_t write_reply(GuestSink &sink, const ReplyEnds &e, uint8_t *msg,
                   size_t len, uint32_t mtu, uint16_t ip_id);

// Why a request could not be sent, as the guest is told (as libslirp's
// icmp_send_error tells it when its sendto fails).
enum class Unreachable {
    Net,  // ICMP 3/0 network unreachable; ICMPv6 1/0 no route
    Host, // ICMP 3/1 host unreachable; ICMPv6 1/3 address unreachable
};

// Writes a destination-unreachable error about the request r to the guest
// (to r.src, r.src_mac), from the gateway (e.remote: the IPv4-mapped
// gateway or the IPv6 one; e.gw_mac), quoting r's IP header and first 8
// ICMP bytes (IPv4, RFC 792) or as much of r.packet as keeps the error
// within IPv6's minimum MTU (RFC 4443). e.guest, e.guest_mac and
// e.guest_id are not used.
void write_unreachable(GuestSink &sink, const ReplyEnds &e, const EchoRequest &r,
                       Unreachable why, uint16_t ip_id);

} // namespace rknp::icmp
