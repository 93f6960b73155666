// SPDX-License-Identifier: Apache-2.0

// The clients of the UDP fast path's forwarded ports, kept apart from the
// guest's flows: strangers sending to a published port from ever new
// source ports must neither use up what the guest may open (FlowLimits'
// caps and new-flow rate, Stats::host_sockets: a client holds no socket)
// nor crowd out the clients the guest's service answers.
//
// Each forward has its own share: a cap on its clients, a token bucket for
// new ones, and its clients in order of last use, those the guest never
// answered apart. A new client of a forward at its cap takes the place of
// that forward's oldest unanswered client (else of its oldest); with every
// slot of the pool taken, of the oldest unanswered client of any forward
// (else of its own forward's oldest). An answered client of another
// forward is never evicted. The slots are one fixed pool all forwards
// share, allocated up front, so that a thousand published ports cost no
// more memory than one and nothing is allocated per client or datagram.
// Two indexes: the host side's (forward, client address) and the guest
// side's 4-tuple (the guest's end, the client as the guest sees it), which
// a FlowTable keeps. Idle expiry reads the oldest of the unanswered and of
// the answered. Stack thread only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "common/hash.hpp"
#include "datapath/flows/flow_table.hpp"
#include "datapath/flows/token_bucket.hpp"
#include "datapath/udp/flow.hpp"

namespace rknp::udp {

// The same client: family, address, port (and an IPv6 scope).
inline bool same_client(const ClientAddr &a, const ClientAddr &b) {
    if (a.sa.sa_family != b.sa.sa_family) return false;
    if (a.sa.sa_family == AF_INET)
        return a.v4.sin_port == b.v4.sin_port && a.v4.sin_addr.s_addr == b.v4.sin_addr.s_addr;
    return a.v6.sin6_port == b.v6.sin6_port && a.v6.sin6_scope_id == b.v6.sin6_scope_id &&
           std::memcmp(&a.v6.sin6_addr, &b.v6.sin6_addr, 16) == 0;
}

class ClientPool {
public:
    // slots: all forwards' clients at once; per_forward: one forward's;
    // new_per_sec: each forward's new clients a second (bursts of as many).
    ClientPool(size_t slots, size_t per_forward, uint32_t new_per_sec, uint64_t seed)
        : table_(std::max<size_t>(slots, 1), seed),
          per_forward_(std::max<size_t>(per_forward, 1)), rate_(new_per_sec),
          seed_(hash_mix(seed, 0x6a09e667f3bcc908ull)), links_(table_.slots()),
          hashes_(table_.slots(), 0), index_(pow2_at_least(2 * table_.slots()), 0),
          index_mask_(index_.size() - 1) {}

    size_t size() const { return table_.open_flows(); }
    size_t slots() const { return table_.slots(); }
    size_t per_forward() const { return per_forward_; }
    Flow &operator[](uint32_t i) { return table_[i]; }
    const Flow &operator[](uint32_t i) const { return table_[i]; }

    // Forward fwd (its index in udp::Forwards) starts: no clients, a full
    // bucket. Its record grows the list once, when the forward is added.
    void open_forward(size_t fwd, int64_t now_ms) {
        if (fwd >= shares_.size()) shares_.resize(fwd + 1, Share(rate_, now_ms));
        shares_[fwd] = Share(rate_, now_ms);
    }
    size_t clients(size_t fwd) const { return fwd < shares_.size() ? shares_[fwd].count : 0; }

    // A token of fwd's bucket for a new client.
    bool take_token(size_t fwd, int64_t now_ms) {
        return shares_[fwd].bucket.take(uint64_t(now_ms));
    }

    // The host side: client c of forward fwd.
    std::optional<uint32_t> find_client(size_t fwd, const ClientAddr &c) const {
        const uint64_t h = client_hash(fwd, c);
        for (size_t i = h & index_mask_;; i = (i + 1) & index_mask_) {
            const uint32_t v = index_[i];
            if (v == 0) return std::nullopt;
            const Flow &f = table_[v - 1];
            if (hashes_[v - 1] == h && f.fwd == int32_t(fwd) && same_client(f.client, c))
                return v - 1;
        }
    }
    // The guest side: the client a guest datagram from guest:guest_port to
    // remote:remote_port (IPv4-mapped) answers.
    std::optional<uint32_t> find_guest_side(const uint8_t guest[16], const uint8_t remote[16],
                                            uint16_t guest_port, uint16_t remote_port) const {
        if (table_.open_flows() == 0) return std::nullopt;
        // IPv4 ends are ::ffff:a.b.c.d; an IPv6 guest end (1.7) is not.
        const bool v6 = !is_mapped_v4(guest);
        return table_.find(guest, remote, guest_port, remote_port, v6,
                           table_.hash(guest, remote, guest_port, remote_port, v6));
    }

