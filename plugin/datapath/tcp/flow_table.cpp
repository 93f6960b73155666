// SPDX-License-Identifier: Apache-2.0

// FlowTable: slot allocation, the keyed 4-tuple index, generations.
#include "datapath/tcp/flow_table.hpp"

#include <cstring>

#include "common/hash.hpp"

namespace rknp::tcp {

FlowTable::FlowTable(size_t slots, uint64_t seed)
    : flows_(slots), gen_(slots, 0), hashes_(slots, 0), seed_(seed) {
    free_.reserve(slots);
    for (size_t i = slots; i-- > 0;) free_.push_back(uint32_t(i));
    index_.assign(pow2_at_least(2 * slots), 0);
    index_mask_ = index_.size() - 1;
}

uint64_t FlowTable::hash(const uint8_t guest[16], const uint8_t remote[16],
                         uint16_t guest_port, uint16_t remote_port, bool v6) const {
    uint64_t h = seed_;
    h = hash_mix(h, load64(guest));
    h = hash_mix(h, load64(guest + 8));
    h = hash_mix(h, load64(remote));
    h = hash_mix(h, load64(remote + 8));
    h = hash_mix(h, uint64_t(guest_port) << 32 | uint64_t(remote_port) << 8 | (v6 ? 1 : 0));
    return hash_mix(h, seed_);
}

std::optional<uint32_t> FlowTable::find(const uint8_t guest[16], const uint8_t remote[16],
                                        uint16_t guest_port, uint16_t remote_port, bool v6,
                                        uint64_t h) const {
    for (size_t i = h & index_mask_;; i = (i + 1) & index_mask_) {
        uint32_t v = index_[i];
        if (v == 0) return std::nullopt;
        const Endpoints &ep = flows_[v - 1].endpoints();
        if (hashes_[v - 1] == h && ep.v6 == v6 && ep.guest_port == guest_port &&
            ep.remote_port == remote_port && std::memcmp(ep.guest, guest, 16) == 0 &&
            std::memcmp(ep.remote, remote, 16) == 0)
            return v - 1;
    }
}

std::optional<uint32_t> FlowTable::reserve() {
    if (free_.empty()) return std::nullopt;
    uint32_t idx = free_.back();
    free_.pop_back();
    return idx;
}

void FlowTable::insert(uint32_t idx, uint64_t h) {
    hashes_[idx] = h;
    size_t i = h & index_mask_;
    while (index_[i] != 0) i = (i + 1) & index_mask_;
    index_[i] = idx + 1;
    ++open_;
}

void FlowTable::release(uint32_t idx) {
    unindex(idx);
    ++gen_[idx];
    free_.push_back(idx);
    --open_;
}

void FlowTable::unindex(uint32_t idx) {
    size_t i = hashes_[idx] & index_mask_;
    while (index_[i] != idx + 1) i = (i + 1) & index_mask_;
    // Backward-shift deletion: no tombstones, chains stay short.
    for (size_t j = i;;) {
        j = (j + 1) & index_mask_;
        if (index_[j] == 0) break;
        size_t home = hashes_[index_[j] - 1] & index_mask_;
        bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            index_[i] = index_[j];
            i = j;
        }
    }
    index_[i] = 0;
}

} // namespace rknp::tcp
