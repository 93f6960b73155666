// SPDX-License-Identifier: Apache-2.0

// RFC 1071 Internet checksum arithmetic.
#include "datapath/checksum.hpp"

#include <bit>
#include <cstring>

namespace rknp {

// The one's-complement sum is byte-order independent (RFC 1071 2.B): words
// are added as the host loads them, 8 bytes at a time, and csum_fold turns
// the result into the big-endian value. Only a trailing odd byte and the
// fold depend on the host's byte order, both chosen at compile time.
constexpr bool kLittleEndian = std::endian::native == std::endian::little;
static_assert(kLittleEndian || std::endian::native == std::endian::big);

uint64_t csum_add(uint64_t sum, const uint8_t *data, size_t len) {
    // A 64-bit accumulator cannot overflow for frames up to 64 KiB.
    while (len >= 8) {
        uint64_t w;
        std::memcpy(&w, data, 8);
        sum += (w & 0xffffffff) + (w >> 32);
        data += 8;
        len -= 8;
    }
    while (len >= 2) {
        uint16_t w;
        std::memcpy(&w, data, 2);
        sum += w;
        data += 2;
        len -= 2;
    }
    // The odd byte is the high half of a big-endian word padded with zero:
    // where a host-order load of that word puts it.
    if (len == 1) sum += kLittleEndian ? data[0] : uint64_t(data[0]) << 8;
    return sum;
}

uint16_t csum_fold(uint64_t sum) {
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    // Words were summed in host order: big-endian is the result as is,
    // little-endian swaps back.
    auto s = uint16_t(sum);
    return kLittleEndian ? uint16_t((s >> 8) | (s << 8)) : s;
}

} // namespace rknp
