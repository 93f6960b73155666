// SPDX-License-Identifier: Apache-2.0

// The Ethernet and IP prelude the fast paths share (flows/ip_packet):
// verdicts for truncations at every byte, fragments, IPv4 options, IPv6
// extension headers and lengths that lie, and what an Ok packet spans.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/flows/endpoints.hpp"
#include "datapath/flows/ip_packet.hpp"

using namespace rknp;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint8_t kUdp = 17, kIcmp = 1, kIcmp6 = 58;

// An IPv4 frame 10.0.2.100 -> 192.0.2.7 of protocol proto with opt_len
// bytes of options (a multiple of 4) and l4_len bytes of IP payload.
Bytes v4(uint8_t proto, size_t l4_len, size_t opt_len = 0) {
    const size_t ihl = kIp4Len + opt_len;
    Bytes f(kEthLen + ihl + l4_len, 0);
    std::memset(f.data(), 0x02, 12);
    put_be16(f.data() + 12, 0x0800);
    uint8_t *ip = f.data() + kEthLen;
    ip[0] = uint8_t(0x40 | ihl / 4);
    put_be16(ip + 2, uint16_t(ihl + l4_len));
    put_be16(ip + 6, 0x4000); // DF: not a fragment
    ip[8] = 64;
    ip[9] = proto;
    const uint8_t src[4] = {10, 0, 2, 100}, dst[4] = {192, 0, 2, 7};
    std::memcpy(ip + 12, src, 4);
    std::memcpy(ip + 16, dst, 4);
    std::memset(ip + kIp4Len, 0x01, opt_len); // NOPs
    for (size_t i = 0; i < l4_len; ++i) ip[ihl + i] = uint8_t(0x80 + i);
    return f;
}

// An IPv6 frame fd00::100 -> 2001:db8::1 whose next header is nh and whose
// payload is l4_len bytes.
Bytes v6(uint8_t nh, size_t l4_len) {
    Bytes f(kEthLen + kIp6Len + l4_len, 0);
    std::memset(f.data(), 0x02, 12);
    put_be16(f.data() + 12, 0x86dd);
    uint8_t *ip = f.data() + kEthLen;
    ip[0] = 0x60;
    put_be16(ip + 4, uint16_t(l4_len));
    ip[6] = nh;
    ip[7] = 64;
    ip[8] = 0xfd; // fd00::100
    ip[22] = 0x01;
    ip[24] = 0x20;
    ip[25] = 0x01;
    ip[26] = 0x0d;
    ip[27] = 0xb8;
    ip[39] = 0x01;
    for (size_t i = 0; i < l4_len; ++i) ip[kIp6Len + i] = uint8_t(0x80 + i);
    return f;
}

Parse parse(const Bytes &f, uint8_t proto4 = kUdp, uint8_t proto6 = kUdp) {
    IpPacket p;
    return parse_ip(f, proto4, proto6, p);
}

} // namespace

TEST_CASE("ip_packet: IPv4 Ok: mapped addresses, header and payload spans") {
    Bytes f = v4(kUdp, 12);
    f.resize(f.size() + 6, 0xee); // Ethernet padding
    IpPacket p;
    REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Ok);
    CHECK_FALSE(p.v6);
    const uint8_t src[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 100};
    const uint8_t dst[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7};
    CHECK(std::memcmp(p.src, src, 16) == 0);
    CHECK(std::memcmp(p.dst, dst, 16) == 0);
    CHECK(p.header.data() == f.data() + kEthLen);
    CHECK(p.header.size() == kIp4Len);
    CHECK(p.l4.data() == f.data() + kEthLen + kIp4Len);
    CHECK(p.l4.size() == 12); // the padding left out
    CHECK(p.l4[0] == 0x80);
}

TEST_CASE("ip_packet: IPv6 Ok: addresses, header and payload spans") {
    Bytes f = v6(kIcmp6, 9);
    f.resize(f.size() + 3, 0xee);
    IpPacket p;
    REQUIRE(parse_ip(f, kIcmp, kIcmp6, p) == Parse::Ok);
    CHECK(p.v6);
    CHECK(std::memcmp(p.src, f.data() + kEthLen + 8, 16) == 0);
    CHECK(std::memcmp(p.dst, f.data() + kEthLen + 24, 16) == 0);
    CHECK(p.src[0] == 0xfd);
    CHECK(p.dst[15] == 0x01);
    CHECK(p.header.data() == f.data() + kEthLen);
    CHECK(p.header.size() == kIp6Len);
    CHECK(p.l4.data() == f.data() + kEthLen + kIp6Len);
    CHECK(p.l4.size() == 9);
    // A payload length of 0 is an empty packet here (the callers decide).
    f = v6(kUdp, 0);
    REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Ok);
    CHECK(p.l4.empty());
}

