// SPDX-License-Identifier: Apache-2.0

// UDP frames of the fast path: parsing a guest Ethernet/IPv4|IPv6/UDP frame
// into a validated view, and writing guest-bound datagrams (a partial
// checksum the guest's kernel need not verify, or, for datagrams over the
// MTU, IP fragments with the checksum complete) and the ICMP errors that
// host sockets report (port unreachable and the like).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "datapath/flows/endpoints.hpp"
#include "datapath/flows/ip_packet.hpp"
#include "datapath/offload.hpp"

namespace rknp::udp {

inline constexpr size_t kUdpLen = 8;
inline constexpr size_t kIp6FragLen = 8;
// Room for the headers of any frame we build: Ethernet, IPv6, a fragment
// header and UDP.
inline constexpr size_t kMaxHeaders = kEthLen + kIp6Len + kIp6FragLen + kUdpLen;
// The largest UDP payload: the UDP length field (16 bits) bounds it.
inline constexpr size_t kMaxPayload = 65535 - kUdpLen;
// An ICMP error frame: Ethernet, IP, ICMP and the quote (the guest's IP
// and UDP headers plus the first kIcmpQuote payload bytes).
inline constexpr size_t kIcmpQuote = 64;
inline constexpr size_t kMaxIcmpFrame = kEthLen + 2 * kIp6Len + 8 + kUdpLen + kIcmpQuote;

// A guest datagram, validated: every field lies inside the frame. IPv4
// addresses are IPv4-mapped, as in Endpoints.
struct Datagram {
    bool v6 = false;
    uint8_t src_mac[6]{};
    uint8_t src[16]{}, dst[16]{};
    uint16_t sport = 0, dport = 0;
    std::span<const uint8_t> payload;
};

// Parse (flows/ip_packet.hpp): NotMine, not an IPv4/IPv6 UDP datagram we
// look into; Malformed, it claims to be UDP but its lengths lie, or an
// IPv6 datagram without a checksum (RFC 8200 forbids it).
// Parses an Ethernet frame (no vnet header). Checksums are not checked (a
// guest that can compute a good one gains nothing from a bad one). IP
// fragments (reassembled before this) and IPv6 extension headers are
// NotMine (libslirp's business); padding after the datagram is ignored.
Parse parse_datagram(std::span<const uint8_t> frame, Datagram &out);

// Whether a datagram of payload_len bytes fits the guest's MTU in one frame.
bool fits_mtu(const Endpoints &ep, size_t payload_len, uint32_t mtu);

// Writes the headers of a guest-bound datagram of payload_len bytes that
// fits the MTU into hdr (kMaxHeaders bytes) and returns their length; vnet
// gets NEEDS_CSUM with the pseudo-header sum in the UDP checksum field.
size_t build_datagram(uint8_t *hdr, VnetHdr &vnet, const Endpoints &ep,
                      size_t payload_len, uint16_t ip_id);

// Writes the headers of a UDP GSO frame (VIRTIO_NET_HDR_GSO_UDP_L4): a
// payload of payload_len bytes the guest's kernel splits into datagrams of
// seg bytes (the last may be shorter), each of which fits the MTU. Only
// where the tap takes them (TapIo::takes_udp_gso) and the IP datagram
// fits 16-bit lengths (fits_gso_frame).
bool fits_gso_frame(const Endpoints &ep, size_t payload_len);
size_t build_gso_datagrams(uint8_t *hdr, VnetHdr &vnet, const Endpoints &ep,
                           size_t payload_len, size_t seg, uint16_t ip_id);

// A datagram over the MTU, as IP fragments (the guest reassembles them).
// For each fragment in turn: next() writes its headers into hdr and sets
// the part of the payload that follows them; false when all are out.
class Fragments {
public:
    // payload must stay valid while the fragments are built; id: the IPv4
    // identification (16 bits used) or IPv6 fragment identification.
    Fragments(const Endpoints &ep, std::span<const uint8_t> payload, uint32_t mtu,
              uint32_t id);
    bool next(uint8_t *hdr, size_t &hdr_len, std::span<const uint8_t> &part);

private:
    const Endpoints &ep_;
    std::span<const uint8_t> payload_;
    size_t step_;   // bytes of IP payload per fragment, a multiple of 8
    size_t done_ = 0; // bytes of IP payload (UDP header + payload) sent
    uint32_t id_;
    uint16_t csum_; // the UDP checksum, complete
};

// What a host socket's error queue reported (sock_extended_err), or what
// the guest is told for an errno.
struct IcmpError {
    uint8_t type = 0, code = 0; // ICMP (v4) or ICMPv6 (v6) numbering
    uint32_t info = 0;          // next-hop MTU for "too big" errors
};

// The destination-unreachable error that stands for err, as a router or
// host would have sent it (libslirp and the echo path answer so too):
// ENETUNREACH net unreachable (ICMPv6 no route), EHOSTUNREACH, EHOSTDOWN
// and ENONET host (address) unreachable, ECONNREFUSED port unreachable,
// EACCES and EPERM administratively prohibited; nothing for any other.
std::optional<IcmpError> unreachable_for(int err, bool v6);

// Writes into out (kMaxIcmpFrame bytes) the Ethernet frame of an ICMP
// error from outer.remote to outer.guest (with outer's MACs) about the
// guest's datagram of the flow ep, of payload_len bytes whose first bytes
// quote holds (as many as fit the guest's MTU, at most kIcmpQuote);
// returns its length, checksums complete, or 0 if not even the quoted
// headers fit the MTU. outer is ep for an error from the flow's remote,
// or the gateway's endpoints for one the parent answers itself.
size_t build_icmp_error(uint8_t *out, const Endpoints &outer, const Endpoints &ep,
                        const IcmpError &e, std::span<const uint8_t> quote,
                        size_t payload_len, uint16_t ip_id, uint32_t mtu);

// A guest's ICMP port unreachable (ICMPv6 1/4) about a UDP datagram it got
// from us: the quoted datagram's addresses (IPv4-mapped unless v6) and
// ports in quoted (src: our side, dst: the guest's); false for anything
// else, or one not from the address the datagram went to.
bool parse_port_unreachable(std::span<const uint8_t> frame, Datagram &quoted);

} // namespace rknp::udp
