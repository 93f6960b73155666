// SPDX-License-Identifier: Apache-2.0

// One connection to the API socket (api_client.hpp).
#include "api_client.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <exception>

#include "api_request.hpp"
#include "hostfwd_api.hpp"

namespace s4n {

ApiClient::ApiClient(cmd::UniqueFd fd, long now_ms)
    : fd_(std::move(fd)), deadline_(now_ms + kDeadlineMs) {}

short ApiClient::events() const {
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

void ApiClient::step(short revents, long now_ms, const Answer &answer) {
    if (phase_ == Phase::Reading) {
        bool ended = false;
        if (revents & (POLLIN | POLLHUP | POLLERR)) ended = !read_some();
        // Answered as soon as nothing the client may still send can change
        // the reply; at the deadline with whatever came, as before.
        if (ended || in_.size() >= kMaxRequest ||
            request_state(in_) != RequestState::Incomplete ||
            now_ms >= deadline_)
            reply(now_ms, answer);
        return;
    }
    if (phase_ == Phase::Writing) {
        if (revents & (POLLOUT | POLLHUP | POLLERR)) write_some();
        if (phase_ == Phase::Writing && now_ms >= deadline_) close();
    }
}

bool ApiClient::read_some() {
    // Bounded by the request limit, so one step is short whatever the
    // client has queued.
    while (in_.size() < kMaxRequest) {
        char chunk[kMaxRequest];
        ssize_t n = ::recv(fd_.get(), chunk, kMaxRequest - in_.size(), 0);
        if (n > 0) {
            in_.append(chunk, size_t(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        return false; // EOF (the client half-closed) or an error
    }
    return true;
}

void ApiClient::reply(long now_ms, const Answer &answer) {
    if (in_.size() >= kMaxRequest) {
        std::fprintf(stderr, "api_handler: too large message (>= %zu bytes)\n",
                     in_.size());
        out_ = error_reply("bad request: too large message");
    } else {
        std::fprintf(stderr, "api_handler: got request: %s\n", in_.c_str());
        try {
            out_ = answer(in_);
        } catch (const std::exception &e) {
            // Costs this client its reply, nobody else anything.
            std::fprintf(stderr, "api_handler: %s\n", e.what());
            out_.clear();
        }
    }
    in_.clear();
    in_.shrink_to_fit();
    phase_ = Phase::Writing;
    deadline_ = now_ms + kDeadlineMs;
    write_some();
}

// The reply goes out in as many writes as the socket takes (a list of
// thousands of forwards is far beyond a unix socket's buffer).
void ApiClient::write_some() {
    while (sent_ < out_.size()) {
        ssize_t n = ::send(fd_.get(), out_.data() + sent_, out_.size() - sent_,
                           MSG_NOSIGNAL);
        if (n > 0) {
            sent_ += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        break; // the client is gone
    }
    close();
}

void ApiClient::close() {
    // As slirp4netns: the client reads to EOF.
    ::shutdown(fd_.get(), SHUT_RDWR);
    fd_.reset();
    out_.clear();
    out_.shrink_to_fit();
    phase_ = Phase::Done;
}

} // namespace s4n
