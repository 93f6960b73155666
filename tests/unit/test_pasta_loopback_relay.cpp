// SPDX-License-Identifier: Apache-2.0

// rknp-pasta's -T/-U relay (LoopbackRelay) on this host's loopback, the
// "namespace" being the test's own: TCP bytes both ways, end of file
// each way, a second connection after the first, a refused host port
// (RST), UDP echoes for two clients and their expiry, ::1, a removed
// port, and no allocation on the relay path once a pair runs; NsSockets
// opening its sockets inside another namespace; -t's loopback clients
// handed over as the library does (LoopbackHandoff: the connection
// spliced whole to the namespace's address or loopback, a reset where
// nothing listens, HandoffForwards asking for it on the right forwards).
// Its own executable (alloc_count.hpp replaces operator new).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/sockios.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "alloc_count.hpp"
#include "cmd/rknp-pasta/loopback_handoff.hpp"
#include "common/fd_passing.hpp"
#include "cmd/rknp-pasta/loopback_relay.hpp"
#include "cmd/rknp-pasta/ns_sockets.hpp"

using pasta::LoopbackRelay;
using cmd::UniqueFd;

namespace {

long now_ms() {
    return long(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

// The test's "namespace" is its own: sockets opened here.
LoopbackRelay::Opener here() {
    return [](int family, int type) {
        return UniqueFd(::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    };
}

// A blocking socket bound to the loopback at a free port (TCP listening).
UniqueFd bound(int family, int type, uint16_t &port) {
    UniqueFd fd(::socket(family, type | SOCK_CLOEXEC, 0));
    REQUIRE(fd);
    sockaddr_storage ss;
    socklen_t len = pasta::loopback_sockaddr(family, 0, ss);
    REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr *>(&ss), len) == 0);
    if (type == SOCK_STREAM) REQUIRE(::listen(fd.get(), 8) == 0);
    REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr *>(&ss), &len) == 0);
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in *>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port);
    return fd;
}

// A port nobody uses now (bound, then closed).
uint16_t free_port(int family, int type) {
    uint16_t port = 0;
    bound(family, type, port);
    return port;
}

UniqueFd connect_to(int family, int type, uint16_t port) {
    UniqueFd fd(::socket(family, type | SOCK_CLOEXEC, 0));
    REQUIRE(fd);
    timeval tv{5, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_storage ss;
    socklen_t len = pasta::loopback_sockaddr(family, port, ss);
    REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr *>(&ss), len) == 0);
    return fd;
}

// Runs the relay's poll loop until done() or 10 s; allocs (if given) gets
// what fill and dispatch allocated once `count_from()` is true.
void pump(LoopbackRelay &relay, const std::function<bool()> &done,
          std::size_t *allocs = nullptr, const std::function<bool()> &count_from = {}) {
    std::vector<pollfd> fds;
    fds.reserve(64);
    long deadline = now_ms() + 10000;
    while (!done() && now_ms() < deadline) {
        bool count = allocs && count_from && count_from();
        std::size_t n = 0;
        auto round = [&] {
            fds.clear();
            n = relay.fill(fds, now_ms());
            ::poll(fds.data(), fds.size(), 10);
            relay.dispatch(fds, now_ms());
        };
        if (count)
            *allocs += alloc_count::counted(round);
        else
            round();
        (void)n;
    }
    REQUIRE(done());
}

bool send_all(int fd, const char *p, std::size_t len) {
    while (len) {
        ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0) return false;
        p += n;
        len -= std::size_t(n);
    }
    return true;
}

// Reads until end of file (or an error: -1).
long read_to_eof(int fd, char *buf, std::size_t cap) {
    std::size_t got = 0;
    for (;;) {
        ssize_t n = ::recv(fd, buf + got, cap - got, 0);
        if (n < 0) return -1;
        if (n == 0) return long(got);
        got += std::size_t(n);
        if (got == cap) return long(got);
    }
}

