// SPDX-License-Identifier: Apache-2.0

// A source's share of an epoll set: registration with its owner's tag.
#include "datapath/event_source.hpp"

#include "common/error.hpp"

namespace rknp {

EventSource::EventSource(int shared_epfd, EventOwner owner)
    : own_(shared_epfd < 0 ? ::epoll_create1(EPOLL_CLOEXEC) : -1),
      fd_(shared_epfd < 0 ? own_.get() : shared_epfd), tag_(uint64_t(owner) << kOwnerShift) {
    if (fd_ < 0) throw_errno("epoll_create1");
}

int EventSource::ctl(int op, int fd, uint32_t events, uint64_t ref) const {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag_ | (ref & kRefMask);
    return ::epoll_ctl(fd_, op, fd, &ev);
}

std::span<const epoll_event> EventSource::ready(std::span<epoll_event> buf) const {
    const int n = ::epoll_wait(fd_, buf.data(), int(buf.size()), 0);
    return buf.first(n > 0 ? size_t(n) : 0);
}

int EventSource::add(int fd, uint32_t events, uint64_t ref) const {
    return ctl(EPOLL_CTL_ADD, fd, events, ref);
}

int EventSource::modify(int fd, uint32_t events, uint64_t ref) const {
    return ctl(EPOLL_CTL_MOD, fd, events, ref);
}

int EventSource::remove(int fd) const { return ::epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr); }

} // namespace rknp
