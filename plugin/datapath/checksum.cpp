// RFC 1071 Internet checksum arithmetic.
#include "datapath/checksum.hpp"

#include <cstring>

namespace rknp {

uint64_t csum_add(uint64_t sum, const uint8_t *data, size_t len) {
    // Sum big-endian 16-bit words, 8 bytes at a time; a 64-bit accumulator
    // cannot overflow for frames up to 64 KiB.
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
    if (len == 1) sum += data[0]; // little-endian: low byte is first
    return sum;
}

uint16_t csum_fold(uint64_t sum) {
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    // Words were summed in host (little-endian) order: swap back.
    auto s = uint16_t(sum);
    return uint16_t((s >> 8) | (s << 8));
}

} // namespace rknp
