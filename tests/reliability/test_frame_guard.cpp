// SPDX-License-Identifier: Apache-2.0

// The guest -> stack frame preparation (plugin/datapath/offload.cpp) and
// the fragment diversion in front of libslirp. Regression of a fuzz finding:
// one IPv4 fragment (the last one, arriving first) made Debian 12's libslirp
// 4.7.0 crash the whole process in ip_reass; GuestIngress::input sends
// every frame is_ipv4_fragment() flags to IpReassembler, so libslirp only
// sees whole datagrams. The end-to-end check is faults.sh.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "datapath/offload.hpp"
#include "datapath/reassembly.hpp"

using namespace rknp;

namespace {

// Ethernet + IPv4 header (+ payload) with the given flags/offset field.
std::vector<uint8_t> ipv4_frame(uint16_t frag_field, size_t payload = 40) {
    std::vector<uint8_t> f(14 + 20 + payload, 0);
    f[12] = 0x08;
    f[14] = 0x45;
    f[14 + 2] = uint8_t((20 + payload) >> 8);
    f[14 + 3] = uint8_t(20 + payload);
    f[14 + 6] = uint8_t(frag_field >> 8);
    f[14 + 7] = uint8_t(frag_field);
    return f;
}

std::vector<uint8_t> with_vnet(std::vector<uint8_t> f, const VnetHdr &h) {
    std::vector<uint8_t> out(kVnetHdrSize + f.size());
    std::memcpy(out.data(), &h, kVnetHdrSize);
    std::memcpy(out.data() + kVnetHdrSize, f.data(), f.size());
    return out;
}

// The Ethernet frame libslirp would get (GuestIngress's first steps), or
// an empty span for one that must be dropped.
std::span<uint8_t> prep(std::vector<uint8_t> &f, bool vnet) {
    TapFrame t = split_tap_frame(f, vnet);
    if (!finish_checksum(t)) return {};
    return t.eth;
}

// RFC 1071 over big-endian words, byte by byte: independent of
// plugin/checksum.cpp's little-endian 8-byte loop.
uint16_t inet_checksum(const std::vector<uint8_t> &b) {
    uint32_t sum = 0;
    for (size_t i = 0; i < b.size(); i += 2)
        sum += uint32_t(b[i] << 8 | (i + 1 < b.size() ? b[i + 1] : 0));
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(~sum);
}

// 10.0.2.100 -> 10.0.2.2 (DF) carrying l4 (proto 6 or 17), as the guest
// sends it with a partial checksum: the field holds the folded, not
// complemented, pseudo-header sum (what Linux leaves for CHECKSUM_PARTIAL).
// want gets the checksum the segment must leave with.
std::vector<uint8_t> partial_frame(uint8_t proto, std::vector<uint8_t> l4,
                                   size_t field, uint16_t &want) {
    std::vector<uint8_t> pseudo = {10, 0, 2, 100, 10, 0, 2, 2, 0, proto,
                                   uint8_t(l4.size() >> 8), uint8_t(l4.size())};
    auto whole = pseudo;
    whole.insert(whole.end(), l4.begin(), l4.end()); // checksum field is 0
    want = inet_checksum(whole);
    uint16_t partial = uint16_t(~inet_checksum(pseudo));
    l4[field] = uint8_t(partial >> 8);
    l4[field + 1] = uint8_t(partial);
    auto f = ipv4_frame(0x4000, l4.size());
    f[14 + 9] = proto;
    std::memcpy(f.data() + 12 + 14, pseudo.data(), 8);
    std::memcpy(f.data() + 34, l4.data(), l4.size());
    return f;
}

std::vector<uint8_t> payload(size_t n) {
    std::vector<uint8_t> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(i * 37 + 11);
    return p;
}

} // namespace

TEST_CASE("IPv4 fragments are diverted to reassembly, in order or not") {
    // Lone trailing, middle, in-order first (MF, offset 0), DF+offset.
    for (uint16_t field : {0x0011, 0x2011, 0x2000, 0x4011, 0x1fff}) {
        auto f = ipv4_frame(field);
        CHECK(is_ipv4_fragment(prep(f, false)));
        auto v = with_vnet(f, VnetHdr{});
        CHECK(is_ipv4_fragment(prep(v, true)));
        // The crasher alone never comes out of the reassembler.
        IpReassembler r;
        auto lone = ipv4_frame(field);
        CHECK(r.add(lone, 0).datagram.empty());
    }
}

TEST_CASE("unfragmented IPv4 (DF or the reserved bit) and other frames pass") {
    for (uint16_t field : {0x0000, 0x4000, 0x8000}) {
        auto f = ipv4_frame(field);
        auto out = prep(f, false);
        CHECK(out.size() == f.size());
        CHECK(out.data() == f.data());
        CHECK_FALSE(is_ipv4_fragment(out));
    }
    std::vector<uint8_t> arp(42, 0);
    arp[12] = 0x08;
    arp[13] = 0x06;
    CHECK(prep(arp, false).size() == 42);
    std::vector<uint8_t> runt(5, 0); // libslirp ignores runts itself
    CHECK(prep(runt, false).size() == 5);
}

TEST_CASE("vnet header: stripped, partial checksums completed exactly, bogus offsets dropped") {
    // A TCP segment (odd length: the last byte is summed alone) and a UDP
    // datagram; only the two checksum bytes may change.
    struct Case {
        uint8_t proto;
        uint16_t offset;
        std::vector<uint8_t> l4;
    };
    auto tcp = payload(20 + 1461);
    tcp[12] = 0x50; // data offset 5, no options
    tcp[16] = tcp[17] = 0;
    auto udp = payload(8 + 61);
    udp[4] = 0;
    udp[5] = 8 + 61;
    udp[6] = udp[7] = 0;
    for (auto &c : {Case{6, 16, tcp}, Case{17, 6, udp}}) {
        CAPTURE(int(c.proto));
        uint16_t want = 0;
        auto f = partial_frame(c.proto, c.l4, c.offset, want);
        REQUIRE(want != 0); // 0 would be ambiguous for UDP
        VnetHdr h{};
        h.flags = kVnetNeedsCsum;
        h.csum_start = 34;
        h.csum_offset = c.offset;
        auto v = with_vnet(f, h);
        auto out = prep(v, true);
        REQUIRE(out.size() == f.size());
        CHECK(out.data() == v.data() + kVnetHdrSize);
        size_t field = 34 + c.offset;
        CHECK(uint16_t(out[field] << 8 | out[field + 1]) == want);
        std::vector<uint8_t> got(out.begin(), out.end());
        got[field] = f[field];
        got[field + 1] = f[field + 1];
        CHECK(got == f); // nothing else touched
        // Without kVnetNeedsCsum the frame passes untouched.
        h.flags = 0;
        auto plain = with_vnet(f, h);
        auto same = prep(plain, true);
        CHECK(std::vector<uint8_t>(same.begin(), same.end()) == f);
    }
    auto f = ipv4_frame(0x4000, 60);
    f[14 + 9] = 17;
    VnetHdr h{};
    h.flags = kVnetNeedsCsum;
    h.csum_start = uint16_t(f.size());
    auto past_end = with_vnet(f, h);
    CHECK(prep(past_end, true).empty());
    h.csum_start = 34;
    h.csum_offset = 0xfff0;
    auto field_past_end = with_vnet(f, h);
    CHECK(prep(field_past_end, true).empty());
    std::vector<uint8_t> short_hdr(kVnetHdrSize - 1, 0);
    CHECK(prep(short_hdr, true).empty());
}