// A host server of type on a free loopback port of family and a relay
// port for it (not yet added), the relay opening its sockets here.
struct Rig {
    Rig(int family, int type, LoopbackRelay::Opener opener = here())
        : family(family), server(bound(family, type, target)),
          port(free_port(family, type)), relay(std::move(opener)) {}
    // Adds the relay's port (where it listens) to the server's.
    void add(int proto, LoopbackRelay::Listen where = LoopbackRelay::Listen::in_ns) {
        std::string error;
        int err = 0;
        REQUIRE_MESSAGE(relay.add(proto, family, port, target, error, err, where), error);
    }
    int family;
    uint16_t target = 0;
    UniqueFd server;
    uint16_t port;
    LoopbackRelay relay;
};

// One TCP connection through the relay on family: the client sends `up`
// bytes and half-closes, the server reads them to end of file, answers
// `down` bytes and closes; both sides compare. With allocs, what the
// relay allocated from the first byte on.
void tcp_round_trip(LoopbackRelay &relay, int server, int family, uint16_t port,
                    std::size_t up, std::size_t down, std::size_t *allocs = nullptr) {
    std::vector<char> out(up), back(down), got_up(up + 1), got_down(down + 1);
    for (std::size_t i = 0; i < up; i++) out[i] = char(i * 7 + 3);
    for (std::size_t i = 0; i < down; i++) back[i] = char(i * 13 + 1);
    std::atomic<bool> finished{false}, flowing{false};
    long server_got = -2, client_got = -2;
    std::thread peers([&] {
        UniqueFd c = connect_to(family, SOCK_STREAM, port);
        UniqueFd s(::accept4(server, nullptr, nullptr, SOCK_CLOEXEC));
        flowing = true;
        if (s && send_all(c.get(), out.data(), up) && ::shutdown(c.get(), SHUT_WR) == 0) {
            server_got = read_to_eof(s.get(), got_up.data(), got_up.size());
            if (send_all(s.get(), back.data(), down)) {
                s.reset();
                client_got = read_to_eof(c.get(), got_down.data(), got_down.size());
            }
        }
        finished = true;
    });
    pump(relay, [&] { return finished.load() && relay.tcp_pairs() == 0; }, allocs,
         [&] { return flowing.load() && relay.tcp_pairs() == 1; });
    peers.join();
    REQUIRE(server_got == long(up));
    REQUIRE(client_got == long(down));
    CHECK(std::memcmp(got_up.data(), out.data(), up) == 0);
    CHECK(std::memcmp(got_down.data(), back.data(), down) == 0);
}

} // namespace

TEST_CASE("loopback relay: TCP bytes both ways, end of file, a second connection") {
    Rig r(AF_INET, SOCK_STREAM);
    r.add(IPPROTO_TCP);
    CHECK(r.relay.listens(IPPROTO_TCP, r.port));
    CHECK_FALSE(r.relay.listens(IPPROTO_UDP, r.port));
    tcp_round_trip(r.relay, r.server.get(), AF_INET, r.port, 1 << 20, 300000);
    // The pair is gone (both ends closed) and the port still serves.
    CHECK(r.relay.tcp_pairs() == 0);
    tcp_round_trip(r.relay, r.server.get(), AF_INET, r.port, 5, 7);
    // The same port twice is refused.
    std::string error;
    int err = 0;
    CHECK_FALSE(r.relay.add(IPPROTO_TCP, AF_INET, r.port, r.target, error, err));
    CHECK(err == EEXIST);
}

TEST_CASE("loopback relay: no allocation while a TCP pair carries bytes") {
    Rig r(AF_INET, SOCK_STREAM);
    r.add(IPPROTO_TCP);
    std::size_t allocs = 0;
    tcp_round_trip(r.relay, r.server.get(), AF_INET, r.port, 4 << 20, 4 << 20, &allocs);
    CHECK(allocs == 0);
}

TEST_CASE("loopback relay: TCP over ::1") {
    UniqueFd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_storage ss;
    socklen_t len = pasta::loopback_sockaddr(AF_INET6, 0, ss);
    if (!probe || ::bind(probe.get(), reinterpret_cast<sockaddr *>(&ss), len) != 0) {
        MESSAGE("skipped: no ::1 here");
        return;
    }
    probe.reset();
    Rig r(AF_INET6, SOCK_STREAM);
    r.add(IPPROTO_TCP);
    tcp_round_trip(r.relay, r.server.get(), AF_INET6, r.port, 70000, 90000);
}

