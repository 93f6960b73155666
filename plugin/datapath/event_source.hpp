// SPDX-License-Identifier: Apache-2.0

// One epoll set several event sources share (the TCP and UDP fast paths,
// the ICMP echo path, the stack loop's wake-up and tap), so the loop
// waits in one epoll_wait for all of them: each fd in a poll(2) call costs
// its wait-queue work twice a wake-up, about 1 µs a UDP round trip for
// the three sets the loop polled before (docs/benchmarks.md). Each
// source's epoll data carries its owner in the top two bits. A source
// made on its own (tests, fuzz targets) gets a set of its own.
#pragma once

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/fd.hpp"

namespace rknp {

enum class EventOwner : uint8_t { Loop = 0, Tcp = 1, Udp = 2, Echo = 3 };
inline constexpr size_t kEventOwners = 4; // what the two owner bits hold

// A source's share of a set: where it registers its fds, with its tag.
class EventSource {
public:
    static constexpr int kOwnerShift = 62;
    // A source's own references must fit below the owner bits.
    static constexpr uint64_t kRefMask = (uint64_t(1) << kOwnerShift) - 1;

    // A share of shared_epfd (the caller's, which outlives this source),
    // or with -1 a set of its own; throws Error (epoll_create1).
    EventSource(int shared_epfd, EventOwner owner);
    EventSource(const EventSource &) = delete;
    EventSource &operator=(const EventSource &) = delete;

    int fd() const { return fd_; }
    // Whether fd() is this source's alone: then it waits on it itself.
    bool owns_set() const { return own_.valid(); }
    // epoll_ctl ADD / MOD with ref (at most kRefMask) tagged: 0, or -1
    // with errno.
    int add(int fd, uint32_t events, uint64_t ref) const;
    int modify(int fd, uint32_t events, uint64_t ref) const;
    // epoll_ctl DEL: 0, or -1 with errno.
    int remove(int fd) const;

    // The events ready now (a non-blocking epoll_wait into buf): for a
    // source with a set of its own.
    std::span<const epoll_event> ready(std::span<epoll_event> buf) const;

    static uint64_t ref_of(const epoll_event &e) { return e.data.u64 & kRefMask; }
    static EventOwner owner_of(const epoll_event &e) {
        return EventOwner(e.data.u64 >> kOwnerShift);
    }

private:
    int ctl(int op, int fd, uint32_t events, uint64_t ref) const;

    UniqueFd own_;
    int fd_;
    uint64_t tag_;
};

} // namespace rknp