    // Where a new client of fwd goes: a free slot, or the victim's once
    // the caller has removed it, or nowhere (every slot an answered
    // client of another forward).
    enum class Room { Free, Evict, None };
    struct Place {
        Room room;
        uint32_t victim = 0;
    };
    Place place_for(size_t fwd) const {
        const Share &s = shares_[fwd];
        if (s.count >= per_forward_)
            return {Room::Evict, s.lists[0].tail != kNil ? s.lists[0].tail : s.lists[1].tail};
        if (table_.open_flows() < table_.slots()) return {Room::Free};
        if (all_[0].tail != kNil) return {Room::Evict, all_[0].tail};
        if (s.count != 0) return {Room::Evict, s.lists[1].tail};
        return {Room::None};
    }

    // A new client c of fwd whose frames carry ep (place_for said there
    // is room); the caller sets the rest of the flow. nullopt: no room.
    std::optional<uint32_t> add(size_t fwd, const ClientAddr &c, socklen_t len,
                                const Endpoints &ep, int64_t now_ms) {
        if (shares_[fwd].count >= per_forward_) return std::nullopt;
        const std::optional<uint32_t> slot = table_.reserve();
        if (!slot) return std::nullopt;
        const uint32_t i = *slot;
        Flow &f = table_[i];
        f.ep = ep;
        f.sock.reset();
        f.fwd = int32_t(fwd);
        f.client = c;
        f.client_len = len;
        f.reply_from = {};
        f.last_ms = now_ms;
        f.answered = false;
        table_.insert(i,
                      table_.hash(ep.guest, ep.remote, ep.guest_port, ep.remote_port, ep.v6));
        index_insert(i, client_hash(fwd, c));
        ++shares_[fwd].count;
        link(i);
        return i;
    }

    // The client spoke (touch) or the guest answered it: it moves to the
    // front of its lists (answered ones to the answered lists).
    void touch(uint32_t i, int64_t now_ms) {
        unlink(i);
        table_[i].last_ms = now_ms;
        link(i);
    }
    void answered(uint32_t i, int64_t now_ms) {
        unlink(i);
        table_[i].answered = true;
        table_[i].last_ms = now_ms;
        link(i);
    }

    void remove(uint32_t i) {
        Flow &f = table_[i];
        unlink(i);
        index_erase(i);
        --shares_[size_t(f.fwd)].count;
        f.fwd = -1;
        table_.release(i);
    }

    // Some client of fwd (the least recently used), or none.
    std::optional<uint32_t> any_of(size_t fwd) const {
        if (fwd >= shares_.size()) return std::nullopt;
        const Share &s = shares_[fwd];
        if (s.lists[0].tail != kNil) return s.lists[0].tail;
        if (s.lists[1].tail != kNil) return s.lists[1].tail;
        return std::nullopt;
    }
    // Some client of any forward, or none.
    std::optional<uint32_t> any() const {
        if (all_[0].tail != kNil) return all_[0].tail;
        if (all_[1].tail != kNil) return all_[1].tail;
        return std::nullopt;
    }

