// SPDX-License-Identifier: Apache-2.0

// How fast-path flows end, against the simulated guest (tcp_sim_guest.hpp):
// a host reset after data, half-closed flows that wait, the RSTs a closing
// flow owes the guest (room in the batch, their sequence numbers), and the
// flows of a tap that went away.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

namespace {

// Closes fd with an RST (SO_LINGER 0).
void reset_close(int &fd) {
    linger lg{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ::close(fd);
    fd = -1;
}

// Pumps until the guest sees an RST (up to rounds rounds), taking data on
// the way; false if none came. *rst_seqs gets the sequence of each RST.
bool until_rst(Sim &sim, Guest &g, Bytes *got, std::vector<uint32_t> *rst_seqs,
               int rounds = 500) {
    bool rst = false;
    Rx r;
    for (int i = 0; i < rounds && !rst; ++i) {
        sim.pump(1);
        while (g.next(r, 0)) {
            if (r.seg.flags & kRst) {
                rst = true;
                if (rst_seqs) rst_seqs->push_back(r.seg.seq);
            }
            g.absorb(r, got);
        }
    }
    return rst;
}

} // namespace

TEST_CASE("tcp_closing: a server's last bytes before its RST reach the guest") {
    // An HTTP server refusing an upload: 413, then close() with the body
    // unread, which is an RST. Both arrive in one wake-up (EPOLLIN|EPOLLERR).
    Conn k;
    const std::string resp = "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n\r\n";
    REQUIRE(::send(k.c, resp.data(), resp.size(), MSG_NOSIGNAL) == ssize_t(resp.size()));
    reset_close(k.c);
    Bytes got;
    std::vector<uint32_t> seqs;
    REQUIRE(until_rst(k.sim, k.g, &got, &seqs));
    CHECK(std::string(got.begin(), got.end()) == resp);
    // The first RST is at the guest's rcv_nxt: after the data.
    REQUIRE(!seqs.empty());
    CHECK(seqs.front() == k.g.rcv_nxt);
    CHECK(k.sim.fp->flows() == 0);
}

TEST_CASE("tcp_closing: a half-closed flow waits for a slow reply as long as the host socket lives") {
    Conn k;
    // The guest shut its write side down and waits for the reply.
    k.g.send(kAck | kFin, k.g.snd_nxt);
    k.g.snd_nxt += 1;
    Rx r;
    REQUIRE(k.g.next(r));
    CHECK(r.seg.ack == k.g.snd_nxt);
    k.sim.advance(10 * 60 * 1000); // ten silent minutes
    CHECK(k.sim.fp->flows() == 1);
    CHECK(k.stats().timeouts == 0);
    k.sim.rx.clear();
    // The reply, then the server's FIN: an orderly end.
    Bytes reply = pattern(5000, 41);
    REQUIRE(::send(k.c, reply.data(), reply.size(), MSG_NOSIGNAL) == 5000);
    REQUIRE(::shutdown(k.c, SHUT_WR) == 0);
    Bytes got;
    for (int i = 0; i < 500 && !k.g.got_fin; ++i) {
        k.sim.pump(1);
        while (k.g.next(r, 0)) k.g.absorb(r, &got);
    }
    CHECK(got == reply);
    REQUIRE(k.g.got_fin);
    k.g.ack();
    CHECK(k.sim.fp->flows() == 0);
    CHECK(k.stats().resets_to_guest == 0);
}

TEST_CASE("tcp_closing: closing RSTs wait for room in a full batch") {
    FastPathConfig cfg = Sim::base_config();
    cfg.batch_data_frames = 1;
    cfg.batch_control_frames = 4; // five frames a batch
    Sim sim(cfg);
    Listener l;
    constexpr int kFlows = 8;
    std::vector<std::unique_ptr<Guest>> gs;
    std::vector<int> hs;
    for (int i = 0; i < kFlows; ++i) {
        gs.push_back(std::make_unique<Guest>(sim, false, l.port, uint16_t(41000 + i)));
        REQUIRE(gs.back()->connect());
        hs.push_back(accept_from(sim, l));
        REQUIRE(hs.back() >= 0);
    }
    sim.pump(20);
    sim.rx.clear();
    // Every host peer resets at once: eight RSTs in one wake-up.
    for (int &h : hs) reset_close(h);
    std::vector<uint32_t> seqs;
    for (auto &g : gs) {
        seqs.clear();
        CHECK(until_rst(sim, *g, nullptr, &seqs, 50));
        CHECK((!seqs.empty() && seqs.front() == g->rcv_nxt));
    }
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().frames_lost == 0);
    CHECK(sim.fp->stats().resets_to_guest == kFlows);
}

