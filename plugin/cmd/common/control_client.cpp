// SPDX-License-Identifier: Apache-2.0

// One connection to a control socket (control_client.hpp).
#include "control_client.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>

#include "stream_io.hpp"

namespace cmd {

ControlClient::ControlClient(UniqueFd fd, long now_ms)
    : fd_(std::move(fd)), deadline_(now_ms + kDeadlineMs) {}

short ControlClient::events() const {
    switch (phase_) {
    case Phase::Reading:
        return POLLIN;
    case Phase::Writing:
        return POLLOUT;
    case Phase::Done:
        break;
    }
    return 0;
}

void ControlClient::step(short revents, long now_ms, ControlProtocol &protocol) {
    if (phase_ == Phase::Reading) {
        bool ended = false;
        if (revents & (POLLIN | POLLHUP | POLLERR))
            ended = !read_some(protocol.max_request());
        // Answered as soon as nothing the client may still send can change
        // the reply; at the deadline with whatever came.
        if (ended || in_.size() >= protocol.max_request() ||
            protocol.state(in_) != RequestState::Incomplete ||
            now_ms >= deadline_)
            reply(now_ms, protocol);
        return;
    }
    if (phase_ == Phase::Writing) {
        if (revents & (POLLOUT | POLLHUP | POLLERR)) write_some();
        if (phase_ == Phase::Writing && now_ms >= deadline_) close();
    }
}

bool ControlClient::read_some(std::size_t max) {
    // Bounded by the request limit, so one step is short whatever the
    // client has queued.
    while (in_.size() < max) {
        char chunk[4096];
        ssize_t n = ::recv(fd_.get(), chunk, std::min(sizeof chunk, max - in_.size()), 0);
        if (n > 0) {
            in_.append(chunk, std::size_t(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        return false; // EOF (the client half-closed) or an error
    }
    return true;
}

void ControlClient::reply(long now_ms, ControlProtocol &protocol) {
    try {
        out_ = in_.size() >= protocol.max_request() ? protocol.too_large(in_)
                                                    : protocol.answer(in_);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: %s\n", protocol.tag(), e.what());
        out_.clear();
    }
    in_.clear();
    in_.shrink_to_fit();
    phase_ = Phase::Writing;
    deadline_ = now_ms + kDeadlineMs;
    write_some();
}

// The reply goes out in as many writes as the socket takes (a list of
// thousands of forwards is far beyond a unix socket's buffer).
void ControlClient::write_some() {
    // Done, or the client is gone: closed either way.
    if (send_some(fd_.get(), out_, sent_) == SendState::again) return;
    close();
}

void ControlClient::close() {
    // The client reads to EOF (slirp4netns's clients do).
    ::shutdown(fd_.get(), SHUT_RDWR);
    fd_.reset();
    out_.clear();
    out_.shrink_to_fit();
    phase_ = Phase::Done;
}

} // namespace cmd
