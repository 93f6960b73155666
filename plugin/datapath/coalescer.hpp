// SPDX-License-Identifier: Apache-2.0

// Stack -> guest: consecutive in-order segments of one TCP flow become one
// GSO frame (like a NIC's LRO), so the guest's stack handles one packet
// instead of dozens; superseded pure ACKs are left out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/stats.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/offload.hpp"

namespace rknp {

// Merges stack -> guest TCP segments. Frames are written to the sink in the
// order they were given; flush() must be called before the loop sleeps. Of consecutive pure ACKs of one flow, each acking more than the
// one before, only the last is written (like GRO would merge them): a
// cumulative ACK says all the earlier ones did; duplicate ACKs all go out.
class Coalescer {
public:
    // Counts merged segments and superseded ACKs in stats.
    Coalescer(GuestSink &sink, Stats &stats);

    void push(std::span<const uint8_t> frame);
    void flush();

private:
    struct Flow; // parsed headers of a mergeable segment
    bool parse(std::span<const uint8_t> frame, Flow &f) const;
    bool can_append(const Flow &f) const;
    bool supersedes(std::span<const uint8_t> frame, const Flow &f) const;
    void emit_pending();

    GuestSink &sink_;
    Stats &stats_;
    std::vector<uint8_t> buf_; // headers of the first segment + payloads
    size_t segments_ = 0;
    size_t hdr_len_ = 0;   // Ethernet + IP + TCP
    size_t l3_off_ = 14;
    bool ipv6_ = false;
    uint16_t gso_size_ = 0;
    uint16_t last_len_ = 0;
    uint32_t next_seq_ = 0;
    bool push_flag_ = false;
    std::vector<uint8_t> head_; // headers of a segment written unmerged
    std::vector<uint8_t> ack_;  // the pending pure ACK, when ack_pending_
    uint32_t ack_no_ = 0;
    bool ack_pending_ = false;
};

} // namespace rknp
