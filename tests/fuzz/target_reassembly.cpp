// SPDX-License-Identifier: Apache-2.0

// Fuzz target: IpReassembler (plugin/datapath/reassembly.hpp), the only way
// IPv4 and IPv6 fragments reach libslirp and the fast paths.
//
// Input: a mode byte; bit 1 set: IPv6. Odd mode: raw frames, records {len
// u16 LE, bytes}, each passed to add() if is_ip_fragment() says so. Even
// mode: one datagram (payload size 8 + u16, a fill seed u8, an IP id u16), then
// records {first u16, count-1 u16, flags u8} cutting fragments of it: the
// first 8-byte block and the number of blocks (wrapped into the datagram),
// flags bit 0 flips a byte of the fragment, bit 1 advances the clock past
// the timeout.
//
// Properties: whatever comes out is a whole IPv4 packet with a valid
// header checksum and a length that matches (IPv6: no Fragment header, a
// payload length that matches); never more than kMaxPending
// datagrams are held; in even mode, once uncorrupted fragments covered the
// datagram it comes out, and then byte for byte as the original.
#include <algorithm>
#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"
#include "../unit/ipv4_datagram.hpp"
#include "../unit/ipv6_datagram.hpp"
#include "fuzz_input.hpp"
#include "datapath/reassembly.hpp"

using namespace rknp;

namespace {

constexpr size_t kMaxRecords = 128;

void check_whole(std::span<const uint8_t> d) {
    fuzz::require(!is_ip_fragment(d), "output is still a fragment");
    if (d.size() >= 14 && be16(d.data() + 12) == 0x86dd) {
        fuzz::require(d.size() >= 54 && (d[14] >> 4) == 6, "output IPv6 header");
        fuzz::require(size_t(be16(d.data() + 18)) + 54 == d.size(), "output IPv6 length");
        return;
    }
    fuzz::require(d.size() >= 34, "output shorter than the headers");
    fuzz::require(csum_fold(csum_add(0, d.data() + 14, 20)) == 0xffff,
                  "output IP header checksum");
    fuzz::require(size_t(be16(d.data() + 16)) + 14 == d.size(),
                  "output IP length");
}

void raw_mode(fuzz::Input &in) {
    IpReassembler r;
    int64_t now = 0;
    for (size_t i = 0; i < kMaxRecords && in.left() > 0; ++i) {
        auto bytes = in.bytes(in.u16());
        std::vector<uint8_t> frame(bytes.begin(), bytes.end());
        now += 1000;
        if (!is_ip_fragment(frame)) continue;
        auto o = r.add(frame, now);
        if (!o.datagram.empty()) check_whole(o.datagram);
        fuzz::require(r.pending() <= IpReassembler::kMaxPending, "pending bound");
    }
}

// The fragment of whole (an IPv4 or IPv6 datagram) carrying payload bytes
// [off, end), as the guest's kernel cuts it.
std::vector<uint8_t> cut(const std::vector<uint8_t> &whole, bool v6, uint16_t id, size_t off,
                         size_t end, bool more) {
    if (v6) return test::ipv6_fragment(whole, off, end - off, more, id);
    return test::ipv4_fragment(whole, off, end - off, more);
}

void structured_mode(fuzz::Input &in, bool v6) {
    const size_t max_payload = v6 ? 65535 : 65535 - 20;
    size_t payload = 8 + in.u16() % (max_payload - 8 + 1);
    uint8_t seed = in.u8();
    const uint16_t id = in.u16();
    auto whole = v6 ? test::ipv6_datagram(payload, seed) : test::ipv4_datagram(payload, id, seed);
    const size_t data_at = v6 ? 62 : 34; // first payload byte of a fragment
    size_t blocks = (payload + 7) / 8;
    IpReassembler r;
    int64_t now = 0;
    std::vector<bool> covered(blocks, false);
    size_t covered_count = 0;
    bool corrupted = false;
    for (size_t i = 0; i < kMaxRecords && in.left() > 0; ++i) {
        size_t first = in.u16() % blocks;
        size_t count = 1 + in.u16() % (blocks - first);
        // An IPv6 fragment's payload length (its data and the 8-byte
        // Fragment header) is 16 bits: at most 8190 blocks of data.
        if (v6) count = std::min<size_t>(count, 8190);
        uint8_t flags = in.u8();
        size_t off = first * 8, end = std::min(payload, (first + count) * 8);
        bool more = end < payload;
        auto frag = cut(whole, v6, id, off, end, more);
        if (flags & 1) {
            frag[data_at + (end - off) / 2] ^= 0x5a;
            corrupted = true;
        }
        if (flags & 2) {
            now += IpReassembler::kTimeoutMs;
            // What was pending expires with this call.
            covered.assign(blocks, false);
            covered_count = 0;
        }
        // IPv4: the whole datagram at once. IPv6 has atomic fragments.
        if (!is_ip_fragment(frag)) continue;
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
    const uint8_t mode = in.u8();
    if (mode & 1)
        raw_mode(in);
    else
        structured_mode(in, (mode & 2) != 0);
    return 0;
}
