// SPDX-License-Identifier: Apache-2.0

// On-wire values are byte-order neutral: known byte vectors give known
// checksums and fields on any host, and the word-at-a-time checksum equals
// a byte-wise big-endian reference at every length and alignment. A sum or
// field handled in host order instead fails here on little- and big-endian
// hosts alike.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/offload.hpp"

using namespace rknp;

namespace {

// RFC 1071 by definition: big-endian 16-bit words from explicit bytes.
uint16_t reference_fold(const uint8_t *p, size_t len) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2) sum += uint32_t(p[i]) << 8 | p[i + 1];
    if (len % 2) sum += uint32_t(p[len - 1]) << 8;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(sum);
}

} // namespace

TEST_CASE("checksum of RFC 1071's example bytes is 0xddf2 on any host") {
    const uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    CHECK(csum_fold(csum_add(0, data, sizeof data)) == 0xddf2);
}

TEST_CASE("a known IPv4 header's checksum is 0xb861 and verifies") {
    uint8_t ip[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                      0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    uint16_t sum = uint16_t(~csum_fold(csum_add(0, ip, sizeof ip)));
    CHECK(sum == 0xb861);
    put_be16(ip + 10, sum);
    CHECK(ip[10] == 0xb8);
    CHECK(ip[11] == 0x61);
    CHECK(csum_fold(csum_add(0, ip, sizeof ip)) == 0xffff);
    // set_ipv4_checksum gives the same bytes whatever the field held
    // before (frames are built in reused buffers).
    ip[10] = 0x12;
    ip[11] = 0x34;
    set_ipv4_checksum(ip, sizeof ip);
    CHECK(ip[10] == 0xb8);
    CHECK(ip[11] == 0x61);
}

TEST_CASE("an odd trailing byte is the high half of a big-endian word") {
    const uint8_t data[] = {0x01, 0x02, 0x03};
    CHECK(csum_fold(csum_add(0, data, 3)) == 0x0402);
    const uint8_t one[] = {0xab};
    CHECK(csum_fold(csum_add(0, one, 1)) == 0xab00);
}

TEST_CASE("word-at-a-time checksum equals the byte-wise reference") {
    std::mt19937 rng(14);
    std::vector<uint8_t> buf(300);
    for (auto &b : buf) b = uint8_t(rng());
    for (size_t off = 0; off < 8; ++off)
        for (size_t len = 0; len + off <= buf.size(); ++len) {
            CAPTURE(off);
            CAPTURE(len);
            REQUIRE(csum_fold(csum_add(0, buf.data() + off, len)) ==
                    reference_fold(buf.data() + off, len));
        }
    // Even-length pieces chain like one buffer (pseudo-header + segment).
    CHECK(csum_fold(csum_add(csum_add(0, buf.data(), 32), buf.data() + 32, 101)) ==
          reference_fold(buf.data(), 133));
}

TEST_CASE("big-endian field helpers read and write explicit bytes") {
    const uint8_t b[] = {0x12, 0x34, 0x56, 0x78};
    CHECK(be16(b) == 0x1234);
    CHECK(be32(b) == 0x12345678u);
    uint8_t out[2];
    put_be16(out, 0xbeef);
    CHECK(out[0] == 0xbe);
    CHECK(out[1] == 0xef);
}

TEST_CASE("partial checksum: known pseudo-header bytes and vnet fields, "
          "completed to a verifying TCP checksum") {
    // Ethernet + IPv4 10.0.2.2 -> 10.0.2.100 + a 20-byte TCP header + 3 bytes.
    std::vector<uint8_t> f(14 + 20 + 20 + 3, 0);
    f[12] = 0x08;
    uint8_t *ip = f.data() + 14;
    ip[0] = 0x45;
    ip[9] = 6;
    const uint8_t src[] = {10, 0, 2, 2}, dst[] = {10, 0, 2, 100};
    std::copy(src, src + 4, ip + 12);
    std::copy(dst, dst + 4, ip + 16);
    uint8_t *tcp = ip + 20;
    put_be16(tcp, 80);
    put_be16(tcp + 2, 40000);
    tcp[12] = 5 << 4;
    tcp[20] = 'a';
    tcp[21] = 'b';
    tcp[22] = 'c';
    VnetHdr h = partial_checksum(f.data(), 14, 54, 23, false);
    // 0x0a00 + 0x0202 + 0x0a00 + 0x0264 + 0x0006 + 0x0017 = 0x1883.
    CHECK(tcp[16] == 0x18);
    CHECK(tcp[17] == 0x83);
    CHECK(h.flags == kVnetNeedsCsum);
    CHECK(h.hdr_len == 54);
    CHECK(h.csum_start == 34);
    CHECK(h.csum_offset == 16);

    REQUIRE(complete_checksum(f, h));
    // The receiver's check: pseudo-header + segment sums to 0xffff.
    const uint8_t pseudo[] = {10, 0, 2, 2, 10, 0, 2, 100, 0, 6, 0, 23};
    CHECK(csum_fold(csum_add(csum_add(0, pseudo, sizeof pseudo), tcp, 23)) == 0xffff);
    CHECK(reference_fold(tcp, 23) != 0); // the field was filled in
}
