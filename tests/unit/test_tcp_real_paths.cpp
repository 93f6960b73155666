// SPDX-License-Identifier: Apache-2.0

// Fast-path regressions found on real paths (the WAN bed, tests/lib/
// wan_bed.sh): events arriving together that a zero-RTT loopback run
// separates, against the simulated guest of tcp_sim_guest.hpp.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

TEST_CASE("tcp_real_paths: the host's last data and its FIN in one wake-up reach the guest") {
    // At 40 ms RTT the server's last segment and its FIN arrive together:
    // one EPOLLIN|EPOLLRDHUP edge, a peek shorter than the window asked
    // for, and no edge ever after. A short peek there is not "drained"
    // but "EOF next": the FIN must follow (iperf3 -R hung for ever).
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    const Bytes data = pattern(3000, 21);
    REQUIRE(::send(c, data.data(), data.size(), 0) == ssize_t(data.size()));
    REQUIRE(::shutdown(c, SHUT_WR) == 0); // before the fast path looks
    const Bytes got = receive_until_fin(sim, g, 500);
    CHECK(got == data);
    CHECK(g.got_fin);
    CHECK(sim.fp->stats().resets_to_guest == 0);
    ::close(c);
}
