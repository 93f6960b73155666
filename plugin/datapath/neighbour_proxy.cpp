// SPDX-License-Identifier: Apache-2.0

// ARP answers for the host's neighbours (see neighbour_proxy.hpp).
#include "datapath/neighbour_proxy.hpp"

#include <cstring>

#include "datapath/flows/endpoints.hpp"

namespace rknp {

namespace {

constexpr uint16_t kArpType = 0x0806, kIpv4Type = 0x0800;
constexpr uint16_t kHwEther = 1, kOpRequest = 1, kOpReply = 2;

uint16_t get16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t get32(const uint8_t *p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
void put16(uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v >> 8);
    p[1] = uint8_t(v);
}

} // namespace

bool answer_neighbour_arp(std::span<const uint8_t> frame, const Ipv4Cidr &net,
                          std::array<uint8_t, kArpFrameLen> &reply) {
    if (frame.size() < kArpFrameLen || get16(frame.data() + 12) != kArpType) return false;
    const uint8_t *arp = frame.data() + kEthLen;
    // Ethernet/IPv4 only: hardware type, protocol, their lengths, op.
    if (get16(arp) != kHwEther || get16(arp + 2) != kIpv4Type || arp[4] != 6 ||
        arp[5] != 4 || get16(arp + 6) != kOpRequest)
        return false;
    const uint8_t *sender_mac = arp + 8, *sender_ip = arp + 14, *target_ip = arp + 24;
    const uint32_t target = get32(target_ip);
    if (!net.contains(target) || target == net.guest() || target == net.network ||
        target == net.broadcast() || target == get32(sender_ip))
        return false;
    uint8_t mac[6];
    gateway_mac4(ipv4_bytes(net.gateway()).data(), mac);
    uint8_t *r = reply.data();
    std::memcpy(r, sender_mac, 6); // Ethernet: to the asker, from "target"
    std::memcpy(r + 6, mac, 6);
    put16(r + 12, kArpType);
    uint8_t *a = r + kEthLen;
    std::memcpy(a, arp, 6); // hardware/protocol types and lengths
    put16(a + 6, kOpReply);
    std::memcpy(a + 8, mac, 6);
    std::memcpy(a + 14, target_ip, 4);
    std::memcpy(a + 18, sender_mac, 6);
    std::memcpy(a + 24, sender_ip, 4);
    return true;
}

} // namespace rknp
