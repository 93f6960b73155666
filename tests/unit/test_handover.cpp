// SPDX-License-Identifier: Apache-2.0

// The hand-over between peers: the right child reaches the tap check,
// everyone else is refused (and told so, when it may know), timeouts and
// silent peers do not hold up the loop. Messages: test_handover_messages;
// the listening socket: test_handover_socket.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "handover/client.hpp"
#include "handover/messages.hpp"
#include "handover/server.hpp"
#include "handover/unix_socket.hpp"
#include "temp_dir.hpp"

using namespace rknp;
using namespace rknp::handover;

namespace {

Tokens the_tokens = random_tokens();

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Drives a Server as the stack loop does (poll, receive, expire, accept)
// until one connection has been served or refused (its error returned,
// "" for adopted) or until limit_ms.
struct ServerDriver {
    Server &server;
    std::vector<std::string> refusals;
    std::vector<rknp_status> codes;
    bool adopted = false;

    // Runs until `outcomes` connections were served or refused.
    void run(size_t outcomes, int limit_ms = 10000) {
        auto end = now_ms() + limit_ms;
        while (refusals.size() + (adopted ? 1 : 0) < outcomes && now_ms() < end &&
               server.listening()) {
            std::vector<pollfd> p{{server.listen_fd(), POLLIN, 0}};
            for (size_t i = 0; i < server.pending(); ++i)
                p.push_back({server.pending_fd(i), POLLIN, 0});
            int64_t next = server.ms_until_deadline(now_ms());
            ::poll(p.data(), p.size(), next < 0 ? 100 : int(next));
            for (size_t i = 1; i < p.size(); ++i)
                if (p[i].revents != 0) guard([&] {
                        server.receive(p[i].fd,
                                       [&](Accepted &&) { adopted = true; });
                    });
            for (auto &why : server.expire(now_ms())) {
                refusals.push_back(why);
                codes.push_back(RKNP_ERR_TIMEOUT);
            }
            if (p[0].revents & POLLIN) guard([&] { server.accept_one(now_ms()); });
        }
    }
    template <class F> void guard(F f) {
        try {
            f();
        } catch (const Error &e) {
            refusals.push_back(e.what());
            codes.push_back(e.code());
        }
    }
};

// Runs a Server on a thread and send_tap here; returns both outcomes.
struct Exchange {
    std::string server_error;
    rknp_status server_code = RKNP_OK;
    std::string client_error;
    rknp_status client_code = RKNP_OK;
};

// accept_delay_ms > 0 lets the client connect before the accept.
Exchange exchange(pid_t expected_pid, int fd, const std::string &ifname,
                  const Tokens &client_tokens = the_tokens,
                  int accept_delay_ms = 0) {
    TempDir dir;
    std::string path = dir.path() + "/rknp.sock";
    Server server(listen_socket(dir.path(), "rknp.sock"), expected_pid,
                  ::geteuid(), the_tokens, 2000);
    Exchange ex;
    auto done = std::async(std::launch::async, [&] {
        pollfd p{server.listen_fd(), POLLIN, 0};
        ::poll(&p, 1, 5000);
        std::this_thread::sleep_for(std::chrono::milliseconds(accept_delay_ms));
        ServerDriver d{server, {}, {}, false};
        d.run(1);
        if (!d.refusals.empty()) {
            ex.server_error = d.refusals[0];
            ex.server_code = d.codes[0];
        }
    });
    try {
        send_tap(path, fd, ifname, client_tokens, 5000);
    } catch (const Error &e) {
        ex.client_error = e.what();
        ex.client_code = e.code();
    }
    done.get();
    return ex;
}

// What a peer sent on conn: bytes and the number of fds, without blocking.
struct Received {
    ssize_t bytes = -1;
    int fds = 0;
};
Received drain(int conn) {
    Received r;
    uint8_t buf[256];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{buf, sizeof buf};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    r.bytes = ::recvmsg(conn, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r.bytes < 0) return r;
    for (cmsghdr *c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_type == SCM_RIGHTS) {
            int n = int((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < n; ++i) {
                int fd;
                std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                ::close(fd);
            }
            r.fds += n;
        }
    return r;
}

// A socket at path that is not the parent: it accepts and, if greeting is
// set, greets with it.
struct Impostor {
    TempDir dir;
    std::string path = dir.path() + "/rknp.sock";
    UniqueFd listener{::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)};
    Impostor(int backlog = 8) {
        sockaddr_un a = socket_address(path);
        REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
        REQUIRE(::listen(listener.get(), backlog) == 0);
    }
};

} // namespace

TEST_CASE("the right child with the right tokens reaches the tap check") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    auto ex = exchange(::getpid(), fd.get(), "tap0");
    CHECK(ex.server_code == RKNP_ERR_PROTOCOL);
    CHECK(ex.server_error == "hand-over: the fd is not a tun/tap device");
    CHECK(ex.client_code == RKNP_ERR_PROTOCOL);
    CHECK(ex.client_error ==
          "parent refused the tap: hand-over: the fd is not a tun/tap device");
}

TEST_CASE("a peer without the child token is refused and told so") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    Tokens wrong = the_tokens;
    wrong.child[3] ^= 1;
    auto ex = exchange(::getpid(), fd.get(), "tap0", wrong);
    CHECK(ex.server_code == RKNP_ERR_PERMISSION);
    CHECK(ex.server_error ==
          "hand-over refused: the peer did not prove it is the child (wrong token)");
    CHECK(ex.client_code == RKNP_ERR_PERMISSION);
}