TEST_CASE("tcp_closing: a reset after a rewind is sent where the guest is") {
    Conn k;
    Bytes data = pattern(10000, 42);
    REQUIRE(::send(k.c, data.data(), data.size(), MSG_NOSIGNAL) == 10000);
    Rx r;
    REQUIRE(k.g.next(r));
    const uint32_t acked = k.g.rcv_nxt;
    k.g.absorb(r, nullptr);
    const uint32_t have = k.g.rcv_nxt;
    REQUIRE(have == acked + 10000);
    // The guest's ACK of the data is lost; a later one, still at the old
    // point, closes the window. The persist timer rewinds to that point.
    k.g.rcv_nxt = acked;
    k.g.win_field = 0;
    k.g.ack();
    k.g.rcv_nxt = have;
    k.sim.advance(1100);
    k.sim.rx.clear();
    reset_close(k.c);
    std::vector<uint32_t> seqs;
    REQUIRE(until_rst(k.sim, k.g, nullptr, &seqs));
    k.sim.pump(2);
    while (k.g.next(r, 0))
        if (r.seg.flags & kRst) seqs.push_back(r.seg.seq);
    // One at what was sent (the guest has it all), one at what was acked.
    CHECK(std::find(seqs.begin(), seqs.end(), have) != seqs.end());
    CHECK(std::find(seqs.begin(), seqs.end(), acked) != seqs.end());
    CHECK(k.sim.fp->flows() == 0);
}

TEST_CASE("tcp_closing: when the tap goes, every flow ends and its host peer is reset") {
    Sim sim;
    Listener l;
    Guest a(sim, false, l.port, 42000), b(sim, false, l.port, 42001);
    REQUIRE(a.connect());
    int ca = accept_from(sim, l);
    REQUIRE(b.connect());
    int cb = accept_from(sim, l);
    REQUIRE((ca >= 0 && cb >= 0));
    // One idle, one half-closed by the guest: neither has a deadline.
    b.send(kAck | kFin, b.snd_nxt);
    b.snd_nxt += 1;
    sim.pump(5);
    sim.rx.clear();
    REQUIRE(sim.fp->flows() == 2);
    sim.fp->tap_detached();
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->frames().empty()); // nothing for a guest that is gone
    CHECK(sim.fp->ms_until_next_timer(sim.now) < 0);
    Bytes got;
    CHECK(drain(ca, got) == -ECONNRESET);
    int d = drain(cb, got); // the guest's FIN came first
    if (d == 0) d = drain(cb, got);
    CHECK((d == -ECONNRESET || d == 0));
    CHECK(got.empty());
    ::close(ca);
    ::close(cb);
}

TEST_CASE_FIXTURE(HalfAccepted,
                  "tcp_closing: a host FIN that comes before the guest's ACK of our SYN-ACK") {
    // A server that greets and closes at once (a banner, a refusal): its
    // data and FIN reach the socket while the guest has not yet completed
    // the handshake. The FIN's edge must not be lost: the guest gets the
    // data, then our FIN.
    const std::string hello = "220 hello\r\n";
    REQUIRE(::send(c, hello.data(), hello.size(), 0) == ssize_t(hello.size()));
    REQUIRE(::shutdown(c, SHUT_WR) == 0);
    for (int i = 0; i < 5; ++i) sim.pump(2); // the edges come before the ACK
    CHECK(sim.rx.empty());
    g.ack();
    const Bytes got = receive_until_fin(sim, g, 500);
    CHECK(std::string(got.begin(), got.end()) == hello);
    CHECK(g.got_fin);
    ::close(c);
}