    // A client idle for its timeout (idle_ms unanswered, idle_answered_ms
    // answered) at now_ms, or none; the earliest such time, -1 if none.
    std::optional<uint32_t> expired(int64_t now_ms, int64_t idle_ms,
                                    int64_t idle_answered_ms) const {
        if (all_[0].tail != kNil && table_[all_[0].tail].last_ms + idle_ms <= now_ms)
            return all_[0].tail;
        if (all_[1].tail != kNil && table_[all_[1].tail].last_ms + idle_answered_ms <= now_ms)
            return all_[1].tail;
        return std::nullopt;
    }
    int64_t next_expiry(int64_t idle_ms, int64_t idle_answered_ms) const {
        int64_t d = -1;
        if (all_[0].tail != kNil) d = table_[all_[0].tail].last_ms + idle_ms;
        if (all_[1].tail != kNil) {
            const int64_t a = table_[all_[1].tail].last_ms + idle_answered_ms;
            if (d < 0 || a < d) d = a;
        }
        return d;
    }

private:
    static constexpr uint32_t kNil = UINT32_MAX;
    // Most recently used first.
    struct List {
        uint32_t head = kNil, tail = kNil;
    };
    struct Share {
        List lists[2]; // [answered]
        size_t count = 0;
        TokenBucket bucket;
        Share(uint32_t rate, int64_t now_ms) : bucket(rate, uint64_t(now_ms)) {}
    };
    // A slot's places in its forward's list and in the pool's.
    struct Links {
        uint32_t fprev = kNil, fnext = kNil, gprev = kNil, gnext = kNil;
    };

    template <uint32_t Links::*Prev, uint32_t Links::*Next>
    void push_front(List &l, uint32_t i) {
        Links &k = links_[i];
        k.*Prev = kNil;
        k.*Next = l.head;
        if (l.head != kNil)
            links_[l.head].*Prev = i;
        else
            l.tail = i;
        l.head = i;
    }
    template <uint32_t Links::*Prev, uint32_t Links::*Next>
    void take_out(List &l, uint32_t i) {
        const Links k = links_[i];
        if (k.*Prev != kNil)
            links_[k.*Prev].*Next = k.*Next;
        else
            l.head = k.*Next;
        if (k.*Next != kNil)
            links_[k.*Next].*Prev = k.*Prev;
        else
            l.tail = k.*Prev;
    }
    void link(uint32_t i) {
        const Flow &f = table_[i];
        push_front<&Links::fprev, &Links::fnext>(shares_[size_t(f.fwd)].lists[f.answered], i);
        push_front<&Links::gprev, &Links::gnext>(all_[f.answered], i);
    }
    void unlink(uint32_t i) {
        const Flow &f = table_[i];
        take_out<&Links::fprev, &Links::fnext>(shares_[size_t(f.fwd)].lists[f.answered], i);
        take_out<&Links::gprev, &Links::gnext>(all_[f.answered], i);
    }

    // Keyed: the clients choose their addresses and ports.
    uint64_t client_hash(size_t fwd, const ClientAddr &c) const {
        uint64_t h = hash_mix(seed_, uint64_t(fwd) << 16 | c.sa.sa_family);
        if (c.sa.sa_family == AF_INET) {
            h = hash_mix(h, uint64_t(c.v4.sin_addr.s_addr) << 16 | c.v4.sin_port);
        } else {
            h = hash_mix(h, load64(c.v6.sin6_addr.s6_addr));
            h = hash_mix(h, load64(c.v6.sin6_addr.s6_addr + 8));
            h = hash_mix(h, uint64_t(c.v6.sin6_scope_id) << 16 | c.v6.sin6_port);
        }
        return hash_mix(h, seed_);
    }
    // Open addressing as FlowTable's: slot + 1, 0 empty; backward-shift
    // deletion, so no tombstones pile up under churn.
    void index_insert(uint32_t slot, uint64_t h) {
        hashes_[slot] = h;
        size_t i = h & index_mask_;
        while (index_[i] != 0) i = (i + 1) & index_mask_;
        index_[i] = slot + 1;
    }
    void index_erase(uint32_t slot) {
        size_t i = hashes_[slot] & index_mask_;
        while (index_[i] != slot + 1) i = (i + 1) & index_mask_;
        for (size_t j = i;;) {
            j = (j + 1) & index_mask_;
            if (index_[j] == 0) break;
            const size_t home = hashes_[index_[j] - 1] & index_mask_;
            const bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
            if (movable) {
                index_[i] = index_[j];
                i = j;
            }
        }
        index_[i] = 0;
    }

    FlowTable<Flow> table_;
    size_t per_forward_;
    uint32_t rate_;
    uint64_t seed_;
    std::vector<Links> links_;
    std::vector<uint64_t> hashes_; // per slot: its client hash
    std::vector<uint32_t> index_;  // the host side's index
    size_t index_mask_;
    List all_[2]; // every forward's clients, [answered]
    std::vector<Share> shares_;
};

} // namespace rknp::udp
