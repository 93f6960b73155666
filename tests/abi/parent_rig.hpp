// SPDX-License-Identifier: Apache-2.0

// What the ABI tests of a parent's log callback, threads and hand-over
// socket share (test_log_callback, test_parent_races, test_handover_log):
// free loopback ports, a watchdog for calls that must not deadlock, and
// connecting to the hand-over socket.
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "rknp.h"

namespace rig {

// A TCP port on 127.0.0.1 nobody listens on right now.
inline uint16_t free_port() {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(::getsockname(s, reinterpret_cast<sockaddr *>(&a), &len) == 0);
    ::close(s);
    return ntohs(a.sin_port);
}

inline rknp_forward tcp_forward(uint16_t host_port, uint32_t guest_port = 80) {
    rknp_forward f;
    rknp_forward_init(&f, sizeof f);
    f.host_addr = "127.0.0.1";
    f.host_port = host_port;
    f.guest_port = guest_port;
    return f;
}

// Runs fn on a thread of its own and waits up to limit. A call that has
// not returned by then is deadlocked: its thread can never be joined and
// holds the handle, so the process ends here, failing the test, instead
// of hanging until ctest's timeout. fn must use CHECK, not REQUIRE (an
// exception on that thread would end the process less legibly).
template <class F>
void finishes_within(std::chrono::seconds limit, const char *what, F fn) {
    std::promise<void> done;
    auto finished = done.get_future();
    std::thread t([&] {
        fn();
        done.set_value();
    });
    if (finished.wait_for(limit) != std::future_status::ready) {
        std::fprintf(stderr, "DEADLOCK: %s did not return within %llds\n", what,
                     static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::_Exit(1);
    }
    t.join();
}

// Connects a SOCK_SEQPACKET socket to path; returns the fd or -1.
inline int connect_unix(const std::string &path) {
    int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (::connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        ::close(s);
        return -1;
    }
    return s;
}

// A pid that is not this process's: the parent refuses our hand-overs.
inline int32_t not_our_pid() { return ::getpid() == 12345 ? 12346 : 12345; }

} // namespace rig
