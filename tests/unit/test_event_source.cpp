// SPDX-License-Identifier: Apache-2.0

// The stack loop's shared epoll set: sources tag their events with their
// owner and get their own references back; a UDP fast path on it reads
// one datagram a flow outside a burst and loses none.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <vector>

#include "datapath/event_source.hpp"
#include "udp_rig.hpp"

using namespace rknp;
using namespace rknp::udptest;

namespace {

std::vector<epoll_event> wait_events(int epfd) {
    std::vector<epoll_event> evs(16);
    const int n = ::epoll_wait(epfd, evs.data(), int(evs.size()), 1000);
    evs.resize(size_t(std::max(n, 0)));
    return evs;
}

std::vector<epoll_event> of_owner(const std::vector<epoll_event> &evs, EventOwner o) {
    std::vector<epoll_event> out;
    for (const epoll_event &e : evs)
        if (EventSource::owner_of(e) == o) out.push_back(e);
    return out;
}

} // namespace

TEST_CASE("event_source: sources on one set get their owner and their own references back") {
    UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    REQUIRE(ep);
    UniqueFd a(::eventfd(1, EFD_CLOEXEC)), b(::eventfd(1, EFD_CLOEXEC));
    {
        const EventSource tcp(ep.get(), EventOwner::Tcp), echo(ep.get(), EventOwner::Echo);
        CHECK_FALSE(tcp.owns_set());
        CHECK(tcp.fd() == ep.get());
        REQUIRE(tcp.add(a.get(), EPOLLIN, EventSource::kRefMask) == 0);
        REQUIRE(echo.add(b.get(), EPOLLIN, 7) == 0);
        const std::vector<epoll_event> evs = wait_events(ep.get());
        REQUIRE(evs.size() == 2);
        const std::vector<epoll_event> t = of_owner(evs, EventOwner::Tcp);
        const std::vector<epoll_event> e = of_owner(evs, EventOwner::Echo);
        REQUIRE(t.size() == 1);
        REQUIRE(e.size() == 1);
        CHECK(EventSource::ref_of(t[0]) == EventSource::kRefMask);
        CHECK(EventSource::ref_of(e[0]) == 7);
        // A change keeps the owner.
        REQUIRE(echo.modify(b.get(), EPOLLIN, 9) == 0);
        const std::vector<epoll_event> again = of_owner(wait_events(ep.get()), EventOwner::Echo);
        REQUIRE(again.size() == 1);
        CHECK(EventSource::ref_of(again[0]) == 9);
    }
    // A share does not close the set when it goes.
    CHECK(::fcntl(ep.get(), F_GETFD) >= 0);
    const EventSource own(-1, EventOwner::Udp);
    CHECK(own.owns_set());
    CHECK(own.fd() >= 0);
    CHECK(own.fd() != ep.get());
}

TEST_CASE("udp_fastpath on a shared set: one read a flow outside a burst, nothing lost") {
    UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    REQUIRE(ep);
    // Another source's event in the same set stays for its owner.
    UniqueFd other(::eventfd(1, EFD_CLOEXEC));
    REQUIRE(EventSource(ep.get(), EventOwner::Tcp).add(other.get(), EPOLLIN, 1) == 0);
    Collector guest;
    udp::FastPathConfig c = Rig::config(65520, false); // no UDP_GRO: one datagram a read
    c.shared_epoll_fd = ep.get();
    udp::FastPath path(c, guest);
    CHECK(path.epoll_fd() == ep.get());
    HostSocket srv(false);
    REQUIRE(path.guest_frame(guest_datagram(false, kGuest4, kGateway4, 40100, srv.port,
                                            pattern(10, 1))) == Verdict::Consumed);
    path.flush();
    sockaddr_storage from{};
    REQUIRE(srv.recv(&from));
    std::vector<Bytes> answers;
    for (int i = 0; i < 5; ++i) answers.push_back(pattern(100 + size_t(i), uint8_t(i)));
    for (const Bytes &b : answers) srv.reply(from, b);

    // Not in a burst: one datagram per wake-up; the set says the rest wait.
    for (size_t round = 1; round <= 2; ++round) {
        const std::vector<epoll_event> evs = wait_events(ep.get());
        CHECK(of_owner(evs, EventOwner::Tcp).size() == 1);
        const std::vector<epoll_event> udp = of_owner(evs, EventOwner::Udp);
        REQUIRE(udp.size() == 1);
        path.handle_events(udp, false);
        CHECK(guest.out.size() == round);
    }
    // A burst: the rest in one batch.
    path.handle_events(of_owner(wait_events(ep.get()), EventOwner::Udp), true);
    REQUIRE(guest.out.size() == answers.size());
    CHECK(of_owner(wait_events(ep.get()), EventOwner::Udp).empty());
    for (size_t i = 0; i < answers.size(); ++i) {
        CAPTURE(i);
        const Bytes f = completed(guest.out[i]);
        CHECK(Bytes(f.begin() + 14 + 20 + 8, f.end()) == answers[i]);
    }
}
