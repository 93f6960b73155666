// SPDX-License-Identifier: Apache-2.0

// IPv6 reassembly: what a guest's kernel sends for a datagram over the MTU
// (a Fragment header right after the fixed one) comes back as the datagram
// it cut; overlaps, nesting and sizes past the limit are dropped.
#include <doctest/doctest.h>

#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/reassembly.hpp"
#include "ipv6_datagram.hpp"
#include "reassembly_rig.hpp"

using namespace rknp;
using namespace rknp::test;

namespace {

std::vector<Bytes> fragments6(const Bytes &whole, size_t piece, uint32_t id = 0xabcd) {
    return fragments_of(whole, kIpv6Head, piece,
                        [id](const Bytes &w, size_t off, size_t len, bool more) {
                            return ipv6_fragment(w, off, len, more, id);
                        });
}

} // namespace

TEST_CASE("is_ipv6_fragment: a Fragment header right after the fixed header") {
    auto whole = ipv6_datagram(100);
    CHECK_FALSE(is_ip_fragment(whole));
    auto f = ipv6_fragment(whole, 0, 48, true);
    CHECK(is_ipv6_fragment(f));
    CHECK(is_ip_fragment(f));
    CHECK_FALSE(is_ipv4_fragment(f));
    Bytes hop = f; // hop-by-hop options first: not recognised
    hop[14 + 6] = 0;
    CHECK_FALSE(is_ip_fragment(hop));
    CHECK_FALSE(is_ipv6_fragment(Bytes(f.begin(), f.begin() + kIpv6Head + 7)));
}

TEST_CASE("IPv6 fragments in any order give back the original datagram") {
    auto whole = ipv6_datagram(6000);
    auto parts = fragments6(whole, 1448);
    REQUIRE(parts.size() == 5);
    // Back: the fixed header again with next header 17 and the whole length.
    check_any_order(whole, parts, 11);
}

TEST_CASE("IPv6: interleaved datagrams are told apart by id and source") {
    auto a = ipv6_datagram(3000, 1), b = ipv6_datagram(3000, 2), c = ipv6_datagram(3000, 3, 0x65);
    auto pa = fragments6(a, 1448, 7), pb = fragments6(b, 1448, 8), pc = fragments6(c, 1448, 7);
    std::vector<Bytes> mixed;
    for (size_t i = 0; i < pa.size(); ++i) {
        mixed.push_back(pa[i]);
        mixed.push_back(pb[i]);
        mixed.push_back(pc[i]);
    }
    IpReassembler r;
    auto fed = feed(r, mixed);
    REQUIRE(fed.datagrams.size() == 3);
    CHECK(fed.datagrams[0] == a);
    CHECK(fed.datagrams[1] == b);
    CHECK(fed.datagrams[2] == c);
}

TEST_CASE("IPv6: the largest payload (65535) is reassembled, one past it dropped") {
    auto whole = ipv6_datagram(65535);
    IpReassembler r;
    auto fed = feed(r, fragments6(whole, 1448));
    REQUIRE(fed.datagrams.size() == 1);
    CHECK(fed.datagrams[0] == whole);

    // A last fragment ending at 65536: one byte past what the payload
    // length field can say.
    Bytes longer = whole;
    longer.push_back(0);
    IpReassembler r2;
    CHECK(r2.add(ipv6_fragment(longer, 65528, 7, false), 0).dropped == 0);
    IpReassembler r3;
    CHECK(r3.add(ipv6_fragment(longer, 65528, 8, false), 0).dropped == 1);
    CHECK(r3.pending() == 0);
}

TEST_CASE("IPv6: an atomic fragment (offset 0, no more) is whole at once") {
    auto whole = ipv6_datagram(200);
    IpReassembler r;
    auto fed = feed(r, {ipv6_fragment(whole, 0, 200, false)});
    REQUIRE(fed.datagrams.size() == 1);
    CHECK(fed.datagrams[0] == whole);
}

TEST_CASE("IPv6: overlaps with other bytes drop the datagram, exact duplicates do not") {
    auto whole = ipv6_datagram(3000);
    auto parts = fragments6(whole, 1448);
    SUBCASE("duplicate") {
        IpReassembler r;
        auto fed = feed(r, {parts[0], parts[0], parts[1], parts[2]});
        REQUIRE(fed.datagrams.size() == 1);
        CHECK(fed.datagrams[0] == whole);
    }
    SUBCASE("overlap with different bytes (RFC 5722)") {
        auto evil = ipv6_fragment(whole, 1440, 16, true);
        evil[kIpv6Head + 8 + 9] ^= 0xff; // inside what parts[0] carried
        IpReassembler r;
        auto fed = feed(r, {parts[0], evil, parts[1], parts[2]});
        CHECK(fed.datagrams.empty());
        CHECK(fed.dropped >= 2);
    }
}

TEST_CASE("IPv6: malformed fragments are dropped, never returned") {
    auto whole = ipv6_datagram(3000);
    IpReassembler r;
    SUBCASE("a Fragment header behind a Fragment header") {
        CHECK(r.add(ipv6_fragment(whole, 0, 1448, true, 1, 44), 0).dropped == 1);
    }
    SUBCASE("payload length past the frame") {
        auto f = ipv6_fragment(whole, 0, 1448, true);
        put_be16(f.data() + 14 + 4, 8 + 1456);
        CHECK(r.add(f, 0).dropped == 1);
    }
    SUBCASE("a non-last fragment not a multiple of 8 bytes") {
        CHECK(r.add(ipv6_fragment(whole, 0, 1447, true), 0).dropped >= 1);
    }
    SUBCASE("not version 6") {
        auto f = ipv6_fragment(whole, 0, 1448, true);
        f[14] = 0x40;
        CHECK(r.add(f, 0).dropped == 1);
    }
    CHECK(r.pending() == 0);
}
