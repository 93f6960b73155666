// SPDX-License-Identifier: Apache-2.0

// Unit tests of the fast path's peek modes (peek_mode.hpp): the choice at
// construction (kernel probe, forced modes, the error for Offset without
// SO_PEEK_OFF), the discard scratch, and Discard-mode transfers whatever
// RKNP_TEST_TCP_PEEK_MODE says (more in flight than the scratch, loss,
// the host's FIN while data is in flight). Loopback only.
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <string>

#include "common/error.hpp"
#include "tcp_sim_transfer.hpp"

using namespace rknp;
using namespace rknp::tcp;
using namespace tcpsim;

namespace {

FastPathConfig config(PeekMode mode, std::function<bool()> probe = {}) {
    FastPathConfig c = Sim::base_config();
    c.peek_mode = mode;
    c.peek_off_probe = std::move(probe);
    return c;
}

bool no_peek_off() { return false; }

} // namespace

TEST_CASE("tcp_peek: automatic picks offset on a kernel with SO_PEEK_OFF for TCP") {
    Sim sim(config(PeekMode::Automatic));
    if (!kernel_has_tcp_peek_off()) {
        MESSAGE("this kernel has no SO_PEEK_OFF for TCP (Linux < 6.9)");
        CHECK(sim.fp->peek_mode() == PeekMode::Discard);
        return;
    }
    CHECK(sim.fp->peek_mode() == PeekMode::Offset);
    CHECK(std::string(sim.fp->peek_mode_reason()).find("has SO_PEEK_OFF") != std::string::npos);
}

TEST_CASE("tcp_peek: automatic on a kernel without SO_PEEK_OFF picks discard and works") {
    Conn k(config(PeekMode::Automatic, no_peek_off));
    CHECK(k.sim.fp->peek_mode() == PeekMode::Discard);
    CHECK(std::string(k.sim.fp->peek_mode_reason()).find("no SO_PEEK_OFF") != std::string::npos);
    Bytes data = pattern(1 << 20, 41);
    H2G o;
    CHECK(host_to_guest(k.sim, k.g, k.c, data, o) == data);
}

TEST_CASE("tcp_peek: offset forced on a kernel without SO_PEEK_OFF fails the start") {
    bool asked = false;
    FastPathConfig c = config(PeekMode::Offset, [&] {
        asked = true;
        return false;
    });
    try {
        FastPath fp(std::move(c));
        FAIL("constructed");
    } catch (const Error &e) {
        CHECK(e.code() == RKNP_ERR_UNSUPPORTED);
        const std::string m = e.what();
        CHECK(m.find("SO_PEEK_OFF") != std::string::npos);
        CHECK(m.find("Linux >= 6.9") != std::string::npos);
    }
    CHECK(asked);
    // With the option it is what was asked for.
    Sim sim(config(PeekMode::Offset, [] { return true; }));
    CHECK(sim.fp->peek_mode() == PeekMode::Offset);
}

TEST_CASE("tcp_peek: discard forced is discard, without asking the kernel") {
    bool asked = false;
    Sim sim(config(PeekMode::Discard, [&] {
        asked = true;
        return true;
    }));
    CHECK(sim.fp->peek_mode() == PeekMode::Discard);
    CHECK(!asked);
    CHECK(std::string(peek_mode_name(sim.fp->peek_mode())) == "discard");
}

TEST_CASE("tcp_peek: the discard scratch covers any skip up to its bound") {
    PeekScratch s(PeekMode::Discard);
    for (uint32_t skip : {0u, 1u, 65535u, 65536u, 65537u, 8u << 20, PeekScratch::kMaxSkip,
                          PeekScratch::kMaxSkip + 1}) {
        size_t k = s.cover(skip);
        uint64_t sum = 0;
        for (size_t i = 0; i < k; ++i) {
            CHECK(s.iov()[i].iov_len <= PeekScratch::kDiscardBytes);
            CHECK(s.iov()[i].iov_len > 0);
            sum += s.iov()[i].iov_len;
        }
        CHECK(sum == std::min(skip, PeekScratch::kMaxSkip));
        CHECK(k <= PeekScratch::kSkipIovs);
    }
}

TEST_CASE("tcp_peek: discard mode, megabytes in flight, loss both ways of repair") {
    SUBCASE("duplicate ACKs") {
        Conn k(config(PeekMode::Discard));
        // The guest's window (8 MiB) lets far more than the 64 KiB scratch
        // be in flight: every peek skips it in several discard iovecs.
        Bytes data = pattern(4 << 20, 42);
        H2G o;
        o.drop_first_data = true;
        CHECK(host_to_guest(k.sim, k.g, k.c, data, o) == data);
        CHECK(k.stats().fast_retransmits >= 1);
        CHECK(o.gso_frames > 0);
    }
    SUBCASE("retransmission timer, IPv6") {
        Conn k(config(PeekMode::Discard), true);
        Bytes data = pattern(2 << 20, 43);
        H2G o;
        o.silent_drop = true;
        CHECK(host_to_guest(k.sim, k.g, k.c, data, o) == data);
        CHECK(k.stats().retransmits >= 1);
    }
    SUBCASE("partial and duplicate ACKs") {
        Conn k(config(PeekMode::Discard));
        Bytes data = pattern(1 << 20, 44);
        H2G o;
        o.ack_half = true;
        o.dup_acks = true;
        CHECK(host_to_guest(k.sim, k.g, k.c, data, o) == data);
    }
}

TEST_CASE("tcp_peek: discard mode sends the host's FIN with data still unacked") {
    Conn k(config(PeekMode::Discard));
    Bytes data = pattern(5000, 45);
    REQUIRE(::send(k.c, data.data(), data.size(), 0) == ssize_t(data.size()));
    ::shutdown(k.c, SHUT_WR);
    // The guest ACKs nothing: the data and then the FIN come all the same.
    Bytes got;
    for (int i = 0; i < 500 && !k.g.got_fin; ++i) {
        k.sim.pump(1);
        Rx r;
        while (k.g.next(r, 0)) k.g.absorb(r, &got);
    }
    CHECK(got == data);
    CHECK(k.g.got_fin);
    k.g.ack();
    // The guest closes too: an orderly end, nothing reset.
    k.g.send(kAck | kFin, k.g.snd_nxt);
    k.g.snd_nxt += 1;
    for (int i = 0; i < 50 && k.sim.fp->flows() != 0; ++i) k.sim.pump(1);
    CHECK(k.sim.fp->flows() == 0);
    CHECK(k.sim.fp->stats().resets_to_guest == 0);
}

TEST_CASE("tcp_peek: RKNP_TEST_TCP_PEEK_MODE reaches the simulated guest's fast path") {
    Sim sim;
    switch (test_peek_mode()) {
    case PeekMode::Discard: CHECK(sim.fp->peek_mode() == PeekMode::Discard); break;
    case PeekMode::Offset: CHECK(sim.fp->peek_mode() == PeekMode::Offset); break;
    case PeekMode::Automatic:
        CHECK(sim.fp->peek_mode() ==
              (kernel_has_tcp_peek_off() ? PeekMode::Offset : PeekMode::Discard));
        break;
    }
}
