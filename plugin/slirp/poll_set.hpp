// SPDX-License-Identifier: Apache-2.0

// libslirp's host sockets in an epoll set of their own, kept by
// difference: each round libslirp names every socket it wants to hear
// about (slirp_pollfds_fill calls add), idle ones included, and only what
// changed since the last round reaches the kernel. A poll(2) over all of
// them was 85 % of the stack thread with 4000 idle connections, a 64-byte
// ping-pong 2.1-69 ms against 0.03-0.14 without (docs/benchmarks.md). The
// stack loop waits on fd() inside its own set; collect() then reads which
// sockets are ready. Stack thread only.
#pragma once

#include <slirp/libslirp.h>
#include <sys/epoll.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/fd.hpp"

namespace rknp {

class PollSet {
public:
    // Throws Error (epoll_create1).
    PollSet();
    PollSet(const PollSet &) = delete;
    PollSet &operator=(const PollSet &) = delete;

    // Readable while one of libslirp's sockets has events.
    int fd() const { return ep_.get(); }

    // A round: begin(), add() for each socket libslirp names, end(); then,
    // once fd() is readable, collect(); then slirp_revents for each index.
    void begin();
    // Libslirp's add_poll: fd with SLIRP_POLL_* events. Returns the index
    // libslirp hands back to slirp_revents, or -1 (the socket could not be
    // watched: libslirp sees no events for it this round).
    int add(int fd, int slirp_events) {
        // Most sockets, idle ones, are named as in the last round: inline,
        // no work (4000 idle connections: 4000 calls a round).
        if (fd >= 0 && size_t(fd) < entries_.size()) {
            Entry &e = entries_[size_t(fd)];
            if (e.in && e.seen != round_ && e.events == epoll_events(slirp_events)) {
                e.seen = round_;
                ++seen_watched_;
                return fd;
            }
        }
        return add_changed(fd, slirp_events);
    }
    // Sockets libslirp did not name this round leave the set: a closed
    // peer's HUP, reported whatever is asked for, would wake every wait.
    // Those under watch_hangup stay, edge-triggered with no interest: a
    // hangup or error then wakes one wait and is listed by hangups().
    void end();
    // Keep watching fd for a hangup while libslirp does not (until it is
    // forgotten): libslirp stops reading a socket at its EOF.
    void watch_hangup(int fd);
    // The sockets under watch_hangup, unnamed by libslirp, that reported a
    // hangup or an error in this round's collect().
    struct Hangup {
        int fd;
        bool error; // EPOLLERR: reset, not closed both ways
    };
    std::span<const Hangup> hangups() const { return hangups_; }
    // This round's ready sockets (a non-blocking wait on fd()): how many,
    // or -1 with errno.
    int collect();
    // Waits up to timeout_ms for fd() alone, then collects: for a caller
    // with nothing else to wait for (tests). How many, or -1 with errno.
    int wait(int timeout_ms);
    // What the wait reported for index idx, as SLIRP_POLL_* bits; 0 for
    // sockets with nothing this round.
    int slirp_revents(int idx) const {
        if (idx < 0 || size_t(idx) >= entries_.size()) return 0;
        const Entry &e = entries_[size_t(idx)];
        return e.ready == round_ ? slirp_bits(e.revents) : 0;
    }

    // Libslirp's register/unregister callbacks: fd is a new socket (a
    // number a closed one may have had) or is about to be closed. Its
    // entry, and any registration, go: with them, an unchanged interest
    // in a reused fd number is never mistaken for one already registered.
    void forget(int fd) noexcept;

    // For tests and the stats: sockets in the set, and epoll_ctl calls
    // made since construction (what rounds of idle sockets must not add to).
    size_t watched() const { return watched_.size(); }
    uint64_t ctl_calls() const { return ctl_calls_; }

private:
    struct Entry {
        uint64_t seen = 0;     // the round libslirp last named it
        uint64_t ready = 0;    // the round revents is from
        uint32_t events = 0;   // epoll events registered
        uint32_t revents = 0;  // epoll events reported in round `ready`
        uint32_t pos = 0;      // index in watched_ while registered
        bool in = false;       // registered in ep_
        bool watch_hup = false; // park instead of leaving the set
        bool parked = false;   // registered for HUP/ERR alone, not in watched_
    };
    static uint32_t epoll_events(int slirp_events) {
        // HUP and ERR are reported whatever is asked for.
        return ((slirp_events & SLIRP_POLL_IN) ? uint32_t(EPOLLIN) : 0u) |
               ((slirp_events & SLIRP_POLL_OUT) ? uint32_t(EPOLLOUT) : 0u) |
               ((slirp_events & SLIRP_POLL_PRI) ? uint32_t(EPOLLPRI) : 0u);
    }
    static int slirp_bits(uint32_t r) {
        return ((r & EPOLLIN) ? SLIRP_POLL_IN : 0) | ((r & EPOLLOUT) ? SLIRP_POLL_OUT : 0) |
               ((r & EPOLLPRI) ? SLIRP_POLL_PRI : 0) | ((r & EPOLLERR) ? SLIRP_POLL_ERR : 0) |
               ((r & EPOLLHUP) ? SLIRP_POLL_HUP : 0);
    }
    // add() for a socket new to the set, or whose interest changed.
    int add_changed(int fd, int slirp_events);
    int ctl(int op, int fd, uint32_t events);
    void drop(Entry &e);
    void park(int fd, Entry &e);

    UniqueFd ep_;
    uint64_t round_ = 0;
    size_t seen_watched_ = 0; // registered entries named this round
    std::vector<Entry> entries_; // by fd; grows with the highest fd seen
    std::vector<int> watched_;   // the registered fds, for end()'s sweep
    static constexpr size_t kMaxEvents = 256; // the rest: next round
    std::array<epoll_event, kMaxEvents> ready_{};
    std::vector<Hangup> hangups_;
    uint64_t ctl_calls_ = 0;
};

} // namespace rknp