TEST_CASE("loopback relay: listening on the host, connecting in the namespace") {
    // --host-lo-to-ns-lo's direction: the listener is a host socket, the
    // connection out comes from the opener (the namespace's thread).
    int opened = 0;
    Rig r(AF_INET, SOCK_STREAM, [&opened](int family, int type) {
        ++opened;
        return UniqueFd(::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    });
    r.add(IPPROTO_TCP, LoopbackRelay::Listen::on_host);
    CHECK(opened == 0); // the listener is the host's
    CHECK(r.relay.listens(IPPROTO_TCP, r.port, LoopbackRelay::Listen::on_host));
    CHECK_FALSE(r.relay.listens(IPPROTO_TCP, r.port));
    tcp_round_trip(r.relay, r.server.get(), AF_INET, r.port, 100000, 100000);
    CHECK(opened == 1); // one connection, opened through the namespace's opener
    r.relay.remove(IPPROTO_TCP, r.port); // the other side's: nothing
    CHECK(r.relay.listeners() == 1);
    r.relay.remove(IPPROTO_TCP, r.port, LoopbackRelay::Listen::on_host);
    CHECK(r.relay.listeners() == 0);
}

TEST_CASE("loopback relay: a refused host port resets the client") {
    uint16_t target = free_port(AF_INET, SOCK_STREAM); // nobody listens
    uint16_t port = free_port(AF_INET, SOCK_STREAM);
    LoopbackRelay relay(here());
    std::string error;
    int err = 0;
    REQUIRE(relay.add(IPPROTO_TCP, AF_INET, port, target, error, err));
    std::atomic<bool> finished{false};
    long got = -2;
    int read_err = 0;
    std::thread client([&] {
        UniqueFd c = connect_to(AF_INET, SOCK_STREAM, port);
        char b[16];
        got = ::recv(c.get(), b, sizeof b, 0);
        read_err = errno;
        finished = true;
    });
    pump(relay, [&] { return finished.load(); });
    client.join();
    CHECK(got == -1);
    CHECK(read_err == ECONNRESET);
    CHECK(relay.tcp_pairs() == 0);
}

TEST_CASE("loopback relay: a removed port stops listening") {
    Rig r(AF_INET, SOCK_STREAM);
    r.add(IPPROTO_TCP);
    r.relay.remove(IPPROTO_TCP, r.port);
    CHECK(r.relay.listeners() == 0);
    UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_storage ss;
    socklen_t len = pasta::loopback_sockaddr(AF_INET, r.port, ss);
    CHECK(::connect(c.get(), reinterpret_cast<sockaddr *>(&ss), len) == -1);
    CHECK(errno == ECONNREFUSED);
}

TEST_CASE("loopback relay: UDP echoes for two clients, then their expiry") {
    Rig r(AF_INET, SOCK_DGRAM);
    r.add(IPPROTO_UDP);
    LoopbackRelay &relay = r.relay;
    const int server = r.server.get();
    const uint16_t port = r.port;
    std::atomic<bool> finished{false};
    std::string a_got, b_got;
    std::thread peers([&] {
        // The host's server echoes each datagram, reversed.
        std::thread echo([&] {
            char b[2048];
            for (int i = 0; i < 4; i++) {
                sockaddr_storage from;
                socklen_t fl = sizeof from;
                ssize_t n = ::recvfrom(server, b, sizeof b, 0,
                                       reinterpret_cast<sockaddr *>(&from), &fl);
                if (n <= 0) return;
                std::string s(b, std::size_t(n));
                std::string back(s.rbegin(), s.rend());
                ::sendto(server, back.data(), back.size(), 0,
                         reinterpret_cast<sockaddr *>(&from), fl);
            }
        });
        UniqueFd a = connect_to(AF_INET, SOCK_DGRAM, port);
        UniqueFd b = connect_to(AF_INET, SOCK_DGRAM, port);
        char buf[2048];
        for (const char *msg : {"first", "second"}) {
            ::send(a.get(), msg, std::strlen(msg), 0);
            ssize_t n = ::recv(a.get(), buf, sizeof buf, 0);
            if (n > 0) a_got += std::string(buf, std::size_t(n)) + ";";
            ::send(b.get(), "other", 5, 0);
            n = ::recv(b.get(), buf, sizeof buf, 0);
            if (n > 0) b_got += std::string(buf, std::size_t(n)) + ";";
        }
        echo.join();
        finished = true;
    });
    pump(relay, [&] { return finished.load(); });
    peers.join();
    CHECK(a_got == "tsrif;dnoces;");
    CHECK(b_got == "rehto;rehto;");
    CHECK(relay.udp_flows() == 2);
    relay.expire(now_ms() + LoopbackRelay::kUdpIdleMs - 1000);
    CHECK(relay.udp_flows() == 2);
    relay.expire(now_ms() + LoopbackRelay::kUdpIdleMs + 1000);
    CHECK(relay.udp_flows() == 0);
}

namespace {

// What the library does with a forward's loopback client: one message on
// the handoff socket, an rknp_handoff (data_len of it) and the fd.
void hand_over(int library_end, int fd, uint32_t guest_port,
               std::size_t data_len = sizeof(rknp_handoff)) {
    rknp_handoff m{uint32_t(sizeof m), guest_port};
    REQUIRE(rknp::send_with_fd(library_end, &m, data_len, fd, 0) == ssize_t(data_len));
}

// A "forward" on the loopback, as the library's listener: a client
// connects to it and its accepted end is handed over for guest_port (the
// server's), as the library would; the client's fd.
UniqueFd handed_client(pasta::LoopbackHandoff &h, int family, uint16_t guest_port,
                       std::size_t data_len = sizeof(rknp_handoff)) {
    uint16_t port = 0;
    UniqueFd listener = bound(family, SOCK_STREAM, port);
    UniqueFd c = connect_to(family, SOCK_STREAM, port);
    UniqueFd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    REQUIRE(accepted);
    hand_over(h.library_end(), accepted.get(), guest_port, data_len);
    return c; // `accepted` closes here: the handed copy keeps the connection
}

// The poll loop of rknp-pasta's serve() for the handoff and the relay.
void pump_handoff(pasta::LoopbackHandoff &h, LoopbackRelay &relay,
                  const std::function<bool()> &done) {
    std::vector<pollfd> fds;
    long deadline = now_ms() + 10000;
    while (!done() && now_ms() < deadline) {
        fds.clear();
        std::size_t n = h.fill(fds);
        relay.fill(fds, now_ms());
        ::poll(fds.data(), fds.size(), 10);
        relay.dispatch(std::span(fds).subspan(n), now_ms());
        h.dispatch(std::span(fds).subspan(0, n), relay);
    }
    REQUIRE(done());
}

// A forward backend that keeps what it was given.
struct Recorder final : cmd::ForwardBackend {
    rknp_forward last{};
    bool add(const rknp_forward &f, uint32_t &id, std::string &) override {
        last = f;
        id = 1;
        return true;
    }
    bool remove(uint32_t, std::string &) override { return true; }
};

} // namespace

TEST_CASE("loopback handoff: where a loopback client goes in the namespace") {
    sockaddr_storage ss;
    pasta::LoopbackHandoff to_addr("10.0.2.100", false);
    for (int family : {AF_INET, AF_INET6}) {
        CAPTURE(family);
        // The forward's own destination, ::1's client too.
        REQUIRE(to_addr.target(family, 80, ss) == sizeof(sockaddr_in));
        auto &a = reinterpret_cast<sockaddr_in &>(ss);
        CHECK(a.sin_family == AF_INET);
        CHECK(ntohl(a.sin_addr.s_addr) == 0x0a000264);
        CHECK(ntohs(a.sin_port) == 80);
    }
    pasta::LoopbackHandoff to_lo("10.0.2.100", true); // --host-lo-to-ns-lo
    REQUIRE(to_lo.target(AF_INET, 80, ss) == sizeof(sockaddr_in));
    CHECK(ntohl(reinterpret_cast<sockaddr_in &>(ss).sin_addr.s_addr) == INADDR_LOOPBACK);
    REQUIRE(to_lo.target(AF_INET6, 80, ss) == sizeof(sockaddr_in6));
    CHECK(IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6 &>(ss).sin6_addr));
    CHECK_THROWS_WITH(pasta::LoopbackHandoff("fd00::100", false),
                      doctest::Contains("is not IPv4"));
}

