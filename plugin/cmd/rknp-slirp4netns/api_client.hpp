// SPDX-License-Identifier: Apache-2.0

// One connection to the API socket: read its request without blocking,
// answer it, write the reply without blocking, close. Driven by the
// command's poll loop (ApiSocket), each client against its own deadlines,
// so an idle or slow client costs nobody else any time.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "cmd/common/unique_fd.hpp"

namespace s4n {

class ApiClient {
public:
    // Request bytes in, reply out (HostFwdApi::handle).
    using Answer = std::function<std::string(std::string_view request)>;

    // slirp4netns reads into a 4096-byte buffer: that much or more is "too
    // large".
    static constexpr size_t kMaxRequest = 4096;
    // The time to send a request, from accept; then again the time to take
    // the reply (a client that reads nothing holds no fd for longer).
    static constexpr long kDeadlineMs = 2000;

    // fd: connected, non-blocking.
    ApiClient(cmd::UniqueFd fd, long now_ms);

    int fd() const { return fd_.get(); }
    short events() const; // for poll(2)
    long deadline() const { return deadline_; }
    bool done() const { return phase_ == Phase::Done; }

    // Does what revents (0 for none) and the clock allow: reads, answers
    // once the request is whole, hopeless, too large, ended or out of time,
    // writes. Never throws on the peer's account; done() once closed.
    void step(short revents, long now_ms, const Answer &answer);

private:
    enum class Phase { Reading, Writing, Done };
    bool read_some(); // false: EOF or error, the request ends here
    void reply(long now_ms, const Answer &answer);
    void write_some();
    void close();

    cmd::UniqueFd fd_;
    Phase phase_ = Phase::Reading;
    long deadline_;
    std::string in_;
    std::string out_;
    size_t sent_ = 0;
};

} // namespace s4n
