// SPDX-License-Identifier: Apache-2.0

// IPv4 reassembly: orders, overlaps, limits and expiry.
#include <doctest/doctest.h>

#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/reassembly.hpp"
#include "ipv4_datagram.hpp"
#include "reassembly_rig.hpp"

using namespace rknp;
using namespace rknp::test;

namespace {

// whole cut into fragments of piece bytes (a multiple of 8).
std::vector<Bytes> fragments(const Bytes &whole, size_t piece) {
    return fragments_of(whole, 34, piece, ipv4_fragment);
}

} // namespace

TEST_CASE("is_ipv4_fragment: MF or an offset, not DF or the reserved bit") {
    auto whole = ipv4_datagram(100);
    CHECK_FALSE(is_ipv4_fragment(whole));
    for (uint16_t field : {0x4000, 0x8000}) {
        Bytes f = whole;
        put_be16(f.data() + 20, field);
        CHECK_FALSE(is_ipv4_fragment(f));
    }
    for (uint16_t field : {0x2000, 0x0001, 0x4001, 0x1fff}) {
        Bytes f = whole;
        put_be16(f.data() + 20, field);
        CHECK(is_ipv4_fragment(f));
    }
    Bytes v6 = whole;
    v6[12] = 0x86;
    v6[13] = 0xdd;
    put_be16(v6.data() + 20, 0x2000);
    CHECK_FALSE(is_ipv4_fragment(v6));
    CHECK_FALSE(is_ipv4_fragment(Bytes(20, 0)));
}

TEST_CASE("fragments in any order give back the original datagram") {
    auto whole = ipv4_datagram(6000);
    auto parts = fragments(whole, 1480);
    REQUIRE(parts.size() == 5);
    check_any_order(whole, parts, 7);
}

TEST_CASE("the DF bit is kept, the reserved bit cleared, length and checksum rebuilt") {
    auto whole = ipv4_datagram(100);
    put_be16(whole.data() + 20, 0x4000);
    set_ip_checksum(whole);
    auto parts = fragments(whole, 48);
    put_be16(parts[0].data() + 20, 0x8000 | 0x4000 | 0x2000); // evil bit too
    set_ip_checksum(parts[0]);
    IpReassembler r;
    auto fed = feed(r, parts);
    REQUIRE(fed.datagrams.size() == 1);
    CHECK(fed.datagrams[0] == whole);
}

TEST_CASE("a datagram of the largest IPv4 size is reassembled") {
    auto whole = ipv4_datagram(65535 - 20);
    IpReassembler r;
    auto fed = feed(r, fragments(whole, 1480));
    REQUIRE(fed.datagrams.size() == 1);
    CHECK(fed.datagrams[0] == whole);
}

TEST_CASE("duplicates are harmless; contradicting overlaps drop the datagram") {
    auto whole = ipv4_datagram(4000);
    auto parts = fragments(whole, 1000);
    IpReassembler r;
    std::vector<Bytes> dup = {parts[0], parts[0], parts[1], parts[1], parts[2], parts[3]};
    auto fed = feed(r, dup);
    REQUIRE(fed.datagrams.size() == 1);
    CHECK(fed.datagrams[0] == whole);
    CHECK(fed.fragments == 6);

    // An overlap that carries the same bytes is accepted too.
    auto overlap_same = ipv4_fragment(whole, 8, 992, true);
    fed = feed(r, {parts[0], overlap_same, parts[1], parts[2], parts[3]});
    REQUIRE(fed.datagrams.size() == 1);
    CHECK(fed.datagrams[0] == whole);

    // Different bytes over received ones: the whole datagram goes.
    auto other = ipv4_datagram(4000, 0x1234, 99);
    auto liar = ipv4_fragment(other, 992, 16, true);
    fed = feed(r, {parts[0], parts[1], liar});
    CHECK(fed.datagrams.empty());
    CHECK(fed.dropped == 3);
    CHECK(r.pending() == 0);
    // What arrives later starts afresh and cannot complete with a hole.
    fed = feed(r, {parts[2], parts[3]});
    CHECK(fed.datagrams.empty());
    CHECK(r.pending() == 1);
}

