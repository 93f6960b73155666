// SPDX-License-Identifier: Apache-2.0

// ReorderStash: a handful of fixed slots, scanned linearly (they are few and
// usually all free).
#include "datapath/tcp/reorder.hpp"

#include <cstring>

#include "datapath/tcp/seq.hpp"

namespace rknp::tcp {

ReorderStash::ReorderStash(size_t slots, size_t frame_max)
    : slots_(slots), data_(slots * frame_max), frame_max_(frame_max) {}

bool ReorderStash::hold(uint64_t flow, uint32_t seq, std::span<const uint8_t> frame,
                        int64_t now_ms) {
    if (frame.size() > frame_max_ || used_ == slots_.size()) return false;
    for (size_t i = 0; i < slots_.size(); ++i) {
        Slot &s = slots_[i];
        if (s.deadline >= 0) continue;
        std::memcpy(data_.data() + i * frame_max_, frame.data(), frame.size());
        s = Slot{flow, seq, uint32_t(frame.size()), now_ms + kHoldMs};
        ++used_;
        return true;
    }
    return false;
}

std::optional<size_t> ReorderStash::ready(uint64_t flow, uint32_t rcv_nxt) const {
    std::optional<size_t> best;
    for (size_t i = 0; i < slots_.size() && used_ != 0; ++i) {
        const Slot &s = slots_[i];
        if (s.deadline < 0 || s.flow != flow || seq_gt(s.seq, rcv_nxt)) continue;
        if (!best || seq_lt(s.seq, slots_[*best].seq)) best = i;
    }
    return best;
}

std::optional<size_t> ReorderStash::expired(int64_t now_ms) const {
    for (size_t i = 0; i < slots_.size() && used_ != 0; ++i)
        if (slots_[i].deadline >= 0 && slots_[i].deadline <= now_ms) return i;
    return std::nullopt;
}

std::span<const uint8_t> ReorderStash::frame(size_t slot) const {
    return {data_.data() + slot * frame_max_, slots_[slot].len};
}

void ReorderStash::release(size_t slot) {
    if (slots_[slot].deadline < 0) return;
    slots_[slot].deadline = -1;
    --used_;
}

int64_t ReorderStash::next_deadline() const {
    int64_t d = -1;
    for (size_t i = 0; i < slots_.size() && used_ != 0; ++i) {
        int64_t t = slots_[i].deadline;
        if (t >= 0 && (d < 0 || t < d)) d = t;
    }
    return d;
}

} // namespace rknp::tcp
