// SPDX-License-Identifier: Apache-2.0

// libslirp's epoll set kept by difference: rounds of idle sockets hand the
// kernel nothing, a ready socket is reported with libslirp's bits, a
// socket libslirp stops naming is not waited on, a reused fd number is
// watched again; a forward's connection libslirp stops naming stays
// watched for its hangup alone, listed once.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <slirp/libslirp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "common/fd.hpp"
#include "slirp/poll_set.hpp"
#include "tcp_sim_forward.hpp"

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

namespace {

// A loopback TCP connection: ours, the end the set watches (an accepted
// socket, as libslirp's forwards hold), and its client, the peer.
Pair tcp_pair() {
    tcpsim::Listener l;
    REQUIRE(l.fd >= 0);
    uint16_t cport = 0;
    UniqueFd peer(tcpsim::client(l.port, &cport));
    REQUIRE(peer);
    int ours = -1;
    for (int i = 0; i < 100 && ours < 0; ++i) {
        ours = l.try_accept();
        if (ours < 0) ::usleep(1000);
    }
    REQUIRE(ours >= 0);
    return Pair{UniqueFd(ours), std::move(peer)};
}

// Until fd's TCP state is state (the reset or the last ACK has arrived:
// no wakeup of it is still to come); false after a second.
bool await_tcp_state(int fd, uint8_t state) {
    for (int i = 0; i < 1000; ++i) {
        tcp_info ti{};
        socklen_t len = sizeof ti;
        if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == state)
            return true;
        ::usleep(1000);
    }
    return false;
}

