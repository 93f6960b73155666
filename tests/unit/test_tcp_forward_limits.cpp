// SPDX-License-Identifier: Apache-2.0

// Limits on forwarded ports of the TCP fast path: accepted connections go
// through the same new-flow admission as guest SYNs.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "tcp_sim_forward.hpp"

using namespace tcpsim;

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
        uint16_t port = free_port();
        REQUIRE(add(sim, port) == 0);
        guest_arp_reply(sim);
        uint16_t cport = 0;
        int c = client(port, &cport);
        REQUIRE(c >= 0);
        CHECK(pumped_recv_error(sim, c) == ECONNRESET);
        CHECK(asked == 1);
        CHECK(sim.fp->flows() == 0);
        CHECK(sim.fp->stats().flows_refused == 1);
        CHECK(sim.fp->stats().forward_refused == 1);
        CHECK(sim.rx.empty()); // no SYN to the guest
        ::close(c);
    }
}
