// SPDX-License-Identifier: Apache-2.0

// Ethertype filter and urgent-data removal for guest frames.
#include "datapath/guest_filter.hpp"

#include <cstring>

#include "datapath/checksum.hpp"

namespace rknp {

namespace {

constexpr size_t kEthLen = 14;
constexpr uint16_t kArp = 0x0806, kIpv4 = 0x0800, kIpv6 = 0x86dd;
constexpr uint8_t kTcp = 6, kUrg = 0x20;

// Offset of the TCP header of an unfragmented segment, 0 if none.
size_t tcp_offset(std::span<const uint8_t> f) {
    if (f.size() < kEthLen + 20 + 20) return 0;
    const uint8_t *ip = f.data() + kEthLen;
    switch (be16(f.data() + 12)) {
    case kIpv4: {
        size_t ihl = size_t(ip[0] & 0x0f) * 4;
        if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != kTcp ||
            (be16(ip + 6) & 0x3fff) != 0 || be16(ip + 2) < ihl + 20 ||
            f.size() < kEthLen + ihl + 20)
            return 0;
        return kEthLen + ihl;
    }
    case kIpv6:
        if ((ip[0] >> 4) != 6 || ip[6] != kTcp || be16(ip + 4) < 20 ||
            f.size() < kEthLen + 40 + 20)
            return 0;
        return kEthLen + 40;
    default:
        return 0;
    }
}

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for one 16-bit word m -> m'.
// Values are 16-bit words as read from the wire (be16), so the sum is
// folded here rather than by csum_fold, which works on csum_add's sums.
uint16_t update_checksum(uint16_t hc, uint16_t m, uint16_t m_new) {
    uint32_t sum = uint32_t(uint16_t(~hc)) + uint16_t(~m) + m_new;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(~sum);
}

} // namespace

bool guest_source_allowed(std::span<const uint8_t> f, const Ipv4Cidr &net,
                          const in6_addr &prefix6, uint32_t prefix6_len) {
    if (f.size() < kEthLen) return false;
    const uint8_t *l3 = f.data() + kEthLen;
    auto ipv4_ok = [&](const uint8_t *a) {
        uint32_t src = be32(a);
        return src == 0 || (src & net.netmask()) == net.network;
    };
    switch (be16(f.data() + 12)) {
    case kArp: // sender protocol address at 14 of an Ethernet/IPv4 ARP
        return f.size() >= kEthLen + 28 && ipv4_ok(l3 + 14);
    case kIpv4:
        return f.size() >= kEthLen + 20 && ipv4_ok(l3 + 12);
    case kIpv6: {
        if (f.size() < kEthLen + 40) return false;
        const uint8_t *src = l3 + 8;
        static constexpr uint8_t kZero[16] = {};
        bool link_local = src[0] == 0xfe && (src[1] & 0xc0) == 0x80;
        return link_local || Ipv6Prefix{prefix6, prefix6_len}.contains(src) ||
               std::memcmp(src, kZero, 16) == 0;
    }
    default:
        return false;
    }
}

bool libslirp_ethertype(std::span<const uint8_t> frame) {
    if (frame.size() < kEthLen) return false;
    uint16_t type = be16(frame.data() + 12);
    return type == kArp || type == kIpv4 || type == kIpv6;
}

bool router_message_from_guest(std::span<const uint8_t> frame) {
    constexpr uint8_t kIcmp6 = 58, kRouterAdvert = 134, kRedirect = 137;
    if (frame.size() < kEthLen + 40 + 1 || be16(frame.data() + 12) != kIpv6)
        return false;
    const uint8_t *ip = frame.data() + kEthLen;
    uint8_t type = ip[40];
    return ip[6] == kIcmp6 && (type == kRouterAdvert || type == kRedirect);
}

bool strip_urgent(std::span<uint8_t> frame) {
    size_t off = tcp_offset(frame);
    if (off == 0) return false;
    uint8_t *tcp = frame.data() + off;
    uint16_t flags_word = be16(tcp + 12), urp = be16(tcp + 18);
    if ((flags_word & kUrg) == 0 && urp == 0) return false;
    uint16_t cleared = uint16_t(flags_word & ~kUrg);
    uint16_t sum = be16(tcp + 16);
    sum = update_checksum(sum, flags_word, cleared);
    sum = update_checksum(sum, urp, 0);
    put_be16(tcp + 12, cleared);
    put_be16(tcp + 18, 0);
    put_be16(tcp + 16, sum);
    return true;
}

} // namespace rknp
