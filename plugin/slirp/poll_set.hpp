// SPDX-License-Identifier: Apache-2.0

// The stack loop's poll(2) set, rebuilt every iteration: the loop's own fds
// and the host sockets libslirp registers through its add_poll callback,
// with libslirp's event bits translated both ways.
#pragma once

#include <poll.h>
#include <slirp/libslirp.h>

#include <vector>

namespace rknp {

class PollSet {
public:
    void clear() { fds_.clear(); }
    bool empty() const { return fds_.empty(); }
    // Adds fd with SLIRP_POLL_* events; returns its index.
    int add(int fd, int slirp_events) {
        short events = 0;
        if (slirp_events & SLIRP_POLL_IN) events |= POLLIN;
        if (slirp_events & SLIRP_POLL_OUT) events |= POLLOUT;
        if (slirp_events & SLIRP_POLL_PRI) events |= POLLPRI;
        fds_.push_back(pollfd{fd, events, 0});
        return int(fds_.size() - 1);
    }
    // What poll reported for index idx, as SLIRP_POLL_* bits.
    int slirp_revents(int idx) const {
        // Sockets libslirp created after the fill have no slot yet.
        if (idx < 0 || size_t(idx) >= fds_.size()) return 0;
        short r = fds_[size_t(idx)].revents;
        int ev = 0;
        if (r & POLLIN) ev |= SLIRP_POLL_IN;
        if (r & POLLOUT) ev |= SLIRP_POLL_OUT;
        if (r & POLLPRI) ev |= SLIRP_POLL_PRI;
        if (r & (POLLERR | POLLNVAL)) ev |= SLIRP_POLL_ERR;
        if (r & POLLHUP) ev |= SLIRP_POLL_HUP;
        return ev;
    }
    short revents(int idx) const { return idx < 0 ? 0 : fds_[size_t(idx)].revents; }
    // poll(2) over the set; returns its result.
    int wait(int timeout_ms) {
        return ::poll(fds_.data(), fds_.size(), timeout_ms);
    }

private:
    std::vector<pollfd> fds_;
};

} // namespace rknp
