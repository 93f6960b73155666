// SPDX-License-Identifier: Apache-2.0

// Guest TCP segments that reach the tap ahead of their flow's next expected
// byte, held a moment so that reordering on the way to the tap is not loss.
// A guest's own sockets never reorder, but a container behind docker0 does:
// its segments cross a veth pair and are NATed, and those queued on
// different CPUs reach the tap out of order (seen: one 64 KiB frame a few
// microseconds ahead of the one before it). Dropped, each costs the sender
// a retransmission at one segment per round trip and often a timeout: a
// container's upload fell to 0.9 Gbit/s. Held here (fixed slots, copied,
// allocated once) and given to the flow once the gap is filled, or as they
// are after kHoldMs: then the flow drops it as before and the sender's
// duplicate ACKs come that much later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace rknp::tcp {

class ReorderStash {
public:
    static constexpr int64_t kHoldMs = 2;

    // slots frames of at most frame_max bytes each.
    ReorderStash(size_t slots, size_t frame_max);

    bool empty() const { return used_ == 0; }
    // Copies frame (of flow, first byte seq) until now_ms + kHoldMs; false
    // when it does not fit or every slot is taken.
    bool hold(uint64_t flow, uint32_t seq, std::span<const uint8_t> frame, int64_t now_ms);
    // A held frame of flow starting at or before rcv_nxt (the oldest such),
    // or of any flow past its time (expired), as a slot to pass to frame()
    // and then release(); nullopt when there is none.
    std::optional<size_t> ready(uint64_t flow, uint32_t rcv_nxt) const;
    std::optional<size_t> expired(int64_t now_ms) const;
    std::span<const uint8_t> frame(size_t slot) const;
    uint64_t flow(size_t slot) const { return slots_[slot].flow; }
    void release(size_t slot);
    // The earliest time a held frame expires; -1 when none is held.
    int64_t next_deadline() const;

private:
    struct Slot {
        uint64_t flow = 0;
        uint32_t seq = 0;
        uint32_t len = 0;
        int64_t deadline = -1; // -1: free
    };
    std::vector<Slot> slots_;
    std::vector<uint8_t> data_; // slots_.size() * frame_max_
    size_t frame_max_;
    size_t used_ = 0;
};

} // namespace rknp::tcp