TEST_CASE("loopback handoff: a handed client's bytes reach the server, which sees loopback") {
    // The test's namespace is the "namespace": its address 127.0.0.1.
    pasta::LoopbackHandoff h("127.0.0.1", false);
    uint16_t guest_port = 0;
    UniqueFd server = bound(AF_INET, SOCK_STREAM, guest_port);
    LoopbackRelay relay(here());
    UniqueFd c = handed_client(h, AF_INET, guest_port);
    std::atomic<bool> finished{false};
    std::string got;
    sockaddr_in peer{};
    std::thread srv([&] {
        socklen_t len = sizeof peer;
        UniqueFd s(::accept4(server.get(), reinterpret_cast<sockaddr *>(&peer), &len,
                             SOCK_CLOEXEC));
        char b[64];
        long n = s ? read_to_eof(s.get(), b, sizeof b) : -1;
        if (n > 0) got.assign(b, std::size_t(n));
        if (s) send_all(s.get(), "pong", 4);
        finished = true;
    });
    REQUIRE(send_all(c.get(), "ping", 4));
    REQUIRE(::shutdown(c.get(), SHUT_WR) == 0);
    pump_handoff(h, relay, [&] { return finished.load() && relay.tcp_pairs() == 0; });
    srv.join();
    CHECK(got == "ping");
    CHECK(ntohl(peer.sin_addr.s_addr) == INADDR_LOOPBACK);
    char b[8];
    CHECK(read_to_eof(c.get(), b, sizeof b) == 4);
    CHECK(std::string(b, 4) == "pong");
}

