// SPDX-License-Identifier: Apache-2.0

// The commands' control socket (plugin/cmd/common: control_client,
// control_socket) with a stand-in protocol: clients driven through the
// poll loop (a request in pieces, a hopeless one answered at once, each
// client against its own deadline, replies of any size written whole) and
// the socket itself (mode 0600 under any umask, a stale socket replaced
// but a live one and other files refused, SO_PEERCRED, the client cap,
// accept(2) out of fds pausing instead of spinning).
#include <doctest/doctest.h>

#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../unit/fd_limits.hpp"
#include "../unit/socket_rig.hpp"
#include "../unit/temp_dir.hpp"
#include "cmd/common/control_client.hpp"
#include "cmd/common/control_socket.hpp"
#include "cmd/common/errors.hpp"
#include "cmd/common/monotonic.hpp"
#include "cmd/common/unique_fd.hpp"

using cmd::ControlClient;
using cmd::ControlSocket;
using cmd::RequestState;

namespace {

// Requests are lines: whole at '\n', hopeless at '!'; the reply echoes.
class Echo final : public cmd::ControlProtocol {
public:
    const char *tag() const override { return "echo"; }
    std::size_t max_request() const override { return 4096; }
    RequestState state(std::string_view b) const override {
        if (b.find('!') != std::string_view::npos) return RequestState::Invalid;
        if (b.find('\n') != std::string_view::npos) return RequestState::Complete;
        return RequestState::Incomplete;
    }
    std::string answer(std::string_view b) override {
        if (b == "throw\n") throw std::runtime_error("no reply for this one");
        return big.empty() ? "reply to " + std::string(b) : big;
    }
    std::string too_large(std::string_view) override { return "too large"; }
    std::string big; // set: the reply to every request
};

const std::string kHello = "hello\n";

// ---- ControlClient ----

// A client on one end of a pair, the test on the other (peer), answered
// by an Echo.
struct ClientRig {
    Pair pair;
    Echo echo;
    ControlClient c;
    explicit ClientRig(long now_ms) : c(std::move(pair.server), now_ms) {}
    int peer() const { return pair.client.get(); }
};

TEST_CASE("control client: a request in pieces is answered once whole") {
    long t = 1000;
    ClientRig r(t);
    CHECK(r.c.events() == POLLIN);
    send_all(r.peer(), "hel");
    r.c.step(POLLIN, t, r.echo);
    CHECK(r.c.events() == POLLIN);
    CHECK(drain(r.peer()).empty());
    send_all(r.peer(), "lo\n");
    r.c.step(POLLIN, t + 10, r.echo);
    bool eof = false;
    CHECK(drain(r.peer(), &eof) == "reply to " + kHello);
    CHECK(eof);
    CHECK(r.c.done());
}

TEST_CASE("control client: a hopeless request is answered without waiting") {
    ClientRig r(1000);
    send_all(r.peer(), "x!"); // no half-close
    r.c.step(POLLIN, 1000, r.echo);
    CHECK(r.c.done());
    CHECK(drain(r.peer()) == "reply to x!");
}

TEST_CASE("control client: the deadline answers what came") {
    long t = 1000;
    ClientRig r(t);
    r.c.step(0, t + ControlClient::kDeadlineMs - 1, r.echo);
    CHECK(!r.c.done());
    CHECK(r.c.deadline() == t + ControlClient::kDeadlineMs);
    r.c.step(0, t + ControlClient::kDeadlineMs, r.echo);
    CHECK(r.c.done());
    CHECK(drain(r.peer()) == "reply to ");
}

TEST_CASE("control client: too large") {
    ClientRig r(0);
    send_all(r.peer(), std::string(5000, ' '));
    r.c.step(POLLIN, 0, r.echo);
    CHECK(r.c.done());
    CHECK(drain(r.peer()) == "too large");
}

TEST_CASE("control client: an answer that throws closes that client unanswered") {
    ClientRig r(0);
    send_all(r.peer(), "throw\n");
    r.c.step(POLLIN, 0, r.echo);
    CHECK(r.c.done());
    bool eof = false;
    CHECK(drain(r.peer(), &eof).empty());
    CHECK(eof);
}

TEST_CASE("control client: a reply far beyond the socket buffer arrives whole") {
    ClientRig r(0);
    r.echo.big = std::string(3 << 20, 'x');
    send_all(r.peer(), kHello);
    std::string got;
    r.c.step(POLLIN, 0, r.echo);
    CHECK(r.c.events() == POLLOUT); // the first write could not take it all
    for (int i = 0; i < 10000 && !r.c.done(); i++) {
        got += drain(r.peer());
        r.c.step(POLLOUT, 1, r.echo);
    }
    got += drain(r.peer());
    CHECK(r.c.done());
    CHECK(got.size() == r.echo.big.size());
}

TEST_CASE("control client: a client that takes no reply is closed at its deadline") {
    ClientRig r(0);
    r.echo.big = std::string(3 << 20, 'x');
    send_all(r.peer(), kHello);
    r.c.step(POLLIN, 500, r.echo);
    CHECK(r.c.deadline() == 500 + ControlClient::kDeadlineMs);
    r.c.step(POLLOUT, 500 + ControlClient::kDeadlineMs - 1, r.echo);
    CHECK(!r.c.done());
    r.c.step(0, 500 + ControlClient::kDeadlineMs, r.echo);
    CHECK(r.c.done());
}

// ---- ControlSocket ----

// A directory for the socket, its path there and the protocol it speaks.
struct SocketPlace {
    TempDir dir;
    Echo echo;
    std::string path = dir.path() + "/ctl.sock";
};

mode_t mode_of(const std::string &path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return st.st_mode;
}

std::string failure_of(const std::string &path, Echo &echo) {
    try {
        ControlSocket s(path, echo, "test socket");
    } catch (const cmd::Failure &f) {
        CHECK(f.exit_code() == 1);
        return f.what();
    }
    return "";
}

TEST_CASE("control socket: mode 0600 whatever the umask") {
    auto &&[dir, echo, path] = SocketPlace();
    for (mode_t mask : {mode_t(0), mode_t(002), mode_t(022)}) {
        mode_t old = ::umask(mask);
        {
            ControlSocket s(path, echo, "test socket");
            CHECK(::umask(mask) == mask); // restored after bind
            CAPTURE(mask);
            CHECK(S_ISSOCK(mode_of(path)));
            CHECK((mode_of(path) & 07777) == 0600);
        }
        ::umask(old);
        CHECK(!std::filesystem::exists(path)); // removed on destruction
    }
}

TEST_CASE("control socket: a stale socket is replaced, any other file refused") {
    auto &&[dir, echo, path] = SocketPlace();
    { // stale: a socket nobody listens on
        cmd::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    }
    {
        ControlSocket s(path, echo, "test socket");
        cmd::UniqueFd c = connect_to(path);
        send_all(c.get(), kHello);
        std::string reply;
        pump(s, 1000, [&] { return !(reply += drain(c.get())).empty(); });
        CHECK(reply == "reply to " + kHello);
    }
    std::ofstream(path) << "precious\n";
    CHECK(failure_of(path, echo) ==
          "test socket: " + path + " exists and is not a socket (left as it is)");
    std::ifstream in(path);
    std::string content;
    std::getline(in, content);
    CHECK(content == "precious");
    std::filesystem::remove(path);
    std::filesystem::create_symlink(dir.path() + "/elsewhere", path);
    CHECK(!failure_of(path, echo).empty());
    CHECK(std::filesystem::is_symlink(path));
}

TEST_CASE("control socket: a live socket is left to its owner") {
    auto &&[dir, echo, path] = SocketPlace();
    ControlSocket first(path, echo, "test socket");
    CHECK(failure_of(path, echo) ==
          "test socket: " + path +
              " is in use: another process listens on it (left as it is)");
    // The first one still owns the path and answers on it.
    cmd::UniqueFd c = connect_to(path);
    send_all(c.get(), kHello);
    std::string reply;
    pump(first, 1000, [&] { return !(reply += drain(c.get())).empty(); });
    CHECK(reply == "reply to " + kHello);
    // Even with its backlog full: connect(2) then fails with EAGAIN, which
    // is no stale socket either.
    std::vector<cmd::UniqueFd> queued;
    for (size_t i = 0; i < 64; i++) {
        cmd::UniqueFd q(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0));
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        if (::connect(q.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) break;
        queued.push_back(std::move(q));
    }
    CHECK(failure_of(path, echo).find(" is in use: ") != std::string::npos);
}

TEST_CASE("control socket: a path that fits no socket address is refused by name") {
    Echo echo;
    CHECK(failure_of(std::string(200, 'x'), echo) ==
          "test socket: '" + std::string(200, 'x') +
              "' does not fit a socket address (1 to 107 bytes)");
    CHECK(failure_of("", echo) ==
          "test socket: '' does not fit a socket address (1 to 107 bytes)");
}

TEST_CASE("control socket: what replaced the socket is not removed") {
    auto &&[dir, echo, path] = SocketPlace();
    {
        ControlSocket s(path, echo, "test socket");
        std::filesystem::remove(path);
        std::ofstream(path) << "someone else's\n";
    }
    CHECK(std::filesystem::is_regular_file(path));
}

TEST_CASE("control socket: idle clients delay nobody") {
    auto &&[dir, echo, path] = SocketPlace();
    ControlSocket s(path, echo, "test socket");
    std::vector<cmd::UniqueFd> idle;
    for (int i = 0; i < 3; i++) idle.push_back(connect_to(path));
    pump(s, 200, [&] { return s.clients() == 3; });
    REQUIRE(s.clients() == 3);
    cmd::UniqueFd c = connect_to(path);
    send_all(c.get(), kHello);
    long start = cmd::now_ms();
    std::string reply;
    pump(s, 3000, [&] { return !(reply += drain(c.get())).empty(); });
    CHECK(reply == "reply to " + kHello);
    CHECK(cmd::now_ms() - start < 200);
    CHECK(s.clients() == 3);
    // Each idle one at its own deadline, answered with what it sent.
    pump(s, 3000, [&] { return s.clients() == 0; });
    CHECK(s.clients() == 0);
    CHECK(drain(idle[0].get()) == "reply to ");
    CHECK(s.timeout_ms(cmd::now_ms()) == -1);
}

TEST_CASE("control socket: beyond kMaxClients new clients are closed at once") {
    auto &&[dir, echo, path] = SocketPlace();
    ControlSocket s(path, echo, "test socket");
    std::vector<cmd::UniqueFd> idle;
    for (size_t i = 0; i < ControlSocket::kMaxClients; i++) {
        idle.push_back(connect_to(path));
        pump(s, 200, [&] { return s.clients() == i + 1; });
    }
    REQUIRE(s.clients() == ControlSocket::kMaxClients);
    cmd::UniqueFd extra = connect_to(path);
    send_all(extra.get(), kHello);
    bool eof = false;
    std::string got;
    pump(s, 500, [&] {
        got += drain(extra.get(), &eof);
        return eof;
    });
    CHECK(eof);
    CHECK(got.empty());
    CHECK(s.clients() == ControlSocket::kMaxClients);
}

TEST_CASE("control socket: clients of another uid are closed unanswered") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: needs root to connect as another uid");
        return;
    }
    auto &&[dir, echo, path] = SocketPlace();
    ControlSocket s(path, echo, "test socket");
    // Past the mode (0600, root's): the uid check must hold on its own.
    REQUIRE(::chmod(path.c_str(), 0666) == 0);
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    std::fflush(nullptr);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // 0: closed without a byte; 1: answered; 2: setup failed.
        if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(2);
        int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) ::_exit(2);
        ::send(fd, kHello.data(), kHello.size(), MSG_NOSIGNAL);
        ::shutdown(fd, SHUT_WR);
        char b;
        ssize_t n = ::recv(fd, &b, 1, 0);
        ::_exit(n > 0 ? 1 : 0);
    }
    int status = 0;
    pump(s, 3000, [&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(s.clients() == 0);
    // Root (the test) is served.
    cmd::UniqueFd c = connect_to(path);
    send_all(c.get(), kHello);
    std::string reply;
    pump(s, 1000, [&] { return !(reply += drain(c.get())).empty(); });
    CHECK(reply == "reply to " + kHello);
}

TEST_CASE("control socket: out of fds, accepting pauses instead of spinning") {
    auto &&[dir, echo, path] = SocketPlace();
    ControlSocket s(path, echo, "test socket");
    cmd::UniqueFd c = connect_to(path); // queued, not accepted
    send_all(c.get(), kHello);
    std::vector<pollfd> fds;
    long now = cmd::now_ms();
    {
        NofileLimit limit{rlim_t(lowest_free_fd())};
        REQUIRE(s.fill(fds, now) == 1);
        fds[0].revents = POLLIN;
        s.dispatch(fds, now);
        // Not polled for kAcceptPauseMs: poll(2) would return at once.
        fds.clear();
        CHECK(s.fill(fds, now) == 0);
        CHECK(s.timeout_ms(now) == int(ControlSocket::kAcceptPauseMs));
        fds.clear();
        CHECK(s.fill(fds, now + ControlSocket::kAcceptPauseMs - 1) == 0);
    }
    fds.clear();
    CHECK(s.fill(fds, now + ControlSocket::kAcceptPauseMs) == 1);
    std::string reply;
    pump(s, 3000, [&] { return !(reply += drain(c.get())).empty(); });
    CHECK(reply == "reply to " + kHello);
}

} // namespace
