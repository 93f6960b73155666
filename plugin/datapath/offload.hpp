// SPDX-License-Identifier: Apache-2.0

// Tap offloads (IFF_VNET_HDR): every frame on the tap carries a 10-byte
// VnetHdr. Guest -> stack: the kernel hands us TCP super-frames of up to
// 64 KiB (TSO) with a partial checksum that we complete, so libslirp sees
// one large segment instead of dozens. Stack -> guest: frames we write
// carry a partial checksum the guest's kernel need not verify
// (coalescer.hpp merges segments into GSO frames).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rknp {

// struct virtio_net_hdr (linux/virtio_net.h is not valid C++). Its 16-bit
// fields are in host byte order on any host: this is the tap's legacy
// header (no TUNSETVNETLE/BE), which tun reads and writes in the kernel's
// native order, so VnetHdr goes to and from the tap as it is in memory.
struct VnetHdr {
    uint8_t flags;
    uint8_t gso_type;
    uint16_t hdr_len;
    uint16_t gso_size;
    uint16_t csum_start;
    uint16_t csum_offset;
};
inline constexpr uint8_t kVnetNeedsCsum = 1;
inline constexpr uint8_t kVnetGsoTcp4 = 1;
inline constexpr uint8_t kVnetGsoTcp6 = 4;
inline constexpr uint8_t kVnetGsoUdpL4 = 5; // Linux >= 6.2 on a tap
inline constexpr size_t kVnetHdrSize = sizeof(VnetHdr);
// The tap read buffer: vnet header plus a 64 KiB TSO super-frame plus its
// Ethernet header. No guest frame is longer.
inline constexpr size_t kTapFrameMax = 65536 + 1024;
static_assert(kVnetHdrSize == 10);

// Completes a kVnetNeedsCsum checksum in frame (Ethernet
// frame without the vnet header). Returns false if the offsets are bogus.
bool complete_checksum(std::span<uint8_t> frame, const VnetHdr &h);

// A frame read from the tap: the Ethernet frame (empty if too short for
// the vnet header) and, when the guest left its checksum partial, the vnet
// header that says where it goes.
struct TapFrame {
    std::span<uint8_t> eth;
    bool csum_partial = false;
    VnetHdr hdr{};
};
TapFrame split_tap_frame(std::span<uint8_t> raw, bool vnet);
// Completes a partial checksum (once); false if its offsets are bogus (the
// frame must be dropped). Only libslirp needs it: the fast path hands the
// payload to a host socket, so its frames skip the pass over every byte.
bool finish_checksum(TapFrame &f);

// Makes the TCP checksum of a guest-bound segment partial: writes the
// pseudo-header sum of its l4_len bytes into the checksum field of the
// headers at f (IP at l3_off, a 20-byte TCP header ending at hdr_len) and
// returns the vnet header that marks it NEEDS_CSUM. The guest's kernel then
// neither verifies it nor needs it unless the packet leaves its stack (tun
// ignores VIRTIO_NET_HDR_F_DATA_VALID on writes: the guest verified every
// segment flagged only with that).
VnetHdr partial_checksum(uint8_t *f, size_t l3_off, size_t hdr_len,
                         size_t l4_len, bool ipv6);
// The same for any header layout and protocol (kProtoTcp or kProtoUdp):
// the L4 header at l4_off, all headers ending at hdr_len.
inline constexpr uint8_t kProtoTcp = 6, kProtoUdp = 17;
VnetHdr partial_l4_checksum(uint8_t *f, size_t l3_off, size_t l4_off,
                            size_t hdr_len, size_t l4_len, bool ipv6,
                            uint8_t proto);

} // namespace rknp
