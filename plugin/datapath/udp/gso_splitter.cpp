// SPDX-License-Identifier: Apache-2.0

// Splitting a guest's UDP GSO super-frame into its datagrams.
#include "datapath/udp/gso_splitter.hpp"

#include <algorithm>
#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"
#include "datapath/flows/ip_packet.hpp"
#include "datapath/udp/frame.hpp"

namespace rknp {

UdpGsoSplitter::UdpGsoSplitter() : buf_(kTapFrameMax) {}

bool UdpGsoSplitter::start(std::span<const uint8_t> frame, const VnetHdr &h) {
    frame_ = {};
    // One unfragmented IPv4 or IPv6 UDP packet, UDP right after the fixed
    // IPv6 header (the kernel's UDP GSO sends carry no extension headers).
    // The IP length bounds the datagram (the UDP length field of a
    // super-frame is not the kernel's to keep); padding after it is dropped.
    IpPacket p;
    if (h.gso_size == 0 || parse_ip(frame, kProtoUdp, kProtoUdp, p) != Parse::Ok ||
        p.l4.size() < udp::kUdpLen)
        return false;
    const size_t payload = p.l4.size() - udp::kUdpLen;
    if (payload == 0 || (payload + h.gso_size - 1) / h.gso_size > kMaxSegments) return false;
    v6_ = p.v6;
    if (!v6_) ip_id_ = be16(p.header.data() + 4);
    frame_ = frame;
    l4_off_ = kEthLen + p.header.size();
    payload_off_ = l4_off_ + udp::kUdpLen;
    payload_len_ = payload;
    seg_ = h.gso_size;
    done_ = 0;
    return true;
}

bool UdpGsoSplitter::next(TapFrame &out) {
    if (frame_.empty() || done_ >= payload_len_) return false;
    const size_t n = std::min(seg_, payload_len_ - done_);
    uint8_t *f = buf_.data();
    std::memcpy(f, frame_.data(), payload_off_); // Ethernet, IP and UDP headers
    std::memcpy(f + payload_off_, frame_.data() + payload_off_ + done_, n);
    uint8_t *ip = f + kEthLen;
    const size_t l4_len = udp::kUdpLen + n;
    if (v6_) {
        put_be16(ip + 4, uint16_t(l4_len));
    } else {
        const size_t ip_hl = l4_off_ - kEthLen;
        put_be16(ip + 2, uint16_t(ip_hl + l4_len));
        // Each datagram its own identification, as the guest's kernel
        // would have numbered them.
        put_be16(ip + 4, ip_id_++);
        set_ipv4_checksum(ip, ip_hl);
    }
    put_be16(f + l4_off_ + 4, uint16_t(l4_len));
    out.eth = {f, payload_off_ + n};
    out.hdr = partial_l4_checksum(f, kEthLen, l4_off_, payload_off_, l4_len, v6_, kProtoUdp);
    out.csum_partial = true;
    done_ += n;
    return true;
}

} // namespace rknp
