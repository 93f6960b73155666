// SPDX-License-Identifier: Apache-2.0

// The fixed-size table of libslirp's guest sockets and its two indexes.
#include "slirp/guest_sockets.hpp"

#include <netinet/in.h>
#include <sys/random.h>

#include <cstring>

#include "common/clock.hpp"
#include "common/hash.hpp"

namespace rknp {

namespace {

// Load factor at most 1/2: probe chains stay short.
size_t index_size(size_t capacity) { return pow2_at_least(2 * capacity); }

} // namespace

GuestSockets::GuestSockets(size_t capacity)
    : entries_(capacity == 0 ? 1 : capacity),
      by_fd_(index_size(entries_.size()), 0),
      by_key_(index_size(entries_.size()), 0), mask_(by_fd_.size() - 1) {
    free_.reserve(entries_.size());
    for (size_t i = entries_.size(); i > 0; --i) free_.push_back(uint32_t(i - 1));
    if (::getrandom(&seed_, sizeof seed_, GRND_NONBLOCK) != ssize_t(sizeof seed_)) {
        seed_ = uint64_t(monotonic_ns()) * 0x9e3779b97f4a7c15ull;
    }
}

size_t GuestSockets::home_by_fd(int fd) const {
    return size_t(hash_mix(0x51ed270b27b6a5c3ull, uint64_t(unsigned(fd)))) & mask_;
}

size_t GuestSockets::home_by_key(const FlowKey &k) const {
    uint64_t h = seed_;
    h = hash_mix(h, load64(k.src));
    h = hash_mix(h, load64(k.src + 8));
    h = hash_mix(h, load64(k.dst));
    h = hash_mix(h, load64(k.dst + 8));
    h = hash_mix(h, uint64_t(k.sport) << 32 | uint64_t(k.dport) << 8 | k.proto);
    return size_t(hash_mix(h, seed_)) & mask_;
}

long GuestSockets::find_fd(int fd) const {
    for (size_t i = home_by_fd(fd);; i = (i + 1) & mask_) {
        uint32_t e = by_fd_[i];
        if (e == 0) return -1;
        if (entries_[e - 1].fd == fd) return long(e - 1);
    }
}

bool GuestSockets::contains(const FlowKey &k) const {
    if (k.proto == 0) return false;
    for (size_t i = home_by_key(k);; i = (i + 1) & mask_) {
        uint32_t e = by_key_[i];
        if (e == 0) return false;
        if (entries_[e - 1].key == k) return true;
    }
}

void GuestSockets::index_insert(Index &ix, size_t home, uint32_t entry) {
    size_t i = home;
    while (ix[i] != 0) i = (i + 1) & mask_;
    ix[i] = entry + 1;
}

// Removes entry from a linear-probing index and moves later members of the
// chain back so that every remaining one is still reachable from its home.
template <class Home>
void GuestSockets::index_erase(Index &ix, uint32_t entry, Home home) {
    size_t i = home(entries_[entry]);
    while (ix[i] != entry + 1) i = (i + 1) & mask_;
    for (size_t j = (i + 1) & mask_; ix[j] != 0; j = (j + 1) & mask_) {
        size_t h = home(entries_[ix[j] - 1]);
        // ix[j] may move to the hole at i unless its home lies cyclically
        // in (i, j].
        bool home_in_between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!home_in_between) {
            ix[i] = ix[j];
            i = j;
        }
    }
    ix[i] = 0;
}

void GuestSockets::erase_entry(uint32_t e) {
    index_erase(by_fd_, e, [this](const Entry &x) { return home_by_fd(x.fd); });
    if (entries_[e].key.proto != 0)
        index_erase(by_key_, e,
                    [this](const Entry &x) { return home_by_key(x.key); });
    if (entries_[e].key.proto != IPPROTO_TCP) --lingering_;
    entries_[e] = Entry{};
    free_.push_back(e);
    --live_;
}

void GuestSockets::begin_input(const FlowKey &key) {
    in_input_ = true;
    input_key_ = key;
}

void GuestSockets::on_register(int fd) {
    if (fd < 0 || !in_input_) return;
    if (long e = find_fd(fd); e >= 0) erase_entry(uint32_t(e));
    // Full only if a frame the stack loop did not see as a new flow made a
    // socket; the cap check counts size(), so the next new flow is refused.
    if (free_.empty()) return;
    uint32_t e = free_.back();
    free_.pop_back();
    FlowKey key = input_key_;
    // One key, one socket: a second socket for the same frame (ICMP's
    // fallback to UDP) is tracked without a key.
    if (key.proto != 0 && contains(key)) key = FlowKey{};
    if (key.proto != IPPROTO_TCP) ++lingering_;
    entries_[e] = Entry{fd, key};
    index_insert(by_fd_, home_by_fd(fd), e);
    if (key.proto != 0) index_insert(by_key_, home_by_key(key), e);
    ++live_;
}

void GuestSockets::on_unregister(int fd) {
    if (fd < 0) return;
    if (long e = find_fd(fd); e >= 0) erase_entry(uint32_t(e));
}

} // namespace rknp
