// SPDX-License-Identifier: Apache-2.0

// The fast paths' flow table (TCP and UDP): a fixed array of flow slots
// allocated up front, a keyed open-addressing index from 4-tuple to slot,
// the free list, and per-slot generations so that a stale reference (an
// epoll datum or a held frame's owner) is never taken for the flow that
// reused its slot. F has endpoints() (an Endpoints) and closed().
#pragma once

#include <sys/random.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "common/clock.hpp"
#include "common/hash.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp {

// Keys for a flow index (and TCP's ISNs): random, or at worst different
// per process start.
inline std::array<uint64_t, 2> random_flow_seeds() {
    std::array<uint64_t, 2> seeds = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
    if (::getrandom(seeds.data(), sizeof seeds, GRND_NONBLOCK) != ssize_t(sizeof seeds))
        seeds[0] ^= uint64_t(monotonic_ns()) * 0x9e3779b97f4a7c15ull;
    return seeds;
}

template <class F>
class FlowTable {
public:
    // slots >= 1; seed keys the hash (the guest chooses the 4-tuples: an
    // unkeyed hash would let it pile every flow into one chain).
    FlowTable(size_t slots, uint64_t seed)
        : flows_(slots), gen_(slots, 0), hashes_(slots, 0), seed_(seed) {
        free_.reserve(slots);
        for (size_t i = slots; i-- > 0;) free_.push_back(uint32_t(i));
        index_.assign(pow2_at_least(2 * slots), 0);
        index_mask_ = index_.size() - 1;
    }

    size_t slots() const { return flows_.size(); }
    size_t open_flows() const { return open_; }
    F &operator[](uint32_t idx) { return flows_[idx]; }
    const F &operator[](uint32_t idx) const { return flows_[idx]; }

    uint64_t hash(const uint8_t guest[16], const uint8_t remote[16], uint16_t guest_port,
                  uint16_t remote_port, bool v6) const {
        uint64_t h = seed_;
        h = hash_mix(h, load64(guest));
        h = hash_mix(h, load64(guest + 8));
        h = hash_mix(h, load64(remote));
        h = hash_mix(h, load64(remote + 8));
        h = hash_mix(h, uint64_t(guest_port) << 32 | uint64_t(remote_port) << 8 | (v6 ? 1 : 0));
        return hash_mix(h, seed_);
    }

    // Slot of the open flow with this 4-tuple (h = its hash), or nothing.
    std::optional<uint32_t> find(const uint8_t guest[16], const uint8_t remote[16],
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

    // A free slot for a flow being opened (nothing when full). The caller
    // either indexes it (insert) or gives it back (unreserve).
    std::optional<uint32_t> reserve() {
        if (free_.empty()) return std::nullopt;
        uint32_t idx = free_.back();
        free_.pop_back();
        return idx;
    }
    void unreserve(uint32_t idx) { free_.push_back(idx); }
    void insert(uint32_t idx, uint64_t h) {
        hashes_[idx] = h;
        size_t i = h & index_mask_;
        while (index_[i] != 0) i = (i + 1) & index_mask_;
        index_[i] = idx + 1;
        ++open_;
    }
    // A closed flow leaves the index; its slot's generation moves on.
    void release(uint32_t idx) {
        unindex(idx);
        ++gen_[idx];
        free_.push_back(idx);
        --open_;
    }

    // The reference of a slot's current flow: generation (29 bits) << 32 |
    // slot. The top three bits stay clear for the caller's own tag and
    // EventSource's owner bits.
    uint64_t ref(uint32_t idx) const { return uint64_t(gen_[idx] & kGenMask) << 32 | idx; }
    // Whether ref still names an open flow (its slot may have been freed
    // or reused since).
    bool names_open_flow(uint64_t ref) const {
        uint32_t idx = uint32_t(ref);
        return idx < flows_.size() && this->ref(idx) == ref && !flows_[idx].closed();
    }

private:
    static constexpr uint32_t kGenMask = 0x1fffffff;

    void unindex(uint32_t idx) {
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

    std::vector<F> flows_;
    std::vector<uint32_t> gen_;    // per slot, bumped when freed
    std::vector<uint64_t> hashes_; // per slot
    std::vector<uint32_t> free_;   // free slots (stack)
    std::vector<uint32_t> index_;  // open addressing: slot + 1, 0 empty
    size_t index_mask_ = 0;
    size_t open_ = 0;
    uint64_t seed_;
};

} // namespace rknp
