// SPDX-License-Identifier: Apache-2.0

// The reassembly tests' rig, IPv4 (test_reassembly.cpp) and IPv6
// (test_reassembly_ipv6.cpp): a datagram cut into fragments, and fragments
// fed to an IpReassembler with what came out of it.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "datapath/reassembly.hpp"

namespace rknp::test {

using Bytes = std::vector<uint8_t>;

// whole (an Ethernet frame whose headers take `head` bytes) cut into
// fragments of `piece` payload bytes (a multiple of 8), each made by
// cut(whole, off, len, more).
template <class Cut>
std::vector<Bytes> fragments_of(const Bytes &whole, size_t head, size_t piece, Cut cut) {
    const size_t payload = whole.size() - head;
    std::vector<Bytes> out;
    for (size_t off = 0; off < payload; off += piece) {
        const size_t len = std::min(piece, payload - off);
        out.push_back(cut(whole, off, len, off + len < payload));
    }
    return out;
}

struct Fed {
    std::vector<Bytes> datagrams; // completed, in order
    uint32_t fragments = 0;       // the last completed one's
    uint32_t dropped = 0;
};

// Each frame (every one a fragment) into r at time now.
inline Fed feed(IpReassembler &r, const std::vector<Bytes> &frames, int64_t now = 0) {
    Fed fed;
    for (const auto &f : frames) {
        REQUIRE(is_ip_fragment(f));
        auto o = r.add(f, now);
        fed.dropped += o.dropped;
        if (o.datagram.empty()) continue;
        fed.datagrams.emplace_back(o.datagram.begin(), o.datagram.end());
        fed.fragments = o.fragments;
    }
    return fed;
}

// The fragments of whole fed in order, in reverse and shuffled twice (rng
// seeded with seed): each time whole comes back, all of them used.
inline void check_any_order(const Bytes &whole, const std::vector<Bytes> &parts,
                            unsigned seed) {
    std::mt19937 rng(seed);
    for (int round = 0; round < 4; ++round) {
        CAPTURE(round);
        auto order = parts;
        if (round == 1) std::reverse(order.begin(), order.end());
        if (round >= 2) std::shuffle(order.begin(), order.end(), rng);
        IpReassembler r;
        auto fed = feed(r, order);
        REQUIRE(fed.datagrams.size() == 1);
        CHECK(fed.datagrams[0] == whole); // same bytes, same header (v4: valid sum)
        CHECK(fed.fragments == parts.size());
        CHECK(fed.dropped == 0);
        CHECK(r.pending() == 0);
    }
}

} // namespace rknp::test
