// SPDX-License-Identifier: Apache-2.0

// RKNP_FORWARD_HANDOFF_LOOPBACK on the TCP fast path: a loopback client's
// connection goes to the caller's handoff socket, whole and unopened
// towards the guest; a handoff socket that cannot take it resets the
// client.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <memory>

#include "common/fd_passing.hpp"
#include "tcp_sim_forward.hpp"

using namespace tcpsim;

namespace {

// A forward of a free loopback port (v6: ::1) whose loopback clients go to
// the returned socket pair's [1] end ([0] is the caller's).
struct HandedOff {
    Sim sim;
    bool v6;
    uint16_t port;
    int pair[2] = {-1, -1};
    explicit HandedOff(bool v6_ = false) : v6(v6_), port(free_port(v6_)) {
        REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
        auto handoff = std::make_shared<const rknp::UniqueFd>(pair[1]);
        sockaddr_storage ss = loopback(port, v6);
        // To 10.0.2.100 (IPv4-mapped), as add(sim, port) forwards.
        REQUIRE(sim.fp->add_forward(reinterpret_cast<sockaddr *>(&ss), len_of(v6),
                                    reinterpret_cast<const uint8_t *>(
                                        "\0\0\0\0\0\0\0\0\0\0\xff\xff\x0a\x00\x02\x64"),
                                    false, kGuestPort, handoff) == 0);
        guest_arp_reply(sim);
    }
    ~HandedOff() {
        if (pair[0] >= 0) ::close(pair[0]);
    }
    // Pumps until a message arrives on pair[0]: its data in m and its fd
    // (-1 if none came within a second).
    int receive(rknp_handoff &m) {
        for (int i = 0; i < 500; ++i) {
            sim.pump(2);
            rknp::UniqueFd fd;
            int flags = 0;
            ssize_t n = rknp::recv_with_fd(pair[0], &m, sizeof m, fd, flags, MSG_DONTWAIT);
            if (n < 0) continue;
            return n == ssize_t(sizeof m) ? fd.release() : -1;
        }
        return -1;
    }
};

uint16_t port_of(const sockaddr_storage &ss) {
    return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6 &>(ss).sin6_port
                                          : reinterpret_cast<const sockaddr_in &>(ss).sin_port);
}

void handed_over_whole(bool v6) {
    HandedOff h(v6);
    uint16_t cport = 0;
    int c = client(h.port, &cport, v6);
    REQUIRE(c >= 0);
    rknp_handoff m{};
    int fd = h.receive(m);
    REQUIRE(fd >= 0);
    CHECK(m.struct_size == sizeof(rknp_handoff));
    CHECK(m.guest_port == kGuestPort);
    // The client's own connection: its peer is the client, its local end
    // the forward's port.
    sockaddr_storage peer{}, local{};
    socklen_t len = sizeof peer;
    REQUIRE(::getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &len) == 0);
    CHECK(peer.ss_family == (v6 ? AF_INET6 : AF_INET));
    CHECK(port_of(peer) == cport);
    len = sizeof local;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0);
    CHECK(port_of(local) == h.port);
    // Bytes both ways, end to end, with nothing towards the guest.
    CHECK(::send(c, "ping", 4, 0) == 4);
    char b[8] = {};
    REQUIRE(::recv(fd, b, sizeof b, 0) == 4);
    CHECK(std::string(b, 4) == "ping");
    CHECK(::send(fd, "pong", 4, 0) == 4);
    REQUIRE(::recv(c, b, sizeof b, 0) == 4);
    CHECK(std::string(b, 4) == "pong");
    h.sim.pump(10);
    for (const Rx &r : h.sim.rx) CHECK(r.frame.size() == 42); // ARP at most, no SYN
    CHECK(h.sim.fp->stats().forward_accepted == 1);
    CHECK(h.sim.fp->stats().forward_refused == 0);
    CHECK(h.sim.fp->forward_flows() == 0);
    ::close(fd);
    ::close(c);
}

} // namespace

TEST_CASE("tcp_forward handoff: a 127.0.0.1 client's connection goes to the caller, whole") {
    handed_over_whole(false);
}

TEST_CASE("tcp_forward handoff: a ::1 client's connection goes to the caller, whole") {
    handed_over_whole(true);
}

TEST_CASE("tcp_forward handoff: a caller that is gone costs the client a reset") {
    HandedOff h;
    ::close(h.pair[0]);
    h.pair[0] = -1;
    uint16_t cport = 0;
    int c = client(h.port, &cport);
    REQUIRE(c >= 0);
    CHECK(pumped_recv_error(h.sim, c) == ECONNRESET);
    CHECK(h.sim.fp->stats().forward_refused == 1);
    CHECK(h.sim.fp->forward_flows() == 0);
    ::close(c);
}

TEST_CASE("tcp_forward handoff: without it a loopback client still reaches the guest") {
    Sim sim;
    uint16_t cport = 0;
    int c = forwarded_client(sim, &cport);
    Server g(sim, cport);
    CHECK(g.accept());
    CHECK(sim.fp->forward_flows() == 1);
    ::close(c);
}
