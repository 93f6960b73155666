// SPDX-License-Identifier: Apache-2.0

// EchoTable: slots, the keyed index, generations.
#include "datapath/icmp/echo_table.hpp"

#include <cstring>

#include "common/hash.hpp"

namespace rknp::icmp {

EchoTable::EchoTable(size_t slots, uint64_t seed)
    : entries_(slots), gen_(slots, 0), next_(slots, kNone),
      heads_(pow2_at_least(slots), kNone), seed_(seed) {
    free_.reserve(slots);
    for (size_t i = slots; i-- > 0;) free_.push_back(uint32_t(i));
}

size_t EchoTable::bucket(bool v6, const uint8_t guest[16], uint16_t id,
                         const uint8_t remote[16]) const {
    uint64_t h = seed_;
    h = hash_mix(h, load64(guest));
    h = hash_mix(h, load64(guest + 8));
    h = hash_mix(h, load64(remote));
    h = hash_mix(h, load64(remote + 8));
    h = hash_mix(h, uint64_t(id) << 1 | (v6 ? 1 : 0));
    return size_t(hash_mix(h, seed_)) & (heads_.size() - 1);
}

std::optional<uint32_t> EchoTable::find(bool v6, const uint8_t guest[16], uint16_t id,
                                        const uint8_t remote[16]) const {
    for (uint32_t i = heads_[bucket(v6, guest, id, remote)]; i != kNone; i = next_[i]) {
        const Entry &e = entries_[i];
        if (e.v6 == v6 && e.guest_id == id && std::memcmp(e.guest, guest, 16) == 0 &&
            std::memcmp(e.remote, remote, 16) == 0)
            return i;
    }
    return std::nullopt;
}

std::optional<uint32_t> EchoTable::insert(bool v6, const uint8_t guest[16], uint16_t id,
                                          const uint8_t remote[16]) {
    if (free_.empty()) return std::nullopt;
    uint32_t idx = free_.back();
    free_.pop_back();
    Entry &e = entries_[idx];
    e.open = true;
    e.v6 = v6;
    e.guest_id = id;
    std::memcpy(e.guest, guest, 16);
    std::memcpy(e.remote, remote, 16);
    size_t b = bucket(v6, guest, id, remote);
    next_[idx] = heads_[b];
    heads_[b] = idx;
    ++open_;
    return idx;
}

void EchoTable::remove(uint32_t idx) {
    Entry &e = entries_[idx];
    if (!e.open) return;
    for (uint32_t *link = &heads_[bucket(e.v6, e.guest, e.guest_id, e.remote)];
         *link != kNone; link = &next_[*link]) {
        if (*link == idx) {
            *link = next_[idx];
            break;
        }
    }
    next_[idx] = kNone;
    e.sock.reset();
    e.open = false;
    ++gen_[idx];
    free_.push_back(idx);
    --open_;
}

} // namespace rknp::icmp