TEST_CASE("loopback handoff: nothing listening in the namespace resets the client") {
    pasta::LoopbackHandoff h("127.0.0.1", false);
    uint16_t nobody = free_port(AF_INET, SOCK_STREAM);
    LoopbackRelay relay(here());
    UniqueFd c = handed_client(h, AF_INET, nobody);
    std::atomic<bool> finished{false};
    long got = -2;
    int read_err = 0;
    std::thread client([&] {
        char b[16];
        got = ::recv(c.get(), b, sizeof b, 0);
        read_err = errno;
        finished = true;
    });
    pump_handoff(h, relay, [&] { return finished.load(); });
    client.join();
    CHECK(got == -1);
    CHECK(read_err == ECONNRESET);
    CHECK(relay.tcp_pairs() == 0);
}

TEST_CASE("loopback handoff: a message too short for a guest port resets its client") {
    pasta::LoopbackHandoff h("127.0.0.1", false);
    LoopbackRelay relay(here());
    UniqueFd c = handed_client(h, AF_INET, 80, sizeof(uint32_t));
    std::atomic<bool> finished{false};
    int read_err = 0;
    std::thread client([&] {
        char b[16];
        if (::recv(c.get(), b, sizeof b, 0) < 0) read_err = errno;
        finished = true;
    });
    pump_handoff(h, relay, [&] { return finished.load(); });
    client.join();
    CHECK(read_err == ECONNRESET);
    CHECK(relay.tcp_pairs() == 0);
}

