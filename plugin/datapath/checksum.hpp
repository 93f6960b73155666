// SPDX-License-Identifier: Apache-2.0

// Internet checksum helpers (RFC 1071) and big-endian field access for the
// frame path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rknp {

// One's-complement sum of data, added to sum (not folded).
uint64_t csum_add(uint64_t sum, const uint8_t *data, size_t len);
// Folds a sum to 16 bits (not complemented): the big-endian value of the
// checksum field, on any host (store it with put_be16).
uint16_t csum_fold(uint64_t sum);

inline uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t be32(const uint8_t *p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 |
           p[3];
}
inline void put_be16(uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v >> 8);
    p[1] = uint8_t(v);
}

// Fills in the checksum of the IPv4 header at ip (header_len bytes, options
// included), every other field already in place.
inline void set_ipv4_checksum(uint8_t *ip, size_t header_len) {
    put_be16(ip + 10, 0);
    put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, header_len))));
}

} // namespace rknp
