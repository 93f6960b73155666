// The guest -> stack frame preparation (plugin/offload.cpp) and the
// fragment diversion in front of libslirp. Regression of a fuzz finding:
// one IPv4 fragment (the last one, arriving first) made Debian 12's libslirp
// 4.7.0 crash the whole process in ip_reass; StackLoop::input_frame sends
// every frame is_ipv4_fragment() flags to Ipv4Reassembler, so libslirp only
// sees whole datagrams. The end-to-end check is faults.sh.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "offload.hpp"
#include "reassembly.hpp"

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

std::span<uint8_t> prep(std::vector<uint8_t> &f, bool vnet) {
    return prepare_guest_frame(f, vnet);
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
        Ipv4Reassembler r;
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

TEST_CASE("vnet header: stripped, checksum completed, bogus offsets dropped") {
    auto f = ipv4_frame(0x4000, 60);
    f[14 + 9] = 17;
    VnetHdr h{};
    h.flags = kVnetNeedsCsum;
    h.csum_start = 34;
    h.csum_offset = 6;
    auto v = with_vnet(f, h);
    auto out = prep(v, true);
    REQUIRE(out.size() == f.size());
    CHECK(out.data() == v.data() + kVnetHdrSize);
    CHECK((out[34 + 6] | out[34 + 7]) != 0); // checksum written
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
