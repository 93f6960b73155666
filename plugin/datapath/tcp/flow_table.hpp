// SPDX-License-Identifier: Apache-2.0

// The fast path's flow table: a fixed array of Flow slots allocated up
// front, a keyed open-addressing index from 4-tuple to slot, the free list,
// and per-slot generations so that a stale reference (an epoll datum or a
// held frame's owner) is never taken for the flow that reused its slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "datapath/tcp/flow.hpp"

namespace rknp::tcp {

class FlowTable {
public:
    // slots >= 1; seed keys the hash (the guest chooses the 4-tuples: an
    // unkeyed hash would let it pile every flow into one chain).
    FlowTable(size_t slots, uint64_t seed);

    size_t slots() const { return flows_.size(); }
    size_t open_flows() const { return open_; }
    Flow &operator[](uint32_t idx) { return flows_[idx]; }
    const Flow &operator[](uint32_t idx) const { return flows_[idx]; }

    uint64_t hash(const uint8_t guest[16], const uint8_t remote[16], uint16_t guest_port,
                  uint16_t remote_port, bool v6) const;
    // Slot of the open flow with this 4-tuple (h = its hash), or nothing.
    std::optional<uint32_t> find(const uint8_t guest[16], const uint8_t remote[16],
                                 uint16_t guest_port, uint16_t remote_port, bool v6,
                                 uint64_t h) const;

    // A free slot for a flow being opened (nothing when full). The caller
    // either indexes it (insert) or gives it back (unreserve).
    std::optional<uint32_t> reserve();
    void unreserve(uint32_t idx) { free_.push_back(idx); }
    void insert(uint32_t idx, uint64_t h);
    // A closed flow leaves the index; its slot's generation moves on.
    void release(uint32_t idx);

    // The reference of a slot's current flow: generation (30 bits) << 32 |
    // slot. The top bits stay clear for the caller's own tags.
    uint64_t ref(uint32_t idx) const { return uint64_t(gen_[idx] & kGenMask) << 32 | idx; }
    // Whether ref still names an open flow (its slot may have been freed
    // or reused since).
    bool names_open_flow(uint64_t ref) const {
        uint32_t idx = uint32_t(ref);
        return idx < flows_.size() && this->ref(idx) == ref && !flows_[idx].closed();
    }

private:
    static constexpr uint32_t kGenMask = 0x3fffffff;

    void unindex(uint32_t idx);

    std::vector<Flow> flows_;
    std::vector<uint32_t> gen_;    // per slot, bumped when freed
    std::vector<uint64_t> hashes_; // per slot
    std::vector<uint32_t> free_;   // free slots (stack)
    std::vector<uint32_t> index_;  // open addressing: slot + 1, 0 empty
    size_t index_mask_ = 0;
    size_t open_ = 0;
    uint64_t seed_;
};

} // namespace rknp::tcp