TEST_CASE("ip_packet: truncation at every byte") {
    SUBCASE("IPv4 with options") {
        const Bytes good = v4(kUdp, 16, 8);
        REQUIRE(parse(good) == Parse::Ok);
        for (size_t n = 0; n < good.size(); ++n) {
            CAPTURE(n);
            Bytes t(good.begin(), good.begin() + long(n));
            // Too short for Ethernet + the fixed IPv4 header: not looked
            // into; past that, the total length lies.
            CHECK(parse(t) == (n < kEthLen + kIp4Len ? Parse::NotMine : Parse::Malformed));
        }
    }
    SUBCASE("IPv6") {
        const Bytes good = v6(kUdp, 16);
        REQUIRE(parse(good) == Parse::Ok);
        for (size_t n = 0; n < good.size(); ++n) {
            CAPTURE(n);
            Bytes t(good.begin(), good.begin() + long(n));
            CHECK(parse(t) == (n < kEthLen + kIp6Len ? Parse::NotMine : Parse::Malformed));
        }
    }
    SUBCASE("an empty IP payload: the headers alone parse") {
        Bytes f = v4(kUdp, 0);
        CHECK(parse(f) == Parse::Ok);
        f = v6(kUdp, 0);
        CHECK(parse(f) == Parse::Ok);
    }
}

TEST_CASE("ip_packet: IPv4 fragments are NotMine, DF alone is not one") {
    Bytes f = v4(kUdp, 8);
    put_be16(f.data() + kEthLen + 6, 0x2000); // MF, first fragment
    CHECK(parse(f) == Parse::NotMine);
    put_be16(f.data() + kEthLen + 6, 0x0001); // offset 8, last fragment
    CHECK(parse(f) == Parse::NotMine);
    put_be16(f.data() + kEthLen + 6, 0x1fff);
    CHECK(parse(f) == Parse::NotMine);
    put_be16(f.data() + kEthLen + 6, 0x6000); // DF | MF
    CHECK(parse(f) == Parse::NotMine);
    put_be16(f.data() + kEthLen + 6, 0x4000);
    CHECK(parse(f) == Parse::Ok);
    put_be16(f.data() + kEthLen + 6, 0);
    CHECK(parse(f) == Parse::Ok);
    // A fragment is Other even when its lengths lie.
    put_be16(f.data() + kEthLen + 6, 0x2000);
    put_be16(f.data() + kEthLen + 2, 0xffff);
    CHECK(parse(f) == Parse::NotMine);
}

TEST_CASE("ip_packet: IPv4 options are skipped, IHL checked") {
    for (size_t opt = 0; opt <= 40; opt += 4) {
        CAPTURE(opt);
        Bytes f = v4(kUdp, 8, opt);
        IpPacket p;
        REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Ok);
        CHECK(p.header.size() == kIp4Len + opt);
        CHECK(p.l4.data() == f.data() + kEthLen + kIp4Len + opt);
        CHECK(p.l4.size() == 8);
        CHECK(p.l4[0] == 0x80);
    }
    // IHL below 5.
    for (uint8_t ihl = 0; ihl < 5; ++ihl) {
        Bytes f = v4(kUdp, 8);
        f[kEthLen] = uint8_t(0x40 | ihl);
        CHECK(parse(f) == Parse::Malformed);
    }
    // IHL past the total length, and past the frame.
    Bytes f = v4(kUdp, 8); // total 28
    f[kEthLen] = 0x48;      // 32-byte header
    CHECK(parse(f) == Parse::Malformed);
    f = v4(kUdp, 40);
    f[kEthLen] = 0x4f; // 60 bytes: within total (60) and the frame
    IpPacket p;
    REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Ok);
    CHECK(p.header.size() == 60);
    CHECK(p.l4.empty());
}

TEST_CASE("ip_packet: IPv6 extension headers are NotMine") {
    for (uint8_t nh : {0, 43, 44, 50, 51, 60, 135, 59}) {
        CAPTURE(int(nh));
        CHECK(parse(v6(nh, 16)) == Parse::NotMine);
        // Whatever the lengths say.
        Bytes f = v6(nh, 16);
        put_be16(f.data() + kEthLen + 4, 0xffff);
        CHECK(parse(f) == Parse::NotMine);
    }
}

