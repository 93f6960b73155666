// SPDX-License-Identifier: Apache-2.0

// libslirp's epoll set kept by difference: rounds of idle sockets hand the
// kernel nothing, a ready socket is reported with libslirp's bits, a
// socket libslirp stops naming is not waited on, a reused fd number is
// watched again.
#include <doctest/doctest.h>

#include <slirp/libslirp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "common/fd.hpp"
#include "slirp/poll_set.hpp"

using namespace rknp;

namespace {

struct Pair {
    UniqueFd ours, peer;
};

Pair socket_pair() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    return Pair{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// One round in which libslirp names every socket of pairs with events.
void round(PollSet &ps, const std::vector<Pair> &pairs, int events) {
    ps.begin();
    for (const Pair &p : pairs) REQUIRE(ps.add(p.ours.get(), events) == p.ours.get());
    ps.end();
}

} // namespace

TEST_CASE("slirp poll set: rounds of idle sockets make no system call per socket") {
    // 300 idle connections (600 fds: under the default limit of 1024).
    std::vector<Pair> pairs;
    for (int i = 0; i < 300; ++i) pairs.push_back(socket_pair());
    PollSet ps;
    const int want = SLIRP_POLL_IN | SLIRP_POLL_HUP | SLIRP_POLL_ERR | SLIRP_POLL_PRI;
    round(ps, pairs, want);
    CHECK(ps.watched() == 300);
    CHECK(ps.ctl_calls() == 300); // each registered once
    for (int i = 0; i < 50; ++i) {
        round(ps, pairs, want);
        CHECK(ps.wait(0) == 0);
    }
    // 50 idle rounds: not one epoll_ctl (a poll(2) set handed all 300 to
    // the kernel twice a round).
    CHECK(ps.ctl_calls() == 300);
    CHECK(ps.watched() == 300);

    // One socket with something to send: one change, then none again.
    ps.begin();
    for (size_t i = 0; i < pairs.size(); ++i)
        ps.add(pairs[i].ours.get(), i == 7 ? want | SLIRP_POLL_OUT : want);
    ps.end();
    CHECK(ps.ctl_calls() == 301);
    ps.begin();
    for (size_t i = 0; i < pairs.size(); ++i)
        ps.add(pairs[i].ours.get(), i == 7 ? want | SLIRP_POLL_OUT : want);
    ps.end();
    CHECK(ps.ctl_calls() == 301);
}

TEST_CASE("slirp poll set: the ready socket alone is reported, in libslirp's bits") {
    std::vector<Pair> pairs;
    for (int i = 0; i < 20; ++i) pairs.push_back(socket_pair());
    PollSet ps;
    round(ps, pairs, SLIRP_POLL_IN);
    REQUIRE(::write(pairs[5].peer.get(), "x", 1) == 1);
    CHECK(ps.wait(1000) == 1);
    for (size_t i = 0; i < pairs.size(); ++i)
        CHECK(ps.slirp_revents(pairs[i].ours.get()) == (i == 5 ? SLIRP_POLL_IN : 0));
    // The next round starts with nothing reported until its own wait.
    round(ps, pairs, SLIRP_POLL_IN);
    CHECK(ps.slirp_revents(pairs[5].ours.get()) == 0);
    CHECK(ps.wait(0) == 1);
    CHECK(ps.slirp_revents(pairs[5].ours.get()) == SLIRP_POLL_IN);
    CHECK(ps.slirp_revents(-1) == 0);
    CHECK(ps.slirp_revents(1 << 20) == 0);
}

TEST_CASE("slirp poll set: a socket libslirp stops naming does not wake the wait") {
    std::vector<Pair> pairs;
    for (int i = 0; i < 4; ++i) pairs.push_back(socket_pair());
    PollSet ps;
    round(ps, pairs, SLIRP_POLL_IN);
    // The peer hangs up while libslirp holds the socket back (its buffer
    // to the guest is full, say): HUP would be reported whatever the set
    // asked for, every round.
    pairs[2].peer.reset();
    ps.begin();
    for (size_t i = 0; i < pairs.size(); ++i)
        if (i != 2) ps.add(pairs[i].ours.get(), SLIRP_POLL_IN);
    ps.end();
    CHECK(ps.watched() == 3);
    CHECK(ps.wait(0) == 0);
    CHECK(ps.slirp_revents(pairs[2].ours.get()) == 0);
    // Named again: watched again, and the hang-up is there.
    round(ps, pairs, SLIRP_POLL_IN);
    CHECK(ps.watched() == 4);
    CHECK(ps.wait(0) == 1);
    CHECK((ps.slirp_revents(pairs[2].ours.get()) & SLIRP_POLL_HUP) != 0);
}

TEST_CASE("slirp poll set: a closed socket's number, reused, is watched again") {
    PollSet ps;
    Pair a = socket_pair();
    const int fd = a.ours.get();
    ps.begin();
    ps.add(fd, SLIRP_POLL_IN);
    ps.end();
    // libslirp closes it (unregister_poll_fd, then close) and, in the same
    // round, opens a socket that gets the same number (register_poll_fd).
    ps.forget(fd);
    a.ours.reset();
    Pair b = socket_pair(); // the lowest free numbers: fd again
    REQUIRE((b.ours.get() == fd || b.peer.get() == fd));
    const int reused = fd;
    int reused_peer = b.ours.get() == fd ? b.peer.get() : b.ours.get();
    ps.forget(reused);
    ps.begin();
    CHECK(ps.add(reused, SLIRP_POLL_IN) == reused); // same interest as before
    ps.end();
    CHECK(ps.watched() == 1);
    REQUIRE(::write(reused_peer, "y", 1) == 1);
    CHECK(ps.wait(1000) == 1);
    CHECK(ps.slirp_revents(reused) == SLIRP_POLL_IN);
}