TEST_CASE("malformed fragments are dropped one by one") {
    auto whole = ipv4_datagram(2000);
    auto parts = fragments(whole, 1000);
    std::vector<Bytes> bad;
    Bytes odd = ipv4_fragment(whole, 0, 1001, true); // MF but not a multiple of 8
    bad.push_back(odd);
    Bytes sum = parts[0];
    sum[24] ^= 1; // header checksum
    bad.push_back(sum);
    Bytes options = parts[0];
    options[14] = 0x46;
    set_ip_checksum(options);
    bad.push_back(options);
    Bytes longer = parts[0];
    put_be16(longer.data() + 16, uint16_t(longer.size() - 14 + 1)); // > frame
    set_ip_checksum(longer);
    bad.push_back(longer);
    Bytes empty = ipv4_fragment(whole, 0, 0, true);
    bad.push_back(empty);
    auto big = ipv4_datagram(1480);
    Bytes beyond = ipv4_fragment(big, 0, 1480, false); // ends past 65515 bytes
    put_be16(beyond.data() + 20, uint16_t(0x1fff));
    set_ip_checksum(beyond);
    bad.push_back(beyond);
    IpReassembler r;
    for (const auto &f : bad) {
        auto o = r.add(f, 0);
        CHECK(o.datagram.empty());
        CHECK(o.dropped == 1);
    }
    CHECK(r.pending() == 0);
}

TEST_CASE("a last fragment that contradicts the data or an earlier last drops the datagram") {
    auto whole = ipv4_datagram(4000);
    auto parts = fragments(whole, 1000);
    IpReassembler r;
    auto early_end = ipv4_fragment(whole, 1000, 1000, false); // ends before parts[2]
    auto fed = feed(r, {parts[2], early_end});
    CHECK(fed.dropped == 2);
    CHECK(r.pending() == 0);
    auto other_end = ipv4_fragment(whole, 3000, 992, false);
    fed = feed(r, {parts[3], other_end});
    CHECK(fed.dropped == 2);
    auto past_end = ipv4_fragment(ipv4_datagram(5000), 4000, 8, true); // beyond the last
    fed = feed(r, {parts[3], past_end});
    CHECK(fed.dropped == 2);
    CHECK(r.pending() == 0);
}

TEST_CASE("datagrams are told apart by addresses, id and protocol") {
    auto a = ipv4_datagram(3000, 1, 1), b = ipv4_datagram(3000, 2, 2);
    auto c = ipv4_datagram(3000, 1, 3);
    c[14 + 9] = 6; // same id as a, TCP
    set_ip_checksum(c);
    auto pa = fragments(a, 1000), pb = fragments(b, 1000), pc = fragments(c, 1000);
    IpReassembler r;
    std::vector<Bytes> mixed;
    for (size_t i = 0; i < pa.size(); ++i) {
        mixed.push_back(pa[i]);
        mixed.push_back(pc[pc.size() - 1 - i]);
        mixed.push_back(pb[i]);
    }
    int done = 0;
    for (const auto &f : mixed) {
        auto o = r.add(f, 0);
        if (o.datagram.empty()) continue;
        Bytes got(o.datagram.begin(), o.datagram.end());
        CHECK((got == a || got == b || got == c));
        ++done;
    }
    CHECK(done == 3);
    CHECK(r.pending() == 0);
}

TEST_CASE("incomplete datagrams expire, and at most kMaxPending are kept") {
    IpReassembler r;
    auto lone = fragments(ipv4_datagram(3000), 1000);
    // The lone trailing fragment that crashed libslirp 4.7.0 is only held.
    auto o = r.add(lone.back(), 0);
    CHECK(o.datagram.empty());
    CHECK(o.dropped == 0);
    CHECK(r.pending() == 1);
    // Another fragment after the timeout: the stale datagram is given up.
    auto other = fragments(ipv4_datagram(3000, 9), 1000);
    o = r.add(other[0], IpReassembler::kTimeoutMs);
    CHECK(o.dropped == 1);
    CHECK(r.pending() == 1);

    IpReassembler full;
    uint32_t dropped = 0;
    for (uint16_t id = 0; id < IpReassembler::kMaxPending + 3; ++id) {
        auto parts = fragments(ipv4_datagram(3000, id), 1000);
        dropped += full.add(parts[0], 0).dropped + full.add(parts[1], 0).dropped;
    }
    CHECK(full.pending() == IpReassembler::kMaxPending);
    CHECK(dropped == 3 * 2); // the three oldest, two fragments each
    // The newest is still there and completes.
    auto last = fragments(ipv4_datagram(3000, IpReassembler::kMaxPending + 2), 1000);
    o = full.add(last[2], 0);
    CHECK(!o.datagram.empty());
}