// The client resets the connection (SO_LINGER {1, 0}, then close), and
// ours has taken the reset.
void reset_by_peer(Pair &p) {
    const linger lg{1, 0};
    REQUIRE(::setsockopt(p.peer.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    p.peer.reset();
    REQUIRE(await_tcp_state(p.ours.get(), TCP_CLOSE));
}

// The client shuts its sending side and ours reads the EOF: where
// libslirp stops naming a socket.
void eof_from_peer(Pair &p) {
    REQUIRE(::shutdown(p.peer.get(), SHUT_WR) == 0);
    REQUIRE(await_tcp_state(p.ours.get(), TCP_CLOSE_WAIT));
    char c;
    REQUIRE(::recv(p.ours.get(), &c, 1, 0) == 0);
}

// A round in which libslirp names nothing.
void empty_round(PollSet &ps) {
    ps.begin();
    ps.end();
}

// Nothing wakes the wait for ms, and a collect() (the adapter's, when its
// loop woke for another socket) lists no hangup.
bool quiet(PollSet &ps, int ms) {
    return ps.wait(ms) == 0 && ps.collect() == 0 && ps.hangups().empty();
}

// The wait wakes for fd's hangup alone (error: a reset), not libslirp's
// to see; the next round, edge-triggered, it does not.
void check_one_hangup(PollSet &ps, int fd, bool error) {
    CHECK(ps.wait(1000) == 1);
    REQUIRE(ps.hangups().size() == 1);
    CHECK(ps.hangups()[0].fd == fd);
    CHECK(ps.hangups()[0].error == error);
    CHECK(ps.slirp_revents(fd) == 0);
    empty_round(ps);
    CHECK(quiet(ps, 100));
}

// A socket not under watch_hangup: unnamed, it leaves the set, and its
// client's reset then wakes nothing and lists nothing.
void leaves_unreported(PollSet &ps, Pair &p) {
    empty_round(ps);
    CHECK(ps.watched() == 0);
    reset_by_peer(p);
    CHECK(quiet(ps, 100));
}

// A round in which libslirp names fd alone, for input.
void name_alone(PollSet &ps, int fd) {
    ps.begin();
    REQUIRE(ps.add(fd, SLIRP_POLL_IN) == fd);
    ps.end();
}

// A forward's connection as the adapter registers it: forgotten (the
// number may be reused), watched for a hangup, named in one round.
void register_forwarded(PollSet &ps, int fd) {
    ps.forget(fd);
    ps.watch_hangup(fd);
    name_alone(ps, fd);
}

// A forward's connection, registered with a set of its own.
struct Registered {
    Pair p = tcp_pair();
    const int fd = p.ours.get();
    PollSet ps;
    Registered() { register_forwarded(ps, fd); }
};

} // namespace

TEST_CASE_FIXTURE(Registered,
                  "slirp poll set: a parked socket's reset is listed once, with error") {
    CHECK(ps.watched() == 1);
    eof_from_peer(p);
    // libslirp read the EOF and names it no more: out of its interest and
    // of end()'s sweep, still in the kernel's set.
    empty_round(ps);
    CHECK(ps.watched() == 0);
    CHECK(ps.ctl_calls() == 2); // the ADD, then the MOD that parks it
    CHECK(quiet(ps, 0));

    reset_by_peer(p);
    check_one_hangup(ps, fd, true);
    // Edge-triggered: the hangup stays, but no later round wakes for it.
    for (int i = 0; i < 3; ++i) {
        empty_round(ps);
        CHECK(quiet(ps, 0));
    }
    CHECK(ps.ctl_calls() == 2);
}

TEST_CASE_FIXTURE(Registered,
                  "slirp poll set: a parked socket closed both ways is listed without error") {
    eof_from_peer(p);
    empty_round(ps);
    CHECK(ps.watched() == 0);
    CHECK(quiet(ps, 0));
    // libslirp sends its FIN (the guest closed); the client, which had
    // shut its side, closes normally.
    REQUIRE(::shutdown(fd, SHUT_WR) == 0);
    REQUIRE(await_tcp_state(fd, TCP_CLOSE));
    p.peer.reset();
    check_one_hangup(ps, fd, false);
}

TEST_CASE_FIXTURE(Registered,
                  "slirp poll set: a parked socket named again is libslirp's again") {
    empty_round(ps); // parked (libslirp holds it back: its buffer is full)
    CHECK(ps.watched() == 0);
    CHECK(ps.ctl_calls() == 2);
    REQUIRE(::write(p.peer.get(), "x", 1) == 1);
    CHECK(quiet(ps, 0)); // parked: readable wakes nothing

    name_alone(ps, fd);
    CHECK(ps.watched() == 1);
    CHECK(ps.ctl_calls() == 3); // one MOD back to its interest
    CHECK(ps.wait(1000) == 1);
    CHECK(ps.slirp_revents(fd) == SLIRP_POLL_IN);
    CHECK(ps.hangups().empty());
    // Idle rounds that name it: nothing to change.
    name_alone(ps, fd);
    CHECK(ps.ctl_calls() == 3);
    CHECK(ps.watched() == 1);

    // Not named again: out of the sweep, its unread byte wakes nothing.
    empty_round(ps);
    CHECK(ps.watched() == 0);
    CHECK(quiet(ps, 0));
    CHECK(ps.slirp_revents(fd) == 0);
    // Unregistered: out of the kernel's set too.
    const uint64_t before = ps.ctl_calls();
    ps.forget(fd);
    CHECK(ps.ctl_calls() == before + 1);
    CHECK(ps.watched() == 0);
    reset_by_peer(p);
    CHECK(quiet(ps, 100));
}

TEST_CASE("slirp poll set: a forgotten parked socket's number, reused, is not watched") {
    PollSet ps;
    int fd = -1;
    {
        Pair p = tcp_pair();
        fd = p.ours.get();
        register_forwarded(ps, fd);
        empty_round(ps);
        CHECK(ps.watched() == 0);
        CHECK(ps.ctl_calls() == 2);
        // libslirp closes it: unregister_poll_fd, then close.
        ps.forget(fd);
        CHECK(ps.ctl_calls() == 3); // its DEL
        CHECK(ps.watched() == 0);
        reset_by_peer(p);
    }
    // A socket libslirp does not watch for a hangup (its own outbound
    // connection, say) gets the number.
    Pair q = tcp_pair();
    if (q.peer.get() == fd) std::swap(q.ours, q.peer);
    if (q.ours.get() != fd) {
        UniqueFd reused(::dup3(q.ours.get(), fd, O_CLOEXEC));
        REQUIRE(reused.get() == fd);
        q.ours = std::move(reused);
    }
    ps.forget(fd);
    name_alone(ps, fd);
    CHECK(ps.watched() == 1);
    leaves_unreported(ps, q); // not parked
}

TEST_CASE("slirp poll set: a socket not watched for a hangup leaves the set") {
    Pair p = tcp_pair();
    const int fd = p.ours.get();
    PollSet ps;
    name_alone(ps, fd);
    eof_from_peer(p);
    leaves_unreported(ps, p);
    CHECK(ps.ctl_calls() == 2); // the ADD, the DEL
}

TEST_CASE_FIXTURE(Registered,
                  "slirp poll set: a hangup already there when parked is listed once") {
    // The client resets in the round libslirp stops naming the socket.
    eof_from_peer(p);
    reset_by_peer(p);
    empty_round(ps);
    CHECK(ps.watched() == 0);
    check_one_hangup(ps, fd, true); // the MOD that parked it reported it
}
