// SPDX-License-Identifier: Apache-2.0

// Limits on forwarded ports of the TCP fast path: accepted connections go
// through the same new-flow admission as guest SYNs, and a listener that
// cannot accept (no fds left) pauses instead of spinning the loop.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_sim_forward.hpp"

using namespace tcpsim;

namespace {

// Lowers RLIMIT_NOFILE to the lowest free descriptor, so that the next
// accept4 fails with EMFILE; restores the limit when it goes.
struct NoFreeFds {
    rlimit old{};
    NoFreeFds() {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
        int lowest = ::dup(0);
        REQUIRE(lowest >= 0);
        ::close(lowest);
        rlimit low = old;
        low.rlim_cur = rlim_t(lowest);
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
    }
    NoFreeFds(const NoFreeFds &) = delete;
    NoFreeFds &operator=(const NoFreeFds &) = delete;
    ~NoFreeFds() { ::setrlimit(RLIMIT_NOFILE, &old); }
};

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

} // namespace

TEST_CASE("tcp_forward_limits: accepted connections go through the new-flow admission") {
    for (Admission verdict : {Admission::Reset, Admission::Drop}) {
        CAPTURE(int(verdict));
        FastPathConfig cfg = Sim::base_config();
        int asked = 0;
        cfg.admit_flow = [&] {
            ++asked;
            return verdict;
        };
        Sim sim(cfg);
        uint16_t cport = 0;
        int c = forwarded_client(sim, &cport);
        CHECK(pumped_recv_error(sim, c) == ECONNRESET);
        CHECK(asked == 1);
        CHECK(sim.fp->flows() == 0);
        CHECK(sim.fp->stats().flows_refused == 1);
        CHECK(sim.fp->stats().forward_refused == 1);
        CHECK(sim.rx.empty()); // no SYN to the guest
        ::close(c);
    }
}

TEST_CASE("tcp_forward_limits: out of fds, a listener pauses instead of spinning") {
    Sim sim;
    uint16_t cport = 0;
    int c = forwarded_client(sim, &cport);
    {
        NoFreeFds none;
        REQUIRE(readable(sim.fp->epoll_fd()));
        sim.fp->poll_events(); // accept4: EMFILE
        // Level-triggered, the listener would wake the loop at once again.
        CHECK_FALSE(readable(sim.fp->epoll_fd()));
        CHECK(sim.fp->ms_until_next_timer(sim.now) > 0);
        CHECK(sim.fp->ms_until_next_timer(sim.now) <= 100);
    }
    CHECK(sim.fp->stats().accept_paused == 1);
    CHECK(sim.fp->flows() == 0);
    // Resumed after the pause: the client waiting in the backlog gets in.
    sim.advance(100);
    Server g(sim, cport);
    REQUIRE(g.accept());
    CHECK(sim.fp->flows() == 1);
    ::close(c);
}
