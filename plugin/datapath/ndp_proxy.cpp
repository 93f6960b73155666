// SPDX-License-Identifier: Apache-2.0

// Neighbour advertisements for the host's IPv6 neighbours (see
// ndp_proxy.hpp).
#include "datapath/ndp_proxy.hpp"

#include <cstring>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp {

namespace {

constexpr uint16_t kIpv6Type = 0x86dd;
constexpr uint8_t kIcmpv6 = 58, kSolicit = 135, kAdvert = 136;
constexpr size_t kNsLen = 24; // kIp6Len: endpoints.hpp
constexpr uint8_t kOptTargetMac = 2;
constexpr uint8_t kFlagRouter = 0x80, kFlagSolicited = 0x40, kFlagOverride = 0x20;

// The ICMPv6 checksum's sum over the pseudo-header and the message.
uint64_t icmpv6_sum(const uint8_t *ip, const uint8_t *msg, size_t len) {
    const uint8_t tail[8] = {0, 0, uint8_t(len >> 8), uint8_t(len), 0, 0, 0, kIcmpv6};
    uint64_t sum = csum_add(0, ip + 8, 32); // source and destination
    sum = csum_add(sum, tail, sizeof tail);
    return csum_add(sum, msg, len);
}

// RFC 4861 7.1.1: every option has a non-zero length and lies within the
// message.
bool options_valid(const uint8_t *opt, size_t len) {
    while (len > 0) {
        if (len < 2 || opt[1] == 0 || size_t(opt[1]) * 8 > len) return false;
        len -= size_t(opt[1]) * 8;
        opt += size_t(opt[1]) * 8;
    }
    return true;
}

} // namespace

bool answer_neighbour_ndp(std::span<const uint8_t> frame, const NdpNetwork &net,
                          std::array<uint8_t, kNdpAdvertLen> &reply) {
    if (frame.size() < kEthLen + kIp6Len + kNsLen || be16(frame.data() + 12) != kIpv6Type)
        return false;
    const uint8_t *ip = frame.data() + kEthLen;
    const size_t payload = be16(ip + 4);
    // No extension headers (the kernel sends none with a solicitation);
    // hop limit 255: the solicitation was not forwarded (RFC 4861 7.1.1).
    if ((ip[0] >> 4) != 6 || ip[6] != kIcmpv6 || ip[7] != 255 || payload < kNsLen ||
        payload > frame.size() - kEthLen - kIp6Len)
        return false;
    const uint8_t *msg = ip + kIp6Len;
    if (msg[0] != kSolicit || msg[1] != 0) return false;
    in6_addr src{}, target{};
    std::memcpy(&src, ip + 8, 16);
    std::memcpy(&target, msg + 8, 16);
    // Duplicate address detection (source ::) is never answered: the guest
    // would take its own address for a duplicate.
    if (!is_global_unicast6(src) && !is_link_local6(src)) return false;
    const bool on_link = is_link_local6(target) ||
                         (net.prefix.contains(target) && is_global_unicast6(target));
    if (!on_link || same_ipv6(target, net.guest) || same_ipv6(target, src)) return false;
    if (!options_valid(msg + kNsLen, payload - kNsLen) ||
        csum_fold(icmpv6_sum(ip, msg, payload)) != 0xffff)
        return false;

    uint8_t mac[6];
    gateway_mac6(target.s6_addr, mac);
    uint8_t *r = reply.data();
    std::memcpy(r, frame.data() + 6, 6); // Ethernet: to the asker
    std::memcpy(r + 6, mac, 6);
    put_be16(r + 12, kIpv6Type);
    uint8_t *rip = r + kEthLen;
    constexpr size_t kAdvertLen = kNdpAdvertLen - kEthLen - kIp6Len;
    std::memset(rip, 0, kIp6Len);
    rip[0] = 0x60;
    put_be16(rip + 4, kAdvertLen);
    rip[6] = kIcmpv6;
    rip[7] = 255;
    std::memcpy(rip + 8, &target, 16);
    std::memcpy(rip + 24, &src, 16);
    uint8_t *na = rip + kIp6Len;
    std::memset(na, 0, kAdvertLen);
    na[0] = kAdvert;
    na[4] = uint8_t(kFlagSolicited | kFlagOverride |
                    (same_ipv6(target, net.gateway) ? kFlagRouter : 0));
    std::memcpy(na + 8, &target, 16);
    na[24] = kOptTargetMac;
    na[25] = 1; // 8 bytes
    std::memcpy(na + 26, mac, 6);
    put_be16(na + 2, uint16_t(~csum_fold(icmpv6_sum(rip, na, kAdvertLen))));
    return true;
}

} // namespace rknp