TEST_CASE("ip_packet: protocol, version and ethertype decide NotMine") {
    // Each family its own protocol number.
    CHECK(parse(v4(kIcmp, 8), kIcmp, kIcmp6) == Parse::Ok);
    CHECK(parse(v6(kIcmp6, 8), kIcmp, kIcmp6) == Parse::Ok);
    CHECK(parse(v4(kIcmp6, 8), kIcmp, kIcmp6) == Parse::NotMine);
    CHECK(parse(v6(kIcmp, 8), kIcmp, kIcmp6) == Parse::NotMine);
    CHECK(parse(v4(6, 8)) == Parse::NotMine);
    CHECK(parse(v6(6, 8)) == Parse::NotMine);
    // Versions that disagree with the ethertype.
    Bytes f = v4(kUdp, 8);
    f[kEthLen] = 0x65;
    CHECK(parse(f) == Parse::NotMine);
    f = v6(kUdp, 8);
    f[kEthLen] = 0x45;
    CHECK(parse(f) == Parse::NotMine);
    // Other ethertypes: ARP, VLAN-tagged, IPv4 in the wrong byte order.
    for (uint16_t type : {0x0806, 0x8100, 0x0008, 0x88cc}) {
        f = v4(kUdp, 8);
        put_be16(f.data() + 12, type);
        CHECK(parse(f) == Parse::NotMine);
    }
    // An IPv4 packet behind the IPv6 ethertype, long enough for either.
    f = v4(kUdp, 40);
    put_be16(f.data() + 12, 0x86dd);
    CHECK(parse(f) == Parse::NotMine);
}

TEST_CASE("ip_packet: lengths that lie") {
    Bytes f = v4(kUdp, 8);
    const size_t total = f.size() - kEthLen;
    // Total length past the frame by one, and far past it.
    put_be16(f.data() + kEthLen + 2, uint16_t(total + 1));
    CHECK(parse(f) == Parse::Malformed);
    put_be16(f.data() + kEthLen + 2, 0xffff);
    CHECK(parse(f) == Parse::Malformed);
    // Below the header length (0 and 19), equal to it (an empty payload).
    put_be16(f.data() + kEthLen + 2, 0);
    CHECK(parse(f) == Parse::Malformed);
    put_be16(f.data() + kEthLen + 2, 19);
    CHECK(parse(f) == Parse::Malformed);
    put_be16(f.data() + kEthLen + 2, 20);
    IpPacket p;
    REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Ok);
    CHECK(p.l4.empty());
    // Shorter than the frame: the rest is padding.
    put_be16(f.data() + kEthLen + 2, 24);
    REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Ok);
    CHECK(p.l4.size() == 4);

    f = v6(kUdp, 8);
    put_be16(f.data() + kEthLen + 4, 9);
    CHECK(parse(f) == Parse::Malformed);
    put_be16(f.data() + kEthLen + 4, 0xffff);
    CHECK(parse(f) == Parse::Malformed);
    put_be16(f.data() + kEthLen + 4, 3);
    REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Ok);
    CHECK(p.l4.size() == 3);
}

TEST_CASE("ip_packet: out is left alone unless Ok") {
    IpPacket p;
    p.v6 = true;
    std::memset(p.src, 0xaa, 16);
    Bytes f = v4(kUdp, 8);
    put_be16(f.data() + kEthLen + 2, 0xffff);
    REQUIRE(parse_ip(f, kUdp, kUdp, p) == Parse::Malformed);
    CHECK(p.v6);
    CHECK(p.src[15] == 0xaa);
    CHECK(p.l4.empty());
    REQUIRE(parse_ip(v4(6, 8), kUdp, kUdp, p) == Parse::NotMine);
    CHECK(p.src[15] == 0xaa);
}

TEST_CASE("ip_packet: random mutations stay inside the frame") {
    std::mt19937 rng(12345);
    const Bytes seeds[] = {v4(kUdp, 30, 4), v6(kUdp, 30)};
    for (int i = 0; i < 20000; ++i) {
        Bytes f = seeds[i & 1];
        // Mutate a few bytes of the headers, then maybe cut the frame.
        const int flips = 1 + int(rng() % 4);
        for (int k = 0; k < flips; ++k) f[kEthLen + rng() % 48] = uint8_t(rng());
        if (rng() % 3 == 0) f.resize(rng() % (f.size() + 1));
        IpPacket p;
        if (parse_ip(f, kUdp, kUdp, p) != Parse::Ok) continue;
        const uint8_t *begin = f.data(), *end = f.data() + f.size();
        REQUIRE(p.header.data() == begin + kEthLen);
        REQUIRE(p.header.size() >= kIp4Len);
        REQUIRE(p.l4.data() == p.header.data() + p.header.size());
        REQUIRE(p.l4.data() + p.l4.size() <= end);
    }
}
