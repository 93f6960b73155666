// SPDX-License-Identifier: Apache-2.0

// Test frames for the IPv6 reassembly tests and fuzz target: a datagram and
// its fragments as a guest's kernel cuts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"

namespace rknp::test {

constexpr size_t kIpv6Head = 14 + 40; // Ethernet + IPv6 fixed header

// A whole IPv6 UDP datagram fd00::<src_last> -> fd00::2 (Ethernet frame)
// whose IP payload is payload_len bytes of a pattern that depends on seed.
inline std::vector<uint8_t> ipv6_datagram(size_t payload_len, uint8_t seed = 1,
                                          uint8_t src_last = 0x64) {
    std::vector<uint8_t> f(kIpv6Head + payload_len);
    std::memset(f.data(), 0x02, 12);
    put_be16(f.data() + 12, 0x86dd);
    uint8_t *ip = f.data() + 14;
    ip[0] = 0x60;
    put_be16(ip + 4, uint16_t(payload_len));
    ip[6] = 17;
    ip[7] = 64;
    ip[8] = 0xfd;
    ip[23] = src_last;
    ip[24] = 0xfd;
    ip[39] = 2;
    for (size_t i = 0; i < payload_len; ++i) ip[40 + i] = uint8_t(seed + i * 31);
    return f;
}

// The fragment of whole carrying payload bytes [off, off + len), as Linux
// builds it: the fixed header with next header 44, then the Fragment
// header (next header `next`, offset, M flag, identification).
inline std::vector<uint8_t> ipv6_fragment(const std::vector<uint8_t> &whole, size_t off,
                                          size_t len, bool more, uint32_t id = 0xabcd,
                                          uint8_t next = 17) {
    std::vector<uint8_t> f(kIpv6Head + 8 + len);
    std::memcpy(f.data(), whole.data(), kIpv6Head);
    uint8_t *ip = f.data() + 14;
    put_be16(ip + 4, uint16_t(8 + len));
    ip[6] = 44;
    uint8_t *fh = ip + 40;
    fh[0] = next;
    put_be16(fh + 2, uint16_t(off | (more ? 1 : 0)));
    put_be16(fh + 4, uint16_t(id >> 16));
    put_be16(fh + 6, uint16_t(id));
    if (len > 0) std::memcpy(f.data() + kIpv6Head + 8, whole.data() + kIpv6Head + off, len);
    return f;
}

} // namespace rknp::test
