// SPDX-License-Identifier: Apache-2.0

// The guest frame filter in front of libslirp: only ARP/IPv4/IPv6 pass, and
// urgent data never reaches libslirp, with the TCP checksum kept valid.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "datapath/checksum.hpp"
#include "common/addr.hpp"
#include "datapath/guest_filter.hpp"

using namespace rknp;

namespace {

using Bytes = std::vector<uint8_t>;

// Ethernet + IPv4 (ihl words) or IPv6 + TCP header + payload, with a valid
// TCP checksum.
Bytes tcp_frame(bool v6, uint8_t flags, uint16_t urp, size_t payload = 11,
                uint8_t ihl = 5) {
    size_t l3 = v6 ? 40 : size_t(ihl) * 4, l4 = 20 + payload;
    Bytes f(14 + l3 + l4, 0);
    put_be16(f.data() + 12, v6 ? 0x86dd : 0x0800);
    uint8_t *ip = f.data() + 14;
    if (v6) {
        ip[0] = 0x60;
        put_be16(ip + 4, uint16_t(l4));
        ip[6] = 6;
        ip[7] = 64;
        ip[8 + 15] = 1;  // src ::1
        ip[24 + 15] = 2; // dst ::2
    } else {
        ip[0] = uint8_t(0x40 | ihl);
        put_be16(ip + 2, uint16_t(l3 + l4));
        ip[8] = 64;
        ip[9] = 6;
        ip[12] = 10, ip[15] = 100; // 10.0.0.100
        ip[16] = 10, ip[19] = 2;   // 10.0.0.2
    }
    uint8_t *tcp = ip + l3;
    put_be16(tcp, 40000);
    put_be16(tcp + 2, 80);
    tcp[12] = 0x50;
    tcp[13] = flags;
    put_be16(tcp + 14, 65535);
    put_be16(tcp + 18, urp);
    for (size_t i = 0; i < payload; ++i) tcp[20 + i] = uint8_t(0xA0 + i);
    uint8_t tail[4] = {0, 6, uint8_t(l4 >> 8), uint8_t(l4)};
    uint64_t sum = v6 ? csum_add(0, ip + 8, 32) : csum_add(0, ip + 12, 8);
    sum = csum_add(csum_add(sum, tail, 4), tcp, l4);
    put_be16(tcp + 16, uint16_t(~csum_fold(sum)));
    return f;
}

// Verifies the TCP checksum the way a receiver does.
bool tcp_checksum_ok(const Bytes &f, bool v6, size_t l3 = 20) {
    const uint8_t *ip = f.data() + 14;
    if (v6) l3 = 40;
    size_t l4 = f.size() - 14 - l3;
    uint8_t tail[4] = {0, 6, uint8_t(l4 >> 8), uint8_t(l4)};
    uint64_t sum = v6 ? csum_add(0, ip + 8, 32) : csum_add(0, ip + 12, 8);
    sum = csum_add(csum_add(sum, tail, 4), ip + l3, l4);
    return csum_fold(sum) == 0xffff;
}

} // namespace

TEST_CASE("only ARP, IPv4 and IPv6 frames are for libslirp") {
    Bytes f(60, 0);
    for (uint16_t t : {0x0806, 0x0800, 0x86dd}) {
        put_be16(f.data() + 12, t);
        CHECK(libslirp_ethertype(f));
    }
    for (uint16_t t : {0x88f8 /* NC-SI */, 0x8100 /* VLAN */, 0x88cc, 0x0000}) {
        put_be16(f.data() + 12, t);
        CHECK_FALSE(libslirp_ethertype(f));
    }
    CHECK_FALSE(libslirp_ethertype(std::span<const uint8_t>(f.data(), 13)));
}

TEST_CASE("URG and the urgent pointer are cleared, the checksum stays valid") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        for (uint16_t urp : {uint16_t(0), uint16_t(1), uint16_t(0xffff)}) {
            for (uint8_t flags : {uint8_t(0x38), uint8_t(0x10), uint8_t(0x20)}) {
                Bytes f = tcp_frame(v6, flags, urp);
                REQUIRE(tcp_checksum_ok(f, v6));
                bool urgent = (flags & 0x20) || urp != 0;
                CHECK(strip_urgent(f) == urgent);
                const uint8_t *tcp = f.data() + 14 + (v6 ? 40 : 20);
                CHECK(tcp[13] == (flags & ~0x20));
                CHECK(be16(tcp + 18) == 0);
                CHECK(tcp_checksum_ok(f, v6));
                CHECK(f == tcp_frame(v6, uint8_t(flags & ~0x20), 0)); // nothing else moved
            }
        }
    }
}