TEST_CASE("loopback handoff: asked for on TCP forwards to the namespace's own address") {
    pasta::LoopbackHandoff h("10.0.2.100", false);
    Recorder inner;
    pasta::HandoffForwards fw(inner, &h);
    uint32_t id = 0;
    std::string error;
    rknp_forward f = RKNP_FORWARD_INIT;
    f.host_port = f.guest_port = 8080;
    REQUIRE(fw.add(f, id, error));
    CHECK(inner.last.flags == RKNP_FORWARD_HANDOFF_LOOPBACK);
    CHECK(inner.last.handoff_fd == h.library_end());
    f.guest_addr = "10.0.2.100"; // rknp-pesto names it
    REQUIRE(fw.add(f, id, error));
    CHECK(inner.last.flags == RKNP_FORWARD_HANDOFF_LOOPBACK);
    f.guest_addr = "10.88.0.2"; // routed behind the namespace: the stack's
    REQUIRE(fw.add(f, id, error));
    CHECK(inner.last.flags == 0);
    f.guest_addr = nullptr;
    f.protocol = RKNP_PROTO_UDP;
    REQUIRE(fw.add(f, id, error));
    CHECK(inner.last.flags == 0);
    pasta::HandoffForwards off(inner, nullptr); // no namespace to enter
    f.protocol = RKNP_PROTO_TCP;
    REQUIRE(off.add(f, id, error));
    CHECK(inner.last.flags == 0);
}

TEST_CASE("ns sockets: opened inside the namespace given, not the caller's") {
    // A namespace held by a thread of the test's until the end.
    std::atomic<int> state{0};
    std::string ns_path;
    std::thread holder([&] {
        if (::unshare(CLONE_NEWNET) != 0) {
            state = -1;
            return;
        }
        ns_path = "/proc/self/task/" + std::to_string(::gettid()) + "/ns/net";
        state = 1;
        while (state == 1) ::usleep(1000);
    });
    while (state == 0) ::usleep(1000);
    if (state < 0) {
        holder.join();
        MESSAGE("skipped: no CAP_SYS_ADMIN for a network namespace");
        return;
    }
    UniqueFd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(ns);
    struct stat want{}, mine{};
    REQUIRE(::fstat(ns.get(), &want) == 0);
    {
        UniqueFd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
        REQUIRE(::fstat(self.get(), &mine) == 0);
    }
    REQUIRE(want.st_ino != mine.st_ino);
    {
        // `entered` runs on the thread, inside the namespace.
        ino_t hook_ns = 0;
        pasta::NsSockets sockets(std::move(ns), [&hook_ns] {
            struct stat st{};
            UniqueFd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
            if (self && ::fstat(self.get(), &st) == 0) hook_ns = st.st_ino;
        });
        CHECK(hook_ns == want.st_ino);
        for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
            UniqueFd s = sockets.open(AF_INET, type);
            REQUIRE(s);
            CHECK((::fcntl(s.get(), F_GETFL) & O_NONBLOCK) != 0);
            CHECK((::fcntl(s.get(), F_GETFD) & FD_CLOEXEC) != 0);
            UniqueFd where(::ioctl(s.get(), SIOCGSKNS));
            REQUIRE(where);
            struct stat got{};
            REQUIRE(::fstat(where.get(), &got) == 0);
            CHECK(got.st_ino == want.st_ino);
        }
        errno = 0;
        CHECK_FALSE(sockets.open(12345, SOCK_STREAM));
        CHECK(errno == EAFNOSUPPORT);
    } // the thread ends with the object
    state = 2;
    holder.join();
}

TEST_CASE("ns sockets: a namespace that cannot be entered is an error") {
    // Not a namespace fd: setns fails, the constructor says so.
    UniqueFd not_ns(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(not_ns);
    CHECK_THROWS_WITH(pasta::NsSockets(std::move(not_ns)),
                      doctest::Contains("cannot enter the namespace for sockets there"));
}

TEST_CASE("ns sockets: a failing `entered` is an error") {
    UniqueFd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    REQUIRE(self);
    bool ran = false;
    auto make = [&] {
        pasta::NsSockets s(std::move(self), [&ran] {
            ran = true;
            throw std::runtime_error("no");
        });
    };
    try {
        make();
        FAIL("no exception");
    } catch (const std::exception &e) {
        if (!ran) {
            // setns into one's own namespace needs CAP_SYS_ADMIN.
            MESSAGE("skipped: " << e.what());
            return;
        }
        CHECK(std::string(e.what()).find("could not drop its capabilities") !=
              std::string::npos);
    }
}
