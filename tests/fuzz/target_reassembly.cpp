// SPDX-License-Identifier: Apache-2.0

// Fuzz target: Ipv4Reassembler (plugin/reassembly.hpp), the only way IPv4
// fragments reach libslirp.
//
// Input: a mode byte. Odd mode: raw frames, records {len u16 LE, bytes},
// each passed to add() if is_ipv4_fragment() says so. Even mode: one
// datagram (payload size 8 + u16, a fill seed u8, an IP id u16), then
// records {first u16, count-1 u16, flags u8} cutting fragments of it: the
// first 8-byte block and the number of blocks (wrapped into the datagram),
// flags bit 0 flips a byte of the fragment, bit 1 advances the clock past
// the timeout.
//
// Properties: whatever comes out is a whole IPv4 packet with a valid
// header checksum and a length that matches; never more than kMaxPending
// datagrams are held; in even mode, once uncorrupted fragments covered the
// datagram it comes out, and then byte for byte as the original.
#include <algorithm>
#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"
#include "../unit/ipv4_datagram.hpp"
#include "fuzz_input.hpp"
#include "datapath/reassembly.hpp"

using namespace rknp;

namespace {

constexpr size_t kMaxRecords = 128;

void check_whole(std::span<const uint8_t> d) {
    fuzz::require(d.size() >= 34, "output shorter than the headers");
    fuzz::require(!is_ipv4_fragment(d), "output is still a fragment");
    fuzz::require(csum_fold(csum_add(0, d.data() + 14, 20)) == 0xffff,
                  "output IP header checksum");
    fuzz::require(size_t(be16(d.data() + 16)) + 14 == d.size(),
                  "output IP length");
}

void raw_mode(fuzz::Input &in) {
    Ipv4Reassembler r;
    int64_t now = 0;
    for (size_t i = 0; i < kMaxRecords && in.left() > 0; ++i) {
        auto bytes = in.bytes(in.u16());
        std::vector<uint8_t> frame(bytes.begin(), bytes.end());
        now += 1000;
        if (!is_ipv4_fragment(frame)) continue;
        auto o = r.add(frame, now);
        if (!o.datagram.empty()) check_whole(o.datagram);
        fuzz::require(r.pending() <= Ipv4Reassembler::kMaxPending, "pending bound");
    }
}

void structured_mode(fuzz::Input &in) {
    size_t payload = 8 + in.u16() % (65535 - 20 - 8 + 1); // 8..65515
    uint8_t seed = in.u8();
    auto whole = test::ipv4_datagram(payload, in.u16(), seed);
    size_t blocks = (payload + 7) / 8;
    Ipv4Reassembler r;
    int64_t now = 0;
    std::vector<bool> covered(blocks, false);
    size_t covered_count = 0;
    bool corrupted = false;
    for (size_t i = 0; i < kMaxRecords && in.left() > 0; ++i) {
        size_t first = in.u16() % blocks;
        size_t count = 1 + in.u16() % (blocks - first);
        uint8_t flags = in.u8();
        size_t off = first * 8, end = std::min(payload, (first + count) * 8);
        bool more = end < payload;
        std::vector<uint8_t> frag(34 + end - off);
        std::memcpy(frag.data(), whole.data(), 34);
        std::memcpy(frag.data() + 34, whole.data() + 34 + off, end - off);
        uint8_t *ip = frag.data() + 14;
        put_be16(ip + 2, uint16_t(20 + end - off));
        put_be16(ip + 6, uint16_t((more ? 0x2000 : 0) | first));
        put_be16(ip + 10, 0);
        put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, 20))));
        if (flags & 1) {
            frag[34 + (end - off) / 2] ^= 0x5a;
            corrupted = true;
        }
        if (flags & 2) {
            now += Ipv4Reassembler::kTimeoutMs;
            // What was pending expires with this call.
            covered.assign(blocks, false);
            covered_count = 0;
        }
        if (!is_ipv4_fragment(frag)) continue; // the whole datagram at once
        auto o = r.add(frag, now);
        fuzz::require(r.pending() <= 1, "one datagram, one pending entry");
        for (size_t b = first; b * 8 < end; ++b)
            if (!covered[b]) {
                covered[b] = true;
                ++covered_count;
            }
        if (!o.datagram.empty()) {
            check_whole(o.datagram);
            if (!corrupted)
                fuzz::require(std::equal(o.datagram.begin(), o.datagram.end(),
                                         whole.begin(), whole.end()),
                              "reassembled datagram differs from the original");
            covered.assign(blocks, false);
            covered_count = 0;
            continue;
        }
        if (!corrupted)
            fuzz::require(covered_count < blocks,
                          "covered by good fragments but not reassembled");
        if (o.dropped > 0) { // the datagram was given up: start afresh
            covered.assign(blocks, false);
            covered_count = 0;
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Input in(data, size);
    if (in.u8() & 1)
        raw_mode(in);
    else
        structured_mode(in);
    return 0;
}
