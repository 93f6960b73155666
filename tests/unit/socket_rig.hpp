// SPDX-License-Identifier: Apache-2.0

// Driving a control socket (cmd::ControlSocket) and its clients from a
// test: connected pairs, sending, draining, connecting by path, and a poll
// loop that runs until a condition holds.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "cmd/common/control_socket.hpp"
#include "cmd/common/monotonic.hpp"
#include "cmd/common/unique_fd.hpp"

// A connected pair, both ends non-blocking: server for a ControlClient,
// client for the test.
struct Pair {
    cmd::UniqueFd server, client;
    Pair() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        server.reset(sv[0]);
        client.reset(sv[1]);
        REQUIRE(::fcntl(server.get(), F_SETFL, O_NONBLOCK) == 0);
        REQUIRE(::fcntl(client.get(), F_SETFL, O_NONBLOCK) == 0);
    }
};

inline void send_all(int fd, const std::string &s) {
    REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()));
}

// What the peer can read now; eof set when the server closed.
inline std::string drain(int fd, bool *eof = nullptr) {
    std::string out;
    char buf[65536];
    for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            out.append(buf, size_t(n));
            continue;
        }
        if (eof) *eof = n == 0;
        return out;
    }
}

// Polls and dispatches until `until` says stop or ms pass. Each poll
// waits 50 ms at most: a condition another thread makes true (a client
// finished) wakes no poll.
template <class F> void pump(cmd::ControlSocket &s, long ms, F until) {
    long end = cmd::now_ms() + ms;
    std::vector<pollfd> fds;
    while (!until() && cmd::now_ms() < end) {
        fds.clear();
        long now = cmd::now_ms();
        size_t n = s.fill(fds, now);
        int timeout = s.timeout_ms(now);
        long left = std::min(end - now, 50L);
        if (timeout < 0 || timeout > left) timeout = int(left);
        ::poll(fds.data(), fds.size(), timeout);
        s.dispatch(std::span(fds).first(n), cmd::now_ms());
    }
}

inline cmd::UniqueFd connect_to(const std::string &path) {
    cmd::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(::fcntl(fd.get(), F_SETFL, O_NONBLOCK) == 0);
    return fd;
}
