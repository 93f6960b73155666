// SPDX-License-Identifier: Apache-2.0

// One connection to a control socket: read its request without blocking,
// answer it (ControlProtocol), write the reply without blocking, close.
// Driven by the command's poll loop (ControlSocket), each client against
// its own deadlines, so an idle or slow client costs nobody else any time.
#pragma once

#include <cstddef>
#include <string>

#include "control_protocol.hpp"
#include "unique_fd.hpp"

namespace cmd {

class ControlClient {
public:
    // The time to send a request, from accept; then again the time to take
    // the reply (a client that reads nothing holds no fd for longer).
    static constexpr long kDeadlineMs = 2000;

    // fd: connected, non-blocking.
    ControlClient(UniqueFd fd, long now_ms);

    int fd() const { return fd_.get(); }
    short events() const; // for poll(2)
    long deadline() const { return deadline_; }
    bool done() const { return phase_ == Phase::Done; }

    // Does what revents (0 for none) and the clock allow: reads, answers
    // once the request is whole, hopeless, too large, ended or out of time,
    // writes. Never throws on the peer's account; done() once closed.
    void step(short revents, long now_ms, ControlProtocol &protocol);

private:
    enum class Phase { Reading, Writing, Done };
    // Up to max bytes in all; false: EOF or error, the request ends here.
    bool read_some(std::size_t max);
    void reply(long now_ms, ControlProtocol &protocol);
    void write_some();
    void close();

    UniqueFd fd_;
    Phase phase_ = Phase::Reading;
    long deadline_;
    std::string in_;
    std::string out_;
    std::size_t sent_ = 0;
};

} // namespace cmd
