// SPDX-License-Identifier: Apache-2.0

// libslirp's sockets in their epoll set: registration by difference,
// the sweep of sockets libslirp stopped naming, collecting the events.
#include "slirp/poll_set.hpp"

#include <poll.h>

#include <cerrno>

#include "common/error.hpp"

namespace rknp {

PollSet::PollSet() : ep_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (!ep_) throw_errno("libslirp's epoll set: epoll_create1");
}

int PollSet::ctl(int op, int fd, uint32_t events) {
    ++ctl_calls_;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = uint64_t(uint32_t(fd));
    return ::epoll_ctl(ep_.get(), op, fd, op == EPOLL_CTL_DEL ? nullptr : &ev);
}

void PollSet::begin() {
    ++round_;
    seen_watched_ = 0;
    hangups_.clear(); // a round that collects nothing lists nothing
}

int PollSet::add_changed(int fd, int slirp_ev) {
    if (fd < 0) return -1;
    if (size_t(fd) >= entries_.size()) entries_.resize(size_t(fd) + 1);
    Entry &e = entries_[size_t(fd)];
    uint32_t want = epoll_events(slirp_ev);
    if (e.seen == round_) want |= e.events; // named twice: both interests
    const bool first_this_round = e.seen != round_;
    e.seen = round_;
    if (e.parked) {
        // Named again: back to libslirp's interest, and to end()'s sweep.
        if (ctl(EPOLL_CTL_MOD, fd, want) < 0) {
            (void)ctl(EPOLL_CTL_DEL, fd, 0);
            e.in = false;
        }
        e.parked = false;
        if (e.in) {
            e.pos = uint32_t(watched_.size());
            watched_.push_back(fd);
            e.events = want;
        }
    }
    if (!e.in) {
        if (ctl(EPOLL_CTL_ADD, fd, want) < 0 &&
            (errno != EEXIST || ctl(EPOLL_CTL_MOD, fd, want) < 0))
            return -1;
        e.in = true;
        e.pos = uint32_t(watched_.size());
        watched_.push_back(fd);
    } else if (e.events != want) {
        // ENOENT: the number is a new socket's that nobody announced.
        if (ctl(EPOLL_CTL_MOD, fd, want) < 0 &&
            (errno != ENOENT || ctl(EPOLL_CTL_ADD, fd, want) < 0)) {
            drop(e);
            if (!first_this_round) --seen_watched_;
            return -1;
        }
    }
    e.events = want;
    if (first_this_round) ++seen_watched_;
    return fd;
}

void PollSet::end() {
    // Idle rounds name every registered socket: nothing to look at.
    if (seen_watched_ == watched_.size()) return;
    for (size_t i = 0; i < watched_.size();) {
        const int fd = watched_[i];
        Entry &e = entries_[size_t(fd)];
        if (e.seen == round_) {
            ++i;
            continue;
        }
        if (e.watch_hup) {
            park(fd, e); // moves the last one to i
            continue;
        }
        (void)ctl(EPOLL_CTL_DEL, fd, 0); // EBADF/ENOENT: closed, gone already
        drop(e);                         // moves the last one to i
    }
}

void PollSet::park(int fd, Entry &e) {
    // Edge-triggered, no interest: HUP and ERR (always reported) wake one
    // wait, not every one. A MOD reports what is already pending once.
    const bool ok = ctl(EPOLL_CTL_MOD, fd, EPOLLET) == 0;
    if (!ok) (void)ctl(EPOLL_CTL_DEL, fd, 0);
    drop(e);
    if (!ok) return;
    e.in = true;
    e.parked = true;
    e.events = EPOLLET; // never what epoll_events() asks for: add() re-arms
}

void PollSet::watch_hangup(int fd) {
    if (fd < 0) return;
    if (size_t(fd) >= entries_.size()) entries_.resize(size_t(fd) + 1);
    entries_[size_t(fd)].watch_hup = true;
}

void PollSet::drop(Entry &e) {
    if (!e.in) return;
    if (e.parked) { // not in watched_
        e.parked = false;
        e.in = false;
        e.events = 0;
        return;
    }
    const int last = watched_.back();
    watched_[e.pos] = last;
    entries_[size_t(last)].pos = e.pos;
    watched_.pop_back();
    e.in = false;
    e.events = 0;
}

int PollSet::collect() {
    const int n = ::epoll_wait(ep_.get(), ready_.data(), int(ready_.size()), 0);
    hangups_.clear();
    for (int i = 0; i < n; ++i) {
        const size_t fd = size_t(ready_[size_t(i)].data.u64);
        if (fd >= entries_.size()) continue;
        if (entries_[fd].parked) {
            const uint32_t ev = ready_[size_t(i)].events;
            if (ev & (EPOLLHUP | EPOLLERR))
                hangups_.push_back({int(fd), (ev & EPOLLERR) != 0});
            continue;
        }
        entries_[fd].ready = round_;
        entries_[fd].revents = ready_[size_t(i)].events;
    }
    return n;
}

int PollSet::wait(int timeout_ms) {
    pollfd p{ep_.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, timeout_ms);
    return n <= 0 ? n : collect();
}

void PollSet::forget(int fd) noexcept {
    if (fd < 0 || size_t(fd) >= entries_.size()) return;
    Entry &e = entries_[size_t(fd)];
    if (e.in) {
        if (e.seen == round_) --seen_watched_;
        (void)ctl(EPOLL_CTL_DEL, fd, 0);
        drop(e);
    }
    e = Entry{};
}

} // namespace rknp
