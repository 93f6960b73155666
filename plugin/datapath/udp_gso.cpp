// SPDX-License-Identifier: Apache-2.0

// Splitting a guest's UDP GSO super-frame into its datagrams.
#include "datapath/udp_gso.hpp"

#include <algorithm>
#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp {

namespace {

constexpr size_t kUdpHdr = 8;
constexpr uint16_t kEtherIpv4 = 0x0800, kEtherIpv6 = 0x86dd;

} // namespace

UdpGsoSplitter::UdpGsoSplitter() : buf_(kTapFrameMax) {}

bool UdpGsoSplitter::start(std::span<const uint8_t> frame, const VnetHdr &h) {
    frame_ = {};
    if (frame.size() < kEthLen || h.gso_size == 0) return false;
    const uint8_t *ip = frame.data() + kEthLen;
    const size_t ip_room = frame.size() - kEthLen;
    size_t ip_hl = 0, ip_total = 0;
    switch (be16(frame.data() + 12)) {
    case kEtherIpv4:
        if (ip_room < kIp4Len || ip[0] >> 4 != 4) return false;
        ip_hl = size_t(ip[0] & 0x0f) * 4;
        ip_total = be16(ip + 2);
        // Not a fragment (MF or an offset): no GSO frame is one.
        if (ip_hl < kIp4Len || ip[9] != kProtoUdp || (be16(ip + 6) & 0x3fff) != 0)
            return false;
        v6_ = false;
        ip_id_ = be16(ip + 4);
        break;
    case kEtherIpv6:
        // UDP right after the fixed header: the kernel's UDP GSO sends
        // carry no extension headers.
        if (ip_room < kIp6Len || ip[0] >> 4 != 6 || ip[6] != kProtoUdp) return false;
        ip_hl = kIp6Len;
        ip_total = kIp6Len + be16(ip + 4);
        v6_ = true;
        break;
    default:
        return false;
    }
    // The IP length bounds the datagram (the UDP length field of a
    // super-frame is not the kernel's to keep); padding after it is dropped.
    if (ip_total < ip_hl + kUdpHdr || ip_total > ip_room) return false;
    const size_t payload = ip_total - ip_hl - kUdpHdr;
    if (payload == 0 || (payload + h.gso_size - 1) / h.gso_size > kMaxSegments) return false;
    frame_ = frame;
    l3_off_ = kEthLen;
    l4_off_ = kEthLen + ip_hl;
    payload_off_ = l4_off_ + kUdpHdr;
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
    uint8_t *ip = f + l3_off_;
    const size_t l4_len = kUdpHdr + n;
    if (v6_) {
        put_be16(ip + 4, uint16_t(l4_len));
    } else {
        const size_t ip_hl = l4_off_ - l3_off_;
        put_be16(ip + 2, uint16_t(ip_hl + l4_len));
        // Each datagram its own identification, as the guest's kernel
        // would have numbered them.
        put_be16(ip + 4, ip_id_++);
        put_be16(ip + 10, 0);
        put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, ip_hl))));
    }
    put_be16(f + l4_off_ + 4, uint16_t(l4_len));
    out.eth = {f, payload_off_ + n};
    out.hdr = partial_l4_checksum(f, l3_off_, l4_off_, payload_off_, l4_len, v6_, kProtoUdp);
    out.csum_partial = true;
    done_ += n;
    return true;
}

} // namespace rknp
