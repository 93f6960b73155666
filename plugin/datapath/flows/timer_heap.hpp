// SPDX-License-Identifier: Apache-2.0

// Per-flow deadlines of the fast paths (TCP and UDP): an indexed binary min-heap over flow
// slots, sized for every slot at construction, so arming, moving and
// cancelling a flow's one deadline is O(log n) without allocating, and the
// loop learns the next deadline in O(1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rknp {

class TimerHeap {
public:
    explicit TimerHeap(size_t ids);

    // Arms id at when (ms), or moves it there; when < 0 cancels.
    void set(uint32_t id, int64_t when);
    void cancel(uint32_t id);
    int64_t deadline(uint32_t id) const;
    bool empty() const { return heap_.empty(); }
    // Earliest deadline and its id; only when !empty().
    int64_t top_deadline() const { return key_[heap_[0]]; }
    uint32_t top_id() const { return heap_[0]; }

private:
    static constexpr uint32_t kNone = UINT32_MAX;
    void place(size_t i, uint32_t id);
    void up(size_t i);
    void down(size_t i);

    std::vector<uint32_t> heap_; // ids; reserved for all ids
    std::vector<int64_t> key_;   // per id
    std::vector<uint32_t> pos_;  // per id: index in heap_, or kNone
};

} // namespace rknp