TEST_CASE("the tap never reaches a socket that cannot prove it is the parent") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    SUBCASE("one that greets with another token") {
        Impostor imp;
        std::promise<Received> got;
        std::thread t([&] {
            UniqueFd conn(::accept4(imp.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
            Greeting g = encode_greeting(random_token());
            (void)::send(conn.get(), g.data(), g.size(), MSG_NOSIGNAL);
            pollfd p{conn.get(), POLLIN, 0};
            ::poll(&p, 1, 5000); // the child's next message, or its hang-up
            got.set_value(drain(conn.get()));
        });
        CHECK_THROWS_WITH_AS(send_tap(imp.path, fd.get(), "tap0", the_tokens, 5000),
                             doctest::Contains("wrong token); the tap was not sent"),
                             Error);
        Received r = got.get_future().get();
        t.join();
        CHECK(r.bytes == 0); // hang-up: neither hello nor fd
        CHECK(r.fds == 0);
    }
    SUBCASE("one that says nothing") {
        Impostor imp;
        CHECK_THROWS_WITH_AS(send_tap(imp.path, fd.get(), "tap0", the_tokens, 200),
                             "hand-over: timed out waiting for the parent's greeting",
                             Error);
        UniqueFd conn(::accept4(imp.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        Received r = drain(conn.get());
        CHECK(r.bytes <= 0);
        CHECK(r.fds == 0);
    }
    SUBCASE("one that acknowledges before any greeting") {
        Impostor imp;
        std::thread t([&] {
            UniqueFd conn(::accept4(imp.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
            std::string ok = encode_reply(RKNP_OK, "");
            (void)::send(conn.get(), ok.data(), ok.size(), MSG_NOSIGNAL);
            pollfd p{conn.get(), POLLIN, 0};
            ::poll(&p, 1, 5000);
            CHECK(drain(conn.get()).fds == 0);
        });
        CHECK_THROWS_WITH_AS(send_tap(imp.path, fd.get(), "tap0", the_tokens, 5000),
                             "hand-over: acknowledged before the greeting", Error);
        t.join();
    }
}

TEST_CASE("connecting to a listener that never accepts times out") {
    // Backlog 0 takes one connection; the next connect would wait for an
    // accept that never comes.
    Impostor imp(0);
    UniqueFd first(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a = socket_address(imp.path);
    REQUIRE(::connect(first.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    auto result = std::async(std::launch::async, [&]() -> std::string {
        try {
            send_tap(imp.path, fd.get(), "tap0", the_tokens, 200);
            return "returned";
        } catch (const Error &e) {
            return e.what();
        }
    });
    // Bounded wait: on failure, closing the listener releases the connect.
    bool finished = result.wait_for(std::chrono::seconds(20)) ==
                    std::future_status::ready;
    if (!finished) imp.listener.reset();
    CHECK(finished);
    CHECK(result.get() == "hand-over: timed out connecting to " + imp.path +
                              " (nobody accepts)");
}

TEST_CASE("a silent peer does not hold up the child; it is refused after its deadline") {
    TempDir dir;
    std::string path = dir.path() + "/rknp.sock";
    // Both our connections pass the credential check.
    Server server(listen_socket(dir.path(), "rknp.sock"), ::getpid(),
                  ::geteuid(), the_tokens, 1000);
    ServerDriver d{server, {}, {}, false};
    UniqueFd silent(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a = socket_address(path);
    REQUIRE(::connect(silent.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    auto drive = std::async(std::launch::async, [&] { d.run(2); });
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    std::string child_error;
    try {
        send_tap(path, fd.get(), "tap0", the_tokens, 5000);
    } catch (const Error &e) {
        child_error = e.what();
    }
    // The child was answered while the silent peer still waited: nothing
    // but the greeting is queued for it yet.
    CHECK(child_error ==
          "parent refused the tap: hand-over: the fd is not a tun/tap device");
    uint8_t buf[kReplyMax];
    CHECK(::recv(silent.get(), buf, sizeof buf, MSG_DONTWAIT) == ssize_t(kGreetingSize));
    CHECK(::recv(silent.get(), buf, sizeof buf, MSG_DONTWAIT) < 0);
    drive.get();
    REQUIRE(d.refusals.size() == 2);
    CHECK(d.refusals[0] == "hand-over: the fd is not a tun/tap device");
    CHECK(d.refusals[1] == "hand-over: timed out waiting for the child's hello");
    pollfd p{silent.get(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    ssize_t n = ::recv(silent.get(), buf, sizeof buf, 0);
    REQUIRE(n > 0);
    CHECK(decode_reply({buf, size_t(n)}).status == RKNP_ERR_TIMEOUT);
}

TEST_CASE("a peer that is not the child is refused before it learns the parent token") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    auto ex = exchange(::getpid() + 100000, fd.get(), "tap0");
    CHECK(ex.server_code == RKNP_ERR_PERMISSION);
    CHECK(ex.server_error.find("hand-over refused: peer pid") !=
          std::string::npos);
    CHECK(ex.client_code == RKNP_ERR_PERMISSION);
    CHECK(ex.client_error.find("parent refused the tap: hand-over refused: peer pid") !=
          std::string::npos);
}

TEST_CASE("a refused peer that connected before the accept still reads the refusal") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    for (int i = 0; i < 5; ++i) {
        auto ex = exchange(::getpid() + 100000, fd.get(), "tap0", the_tokens, 50);
        CHECK(ex.server_code == RKNP_ERR_PERMISSION);
        CHECK(ex.client_code == RKNP_ERR_PERMISSION);
        CHECK(ex.client_error.find("hand-over refused: peer pid") !=
              std::string::npos);
    }
}

TEST_CASE("send_tap to a socket nobody listens on fails with the path") {
    UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    TempDir dir;
    CHECK_THROWS_WITH_AS(send_tap(dir.path() + "/none.sock", fd.get(), "tap0",
                                  the_tokens, 100),
                         doctest::Contains("none.sock"), Error);
}
