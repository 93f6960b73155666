// SPDX-License-Identifier: Apache-2.0

// Keyed hashing for the fixed-size tables guest traffic fills (fast-path
// flows, libslirp's guest sockets): a multiply-xorshift mixing step, an
// unaligned 64-bit load and power-of-two table sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rknp {

inline uint64_t hash_mix(uint64_t h, uint64_t v) {
    h ^= v;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// The smallest power of two, at least 16, that is >= n.
inline size_t pow2_at_least(size_t n) {
    size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

} // namespace rknp
