// SPDX-License-Identifier: Apache-2.0

// Address and MAC helpers shared by the fast paths.
#include "datapath/flows/endpoints.hpp"

#include <cstring>

namespace rknp {

void gateway_mac4(const uint8_t gw4[4], uint8_t mac[6]) {
    mac[0] = 0x52;
    mac[1] = 0x55;
    std::memcpy(mac + 2, gw4, 4);
}

void gateway_mac6(const uint8_t src6[16], uint8_t mac[6]) {
    mac[0] = 0x52;
    mac[1] = 0x56;
    std::memcpy(mac + 2, src6 + 12, 4);
}

void gateway_arp_request(uint32_t gateway4, const uint8_t guest4[4],
                         uint8_t f[kArpRequestLen]) {
    std::memset(f, 0, kArpRequestLen);
    std::memset(f, 0xff, 6);
    const std::array<uint8_t, 4> gw = ipv4_bytes(gateway4);
    gateway_mac4(gw.data(), f + 6);
    f[12] = 0x08;
    f[13] = 0x06;
    const uint8_t arp[8] = {0, 1, 0x08, 0x00, 6, 4, 0, 1}; // Ethernet, IPv4, request
    std::memcpy(f + 14, arp, 8);
    std::memcpy(f + 22, f + 6, 6); // sender MAC
    std::memcpy(f + 28, gw.data(), 4); // sender IP
    std::memcpy(f + 38, guest4, 4);    // target IP
}

bool learn_guest_mac(std::span<const uint8_t> frame, uint8_t mac[6], bool &known) {
    if (frame.size() < kEthLen) return false;
    const uint8_t *src = frame.data() + 6;
    if (known && std::memcmp(src, mac, 6) == 0) return false;
    static const uint8_t zero[6] = {};
    if ((src[0] & 1) != 0 || std::memcmp(src, zero, 6) == 0) return false; // not unicast
    std::memcpy(mac, src, 6);
    known = true;
    return true;
}

void map_v4(const uint8_t v4[4], uint8_t out[16]) {
    std::memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    std::memcpy(out + 12, v4, 4);
}

bool is_mapped_v4(const uint8_t a[16]) {
    static constexpr uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(a, prefix, 12) == 0;
}

uint32_t ipv4_of(const uint8_t a[16]) {
    return uint32_t(a[12]) << 24 | uint32_t(a[13]) << 16 | uint32_t(a[14]) << 8 | a[15];
}

std::array<uint8_t, 4> ipv4_bytes(uint32_t a) {
    return {uint8_t(a >> 24), uint8_t(a >> 16), uint8_t(a >> 8), uint8_t(a)};
}

} // namespace rknp
