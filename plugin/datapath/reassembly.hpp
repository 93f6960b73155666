// SPDX-License-Identifier: Apache-2.0

// IPv4 and IPv6 reassembly of guest fragments, in front of libslirp and the
// fast paths. Debian 12's libslirp 4.7.0 crashes the whole process in its
// own ip_reass (tests/fuzz/README.md) and drops IPv6 fragments, so guest
// fragments are reassembled here and libslirp and the fast paths only ever
// see whole datagrams. Strict by design: overlapping fragments must carry
// identical bytes or the datagram is dropped (RFC 5722 for IPv6); memory is
// bounded (kMaxPending datagrams of at most 64 KiB each); incomplete
// datagrams older than kTimeoutMs are given up when the next fragment
// arrives. IPv6: only a Fragment header right after the fixed header (what
// a guest's UDP or TCP stack sends); other extension headers before it
// leave the packet unrecognised, for libslirp to drop as before.
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
// True for an Ethernet frame holding an IPv6 packet whose next header
// after the fixed one is a Fragment header.
bool is_ipv6_fragment(std::span<const uint8_t> frame);
inline bool is_ip_fragment(std::span<const uint8_t> frame) {
    return is_ipv4_fragment(frame) || is_ipv6_fragment(frame);
}

class IpReassembler {
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

    // frame: an Ethernet frame for which is_ip_fragment() is true. now_ms:
    // a monotonic clock. Malformed fragments are dropped, never thrown.
    Outcome add(std::span<const uint8_t> frame, int64_t now_ms);

    size_t pending() const { return pending_.size(); }

private:
    // IPv6's payload length counts no fixed header; IPv4's total does.
    static constexpr size_t kMaxPayload4 = 65535 - 20, kMaxPayload6 = 65535;
    static constexpr size_t kBlocks = (kMaxPayload6 + 7) / 8;

    struct Key {
        bool v6;
        uint8_t src[16], dst[16]; // IPv4: the first 4 bytes
        uint32_t id;
        uint8_t proto; // IPv6: the Fragment header's next header
        bool operator==(const Key &) const = default;
    };
    // One fragment, parsed; data points into the frame.
    struct Piece {
        Key key{};
        const uint8_t *data = nullptr;
        size_t off = 0, len = 0, head_len = 0, max_payload = 0;
        bool more = false;
    };
    static bool parse(std::span<const uint8_t> frame, Piece &p);
    struct Datagram {
        Key key{};
        int64_t started_ms = 0;
        uint32_t fragments = 0;
        std::vector<uint8_t> head;    // Ethernet + fixed IP header of offset 0
        std::vector<uint8_t> payload; // grows to the highest end seen
        std::bitset<kBlocks> have;    // 8-byte blocks received
        size_t blocks = 0;            // have.count(), kept up to date
        size_t total = 0;             // payload size, once the last arrived
        bool have_last = false;
    };

    // Merges one fragment into d; false if it contradicts what d holds.
    static bool merge(Datagram &d, std::span<const uint8_t> frame, const Piece &p);
    void build(const Datagram &d);
    uint32_t expire(int64_t now_ms);

    std::vector<Datagram> pending_; // oldest first
    std::vector<uint8_t> out_;
};

} // namespace rknp
