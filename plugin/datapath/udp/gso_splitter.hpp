// SPDX-License-Identifier: Apache-2.0

// A guest's UDP GSO super-frame (VIRTIO_NET_HDR_GSO_UDP_L4: the tap's
// TUN_F_USO4/6 offload, Linux >= 6.2), split into the datagrams it stands
// for. A guest application that sends with UDP_SEGMENT (QUIC stacks do)
// hands the stack up to 64 KiB in one tap read instead of one read per
// datagram; every consumer of guest frames (the UDP fast path, libslirp,
// the filters) then sees ordinary datagrams, one frame each, with the
// partial checksum a guest would have left. The fast path joins them
// again into one UDP_SEGMENT send. Every field is the guest's and checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "datapath/offload.hpp"

namespace rknp {

class UdpGsoSplitter {
public:
    // The kernel's own cap on one UDP_SEGMENT send (UDP_MAX_SEGMENTS);
    // a super-frame of more datagrams is no guest kernel's.
    static constexpr size_t kMaxSegments = 128;

    UdpGsoSplitter();
    // Whether the tap frame is a UDP GSO super-frame.
    static bool is_udp_gso(const VnetHdr &h) { return (h.gso_type & 0x7f) == kVnetGsoUdpL4; }
    // Checks an Ethernet/IPv4|IPv6/UDP super-frame (no vnet header; h is
    // its vnet header) and starts splitting it; false: malformed (an IP
    // fragment, IPv6 extension headers, lengths that lie, no payload, a
    // gso_size of 0 or more than kMaxSegments datagrams). frame must stay
    // valid while next() is called.
    bool start(std::span<const uint8_t> frame, const VnetHdr &h);
    // The next datagram's frame, built in this object's buffer (valid
    // until the next call); false when all are out.
    bool next(TapFrame &out);

private:
    std::vector<uint8_t> buf_; // one datagram's frame
    std::span<const uint8_t> frame_;
    size_t l4_off_ = 0, payload_off_ = 0, payload_len_ = 0; // in the frame
    size_t seg_ = 0, done_ = 0;
    uint16_t ip_id_ = 0;
    bool v6_ = false;
};

} // namespace rknp
