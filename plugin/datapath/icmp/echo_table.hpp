// SPDX-License-Identifier: Apache-2.0

// The echo path's table: a fixed array of entries allocated up front, one
// per (guest address, echo id, destination), each owning a ping socket; a
// keyed hash index with chains through the slots, the free list, and
// per-slot generations so that a stale epoll datum is never taken for the
// entry that reused its slot. Nothing here allocates after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/fd.hpp"

namespace rknp::icmp {

struct Entry {
    bool open = false;
    bool v6 = false;
    uint16_t guest_id = 0;   // the echo id the guest chose
    uint8_t guest[16]{};     // the guest's address (IPv4-mapped for IPv4)
    uint8_t remote[16]{};    // the address it pinged
    bool loopback = false;   // remote is the gateway: the host's loopback
    uint8_t guest_mac[6]{};  // from its latest request
    UniqueFd sock;           // the ping socket
    int64_t last_ms = 0;     // latest request or reply
};

class EchoTable {
public:
    // slots >= 1; seed keys the hash (the guest chooses the keys).
    EchoTable(size_t slots, uint64_t seed);
    EchoTable(const EchoTable &) = delete;
    EchoTable &operator=(const EchoTable &) = delete;

    size_t slots() const { return entries_.size(); }
    size_t open() const { return open_; }
    bool full() const { return free_.empty(); }
    Entry &operator[](uint32_t idx) { return entries_[idx]; }
    const Entry &operator[](uint32_t idx) const { return entries_[idx]; }

    std::optional<uint32_t> find(bool v6, const uint8_t guest[16], uint16_t id,
                                 const uint8_t remote[16]) const;
    // A free slot, indexed under the key, its entry open with the key set
    // (socket and times are the caller's); nothing when full.
    std::optional<uint32_t> insert(bool v6, const uint8_t guest[16], uint16_t id,
                                   const uint8_t remote[16]);
    // Closes the entry's socket, unindexes it and frees the slot.
    void remove(uint32_t idx);

    // The reference of a slot's current entry: generation (30 bits) << 32
    // | slot, clear of EventSource's owner bits.
    uint64_t ref(uint32_t idx) const { return uint64_t(gen_[idx] & kGenMask) << 32 | idx; }
    // The slot ref names if its entry is still the open one it named.
    std::optional<uint32_t> slot_of(uint64_t ref) const {
        uint32_t idx = uint32_t(ref);
        if (idx >= entries_.size() || this->ref(idx) != ref || !entries_[idx].open)
            return std::nullopt;
        return idx;
    }

private:
    static constexpr uint32_t kNone = UINT32_MAX;
    static constexpr uint32_t kGenMask = 0x3fffffff;

    size_t bucket(bool v6, const uint8_t guest[16], uint16_t id,
                  const uint8_t remote[16]) const;

    std::vector<Entry> entries_;
    std::vector<uint32_t> gen_;   // per slot, bumped when freed
    std::vector<uint32_t> next_;  // per slot: the next in its chain
    std::vector<uint32_t> heads_; // per bucket: its first slot
    std::vector<uint32_t> free_;  // free slots (stack)
    size_t open_ = 0;
    uint64_t seed_;
};

} // namespace rknp::icmp