TEST_CASE("IPv4 options are skipped; a bad checksum stays bad") {
    Bytes f = tcp_frame(false, 0x30, 0x1234, 5, 7);
    CHECK(strip_urgent(f));
    CHECK(f[14 + 28 + 13] == 0x10);
    CHECK(tcp_checksum_ok(f, false, 28));
    Bytes bad = tcp_frame(false, 0x30, 7);
    bad[14 + 20 + 16] ^= 0x55;
    CHECK(strip_urgent(bad));
    CHECK_FALSE(tcp_checksum_ok(bad, false));
}

TEST_CASE("fragments, other protocols and short frames are left alone") {
    Bytes frag = tcp_frame(false, 0x30, 9);
    frag[14 + 6] = 0x20; // MF
    Bytes before = frag;
    CHECK_FALSE(strip_urgent(frag));
    CHECK(frag == before);
    Bytes udp = tcp_frame(false, 0x30, 9);
    udp[14 + 9] = 17;
    CHECK_FALSE(strip_urgent(udp));
    Bytes v6ext = tcp_frame(true, 0x30, 9);
    v6ext[14 + 6] = 0; // hop-by-hop first
    CHECK_FALSE(strip_urgent(v6ext));
    Bytes shortf = tcp_frame(false, 0x30, 9, 0);
    shortf.resize(14 + 20 + 19);
    CHECK_FALSE(strip_urgent(shortf));
    Bytes badlen = tcp_frame(false, 0x30, 9);
    put_be16(badlen.data() + 14 + 2, 30); // IP total < IP + TCP headers
    CHECK_FALSE(strip_urgent(badlen));
}

TEST_CASE("only the guest's own source addresses get through") {
    const Ipv4Cidr net = Ipv4Cidr::parse("cidr", "10.0.2.0/24");
    in6_addr prefix6{};
    prefix6.s6_addr[0] = 0xfd;
    auto v4_from = [](uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
        Bytes f = tcp_frame(false, 0x10, 0);
        uint8_t *src = f.data() + 14 + 12;
        src[0] = a, src[1] = b, src[2] = c, src[3] = d;
        return f;
    };
    CHECK(guest_source_allowed(v4_from(10, 0, 2, 100), net, prefix6));
    CHECK(guest_source_allowed(v4_from(10, 0, 2, 7), net, prefix6));
    CHECK(guest_source_allowed(v4_from(0, 0, 0, 0), net, prefix6)); // DHCP
    CHECK_FALSE(guest_source_allowed(v4_from(10, 0, 3, 100), net, prefix6));
    CHECK_FALSE(guest_source_allowed(v4_from(192, 0, 2, 1), net, prefix6));

    auto v6_from = [](std::initializer_list<uint8_t> head) {
        Bytes f = tcp_frame(true, 0x10, 0);
        uint8_t *src = f.data() + 14 + 8;
        std::fill(src, src + 16, 0);
        size_t i = 0;
        for (uint8_t b : head) src[i++] = b;
        if (head.size() > 0) src[15] = 9;
        return f;
    };
    CHECK(guest_source_allowed(v6_from({0xfd, 0x00}), net, prefix6));
    CHECK(guest_source_allowed(v6_from({0xfe, 0x80}), net, prefix6)); // NDP
    CHECK(guest_source_allowed(v6_from({}), net, prefix6));           // DAD ::
    CHECK_FALSE(guest_source_allowed(v6_from({0xfd, 0x01}), net, prefix6));
    CHECK_FALSE(guest_source_allowed(v6_from({0x20, 0x01}), net, prefix6));

    Bytes arp(14 + 28, 0);
    put_be16(arp.data() + 12, 0x0806);
    arp[14 + 14] = 10, arp[14 + 16] = 2, arp[14 + 17] = 100;
    CHECK(guest_source_allowed(arp, net, prefix6));
    arp[14 + 16] = 9;
    CHECK_FALSE(guest_source_allowed(arp, net, prefix6));
    arp.resize(14 + 20);
    CHECK_FALSE(guest_source_allowed(arp, net, prefix6)); // truncated
}

TEST_CASE("router advertisements and redirects from the guest are refused") {
    Bytes f(14 + 40 + 16, 0);
    put_be16(f.data() + 12, 0x86dd);
    f[14] = 0x60;
    f[14 + 6] = 58; // ICMPv6
    for (uint8_t type : {134, 137}) {
        f[14 + 40] = type;
        CHECK(router_message_from_guest(f));
    }
    for (uint8_t type : {133 /* solicitation */, 135, 136, 128}) {
        f[14 + 40] = type;
        CHECK_FALSE(router_message_from_guest(f));
    }
    f[14 + 40] = 134;
    f[14 + 6] = 0; // hop-by-hop options first: not looked into
    CHECK_FALSE(router_message_from_guest(f));
    f[14 + 6] = 58;
    CHECK_FALSE(router_message_from_guest(std::span<const uint8_t>(f.data(), 54)));
    put_be16(f.data() + 12, 0x0800);
    CHECK_FALSE(router_message_from_guest(f));
}
