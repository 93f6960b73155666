// SPDX-License-Identifier: Apache-2.0

// Limits on forwarded ports of the TCP fast path: accepted connections are
// bounded by their forward's cap and rate and by all forwards' slots, never
// by the guest's admission (a flood of clients leaves the guest's flows
// alone), and a listener that cannot accept (no fds left) pauses instead
// of spinning the loop.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "parent/flow_limits.hpp"
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

TEST_CASE("tcp_forward_limits: accepted connections never ask the guest's admission") {
    FastPathConfig cfg = Sim::base_config();
    int asked = 0;
    cfg.admit_flow = [&] {
        ++asked;
        return Admission::Reset;
    };
    Sim sim(cfg);
    uint16_t cport = 0;
    int c = forwarded_client(sim, &cport);
    Server g(sim, cport);
    REQUIRE(g.accept());
    CHECK(asked == 0);
    CHECK(sim.fp->forward_flows() == 1);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().flows_refused == 0);
    ::close(c);
}

TEST_CASE("tcp_forward_limits: a forward's cap and rate refuse with an RST") {
    SUBCASE("cap") {
        FastPathConfig cfg = Sim::base_config();
        cfg.forward_flows_each = 2;
        Sim sim(cfg);
        uint16_t port = free_port();
        REQUIRE(add(sim, port) == 0);
        guest_arp_reply(sim);
        uint16_t p[3] = {};
        int c[3];
        for (int i = 0; i < 2; ++i) {
            c[i] = client(port, &p[i]);
            Server g(sim, p[i]);
            REQUIRE(g.accept());
        }
        c[2] = client(port, &p[2]);
        REQUIRE(c[2] >= 0);
        CHECK(pumped_recv_error(sim, c[2]) == ECONNRESET);
        CHECK(sim.fp->stats().forward_full == 1);
        CHECK(sim.fp->stats().forward_refused == 1);
        CHECK(sim.fp->forward_flows() == 2);
        rknp::Stats shown; // rknp_stats (1.7)
        sim.fp->publish(shown);
        CHECK(shown.tcp_forward_full.load() == 1);
        CHECK(shown.tcp_forward_refused.load() == 1);
        CHECK(shown.tcp_forward_flows.load() == 2);
        // A second forward has its own cap.
        uint16_t port2 = free_port();
        REQUIRE(add(sim, port2) == 0);
        uint16_t p2 = 0;
        int c2 = client(port2, &p2);
        Server g2(sim, p2);
        CHECK(g2.accept());
        CHECK(sim.fp->forward_flows() == 3);
        for (int fd : {c[0], c[1], c[2], c2}) ::close(fd);
    }
    SUBCASE("rate") {
        FastPathConfig cfg = Sim::base_config();
        cfg.forward_new_per_sec = 2; // a burst of 2, then one each 500 ms
        Sim sim(cfg);
        uint16_t port = free_port();
        REQUIRE(add(sim, port) == 0);
        guest_arp_reply(sim);
        uint16_t p[3] = {};
        int c[3];
        for (int i = 0; i < 2; ++i) {
            c[i] = client(port, &p[i]);
            Server g(sim, p[i]);
            REQUIRE(g.accept());
        }
        c[2] = client(port, &p[2]);
        CHECK(pumped_recv_error(sim, c[2]) == ECONNRESET);
        CHECK(sim.fp->stats().forward_rate_limited == 1);
        // What rknp_stats shows (1.7).
        rknp::Stats shown;
        sim.fp->publish(shown);
        CHECK(shown.tcp_forward_accepted.load() == 3);
        CHECK(shown.tcp_forward_refused.load() == 1);
        CHECK(shown.tcp_forward_rate_limited.load() == 1);
        CHECK(shown.tcp_forward_full.load() == 0);
        CHECK(shown.tcp_forward_flows.load() == 2);
        CHECK(shown.flows_rate_limited.load() == 0);
        sim.advance(500);
        uint16_t p3 = 0;
        int c3 = client(port, &p3);
        Server g(sim, p3);
        CHECK(g.accept());
        for (int fd : {c[0], c[1], c[2], c3}) ::close(fd);
    }
}

TEST_CASE("tcp_forward_limits: a flood of clients on a forward never takes the guest's "
          "flows") {
    // The guest's own limits as the stack loop has them: max_flows 4.
    rknp::Stats stats;
    rknp::FlowLimits limits(4, 1000, stats, 1000);
    FastPathConfig cfg = Sim::base_config();
    cfg.max_flows = 4;
    cfg.forward_flows = 8;
    cfg.forward_flows_each = 6;
    Sim *self = nullptr;
    cfg.admit_flow = [&] {
        return limits.admit(self->fp->flows(), uint64_t(self->now)) ==
                       rknp::FlowLimits::Admit::Ok
                   ? Admission::Accept
                   : Admission::Reset;
    };
    Sim sim(cfg);
    self = &sim;
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    guest_arp_reply(sim);
    // 12 clients, three times max_flows: 6 get in (the forward's cap),
    // the rest are reset; the guest answers none of the SYNs.
    std::vector<int> clients;
    for (int i = 0; i < 12; ++i) {
        uint16_t cp = 0;
        clients.push_back(client(port, &cp));
        REQUIRE(clients.back() >= 0);
        sim.pump(2);
    }
    for (int i = 0; i < 50; ++i) sim.pump(2);
    CHECK(sim.fp->stats().forward_accepted == 12);
    CHECK(sim.fp->forward_flows() == 6);
    CHECK(sim.fp->stats().forward_full == 6);
    CHECK(sim.fp->flows() == 0);
    // The guest still connects: its SYN is admitted (no refusal counted)
    // and answered.
    Listener l;
    Guest g(sim, false, l.port, 41000);
    CHECK(g.connect());
    CHECK(sim.fp->flows() == 1);
    CHECK(stats.flows_refused.load() == 0);
    CHECK(limits.admit(sim.fp->flows(), uint64_t(sim.now), true, 0) ==
          rknp::FlowLimits::Admit::Ok);
    for (int fd : clients) ::close(fd);
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
    CHECK(sim.fp->forward_flows() == 1);
    ::close(c);
}
