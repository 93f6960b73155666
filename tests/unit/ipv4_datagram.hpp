// SPDX-License-Identifier: Apache-2.0

// Test frames for the IPv4 reassembly tests and fuzz target: a datagram
// and its fragments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"

namespace rknp::test {

// Recomputes the IPv4 header checksum of an Ethernet frame.
inline void set_ip_checksum(std::vector<uint8_t> &f) {
    put_be16(f.data() + 24, 0);
    put_be16(f.data() + 24, uint16_t(~csum_fold(csum_add(0, f.data() + 14, 20))));
}

// A whole IPv4 UDP datagram 10.0.2.100 -> 10.0.2.2 (Ethernet frame) whose
// IP payload is payload_len bytes of a pattern that depends on seed.
inline std::vector<uint8_t> ipv4_datagram(size_t payload_len, uint16_t id = 0x1234,
                                          uint8_t seed = 1) {
    std::vector<uint8_t> f(14 + 20 + payload_len);
    std::memset(f.data(), 0x02, 12);
    f[12] = 0x08;
    uint8_t *ip = f.data() + 14;
    ip[0] = 0x45;
    put_be16(ip + 2, uint16_t(20 + payload_len));
    put_be16(ip + 4, id);
    ip[8] = 64;
    ip[9] = 17;
    const uint8_t src[4] = {10, 0, 2, 100}, dst[4] = {10, 0, 2, 2};
    std::memcpy(ip + 12, src, 4);
    std::memcpy(ip + 16, dst, 4);
    for (size_t i = 0; i < payload_len; ++i) ip[20 + i] = uint8_t(seed + i * 31);
    set_ip_checksum(f);
    return f;
}

// The fragment of whole carrying payload bytes [off, off + len), as a
// guest's kernel cuts it: the same header with its length, MF flag and
// offset, and the checksum again.
inline std::vector<uint8_t> ipv4_fragment(const std::vector<uint8_t> &whole, size_t off,
                                          size_t len, bool more) {
    std::vector<uint8_t> f(34 + len);
    std::memcpy(f.data(), whole.data(), 34);
    if (len > 0) std::memcpy(f.data() + 34, whole.data() + 34 + off, len);
    put_be16(f.data() + 16, uint16_t(20 + len));
    put_be16(f.data() + 20, uint16_t((more ? 0x2000 : 0) | (off / 8)));
    set_ip_checksum(f);
    return f;
}

} // namespace rknp::test
