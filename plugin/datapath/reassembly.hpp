// SPDX-License-Identifier: Apache-2.0

// IPv4 reassembly in front of libslirp. Debian 12's libslirp 4.7.0 crashes
// the whole process in its own ip_reass (tests/fuzz/README.md), so guest
// fragments are reassembled here and libslirp only ever sees whole
// datagrams. Strict by design: overlapping fragments must carry identical
// bytes or the datagram is dropped; memory is bounded (kMaxPending
// datagrams of at most 64 KiB each); incomplete datagrams older than
// kTimeoutMs are given up when the next fragment arrives.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rknp {

// True for an Ethernet frame holding an IPv4 packet with MF set or a
// non-zero fragment offset.
bool is_ipv4_fragment(std::span<const uint8_t> frame);

class Ipv4Reassembler {
public:
    static constexpr size_t kMaxPending = 16;
    static constexpr int64_t kTimeoutMs = 30'000; // Linux's ipfrag_time

    struct Outcome {
        // Non-empty: a whole datagram (Ethernet frame, no fragment bits),
        // valid until the next add().
        std::span<uint8_t> datagram;
        uint32_t fragments = 0; // fragments the datagram was made of
        uint32_t dropped = 0;   // fragments given up during this call
    };

    // frame: an Ethernet frame for which is_ipv4_fragment() is true. now_ms:
    // a monotonic clock. Malformed fragments are dropped, never thrown.
    Outcome add(std::span<const uint8_t> frame, int64_t now_ms);

    size_t pending() const { return pending_.size(); }

private:
    static constexpr size_t kMaxPayload = 65535 - 20;
    static constexpr size_t kBlocks = (kMaxPayload + 7) / 8;

    struct Key {
        uint32_t src, dst;
        uint16_t id;
        uint8_t proto;
        bool operator==(const Key &) const = default;
    };
    struct Datagram {
        Key key{};
        int64_t started_ms = 0;
        uint32_t fragments = 0;
        std::vector<uint8_t> head;    // Ethernet + IP header of offset 0
        std::vector<uint8_t> payload; // grows to the highest end seen
        std::bitset<kBlocks> have;    // 8-byte blocks received
        size_t blocks = 0;            // have.count(), kept up to date
        size_t total = 0;             // payload size, once the last arrived
        bool have_last = false;
    };

    // Merges one fragment into d; false if it contradicts what d holds.
    static bool merge(Datagram &d, std::span<const uint8_t> frame, size_t off,
                      size_t len, bool more);
    void build(const Datagram &d);
    uint32_t expire(int64_t now_ms);

    std::vector<Datagram> pending_; // oldest first
    std::vector<uint8_t> out_;
};

} // namespace rknp
